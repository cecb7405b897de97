/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The disk container contract: raw files and block devices, qcow2, NBD
 * exports.  Modelled on QEMU's block drivers: a backend is a private state
 * struct, static functions and one const `struct bk_driver`; the framework
 * (imager/backend.c) allocates the private state and chooses the driver.
 *
 * Rules every driver follows:
 *   - Offsets and lengths are in bytes of the *virtual* disk; callers never
 *     pass a range beyond bk->size (the framework checks).
 *   - Callbacks of one `struct bk` are never called concurrently (the
 *     pipelines read from one thread and write from one thread).
 *   - Every callback returns 0 (or a documented non-negative value) on
 *     success, or a negative errno:
 *       -EIO      the host file or server failed
 *       -EBADMSG  the container's metadata is corrupt (a hostile or damaged
 *                 image: every offset, size and count read from the file
 *                 is validated before it is used)
 *       -ENOTSUP  a feature the driver does not handle (backing files,
 *                 encryption, an unknown incompatible feature bit)
 *       -ENOSPC   the host ran out of space
 *     and may explain itself with im_errf() on the `err` argument where one
 *     is passed.  Drivers never print and never exit.
 */
#ifndef IMAGER_BACKEND_H
#define IMAGER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/error.h"

enum bk_prealloc {
	BK_PREALLOC_OFF = 0,    /* sparse: only what is written takes space */
	BK_PREALLOC_METADATA,   /* qcow2: all L2 tables and refcount blocks laid
				 * out, every data cluster mapped (the file stays
				 * sparse); raw: same as off */
	BK_PREALLOC_FALLOC,     /* space reserved with fallocate() (zeros written
				 * where the host filesystem refuses) */
	BK_PREALLOC_FULL,       /* zeros written over the whole container */
};

const char *bk_prealloc_name(enum bk_prealloc p);
/* "off", "metadata", "falloc", "full".  Returns 0 or -EINVAL. */
int bk_prealloc_parse(const char *s, enum bk_prealloc *out);

/* How an NBD export is waited for (backend-nbd.c): each request and each
 * connection at most timeout_s seconds, after which it fails with
 * -ETIMEDOUT (IM_EXIT_IO, the offset named); a lost connection is made
 * again and the request sent again up to retries times, after pauses of 1,
 * 2, 4... seconds.  A job's options carry it (--timeout, --retries); not
 * given: 60 s and 3 retries (bk_net_get). */
struct bk_net {
	bool given;
	unsigned timeout_s;       /* 1.. */
	unsigned retries;
};
struct bk_net bk_net_get(const struct bk_net *n);   /* n or the defaults */

struct bk_create_opts {
	uint64_t size;            /* virtual size in bytes, a multiple of 512 */
	enum bk_prealloc prealloc;
	uint32_t cluster_size;    /* qcow2: power of two in [512, 2 MiB]; 0 = 64 KiB */
	struct bk_net net;        /* nbd */
};

/* Flags for open(). */
#define BK_OPEN_WRITE 1u

/* block_status() results. */
#define BK_STATUS_DATA 1u     /* the range is allocated in the container */
#define BK_STATUS_ZERO 2u     /* the range reads as zeros */

struct bk;

struct bk_driver {
	const char *name;         /* "raw", "qcow2", "nbd", "vmdk", "vhd", "vhdx", "vdi",
				   * "ova", "ovf", "vmx" */
	size_t priv_size;         /* bytes of private state, allocated zeroed */

	/* How sure is the driver that a file starting with buf (len bytes:
	 * 4096, or the whole file when shorter) is its format?  0 = not at
	 * all, 100 = certain.  raw answers 1 for anything, so that it wins only
	 * when nothing else does.  NULL for drivers reached by URI (nbd). */
	int (*probe)(const unsigned char *buf, size_t len);

	/* The same for a format told by its end (a fixed VHD's footer): buf
	 * holds the file's last 512 bytes.  Asked only when no probe() scored
	 * more than raw.  Optional. */
	int (*probe_tail)(const unsigned char *buf, size_t len);

	/* Create a new, empty container of o->size bytes at path (which must
	 * not exist, except for a block device, which is used as it is) and
	 * open it for writing.  Set bk->size, bk->sector_size and
	 * bk->zero_init (true when every byte already reads as zero, so that
	 * zeros need not be written).  NULL when the driver cannot create. */
	int (*create)(struct bk *bk, const char *path, const struct bk_create_opts *o,
		      struct im_err *err);

	/* Open an existing container (path, or a URI for nbd).  Validate its
	 * header, refuse what it cannot read correctly (-ENOTSUP with the
	 * reason), set bk->size and bk->sector_size. */
	int (*open)(struct bk *bk, const char *path, unsigned flags, struct im_err *err);

	/* Read len bytes at off.  Unallocated and zero ranges read as zeros. */
	int (*pread)(struct bk *bk, void *buf, size_t len, uint64_t off);

	/* Write len bytes at off (opened with BK_OPEN_WRITE or created). */
	int (*pwrite)(struct bk *bk, const void *buf, size_t len, uint64_t off);

	/* Make [off, off+len) read as zeros.  Optional: NULL means the
	 * framework writes buffers of zeros. */
	int (*pwrite_zeroes)(struct bk *bk, uint64_t off, uint64_t len);

	/* The status of the range starting at off: returns BK_STATUS_* flags
	 * (>= 0) of its first part and sets *pnum to that part's length
	 * (1 <= *pnum <= len).  Optional: NULL means everything is DATA. */
	int (*block_status)(struct bk *bk, uint64_t off, uint64_t len, uint64_t *pnum);

	/* Read len bytes at off around the host's cache, at the granularity
	 * of the logical sector (rescue reads: a failing sector is then told
	 * from its good neighbours in the same page).  Optional: NULL means
	 * pread(). */
	int (*pread_direct)(struct bk *bk, void *buf, size_t len, uint64_t off);

	/* A hint that [off, off+len) will be read soon: start reading it in
	 * the background.  Optional; never fails the job. */
	void (*prefetch)(struct bk *bk, uint64_t off, uint64_t len);

	/* A hint that [off, off+len) has been read and will not be read
	 * again: the host may drop it from its cache.  Optional; never fails
	 * the job. */
	void (*drop)(struct bk *bk, uint64_t off, uint64_t len);

	/* Make everything written so far durable (metadata included). */
	int (*flush)(struct bk *bk);

	/* Write out what remains (qcow2 tables), release everything.  A
	 * failure means the container is not complete.  Called exactly once
	 * for every successful open() or create(). */
	int (*close)(struct bk *bk);
};

struct bk {
	const struct bk_driver *drv;
	void *priv;               /* drv->priv_size bytes, owned by the framework */
	uint64_t size;            /* virtual size, bytes */
	unsigned sector_size;     /* logical sector size (512 for files) */
	bool writable;
	bool zero_init;           /* created, and reads as zeros everywhere */
	bool is_block_device;     /* raw on a block device */
	char name[600];           /* path or URI, for messages */
	/* For raw containers: a path that libparted and libblkid can open to
	 * see the virtual disk itself ("" for formats they cannot read). */
	char raw_path[600];
	/* Rescue reads (bk_rescue_start), NULL otherwise; owned. */
	struct bk_rescue *rescue;
	struct bk_net net;        /* as opened (bk_net_get: given) */
	/* The driver's own word on its last failed call, quoted after the
	 * framework's message ("" none): qemu-nbd's reason, for example. */
	char fail_note[256];
	/* What the format's header says of the file, for people ("" none):
	 * a VMDK's createType, a VHD's fixed or dynamic. */
	char detail[128];
};

/* ---- the framework ---- */

/* Drivers, in probing order (nbd is reached by its URI only). */
extern const struct bk_driver bk_raw, bk_qcow2, bk_nbd;
/* Other hypervisors' disks, read only, through qemu-nbd (backend-qemu.c):
 * VMware's VMDK, Hyper-V's VHD (fixed and dynamic) and VHDX, VirtualBox's
 * VDI.  Opening one starts a qemu-nbd child that lives until the close. */
extern const struct bk_driver bk_vmdk, bk_vhd, bk_vhdx, bk_vdi;
/* The disks of a VM's description (backend-vm.c): an OVA, an OVF folder's
 * .ovf, a .vmx.  "PATH" is its only disk; "PATH/DISK" one of its disks by
 * its file name or its number from 1.  Read only, through qemu-nbd. */
extern const struct bk_driver bk_ova, bk_ovf, bk_vmx;
/* qemu's name of a driver's format ("vhd" -> "vpc"; the others as they
 * are), for libguestfs and qemu-img. */
const char *bk_qemu_format(const char *driver);


/* Is this a URI a driver handles (nbd://, nbd+unix://)? */
bool bk_is_uri(const char *spec);
/* The driver for a format name, or NULL. */
const struct bk_driver *bk_driver_by_name(const char *name);
/* The format a new target's file name suggests (".qcow2" -> qcow2), or NULL. */
const char *bk_format_from_name(const char *path);

/* The format of spec as the drivers' probes score its first 4 KiB ("raw"
 * when no driver claims it; URIs: "nbd"), without opening it as a container
 * (so a qcow2 whose backing file is elsewhere is told too).  The one place
 * formats are detected.  Returns 0, or -errno (IM_EXIT_SOURCE, IM_EXIT_IO). */
int bk_probe_format(const char *spec, const char **format, struct im_err *err);
/* Open spec (a path or a URI).  format NULL: probe the first 4 KiB and take
 * the driver with the highest score (URIs go to nbd). */
int bk_open(const char *spec, const char *format, unsigned flags, const struct bk_net *net,
	    struct bk **out, struct im_err *err);
/* Create a container; format NULL: from the file name, else raw. */
int bk_create(const char *spec, const char *format, const struct bk_create_opts *o,
	      struct bk **out, struct im_err *err);

/* Bounds-checked calls into the driver.  Errors are recorded in err with
 * the container's name and the failing range. */
int bk_pread(struct bk *bk, void *buf, size_t len, uint64_t off, struct im_err *err);
int bk_pwrite(struct bk *bk, const void *buf, size_t len, uint64_t off, struct im_err *err);
int bk_zero(struct bk *bk, uint64_t off, uint64_t len, struct im_err *err);
int bk_block_status(struct bk *bk, uint64_t off, uint64_t len, uint64_t *pnum,
		    struct im_err *err);
int bk_flush(struct bk *bk, struct im_err *err);
/* Pass a read-ahead hint to the driver, if it takes hints. */
void bk_prefetch(struct bk *bk, uint64_t off, uint64_t len);
/* Pass a drop-behind hint to the driver, if it takes hints. */
void bk_drop(struct bk *bk, uint64_t off, uint64_t len);
/* Close and free; NULL is allowed.  Returns the driver's close() result. */
int bk_close(struct bk *bk, struct im_err *err);

/* ---- rescue reads (save --rescue, clone --rescue; rescue.c) ----
 *
 * Once started on a source, a read that fails with a media error (EIO,
 * ENODATA, EILSEQ: a bad sector; never a lost connection, a timeout or a
 * corrupt container) does not fail: the range is read again in halves, and
 * the failing halves in halves again, down to the logical sector, which is
 * tried 1 + retries times (around the host's cache where the driver can).
 * What cannot be read is returned as zeros and recorded.  Every range read
 * is recorded too, so that the map tells read, unreadable and never read
 * apart.  The map is GNU ddrescue's mapfile: "+" finished, "-" bad sector,
 * "?" not tried (not needed: free space), so that ddrescuelog(1) and
 * nbdkit's ddrescue filter read it. */
struct bk_range {
	uint64_t off, len;
};

/* save --rescue, clone --rescue, as the jobs take them (job.h): read
 * around unreadable sectors; they become zeros, listed in a map in GNU
 * ddrescue's mapfile format.  Without it a read error ends the job. */
struct rescue_opts {
	bool on;
	unsigned retries;          /* times an unreadable sector is tried again */
	const char *map;           /* clone: the map's path (save: DIR/rescue.map) */
	const char *cmdline;       /* for the map's header */
};

/* What a rescue met: unreadable bytes and ranges, and where the map is
 * ("" when nothing was unreadable: no map is written). */
struct rescue_report {
	uint64_t bytes, ranges;
	char map[4096];
};
int bk_rescue_start(struct bk *bk, unsigned retries, struct im_err *err);
/* The unreadable ranges so far, sorted and merged (NULL, 0 when none or
 * not rescuing), and their bytes in all and inside [off, off+len). */
const struct bk_range *bk_rescue_bad(const struct bk *bk, size_t *n);
uint64_t bk_rescue_bad_bytes(const struct bk *bk, uint64_t off, uint64_t len);
/* Bad bytes recorded so far: compare before and after a step to know
 * whether it met unreadable sectors. */
uint64_t bk_rescue_bad_total(const struct bk *bk);
/* Write the map of [0, bk->size) to path atomically; cmdline goes into
 * its header.  Returns 0 or negative errno (IM_EXIT_IO, IM_EXIT_TARGET). */
int bk_rescue_write_map(const struct bk *bk, const char *path, const char *cmdline,
			struct im_err *err);

/* ---- virtual machines' descriptions (backend-vm.c) ---- */
struct vm_desc;
/* When spec is a VM's description (an OVA, an .ovf, a .vmx: not one disk
 * inside it), its facts into *d and a spec for each of its disks, in its
 * order ("PATH/1", "PATH/2"...; specs holds VM_MAX_DISKS), their number
 * in *n, and returns 1.  Any other source: 0.  A description that cannot
 * be read: -errno as bk_open() (err filled). */
int bk_vm_describe(const char *spec, struct vm_desc *d, char specs[][600], size_t *n,
		   struct im_err *err);

#endif
