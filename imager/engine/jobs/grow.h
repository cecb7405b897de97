/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: growing the filesystems of partitions laid out again
 * (grow.c). */
#ifndef IMAGER_GROW_H
#define IMAGER_GROW_H

#include "imager/fs.h"
#include "imager/job.h"

/* What a partition holds, for growing it: its libblkid type, and for an
 * LVM PV the LV that ends last on it ("vg0/root"; NULL when none or when it
 * is kept whole), which is extended into the new room. */
struct grow_fs {
	const char *type;
	const char *last_lv;
};

/* Fill g from a partition's type and its volumes (fs.h). */
void grow_fs_set(struct grow_fs *g, const char *type, const struct fs_volume *v, size_t n);

/* After a job that laid partitions out again: grow the filesystems of the
 * partitions that grew: ext2/3/4 (e2fsck -f -p, resize2fs), NTFS
 * (ntfsresize), XFS and btrfs (grown mounted), and LVM PVs (pvresize, then
 * the last LV extended over the free extents and its filesystem grown).
 * On the target's partition devices with the host's tools when it is a
 * block device the kernel has partitions for (LVM excepted), else through
 * the hook (libguestfs, offered by the conversion layer).  fs: one per
 * rep->parts.  Records in rep->grown_fs what was grown, and in rep->note why
 * a grown partition's filesystem kept its size (FAT, swap, unknown, no hook). */
int grow_filesystems(const struct disk_roots *roots, const struct target_info *t,
		     const struct im_grow_hook *hook, struct grow_report *rep,
		     const struct grow_fs *fs, struct im_err *err);

#endif
