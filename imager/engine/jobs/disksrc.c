/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A disk, partition, image file or NBD export as the source of a copy job
 * (copyjob.h): clone's, and the shrink's temporary copy.  Used blocks are
 * read in large runs, split into data and zeros on every core, and written
 * while the next runs are read.
 */
#include "copyjob.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "imager/pipeline.h"
#include "util.h"

struct cpart_job {
	struct used_reader rd;
	uint32_t bs;
	size_t part_index;
	struct copyjob *cj;
};

static int clone_produce(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct cpart_job *j = ctx;
	return used_read(&j->rd, s, err);
}

static int clone_work(void *ctx, void *ws, struct pipe_slot *s)
{
	struct cpart_job *j = ctx;

	(void)ws;
	used_split_zeros(s, j->bs);   /* the consumer writes the extents it made */
	return 0;
}

static int clone_consume(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct cpart_job *j = ctx;
	struct copyjob *cj = j->cj;
	struct used_meta *m = s->meta;
	const struct img_extent *out = m->ext + m->nin;
	const unsigned char *data = s->a;

	if (s->status < 0) {
		*err = s->err;
		return s->status;
	}
	for (uint32_t i = 0; i < m->nout; i++) {
		uint64_t len = (uint64_t)out[i].count * j->bs;
		bool zero = out[i].flags & IMG_EXT_ZERO;
		int r = writer_put(&cj->w, j->part_index, out[i].start * j->bs, len, zero ? NULL : data, err);
		if (r < 0)
			return r;
		if (!zero) {
			data += len;
			cj->written += len;
		}
	}
	for (uint32_t i = 0; i < m->nin; i++)
		cj->done += (uint64_t)m->ext[i].count * j->bs;
	if (m->nin) {
		const struct img_extent *last = &m->ext[m->nin - 1];
		int r = cj_tick(cj, j->part_index, last->start + last->count, err);
		if (r < 0)
			return r;
	}
	cj_progress(cj);
	return 0;
}

/* After the copy: every used block of the source read again and compared
 * with the target, byte for byte. */
static int verify_partition(struct source *src, struct bk *tgt, size_t i, uint64_t tgt_start,
			    struct im_err *err)
{
	const struct pt_part *pp = &src->pt->parts[i];
	const struct fs_info *fs = &src->fs[i];
	const size_t chunk = 4u << 20;
	unsigned char *a = malloc(chunk), *b = malloc(chunk);
	uint64_t pos = 0, len;
	int r = 0;

	if (!a || !b)
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	while (r == 0 && (len = bitmap_next_run(&fs->used, &pos))) {
		uint64_t off = pp->start + pos * fs->block_size, bytes = len * fs->block_size;
		while (r == 0 && bytes) {
			size_t n = bytes < chunk ? (size_t)bytes : chunk;
			r = bk_pread(src->bk, a, n, off, err);
			if (r == 0)
				r = bk_pread(tgt, b, n, off - pp->start + tgt_start, err);
			if (r == 0 && memcmp(a, b, n))
				r = im_errf(err, IM_EXIT_IO, -EIO,
					    "verify: partition %u: the target differs from the source in the %zu bytes at %llu",
					    pp->number, n, (unsigned long long)off);
			off += n;
			bytes -= n;
		}
		pos += len;
	}
	free(a);
	free(b);
	return r;
}

/* The plan of the source's disk: its partitions as they are, what each
 * holds, and its boot areas read (*bytes_read counts them). */
static int plan_from_source(struct source *src, struct disk_plan *pl, uint64_t *bytes_read,
			    struct im_err *err)
{
	const struct ptable *pt = src->pt;
	int r = disk_plan_alloc(pl, pt->disk_size, pt->type, pt->sector_size, pt->nparts,
				pt->nareas, err);

	for (size_t i = 0; i < pt->nareas && r == 0; i++) {
		const struct pt_area *a = &pt->areas[i];

		r = source_read_area(src, a, &pl->area_data[i], err);
		if (r < 0)
			return r;
		disk_plan_set_area(pl, i, a->name, a->offset, a->length);
		*bytes_read += a->length;
	}
	for (size_t i = 0; i < pt->nparts && r == 0; i++) {
		const struct pt_part *p = &pt->parts[i];
		const struct fs_info *fs = &src->fs[i];

		disk_plan_set_part(pl, i, p->number, p->kind, p->start, p->size);
		grow_fs_set(&pl->fs[i], fs->type, fs->volumes, fs->nvolumes);
	}
	return r;
}

/* The used blocks of partition i from block FROM on through the pipeline
 * onto the target. */
static int clone_partition(struct disksrc *d, size_t i, uint64_t from, struct copyjob *cj,
			   struct im_err *err)
{
	struct source *src = &d->s;
	const struct fs_info *fs = &src->fs[i];
	uint64_t bpf = IMG_FRAME_BLOCKS_BYTES / fs->block_size ? IMG_FRAME_BLOCKS_BYTES / fs->block_size : 1;
	struct cpart_job j = {
		.rd = { .bk = src->bk, .base = src->pt->parts[i].start, .used = &fs->used,
			.bs = fs->block_size, .bytes_read = d->bytes_read },
		.bs = fs->block_size, .part_index = i, .cj = cj,
	};
	const struct pipe_ops ops = { .produce = clone_produce, .work = clone_work,
				      .consume = clone_consume, .cancel = cj->o->progress->cancel };
	int r;

	j.rd.run_pos = j.rd.ahead_pos = from;
	r = pipeline_run(&ops, &j, cj->threads, bpf * fs->block_size, 0,
			 used_meta_size((uint32_t)bpf), err);
	if (r < 0)
		im_err_prefix(err, "partition %u: ", src->pt->parts[i].number);
	return r;
}

/* --resume: the used blocks below block BELOW are on the target already,
 * but the writer writes each partition's head last, from memory: those of
 * them in the head zone are read again into it. */
static int clone_heads(struct source *src, size_t i, uint64_t below, struct writer *w,
		       struct im_err *err)
{
	const struct fs_info *fs = &src->fs[i];
	uint64_t bs = fs->block_size, pos = 0, len;
	uint64_t end = (w->part_head[i] + bs - 1) / bs;
	unsigned char *buf;
	int r = 0;

	if (end > below)
		end = below;
	if (!end)
		return 0;
	buf = malloc(end * bs);
	if (!buf)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	while (r == 0 && pos < end && (len = bitmap_next_run(&fs->used, &pos)) && pos < end) {
		uint64_t n = len < end - pos ? len : end - pos;
		r = bk_pread(src->bk, buf, n * bs, src->pt->parts[i].start + pos * bs, err);
		if (r == 0)
			r = writer_put_head(w, i, pos * bs, n * bs, buf, err);
		pos += n;
	}
	free(buf);
	return r;
}

/* What a clone writes, so that a resume knows its journal is about the same
 * copy: the source's layout and each partition's used blocks, and the
 * target options that move partitions. */
static uint64_t clone_identity(const struct source *src, const struct target_opts *t)
{
	const struct ptable *pt = src->pt;
	XXH3_state_t *st = XXH3_createState();
	uint64_t h, v[8];

	if (!st)
		return 0;
	XXH3_64bits_reset(st);
	v[0] = pt->disk_size;
	v[1] = pt->sector_size;
	v[2] = pt->nparts;
	v[3] = (uint64_t)t->grow;
	v[4] = t->size;
	XXH3_64bits_update(st, v, 5 * sizeof(v[0]));
	XXH3_64bits_update(st, pt->type, strlen(pt->type) + 1);
	for (size_t i = 0; i < pt->nparts; i++) {
		const struct fs_info *fs = &src->fs[i];
		v[0] = pt->parts[i].number;
		v[1] = pt->parts[i].start;
		v[2] = pt->parts[i].size;
		v[3] = fs->block_size;
		v[4] = fs->used.nbits;
		XXH3_64bits_update(st, v, 5 * sizeof(v[0]));
		XXH3_64bits_update(st, fs->type, strlen(fs->type) + 1);
		if (fs->used.words)
			XXH3_64bits_update(st, fs->used.words, (fs->used.nbits + 63) / 64 * 8);
	}
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

/* ---- the source's description ---- */

static int ds_plan(void *ctx, struct disk_plan *pl, uint64_t *total, struct im_err *err)
{
	struct disksrc *d = ctx;

	*total = d->s.used_bytes;
	return plan_from_source(&d->s, pl, d->bytes_read, err);
}

static void ds_shrink_part(void *ctx, size_t i, struct shrink_part *sp)
{
	const struct fs_info *fs = &((struct disksrc *)ctx)->s.fs[i];

	shrink_part_set(sp, fs->type, fs->used_blocks * fs->block_size, fs->volumes, fs->nvolumes);
}

static int ds_identity(void *ctx, const struct target_opts *t, uint64_t *id)
{
	*id = clone_identity(&((struct disksrc *)ctx)->s, t);
	return 0;
}

static int ds_copy(void *ctx, struct copyjob *j, size_t i, uint64_t from, struct im_err *err)
{
	struct disksrc *d = ctx;
	int r = 0;

	if (from)
		r = clone_heads(&d->s, i, from, &j->w, err);
	if (r == 0 && from != UINT64_MAX)
		r = clone_partition(d, i, from, j, err);
	return r;
}

static int ds_verify(void *ctx, struct copyjob *j, struct im_err *err)
{
	struct disksrc *d = ctx;
	int r = 0;

	for (size_t i = 0; r == 0 && i < d->s.pt->nparts; i++) {
		r = verify_partition(&d->s, j->w.tgt, i, j->st->grow->parts[i].new_start, err);
		*d->verified_bytes += d->s.fs[i].used_blocks * d->s.fs[i].block_size;
	}
	return r;
}

int disksrc_open(struct disksrc *d, const struct disk_roots *roots, const char *spec,
		 const char *format, bool force, const struct rescue_opts *rescue,
		 const struct bk_net *net, uint64_t *bytes_read, uint64_t *verified_bytes,
		 struct im_err *err)
{
	memset(d, 0, sizeof(*d));
	d->bytes_read = bytes_read;
	d->verified_bytes = verified_bytes;
	d->cj = (struct cj_source){
		.ctx = d, .what = "clone", .name = spec, .kind = TJNL_CLONE, .resume_skips = true,
		.plan = ds_plan, .shrink_part = ds_shrink_part, .identity = ds_identity,
		.copy = ds_copy, .verify = ds_verify,
	};
	return source_open(roots, spec, format, force, rescue, net, &d->s, err);
}

void disksrc_close(struct disksrc *d)
{
	source_close(&d->s);
}
