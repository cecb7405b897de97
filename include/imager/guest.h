/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Working inside disk images with libguestfs: opening a handle on images,
 * choosing the acceleration, growing ext2/3/4 filesystems to fill their
 * partitions.
 *
 * Rules every function here follows, as the rest of the engine:
 *   - returns 0 or a negative errno and explains a failure in `err`
 *     (libguestfs's own message is quoted);
 *   - never prints and never exits: libguestfs handles are created with the
 *     error handler removed and with a callback that swallows its warnings
 *     and debug messages; verbose and trace are off;
 *   - may fork (the acceleration probe) and reaps every process it starts.
 *
 * Environment read by guest_open() and guest_accel_choose():
 *   IMAGER_ACCEL        kvm | tcg | auto (default auto), see below
 *   IMAGER_ACCEL_CACHE  file holding the auto verdict (default: root
 *                       /var/cache/imager/accel; others
 *                       $XDG_RUNTIME_DIR/imager-accel, else
 *                       /tmp/imager-accel-UID)
 *   LIBGUESTFS_*        as libguestfs documents them; LIBGUESTFS_BACKEND
 *                       defaults to "direct" here.
 *
 * Why the acceleration is chosen here and not left to libguestfs: on some
 * hosts /dev/kvm exists and qemu starts with KVM, but the guest kernel (the
 * libguestfs appliance's included) hangs, so libguestfs's "kvm:tcg" default
 * hangs too.  TCG always works but is slower (a launch takes ~25 s instead
 * of a few).
 */
#ifndef IMAGER_GUEST_H
#define IMAGER_GUEST_H
/* The conversion (libguestfs) layer's header: only that layer and those above it include it
 * (the Makefile sets IMAGER_LAYER for each layer's sources). */
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 2
#error "a lower layer may not use the conversion (libguestfs) layer"
#endif


#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <guestfs.h>

#include "imager/error.h"

enum guest_accel {
	GUEST_ACCEL_KVM = 1,   /* libguestfs's default: qemu -machine accel=kvm:tcg */
	GUEST_ACCEL_TCG = 2,   /* backend setting force_tcg: pure emulation */
};

/* Why an acceleration was chosen. */
enum guest_accel_why {
	GUEST_WHY_ASKED = 1,     /* IMAGER_ACCEL (or cfg->mode) said kvm or tcg */
	GUEST_WHY_LIBGUESTFS,    /* LIBGUESTFS_BACKEND_SETTINGS already has force_tcg */
	GUEST_WHY_NO_KVM,        /* the KVM device is missing or cannot be opened */
	GUEST_WHY_CACHED,        /* a verdict recorded for this host kernel */
	GUEST_WHY_PROBE_OK,      /* the probe launched an appliance with KVM */
	GUEST_WHY_PROBE_HUNG,    /* the probe did not finish in time: killed */
	GUEST_WHY_PROBE_FAILED,  /* the probe's launch failed: TCG, not recorded */
};

/* Settings for guest_accel_choose().  Zeroed fields take the defaults. */
struct guest_accel_cfg {
	const char *mode;        /* "auto", "kvm", "tcg"; NULL: $IMAGER_ACCEL, else auto */
	const char *kvm_device;  /* NULL: "/dev/kvm" */
	const char *cache_file;  /* NULL: $IMAGER_ACCEL_CACHE, else the default above */
	unsigned probe_seconds;  /* time a KVM boot may take; 0: GUEST_PROBE_SECONDS */
};

/* A working KVM launch takes a few seconds; a TCG one ~25 s. */
#define GUEST_PROBE_SECONDS 45u
/* Building the appliance (supermin, first launch on a machine) is not part
 * of the probe's time: the clock restarts when libguestfs's debug messages
 * say the build finished.  This caps the whole probe all the same. */
#define GUEST_PROBE_MAX_SECONDS 900u

struct guest_accel_choice {
	enum guest_accel accel;
	enum guest_accel_why why;
	double probe_seconds;    /* wall time the probe took; 0 when none ran */
};

/*
 * Decide between KVM and TCG.
 *   mode tcg / kvm: that, no questions asked.
 *   mode auto: TCG when the KVM device cannot be opened read-write; else the
 *     verdict in the cache file when it was recorded under the running host
 *     kernel (uname -r); else probe: a forked child, leader of its own
 *     process group, launches a throwaway appliance (one 1 MiB scratch drive,
 *     LIBGUESTFS_* environment honoured) with KVM allowed.  It exits 0 when
 *     guestfs_launch succeeds.  When the boot takes longer than
 *     probe_seconds, the group gets SIGTERM (qemu exits, the child's
 *     launch fails and libguestfs removes its temporary folders); 5 s later
 *     every member but the child gets SIGKILL (same outcome for a qemu that
 *     ignored SIGTERM); 5 s later still the whole group gets SIGKILL (only
 *     then may libguestfs's folders /tmp/libguestfsXXXXXX remain); every
 *     process of the group is reaped
 *     (this process is a child subreaper for the duration, since PID 1 may
 *     not reap).  A first-time appliance build (supermin, ~15 s) does not
 *     count: the clock restarts when libguestfs reports the build finished.  Success records "kvm", a hang records
 *     "tcg"; a failed launch gives TCG for this time and records nothing
 *     (the real launch then reports the real problem).
 * The cache file is written atomically (temporary file + rename) and read
 * as hostile: anything but "<release> kvm|tcg\n" is ignored.  Failing to
 * write it is not an error.
 * Returns 0, or -EINVAL (IM_EXIT_USAGE) for an unknown mode.
 * Forks: call it while no other thread of the process holds a lock that
 * libguestfs needs (imager calls it between jobs).
 */
int guest_accel_choose(const struct guest_accel_cfg *cfg, struct guest_accel_choice *out,
		       struct im_err *err);

/* The acceleration guest_open() would use now: TCG when IMAGER_ACCEL is
 * auto and LIBGUESTFS_BACKEND_SETTINGS already forces it (why
 * GUEST_WHY_LIBGUESTFS), else guest_accel_choose(NULL) (which may probe).
 * Returns 0 or the errors of guest_accel_choose(). */
int guest_accel_current(struct guest_accel_choice *out, struct im_err *err);
const char *guest_accel_name(enum guest_accel a);     /* "kvm", "tcg" */
const char *guest_accel_why_name(enum guest_accel_why w);

/*
 * What libguestfs needs before it can start its appliance, looked at on this
 * machine without launching anything (guest_env_check()).  guest_open()
 * runs it when a launch fails, so that the error says what stands in the
 * way and what to do, with libguestfs's own text only as the detail; `imager
 * appliance` prints it.
 *
 * The checks, in the order a launch needs them (the first that fails is the
 * problem):
 *   appliance  a folder of the appliance search path (LIBGUESTFS_PATH, else
 *              libguestfs's built-in one) holds supermin.d/ (an appliance
 *              supermin builds from this machine) or kernel, initrd and root
 *              (a fixed appliance, which needs none of what follows but qemu);
 *   supermin   the supermin program (package supermin);
 *   kernel     SUPERMIN_KERNEL when it names a readable file, else a readable
 *              /boot/vmlinu[xz]-VERSION with its modules in /lib/modules/VERSION,
 *              as supermin looks for them (Debian keeps kernels 0600: only
 *              root can read them; a bare Debian has none at all);
 *   cache      the built appliance (CACHEDIR/.guestfs-UID/appliance.d, CACHEDIR
 *              from LIBGUESTFS_CACHEDIR, TMPDIR, else /var/tmp) is there, or
 *              the folder is writable with GUEST_APPLIANCE_BYTES free to build it;
 *   tmpdir     libguestfs's temporary folder (its sockets) is writable;
 *   qemu       the hypervisor (LIBGUESTFS_HV, else libguestfs's qemu) can be run.
 */
#define GUEST_APPLIANCE_BYTES (768ull << 20)   /* ~675 MiB built, plus margin */

enum guest_env_need {
	GUEST_NEED_NOTHING = 0,
	GUEST_NEED_APPLIANCE, GUEST_NEED_SUPERMIN, GUEST_NEED_KERNEL, GUEST_NEED_CACHE,
	GUEST_NEED_TMPDIR, GUEST_NEED_QEMU,
};

struct guest_env {
	char path[1024];        /* the appliance folder found, else the search path */
	bool fixed;             /* a prebuilt appliance: no supermin, kernel or cache needed */
	char supermin[256];     /* the supermin program, "" when missing */
	char kernel[512];       /* the kernel supermin will take, "" when none */
	char modules[512];      /* its modules folder */
	char cachedir[1024];    /* CACHEDIR/.guestfs-UID */
	bool cached;            /* an appliance is built there */
	uint64_t cache_free;    /* bytes free for a non-root user in CACHEDIR */
	char tmpdir[1024];
	char qemu[512];
	enum guest_env_need need;   /* the first problem; GUEST_NEED_NOTHING when none */
	char problem[512];      /* what is wrong, one sentence */
	char fix[512];          /* what to do about it */
};

/*
 * Fill *env (zeroed first) from this process's environment and libguestfs's
 * settings.  A problem is a finding, not a failure: it is in env->need,
 * env->problem and env->fix.  Nothing is started, built or written.
 * Returns 0; the errors of creating a handle (a bad LIBGUESTFS_* variable:
 * IM_EXIT_USAGE).
 */
int guest_env_check(struct guest_env *env, struct im_err *err);
const char *guest_env_need_name(enum guest_env_need n);   /* "kernel", "cache"... */

/*
 * The quick kernel: under TCG, appliances boot an unpacked copy of the
 * kernel supermin would take.  A compressed kernel (bzImage) unpacks itself
 * before it prints a line, ~4 s of a ~13 s launch under TCG (Debian's is
 * xz); qemu boots an unpacked one (vmlinux, ELF) at once through its PVH
 * entry point (CONFIG_PVH: Debian's and Ubuntu's kernels have it).
 *
 * guest_quick_prepare() unpacks env->kernel's payload (xz or zstd, the boot
 * protocol's payload fields, every field checked against the file) into
 * CACHEDIR/.imager-appliance-UID/VERSION-KEY/vmlinux (KEY: the kernel's
 * path, size, mtime and inode), once: later calls find it.  That folder is
 * also libguestfs's cache folder for this appliance (supermin builds it
 * there from the vmlinux, SUPERMIN_KERNEL, with env->modules), so it never
 * mixes with libguestfs's own cache.  Preparing a new kernel removes the
 * folders of earlier ones.  Folders are made 0700 and refused when they are
 * a symlink or another user's.
 * Not an error when it cannot be used: q->on is false and q->why says why
 * (a fixed appliance, no kernel, not a bzImage, gzip or another packing,
 * no PVH note, a folder it cannot write).  Returns 0 when on, -1 when off.
 *
 * guest_open() and guest_launch_test() use it for TCG launches when none of
 * SUPERMIN_KERNEL, LIBGUESTFS_CACHEDIR and LIBGUESTFS_PATH is set (what the
 * user set wins) and IMAGER_QUICK_KERNEL is not 0: it is prepared once per
 * process, then SUPERMIN_KERNEL, SUPERMIN_MODULES, SUPERMIN_KERNEL_VERSION
 * and LIBGUESTFS_CACHEDIR are set in this process's environment (supermin,
 * started by libguestfs, and every later handle read them).
 */
struct guest_quick {
	bool on;
	char vmlinux[1500];      /* the unpacked kernel */
	char cachedir[1400];     /* libguestfs's cache folder for its appliance */
	char modules[512];
	char version[256];
	char why[2048];          /* when off (a message naming a path of up to 1400 bytes) */
};
int guest_quick_prepare(const struct guest_env *env, const char *cachedir, struct guest_quick *q);
/* What guest_open() does for a TCG launch (prepare once, set the
 * environment): *q says whether the quick kernel is on and why not. */
void guest_quick_current(struct guest_quick *q);

/*
 * Open disks[0..n-1] (n >= 1) in one appliance and launch it.  formats[i]
 * is required ("raw", "qcow2", ...): images are never probed for their
 * format, a raw disk could pretend to be qcow2.  The disks appear in the
 * appliance as /dev/sda, /dev/sdb, ... in order.  readonly: every drive
 * read-only (libguestfs puts a throwaway overlay on top).  memsize_mb > 0
 * gives the appliance at least that much memory (0: libguestfs's default,
 * or LIBGUESTFS_MEMSIZE).
 * The acceleration is guest_accel_choose(NULL) unless libguestfs's own
 * settings already force TCG.
 * On success *out owns a launched handle: release it with guest_close(), or
 * check guestfs_shutdown() first when writes must be durable.
 * Returns 0; -EINVAL (a format missing, a bad IMAGER_ACCEL or LIBGUESTFS_*
 * variable: IM_EXIT_USAGE; no disks at all: IM_EXIT_INTERNAL);
 * -ENOENT and others from adding a drive (IM_EXIT_TARGET); -EIO when the
 * appliance does not start (IM_EXIT_APPLIANCE: the message names what stands
 * in the way, from guest_env_check(), and how to fix it, with libguestfs's
 * text as the detail); -ENOMEM.
 */
int guest_open(const char *const *disks, const char *const *formats, size_t n, bool readonly,
	       int memsize_mb, guestfs_h **out, struct im_err *err);

/*
 * Open the read-only NBD export on the Unix socket `socket` (its default
 * export, raw) as the appliance's only disk, /dev/sda, and launch, as
 * guest_open() does (the same acceleration, quick kernel and errors; a
 * drive libguestfs refuses: IM_EXIT_SOURCE).  The server must stay up
 * while the handle is used.
 */
int guest_open_nbd(const char *socket, guestfs_h **out, struct im_err *err);

/*
 * Start a throwaway appliance (one 1 MiB scratch drive) with the chosen
 * acceleration and shut it down: what `imager appliance --launch` times.
 * *seconds gets the wall time of launch and shutdown.
 * Returns 0, or the errors of guest_open() (IM_EXIT_APPLIANCE when it did
 * not start).
 */
int guest_launch_test(double *seconds, struct im_err *err);

/* libguestfs's version ("1.48.6"), from a handle that is never launched:
 * cheap, for `imager -v --version` (a P2V server's connection test).
 * Writes "" when no handle can be made. */
void guest_lib_version(char *buf, size_t n);

/* guestfs_shutdown() then guestfs_close(); NULL is fine.  Use
 * guestfs_shutdown() yourself first when you need to know that the writes
 * reached the disks. */
void guest_close(guestfs_h *g);

/*
 * Grow the ext2/3/4 filesystem on partition_device (an appliance name,
 * "/dev/sda1") to fill its partition: a forced check that repairs only what
 * is safe to repair unattended (e2fsck -f -p), then resize2fs.  The device
 * must not be mounted.  A filesystem that already fills its partition is
 * left as it is (resize2fs has nothing to do).
 * Returns 0; -EUCLEAN when e2fsck finds what it may not fix alone
 * (IM_EXIT_FSCK); -EIO (or libguestfs's errno) when resize2fs fails
 * (IM_EXIT_IO).
 */
int guest_grow_ext(guestfs_h *g, const char *partition_device, struct im_err *err);

/* What guest_grow_partitions() did with one partition. */
struct guest_grow_result {
	unsigned number;          /* the partition number asked for */
	char fstype[16];          /* blkid's type ("ext4", "xfs"), "" when none */
	bool grown;               /* ext2/3/4: checked and resized; else skipped */
	uint64_t bytes_before;    /* filesystem size (blocks x block size), */
	uint64_t bytes_after;     /* ext only; 0 for skipped partitions */
};

/*
 * Open one disk image read-write (format required, see guest_open()), and
 * grow the filesystems of the partitions numbered numbers[0..n-1] (1-based,
 * as in /dev/sda1) to fill their partitions, which the caller has already
 * enlarged in the partition table:
 *   ext2/3/4   e2fsck -f -p, then resize2fs;
 *   ntfs       ntfsresize (forced: no questions);
 *   xfs, btrfs mounted in the appliance, then xfs_growfs / btrfs filesystem
 *              resize max;
 *   LVM2_member pvresize, then, when last_lvs[k] names one ("vg0/root"),
 *              that LV extended over every free extent and its filesystem
 *              grown as above (swap and others keep their size).
 * Partitions holding anything else are skipped.  Every number is checked to
 * exist before anything is changed.  last_lvs may be NULL.
 * results (NULL, or room for n) receives one entry per number, in order.
 * The appliance is shut down and its exit checked: only then are the writes
 * on the disk.  n == 0 does nothing and starts no appliance.
 * Returns 0; -ENOENT when a partition does not exist (IM_EXIT_TARGET); the
 * errors of guest_open() and guest_grow_ext(); -EIO when a tool or the
 * shutdown fails.
 */
int guest_grow_partitions(const char *disk, const char *format, const unsigned *numbers,
			  const char *const *last_lvs, size_t n, struct guest_grow_result *results,
			  struct im_err *err);

#endif
