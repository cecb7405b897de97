/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Bitmap math: ranges across word edges, counting, runs. */
#include <errno.h>

#include "imager/bitmap.h"
#include "unit.h"

static void test_ranges_and_count(void)
{
	struct bitmap b;

	CHECK(bitmap_init(&b, 1000) == 0);
	CHECK_EQ_U(bitmap_count(&b), 0);
	CHECK(bitmap_set_range(&b, 3, 5) == 0);      /* inside one word */
	CHECK(bitmap_set_range(&b, 60, 10) == 0);    /* across a word edge */
	CHECK(bitmap_set_range(&b, 128, 256) == 0);  /* whole words */
	CHECK(bitmap_set_range(&b, 999, 1) == 0);    /* the last bit */
	CHECK_EQ_U(bitmap_count(&b), 5 + 10 + 256 + 1);
	CHECK(!bitmap_test(&b, 2) && bitmap_test(&b, 3) && bitmap_test(&b, 7) && !bitmap_test(&b, 8));
	CHECK(bitmap_test(&b, 63) && bitmap_test(&b, 64) && bitmap_test(&b, 69) && !bitmap_test(&b, 70));
	CHECK(!bitmap_test(&b, 1000));               /* outside: false, no crash */
	CHECK(bitmap_set_range(&b, 990, 11) == -EINVAL);
	CHECK(bitmap_set_range(&b, 1001, 0) == -EINVAL);
	CHECK(bitmap_set_range(&b, UINT64_MAX, 2) == -EINVAL);
	CHECK(!bitmap_test(&b, 995));                /* nothing set by a refused range */
	bitmap_free(&b);
}

static void test_runs(void)
{
	struct bitmap b;
	uint64_t pos = 0, len;

	CHECK(bitmap_init(&b, 300) == 0);
	bitmap_set_range(&b, 0, 1);
	bitmap_set_range(&b, 63, 66);   /* 63..128 */
	bitmap_set_range(&b, 200, 100); /* to the end */
	len = bitmap_next_run(&b, &pos);
	CHECK_EQ_U(pos, 0);
	CHECK_EQ_U(len, 1);
	pos += len;
	len = bitmap_next_run(&b, &pos);
	CHECK_EQ_U(pos, 63);
	CHECK_EQ_U(len, 66);
	pos += len;
	len = bitmap_next_run(&b, &pos);
	CHECK_EQ_U(pos, 200);
	CHECK_EQ_U(len, 100);
	pos += len;
	CHECK_EQ_U(bitmap_next_run(&b, &pos), 0);
	bitmap_free(&b);
}

static void test_huge_refused(void)
{
	struct bitmap b;
	/* 2^64 bits cannot be allocated; must fail cleanly, not overflow. */
	CHECK(bitmap_init(&b, UINT64_MAX) == -ENOMEM);
	CHECK(b.words == NULL);
}

UNIT_MAIN(UNIT(test_ranges_and_count), UNIT(test_runs), UNIT(test_huge_refused))
