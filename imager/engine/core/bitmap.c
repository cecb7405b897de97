/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "imager/bitmap.h"

#include <errno.h>
#include <stdlib.h>

int bitmap_init(struct bitmap *b, uint64_t nbits)
{
	uint64_t nwords = nbits / 64 + 1;

	b->nbits = 0;
	b->words = NULL;
	/* 2^37 bits (a 16 GiB bitmap) covers 512 PiB in 4 KiB blocks: anything
	 * larger comes from a lying superblock, not from a disk. */
	if (nbits > (1ull << 37) || nwords > SIZE_MAX / sizeof(uint64_t))
		return -ENOMEM;
	b->words = calloc((size_t)nwords, sizeof(uint64_t));
	if (!b->words)
		return -ENOMEM;
	b->nbits = nbits;
	return 0;
}

void bitmap_free(struct bitmap *b)
{
	free(b->words);
	b->words = NULL;
	b->nbits = 0;
}

int bitmap_set_range(struct bitmap *b, uint64_t first, uint64_t count)
{
	uint64_t end;

	if (first > b->nbits || count > b->nbits - first)
		return -EINVAL;
	end = first + count;
	while (first < end && (first & 63)) {
		b->words[first / 64] |= 1ull << (first & 63);
		first++;
	}
	while (end - first >= 64) {
		b->words[first / 64] = ~0ull;
		first += 64;
	}
	while (first < end) {
		b->words[first / 64] |= 1ull << (first & 63);
		first++;
	}
	return 0;
}

bool bitmap_test(const struct bitmap *b, uint64_t n)
{
	if (n >= b->nbits)
		return false;
	return (b->words[n / 64] >> (n & 63)) & 1;
}

uint64_t bitmap_count(const struct bitmap *b)
{
	uint64_t total = 0;

	for (uint64_t i = 0; i < b->nbits / 64; i++)
		total += (uint64_t)__builtin_popcountll(b->words[i]);
	if (b->nbits & 63) {
		uint64_t mask = (1ull << (b->nbits & 63)) - 1;
		total += (uint64_t)__builtin_popcountll(b->words[b->nbits / 64] & mask);
	}
	return total;
}

/* First bit at or after pos whose value is `want`, or nbits. */
static uint64_t find_bit(const struct bitmap *b, uint64_t pos, bool want)
{
	while (pos < b->nbits) {
		uint64_t w = b->words[pos / 64];
		if (!want)
			w = ~w;
		w &= ~0ull << (pos & 63);
		if (w) {
			uint64_t found = (pos & ~63ull) + (uint64_t)__builtin_ctzll(w);
			return found < b->nbits ? found : b->nbits;
		}
		pos = (pos & ~63ull) + 64;
	}
	return b->nbits;
}

uint64_t bitmap_next_run(const struct bitmap *b, uint64_t *pos)
{
	uint64_t start = find_bit(b, *pos, true);
	uint64_t end;

	if (start >= b->nbits) {
		*pos = b->nbits;
		return 0;
	}
	end = find_bit(b, start, false);
	*pos = start;
	return end - start;
}
