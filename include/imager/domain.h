/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The VM definition: a libvirt domain XML tuned for the guest on the disks.
 *
 * dom_decide() turns what is known of the guest (the conversion's
 * inspection), of the host and of the user's wishes into choices; each
 * choice carries the reason it was made.  dom_xml() writes the domain XML
 * from those choices with libxml2's writer (never by string pasting, so
 * every name and path is escaped).  Both are pure: no libvirt, no I/O;
 * dom_xml_save() writes the XML to a file.
 *
 * Choices, when the user did not make them:
 *   machine   q35 for modern guests; pc for old ones (Linux kernel before
 *             3.0 or RHEL/CentOS before 6; Windows before 7/2008 R2).
 *   bus       virtio-blk when the guest can boot on it (a converted Linux:
 *             its kernel has virtio_blk; a Windows with viostor), else
 *             sata (ide for Windows before Vista: no AHCI driver).
 *   nic       virtio (queues = vCPUs) when the guest has virtio_net, else
 *             e1000.
 *   firmware  uefi when the guest boots UEFI (an EFI system partition and
 *             no BIOS boot partition, or the source machine booted UEFI),
 *             else bios; UEFI is libvirt's firmware autoselection
 *             (<os firmware='efi'>: the host's OVMF), secure boot off.
 *   cpu       host-model on KVM; on TCG (type qemu) "maximum", the most an
 *             emulated CPU offers (host-model names host features TCG may
 *             lack).  host-passthrough only when asked: warned, since a
 *             guest then cannot live-migrate to a host with another CPU.
 *   disk      cache='none' io='native' discard='unmap' detect_zeroes='unmap',
 *             an iothread for virtio-blk (and for the virtio-scsi
 *             controller); io='io_uring' when asked, or with io "auto" when
 *             the host has it (libvirt >= 6.3, qemu >= 5.0, the kernel
 *             allows io_uring).
 *   always    serial console (pty; logged to a file when asked), guest
 *             agent channel, virtio RNG, memory balloon, ACPI and APIC,
 *             VNC on 127.0.0.1; Windows: Hyper-V enlightenments and a
 *             localtime clock with the hypervclock timer.
 */
#ifndef IMAGER_DOMAIN_H
#define IMAGER_DOMAIN_H
/* The virtualisation (libvirt) layer's header: only that layer and those above it include it
 * (the Makefile sets IMAGER_LAYER for each layer's sources). */
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 3
#error "a lower layer may not use the virtualisation (libvirt) layer"
#endif


#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#include "imager/convert.h"
#include "imager/error.h"

/* What is known of the guest; os_type "" means nothing is known. */
struct dom_guest {
	char os_type[16];             /* "linux", "windows", "" */
	char distro[32];              /* "debian", "rhel", "windows", ... */
	char product[128];
	int major, minor;             /* distribution (Linux) or NT (Windows) version */
	char kernel[128];             /* default kernel version (Linux), "" unknown */
	char firmware[8];             /* "bios", "uefi", "" unknown */
	bool virtio_blk;              /* can boot from a virtio-blk disk */
	bool virtio_scsi;             /* can boot from a virtio-scsi disk */
	bool virtio_net;              /* has a virtio NIC driver */
};

/* What is known of the host that will run the guest. */
struct dom_host {
	bool kvm;                     /* guests run with KVM there */
	bool io_uring;                /* libvirt, qemu and kernel have io_uring */
	char why[256];                /* how kvm was decided: one line for people */
};

enum dom_source { DOM_SRC_FILE = 0, DOM_SRC_BLOCK, DOM_SRC_VOLUME };

struct dom_disk {
	enum dom_source source;
	const char *path;             /* FILE, BLOCK: absolute path */
	const char *pool, *volume;    /* VOLUME */
	const char *format;           /* "raw", "qcow2" */
	const char *backing_nbd;      /* FILE, qcow2: an overlay whose backing is the raw NBD
				       * export on this Unix socket (p2v --instant); the
				       * disk's errors then pause the VM (error_policy and
				       * rerror_policy "stop") rather than reach the guest */
};

/* The user's wishes.  NULL / 0 fields are decided (see above). */
struct dom_opts {
	const char *name;             /* required */
	uint64_t memory_mib;          /* 0: 2048 */
	unsigned vcpus;               /* 0: 2 */
	const char *type;             /* "kvm", "qemu"; NULL: from dom_host */
	const char *cpu;              /* "host-model", "host-passthrough", "maximum", or a model name */
	const char *machine;          /* "q35", "pc" */
	const char *bus;              /* "virtio-blk", "virtio-scsi", "sata", "ide" */
	const char *nic;              /* "virtio", "e1000" */
	const char *mac;              /* "52:54:00:..."; NULL: libvirt picks */
	const char *firmware;         /* "bios", "uefi" */
	const char *io;               /* "native", "io_uring", "threads", "auto"; NULL: native */
	const char *net;              /* "network:NAME", "bridge:NAME", "user"; NULL: network:default */
	const char *serial_log;       /* a file on the host that logs the serial console; NULL: none */
	const char *description;      /* NULL: none */
	const struct dom_disk *disks;
	size_t ndisks;                /* >= 1 */
};

/* The choices, each with its reason. */
struct dom_choice {
	char value[64];
	char why[160];
};

struct dom_plan {
	struct dom_choice type, machine, bus, nic, firmware, cpu, io, clock;
	uint64_t memory_mib;
	unsigned vcpus;
	bool windows;
	char warnings[4][256];        /* "" when unused */
};

/*
 * Check the options (names and values) and decide.  Returns 0, or -EINVAL
 * (IM_EXIT_USAGE) for a bad option: unknown value, a bad MAC or name, a
 * virtio bus or NIC that the known guest lacks is accepted with a warning.
 */
int dom_decide(const struct dom_opts *o, const struct dom_guest *g, const struct dom_host *h,
	       struct dom_plan *plan, struct im_err *err);

/*
 * Write the domain XML for the plan; *xml is malloc'd, NUL-terminated.
 * Returns 0, or -ENOMEM (IM_EXIT_INTERNAL) when the writer fails.
 */
int dom_xml(const struct dom_opts *o, const struct dom_guest *g, const struct dom_plan *plan,
	    char **xml, struct im_err *err);

/*
 * Write xml (len bytes) to path through a temporary name and rename(): a
 * reader sees the old file or the whole new one.  An existing file is
 * refused (-EEXIST, IM_EXIT_TARGET) unless force.  Returns 0 or -errno
 * (IM_EXIT_IO; IM_EXIT_USAGE for a name too long).
 */
int dom_xml_save(const char *path, const char *xml, size_t len, bool force, struct im_err *err);

/* ---- facts (host.c) ---- */

/*
 * What the host behind conn can do; conn NULL means this machine without a
 * daemon.  kvm: the hypervisor offers KVM (domain capabilities) and, when the
 * host is this machine, guest.h's probe found that KVM really runs a guest
 * (IMAGER_ACCEL overrides, as there).  io_uring: libvirt >= 6.3 and
 * qemu >= 5.0 (asked of conn; without conn, of the library and qemu-system
 * is not asked) and, on this machine, io_uring_setup() works.  h->why gets
 * one line for people.  ask_kvm false skips the KVM question (the caller chose
 * the domain type; the probe can take seconds).  Never fails: what cannot be found out counts as absent.
 */
void dom_host_detect(virConnectPtr conn, bool local, bool ask_kvm, struct dom_host *h);

/* A physical machine's facts, for P2V: the machine imager runs on (live
 * media), or one described by `imager list --json`'s "machine" object. */
#define DOM_MACHINE_MACS 8
struct dom_machine {
	uint64_t memory;              /* bytes: the firmware's map of System RAM (else MemTotal) */
	uint64_t memory_mib;          /* that, rounded up to 256 MiB */
	unsigned vcpus;               /* online CPUs */
	char mac[18];                 /* first physical NIC's address (sysfs, as now set); "" none */
	char macs[DOM_MACHINE_MACS][18]; /* every physical NIC's, by interface name */
	unsigned nmacs;
	bool uefi;                    /* booted through UEFI (/sys/firmware/efi) */
	char vendor[128], model[128], serial[128];   /* DMI ("" unknown) */
};
void dom_machine_local(struct dom_machine *m);
/* Read the facts of another machine from a file holding `imager list
 * --json`'s output (its "machine" object) or that object alone.  Every
 * field is checked (memory 64 MiB to 64 TiB, 1 to 4096 CPUs, MACs,
 * firmware "bios" or "uefi", printable strings); a file that is not such
 * facts is -EINVAL (IM_EXIT_SOURCE), one that cannot be read -errno. */
int dom_machine_from_file(const char *path, struct dom_machine *m, struct im_err *err);
/* A virtual machine's facts from its description (an OVF, a .vmx:
 * vmsource.h, already checked there): memory and vCPUs as said, the first
 * NIC's MAC and every NIC's, UEFI when its firmware is EFI. */
struct vm_desc;
void dom_machine_from_vm(const struct vm_desc *vm, struct dom_machine *m);
/* P2V of a physical machine: its memory, vCPUs and MAC go into o where o
 * leaves them unset (o->mac then points at mac, which must live as long
 * as o), and UEFI into g when it booted UEFI.  m NULL: this machine (live
 * media, dom_machine_local). */
void dom_machine_apply(struct dom_opts *o, struct dom_guest *g, char mac[18],
		       const struct dom_machine *m);

/*
 * Guest facts from a conversion report.  convertible: im_convert() accepted
 * the guest (converted it, or would in a dry run), so it boots on virtio
 * afterwards; a refused guest (Windows until drivers are injected, a Linux
 * without a virtio kernel) gets SATA and e1000.
 */
void dom_guest_from_report(const struct conv_report *r, bool convertible, struct dom_guest *g);

/*
 * Guest facts from a conversion report saved by `imager convert --json` (or
 * restore/clone --convert --json, which carry it under "convert").  Every
 * field is checked; a file that is not such a report is -EINVAL
 * (IM_EXIT_SOURCE).
 */
int dom_guest_from_file(const char *path, struct dom_guest *g, struct im_err *err);

/* ---- the `imager define` job (define.c) ---- */

struct define_opts {
	struct dom_opts dom;          /* the wishes, with the disks filled in */
	const char *inspection;       /* a conversion report file, or NULL */
	bool no_inspect;              /* without a report: the guest stays unknown */
	bool machine;                 /* the disks are this machine's (live media) */
	const char *uri;              /* the host; NULL: this machine, no daemon */
	const char *output;           /* write the XML there; NULL: only in the report */
	bool force;                   /* replace an existing output file */
	/* told just before a read-only inspection starts (it takes a while) */
	void (*on_inspect)(void *opaque);
	void *opaque;
};

struct define_report {
	struct dom_guest guest;
	bool inspected;               /* a read-only inspection ran */
	/* when it ran and found no guest (unknown_guest) or a guest that cannot
	 * boot on virtio, why: for people */
	char inspect_note[1024];
	bool unknown_guest;
	char host_why[256];           /* what the host offers, one line */
	struct dom_plan plan;
	bool planned;
	char *xml;                    /* malloc'd; written to output when given */
	char mac[18];                 /* the MAC taken from this machine (live media) */
};

/*
 * Define: the host first (an unreachable one is found before a long
 * inspection), then the guest: from the report file, else from a read-only
 * inspection of the disks (the conversion's dry run: a guest it would
 * convert boots on virtio afterwards; no guest found or a refused one is not
 * an error, inspect_note says why), then the plan and its XML, written to
 * output atomically.  Nothing is printed.  Returns 0, or -errno with err set:
 * host_open's errors, dom_guest_from_file's, the inspection's hard failures
 * (the appliance cannot start: IM_EXIT_APPLIANCE), dom_decide's (IM_EXIT_USAGE),
 * dom_xml_save's.  r->inspect_note is kept after a failure.
 * define_report_free() releases r.
 */
int im_define(const struct define_opts *o, struct define_report *r, struct im_err *err);
void define_report_free(struct define_report *r);

/* Valid libvirt domain name: 1..64 of [A-Za-z0-9_.+-], not starting with '.'
 * or '-'.  (libvirt allows more; imager keeps names safe as file names.) */
bool dom_name_ok(const char *name);
/* "52:54:00:ab:cd:ef": six hex pairs, unicast (low bit of the first octet 0). */
bool dom_mac_ok(const char *mac);

#endif
