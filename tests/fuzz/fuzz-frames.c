/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The frame reader of restore and verify (imager/engine/image/frames.c): an index
 * and its stream, each frame read from the stream (frame_produce), checked
 * and decompressed (frame_work: zstd, sizes, hashes) and placed on the disk
 * (frame_span), with the buffers restore and verify give it.
 *
 * So that mutations reach zstd's decoder instead of stopping at the
 * checksums, the harness makes the checksums agree with the input: each
 * frame record's compressed-data hash is set to the hash of the stream
 * bytes it names (when they exist), the header's stream size to the
 * stream's, and the trailer is computed.  Input:
 *   u8       the partition's block count: 1 << (8 + byte % 24)
 *   u16 LE   L, the index's length without its trailer
 *   L bytes  the index (header, frame records, extents)
 *   rest     the stream
 */
#include "fuzz.h"

#include <fcntl.h>
#include <xxhash.h>
#include <zstd.h>

#include "frames.h"
#include "imager/image.h"

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char *a, *b;
	static ZSTD_DCtx *dctx;
	const size_t raw_cap = IMG_FRAME_BLOCKS_BYTES, comp_cap = ZSTD_compressBound(IMG_FRAME_BLOCKS_BYTES);
	struct img_index ix;
	struct im_err err = { 0 };
	struct frame_meta meta;
	struct pipe_slot slot = { 0 };
	char ipath[128], spath[128];
	const uint8_t *stream;
	size_t ilen, slen;
	uint8_t *idx;
	int fd;

	if (size < 3)
		return 0;
	ilen = (size_t)data[1] | (size_t)data[2] << 8;
	if (ilen < 64 || ilen > size - 3)
		return 0;
	if (!a && (!(a = malloc(comp_cap)) || !(b = malloc(raw_cap)) || !(dctx = ZSTD_createDCtx())))
		abort();
	stream = data + 3 + ilen;
	slen = size - 3 - ilen;

	/* the index, its checksums made to agree with the stream */
	idx = malloc(ilen + 8);
	if (!idx)
		return 0;
	memcpy(idx, data + 3, ilen);
	put64(idx + 32, slen);
	for (uint64_t i = 0, n = get64(idx + 16); i < n && 64 + (i + 1) * 48 <= ilen; i++) {
		uint8_t *rec = idx + 64 + i * 48;
		uint64_t off = get64(rec);
		uint32_t len = (uint32_t)(get64(rec + 8) & 0xffffffffu);
		if (off <= slen && len <= slen - off)
			put64(rec + 40, XXH3_64bits(stream + off, len));
	}
	put64(idx + ilen, XXH3_64bits(idx, ilen));
	if (fuzz_file("part1.idx", idx, ilen + 8, ipath, sizeof(ipath)) < 0 ||
	    fuzz_file("part1.zst", stream, slen, spath, sizeof(spath)) < 0) {
		free(idx);
		return 0;
	}
	free(idx);

	memset(&ix, 0, sizeof(ix));
	if (img_index_read(&ix, ipath, 1ull << (8 + data[0] % 24), &err) < 0)
		return 0;
	fd = open(spath, O_RDONLY);
	if (fd >= 0) {
		struct frame_reader fr = { .ix = &ix, .fd = fd };
		slot.a = a;
		slot.b = b;
		slot.a_cap = comp_cap;
		slot.b_cap = ix.block_size > raw_cap ? 0 : raw_cap;
		slot.meta = &meta;
		while (slot.b_cap && frame_produce(&fr, &slot) == 1) {
			uint64_t off, len;
			frame_work(&ix, dctx, &slot);
			frame_span(&ix, &ix.frames[meta.frame], 1 << 20, &off, &len);
		}
		close(fd);
	}
	img_index_free(&ix);
	return 0;
}
