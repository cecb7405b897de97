/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: shrinking as a step of the copy job (shrink.c). */
#ifndef IMAGER_SHRINK_H
#define IMAGER_SHRINK_H

#include "imager/fs.h"
#include "imager/job.h"
#include "imager/layout.h"

/* What the plan knows of a partition: its place, its filesystem (libblkid
 * type, "" when unknown) and its used bytes. */
struct shrink_part {
	struct layout_part lp;
	char fs[32];
	uint64_t used;
	/* an LVM PV: its LVs as the plugin found them (the one with the most
	 * free space in an ext2/3/4 shrinks with the PV); NULL when unknown */
	const struct fs_volume *vols;
	size_t nvols;
};

/* Fill sp's filesystem, used bytes and volumes (its place is the plan's). */
void shrink_part_set(struct shrink_part *sp, const char *fs, uint64_t used,
		     const struct fs_volume *vols, size_t nvols);

/* The new layout (out[], by layout_plan_shrink()) for a target of new_disk
 * bytes, and a line for each partition that shrinks, moves or keeps its
 * size for a reason (note[i], "" when none; note may be NULL).  Returns 0
 * or negative errno: IM_EXIT_TARGET with the sizes each partition needs
 * when it does not fit. */
#define SHRINK_NOTE 256   /* bytes of a partition's line in the plan */
int shrink_plan(const char *table, unsigned lss, uint64_t new_disk, const struct shrink_part *in,
		size_t n, struct layout_part *out, char (*note)[SHRINK_NOTE], struct im_err *err);

/* A temporary folder (under $TMPDIR, else /var/tmp) for a shrink's copy,
 * refused when its filesystem has less than need bytes free.  dir (len
 * bytes) gets its path.  0 or negative errno. */
int shrink_tmpdir(char *dir, size_t len, uint64_t need, struct im_err *err);

/* The filesystems of the raw disk file PATH (the source copied as it is)
 * shrunk to the layout lp (by shrink_plan(); n partitions, in[] as planned)
 * in place, each by its own tool on a copy of its partition in tmpdir; a
 * progress note for each.  0 or negative errno. */
int shrink_filesystems(const char *path, const char *tmpdir, const struct shrink_part *in,
		       const struct layout_part *lp, size_t n, unsigned lss,
		       const struct im_progress *progress, struct im_err *err);

/* The refusal of a target smaller than the source without --shrink, saying
 * whether --shrink would fit it. */
int shrink_refuse(const char *target, uint64_t tsize, uint64_t source_size, const char *table,
		  unsigned lss, const struct shrink_part *in, size_t n, struct im_err *err);

#endif
