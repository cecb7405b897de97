/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager restore: frames read in order, decompressed and checked in
 * parallel, written to their blocks through the writer (source.h), which
 * writes the partition table and superblocks last.
 */
#include "imager/job.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "frames.h"
#include "imager/backend.h"
#include "imager/clonezilla.h"
#include "imager/pipeline.h"
#include "source.h"
#include "tjournal.h"
#include "util.h"

struct rpart_job {
	const struct img_part *p;
	const struct img_index *ix;
	size_t part_index;
	uint64_t skip_below;       /* --resume: frames already on the target */
	struct tjournal *jn;
	unsigned checkpoint_ms;    /* the least time between two checkpoints */
	struct frame_reader fr;
	XXH3_state_t *stream_hash;
	struct writer *w;
	uint64_t *bytes_done, bytes_total, *bytes_written;
	const struct im_progress *progress;
};

static int restore_produce(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct rpart_job *j = ctx;
	struct frame_meta *m = s->meta;
	int r;

	(void)err;
	r = frame_produce(&j->fr, s);
	/* (read all the same: the stream's checksum covers every frame) */
	m->skipped = false;
	if (r == 1 && m->frame < j->skip_below) {
		const struct img_frame *f = &j->ix->frames[m->frame];
		/* on the target already; decoded only for the partition's head,
		 * which the writer writes last */
		m->skipped = !f->nextents ||
			     j->ix->extents[f->first_extent].start * j->ix->block_size >=
				     j->w->part_head[j->part_index];
	}
	return r;
}

static int restore_work(void *ctx, void *ws, struct pipe_slot *s)
{
	struct rpart_job *j = ctx;
	if (((struct frame_meta *)s->meta)->skipped)
		return 0;
	frame_work(j->ix, ws, s);
	return ((struct frame_meta *)s->meta)->damaged ? -EBADMSG : 0;
}

/* The target flushed, then the journal says so (restore_opts.checkpoint_ms:
 * how often). */
static int checkpoint(struct rpart_job *j, uint64_t frames_done, struct im_err *err)
{
	int r;

	if (!j->jn->on)
		return 0;
	r = bk_flush(j->w->tgt, err);
	/* A journal that cannot be written (its folder read-only or full)
	 * costs the resume, not the restore. */
	if (r == 0 && tjournal_write(j->jn, (uint32_t)j->part_index, frames_done,
				     *j->bytes_done) < 0) {
		j->jn->on = false;
		unlink(j->jn->path);
	}
	return r;
}

static int restore_consume(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct rpart_job *j = ctx;
	struct frame_meta *m = s->meta;
	const struct img_frame *f = &j->ix->frames[m->frame];
	const unsigned char *data = s->b;
	uint32_t bs = j->ix->block_size;

	if (s->status < 0) {
		uint64_t off, len;
		frame_span(j->ix, f, j->p->start, &off, &len);
		return im_errf(err, IM_EXIT_DAMAGED, s->status,
			       "partition %u: frame %llu of %s is damaged (%s); it holds disk bytes %llu-%llu; nothing was restored past it",
			       j->p->number, (unsigned long long)m->frame, j->p->stream, m->what,
			       (unsigned long long)off, (unsigned long long)(off + len));
	}
	XXH3_64bits_update(j->stream_hash, s->a, s->a_len);
	if (m->skipped) {   /* --resume: on the target, and not in the head */
		for (uint32_t i = 0; i < f->nextents; i++)
			*j->bytes_done += (uint64_t)j->ix->extents[f->first_extent + i].count * bs;
		return 0;
	}
	bool before = m->frame < j->skip_below;   /* (only its head: the rest is there) */
	for (uint32_t i = 0; i < f->nextents; i++) {
		const struct img_extent *e = &j->ix->extents[f->first_extent + i];
		uint64_t len = (uint64_t)e->count * bs;
		bool zero = e->flags & IMG_EXT_ZERO;
		int r = (before ? writer_put_head : writer_put)(j->w, j->part_index, e->start * bs, len,
								zero ? NULL : data, err);
		if (r < 0)
			return r;
		if (!zero)
			data += len;
		*j->bytes_done += len;
		if (!before && (!zero || !j->w->fresh))   /* (zeros on a fresh target: not written) */
			*j->bytes_written += len;
	}
	if (!before && j->jn->on && mono_ms() - j->jn->written_ms >= j->checkpoint_ms) {
		int r = checkpoint(j, m->frame + 1, err);
		if (r < 0)
			return r;
	}
	if (j->progress->fn)
		j->progress->fn(j->progress->opaque, "restore", *j->bytes_done, j->bytes_total);
	return 0;
}

/* Everything checkable before a byte is written: each partition's index
 * and stream (the index kept in ix[i]), each boot area read into the plan.
 * *total: the bytes the partitions hold. */
static int check_image(const char *dir, const struct img_manifest *m, struct img_index *ix,
		       struct disk_plan *pl, uint64_t *total, struct im_err *err)
{
	int r;

	for (size_t i = 0; i < m->nparts; i++) {
		const struct img_part *p = &m->parts[i];

		r = image_check_part_files(dir, p, &ix[i], err);
		if (r < 0)
			return r;
		*total += p->used_blocks * p->block_size;
		disk_plan_set_part(pl, i, p->number, p->kind, p->start, p->size);
		grow_fs_set(&pl->fs[i], p->filesystem, p->volumes, p->nvolumes);
	}
	for (size_t i = 0; i < m->nareas; i++) {
		const struct img_area *a = &m->areas[i];

		r = image_read_area(dir, a, &pl->area_data[i], err);
		if (r < 0)
			return r;
		disk_plan_set_area(pl, i, a->name, a->offset, a->length);
	}
	return 0;
}

/* The frames of one partition's stream through the pipeline onto the
 * target, the stream's checksum taken on the way. */
static int restore_stream(struct rpart_job *j, unsigned threads, struct im_err *err)
{
	const struct pipe_ops ops = {
		.produce = restore_produce, .work = restore_work, .consume = restore_consume,
		.worker_init = frame_dctx_new, .worker_fini = frame_dctx_free,
		.cancel = j->progress->cancel,
	};
	uint32_t bs = j->p->block_size;
	size_t raw_cap = IMG_FRAME_BLOCKS_BYTES > bs ? IMG_FRAME_BLOCKS_BYTES : bs;
	int r;

	j->stream_hash = XXH3_createState();
	if (!j->stream_hash)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	XXH3_64bits_reset(j->stream_hash);
	r = pipeline_run(&ops, j, threads, ZSTD_compressBound(raw_cap), raw_cap,
			 sizeof(struct frame_meta), err);
	/* The table is still held back: a mismatch leaves no complete-looking
	 * disk. */
	if (r == 0 && XXH3_64bits_digest(j->stream_hash) != j->p->stream_xxh3)
		r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			    "partition %u: %s does not match the manifest's checksum", j->p->number,
			    j->p->stream);
	XXH3_freeState(j->stream_hash);
	return r;
}

static int restore_partition(const char *dir, struct rpart_job *j, unsigned threads,
			     struct im_err *err)
{
	char path[4200];
	int r;

	snprintf(path, sizeof(path), "%s/%s", dir, j->p->stream);
	j->fr.ix = j->ix;
	j->fr.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (j->fr.fd < 0)
		return im_errf(err, IM_EXIT_DAMAGED, -errno, "%s: %s", path, strerror(errno));
	posix_fadvise(j->fr.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	r = restore_stream(j, threads, err);
	close(j->fr.fd);
	return r;
}

int im_restore(const struct disk_roots *roots, const char *dir, const char *target,
	       const struct restore_opts *opts, struct restore_stats *stats, struct im_err *err)
{
	unsigned threads = opts->threads ? opts->threads : pipeline_default_threads();
	struct img_manifest m;
	struct img_index *ix;
	struct disk_plan pl = { 0 };
	struct writer w = { 0 };
	struct tjournal jn = { .kind = TJNL_RESTORE };
	uint64_t total = 0, done = 0, msize;
	char mpath[4200];
	int r;

	memset(stats, 0, sizeof(*stats));
	if (cz_detect(dir)) {  /* a Clonezilla image folder */
		if (opts->resume)
			return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				       "%s: a Clonezilla image cannot be resumed; restore it anew", dir);
		return cz_restore(roots, dir, target, opts, stats, err);
	}
	r = img_manifest_read(&m, dir, err);
	if (r < 0)
		return r;
	snprintf(mpath, sizeof(mpath), "%s/%s", dir, IMG_MANIFEST);
	jn.on = (opts->journal || opts->resume) && !opts->target.shrink &&
		img_hash_file(mpath, &msize, &jn.identity) == 0 &&
		tjournal_path(target, jn.path, sizeof(jn.path));
	ix = calloc(m.nparts + 1, sizeof(*ix));
	r = disk_plan_alloc(&pl, m.disk_size, m.table, m.logical_sector_size, m.nparts, m.nareas, err);
	if (r == 0 && !ix)
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	if (r == 0)
		r = check_image(dir, &m, ix, &pl, &total, err);
	if (r == 0 && m.nparts <= PT_MAX_PARTS) {
		/* A smaller target: refused, or shrunk onto with --shrink. */
		struct shrink_part sp[PT_MAX_PARTS];
		struct shrink_job job = {
			.source = dir, .image = true, .roots = roots, .table = m.table, .lss = m.logical_sector_size,
			.parts = sp, .nparts = m.nparts, .target_spec = target,
			.target = &opts->target, .threads = opts->threads,
			.progress = &opts->progress,
		};
		for (size_t i = 0; i < m.nparts; i++) {
			sp[i].lp = pl.parts[i];
			snprintf(sp[i].fs, sizeof(sp[i].fs), "%s", m.parts[i].filesystem);
			sp[i].used = m.parts[i].used_blocks * m.parts[i].block_size;
			sp[i].vols = m.parts[i].volumes;
			sp[i].nvols = m.parts[i].nvolumes;
		}
		if (opts->resume && opts->target.shrink)
			r = im_errf(err, IM_EXIT_USAGE, -EINVAL, "--resume does not shrink");
		else
			r = shrink_if_smaller(&job, m.disk_size, &stats->grow, &stats->target,
					      &stats->bytes_written, err);
		if (r <= 0)
			goto out;
		r = 0;
	}
	if (r == 0 && opts->resume && !jn.on)
		r = im_errf(err, IM_EXIT_TARGET, -ENOTSUP,
			    "%s: only a file or a device can be resumed (an NBD export cannot)", target);
	if (r == 0 && opts->resume) {
		const char *fmt = opts->target.format ? opts->target.format : bk_format_from_name(target);
		if (fmt && strcmp(fmt, "raw"))
			r = im_errf(err, IM_EXIT_TARGET, -ENOTSUP,
				    "%s: a %s target cannot be resumed, only a raw one (a qcow2's "
				    "tables are written when it closes)", target, fmt);
	}
	if (r == 0 && opts->resume)
		r = tjournal_read(&jn, (uint32_t)m.nparts, err);
	if (r == 0)
		r = writer_start(&w, roots, target, &pl, &opts->target, &stats->grow, err);
	if (r == 0)
		r = tjournal_start(&jn, opts->resume, target, w.info.format, w.tgt->size, err);
	if (r == 0)
		r = writer_check_room(&w, total, err);
	if (r == 0 && opts->resume) {   /* (every check passed: the journal is this run's) */
		stats->resumed_bytes = jn.bytes;
		jn.mine = true;
	}
	for (size_t i = 0; i < m.nparts && r == 0; i++) {
		struct rpart_job j = {
			.p = &m.parts[i], .ix = &ix[i], .part_index = i, .w = &w,
			.bytes_done = &done, .bytes_total = total, .jn = &jn,
			.checkpoint_ms = opts->checkpoint_ms,
			.bytes_written = &stats->bytes_written, .progress = &opts->progress,
		};
		if (opts->resume)
			j.skip_below = i < jn.part ? UINT64_MAX : i == jn.part ? jn.pos : 0;
		r = restore_partition(dir, &j, threads, err);
		if (r == 0 && jn.on && (i >= jn.part || !opts->resume)) {
			j.part_index = i + 1;
			r = checkpoint(&j, 0, err);
		}
	}
	if (r == 0)
		r = writer_finish(&w, &pl, err);
	if (r < 0 && jn.on && err->exit_class == IM_EXIT_INTERRUPTED) {
		/* Kept for --resume: the target has no table yet, so it does not
		 * look complete. */
		w.keep = true;
		snprintf(err->msg, sizeof(err->msg),
			 "interrupted: %s is left without its partition table; imager restore "
			 "--resume %s %s carries on", target, dir, target);
	}
	r = writer_end(&w, r, &opts->target, pl.fs, &stats->grow, &stats->target, err);
	if (jn.on && jn.mine && !w.keep)
		unlink(jn.path);
out:
	for (size_t i = 0; ix && i < m.nparts; i++)
		img_index_free(&ix[i]);
	free(ix);
	disk_plan_free(&pl);
	img_manifest_free(&m);
	return r;
}
