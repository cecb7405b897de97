/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The per-partition frame index (format in include/imager/image.h). */
#include "imager/image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "util.h"

void img_index_init(struct img_index *ix, uint32_t block_size)
{
	memset(ix, 0, sizeof(*ix));
	ix->block_size = block_size;
}

void img_index_free(struct img_index *ix)
{
	free(ix->frames);
	free(ix->extents);
	memset(ix, 0, sizeof(*ix));
}

int img_index_add(struct img_index *ix, const struct img_frame *f,
		  const struct img_extent *ext, uint32_t next)
{
	if (ix->nframes == ix->frames_cap) {
		size_t cap = ix->frames_cap ? ix->frames_cap * 2 : 256;
		void *p = realloc(ix->frames, cap * sizeof(*ix->frames));
		if (!p)
			return -ENOMEM;
		ix->frames = p;
		ix->frames_cap = cap;
	}
	if (ix->nextents + next > ix->extents_cap) {
		size_t cap = ix->extents_cap ? ix->extents_cap : 1024;
		void *p;
		while (cap < ix->nextents + next)
			cap *= 2;
		p = realloc(ix->extents, cap * sizeof(*ix->extents));
		if (!p)
			return -ENOMEM;
		ix->extents = p;
		ix->extents_cap = cap;
	}
	ix->frames[ix->nframes] = *f;
	ix->frames[ix->nframes].first_extent = ix->nextents;
	ix->frames[ix->nframes].nextents = next;
	memcpy(ix->extents + ix->nextents, ext, next * sizeof(*ext));
	for (uint32_t i = 0; i < next; i++) {
		if (ext[i].flags & IMG_EXT_ZERO)
			ix->zero_blocks += ext[i].count;
		else
			ix->data_blocks += ext[i].count;
	}
	ix->nframes++;
	ix->nextents += next;
	ix->stream_size = f->comp_offset + f->comp_size;
	return 0;
}

int img_index_write(const struct img_index *ix, const char *path, uint64_t *size,
		    uint64_t *xxh3, struct im_err *err)
{
	size_t len = IMG_INDEX_HEADER + ix->nframes * IMG_INDEX_FRAME +
		     ix->nextents * IMG_INDEX_EXTENT + 8;
	unsigned char *buf = calloc(1, len), *p;
	uint64_t h;
	int r;

	if (!buf)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	memcpy(buf, IMG_INDEX_MAGIC, 8);
	put_le32(buf + 8, 1);
	put_le32(buf + 12, ix->block_size);
	put_le64(buf + 16, ix->nframes);
	put_le64(buf + 24, ix->nextents);
	put_le64(buf + 32, ix->stream_size);
	put_le64(buf + 40, ix->data_blocks);
	put_le64(buf + 48, ix->zero_blocks);
	p = buf + IMG_INDEX_HEADER;
	for (uint64_t i = 0; i < ix->nframes; i++, p += IMG_INDEX_FRAME) {
		const struct img_frame *f = &ix->frames[i];
		put_le64(p, f->comp_offset);
		put_le32(p + 8, f->comp_size);
		put_le32(p + 12, f->raw_size);
		put_le64(p + 16, f->first_extent);
		put_le32(p + 24, f->nextents);
		put_le64(p + 32, f->raw_xxh3);
		put_le64(p + 40, f->comp_xxh3);
	}
	for (uint64_t i = 0; i < ix->nextents; i++, p += IMG_INDEX_EXTENT) {
		put_le64(p, ix->extents[i].start);
		put_le32(p + 8, ix->extents[i].count);
		put_le32(p + 12, ix->extents[i].flags);
	}
	h = XXH3_64bits(buf, len - 8);
	put_le64(p, h);
	*size = len;
	*xxh3 = XXH3_64bits(buf, len);
	r = util_write_file_atomic(path, buf, len);
	free(buf);
	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "writing %s: %s", path, strerror(-r));
	return 0;
}

int img_index_read(struct img_index *ix, const char *path, uint64_t block_count,
		   struct im_err *err)
{
	unsigned char *buf = NULL, *p;
	uint64_t nframes, nextents, expect, pos = 0, prev_end = 0, data = 0, zero = 0;
	size_t len;
	int r;

	memset(ix, 0, sizeof(*ix));
	r = util_read_whole_file(path, &buf, &len, 1ull << 34);
	if (r < 0)
		return im_errf(err, r == -ENOENT ? IM_EXIT_DAMAGED : IM_EXIT_IO, r,
			       "%s: %s", path, r == -EFBIG ? "implausibly large" : strerror(-r));
#define BAD(...) do { r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, __VA_ARGS__); goto fail; } while (0)
	if (len < IMG_INDEX_HEADER + 8 || memcmp(buf, IMG_INDEX_MAGIC, 8))
		BAD("%s: not a frame index", path);
	if (XXH3_64bits(buf, len - 8) != le64(buf + len - 8))
		BAD("%s: index checksum mismatch (the index is damaged)", path);
	if (le32(buf + 8) != 1)
		BAD("%s: index version %u not supported", path, le32(buf + 8));
	ix->block_size = le32(buf + 12);
	nframes = le64(buf + 16);
	nextents = le64(buf + 24);
	ix->stream_size = le64(buf + 32);
	if (nframes > len / IMG_INDEX_FRAME || nextents > len / IMG_INDEX_EXTENT)
		BAD("%s: record counts larger than the file", path);
	expect = IMG_INDEX_HEADER + nframes * IMG_INDEX_FRAME + nextents * IMG_INDEX_EXTENT + 8;
	if (expect != len)
		BAD("%s: record counts disagree with the file size", path);
	if (ix->block_size < 512 || ix->block_size > (1u << 20) ||
	    (ix->block_size & (ix->block_size - 1)))
		BAD("%s: block size %u is not valid", path, ix->block_size);
	ix->frames = calloc(nframes ? nframes : 1, sizeof(*ix->frames));
	ix->extents = calloc(nextents ? nextents : 1, sizeof(*ix->extents));
	if (!ix->frames || !ix->extents) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto fail;
	}
	ix->nframes = nframes;
	ix->nextents = nextents;
	p = buf + IMG_INDEX_HEADER + nframes * IMG_INDEX_FRAME;
	for (uint64_t i = 0; i < nextents; i++, p += IMG_INDEX_EXTENT) {
		struct img_extent *e = &ix->extents[i];
		e->start = le64(p);
		e->count = le32(p + 8);
		e->flags = le32(p + 12);
		if (e->count == 0 || e->flags & ~IMG_EXT_ZERO || e->start < pos ||
		    e->start > block_count || e->count > block_count - e->start)
			BAD("%s: extent %llu is out of order or outside the filesystem", path,
			    (unsigned long long)i);
		pos = e->start + e->count;
	}
	p = buf + IMG_INDEX_HEADER;
	for (uint64_t i = 0, next_extent = 0; i < nframes; i++, p += IMG_INDEX_FRAME) {
		struct img_frame *f = &ix->frames[i];
		uint64_t bytes = 0;
		f->comp_offset = le64(p);
		f->comp_size = le32(p + 8);
		f->raw_size = le32(p + 12);
		f->first_extent = le64(p + 16);
		f->nextents = le32(p + 24);
		f->raw_xxh3 = le64(p + 32);
		f->comp_xxh3 = le64(p + 40);
		if (f->comp_offset != prev_end || f->raw_size > IMG_FRAME_BLOCKS_BYTES ||
		    f->comp_size > ZSTD_compressBound(IMG_FRAME_BLOCKS_BYTES) ||
		    f->first_extent != next_extent || f->nextents > nextents - next_extent)
			BAD("%s: frame %llu record is not consistent", path, (unsigned long long)i);
		for (uint32_t k = 0; k < f->nextents; k++) {
			const struct img_extent *e = &ix->extents[f->first_extent + k];
			if (e->flags & IMG_EXT_ZERO) {
				zero += e->count;
			} else {
				bytes += (uint64_t)e->count * ix->block_size;
				data += e->count;
			}
		}
		if (bytes != f->raw_size)
			BAD("%s: frame %llu extents hold %llu bytes, the frame %u", path,
			    (unsigned long long)i, (unsigned long long)bytes, f->raw_size);
		prev_end = f->comp_offset + f->comp_size;
		next_extent += f->nextents;
	}
	if (prev_end != ix->stream_size)
		BAD("%s: frames end at %llu, the stream is %llu bytes", path,
		    (unsigned long long)prev_end, (unsigned long long)ix->stream_size);
	if (data != le64(buf + 40) || zero != le64(buf + 48))
		BAD("%s: block totals disagree with the extents", path);
	ix->data_blocks = data;
	ix->zero_blocks = zero;
#undef BAD
	free(buf);
	return 0;
fail:
	free(buf);
	img_index_free(ix);
	return r;
}
