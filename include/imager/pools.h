/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The target host's storage pools (its connection: imager/host.h).
 *
 * pools_list() describes every active
 * pool of the connection; pools_probe() measures how many fsyncs per second
 * the pool's directory sustains (the way pveperf measures it); pools_rank()
 * orders pools for a disk of a given size.  Nothing here prints.
 *
 * Ranking (pools_rank, documented in README.md "Choosing a pool"):
 *   1. pools with room for the disk (available >= need + 2% of capacity as a
 *      margin, at least 256 MiB) before pools without;
 *   2. among those: the higher measured fsyncs/s first (unmeasured pools
 *      after measured ones); a ZFS pool without a log vdev counts as
 *      unmeasured-and-warned, after every other measured pool;
 *      (that is three tiers: measured pools by fsyncs/s, then unmeasured
 *      pools, then ZFS pools known to have no log vdev, measured or not;
 *      a ZFS pool whose log vdevs are unknown is not demoted)
 *   3. then by type: logical, zfs, fs, dir, netfs, others (local block
 *      storage before files, files before network);
 *   4. then by available space, larger first, when the two differ by more
 *      than 1% of the larger (pools on one filesystem report the same space,
 *      give or take what was written between two reads); then by name
 *      (stable).
 *
 * Recommendation per pool (format and preallocation for a new disk):
 *   copy-on-write storage (zfs pool, or a dir/fs pool on zfs or btrfs):
 *       raw, preallocation off (the storage allocates on write anyway and a
 *       second copy-on-write layer only costs);
 *   logical (LVM), disk, iscsi, rbd and other block pools: raw, no choice of
 *       preallocation (the volume is the space);
 *   dir/fs/netfs on ext4, XFS and others: qcow2 with metadata preallocation
 *       (snapshots, and cluster tables written once), or raw with falloc
 *       (the fastest) when the caller prefers raw.
 */
#ifndef IMAGER_POOLS_H
#define IMAGER_POOLS_H
/* The virtualisation (libvirt) layer's header: only that layer and those above it include it
 * (the Makefile sets IMAGER_LAYER for each layer's sources). */
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 3
#error "a lower layer may not use the virtualisation (libvirt) layer"
#endif


#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#include "imager/error.h"
#include "imager/host.h"

struct im_pool {
	char name[256];
	char type[16];            /* libvirt pool type: dir fs netfs logical zfs rbd disk iscsi ... */
	char path[1024];          /* the pool's target path; "" when it has none */
	char fstype[32];          /* filesystem under path (dir/fs/netfs, local only): "ext4", "xfs", "zfs", "btrfs", ... */
	char source[800];         /* source device, volume group or ZFS pool name; "" when none */
	uint64_t capacity, allocation, available;   /* bytes, as libvirt reports them */
	bool local;               /* path can be opened from here */
	double fsyncs;            /* measured fsyncs per second; < 0 when not measured */
	double probe_seconds;     /* how long the probe ran */
	char probe_note[96];      /* why it is (or would be) left unmeasured, for people; "" when measured */
	char probe_error[1024];   /* why the last pools_probe() failed; "" when it did not */
	/* ZFS (a zfs pool, or a directory on a ZFS dataset). */
	bool zfs;
	char zpool[256];          /* the ZFS pool name */
	int zfs_log;              /* 1: has a log vdev, 0: has none, -1: unknown */
	uint64_t arc_max;         /* zfs_arc_max in bytes; 0 unknown or unlimited (module default) */
	bool arc_known;           /* arc_max was read (local host with the zfs module loaded) */
	/* Recommendation for a new disk in this pool. */
	char format[8];           /* "raw", "qcow2" */
	char preallocation[12];   /* "off", "metadata", "falloc" */
	char reason[160];         /* why, for people */
	/* Ranking (pools_rank). */
	bool fits;                /* room for the disk */
	int rank;                 /* 1 = best */
	char warnings[3][256];    /* "" when unused */
};

/*
 * List the connection's active pools, refreshed first, with everything but
 * the fsync figure filled in.  *out is malloc'd (free()).  Returns 0 or
 * -errno (IM_EXIT_TARGET when libvirt fails).
 *
 * On a local host it also looks at each pool's storage: the filesystem
 * under a dir/fs/netfs pool (the mount holding the path, from
 * /proc/self/mountinfo), `zpool status -P ZPOOL` for ZFS (no shell; absent
 * zpool: zfs_log -1), /sys/module/zfs/parameters/zfs_arc_max, and whether
 * O_DIRECT works in the folder (a nameless O_TMPFILE reopened with O_DIRECT,
 * or a named .imager-odirect-probe.PID file removed at once).  Warnings, most
 * important first (only three are kept): ZFS without a log vdev, pool less
 * than 10% free, a folder in memory (tmpfs, ramfs), no O_DIRECT
 * (cache='none' cannot work), ZFS ARC unlimited.
 */
int pools_list(virConnectPtr conn, struct im_pool **out, size_t *n, struct im_err *err);

/*
 * Measure fsyncs per second on p->path (local pools only): for `seconds`
 * (0: 3), create/truncate a small file, write 4,001 bytes, fsync, close,
 * repeated, then remove the file.  Sets p->fsyncs and p->probe_seconds.
 * Returns 0, or -errno (IM_EXIT_TARGET) when the path cannot be written;
 * a pool that is not local, or whose storage is not files (only dir, fs and
 * netfs pools are measured), is left unmeasured and 0 is returned.  When
 * it is left unmeasured, p->probe_note says why.  The file is
 * PATH/.imager-fsync-probe.PID, removed also on failure.  A failure's
 * message is also kept in p->probe_error.
 */
int pools_probe(struct im_pool *p, double seconds, struct im_err *err);

/* Whether the pool holds files (dir, fs, netfs) rather than block volumes. */
bool pools_has_files(const struct im_pool *p);

/* Sort pools best first for a disk of need bytes and set fits and rank. */
void pools_rank(struct im_pool *p, size_t n, uint64_t need);

/* Find a pool by name in a list; NULL when absent. */
struct im_pool *pools_find(struct im_pool *p, size_t n, const char *name);

/*
 * The `imager pools` job: connect to uri (NULL: libvirt's default), list the
 * active pools, measure each one when o->probe (o->seconds each, 0: 3), and
 * rank them for a disk of o->need bytes (0: any).  Nothing is printed:
 * o->on_probe (may be NULL) is told the name of each pool before it is
 * measured, and a pool that cannot be measured is still listed, with why in
 * its probe_error.
 * out->pools is best first.  Returns 0, even with no active pool (n == 0);
 * or -ECONNREFUSED (host_open's errors: IM_EXIT_TARGET), another -errno
 * when libvirt fails to list (IM_EXIT_TARGET), or -EINTR (IM_EXIT_INTERRUPTED)
 * when *o->interrupted became true while probing.  pools_survey_free()
 * releases out, also after a failure.
 */
struct pools_survey_opts {
	const char *uri;
	bool probe;
	double seconds;
	uint64_t need;
	const volatile sig_atomic_t *interrupted;      /* may be NULL */
	void (*on_probe)(void *opaque, const char *pool);
	void *opaque;
};
struct pools_survey {
	char uri[512];            /* the connection's URI as libvirt names it */
	bool local;               /* the host is this machine */
	struct im_pool *pools;    /* malloc'd, best first */
	size_t n;
};
int pools_survey(const struct pools_survey_opts *o, struct pools_survey *out, struct im_err *err);
void pools_survey_free(struct pools_survey *s);

/*
 * Parse the output of `zpool status -P POOL` (text): returns 1 when the
 * layout has a "logs" section with at least one vdev, 0 when it has none,
 * -1 when the text is not a zpool status.  Pure; hostile text is fine.
 */
int pools_zfs_has_log(const char *status_text);

#endif
