/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Planning layouts on larger targets: bounds, alignment, no overlap, EBR room. */
#include <errno.h>
#include <string.h>

#include "imager/layout.h"
#include "unit.h"

#define MIB (1ull << 20)

static void set(struct layout_part *p, unsigned n, const char *kind, uint64_t start, uint64_t size)
{
	memset(p, 0, sizeof(*p));
	p->number = n;
	strcpy(p->kind, kind);
	p->old_start = start;
	p->old_size = size;
}

static void check_sane(const struct layout_part *p, size_t n, uint64_t end)
{
	for (size_t i = 0; i < n; i++) {
		CHECK(p[i].new_start % MIB == 0);
		CHECK(p[i].new_size >= p[i].old_size);
		CHECK(p[i].new_start + p[i].new_size <= end);
		if (i) {
			uint64_t old_gap = p[i].old_start - (p[i - 1].old_start + p[i - 1].old_size);
			CHECK(p[i].new_start >= p[i - 1].new_start + p[i - 1].new_size + old_gap);
		}
	}
}

static void test_grow_last_gpt(void)
{
	struct layout_part p[3];
	struct im_err err = { 0 };
	uint64_t disk = 300 * MIB, target = 600 * MIB;

	set(&p[0], 1, "gpt", 1 * MIB, 1 * MIB);
	set(&p[1], 2, "gpt", 2 * MIB, 148 * MIB);
	set(&p[2], 3, "gpt", 150 * MIB, 149 * MIB);
	CHECK(layout_plan(GROW_LAST, "gpt", 512, disk, target, p, 3, &err) == 0);
	CHECK_EQ_U(p[0].new_size, p[0].old_size);
	CHECK_EQ_U(p[1].new_start, p[1].old_start);
	CHECK_EQ_U(p[2].new_start, p[2].old_start);
	/* To the last whole MiB before the backup GPT (34 sectors). */
	CHECK_EQ_U(p[2].new_start + p[2].new_size, 599 * MIB);
	CHECK(layout_changed(p, 3));
	check_sane(p, 3, target - 34 * 512);
}

static void test_proportional_mbr_logical(void)
{
	struct layout_part p[3];
	struct im_err err = { 0 };
	uint64_t disk = 512 * MIB, target = 1024 * MIB;

	set(&p[0], 1, "primary", 1 * MIB, 199 * MIB);
	set(&p[1], 5, "logical", 201 * MIB, 99 * MIB);   /* EBR 1 MiB before */
	set(&p[2], 6, "logical", 301 * MIB, 99 * MIB);
	CHECK(layout_plan(GROW_PROPORTIONAL, "msdos", 512, disk, target, p, 3, &err) == 0);
	CHECK_EQ_U(p[0].new_start, 1 * MIB);             /* the first keeps its start */
	/* Every size doubles with the disk (to the MiB), the end keeps its
	 * proportion of free space. */
	for (int i = 0; i < 3; i++)
		CHECK(p[i].new_size >= 2 * p[i].old_size - MIB && p[i].new_size <= 2 * p[i].old_size);
	CHECK(p[2].new_start + p[2].new_size <= target - 200 * MIB);
	check_sane(p, 3, target);
}

static void test_refusals(void)
{
	struct layout_part p[1];
	struct im_err err = { 0 };

	set(&p[0], 0, "whole-disk", 0, 100 * MIB);
	CHECK(layout_plan(GROW_LAST, "none", 512, 100 * MIB, 200 * MIB, p, 1, &err) < 0);
	CHECK_EQ_U(err.exit_class, IM_EXIT_UNSUPP);
	memset(&err, 0, sizeof(err));
	set(&p[0], 1, "gpt", MIB, 98 * MIB);
	CHECK(layout_plan(GROW_LAST, "gpt", 512, 100 * MIB, 100 * MIB, p, 1, &err) < 0);
	CHECK_EQ_U(err.exit_class, IM_EXIT_TARGET);
	/* No mode: nothing moves. */
	CHECK(layout_plan(GROW_NONE, "gpt", 512, 100 * MIB, 900 * MIB, p, 1, &err) == 0);
	CHECK(!layout_changed(p, 1));
}

static void test_mbr_limit(void)
{
	struct layout_part p[1];
	struct im_err err = { 0 };
	uint64_t tib = 1ull << 40;

	set(&p[0], 1, "primary", MIB, 10 * MIB);
	CHECK(layout_plan(GROW_LAST, "msdos", 512, 16 * MIB, 4 * tib, p, 1, &err) == 0);
	/* 32-bit sector counts: an MBR partition ends before 2 TiB. */
	CHECK(p[0].new_start + p[0].new_size <= 0xFFFFFFFFull * 512);
	CHECK(p[0].new_start + p[0].new_size > 2 * tib - 2 * MIB);
}

/* Shrinking: the partition with the most room gives first and only what
 * is missing; the small ones after it move down whole; minimums hold. */
static void test_shrink(void)
{
	struct layout_part p[4];
	struct im_err err = { 0 };
	uint64_t mins[4], needed;

	/* EFI 100 MiB, a 6 GiB root holding 1 GiB, a 2 GiB data partition
	 * holding 1.5 GiB, a 500 MiB recovery: 8 GiB onto 5 GiB. */
	set(&p[0], 1, "gpt", 1 * MIB, 100 * MIB);
	set(&p[1], 2, "gpt", 101 * MIB, 6144 * MIB);
	set(&p[2], 3, "gpt", 6245 * MIB, 2048 * MIB);
	set(&p[3], 4, "gpt", 8293 * MIB, 500 * MIB);
	mins[0] = 100 * MIB;
	mins[1] = 1382 * MIB;
	mins[2] = 1946 * MIB;
	mins[3] = 500 * MIB;
	CHECK(layout_plan_shrink("gpt", 512, 5120 * MIB, p, mins, 4, &needed, &err) == 0);
	CHECK_EQ_U(p[0].new_start, 1 * MIB);
	CHECK_EQ_U(p[0].new_size, 100 * MIB);
	CHECK_EQ_U(p[2].new_size, 2048 * MIB);        /* untouched: the root had room */
	CHECK_EQ_U(p[3].new_size, 500 * MIB);
	CHECK(p[1].new_size < 6144 * MIB && p[1].new_size >= mins[1]);
	for (int i = 1; i < 4; i++) {
		CHECK_EQ_U(p[i].new_start, p[i - 1].new_start + p[i - 1].new_size);
		CHECK(p[i].new_start % MIB == 0 && p[i].new_size % MIB == 0);
	}
	/* Tight: the last MiB before the backup GPT is used, no more. */
	CHECK(p[3].new_start + p[3].new_size <= 5120 * MIB - 34 * 512);
	CHECK(p[3].new_start + p[3].new_size > 5118 * MIB);
	CHECK_EQ_U(needed, (1 + 100 + 1382 + 1946 + 500) * MIB + 1 * MIB);

	/* Too small: refused with the smallest disk named. */
	set(&p[0], 1, "gpt", 1 * MIB, 100 * MIB);
	set(&p[1], 2, "gpt", 101 * MIB, 6144 * MIB);
	set(&p[2], 3, "gpt", 6245 * MIB, 2048 * MIB);
	set(&p[3], 4, "gpt", 8293 * MIB, 500 * MIB);
	CHECK(layout_plan_shrink("gpt", 512, 3 * 1024 * MIB, p, mins, 4, &needed, &err) == -ENOSPC);
	CHECK_EQ_U(err.exit_class, IM_EXIT_TARGET);
	CHECK_EQ_U(needed, 3930 * MIB);

	/* MBR logical partitions keep the gap before them (their EBR). */
	memset(&err, 0, sizeof(err));
	set(&p[0], 1, "primary", 1 * MIB, 900 * MIB);
	set(&p[1], 5, "logical", 902 * MIB, 100 * MIB);
	mins[0] = 100 * MIB;
	mins[1] = 100 * MIB;
	CHECK(layout_plan_shrink("msdos", 512, 600 * MIB, p, mins, 2, &needed, &err) == 0);
	CHECK_EQ_U(p[1].new_start - (p[0].new_start + p[0].new_size), 1 * MIB);
	CHECK_EQ_U(p[1].new_start + p[1].new_size, 600 * MIB);

	/* MBR primaries: the end of the disk is usable to the last MiB. */
	mins[0] = 100 * MIB;
	set(&p[0], 1, "primary", 1 * MIB, 100 * MIB);
	set(&p[1], 2, "primary", 101 * MIB, 900 * MIB);
	CHECK(layout_plan_shrink("msdos", 512, 600 * MIB, p, mins, 2, &needed, &err) == 0);
	CHECK_EQ_U(p[1].new_start + p[1].new_size, 600 * MIB);
}

UNIT_MAIN(UNIT(test_grow_last_gpt), UNIT(test_proportional_mbr_logical), UNIT(test_refusals),
	  UNIT(test_mbr_limit), UNIT(test_shrink))
