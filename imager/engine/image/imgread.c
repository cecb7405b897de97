/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An image folder read as the disk it holds (include/imager/imgread.h):
 * the map of the virtual disk built once from the indexes and boot areas,
 * frames decompressed on demand into a bounded LRU cache.
 */
#include "imager/imgread.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "frames.h"
#include "imager/image.h"
#include "util.h"

/* A run of data bytes of the virtual disk, from one frame. */
struct piece {
	uint64_t off, len;          /* in the virtual disk */
	uint64_t frame;
	uint64_t raw_off;           /* in the frame's uncompressed bytes */
	uint32_t part;              /* index into the manifest's parts */
};

struct area {
	uint64_t off, len;          /* clipped to the virtual disk */
	const unsigned char *data;  /* the area's bytes from where it is clipped */
};

struct ival {
	uint64_t off, len;
};

/* A decompressed frame in the cache. */
struct centry {
	uint32_t part;
	uint64_t frame;
	unsigned char *raw;
	uint32_t len;
	unsigned refs;              /* readers copying out of it: not evicted */
	struct centry *prev, *next; /* LRU list, most recent first */
};

struct rpart {
	struct img_index ix;
	int fd;
	struct centry **slot;       /* per frame: its cache entry, or NULL */
};

struct img_reader {
	struct img_manifest m;
	struct rpart *parts;        /* one per manifest partition */
	unsigned char **area_bytes; /* one per manifest area */
	uint64_t base, size;        /* the window of the restored disk exported */
	struct piece *pieces;
	size_t npieces;
	struct area *areas;
	size_t nareas;
	struct ival *ivals;         /* data ranges, sorted, merged */
	size_t nivals;

	pthread_mutex_t lock;
	struct centry *head, *tail;
	uint64_t budget;
	struct img_reader_stats st;
	ZSTD_DCtx **dctx;           /* idle decompression contexts */
	size_t ndctx, dctx_cap;
};

/* ---- building the map ---- */

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 256;
	void *p = realloc(*arr, nc * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

/* The window [base, base + size) clips [*off, *off + *len): false when
 * nothing is left; else both moved into the window's coordinates and
 * *skip the bytes cut off the front. */
static bool clip(const struct img_reader *r, uint64_t *off, uint64_t *len, uint64_t *skip)
{
	uint64_t s = *off, e = *off + *len;

	if (e <= r->base || s >= r->base + r->size)
		return false;
	*skip = s < r->base ? r->base - s : 0;
	s += *skip;
	if (e > r->base + r->size)
		e = r->base + r->size;
	*off = s - r->base;
	*len = e - s;
	return true;
}

static int part_pieces(struct img_reader *r, uint32_t pi, size_t *cap)
{
	const struct img_part *p = &r->m.parts[pi];
	const struct img_index *ix = &r->parts[pi].ix;
	uint64_t bs = ix->block_size;

	for (uint64_t fi = 0; fi < ix->nframes; fi++) {
		const struct img_frame *f = &ix->frames[fi];
		uint64_t raw_off = 0;
		for (uint32_t k = 0; k < f->nextents; k++) {
			const struct img_extent *e = &ix->extents[f->first_extent + k];
			uint64_t off = p->start + e->start * bs, len = e->count * bs, skip;
			if (e->flags & IMG_EXT_ZERO)
				continue;
			/* (used blocks past the partition's end are not restored) */
			if (e->start * bs < p->size && len > p->size - e->start * bs)
				len = p->size - e->start * bs;
			if (e->start * bs < p->size && clip(r, &off, &len, &skip)) {
				if (grow((void **)&r->pieces, cap, r->npieces, sizeof(*r->pieces)) < 0)
					return -ENOMEM;
				r->pieces[r->npieces++] = (struct piece){
					.off = off, .len = len, .frame = fi,
					.raw_off = raw_off + skip, .part = pi,
				};
			}
			raw_off += (uint64_t)e->count * bs;
		}
	}
	return 0;
}

static int by_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int by_ival(const void *a, const void *b)
{
	const struct ival *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int build_map(struct img_reader *r, struct im_err *err)
{
	size_t cap = 0, icap;

	for (uint32_t pi = 0; pi < r->m.nparts; pi++)
		if (part_pieces(r, pi, &cap) < 0)
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	qsort(r->pieces, r->npieces, sizeof(*r->pieces), by_piece);

	r->areas = calloc(r->m.nareas + 1, sizeof(*r->areas));
	if (!r->areas)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	for (size_t i = 0; i < r->m.nareas; i++) {
		uint64_t off = r->m.areas[i].offset, len = r->m.areas[i].length, skip;
		if (len && clip(r, &off, &len, &skip))
			r->areas[r->nareas++] = (struct area){ off, len, r->area_bytes[i] + skip };
	}

	icap = r->npieces + r->nareas + 1;
	r->ivals = calloc(icap, sizeof(*r->ivals));
	if (!r->ivals)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	size_t n = 0;
	for (size_t i = 0; i < r->npieces; i++)
		r->ivals[n++] = (struct ival){ r->pieces[i].off, r->pieces[i].len };
	for (size_t i = 0; i < r->nareas; i++)
		r->ivals[n++] = (struct ival){ r->areas[i].off, r->areas[i].len };
	qsort(r->ivals, n, sizeof(*r->ivals), by_ival);
	r->nivals = 0;
	for (size_t i = 0; i < n; i++) {
		struct ival *last = r->nivals ? &r->ivals[r->nivals - 1] : NULL;
		if (last && r->ivals[i].off <= last->off + last->len) {
			uint64_t end = r->ivals[i].off + r->ivals[i].len;
			if (end > last->off + last->len)
				last->len = end - last->off;
		} else {
			r->ivals[r->nivals++] = r->ivals[i];
		}
	}
	return 0;
}

/* ---- opening ---- */

static int refuse_folder(const char *dir, struct im_err *err)
{
	struct img_folder f;
	int r = img_folder_probe(dir, &f, err);

	if (r == 0 && f.kind == IMG_FOLDER_CLONEZILLA)
		r = im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			    "%s: a Clonezilla image folder: only imager serve reads it without a "
			    "restore (through its index)", dir);
	else if (r == 0)
		r = img_folder_refuse(&f, dir, err);
	img_folder_free(&f);
	return r;
}

static int open_parts(struct img_reader *r, const char *dir, struct im_err *err)
{
	char path[4200];
	int rc;

	r->parts = calloc(r->m.nparts + 1, sizeof(*r->parts));
	r->area_bytes = calloc(r->m.nareas + 1, sizeof(*r->area_bytes));
	for (size_t i = 0; r->parts && i < r->m.nparts; i++)
		r->parts[i].fd = -1;
	if (!r->parts || !r->area_bytes)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	for (size_t i = 0; i < r->m.nparts; i++) {
		const struct img_part *p = &r->m.parts[i];
		struct rpart *rp = &r->parts[i];

		if ((rc = image_check_part_files(dir, p, &rp->ix, true, err)) < 0)
			return rc;
		rp->slot = calloc(rp->ix.nframes + 1, sizeof(*rp->slot));
		if (!rp->slot)
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		if ((rc = path_join_err(path, sizeof(path), dir, p->stream, err)) < 0)
			return rc;
		rp->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (rp->fd < 0)
			return im_errf(err, IM_EXIT_DAMAGED, -errno, "partition %u: %s: %s", p->number,
				       path, strerror(errno));
	}
	for (size_t i = 0; i < r->m.nareas; i++)
		if ((rc = image_read_area(dir, &r->m.areas[i], &r->area_bytes[i], err)) < 0)
			return rc;
	return 0;
}

static int choose_window(struct img_reader *r, unsigned number, struct im_err *err)
{
	char have[200] = "";
	size_t at = 0;

	if (!number) {
		r->base = 0;
		r->size = r->m.disk_size;
		return 0;
	}
	for (size_t i = 0; i < r->m.nparts; i++) {
		if (r->m.parts[i].number == number) {
			r->base = r->m.parts[i].start;
			r->size = r->m.parts[i].size;
			return 0;
		}
		if (at < sizeof(have))
			at += (size_t)snprintf(have + at, sizeof(have) - at, "%s%u", i ? ", " : "",
					       r->m.parts[i].number);
	}
	return im_errf(err, IM_EXIT_USAGE, -ENOENT,
		       "the image has no partition %u (it has: %s)", number,
		       r->m.nparts ? have : "none");
}

int img_reader_open(const char *dir, const struct img_reader_opts *o, struct img_reader **out,
		    struct im_err *err)
{
	struct img_reader *r;
	int rc;

	*out = NULL;
	if ((rc = refuse_folder(dir, err)) < 0)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	pthread_mutex_init(&r->lock, NULL);
	r->budget = o && o->cache_bytes ? o->cache_bytes : IMG_READER_CACHE_DEFAULT;
	rc = img_manifest_read(&r->m, dir, err);
	if (rc < 0) {
		pthread_mutex_destroy(&r->lock);
		free(r);
		return rc;
	}
	rc = open_parts(r, dir, err);
	if (rc == 0)
		rc = choose_window(r, o ? o->partition : 0, err);
	if (rc == 0)
		rc = build_map(r, err);
	if (rc < 0) {
		img_reader_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

void img_reader_close(struct img_reader *r)
{
	if (!r)
		return;
	for (struct centry *e = r->head, *n; e; e = n) {
		n = e->next;
		free(e->raw);
		free(e);
	}
	for (size_t i = 0; r->parts && i < r->m.nparts; i++) {
		if (r->parts[i].fd >= 0)
			close(r->parts[i].fd);
		free(r->parts[i].slot);
		img_index_free(&r->parts[i].ix);
	}
	for (size_t i = 0; r->area_bytes && i < r->m.nareas; i++)
		free(r->area_bytes[i]);
	for (size_t i = 0; i < r->ndctx; i++)
		ZSTD_freeDCtx(r->dctx[i]);
	free(r->dctx);
	free(r->parts);
	free(r->area_bytes);
	free(r->pieces);
	free(r->areas);
	free(r->ivals);
	img_manifest_free(&r->m);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

uint64_t img_reader_size(const struct img_reader *r)
{
	return r->size;
}

/* ---- the frame cache (r->lock held where said) ---- */

static void lru_unlink(struct img_reader *r, struct centry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		r->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		r->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push(struct img_reader *r, struct centry *e)
{
	e->prev = NULL;
	e->next = r->head;
	if (r->head)
		r->head->prev = e;
	r->head = e;
	if (!r->tail)
		r->tail = e;
}

/* (locked) Drop the least recently used unpinned frames while over budget. */
static void evict(struct img_reader *r)
{
	struct centry *e = r->tail, *prev;

	while (e && r->st.cached_bytes > r->budget) {
		prev = e->prev;
		if (!e->refs) {
			lru_unlink(r, e);
			r->parts[e->part].slot[e->frame] = NULL;
			r->st.cached_bytes -= e->len;
			r->st.cached_frames--;
			r->st.evictions++;
			free(e->raw);
			free(e);
		}
		e = prev;
	}
}

static ZSTD_DCtx *dctx_take(struct img_reader *r)
{
	ZSTD_DCtx *d = NULL;

	pthread_mutex_lock(&r->lock);
	if (r->ndctx)
		d = r->dctx[--r->ndctx];
	pthread_mutex_unlock(&r->lock);
	return d ? d : ZSTD_createDCtx();
}

static void dctx_give(struct img_reader *r, ZSTD_DCtx *d)
{
	pthread_mutex_lock(&r->lock);
	if (grow((void **)&r->dctx, &r->dctx_cap, r->ndctx, sizeof(*r->dctx)) == 0) {
		r->dctx[r->ndctx++] = d;
		d = NULL;
	}
	pthread_mutex_unlock(&r->lock);
	ZSTD_freeDCtx(d);
}

/* Read and decode frame fi of partition pi into a new entry (unlocked). */
static int decode(struct img_reader *r, uint32_t pi, uint64_t fi, struct centry **out,
		  struct im_err *err)
{
	const struct img_part *p = &r->m.parts[pi];
	const struct img_index *ix = &r->parts[pi].ix;
	const struct img_frame *f = &ix->frames[fi];
	struct centry *e = calloc(1, sizeof(*e));
	unsigned char *comp = malloc(f->comp_size ? f->comp_size : 1);
	char what[160] = "";
	int rc = -ENOMEM;

	if (e)
		e->raw = malloc(f->raw_size ? f->raw_size : 1);
	if (!e || !comp || !e->raw)
		goto fail;
	rc = util_pread_full(r->parts[pi].fd, comp, f->comp_size, f->comp_offset);
	if (rc < 0) {
		snprintf(what, sizeof(what), "%s",
			 rc == -EIO ? "missing: the stream ends before it" : strerror(-rc));
	} else {
		ZSTD_DCtx *d = dctx_take(r);
		rc = d ? frame_decode(d, f, comp, e->raw, f->raw_size, what, sizeof(what)) : -ENOMEM;
		if (d)
			dctx_give(r, d);
	}
	if (rc < 0 && rc != -ENOMEM) {
		uint64_t off, len;
		frame_span(ix, f, p->start, &off, &len);
		pthread_mutex_lock(&r->lock);
		r->st.damaged++;
		pthread_mutex_unlock(&r->lock);
		free(comp);
		free(e->raw);
		free(e);
		return im_errf(err, IM_EXIT_DAMAGED, -EIO,
			       "partition %u: frame %llu of %s is damaged (%s); it holds disk bytes %llu-%llu",
			       p->number, (unsigned long long)fi, p->stream, what,
			       (unsigned long long)off, (unsigned long long)(off + len));
	}
	if (rc < 0)
		goto fail;
	free(comp);
	e->part = pi;
	e->frame = fi;
	e->len = f->raw_size;
	*out = e;
	return 0;
fail:
	free(comp);
	if (e)
		free(e->raw);
	free(e);
	return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
}

/* The frame, pinned (frame_put releases it). */
static int frame_get(struct img_reader *r, uint32_t pi, uint64_t fi, struct centry **out,
		     struct im_err *err)
{
	struct centry *e, *mine = NULL;
	int rc;

	pthread_mutex_lock(&r->lock);
	e = r->parts[pi].slot[fi];
	if (e) {
		r->st.hits++;
		e->refs++;
		lru_unlink(r, e);
		lru_push(r, e);
		pthread_mutex_unlock(&r->lock);
		*out = e;
		return 0;
	}
	r->st.misses++;
	pthread_mutex_unlock(&r->lock);

	if ((rc = decode(r, pi, fi, &mine, err)) < 0)
		return rc;
	pthread_mutex_lock(&r->lock);
	r->st.decoded_bytes += mine->len;
	e = r->parts[pi].slot[fi];
	if (e) {    /* another reader decoded it meanwhile */
		lru_unlink(r, e);
	} else {
		e = mine;
		mine = NULL;
		r->parts[pi].slot[fi] = e;
		r->st.cached_bytes += e->len;
		r->st.cached_frames++;
	}
	e->refs++;
	lru_push(r, e);
	evict(r);
	pthread_mutex_unlock(&r->lock);
	if (mine) {
		free(mine->raw);
		free(mine);
	}
	*out = e;
	return 0;
}

static void frame_put(struct img_reader *r, struct centry *e)
{
	pthread_mutex_lock(&r->lock);
	e->refs--;
	evict(r);
	pthread_mutex_unlock(&r->lock);
}

/* ---- reading ---- */

/* The first of n sorted ranges (stride apart, off and len at their head)
 * that ends after off. */
static size_t first_after(const void *arr, size_t n, size_t stride, uint64_t off)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const uint64_t *x = (const uint64_t *)((const char *)arr + mid * stride);
		if (x[0] + x[1] <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int img_reader_read(struct img_reader *r, void *buf, uint64_t len, uint64_t off,
		    struct im_err *err)
{
	unsigned char *out = buf;
	struct centry *cur = NULL;
	uint64_t end = off + len;
	int rc = 0;

	if (off > r->size || len > r->size - off)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "read of %llu bytes at %llu past the end (%llu bytes)",
			       (unsigned long long)len, (unsigned long long)off,
			       (unsigned long long)r->size);
	memset(buf, 0, len);
	for (size_t i = first_after(r->pieces, r->npieces, sizeof(*r->pieces), off);
	     i < r->npieces && r->pieces[i].off < end; i++) {
		const struct piece *pc = &r->pieces[i];
		uint64_t s = pc->off > off ? pc->off : off;
		uint64_t e = pc->off + pc->len < end ? pc->off + pc->len : end;

		if (!cur || cur->part != pc->part || cur->frame != pc->frame) {
			if (cur)
				frame_put(r, cur);
			cur = NULL;
			if ((rc = frame_get(r, pc->part, pc->frame, &cur, err)) < 0)
				return rc;
		}
		memcpy(out + (s - off), cur->raw + pc->raw_off + (s - pc->off), e - s);
	}
	if (cur)
		frame_put(r, cur);
	/* the boot areas last, as the writer puts them */
	for (size_t i = 0; i < r->nareas; i++) {
		const struct area *a = &r->areas[i];
		uint64_t s = a->off > off ? a->off : off;
		uint64_t e = a->off + a->len < end ? a->off + a->len : end;
		if (s < e)
			memcpy(out + (s - off), a->data + (s - a->off), e - s);
	}
	return 0;
}

int img_reader_extents(struct img_reader *r, uint64_t off, uint64_t len, img_extent_fn cb,
		       void *opaque)
{
	uint64_t end, at = off;
	int rc;

	if (off >= r->size)
		return 0;
	end = len > r->size - off ? r->size : off + len;
	for (size_t i = first_after(r->ivals, r->nivals, sizeof(*r->ivals), off);
	     i < r->nivals && at < end; i++) {
		const struct ival *v = &r->ivals[i];
		uint64_t s = v->off > at ? v->off : at;
		uint64_t e = v->off + v->len < end ? v->off + v->len : end;
		if (s >= end)
			break;
		if (s > at && (rc = cb(opaque, at, s - at, true)) < 0)
			return rc;
		if ((rc = cb(opaque, s, e - s, false)) < 0)
			return rc;
		at = e;
	}
	if (at < end && (rc = cb(opaque, at, end - at, true)) < 0)
		return rc;
	return 0;
}

void img_reader_stats(struct img_reader *r, struct img_reader_stats *st)
{
	pthread_mutex_lock(&r->lock);
	*st = r->st;
	pthread_mutex_unlock(&r->lock);
}
