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
#include <archive.h>
#include <xxhash.h>
#include <zstd.h>

#include "frames.h"
#include "imager/backend.h"
#include "imager/clonezilla.h"
#include "imager/pipeline.h"
#include "copyjob.h"
#include "imgtar.h"
#include "util.h"

/* An image folder as the source of the copy job (copyjob.h). */
struct imgsrc {
	const char *dir;
	struct archive *ar;        /* the streams come through here (a multicast) */
	struct img_manifest m;
	struct img_index *ix;      /* one per partition, checked by the plan */
};

struct rpart_job {
	const struct img_part *p;
	const struct img_index *ix;
	size_t part_index;
	uint64_t skip_below;       /* --resume: frames already on the target */
	struct frame_reader fr;
	XXH3_state_t *stream_hash;
	struct copyjob *cj;
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
				     j->cj->w.part_head[j->part_index];
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

static int restore_consume(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct rpart_job *j = ctx;
	struct copyjob *cj = j->cj;
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
			cj->done += (uint64_t)j->ix->extents[f->first_extent + i].count * bs;
		return 0;
	}
	bool before = m->frame < j->skip_below;   /* (only its head: the rest is there) */
	for (uint32_t i = 0; i < f->nextents; i++) {
		const struct img_extent *e = &j->ix->extents[f->first_extent + i];
		uint64_t len = (uint64_t)e->count * bs;
		bool zero = e->flags & IMG_EXT_ZERO;
		int r = (before ? writer_put_head : writer_put)(&cj->w, j->part_index, e->start * bs, len,
								zero ? NULL : data, err);
		if (r < 0)
			return r;
		if (!zero)
			data += len;
		cj->done += len;
		if (!before && (!zero || !cj->w.fresh))   /* (zeros on a fresh target: not written) */
			cj->written += len;
	}
	if (!before) {
		int r = cj_tick(cj, j->part_index, m->frame + 1, err);
		if (r < 0)
			return r;
	}
	cj_progress(cj);
	return 0;
}

/* Everything checkable before a byte is written: each partition's index
 * and stream (the index kept in ix[i]), each boot area read into the plan.
 * *total: the bytes the partitions hold. */
static int check_image(const char *dir, const struct img_manifest *m, struct img_index *ix,
		       bool streamed, struct disk_plan *pl, uint64_t *total, struct im_err *err)
{
	int r;

	for (size_t i = 0; i < m->nparts; i++) {
		const struct img_part *p = &m->parts[i];

		r = image_check_part_files(dir, p, &ix[i], !streamed, err);
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
static int restore_stream(struct rpart_job *j, struct im_err *err)
{
	const struct pipe_ops ops = {
		.produce = restore_produce, .work = restore_work, .consume = restore_consume,
		.worker_init = frame_dctx_new, .worker_fini = frame_dctx_free,
		.cancel = j->cj->o->progress->cancel,
	};
	uint32_t bs = j->p->block_size;
	size_t raw_cap = IMG_FRAME_BLOCKS_BYTES > bs ? IMG_FRAME_BLOCKS_BYTES : bs;
	int r;

	j->stream_hash = XXH3_createState();
	if (!j->stream_hash)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	XXH3_64bits_reset(j->stream_hash);
	r = pipeline_run(&ops, j, j->cj->threads, ZSTD_compressBound(raw_cap), raw_cap,
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

static int restore_partition(const char *dir, struct rpart_job *j, struct im_err *err)
{
	char path[4200];
	int r;

	if ((r = path_join_err(path, sizeof(path), dir, j->p->stream, err)) < 0)
		return r;
	j->fr.ix = j->ix;
	j->fr.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (j->fr.fd < 0)
		return im_errf(err, IM_EXIT_DAMAGED, -errno, "%s: %s", path, strerror(errno));
	posix_fadvise(j->fr.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	r = restore_stream(j, err);
	close(j->fr.fd);
	return r;
}

static void unlink_in(const char *dir, const char *name)
{
	char path[4200];
	if (path_join(path, sizeof(path), dir, name) == 0)
		unlink(path);
}

/* ---- the source's description ---- */

static int is_plan(void *ctx, struct disk_plan *pl, uint64_t *total, struct im_err *err)
{
	struct imgsrc *is = ctx;
	const struct img_manifest *m = &is->m;
	int r;

	is->ix = calloc(m->nparts + 1, sizeof(*is->ix));
	r = disk_plan_alloc(pl, m->disk_size, m->table, m->logical_sector_size, m->nparts, m->nareas,
			    err);
	if (r == 0 && !is->ix)
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	return r < 0 ? r : check_image(is->dir, m, is->ix, is->ar, pl, total, err);
}

static void is_shrink_part(void *ctx, size_t i, struct shrink_part *sp)
{
	const struct img_part *p = &((struct imgsrc *)ctx)->m.parts[i];

	shrink_part_set(sp, p->filesystem, p->used_blocks * p->block_size, p->volumes, p->nvolumes);
}

/* A restore's journal names the image by its manifest's checksum. */
static int is_identity(void *ctx, const struct target_opts *t, uint64_t *id)
{
	struct imgsrc *is = ctx;
	char mpath[4200];
	uint64_t msize;

	(void)t;
	if (path_join(mpath, sizeof(mpath), is->dir, IMG_MANIFEST) < 0)
		return -ENAMETOOLONG;
	return img_hash_file(mpath, &msize, id) == 0 ? 0 : -EIO;
}

static int is_copy(void *ctx, struct copyjob *cj, size_t i, uint64_t from, struct im_err *err)
{
	struct imgsrc *is = ctx;
	struct rpart_job j = { .p = &is->m.parts[i], .ix = &is->ix[i], .part_index = i,
			       .skip_below = from, .cj = cj };

	if (is->ar) {   /* the next entry of the stream, read as it comes */
		int r = img_tar_expect(is->ar, j.p->stream, j.p->stream_size, err);
		if (r < 0)
			return r;
		j.fr = (struct frame_reader){ .ix = j.ix, .fd = -1, .ar = is->ar };
		return restore_stream(&j, err);
	}
	return restore_partition(is->dir, &j, err);
}

/* The copy job from is (its manifest read), and is's indexes freed. */
static int restore_run(const struct disk_roots *roots, struct imgsrc *is, const char *name,
		       const char *target, const struct restore_opts *opts,
		       struct restore_stats *stats, struct im_err *err)
{
	const struct cj_source src = {
		.ctx = is, .what = "restore", .name = name, .kind = TJNL_RESTORE,
		.plan = is_plan, .shrink_part = is_shrink_part, .identity = is_identity,
		.copy = is_copy,
	};
	const struct cj_opts o = cj_restore_opts(roots, target, opts);
	struct cj_stats st = CJ_STATS(stats);
	int r = cj_refuse(target, &opts->target, opts->resume, false, err);

	if (r == 0)
		r = cj_run(&src, &o, &st, err);
	for (size_t i = 0; is->ix && i < is->m.nparts; i++)
		img_index_free(&is->ix[i]);
	free(is->ix);
	is->ix = NULL;
	return r;
}

int im_restore_stream(const struct disk_roots *roots, int fd, const char *name,
		      const char *target, const struct restore_opts *opts,
		      struct restore_stats *stats, struct im_err *err)
{
	char tmp[4096];
	struct imgsrc is = { .dir = tmp };
	int r;

	memset(stats, 0, sizeof(*stats));
	if (opts->resume)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "%s: an image that arrives over the network cannot be resumed; restore it anew (or from the repository)",
			       name);
	if ((r = tmp_dir_make("stream", tmp, sizeof(tmp), err)) < 0)
		return r;
	is.ar = archive_read_new();
	if (!is.ar || archive_read_support_format_tar(is.ar) != ARCHIVE_OK ||
	    archive_read_open_fd(is.ar, fd, 1 << 20) != ARCHIVE_OK)
		r = im_errf(err, IM_EXIT_DAMAGED, -EIO, "%s: %s", name,
			    is.ar && archive_error_string(is.ar) ? archive_error_string(is.ar) :
								   "not a stream imager reads");
	if (r == 0 && (r = img_tar_receive_head(is.ar, tmp, &is.m, err)) == 0) {
		r = restore_run(roots, &is, name, target, opts, stats, err);
		if (r == 0)
			r = img_tar_expect_end(is.ar, err);
		for (size_t i = 0; i < is.m.nareas; i++)
			unlink_in(tmp, is.m.areas[i].file);
		for (size_t i = 0; i < is.m.nparts; i++)
			unlink_in(tmp, is.m.parts[i].index);
		img_manifest_free(&is.m);
	}
	unlink_in(tmp, IMG_MANIFEST);
	rmdir(tmp);
	if (is.ar)
		archive_read_free(is.ar);
	return r;
}

int im_restore(const struct disk_roots *roots, const char *dir, const char *target,
	       const struct restore_opts *opts, struct restore_stats *stats, struct im_err *err)
{
	struct imgsrc is = { .dir = dir };
	int r;

	memset(stats, 0, sizeof(*stats));
	if (img_is_clonezilla(dir)) {  /* a Clonezilla image folder */
		if (opts->resume)
			return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				       "%s: a Clonezilla image cannot be resumed; restore it anew", dir);
		return cz_restore(roots, dir, target, opts, stats, err);
	}
	r = img_manifest_read(&is.m, dir, err);
	if (r < 0)
		return r;
	r = restore_run(roots, &is, dir, target, opts, stats, err);
	img_manifest_free(&is.m);
	return r;
}
