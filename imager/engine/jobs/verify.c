/* SPDX-License-Identifier: GPL-2.0-or-later */
/* imager verify: every boot area, index and frame, damage named precisely. */
#include "imager/job.h"
#include "imager/clonezilla.h"
#include "imager/partclone.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "frames.h"
#include "tool.h"
#include "util.h"
#include "imager/pipeline.h"

struct vjob {
	const struct img_part *p;
	const struct img_index *ix;
	struct frame_reader fr;
	XXH3_state_t *stream_hash;   /* every frame's bytes, in order */
	bool any_damage;
	struct verify_report *rep;
	uint64_t *done, total;
	const struct im_progress *progress;
};

static int add_damage(struct verify_report *rep, const struct img_part *p, const char *file,
		      int64_t frame, uint64_t off, uint64_t len, const char *what)
{
	struct verify_damage *d = realloc(rep->damage, (rep->ndamage + 1) * sizeof(*d));
	if (!d)
		return -ENOMEM;
	rep->damage = d;
	d += rep->ndamage++;
	memset(d, 0, sizeof(*d));
	d->partition = p ? p->number : 0;
	snprintf(d->file, sizeof(d->file), "%s", file);
	d->frame = frame;
	d->disk_offset = off;
	d->length = len;
	snprintf(d->what, sizeof(d->what), "%s", what);
	return 0;
}

static int v_produce(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct vjob *j = ctx;
	(void)err;
	return frame_produce(&j->fr, s);
}

static int v_work(void *ctx, void *ws, struct pipe_slot *s)
{
	struct vjob *j = ctx;
	frame_work(j->ix, ws, s);
	return 0;   /* damage is a finding, not a failure */
}

static int v_consume(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct vjob *j = ctx;
	struct frame_meta *m = s->meta;
	const struct img_frame *f = &j->ix->frames[m->frame];
	uint64_t off, len;

	if (s->status < 0) {
		*err = s->err;
		return s->status;
	}
	j->rep->frames_checked++;
	XXH3_64bits_update(j->stream_hash, s->a, s->a_len);
	if (m->damaged) {
		j->any_damage = true;
		frame_span(j->ix, f, j->p->start, &off, &len);
		if (add_damage(j->rep, j->p, j->p->stream, (int64_t)m->frame, off, len, m->what) < 0)
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	*j->done += f->comp_size;
	if (j->progress && j->progress->fn)
		j->progress->fn(j->progress->opaque, "verify", *j->done, j->total);
	return 0;
}

/* A Clonezilla folder: every partition's stream read whole, every
 * checksum checked; each damaged stream one entry. */
static int cz_verify(const char *dir, const struct im_progress *progress,
		     struct verify_report *rep, struct im_err *err)
{
	struct cz_image *cz = calloc(1, sizeof(*cz));
	uint64_t done = 0, total = 0;
	int r;

	if (!cz)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = cz_read(dir, cz, err);
	for (size_t i = 0; r == 0 && i < cz->nparts; i++)
		if (cz->parts[i].kind != CZ_NONE && cz->parts[i].kind != CZ_SWAP)
			total += cz->parts[i].bytes;
	for (size_t l = 0; r == 0 && l < cz->nlvs; l++)
		total += cz->lvs[l].part.bytes;
	for (size_t i = 0; r == 0 && i < cz->nparts; i++) {
		const struct cz_part *p = &cz->parts[i];
		struct pcl_header h;
		struct im_err e = { 0 };
		uint64_t strips = 0;

		if (p->kind == CZ_NONE || p->kind == CZ_SWAP || p->kind == CZ_PV)
			continue;
		if (cz_read_stream(dir, p, true, progress, &done, total, &h, &strips, &e) < 0) {
			r = add_damage(rep, NULL, p->stream, -1, p->start, p->size, e.msg);
			if (r == 0)
				rep->damage[rep->ndamage - 1].partition = p->number;
		}
		rep->frames_checked += strips;
		if (progress && progress->cancel && *progress->cancel)
			r = im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
	}
	/* LVs' streams (Clonezilla's VG-LV files) */
	for (size_t l = 0; r == 0 && l < cz->nlvs; l++) {
		const struct cz_part *p = &cz->lvs[l].part;
		struct pcl_header h;
		struct im_err e = { 0 };
		uint64_t strips = 0;

		if (p->kind == CZ_NONE || p->kind == CZ_SWAP)
			continue;
		if (cz_read_stream(dir, p, true, progress, &done, total, &h, &strips, &e) < 0)
			r = add_damage(rep, NULL, p->stream, -1, 0, p->size, e.msg);
		rep->frames_checked += strips;
	}
	/* The checksum files ocs-sr -gm, -gs, -gb write, checked by the
	 * coreutils tool that reads them, in the folder. */
	static const char *const sums[][2] = {
		{ "MD5SUMS", "md5sum" }, { "SHA1SUMS", "sha1sum" }, { "B2SUMS", "b2sum" },
	};
	for (size_t i = 0; r == 0 && i < sizeof(sums) / sizeof(sums[0]); i++) {
		char path[4200], out[512];
		const char *argv[] = { "sh", "-c", "cd -- \"$1\" && exec \"$2\" -c --quiet -- \"$3\"",
				       "sh", dir, sums[i][1], sums[i][0], NULL };
		int st;

		if (path_join(path, sizeof(path), dir, sums[i][0]) < 0) {
			r = add_damage(rep, NULL, sums[i][0], -1, 0, 0, "path too long");
			continue;
		}
		if (access(path, F_OK) != 0)
			continue;
		st = tool_run(argv, out, sizeof(out));
		if (st != 0) {
			char *nl;
			while ((nl = strrchr(out, '\n')) && nl[1] == '\0')
				*nl = '\0';
			nl = strrchr(out, '\n');
			r = add_damage(rep, NULL, sums[i][0], -1, 0, 0,
				       st < 0 ? "could not be checked" : nl ? nl + 1 : out);
		}
	}
	free(cz);
	return r;
}

int im_verify(const char *dir, unsigned threads, const struct im_progress *progress,
	      struct verify_report *rep, struct im_err *err)
{
	struct img_manifest m;
	uint64_t total = 0, done = 0;
	int r;

	memset(rep, 0, sizeof(*rep));
	if (img_is_clonezilla(dir))
		return cz_verify(dir, progress, rep, err);
	r = img_manifest_read(&m, dir, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < m.nparts; i++)
		total += m.parts[i].stream_size;
	for (size_t i = 0; i < m.nareas && r == 0; i++) {
		struct im_err e = { 0 };
		unsigned char *buf = NULL;
		if (image_read_area(dir, &m.areas[i], &buf, &e) < 0)
			r = add_damage(rep, NULL, m.areas[i].file, -1, m.areas[i].offset,
				       m.areas[i].length, e.msg);
		free(buf);
	}
	if (r == 0 && m.unreadable.bytes) {
		/* the map of what save --rescue could not read */
		char path[4200];
		uint64_t size, h;
		int hr = path_join(path, sizeof(path), dir, m.unreadable.map);
		if (hr == 0)
			hr = img_hash_file(path, &size, &h);
		if (hr < 0 || size != m.unreadable.map_size || h != m.unreadable.map_xxh3)
			r = add_damage(rep, NULL, m.unreadable.map, -1, 0, 0,
				       hr < 0 ? strerror(-hr) : "differs from the manifest's checksum");
	}
	for (size_t i = 0; i < m.nparts && r == 0; i++) {
		const struct img_part *p = &m.parts[i];
		struct img_index ix;
		struct im_err e = { 0 };
		char path[4200];
		struct vjob j = { .p = p, .ix = &ix, .rep = rep, .done = &done, .total = total,
				  .progress = progress };
		const struct pipe_ops ops = { .produce = v_produce, .work = v_work, .consume = v_consume,
					      .worker_init = frame_dctx_new, .worker_fini = frame_dctx_free,
					      .cancel = progress ? progress->cancel : NULL };

		if (image_check_part_files(dir, p, &ix, true, &e) < 0) {
			/* Index unusable or the stream cut short: name what we can. */
			const char *file = strstr(e.msg, p->stream) ? p->stream : p->index;
			if (strstr(e.msg, "truncated") || strstr(e.msg, "extra data")) {
				/* The index is fine: check the frames that are there. */
				struct im_err e2 = { 0 };
				char idx[4200];
				if (path_join_err(idx, sizeof(idx), dir, p->index, &e2) < 0 ||
				    img_index_read(&ix, idx, p->block_count, &e2) < 0) {
					r = add_damage(rep, p, file, -1, p->start, p->size, e.msg);
					continue;
				}
				r = add_damage(rep, p, file, -1, p->start, p->size, e.msg);
			} else {
				r = add_damage(rep, p, file, -1, p->start, p->size, e.msg);
				continue;
			}
		}
		j.fr.ix = &ix;
		j.fr.fd = path_join(path, sizeof(path), dir, p->stream) < 0 ? (errno = ENAMETOOLONG, -1) :
			  open(path, O_RDONLY | O_CLOEXEC);
		if (j.fr.fd < 0) {
			r = add_damage(rep, p, p->stream, -1, p->start, p->size, strerror(errno));
			img_index_free(&ix);
			continue;
		}
		j.stream_hash = XXH3_createState();
		if (!j.stream_hash) {
			r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		} else {
			size_t raw_cap = IMG_FRAME_BLOCKS_BYTES > p->block_size ? IMG_FRAME_BLOCKS_BYTES : p->block_size;
			XXH3_64bits_reset(j.stream_hash);
			r = pipeline_run(&ops, &j, threads ? threads : pipeline_default_threads(),
					 ZSTD_compressBound(raw_cap), raw_cap, sizeof(struct frame_meta), err);
			/* Every frame fine, yet the whole stream is not the one the
			 * manifest names: the manifest and the stream disagree. */
			if (r == 0 && !j.any_damage &&
			    XXH3_64bits_digest(j.stream_hash) != p->stream_xxh3)
				r = add_damage(rep, p, p->stream, -1, p->start, p->size,
					       "the stream's checksum differs from the manifest's");
			XXH3_freeState(j.stream_hash);
		}
		close(j.fr.fd);
		img_index_free(&ix);
	}
	if (r < 0 && !err->exit_class)
		r = im_errf(err, IM_EXIT_INTERNAL, r, "out of memory");
	img_manifest_free(&m);
	return r < 0 ? r : 0;
}

void verify_report_free(struct verify_report *rep)
{
	free(rep->damage);
	memset(rep, 0, sizeof(*rep));
}
