/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Rescue reads (backend.h, "rescue reads"): a read that meets bad sectors
 * is split in halves down to the logical sector, each unreadable sector is
 * tried again, then given up as zeros; the ranges read and the ranges
 * given up are kept as sorted, merged sets and written as GNU ddrescue's
 * mapfile.
 */
#include "rescue.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

struct rangeset {
	struct bk_range *r;
	size_t n, cap;
};

struct bk_rescue {
	unsigned retries;
	struct rangeset read, bad;
	uint64_t bad_bytes;
	time_t started;
	int failed;               /* recording ran out of memory: -ENOMEM */
};

/* Add [off, off+len) to the set, merging what touches it.  Returns the
 * bytes that were not in the set yet, or -ENOMEM. */
static int64_t rs_add(struct rangeset *s, uint64_t off, uint64_t len)
{
	uint64_t end = off + len, had = 0;
	size_t lo = 0, hi = s->n, j;

	if (!len)
		return 0;
	/* Reads mostly go forwards: the last range grows, or one follows it. */
	if (s->n && s->r[s->n - 1].off <= off) {
		struct bk_range *last = &s->r[s->n - 1];
		uint64_t last_end = last->off + last->len;
		if (off <= last_end) {
			if (end <= last_end)
				return 0;
			last->len = end - last->off;
			return (int64_t)(end - last_end);
		}
		lo = hi = s->n;
	}
	/* the first range that ends at or after off */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->r[mid].off + s->r[mid].len < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* ranges lo..j-1 touch [off, end): they become one */
	for (j = lo; j < s->n && s->r[j].off <= end; j++) {
		uint64_t a = s->r[j].off, b = a + s->r[j].len;
		if (a < end && b > off)   /* its overlap with the new range */
			had += (b < end ? b : end) - (a > off ? a : off);
		if (a < off)
			off = a;
		if (b > end)
			end = b;
	}
	if (j > lo) {
		s->r[lo].off = off;
		s->r[lo].len = end - off;
		memmove(&s->r[lo + 1], &s->r[j], (s->n - j) * sizeof(*s->r));
		s->n -= j - lo - 1;
		return (int64_t)(len - had);
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct bk_range *p = realloc(s->r, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->r = p;
		s->cap = cap;
	}
	memmove(&s->r[lo + 1], &s->r[lo], (s->n - lo) * sizeof(*s->r));
	s->r[lo].off = off;
	s->r[lo].len = end - off;
	s->n++;
	return (int64_t)len;
}

/* Bytes of the set inside [off, off+len). */
static uint64_t rs_inside(const struct rangeset *s, uint64_t off, uint64_t len)
{
	uint64_t n = 0, end = off + len;

	for (size_t i = 0; i < s->n; i++) {
		uint64_t a = s->r[i].off, b = s->r[i].off + s->r[i].len;
		if (a < off)
			a = off;
		if (b > end)
			b = end;
		if (a < b)
			n += b - a;
	}
	return n;
}

int bk_rescue_start(struct bk *bk, unsigned retries, struct im_err *err)
{
	if (bk->rescue)
		return 0;
	bk->rescue = calloc(1, sizeof(*bk->rescue));
	if (!bk->rescue)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	bk->rescue->retries = retries;
	bk->rescue->started = time(NULL);
	return 0;
}

void rescue_free(struct bk_rescue *r)
{
	if (!r)
		return;
	free(r->read.r);
	free(r->bad.r);
	free(r);
}

bool rescue_media_error(int r)
{
	return r == -EIO || r == -ENODATA || r == -EILSEQ;
}

void rescue_note_read(struct bk *bk, uint64_t off, uint64_t len)
{
	if (rs_add(&bk->rescue->read, off, len) < 0)
		bk->rescue->failed = -ENOMEM;
}

static int piece(struct bk *bk, void *buf, size_t len, uint64_t off)
{
	return bk->drv->pread_direct ? bk->drv->pread_direct(bk, buf, len, off)
				     : bk->drv->pread(bk, buf, len, off);
}

/* [off, off+len) failed as a whole: its halves are read, and a failing
 * half is split again; one sector is tried 1 + retries times. */
static int split(struct bk *bk, unsigned char *buf, size_t len, uint64_t off)
{
	struct bk_rescue *rs = bk->rescue;
	size_t g = bk->sector_size >= 512 ? bk->sector_size : 512, half;
	int r = -EIO;

	if (len <= g) {
		for (unsigned t = 0; t <= rs->retries; t++) {
			r = piece(bk, buf, len, off);
			if (r == 0 || !rescue_media_error(r))
				return r;
		}
		int64_t added = rs_add(&rs->bad, off, len);
		memset(buf, 0, len);
		if (added < 0)
			return -ENOMEM;
		rs->bad_bytes += (uint64_t)added;   /* (a sector met again counts once) */
		return 0;
	}
	half = len / 2 / g * g;
	if (!half)
		half = g;
	for (int h = 0; h < 2; h++) {
		size_t n = h ? len - half : half;
		unsigned char *b = h ? buf + half : buf;
		uint64_t o = h ? off + half : off;

		/* (a single sector is tried by split(), 1 + retries times) */
		r = n > g ? piece(bk, b, n, o) : -EIO;
		if (r < 0 && rescue_media_error(r))
			r = split(bk, b, n, o);
		if (r < 0)
			return r;
	}
	return 0;
}

int rescue_read(struct bk *bk, void *buf, size_t len, uint64_t off)
{
	return split(bk, buf, len, off);
}

const struct bk_range *bk_rescue_bad(const struct bk *bk, size_t *n)
{
	*n = bk->rescue ? bk->rescue->bad.n : 0;
	return *n ? bk->rescue->bad.r : NULL;
}

uint64_t bk_rescue_bad_bytes(const struct bk *bk, uint64_t off, uint64_t len)
{
	return bk->rescue ? rs_inside(&bk->rescue->bad, off, len) : 0;
}

uint64_t bk_rescue_bad_total(const struct bk *bk)
{
	return bk->rescue ? bk->rescue->bad_bytes : 0;
}

/* ---- the map ---- */

struct map_out {
	FILE *f;
	uint64_t off, len;        /* the line being gathered */
	char status;
};

static void map_emit(struct map_out *m, uint64_t off, uint64_t len, char status)
{
	if (!len)
		return;
	if (m->len && m->status == status && m->off + m->len == off) {
		m->len += len;
		return;
	}
	if (m->len)
		fprintf(m->f, "0x%08llX  0x%08llX  %c\n", (unsigned long long)m->off,
			(unsigned long long)m->len, m->status);
	m->off = off;
	m->len = len;
	m->status = status;
}

static void stamp(char *out, size_t n, time_t t)
{
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(out, n, "%Y-%m-%d %H:%M:%S", &tm);
}

int bk_rescue_write_map(const struct bk *bk, const char *path, const char *cmdline,
			struct im_err *err)
{
	const struct bk_rescue *rs = bk->rescue;
	const struct rangeset *rd = &rs->read, *bad = &rs->bad;
	struct map_out m = { 0 };
	char *text = NULL, t0[32], t1[32];
	size_t textlen = 0, i = 0, j = 0;
	uint64_t pos = 0, size = bk->size;
	int r;

	if (rs->failed)
		return im_errf(err, IM_EXIT_INTERNAL, rs->failed, "out of memory");
	m.f = open_memstream(&text, &textlen);
	if (!m.f)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	stamp(t0, sizeof(t0), rs->started);
	stamp(t1, sizeof(t1), time(NULL));
	fprintf(m.f,
		"# Mapfile. Created by imager version %s (GNU ddrescue's mapfile format)\n"
		"# Command line: %s\n# Start time:   %s\n# Current time: %s\n"
		"# Finished: %llu bytes unreadable in %zu ranges (-); ? = not needed, not read\n"
		"# current_pos  current_status  current_pass\n0x00000000     +               1\n"
		"#      pos        size  status\n",
		IMAGER_VERSION, cmdline, t0, t1, (unsigned long long)rs->bad_bytes, bad->n);
	/* Walk the disk: bad ranges first, then read ranges, the rest "?". */
	while (pos < size) {
		uint64_t end, next_bad;

		while (j < bad->n && bad->r[j].off + bad->r[j].len <= pos)
			j++;
		if (j < bad->n && bad->r[j].off <= pos) {
			end = bad->r[j].off + bad->r[j].len;
			if (end > size)
				end = size;
			map_emit(&m, pos, end - pos, '-');
			pos = end;
			continue;
		}
		next_bad = j < bad->n && bad->r[j].off < size ? bad->r[j].off : size;
		while (i < rd->n && rd->r[i].off + rd->r[i].len <= pos)
			i++;
		if (i < rd->n && rd->r[i].off <= pos) {
			end = rd->r[i].off + rd->r[i].len;
			map_emit(&m, pos, (end < next_bad ? end : next_bad) - pos, '+');
			pos = end < next_bad ? end : next_bad;
		} else {
			end = i < rd->n ? rd->r[i].off : size;
			map_emit(&m, pos, (end < next_bad ? end : next_bad) - pos, '?');
			pos = end < next_bad ? end : next_bad;
		}
	}
	map_emit(&m, size, 1, 'x');   /* flushes the last line */
	if (fclose(m.f) != 0) {
		free(text);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	r = util_write_file_atomic(path, text, textlen);
	free(text);
	if (r < 0)
		return im_errf(err, r == -ENOSPC || r == -EIO ? IM_EXIT_IO : IM_EXIT_TARGET, r,
			       "writing the map %s: %s", path, strerror(-r));
	return 0;
}
