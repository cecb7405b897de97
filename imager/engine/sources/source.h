/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: the two ends every copying job shares.
 *
 * A source is a disk, partition, image file or NBD export opened as a
 * container, with its table, boot areas and the used-block bitmap of each
 * partition (save and clone).  A writer puts blocks on a target and holds
 * back the partition table and the first bytes of every partition until the
 * end, so an interrupted job never leaves a target that looks complete
 * (restore and clone). */
#ifndef IMAGER_SOURCE_H
#define IMAGER_SOURCE_H

#include <sys/types.h>

#include "imager/backend.h"
#include "imager/fs.h"
#include "imager/layout.h"
#include "imager/job.h"
#include "imager/pipeline.h"
#include "imager/ptable.h"

struct source {
	struct bk *bk;
	int blkid_fd;               /* raw containers: a descriptor for libblkid */
	struct disk_ref ref;
	struct ptable *pt;
	struct fs_info *fs;         /* one per pt->parts */
	uint64_t used_bytes;        /* sum over partitions */
	char warnings[PT_MAX_PARTS][600];   /* one per partition at most */
	size_t nwarnings;
};

/* Open, read the table, examine every filesystem (refusing unclean ones
 * unless force).  Nothing is written anywhere.  rescue (NULL: none): reads
 * go around unreadable sectors from the first one (the table's), and a
 * partition whose filesystem metadata met one is copied whole by the raw
 * plugin, with a warning (its bitmap could be wrong). */
int source_open(const struct disk_roots *roots, const char *spec, const char *format,
		bool force, const struct rescue_opts *rescue, const struct bk_net *net,
		struct source *s, struct im_err *err);
/* After a rescue: the map written to path (nothing when all was read) and
 * rep filled.  Returns 0 or negative errno. */
int source_rescue_finish(struct source *s, const char *path, const struct rescue_opts *o,
			 struct rescue_report *rep, struct im_err *err);
void source_close(struct source *s);
/* Read one boot area (malloc'ed into *buf). */
int source_read_area(struct source *s, const struct pt_area *a, unsigned char **buf,
		     struct im_err *err);

/* Pipeline pieces reading used blocks of one partition (save, clone). */
struct used_reader {
	struct bk *bk;
	uint64_t base;              /* partition start */
	const struct bitmap *used;
	const struct bitmap *blank; /* used blocks given as zeros, not read (NULL: none) */
	uint32_t bs;
	uint64_t run_pos, run_left; /* cursor */
	uint64_t ahead_pos;         /* used blocks before this were announced */
	uint64_t *bytes_read;
	bool drop_behind;           /* what was read is dropped from the host's
				     * cache (bk_drop) after each slot */
};
/* Extents read into a slot, and the data/zero extents made of them. */
struct used_meta {
	uint32_t nin, nout;
	struct img_frame frame;
	struct img_extent ext[];    /* nin read runs (IMG_EXT_ZERO: blank, not in the
				     * buffer), then nout output extents */
};
size_t used_meta_size(uint32_t blocks_per_slot);
/* Fill slot->a with the next used blocks (at most a_cap bytes' worth; blank
 * blocks count against that but are neither read nor put in slot->a);
 * 1 or 0 at the end. */
int used_read(struct used_reader *u, struct pipe_slot *s, struct im_err *err);
/* Split the slot's runs into data and all-zero extents, packing the data
 * at the start of slot->a; returns the data bytes. */
size_t used_split_zeros(struct pipe_slot *s, uint32_t bs);

/* ---- the writer ---- */

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

/* What a partition holds, for growing it: its libblkid type, and for an
 * LVM PV the LV that ends last on it ("vg0/root"; NULL when none or when it
 * is kept whole), which is extended into the new room. */
struct grow_fs {
	const char *type;
	const char *last_lv;
};

/* The disk restore and clone write, as the source has it, in the source's
 * order: its geometry, each partition (number, kind, start and size: the
 * old and the new layout alike until the writer lays them out again) and
 * what it holds, and each boot area's place, name and bytes (read before a
 * byte is written). */
struct disk_plan {
	uint64_t disk_size;
	char table[16];
	unsigned lss;
	size_t nparts;
	struct layout_part *parts;
	struct grow_fs *fs;
	size_t nareas;
	uint64_t *area_offs, *area_lens;
	const char **area_names;            /* point into the job's table or manifest */
	unsigned char **area_data;          /* owned: freed by disk_plan_free() */
};
/* Room for nparts partitions and nareas boot areas, zeroed.  Returns 0 or
 * -ENOMEM. */
int disk_plan_alloc(struct disk_plan *pl, uint64_t disk_size, const char *table, unsigned lss,
		    size_t nparts, size_t nareas, struct im_err *err);
void disk_plan_set_part(struct disk_plan *pl, size_t i, unsigned number, const char *kind,
			uint64_t start, uint64_t size);
void disk_plan_set_area(struct disk_plan *pl, size_t i, const char *name, uint64_t offset,
			uint64_t length);
void disk_plan_free(struct disk_plan *pl);

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

/* ---- shrinking (shrink.c) ---- */

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

/* The size the target will have (an existing device or image file's,
 * --size for a new file, else the source's): 0, or negative errno. */
int writer_target_size(const struct disk_roots *roots, const char *target,
		       const struct target_opts *o, uint64_t source_size, uint64_t *size,
		       struct im_err *err);

/* The refusal of a target smaller than the source without --shrink, saying
 * whether --shrink would fit it. */
int shrink_refuse(const char *target, uint64_t tsize, uint64_t source_size, const char *table,
		  unsigned lss, const struct shrink_part *in, size_t n, struct im_err *err);

#endif
