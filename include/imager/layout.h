/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Laying partitions out again on a larger target: grow the last partition
 * to the end (--grow-last), or scale every partition's start and size by
 * the ratio of the disk sizes (--proportional, as Clonezilla's -k1: free
 * space at the end grows in proportion too).  The first partition keeps its start (the boot loader's
 * gap is untouched); starts and sizes stay aligned to 1 MiB; logical
 * partitions keep room for their EBR.  Without a mode the layout is copied as
 * it is.
 */
#ifndef IMAGER_LAYOUT_H
#define IMAGER_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "imager/backend.h"
#include "imager/error.h"

enum grow_mode { GROW_NONE = 0, GROW_LAST, GROW_PROPORTIONAL };

struct layout_part {
	unsigned number;
	char kind[16];                  /* primary, logical, gpt, whole-disk */
	uint64_t old_start, old_size;   /* bytes */
	uint64_t new_start, new_size;
};

/* Plan the new layout of parts[] (sorted by start) for a target of
 * new_disk bytes.  Returns 0, or a negative errno (IM_EXIT_UNSUPP for a
 * whole-disk filesystem or an MBR beyond 2 TiB; IM_EXIT_TARGET when the
 * target is not larger). */
int layout_plan(enum grow_mode mode, const char *table, unsigned lss, uint64_t old_disk,
		uint64_t new_disk, struct layout_part *parts, size_t n, struct im_err *err);

/* Lay parts[] (sorted by start) out on a smaller target of new_disk bytes:
 * each partition at least min_size[i] (its old size when it cannot
 * shrink), the first keeping its start, the others packed after it on
 * 1 MiB boundaries (a logical partition keeping the gap before it, where
 * its EBR lives).  Partitions shrink only as much as the target needs,
 * the one with the most room to give first (so a small partition after a
 * large one usually just moves).  *needed: the
 * smallest disk that holds the smallest layout.  Returns 0, or negative
 * errno: IM_EXIT_TARGET (-ENOSPC) when even the smallest layout does not
 * fit, IM_EXIT_UNSUPP for no table. */
int layout_plan_shrink(const char *table, unsigned lss, uint64_t new_disk,
		       struct layout_part *parts, const uint64_t *min_size, size_t n,
		       uint64_t *needed, struct im_err *err);

/* Does any partition move or change size? */
int layout_changed(const struct layout_part *parts, size_t n);

/* Rewrite the partition table on the target to the new layout: MBR entries
 * (with CHS), the EBR chain (rebuilt at the logical partitions' new places
 * from the source's EBRs, found in the boot areas), or GPT entries and CRCs
 * (primary; the backup follows through ptable_gpt_relocate_backup()).
 * area_*: the source's boot areas (offset, length, bytes). */
int layout_write_table(struct bk *tgt, const char *table, unsigned lss,
		       const struct layout_part *parts, size_t n, size_t nareas,
		       const uint64_t *area_offs, const uint64_t *area_lens,
		       unsigned char *const *area_data, struct im_err *err);

#endif
