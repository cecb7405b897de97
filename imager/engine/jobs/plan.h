/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: the disk a copy job writes (plan.c). */
#ifndef IMAGER_PLAN_H
#define IMAGER_PLAN_H

#include "imager/layout.h"
#include "grow.h"

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

#endif
