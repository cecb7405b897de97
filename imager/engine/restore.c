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
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "frames.h"
#include "imager/pipeline.h"
#include "source.h"
#include "util.h"

struct rpart_job {
	const struct img_part *p;
	const struct img_index *ix;
	size_t part_index;
	struct frame_reader fr;
	XXH3_state_t *stream_hash;
	struct writer *w;
	uint64_t *bytes_done, bytes_total, *bytes_written;
	const struct im_progress *progress;
};

static int restore_produce(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct rpart_job *j = ctx;
	(void)err;
	return frame_produce(&j->fr, s);
}

static int restore_work(void *ctx, void *ws, struct pipe_slot *s)
{
	struct rpart_job *j = ctx;
	frame_work(j->ix, ws, s);
	return ((struct frame_meta *)s->meta)->damaged ? -EBADMSG : 0;
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
	for (uint32_t i = 0; i < f->nextents; i++) {
		const struct img_extent *e = &j->ix->extents[f->first_extent + i];
		uint64_t len = (uint64_t)e->count * bs;
		bool zero = e->flags & IMG_EXT_ZERO;
		int r = writer_put(j->w, j->part_index, e->start * bs, len, zero ? NULL : data, err);
		if (r < 0)
			return r;
		if (!zero)
			data += len;
		*j->bytes_done += len;
		*j->bytes_written += len;
	}
	if (j->progress->fn)
		j->progress->fn(j->progress->opaque, "restore", *j->bytes_done, j->bytes_total);
	return 0;
}

int im_restore(const struct disk_roots *roots, const char *dir, const char *target,
	       const struct restore_opts *opts, struct restore_stats *stats, struct im_err *err)
{
	struct img_manifest m;
	struct img_index *ix = NULL;
	unsigned char **areas = NULL;
	uint64_t *starts = NULL, *sizes = NULL, *aoffs = NULL, *alens = NULL;
	const char **anames = NULL;
	struct writer w = { 0 };
	uint64_t total = 0, done = 0;
	int r;

	memset(stats, 0, sizeof(*stats));
	r = img_manifest_read(&m, dir, err);
	if (r < 0)
		return r;
	ix = calloc(m.nparts + 1, sizeof(*ix));
	areas = calloc(m.nareas + 1, sizeof(*areas));
	starts = calloc(m.nparts + 1, sizeof(*starts));
	sizes = calloc(m.nparts + 1, sizeof(*sizes));
	aoffs = calloc(m.nareas + 1, sizeof(*aoffs));
	alens = calloc(m.nareas + 1, sizeof(*alens));
	anames = calloc(m.nareas + 1, sizeof(*anames));
	if (!ix || !areas || !starts || !sizes || !aoffs || !alens || !anames) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto out;
	}
	/* Everything checkable before a byte is written. */
	for (size_t i = 0; i < m.nparts; i++) {
		r = image_check_part_files(dir, &m.parts[i], &ix[i], err);
		if (r < 0)
			goto out;
		total += m.parts[i].used_blocks * m.parts[i].block_size;
		starts[i] = m.parts[i].start;
		sizes[i] = m.parts[i].size;
	}
	for (size_t i = 0; i < m.nareas; i++) {
		r = image_read_area(dir, &m.areas[i], &areas[i], err);
		if (r < 0)
			goto out;
		aoffs[i] = m.areas[i].offset;
		alens[i] = m.areas[i].length;
		anames[i] = m.areas[i].name;
	}
	r = writer_open(&w, roots, target, m.disk_size, m.table, m.logical_sector_size, m.nparts,
			starts, sizes, m.nareas, aoffs, alens, &opts->target, err);
	if (r < 0)
		goto out;
	stats->grow.nparts = m.nparts;
	for (size_t i = 0; i < m.nparts && i < PT_MAX_PARTS; i++) {
		struct layout_part *lp = &stats->grow.parts[i];
		lp->number = m.parts[i].number;
		snprintf(lp->kind, sizeof(lp->kind), "%s", m.parts[i].kind);
		lp->old_start = lp->new_start = m.parts[i].start;
		lp->old_size = lp->new_size = m.parts[i].size;
	}
	if (m.nparts > PT_MAX_PARTS)
		r = im_errf(err, IM_EXIT_UNSUPP, -E2BIG, "too many partitions");
	else
		r = writer_set_layout(&w, opts->target.grow, stats->grow.parts, err);
	if (r < 0)
		goto out;

	for (size_t i = 0; i < m.nparts; i++) {
		const struct img_part *p = &m.parts[i];
		size_t raw_cap = IMG_FRAME_BLOCKS_BYTES > p->block_size ? IMG_FRAME_BLOCKS_BYTES : p->block_size;
		struct rpart_job j = {
			.p = p, .ix = &ix[i], .part_index = i, .w = &w,
			.bytes_done = &done, .bytes_total = total,
			.bytes_written = &stats->bytes_written, .progress = &opts->progress,
		};
		const struct pipe_ops ops = {
			.produce = restore_produce, .work = restore_work, .consume = restore_consume,
			.worker_init = frame_dctx_new, .worker_fini = frame_dctx_free,
			.cancel = opts->progress.cancel,
		};
		char path[4200];

		snprintf(path, sizeof(path), "%s/%s", dir, p->stream);
		j.fr.ix = &ix[i];
		j.fr.fd = open(path, O_RDONLY | O_CLOEXEC);
		if (j.fr.fd < 0) {
			r = im_errf(err, IM_EXIT_DAMAGED, -errno, "%s: %s", path, strerror(errno));
			goto out;
		}
		posix_fadvise(j.fr.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		j.stream_hash = XXH3_createState();
		if (!j.stream_hash) {
			r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		} else {
			XXH3_64bits_reset(j.stream_hash);
			r = pipeline_run(&ops, &j, opts->threads ? opts->threads : pipeline_default_threads(),
					 ZSTD_compressBound(raw_cap), raw_cap, sizeof(struct frame_meta), err);
			/* The table is still held back: a mismatch leaves no
			 * complete-looking disk. */
			if (r == 0 && XXH3_64bits_digest(j.stream_hash) != p->stream_xxh3)
				r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
					    "partition %u: %s does not match the manifest's checksum", p->number,
					    p->stream);
			XXH3_freeState(j.stream_hash);
		}
		close(j.fr.fd);
		if (r < 0)
			goto out;
	}
	r = writer_finish(&w, m.nareas, anames, aoffs, alens, areas, err);
out:
	{
		struct grow_fs fs[PT_MAX_PARTS];
		for (size_t i = 0; i < m.nparts && i < PT_MAX_PARTS; i++)
			grow_fs_set(&fs[i], m.parts[i].filesystem, m.parts[i].volumes,
				    m.parts[i].nvolumes);
		r = writer_end(&w, r, &opts->target, fs, &stats->grow, &stats->target, err);
	}
	for (size_t i = 0; ix && i < m.nparts; i++)
		img_index_free(&ix[i]);
	for (size_t i = 0; areas && i < m.nareas; i++)
		free(areas[i]);
	free(ix);
	free(areas);
	free(starts);
	free(sizes);
	free(aoffs);
	free(alens);
	free(anames);
	img_manifest_free(&m);
	return r;
}
