/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A partition's frame index (partN.idx: records, extents, trailer and its
 * checksum).  The input's first byte picks the partition's block count
 * (1 << (8 + byte % 24)); the rest is the file. */
#include "fuzz.h"

#include "imager/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct img_index ix;
	struct im_err err = { 0 };
	char path[128];

	if (size < 1 || fuzz_file("part1.idx", data + 1, size - 1, path, sizeof(path)) < 0)
		return 0;
	memset(&ix, 0, sizeof(ix));
	if (img_index_read(&ix, path, 1ull << (8 + data[0] % 24), &err) == 0)
		img_index_free(&ix);
	return 0;
}
