/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager clone: disk or image to disk or image in one pass.  Used blocks are
 * read in large runs, split into data and zeros on every core, and written
 * while the next runs are read; no intermediate folder.
 */
#include "imager/job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "imager/pipeline.h"
#include "source.h"
#include "tjournal.h"
#include "util.h"

struct cpart_job {
	struct used_reader rd;
	uint32_t bs;
	size_t part_index;
	struct writer *w;
	uint64_t *bytes_done, bytes_total, *bytes_written;
	const struct im_progress *progress;
	struct tjournal *jn;
	unsigned checkpoint_ms;    /* the least time between two checkpoints */
};

/* The target flushed, then the journal says what is on it.  A journal that
 * cannot be written (its folder read-only or full) costs the resume, not
 * the clone. */
static int checkpoint(struct writer *w, struct tjournal *jn, size_t part, uint64_t block,
		      uint64_t bytes, struct im_err *err)
{
	int r;

	if (!jn->on)
		return 0;
	r = bk_flush(w->tgt, err);
	if (r == 0 && tjournal_write(jn, (uint32_t)part, block, bytes) < 0) {
		jn->on = false;
		unlink(jn->path);
	}
	return r;
}

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
		int r = writer_put(j->w, j->part_index, out[i].start * j->bs, len, zero ? NULL : data, err);
		if (r < 0)
			return r;
		if (!zero) {
			data += len;
			*j->bytes_written += len;
		}
	}
	for (uint32_t i = 0; i < m->nin; i++)
		*j->bytes_done += (uint64_t)m->ext[i].count * j->bs;
	if (m->nin && j->jn->on && mono_ms() - j->jn->written_ms >= j->checkpoint_ms) {
		const struct img_extent *last = &m->ext[m->nin - 1];
		int r = checkpoint(j->w, j->jn, j->part_index, last->start + last->count,
				   *j->bytes_done, err);
		if (r < 0)
			return r;
	}
	if (j->progress->fn)
		j->progress->fn(j->progress->opaque, "clone", *j->bytes_done, j->bytes_total);
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
static int clone_partition(struct source *src, size_t i, uint64_t from, struct writer *w,
			   struct tjournal *jn, const struct clone_opts *opts,
			   struct clone_stats *stats, uint64_t *done, struct im_err *err)
{
	const struct fs_info *fs = &src->fs[i];
	uint64_t bpf = IMG_FRAME_BLOCKS_BYTES / fs->block_size ? IMG_FRAME_BLOCKS_BYTES / fs->block_size : 1;
	struct cpart_job j = {
		.rd = { .bk = src->bk, .base = src->pt->parts[i].start, .used = &fs->used,
			.bs = fs->block_size, .bytes_read = &stats->bytes_read },
		.bs = fs->block_size, .part_index = i, .w = w,
		.bytes_done = done, .bytes_total = src->used_bytes,
		.bytes_written = &stats->bytes_written, .progress = &opts->progress, .jn = jn,
		.checkpoint_ms = opts->checkpoint_ms,
	};
	const struct pipe_ops ops = { .produce = clone_produce, .work = clone_work,
				      .consume = clone_consume, .cancel = opts->progress.cancel };
	int r;

	j.rd.run_pos = j.rd.ahead_pos = from;
	r = pipeline_run(&ops, &j, opts->threads ? opts->threads : pipeline_default_threads(),
			 bpf * fs->block_size, 0, used_meta_size((uint32_t)bpf), err);
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
static uint64_t clone_identity(const struct source *src, const struct clone_opts *opts)
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
	v[3] = (uint64_t)opts->target.grow;
	v[4] = opts->target.size;
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

/* After a rescue: the map written, and each partition's unreadable bytes. */
static int clone_rescue_finish(struct source *src, const struct clone_opts *opts,
			       struct clone_stats *stats, struct im_err *err)
{
	int r = source_rescue_finish(src, opts->rescue.map, &opts->rescue, &stats->rescue, err);

	for (size_t i = 0; r == 0 && i < src->pt->nparts && stats->nrescued < 64; i++) {
		const struct pt_part *pp = &src->pt->parts[i];
		uint64_t bad = bk_rescue_bad_bytes(src->bk, pp->start, pp->size);
		if (!bad)
			continue;
		stats->rescued[stats->nrescued].number = pp->number;
		snprintf(stats->rescued[stats->nrescued].filesystem,
			 sizeof(stats->rescued[0].filesystem), "%s", src->fs[i].type);
		stats->rescued[stats->nrescued++].bytes = bad;
	}
	return r;
}

int im_clone(const struct disk_roots *roots, const char *source, const char *target,
	     const struct clone_opts *opts, struct clone_stats *stats, struct im_err *err)
{
	struct source src;
	struct disk_plan pl = { 0 };
	struct writer w = { 0 };
	struct tjournal jn = { .kind = TJNL_CLONE };
	uint64_t done = 0;
	int r;

	memset(stats, 0, sizeof(*stats));
	if (opts->resume && (opts->rescue.on || opts->target.shrink))
		return im_errf(err, IM_EXIT_USAGE, -EINVAL, "--resume does not combine with %s",
			       opts->rescue.on ? "--rescue (the map would miss what the first run met)"
					       : "--shrink");
	if (opts->resume && !tjournal_path(target, jn.path, sizeof(jn.path)))
		return im_errf(err, IM_EXIT_TARGET, -ENOTSUP,
			       "%s: only a file or a device can be resumed (an NBD export cannot)",
			       target);
	if (opts->resume) {
		const char *fmt = opts->target.format ? opts->target.format : bk_format_from_name(target);
		if (fmt && strcmp(fmt, "raw"))
			return im_errf(err, IM_EXIT_TARGET, -ENOTSUP,
				       "%s: a %s target cannot be resumed, only a raw one (a qcow2's "
				       "tables are written when it closes)", target, fmt);
	}
	r = source_open(roots, source, opts->source_format, opts->force_fs, &opts->rescue, &opts->net,
			&src, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < src.nwarnings; i++)
		snprintf(stats->warnings[stats->nwarnings++], sizeof(stats->warnings[0]), "%s",
			 src.warnings[i]);
	r = plan_from_source(&src, &pl, &stats->bytes_read, err);
	if (r == 0 && src.pt->nparts <= PT_MAX_PARTS) {
		/* A smaller target: refused, or shrunk onto with --shrink. */
		const struct ptable *pt = src.pt;
		struct shrink_part sp[PT_MAX_PARTS];
		struct shrink_job job = {
			.source = source, .source_format = opts->source_format,
			.force_fs = opts->force_fs, .roots = roots, .table = pt->type, .lss = pt->sector_size,
			.parts = sp, .nparts = pt->nparts, .target_spec = target,
			.target = &opts->target, .threads = opts->threads,
			.progress = &opts->progress,
		};
		for (size_t i = 0; i < pt->nparts; i++) {
			sp[i].lp = pl.parts[i];
			snprintf(sp[i].fs, sizeof(sp[i].fs), "%s", src.fs[i].type);
			sp[i].used = src.fs[i].used_blocks * src.fs[i].block_size;
			sp[i].vols = src.fs[i].volumes;
			sp[i].nvols = src.fs[i].nvolumes;
		}
		r = shrink_if_smaller(&job, pt->disk_size, &stats->grow, &stats->target,
				      &stats->bytes_written, err);
		stats->bytes_read += job.bytes_read;
		if (r <= 0) {
			disk_plan_free(&pl);
			source_close(&src);
			return r;
		}
		r = 0;
	}
	if (r == 0 && (opts->journal || opts->resume) && !opts->rescue.on && !opts->target.shrink &&
	    tjournal_path(target, jn.path, sizeof(jn.path))) {
		jn.on = true;
		jn.identity = clone_identity(&src, opts);
	}
	if (r == 0 && opts->resume)
		r = tjournal_read(&jn, (uint32_t)src.pt->nparts, err);
	if (r == 0)
		r = writer_start(&w, roots, target, &pl, &opts->target, &stats->grow, err);
	if (r == 0)
		r = tjournal_start(&jn, opts->resume, target, w.info.format, w.tgt->size, err);
	if (r == 0)
		r = writer_check_room(&w, src.used_bytes, err);
	if (r == 0 && opts->resume) {   /* (every check passed: the journal is this run's) */
		done = stats->resumed_bytes = jn.bytes;
		jn.mine = true;
	}
	for (size_t i = 0; i < src.pt->nparts && r == 0; i++) {
		uint64_t from = !opts->resume || i > jn.part ? 0 : i < jn.part ? UINT64_MAX : jn.pos;
		if (from)
			r = clone_heads(&src, i, from, &w, err);
		if (r == 0 && from != UINT64_MAX)
			r = clone_partition(&src, i, from, &w, &jn, opts, stats, &done, err);
		if (r == 0 && from != UINT64_MAX)
			r = checkpoint(&w, &jn, i + 1, 0, done, err);
	}
	if (r == 0)
		r = writer_finish(&w, &pl, err);
	if (r < 0 && jn.on && err->exit_class == IM_EXIT_INTERRUPTED) {
		/* Kept for --resume: the target has no table yet, so it does not
		 * look complete. */
		w.keep = true;
		snprintf(err->msg, sizeof(err->msg),
			 "interrupted: %s is left without its partition table; imager clone "
			 "--resume %s %s carries on", target, source, target);
	}
	/* Once everything is in place (the heads were held back until now). */
	for (size_t i = 0; r == 0 && opts->verify && i < src.pt->nparts; i++) {
		r = verify_partition(&src, w.tgt, i, stats->grow.parts[i].new_start, err);
		stats->verified_bytes += src.fs[i].used_blocks * src.fs[i].block_size;
	}
	r = writer_end(&w, r, &opts->target, pl.fs, &stats->grow, &stats->target, err);
	if (jn.on && jn.mine && !w.keep)
		unlink(jn.path);
	if (r == 0 && opts->rescue.on)
		r = clone_rescue_finish(&src, opts, stats, err);
	disk_plan_free(&pl);
	source_close(&src);
	return r;
}
