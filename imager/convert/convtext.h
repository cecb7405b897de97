/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Pure text and byte work for guest conversion, kept apart from libguestfs
 * so that the unit tests can prove it without an appliance:
 *   - a growable byte buffer;
 *   - Linux disk names (/dev/sda1, /dev/nvme0n1p2, /dev/xvdb, /dev/hda3,
 *     /dev/cciss/c0d0p1, /dev/mmcblk0p1) parsed to (disk, partition) and
 *     renamed for virtio;
 *   - device-name remapping inside configuration text;
 *   - the dependency closure of kernel modules from modules.dep;
 *   - GRUB 2 menu entries and the default entry;
 *   - newc cpio archives (what the kernel unpacks as an initramfs);
 *   - what the quick inspection reads: os-release, fstab, debian_version,
 *     an ELF header's architecture.
 * Every input is treated as hostile: any length, any bytes, no NUL
 * assumed inside; nothing here reads past what it was given.
 * Functions return 0 or a negative errno (-ENOMEM, -EINVAL).
 */
#ifndef IMAGER_CONVTEXT_H
#define IMAGER_CONVTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- byte buffer ---- */
struct sbuf {
	char *p;        /* always NUL-terminated when non-NULL */
	size_t len, cap;
	bool oom;       /* an append failed: the content is incomplete */
};
void sbuf_add(struct sbuf *b, const void *data, size_t len);
void sbuf_adds(struct sbuf *b, const char *s);
void sbuf_addf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_free(struct sbuf *b);

/* ---- disk names ---- */
enum devkind { DEV_SD = 1, DEV_HD, DEV_XVD, DEV_VD, DEV_NVME, DEV_CCISS, DEV_MMC };
struct devref {
	enum devkind kind;
	unsigned disk;        /* 0-based: sda/hda/xvda/vda 0, nvme0n1 0, cciss c0d0 0 */
	unsigned part;        /* 1-based partition, 0 for the whole disk */
	size_t len;           /* characters of the text the name took */
};
/* Parse a name at s[0..len) that starts with "/dev/".  The name ends at the
 * first character that cannot continue it; a name followed directly by a
 * letter, digit, '_' or '-' is not taken (it is part of something else).
 * Returns true and fills *out when a disk name was found. */
bool devname_parse(const char *s, size_t len, struct devref *out);

enum conv_bus { CONV_BUS_VIRTIO_BLK = 1, CONV_BUS_VIRTIO_SCSI = 2 };
/* The name the same disk/partition has under bus: /dev/vdb2, /dev/sdb2.
 * Returns 0, or -ERANGE when the disk number has no name (more than 26*27). */
int devname_virtio(unsigned disk, unsigned part, enum conv_bus bus, char *out, size_t outlen);

/* One replacement made by remap_text(). */
struct remap_change {
	unsigned line;        /* 1-based */
	char from[64], to[96];
};
/* Look up a filesystem UUID for a partition: copy it to uuid (NUL
 * terminated) and return true, or return false when there is none. */
typedef bool (*uuid_lookup_fn)(void *opaque, unsigned disk, unsigned part, char *uuid,
			       size_t uuidlen);

/*
 * Rewrite every old-platform disk name in text[0..len) (sd, hd, xvd, nvme,
 * cciss, mmcblk; vd names are already right and are left alone):
 *   - a partition whose filesystem has a UUID (lookup, may be NULL) becomes
 *     "UUID=<uuid>" when the name stands alone as a value: at the start of a
 *     line, or after a blank, '=', '"' or '\'' (fstab's first field, root=,
 *     resume=, RESUME=), not in a comment line (one starting with '#');
 *   - everything else gets its virtio name under bus (sdX stays sdX under
 *     virtio-scsi, nvme0n1p1 becomes sda1 there).
 * out receives the new text (always, even when nothing changed);
 * changes/nchanges (may be NULL) the replacements, malloc'ed.
 */
int remap_text(const char *text, size_t len, enum conv_bus bus, uuid_lookup_fn lookup,
	       void *opaque, struct sbuf *out, struct remap_change **changes, size_t *nchanges);

/*
 * Kernel command lines (grub.cfg, /etc/default/grub, BLS entries,
 * /etc/kernel/cmdline...): a console on Xen's paravirtual console,
 * console=hvcN or console=xvcN (a value on its own: after the start of a
 * line, a blank, '"' or '\''), becomes console=ttySN, the serial port a
 * KVM guest has.  out receives the new text (always); changes/nchanges
 * (may be NULL) the replacements, malloc'ed.  0 or -ENOMEM.
 */
int console_remap(const char *text, size_t len, struct sbuf *out, struct remap_change **changes,
		  size_t *nchanges);

/*
 * GRUB's environment block (grubenv, where RHEL 8 keeps kernelopts=) is a
 * file of a fixed size: "# GRUB Environment Block\n", name=value lines, then
 * '#' up to that size (1024 bytes).  After remap_text changed its lines, b
 * is brought back to size bytes by taking '#' off its padding or adding
 * them.  0, or -ENOSPC when the lines no longer fit (b unchanged), -EINVAL
 * when b does not end in padding (not an environment block).
 */
int grubenv_refit(struct sbuf *b, size_t size);

/* ---- kernel modules ---- */
/* Is name (virtio_blk, virtio-blk) the module of path
 * ("kernel/drivers/block/virtio_blk.ko", also .ko.xz/.ko.zst/.ko.gz)? */
bool module_path_is(const char *path, size_t len, const char *name);

/*
 * From modules.dep text, the files needed to load names[0..n-1]: each
 * module after the ones it depends on, each once, as paths relative to
 * /lib/modules/VER.  A name found in builtin (modules.builtin text, may be
 * NULL) needs nothing and is counted in *nbuiltin.  A name found in neither
 * is returned in *missing (the first one; NULL when all were found).
 * *paths is a malloc'ed array of malloc'ed strings (free with
 * strv_free()).  Returns 0 or -ENOMEM.
 */
int modules_closure(const char *dep, size_t deplen, const char *builtin, size_t builtinlen,
		    const char *const *names, size_t n, char ***paths, size_t *npaths,
		    size_t *nbuiltin, const char **missing);
void strv_free(char **v, size_t n);

/* ---- GRUB 2 ---- */
struct grub_entry {
	char title[128];
	char id[256];         /* "submenu-id>entry-id" for entries in a submenu; "" */
	char index[16];       /* "2" or "1>0": what "set default" may name */
	char kernel[128];     /* version from "linux /boot/vmlinuz-VERSION", "" */
};
/*
 * The menu entries of grub.cfg text (at most max), and the value of the
 * first "set default=" (quotes removed; "0" when there is none) in
 * default_value.  Returns the number of entries found (may exceed max:
 * only max are stored), or -EINVAL for a nesting deeper than one submenu.
 */
int grub_entries(const char *text, size_t len, struct grub_entry *out, size_t max,
		 char *default_value, size_t dvlen);
/* Which stored entry default_value designates (an index "N" or "N>M", an
 * id, a title); -1 when none ("saved" and variables are not resolved). */
int grub_default_entry(const struct grub_entry *e, size_t n, const char *default_value);

/* Replace the value of the first "set default=..." line (or of the
 * KEY=... line for /etc/default/grub: key "GRUB_DEFAULT") with "value",
 * quoted.  Appends "KEY=\"value\"" when the file has none (default/grub
 * style only).  Returns 0. */
int set_assignment(const char *text, size_t len, const char *key, const char *value,
		   bool grub_cfg, struct sbuf *out);

/* ---- newc cpio ---- */
/* Append one entry (mode includes the type bits: S_IFREG|0644, S_IFDIR|0755).
 * ino is taken from a counter in the buffer's length: callers pass distinct
 * inode numbers. */
void cpio_add(struct sbuf *b, const char *name, unsigned mode, uint32_t ino, uint32_t mtime,
	      const void *data, size_t len);
/* The TRAILER!!! entry, then zero padding to a multiple of 512. */
void cpio_finish(struct sbuf *b, uint32_t ino);

/* ---- initramfs images (initrd.c) ---- */
/* Which tool made an initramfs, by the names it holds: dracut's images hold
 * usr/lib/dracut/, initramfs-tools' conf/initramfs.conf, mkinitcpio's
 * init_functions, SUSE's old mkinitrd's run_all.sh. */
enum initrd_maker_id {
	IRD_UNKNOWN = 0, IRD_INITRAMFS_TOOLS, IRD_DRACUT, IRD_MKINITCPIO, IRD_SUSE_MKINITRD
};
#define INITRD_MAX_NAMES 1000000u                 /* names read before giving up */
#define INITRD_MAX_BYTES ((uint64_t)4 << 30)      /* bytes unpacked before giving up */
struct initrd_scan {
	unsigned archives;    /* cpio archives met (early ones, then the main one) */
	unsigned names;       /* names read */
	uint64_t bytes;       /* file bytes passed over */
	bool compressed;      /* a compressed archive was reached */
};
/* The tool's name as conversion spells it ("dracut", "initramfs-tools",
 * "mkinitcpio", "suse-mkinitrd"), "" for IRD_UNKNOWN. */
const char *initrd_maker_name(int maker);
/* The marker one name (name[0..len), "./" and "/" prefixes ignored) is, or
 * IRD_UNKNOWN. */
int initrd_name_says(const char *name, size_t len);
/* Read the whole image data[0..len) as the kernel unpacks it: newc cpio
 * archives one after the other with zero padding between them, the first
 * compressed one (gzip, zstd, xz, lzma, lz4, bzip2) read to its end.
 * Stops at the first marker.  Returns the maker (> 0), IRD_UNKNOWN when
 * the image was read to its end without one, -EINVAL when it is not an
 * initramfs or is damaged or cut short before a marker, -E2BIG past
 * INITRD_MAX_NAMES or INITRD_MAX_BYTES, -ENOMEM.  s (may be NULL) gets
 * what was read. */
int initrd_maker(const void *data, size_t len, struct initrd_scan *s);

/* ---- the platform a machine leaves ---- */
/* A guest agent of the hypervisor the machine leaves (VMware, VirtualBox,
 * Xen, Hyper-V), by the name of its unit, its alias or its start link
 * (name[0..len)): "open-vm-tools.service", "vgauth.service",
 * "run-vmblock\x2dfuse.mount", SysV's "S01open-vm-tools" and
 * "K01hv-kvp-daemon"...  The platform's name, or NULL for anything else. */
const char *old_platform_service(const char *name, size_t len);
/* A kernel module that drives only that hypervisor's virtual hardware, as
 * a module list names it (name[0..len), '-' and '_' alike): xen-blkfront,
 * vmw_pvscsi, vmxnet3, hv_storvsc, vboxguest...  What it drives, or NULL
 * (also for vsock, the core of every platform's sockets, virtio's too). */
const char *old_platform_module(const char *name, size_t len);

/* ---- Debian's package database ---- */
/* Whether /var/lib/dpkg/status (text[0..len)) has package "name" with the
 * status "install ok installed" (stanzas: "Field: value" lines, blank
 * lines between packages; continuation lines start with a blank). */
bool dpkg_installed(const char *text, size_t len, const char *name);

/* ---- the quick inspection's files ---- */
/* os-release (KEY=value lines, values quoted or not, '#' comments). */
struct osrel {
	char id[32];          /* "debian", "" when none */
	char version_id[32];  /* "12" */
	char pretty[128];     /* "Debian GNU/Linux 12 (bookworm)" */
};
void osrel_parse(const char *text, size_t len, struct osrel *out);
/* "12.15" (Debian's /etc/debian_version): true and the numbers when the
 * text starts with MAJOR[.MINOR]. */
bool version_parse(const char *text, size_t len, int *major, int *minor);

/* One fstab line: the first three fields, octal escapes (\040) decoded. */
struct fstab_ent {
	char spec[256];
	char file[256];
	char type[32];
	char opts[256];       /* the fourth field; "" when there is none */
	unsigned line;        /* 1-based */
};
/* The entries of fstab text (at most max stored); returns how many there
 * are (may exceed max).  Lines with fewer than three fields, or a field
 * too long for its place, are skipped. */
size_t fstab_parse(const char *text, size_t len, struct fstab_ent *out, size_t max);
/* Mount options opts ("rw,subvol=/@/home,compress=zstd"): is key there?
 * Its value (after '=', "" when none) into val, cut to vlen - 1. */
bool fstab_opt(const char *opts, const char *key, char *val, size_t vlen);

/* The architecture in libguestfs's words (x86_64, i386, aarch64, arm,
 * ppc64, ppc64le, s390x, riscv64) of an ELF header's first bytes; NULL
 * when it is none of these or not ELF. */
const char *elf_arch(const unsigned char *h, size_t len);

#endif
