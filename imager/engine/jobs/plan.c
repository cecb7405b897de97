// SPDX-License-Identifier: GPL-2.0-or-later
/* The disk a copy job writes: its partitions and boot areas (plan.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "util.h"

int disk_plan_alloc(struct disk_plan *pl, uint64_t disk_size, const char *table, unsigned lss,
		    size_t nparts, size_t nareas, struct im_err *err)
{
	memset(pl, 0, sizeof(*pl));
	pl->disk_size = disk_size;
	snprintf(pl->table, sizeof(pl->table), "%s", table);
	pl->lss = lss;
	pl->nparts = nparts;
	pl->nareas = nareas;
	pl->parts = calloc(nparts + 1, sizeof(*pl->parts));
	pl->fs = calloc(nparts + 1, sizeof(*pl->fs));
	pl->area_offs = calloc(nareas + 1, sizeof(*pl->area_offs));
	pl->area_lens = calloc(nareas + 1, sizeof(*pl->area_lens));
	pl->area_names = calloc(nareas + 1, sizeof(*pl->area_names));
	pl->area_data = calloc(nareas + 1, sizeof(*pl->area_data));
	if (!pl->parts || !pl->fs || !pl->area_offs || !pl->area_lens || !pl->area_names ||
	    !pl->area_data)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	return 0;
}

void disk_plan_set_part(struct disk_plan *pl, size_t i, unsigned number, const char *kind,
			uint64_t start, uint64_t size)
{
	struct layout_part *lp = &pl->parts[i];

	lp->number = number;
	snprintf(lp->kind, sizeof(lp->kind), "%s", kind);
	lp->old_start = lp->new_start = start;
	lp->old_size = lp->new_size = size;
}

void disk_plan_set_area(struct disk_plan *pl, size_t i, const char *name, uint64_t offset,
			uint64_t length)
{
	pl->area_names[i] = name;
	pl->area_offs[i] = offset;
	pl->area_lens[i] = length;
}

void disk_plan_free(struct disk_plan *pl)
{
	for (size_t i = 0; pl->area_data && i < pl->nareas; i++)
		free(pl->area_data[i]);
	free(pl->parts);
	free(pl->fs);
	free(pl->area_offs);
	free(pl->area_lens);
	free(pl->area_names);
	free(pl->area_data);
	memset(pl, 0, sizeof(*pl));
}
