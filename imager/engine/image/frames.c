/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Reading frames back: shared by restore and verify. */
#include "frames.h"

#include <archive.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "util.h"

int frame_decode(ZSTD_DCtx *dctx, const struct img_frame *f, const void *comp,
		 void *raw, size_t raw_cap, char *what, size_t whatlen)
{
	unsigned long long content;
	size_t n;

	if (XXH3_64bits(comp, f->comp_size) != f->comp_xxh3) {
		snprintf(what, whatlen, "compressed data checksum mismatch");
		return -EBADMSG;
	}
	content = ZSTD_getFrameContentSize(comp, f->comp_size);
	if (content != f->raw_size || f->raw_size > raw_cap) {
		snprintf(what, whatlen, "frame header disagrees with the index");
		return -EBADMSG;
	}
	n = ZSTD_decompressDCtx(dctx, raw, raw_cap, comp, f->comp_size);
	if (ZSTD_isError(n)) {
		snprintf(what, whatlen, "cannot decompress: %s", ZSTD_getErrorName(n));
		return -EBADMSG;
	}
	if (n != f->raw_size || XXH3_64bits(raw, n) != f->raw_xxh3) {
		snprintf(what, whatlen, "data checksum mismatch");
		return -EBADMSG;
	}
	return 0;
}

int frame_span(const struct img_index *ix, const struct img_frame *f, uint64_t part_start,
	       uint64_t *off, uint64_t *len)
{
	const struct img_extent *first, *last;

	if (!f->nextents) {
		*off = part_start;
		*len = 0;
		return 0;
	}
	first = &ix->extents[f->first_extent];
	last = &ix->extents[f->first_extent + f->nextents - 1];
	*off = part_start + first->start * ix->block_size;
	*len = (last->start + last->count - first->start) * ix->block_size;
	return 0;
}

int image_check_part_files(const char *dir, const struct img_part *p, struct img_index *ix,
			   bool check_stream, struct im_err *err)
{
	char path[4200];
	uint64_t size, h;
	struct stat st;
	int r;

	if ((r = path_join_err(path, sizeof(path), dir, p->index, err)) < 0)
		return r;
	r = img_hash_file(path, &size, &h);
	if (r < 0)
		return im_errf(err, IM_EXIT_DAMAGED, r, "partition %u: %s: %s", p->number, path,
			       r == -ENOENT ? "missing" : strerror(-r));
	if (size != p->index_size || h != p->index_xxh3)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "partition %u: %s does not match the manifest (damaged or replaced)",
			       p->number, p->index);
	r = img_index_read(ix, path, p->block_count, err);
	if (r < 0) {
		im_err_prefix(err, "partition %u: ", p->number);
		return r;
	}
	if (ix->block_size != p->block_size || ix->nframes != p->frames ||
	    ix->stream_size != p->stream_size ||
	    ix->data_blocks + ix->zero_blocks != p->used_blocks || ix->zero_blocks != p->zero_blocks) {
		img_index_free(ix);
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "partition %u: the index and the manifest disagree", p->number);
	}
	if (!check_stream)
		return 0;
	if ((r = path_join_err(path, sizeof(path), dir, p->stream, err)) < 0) {
		img_index_free(ix);
		return r;
	}
	if (stat(path, &st) < 0) {
		img_index_free(ix);
		return im_errf(err, IM_EXIT_DAMAGED, -errno, "partition %u: %s: %s", p->number,
			       path, strerror(errno));
	}
	if ((uint64_t)st.st_size != p->stream_size) {
		img_index_free(ix);
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "partition %u: %s is %llu bytes, the manifest says %llu (%s)",
			       p->number, p->stream, (unsigned long long)st.st_size,
			       (unsigned long long)p->stream_size,
			       (uint64_t)st.st_size < p->stream_size ? "truncated" : "extra data");
	}
	return 0;
}

int image_read_area(const char *dir, const struct img_area *a, unsigned char **buf,
		    struct im_err *err)
{
	char path[4200];
	size_t len;
	int r;

	if ((r = path_join_err(path, sizeof(path), dir, a->file, err)) < 0)
		return r;
	r = util_read_whole_file(path, buf, &len, a->length);
	if (r < 0)
		return im_errf(err, IM_EXIT_DAMAGED, r, "boot area %s: %s: %s", a->name, path,
			       r == -EFBIG ? "larger than the manifest says" : strerror(-r));
	if (len != a->length || XXH3_64bits(*buf, len) != a->xxh3) {
		free(*buf);
		*buf = NULL;
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "boot area %s (%s) is damaged: checksum or size mismatch", a->name, a->file);
	}
	return 0;
}

/* len bytes of the tar entry being read into buf (NULL: skipped). */
static int entry_read(struct frame_reader *fr, unsigned char *buf, uint64_t len)
{
	unsigned char skip[65536];

	while (len) {
		size_t n = buf ? len : (len < sizeof(skip) ? len : sizeof(skip));
		la_ssize_t k = archive_read_data(fr->ar, buf ? buf : skip, n);
		if (k == 0)
			return -EIO;
		if (k < 0)
			return -EPIPE;
		fr->pos += (uint64_t)k;
		len -= (uint64_t)k;
		if (buf)
			buf += k;
	}
	return 0;
}

/* The frame's bytes from the tar entry: what lies before its offset
 * skipped, frames in the stream's order only. */
static int stream_read(struct frame_reader *fr, unsigned char *buf, const struct img_frame *f)
{
	int r;

	if (f->comp_offset < fr->pos)
		return -EBADMSG;
	if ((r = entry_read(fr, NULL, f->comp_offset - fr->pos)) < 0)
		return r;
	return entry_read(fr, buf, f->comp_size);
}

int frame_produce(struct frame_reader *fr, struct pipe_slot *s)
{
	struct frame_meta *m = s->meta;
	const struct img_frame *f;
	int r;

	if (fr->next >= fr->ix->nframes)
		return 0;
	f = &fr->ix->frames[fr->next];
	m->frame = fr->next++;
	m->damaged = false;
	m->what[0] = '\0';
	r = fr->ar ? stream_read(fr, s->a, f) : util_pread_full(fr->fd, s->a, f->comp_size, f->comp_offset);
	if (r < 0) {
		m->damaged = true;
		snprintf(m->what, sizeof(m->what), "%s",
			 r == -EIO    ? "missing: the stream ends before it (truncated)" :
			 r == -EBADMSG ? "the index's frames are not in the stream's order" :
			 r == -EPIPE  ? "the stream could not be read on" : strerror(-r));
		if (r == -EPIPE && fr->ar && archive_error_string(fr->ar))
			snprintf(m->what, sizeof(m->what), "the stream could not be read on: %.100s",
				 archive_error_string(fr->ar));
	}
	s->a_len = f->comp_size;
	return 1;
}

void frame_work(const struct img_index *ix, void *dctx, struct pipe_slot *s)
{
	struct frame_meta *m = s->meta;

	if (!m->damaged && frame_decode(dctx, &ix->frames[m->frame], s->a, s->b, s->b_cap, m->what,
					sizeof(m->what)) < 0)
		m->damaged = true;
}

void *frame_dctx_new(void *ctx)
{
	(void)ctx;
	return ZSTD_createDCtx();
}

void frame_dctx_free(void *ctx, void *dctx)
{
	(void)ctx;
	ZSTD_freeDCtx(dctx);
}
