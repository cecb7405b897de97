/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 (backend-qcow2.c): mapping guest clusters through the L1 and L2
 * tables, compressed clusters (deflate, zstd), reading, block status,
 * writing and zeroing, flush and close.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "qcow2-int.h"

/* ---- mapping ---- */

/* The L2 table for guest cluster gc; *out = NULL when it has none and
 * alloc is false. */
static int l2_table(struct qc_state *s, uint64_t gc, bool alloc, struct qc_slot **out)
{
	uint64_t i = gc >> s->l2_bits, e, off;
	int r;

	*out = NULL;
	if (i >= s->l1_size)
		return -EBADMSG;
	e = s->l1[i];
	off = e & QC_OFFSET_MASK;
	if (e & QC_L1_RESERVED)
		return -EBADMSG;
	if (!off) {
		if (!alloc)
			return 0;
		if ((r = qc_alloc_cluster(s, &off)) < 0)
			return r;
		if ((r = qc_cache_get(s, s->l2c, s->n_l2c, off, true, out)) < 0)
			return r;
		s->l1[i] = off | QC_OFLAG_COPIED;
		qc_dirty_range(&s->l1_dirty_lo, &s->l1_dirty_hi, i);
		return 0;
	}
	if ((off & (s->cs - 1)) || off > s->file_size - s->cs)
		return -EBADMSG;
	if (alloc && !(e & QC_OFLAG_COPIED))
		return -ENOTSUP;   /* a shared L2 table would need copy-on-write */
	if (alloc && qc_overlaps_metadata(s, off))
		return -EBADMSG;
	return qc_cache_get(s, s->l2c, s->n_l2c, off, false, out);
}

enum qc_kind { QC_UNALLOC, QC_ZERO, QC_NORMAL, QC_COMPRESSED };

struct qc_map {
	enum qc_kind kind;
	uint64_t entry;      /* the raw L2 entry */
	uint64_t host;       /* normal: host cluster offset (0 if none) */
	uint32_t alloc_bm;   /* extended L2: subclusters with data */
	uint32_t zero_bm;    /* extended L2: subclusters reading zeros */
};

/* Decode and validate one L2 entry (and its bitmap). */
static int decode_entry(struct qc_state *s, uint64_t e, uint64_t bm, struct qc_map *m)
{
	memset(m, 0, sizeof(*m));
	m->entry = e;
	if (e & QC_OFLAG_COMPRESSED) {
		unsigned x = 62 - (s->cluster_bits - 8);
		uint64_t coff = e & ((1ull << x) - 1);

		if ((e & QC_OFLAG_COPIED) || (s->ext_l2 && bm) || coff >> 56 || coff < s->cs ||
		    coff >= s->file_size)
			return -EBADMSG;
		m->kind = QC_COMPRESSED;
		return 0;
	}
	if (e & QC_L2_RESERVED)
		return -EBADMSG;
	m->host = e & QC_OFFSET_MASK;
	if (m->host) {
		/* The cluster starts inside the file; each read checks its
		 * own bytes (with subclusters, the file may end inside the
		 * last cluster). */
		if ((m->host & (s->cs - 1)) || m->host >= s->file_size)
			return -EBADMSG;
	} else if (e & QC_OFLAG_COPIED) {
		return -EBADMSG;   /* host offset 0 only with an external data file */
	}
	if (s->ext_l2) {
		m->alloc_bm = (uint32_t)bm;
		m->zero_bm = (uint32_t)(bm >> 32);
		if ((e & QC_OFLAG_ZERO) || (m->alloc_bm & m->zero_bm) || (m->alloc_bm && !m->host))
			return -EBADMSG;
		m->kind = m->alloc_bm ? QC_NORMAL : m->zero_bm ? QC_ZERO : QC_UNALLOC;
		return 0;
	}
	if (e & QC_OFLAG_ZERO) {
		if (s->version < 3)
			return -EBADMSG;
		m->kind = QC_ZERO;
	} else {
		m->kind = m->host ? QC_NORMAL : QC_UNALLOC;
	}
	return 0;
}

/* Map guest cluster gc for reading. */
static int lookup(struct qc_state *s, uint64_t gc, struct qc_map *m)
{
	struct qc_slot *sl;
	uint64_t i = gc & ((1ull << s->l2_bits) - 1), e, bm = 0;
	int r = l2_table(s, gc, false, &sl);

	if (r < 0)
		return r;
	if (!sl) {
		memset(m, 0, sizeof(*m));
		m->kind = QC_UNALLOC;
		return 0;
	}
	e = be64(sl->buf + i * s->entry_size);
	if (s->ext_l2)
		bm = be64(sl->buf + i * s->entry_size + 8);
	return decode_entry(s, e, bm, m);
}

/* ---- compressed clusters ---- */

static int inflate_cluster(struct qc_state *s, const unsigned char *in, size_t inlen)
{
	int r;

	if (!s->zs_ready) {
		memset(&s->zs, 0, sizeof(s->zs));
		if (inflateInit2(&s->zs, -12) != Z_OK)
			return -ENOMEM;
		s->zs_ready = true;
	} else if (inflateReset(&s->zs) != Z_OK) {
		return -EIO;
	}
	s->zs.next_in = (unsigned char *)in;
	s->zs.avail_in = (uInt)inlen;
	s->zs.next_out = s->zout;
	s->zs.avail_out = (uInt)s->cs;
	r = inflate(&s->zs, Z_FINISH);
	/* Decompression stops once a whole cluster came out. */
	if ((r == Z_STREAM_END || r == Z_OK || r == Z_BUF_ERROR) && s->zs.avail_out == 0)
		return 0;
	return -EBADMSG;
}

static int zstd_cluster(struct qc_state *s, const unsigned char *in, size_t inlen)
{
	ZSTD_inBuffer ib = { in, inlen, 0 };
	ZSTD_outBuffer ob = { s->zout, s->cs, 0 };

	if (!s->zd && !(s->zd = ZSTD_createDCtx()))
		return -ENOMEM;
	ZSTD_DCtx_reset(s->zd, ZSTD_reset_session_only);
	while (ob.pos < ob.size) {
		size_t in0 = ib.pos, out0 = ob.pos;
		size_t r = ZSTD_decompressStream(s->zd, &ob, &ib);
		if (ZSTD_isError(r))
			return -EBADMSG;
		if (ob.pos == ob.size)
			break;
		if (ib.pos == ib.size || (ib.pos == in0 && ob.pos == out0))
			return -EBADMSG;   /* the data ended before a whole cluster */
	}
	return 0;
}

/* Decompress the cluster of L2 entry e into s->zout. */
static int read_compressed(struct qc_state *s, uint64_t e)
{
	unsigned x = 62 - (s->cluster_bits - 8);
	uint64_t coff = e & ((1ull << x) - 1);
	uint64_t nsec = ((e & ~(QC_OFLAG_COPIED | QC_OFLAG_COMPRESSED)) >> x) + 1;
	uint64_t len = nsec * 512 - (coff & 511), end;
	int r;

	if (s->zout_valid && s->zout_entry == e)
		return 0;
	s->zout_valid = false;
	/* The last sector may reach past the end of the file (opened for
	 * writing, file_size is rounded up to a cluster: use the real end). */
	end = min_u64(s->file_size, s->phys_size);
	if (coff >= end)
		return -EBADMSG;
	len = min_u64(len, end - coff);
	if ((r = qc_host_read(s, s->zin, (size_t)len, coff)) < 0)
		return r;
	r = s->compression == 0 ? inflate_cluster(s, s->zin, (size_t)len) :
				  zstd_cluster(s, s->zin, (size_t)len);
	if (r < 0)
		return r;
	s->zout_entry = e;
	s->zout_valid = true;
	return 0;
}

/* The host clusters a compressed cluster's bytes lie in. */
static void compressed_span(struct qc_state *s, uint64_t e, uint64_t *first, uint64_t *last)
{
	unsigned x = 62 - (s->cluster_bits - 8);
	uint64_t coff = e & ((1ull << x) - 1);
	uint64_t nsec = ((e & ~(QC_OFLAG_COPIED | QC_OFLAG_COMPRESSED)) >> x) + 1;
	uint64_t end = (coff & ~511ull) + nsec * 512;

	*first = coff >> s->cluster_bits;
	*last = (end - 1) >> s->cluster_bits;
}

/* ---- reading ---- */

int qc_pread(struct bk *bk, void *buf, size_t len, uint64_t off)
{
	struct qc_state *s = bk->priv;
	unsigned char *p = buf;
	/* A run of contiguous host bytes not read yet. */
	unsigned char *run_buf = NULL;
	uint64_t run_host = 0, run_len = 0;
	int r;

	while (len) {
		uint64_t gc = off >> s->cluster_bits, in = off & (s->cs - 1);
		size_t n = (size_t)min_u64(len, s->cs - in);
		struct qc_map m;

		if ((r = lookup(s, gc, &m)) < 0)
			return r;
		if (m.kind == QC_NORMAL && !s->ext_l2) {
			if (run_len && run_buf + run_len == p && run_host + run_len == m.host + in) {
				run_len += n;
			} else {
				if (run_len && (r = qc_data_read(s, run_buf, run_len, run_host)) < 0)
					return r;
				run_buf = p;
				run_host = m.host + in;
				run_len = n;
			}
		} else if (m.kind == QC_NORMAL) {
			/* Subclusters: data where allocated, zeros elsewhere. */
			uint64_t sub = s->cs / 32;
			for (uint64_t o = in; o < in + n;) {
				unsigned sc = (unsigned)(o / sub);
				uint64_t k = min_u64((sc + 1) * sub, in + n) - o;
				if (m.alloc_bm >> sc & 1) {
					if ((r = qc_data_read(s, p + (o - in), k, m.host + o)) < 0)
						return r;
				} else {
					memset(p + (o - in), 0, k);
				}
				o += k;
			}
		} else if (m.kind == QC_COMPRESSED) {
			if ((r = read_compressed(s, m.entry)) < 0)
				return r;
			memcpy(p, s->zout + in, n);
		} else {
			memset(p, 0, n);
		}
		p += n;
		off += n;
		len -= n;
	}
	if (run_len && (r = qc_data_read(s, run_buf, run_len, run_host)) < 0)
		return r;
	return 0;
}

int qc_block_status(struct bk *bk, uint64_t off, uint64_t len, uint64_t *pnum)
{
	struct qc_state *s = bk->priv;
	uint64_t done = 0;
	int status = -1, r;

	while (done < len) {
		uint64_t o = off + done, gc = o >> s->cluster_bits, in = o & (s->cs - 1);
		uint64_t n = min_u64(len - done, s->cs - in);
		struct qc_slot *sl;
		struct qc_map m;
		int st;

		if ((r = l2_table(s, gc, false, &sl)) < 0)
			return r;
		if (!sl) {
			/* No L2 table: its whole reach reads as zeros. */
			uint64_t reach = (uint64_t)s->cs << s->l2_bits;
			n = min_u64(len - done, reach - (o & (reach - 1)));
			st = BK_STATUS_ZERO;
		} else {
			if ((r = lookup(s, gc, &m)) < 0)
				return r;
			if (m.kind == QC_NORMAL && s->ext_l2) {
				uint64_t sub = s->cs / 32;
				unsigned sc = (unsigned)(in / sub);
				bool a = m.alloc_bm >> sc & 1;
				uint64_t e = (sc + 1) * sub;
				while (e < s->cs && (bool)(m.alloc_bm >> (e / sub) & 1) == a)
					e += sub;
				n = min_u64(n, e - in);
				st = a ? BK_STATUS_DATA : BK_STATUS_ZERO;
			} else {
				st = m.kind == QC_NORMAL || m.kind == QC_COMPRESSED ? BK_STATUS_DATA :
										      BK_STATUS_ZERO;
			}
		}
		if (status >= 0 && st != status)
			break;
		status = st;
		done += n;
		if (st == BK_STATUS_DATA && done >= (64u << 20))
			break;   /* enough for one answer */
	}
	*pnum = done;
	return status;
}

/* ---- writing ---- */

/* Get a host cluster that accepts the write of [in, in+n) of guest
 * cluster gc: allocated, with the rest of its bytes already right. */
static int cluster_for_write(struct qc_state *s, uint64_t gc, uint64_t in, uint64_t n,
			     uint64_t *host)
{
	struct qc_slot *sl;
	uint64_t i = gc & ((1ull << s->l2_bits) - 1), e, first, last, h;
	bool whole = in == 0 && n == s->cs;
	struct qc_map m;
	int r;

	if ((r = l2_table(s, gc, true, &sl)) < 0)
		return r;
	e = be64(sl->buf + i * 8);
	if ((r = decode_entry(s, e, 0, &m)) < 0)
		return r;
	if (m.host && qc_overlaps_metadata(s, m.host))
		return -EBADMSG;
	switch (m.kind) {
	case QC_NORMAL:
		if (!(e & QC_OFLAG_COPIED))
			return -ENOTSUP;   /* shared: would need copy-on-write */
		*host = m.host;
		return 0;
	case QC_ZERO:
		if (m.host && !(e & QC_OFLAG_COPIED))
			return -ENOTSUP;   /* shared */
		if (m.host) {
			/* Preallocated zero cluster: its bytes are stale. */
			if (!whole && (r = qc_host_zero(s, m.host, s->cs)) < 0)
				return r;
			h = m.host;
			break;
		}
		/* No host cluster: a fresh one, as for unallocated. */
		/* fall through */
	case QC_UNALLOC:
		if ((r = qc_alloc_cluster(s, &h)) < 0)
			return r;
		/* Fresh clusters are past the old end of the file: holes. */
		if (!whole && (r = qc_host_extend(s, h + s->cs)) < 0)
			return r;
		break;
	case QC_COMPRESSED:
		if (!whole && (r = read_compressed(s, e)) < 0)
			return r;
		if ((r = qc_alloc_cluster(s, &h)) < 0)
			return r;
		if (!whole && (r = qc_host_write(s, s->zout, s->cs, h)) < 0)
			return r;
		compressed_span(s, e, &first, &last);
		for (uint64_t c = first; c <= last; c++)
			if ((r = qc_rc_decref(s, c)) < 0)
				return r;
		break;
	default:
		return -EBADMSG;
	}
	/* sl is still cached: only refcount blocks were loaded since. */
	put_be64(sl->buf + i * 8, h | QC_OFLAG_COPIED);
	sl->dirty = true;
	s->zout_valid = false;
	*host = h;
	return 0;
}

int qc_pwrite(struct bk *bk, const void *buf, size_t len, uint64_t off)
{
	struct qc_state *s = bk->priv;
	const unsigned char *p = buf, *run_buf = NULL;
	uint64_t run_host = 0, run_len = 0, host;
	int r;

	if (!s->writable)
		return -EBADF;

	while (len) {
		uint64_t gc = off >> s->cluster_bits, in = off & (s->cs - 1);
		size_t n = (size_t)min_u64(len, s->cs - in);
		struct qc_map m;

		if ((r = lookup(s, gc, &m)) < 0)
			return r;
		if ((m.kind == QC_UNALLOC || (m.kind == QC_ZERO && !m.host)) && util_buf_is_zero(p, n)) {
			/* Zeros over a cluster that reads as zeros: nothing to do. */
			goto next;
		}
		if ((r = cluster_for_write(s, gc, in, n, &host)) < 0)
			return r;
		if (run_len && run_buf + run_len == p && run_host + run_len == host + in) {
			run_len += n;
		} else {
			if (run_len && (r = qc_host_write(s, run_buf, run_len, run_host)) < 0)
				return r;
			run_buf = p;
			run_host = host + in;
			run_len = n;
		}
next:
		p += n;
		off += n;
		len -= n;
	}
	if (run_len && (r = qc_host_write(s, run_buf, run_len, run_host)) < 0)
		return r;
	return 0;
}

int qc_pwrite_zeroes(struct bk *bk, uint64_t off, uint64_t len)
{
	struct qc_state *s = bk->priv;
	uint64_t run_host = 0, run_len = 0, run_end = 0;
	int r;

	if (!s->writable)
		return -EBADF;
	while (len) {
		uint64_t gc = off >> s->cluster_bits, in = off & (s->cs - 1);
		uint64_t n = min_u64(len, s->cs - in);
		struct qc_slot *sl;
		struct qc_map m;

		if ((r = l2_table(s, gc, false, &sl)) < 0)
			return r;
		if (!sl) {
			uint64_t reach = (uint64_t)s->cs << s->l2_bits;
			n = min_u64(len, reach - (off & (reach - 1)));
			goto next;
		}
		if ((r = lookup(s, gc, &m)) < 0)
			return r;
		if (m.kind == QC_NORMAL) {
			if (!(m.entry & QC_OFLAG_COPIED))
				return -ENOTSUP;
			if (qc_overlaps_metadata(s, m.host))
				return -EBADMSG;
			if (run_len && run_end == off && run_host + run_len == m.host + in) {
				run_len += n;
			} else {
				if (run_len && (r = qc_host_zero(s, run_host, run_len)) < 0)
					return r;
				run_host = m.host + in;
				run_len = n;
			}
			run_end = off + n;
		} else if (m.kind == QC_COMPRESSED) {
			if (n == s->cs) {
				/* Unallocated reads as zeros (no backing file). */
				uint64_t first, last, i = gc & ((1ull << s->l2_bits) - 1);
				if ((r = l2_table(s, gc, true, &sl)) < 0)
					return r;
				compressed_span(s, m.entry, &first, &last);
				for (uint64_t c = first; c <= last; c++)
					if ((r = qc_rc_decref(s, c)) < 0)
						return r;
				/* sl is still cached: only refcount blocks were loaded. */
				put_be64(sl->buf + i * 8, 0);
				sl->dirty = true;
				s->zout_valid = false;
			} else {
				memset(s->cbuf, 0, (size_t)n);
				if ((r = qc_pwrite(bk, s->cbuf, (size_t)n, off)) < 0)
					return r;
			}
		}
next:
		off += n;
		len -= n;
	}
	if (run_len && (r = qc_host_zero(s, run_host, run_len)) < 0)
		return r;
	return 0;
}

int qc_flush(struct bk *bk)
{
	struct qc_state *s = bk->priv;
	int r;

	if (!s->writable)
		return 0;
	if ((r = qc_write_metadata(s)) < 0)
		return r;
	return fsync(s->fd) < 0 ? -errno : 0;
}

int qc_close(struct bk *bk)
{
	struct qc_state *s = bk->priv;
	int r = qc_flush(bk);

	if (close(s->fd) < 0 && r == 0)
		r = -errno;
	s->fd = -1;
	qc_free(s);
	return r;
}
