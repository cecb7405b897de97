/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: what a copying job reads.
 *
 * A source is a disk, partition, image file or NBD export opened as a
 * container, with its table, boot areas and the used-block bitmap of each
 * partition (save and clone).  What it is written to: jobs/writer.h. */
#ifndef IMAGER_SOURCE_H
#define IMAGER_SOURCE_H

#include <sys/types.h>

#include "imager/backend.h"
#include "imager/disk.h"
#include "imager/fs.h"
#include "imager/image.h"
#include "imager/layout.h"
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

#endif
