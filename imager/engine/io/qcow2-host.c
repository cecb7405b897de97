/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 (backend-qcow2.c): host I/O, the caches of L2 tables and refcount
 * blocks, refcounts and cluster allocation, writing the metadata back in a
 * safe order; the state's buffers.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qcow2-int.h"

/* ---- host I/O ---- */

int qc_host_read(struct qc_state *s, void *buf, size_t len, uint64_t off)
{
	return util_pread_full(s->fd, buf, len, off);
}

/* A table of count big-endian 64-bit entries at off (the L1 table, the
 * refcount table) into out, read a page at a time. */
int qc_read_table(struct qc_state *s, uint64_t off, uint64_t count, uint64_t *out)
{
	for (uint64_t done = 0; done < count;) {
		unsigned char buf[4096];
		size_t n = (size_t)min_u64(count - done, sizeof(buf) / 8);
		int r = qc_host_read(s, buf, n * 8, off + done * 8);
		if (r < 0)
			return r;
		for (size_t i = 0; i < n; i++)
			out[done + i] = be64(buf + 8 * i);
		done += n;
	}
	return 0;
}

/* Read guest data from host bytes that an L2 entry points to. */
int qc_data_read(struct qc_state *s, void *buf, size_t len, uint64_t off)
{
	if (off > s->file_size || len > s->file_size - off)
		return -EBADMSG;
	return util_pread_full(s->fd, buf, len, off);
}

int qc_host_write(struct qc_state *s, const void *buf, size_t len, uint64_t off)
{
	int r = dio_pwrite(&s->dio, s->fd, buf, len, off);
	if (r == 0 && off + len > s->phys_size)
		s->phys_size = off + len;
	return r;
}

/* Grow the host file to at least size bytes (holes read as zeros). */
int qc_host_extend(struct qc_state *s, uint64_t size)
{
	if (s->phys_size >= size)
		return 0;
	if (ftruncate(s->fd, (off_t)size) < 0)
		return -errno;
	s->phys_size = size;
	return 0;
}

/* Make host bytes read as zeros, keeping or dropping the allocation as
 * the container was created. */
int qc_host_zero(struct qc_state *s, uint64_t off, uint64_t len)
{
	int mode = s->prealloc == BK_PREALLOC_FALLOC || s->prealloc == BK_PREALLOC_FULL ?
		   FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE :
		   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

	if (off + len > s->phys_size) {
		/* Past the end of the file it already reads as zeros. */
		if (off >= s->phys_size)
			return 0;
		len = s->phys_size - off;
	}
	if (fallocate(s->fd, mode, (off_t)off, (off_t)len) == 0)
		return 0;
	memset(s->cbuf, 0, s->cs);
	while (len) {
		size_t n = (size_t)min_u64(len, s->cs);
		int r = qc_host_write(s, s->cbuf, n, off);
		if (r < 0)
			return r;
		off += n;
		len -= n;
	}
	return 0;
}

/* ---- the table caches ---- */

static int write_refcounts(struct qc_state *s);

static int slot_writeback(struct qc_state *s, struct qc_slot *sl)
{
	int r;

	if (!sl->dirty)
		return 0;
	r = qc_host_write(s, sl->buf, s->cs, sl->off);
	if (r == 0)
		sl->dirty = false;
	return r;
}

/* Find the cached table at host offset off, reading it on a miss (fresh:
 * a new, zeroed table instead).  The caller has validated off. */
int qc_cache_get(struct qc_state *s, struct qc_slot *slots, unsigned n, uint64_t off,
		     bool fresh, struct qc_slot **out)
{
	struct qc_slot *victim = NULL;
	int r;

	for (unsigned i = 0; i < n; i++)
		if (slots[i].off == off && slots[i].buf) {
			slots[i].used = ++s->clock;
			*out = &slots[i];
			return 0;
		}
	for (unsigned i = 0; i < n; i++)
		if (!victim || !slots[i].buf || slots[i].used < victim->used) {
			victim = &slots[i];
			if (!victim->buf)
				break;
		}
	if (!victim->buf) {
		victim->buf = malloc(s->cs);
		if (!victim->buf)
			return -ENOMEM;
	} else if (victim->dirty) {
		/* An L2 table may only reach the file after the refcounts of
		 * the clusters it points to. */
		if (slots == s->l2c && (r = write_refcounts(s)) < 0)
			return r;
		if ((r = slot_writeback(s, victim)) < 0)
			return r;
	}
	victim->off = 0;
	victim->dirty = false;
	if (fresh) {
		memset(victim->buf, 0, s->cs);
		victim->dirty = true;
	} else if ((r = qc_host_read(s, victim->buf, s->cs, off)) < 0) {
		return r;
	}
	victim->off = off;
	victim->used = ++s->clock;
	*out = victim;
	return 0;
}

/* ---- refcounts (writing) ---- */

static uint64_t rc_get(const unsigned char *b, unsigned order, uint64_t i)
{
	switch (order) {
	case 3: return b[i];
	case 4: return be16(b + 2 * i);
	case 5: return be32(b + 4 * i);
	case 6: return be64(b + 8 * i);
	default: {
		uint64_t bit = i << order;
		return (uint64_t)(b[bit >> 3] >> (bit & 7)) & ((1u << (1u << order)) - 1);
	}
	}
}

void qc_rc_set(unsigned char *b, unsigned order, uint64_t i, uint64_t v)
{
	switch (order) {
	case 3: b[i] = (unsigned char)v; break;
	case 4: put_be16(b + 2 * i, (uint16_t)v); break;
	case 5: put_be32(b + 4 * i, (uint32_t)v); break;
	case 6: put_be64(b + 8 * i, v); break;
	default: {
		uint64_t bit = i << order;
		unsigned mask = ((1u << (1u << order)) - 1) << (bit & 7);
		b[bit >> 3] = (unsigned char)((b[bit >> 3] & ~mask) | ((unsigned)v << (bit & 7) & mask));
	}
	}
}

void qc_dirty_range(uint64_t *lo, uint64_t *hi, uint64_t i)
{
	if (*lo >= *hi) {
		*lo = i;
		*hi = i + 1;
	} else {
		if (i < *lo)
			*lo = i;
		if (i + 1 > *hi)
			*hi = i + 1;
	}
}

/* Does host cluster h hold the header, the L1 table or the refcount
 * table?  (A damaged L2 entry must not make us write over them.) */
bool qc_overlaps_metadata(const struct qc_state *s, uint64_t h)
{
	uint64_t l1_end = s->l1_off + (uint64_t)s->l1_size * 8, rt_end = s->rt_off + s->rt_entries * 8;

	return h < s->cs || (h + s->cs > s->l1_off && h < l1_end) ||
	       (h + s->cs > s->rt_off && h < rt_end);
}

/* The refcount block holding host cluster c (which must have one). */
static int rb_get(struct qc_state *s, uint64_t c, struct qc_slot **out)
{
	uint64_t k = c >> s->rb_bits, e, off;

	if (k >= s->rt_entries)
		return -EBADMSG;
	e = s->rt[k];
	off = e & ~QC_RT_RESERVED;
	if ((e & QC_RT_RESERVED) || !off || (off & (s->cs - 1)) || off > s->file_size - s->cs ||
	    qc_overlaps_metadata(s, off))
		return -EBADMSG;
	return qc_cache_get(s, s->rbc, QC_RB_SLOTS, off, false, out);
}

/* Drop one reference to host cluster c (a compressed cluster rewritten). */
int qc_rc_decref(struct qc_state *s, uint64_t c)
{
	struct qc_slot *sl;
	uint64_t i = c & ((1ull << s->rb_bits) - 1), v;
	int r = rb_get(s, c, &sl);

	if (r < 0)
		return r;
	v = rc_get(sl->buf, s->refcount_order, i);
	if (v == 0)
		return -EBADMSG;
	qc_rc_set(sl->buf, s->refcount_order, i, v - 1);
	sl->dirty = true;
	return 0;
}

/* Append a host cluster with refcount 1; a missing refcount block is
 * appended first, where it counts itself. */
int qc_alloc_cluster(struct qc_state *s, uint64_t *host)
{
	struct qc_slot *sl;
	int r;

	for (;;) {
		uint64_t c = s->alloc_next, k = c >> s->rb_bits, i = c & ((1ull << s->rb_bits) - 1);

		if (k >= s->rt_entries || c >= (1ull << (56 - s->cluster_bits)))
			return -ENOSPC;   /* the refcount table is full */
		if (!s->rt[k]) {
			r = qc_cache_get(s, s->rbc, QC_RB_SLOTS, c << s->cluster_bits, true, &sl);
			if (r < 0)
				return r;
			qc_rc_set(sl->buf, s->refcount_order, i, 1);
			s->rt[k] = c << s->cluster_bits;
			qc_dirty_range(&s->rt_dirty_lo, &s->rt_dirty_hi, k);
			s->alloc_next++;
			s->file_size = s->alloc_next << s->cluster_bits;
			continue;
		}
		if ((r = rb_get(s, c, &sl)) < 0)
			return r;
		if (rc_get(sl->buf, s->refcount_order, i))
			return -EBADMSG;   /* past the end of the file yet in use */
		qc_rc_set(sl->buf, s->refcount_order, i, 1);
		sl->dirty = true;
		s->alloc_next++;
		s->file_size = s->alloc_next << s->cluster_bits;
		*host = c << s->cluster_bits;
		return 0;
	}
}

/* Write a range of a table kept in memory (L1, refcount table). */
int qc_write_table(struct qc_state *s, const uint64_t *t, uint64_t base, uint64_t lo, uint64_t hi)
{
	unsigned char buf[4096];

	while (lo < hi) {
		size_t n = (size_t)min_u64(hi - lo, sizeof(buf) / 8);
		for (size_t i = 0; i < n; i++)
			put_be64(buf + 8 * i, t[lo + i]);
		int r = qc_host_write(s, buf, n * 8, base + lo * 8);
		if (r < 0)
			return r;
		lo += n;
	}
	return 0;
}

static int write_refcounts(struct qc_state *s)
{
	int r;

	for (unsigned i = 0; i < QC_RB_SLOTS; i++)
		if ((r = slot_writeback(s, &s->rbc[i])) < 0)
			return r;
	if (s->rt_dirty_lo < s->rt_dirty_hi) {
		r = qc_write_table(s, s->rt, s->rt_off, s->rt_dirty_lo, s->rt_dirty_hi);
		if (r < 0)
			return r;
		s->rt_dirty_lo = s->rt_dirty_hi = 0;
	}
	return 0;
}

/* Everything in memory to the file, in a safe order. */
int qc_write_metadata(struct qc_state *s)
{
	int r = write_refcounts(s);

	for (unsigned i = 0; r == 0 && i < s->n_l2c; i++)
		r = slot_writeback(s, &s->l2c[i]);
	if (r == 0 && s->l1_dirty_lo < s->l1_dirty_hi) {
		r = qc_write_table(s, s->l1, s->l1_off, s->l1_dirty_lo, s->l1_dirty_hi);
		if (r == 0)
			s->l1_dirty_lo = s->l1_dirty_hi = 0;
	}
	if (r == 0)
		r = qc_host_extend(s, s->file_size);
	return r;
}

void qc_free(struct qc_state *s)
{
	for (unsigned i = 0; i < QC_L2_SLOTS_MAX; i++)
		free(s->l2c[i].buf);
	for (unsigned i = 0; i < QC_RB_SLOTS; i++)
		free(s->rbc[i].buf);
	free(s->l1);
	free(s->rt);
	free(s->zin);
	free(s->zout);
	free(s->cbuf);
	if (s->zs_ready)
		inflateEnd(&s->zs);
	ZSTD_freeDCtx(s->zd);
	dio_close(&s->dio);
	if (s->fd >= 0)
		close(s->fd);
	memset(s, 0, sizeof(*s));
	s->fd = -1;
}
/* Buffers and the cache, once cluster_bits is known. */
int qc_setup(struct qc_state *s)
{
	s->cs = 1ull << s->cluster_bits;
	s->entry_size = s->ext_l2 ? 16 : 8;
	s->l2_bits = s->cluster_bits - (s->ext_l2 ? 4 : 3);
	s->n_l2c = (unsigned)min_u64(QC_L2_SLOTS_MAX, QC_CACHE_BYTES / s->cs);
	if (s->n_l2c < 4)
		s->n_l2c = 4;
	s->zin = malloc(2 * s->cs);
	s->zout = malloc(s->cs);
	s->cbuf = dio_alloc(s->cs);
	return s->zin && s->zout && s->cbuf ? 0 : -ENOMEM;
}
