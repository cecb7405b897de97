/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: the writer (writer.c).  It puts blocks on a target and
 * holds back the partition table and the first bytes of every partition
 * until the end, so an interrupted job never leaves a target that looks
 * complete (restore and clone). */
#ifndef IMAGER_WRITER_H
#define IMAGER_WRITER_H

#include <sys/types.h>

#include "imager/backend.h"
#include "imager/job.h"
#include "grow.h"
#include "plan.h"

struct writer {
	struct bk *tgt;
	struct target_info info;    /* what was opened, resolved once */
	const struct disk_roots *roots;
	bool created;               /* a new file: removed if the job fails */
	bool fresh;                 /* reads as zeros: zeros need not be written */
	bool keep;                  /* a failed job keeps the file it created (resume) */
	uint64_t source_size;       /* the source disk's size */
	char table[16];
	unsigned lss;
	size_t nparts;
	uint64_t *part_start, *part_head;  /* per partition: start, held-back length */
	unsigned char **heads;
	struct layout_part *layout;        /* per partition; NULL: copied as it is */
	enum grow_mode grow;
	bool shrunk;                       /* an explicit layout on a smaller disk */
	bool locked;                       /* lock_fd: the job's hold on the target */
	uint64_t written;                  /* data bytes written so far */
	int lock_fd;
	dev_t dev;                         /* the target as locked: a file */
	ino_t ino;                         /* deleted or replaced meanwhile is told */
};

/* Open or create the target for the planned disk; check size, use, kind;
 * hide the old table and superblocks (the boot areas and partition heads)
 * unless the target is fresh.  Then lay the partitions out again for the
 * target's size as o->grow asks (--grow-last, --proportional; GROW_NONE
 * keeps the layout): rep->parts gets the plan's partitions with their new
 * starts and sizes, which later writes follow.  Returns 0 or negative
 * errno. */
int writer_start(struct writer *w, const struct disk_roots *roots, const char *target,
		 const struct disk_plan *pl, const struct target_opts *o, struct grow_report *rep,
		 struct im_err *err);
/* Before the data: is there room for bytes more on the filesystem holding
 * a new image file the writer created (sparse: it costs what is written,
 * plus qcow2's tables)?  Refused with both sizes (IM_EXIT_IO, -ENOSPC:
 * writer_end then removes the file); block devices, existing files and
 * preallocated ones (whose space is taken) pass. */
int writer_check_room(struct writer *w, uint64_t bytes, struct im_err *err);
/* Write len bytes (data, or zeros when data is NULL) at off inside
 * partition i.  A full filesystem is named with what is free on it. */
int writer_put(struct writer *w, size_t i, uint64_t off, uint64_t len, const void *data,
	       struct im_err *err);
/* The same, but only the part inside partition i's head zone, into the
 * held-back head; nothing reaches the target (--resume: blocks already on
 * it whose head part is written last). */
int writer_put_head(struct writer *w, size_t i, uint64_t off, uint64_t len, const void *data,
		    struct im_err *err);
/* Write the held-back heads, then each boot area of the plan (areas named
 * gpt-backup are moved to the end of a larger target), flush. */
int writer_finish(struct writer *w, const struct disk_plan *pl, struct im_err *err);
/* Close; on failure (ok == false) remove a file the writer created.
 * Returns the close result. */
int writer_close(struct writer *w, bool ok, struct im_err *err);
/* The tail restore and clone share: close the target (removing a created
 * file when the job failed: r < 0), and, when the job succeeded and o->grow
 * laid partitions out again, grow their filesystems (fs: one per
 * partition, see grow_filesystems()).  *info gets the target as opened.
 * Returns r (the job's result so far) or the first error after it. */
int writer_end(struct writer *w, int r, const struct target_opts *o, const struct grow_fs *fs,
	       struct grow_report *rep, struct target_info *info, struct im_err *err);

/* The size the target will have (an existing device or image file's,
 * --size for a new file, else the source's): 0, or negative errno. */
int writer_target_size(const struct disk_roots *roots, const char *target,
		       const struct target_opts *o, uint64_t source_size, uint64_t *size,
		       struct im_err *err);

#endif
