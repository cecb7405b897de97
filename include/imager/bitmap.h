/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A fixed-size bit set: one bit per filesystem block. */
#ifndef IMAGER_BITMAP_H
#define IMAGER_BITMAP_H

#include <stdbool.h>
#include <stdint.h>

struct bitmap {
	uint64_t nbits;
	uint64_t *words;
};

/* Allocate nbits clear bits.  Returns 0 or -ENOMEM (also for sizes that do
 * not fit in memory). */
int bitmap_init(struct bitmap *b, uint64_t nbits);
void bitmap_free(struct bitmap *b);
/* Set [first, first+count); returns -EINVAL (nothing set) when outside. */
int bitmap_set_range(struct bitmap *b, uint64_t first, uint64_t count);
bool bitmap_test(const struct bitmap *b, uint64_t n);
/* Number of set bits. */
uint64_t bitmap_count(const struct bitmap *b);
/* The next run of set bits at or after *pos: on return *pos is its first bit
 * and the result its length; 0 when there is none. */
uint64_t bitmap_next_run(const struct bitmap *b, uint64_t *pos);

#endif
