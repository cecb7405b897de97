/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2: QEMU's copy-on-write container, versions 2 and 3, written from the
 * format's specification (docs/interop/qcow2.txt in QEMU).
 *
 * Reading: the active L1 table is kept in memory, L2 tables go through a
 * small cache; standard, zero, unallocated and compressed (deflate or zstd)
 * clusters, and extended L2 entries (subclusters).  Everything read from
 * the file is validated before use: a bad entry is -EBADMSG.
 *
 * Writing: new containers are version 3 with 16-bit refcounts.  Host
 * clusters are only ever appended, never reused, so an allocation is
 * "the next cluster at the end of the file gets refcount 1".  Refcount
 * blocks go through their own small cache.  Preallocation (metadata,
 * falloc, full) lays out every table ahead and maps guest cluster i to
 * data_start + i * cluster_size, so that the file is in the guest's order.
 * Existing containers can be opened for writing too when they have no
 * snapshots, no subclusters and clean refcounts.
 *
 * Metadata reaches the file in the order refcount blocks, refcount table,
 * L2 tables, L1 table: an interruption leaks clusters at worst.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "imager/backend.h"
#include "util.h"

#define QC_MAGIC              0x514649fbu   /* "QFI\xfb" */
#define QC_HDR_V2_LEN         72
#define QC_HDR_V3_LEN         104
#define QC_NEW_HDR_LEN        112           /* with compression_type, padded */

#define QC_INCOMPAT_DIRTY     (1ull << 0)
#define QC_INCOMPAT_CORRUPT   (1ull << 1)
#define QC_INCOMPAT_DATA_FILE (1ull << 2)
#define QC_INCOMPAT_COMPRESS  (1ull << 3)
#define QC_INCOMPAT_EXT_L2    (1ull << 4)

#define QC_EXT_END            0x00000000u
#define QC_EXT_FEATURE_NAMES  0x6803f857u

#define QC_OFLAG_COPIED       (1ull << 63)
#define QC_OFLAG_COMPRESSED   (1ull << 62)
#define QC_OFLAG_ZERO         1ull
#define QC_OFFSET_MASK        0x00fffffffffffe00ull   /* bits 9-55 */
#define QC_L1_RESERVED        0x7f000000000001ffull   /* bits 0-8, 56-62 */
#define QC_L2_RESERVED        0x3f000000000001feull   /* bits 1-8, 56-61 */
#define QC_RT_RESERVED        0x1ffull

/* Implementation limits, the same as QEMU's, which bound our memory. */
#define QC_MAX_L1_BYTES       (32u << 20)
#define QC_MAX_RT_BYTES       (8u << 20)
#define QC_MIN_CLUSTER_BITS   9
#define QC_MAX_CLUSTER_BITS   21
#define QC_CACHE_BYTES        (8u << 20)   /* L2 cache budget */
#define QC_L2_SLOTS_MAX       32
#define QC_RB_SLOTS           4

/* A cached cluster-sized table (L2 table or refcount block). */
struct qc_slot {
	uint64_t off;        /* host offset; 0 = empty slot */
	unsigned char *buf;  /* big-endian, as on disk */
	uint64_t used;       /* LRU clock */
	bool dirty;
};

struct qc_state {
	int fd;
	struct dio dio;           /* writable: big aligned writes go direct */
	unsigned version;
	unsigned cluster_bits;
	uint64_t cs;              /* cluster size */
	uint64_t file_size;       /* bytes of the file: the bound for every host offset */
	uint64_t phys_size;       /* bytes the host file really has (writing) */
	uint64_t incompat;
	uint64_t autoclear;
	unsigned refcount_order;
	unsigned compression;     /* 0 deflate, 1 zstd */
	bool ext_l2;
	unsigned l2_bits;         /* log2 of the entries of an L2 table */
	unsigned entry_size;      /* 8, or 16 with extended L2 entries */
	bool writable;
	enum bk_prealloc prealloc;

	uint64_t l1_off;
	uint32_t l1_size;
	uint64_t *l1;             /* host order */
	uint64_t l1_dirty_lo, l1_dirty_hi;   /* entry range to write */

	uint64_t rt_off;
	uint64_t rt_entries;
	uint64_t *rt;             /* refcount table, host order (writing only) */
	uint64_t rt_dirty_lo, rt_dirty_hi;
	unsigned rb_bits;         /* log2 of the entries of a refcount block */
	uint64_t alloc_next;      /* next host cluster index to allocate */

	struct qc_slot l2c[QC_L2_SLOTS_MAX];
	unsigned n_l2c;
	struct qc_slot rbc[QC_RB_SLOTS];
	uint64_t clock;

	/* Compressed clusters: input buffer, the last decompressed cluster. */
	unsigned char *zin;
	unsigned char *zout;
	uint64_t zout_entry;
	bool zout_valid;
	z_stream zs;
	bool zs_ready;
	ZSTD_DCtx *zd;
	unsigned char *cbuf;      /* a cluster of scratch for writes */
};

/* ---- byte order ---- */

/* (readers: imager/bytes.h, through util.h) */
static inline void put_be16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v; }
static inline void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}
static inline void put_be64(unsigned char *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static inline uint64_t div_up(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }
static inline uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* ---- host I/O ---- */

static int host_read(struct qc_state *s, void *buf, size_t len, uint64_t off)
{
	return pread_full(s->fd, buf, len, off);
}

/* A table of count big-endian 64-bit entries at off (the L1 table, the
 * refcount table) into out, read a page at a time. */
static int read_table(struct qc_state *s, uint64_t off, uint64_t count, uint64_t *out)
{
	for (uint64_t done = 0; done < count;) {
		unsigned char buf[4096];
		size_t n = (size_t)min_u64(count - done, sizeof(buf) / 8);
		int r = host_read(s, buf, n * 8, off + done * 8);
		if (r < 0)
			return r;
		for (size_t i = 0; i < n; i++)
			out[done + i] = be64(buf + 8 * i);
		done += n;
	}
	return 0;
}

/* Read guest data from host bytes that an L2 entry points to. */
static int data_read(struct qc_state *s, void *buf, size_t len, uint64_t off)
{
	if (off > s->file_size || len > s->file_size - off)
		return -EBADMSG;
	return pread_full(s->fd, buf, len, off);
}

static int host_write(struct qc_state *s, const void *buf, size_t len, uint64_t off)
{
	int r = dio_pwrite(&s->dio, s->fd, buf, len, off);
	if (r == 0 && off + len > s->phys_size)
		s->phys_size = off + len;
	return r;
}

/* Grow the host file to at least size bytes (holes read as zeros). */
static int host_extend(struct qc_state *s, uint64_t size)
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
static int host_zero(struct qc_state *s, uint64_t off, uint64_t len)
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
		int r = host_write(s, s->cbuf, n, off);
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
	r = host_write(s, sl->buf, s->cs, sl->off);
	if (r == 0)
		sl->dirty = false;
	return r;
}

/* Find the cached table at host offset off, reading it on a miss (fresh:
 * a new, zeroed table instead).  The caller has validated off. */
static int cache_get(struct qc_state *s, struct qc_slot *slots, unsigned n, uint64_t off,
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
	} else if ((r = host_read(s, victim->buf, s->cs, off)) < 0) {
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

static void rc_set(unsigned char *b, unsigned order, uint64_t i, uint64_t v)
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

static void dirty_range(uint64_t *lo, uint64_t *hi, uint64_t i)
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
static bool overlaps_metadata(const struct qc_state *s, uint64_t h)
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
	    overlaps_metadata(s, off))
		return -EBADMSG;
	return cache_get(s, s->rbc, QC_RB_SLOTS, off, false, out);
}

/* Drop one reference to host cluster c (a compressed cluster rewritten). */
static int rc_decref(struct qc_state *s, uint64_t c)
{
	struct qc_slot *sl;
	uint64_t i = c & ((1ull << s->rb_bits) - 1), v;
	int r = rb_get(s, c, &sl);

	if (r < 0)
		return r;
	v = rc_get(sl->buf, s->refcount_order, i);
	if (v == 0)
		return -EBADMSG;
	rc_set(sl->buf, s->refcount_order, i, v - 1);
	sl->dirty = true;
	return 0;
}

/* Append a host cluster with refcount 1; a missing refcount block is
 * appended first, where it counts itself. */
static int alloc_cluster(struct qc_state *s, uint64_t *host)
{
	struct qc_slot *sl;
	int r;

	for (;;) {
		uint64_t c = s->alloc_next, k = c >> s->rb_bits, i = c & ((1ull << s->rb_bits) - 1);

		if (k >= s->rt_entries || c >= (1ull << (56 - s->cluster_bits)))
			return -ENOSPC;   /* the refcount table is full */
		if (!s->rt[k]) {
			r = cache_get(s, s->rbc, QC_RB_SLOTS, c << s->cluster_bits, true, &sl);
			if (r < 0)
				return r;
			rc_set(sl->buf, s->refcount_order, i, 1);
			s->rt[k] = c << s->cluster_bits;
			dirty_range(&s->rt_dirty_lo, &s->rt_dirty_hi, k);
			s->alloc_next++;
			s->file_size = s->alloc_next << s->cluster_bits;
			continue;
		}
		if ((r = rb_get(s, c, &sl)) < 0)
			return r;
		if (rc_get(sl->buf, s->refcount_order, i))
			return -EBADMSG;   /* past the end of the file yet in use */
		rc_set(sl->buf, s->refcount_order, i, 1);
		sl->dirty = true;
		s->alloc_next++;
		s->file_size = s->alloc_next << s->cluster_bits;
		*host = c << s->cluster_bits;
		return 0;
	}
}

/* Write a range of a table kept in memory (L1, refcount table). */
static int write_table(struct qc_state *s, const uint64_t *t, uint64_t base, uint64_t lo, uint64_t hi)
{
	unsigned char buf[4096];

	while (lo < hi) {
		size_t n = (size_t)min_u64(hi - lo, sizeof(buf) / 8);
		for (size_t i = 0; i < n; i++)
			put_be64(buf + 8 * i, t[lo + i]);
		int r = host_write(s, buf, n * 8, base + lo * 8);
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
		r = write_table(s, s->rt, s->rt_off, s->rt_dirty_lo, s->rt_dirty_hi);
		if (r < 0)
			return r;
		s->rt_dirty_lo = s->rt_dirty_hi = 0;
	}
	return 0;
}

/* Everything in memory to the file, in a safe order. */
static int write_metadata(struct qc_state *s)
{
	int r = write_refcounts(s);

	for (unsigned i = 0; r == 0 && i < s->n_l2c; i++)
		r = slot_writeback(s, &s->l2c[i]);
	if (r == 0 && s->l1_dirty_lo < s->l1_dirty_hi) {
		r = write_table(s, s->l1, s->l1_off, s->l1_dirty_lo, s->l1_dirty_hi);
		if (r == 0)
			s->l1_dirty_lo = s->l1_dirty_hi = 0;
	}
	if (r == 0)
		r = host_extend(s, s->file_size);
	return r;
}

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
		if ((r = alloc_cluster(s, &off)) < 0)
			return r;
		if ((r = cache_get(s, s->l2c, s->n_l2c, off, true, out)) < 0)
			return r;
		s->l1[i] = off | QC_OFLAG_COPIED;
		dirty_range(&s->l1_dirty_lo, &s->l1_dirty_hi, i);
		return 0;
	}
	if ((off & (s->cs - 1)) || off > s->file_size - s->cs)
		return -EBADMSG;
	if (alloc && !(e & QC_OFLAG_COPIED))
		return -ENOTSUP;   /* a shared L2 table would need copy-on-write */
	if (alloc && overlaps_metadata(s, off))
		return -EBADMSG;
	return cache_get(s, s->l2c, s->n_l2c, off, false, out);
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
	if ((r = host_read(s, s->zin, (size_t)len, coff)) < 0)
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

static int qc_pread(struct bk *bk, void *buf, size_t len, uint64_t off)
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
				if (run_len && (r = data_read(s, run_buf, run_len, run_host)) < 0)
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
					if ((r = data_read(s, p + (o - in), k, m.host + o)) < 0)
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
	if (run_len && (r = data_read(s, run_buf, run_len, run_host)) < 0)
		return r;
	return 0;
}

static int qc_block_status(struct bk *bk, uint64_t off, uint64_t len, uint64_t *pnum)
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
	if (m.host && overlaps_metadata(s, m.host))
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
			if (!whole && (r = host_zero(s, m.host, s->cs)) < 0)
				return r;
			h = m.host;
			break;
		}
		/* No host cluster: a fresh one, as for unallocated. */
		/* fall through */
	case QC_UNALLOC:
		if ((r = alloc_cluster(s, &h)) < 0)
			return r;
		/* Fresh clusters are past the old end of the file: holes. */
		if (!whole && (r = host_extend(s, h + s->cs)) < 0)
			return r;
		break;
	case QC_COMPRESSED:
		if (!whole && (r = read_compressed(s, e)) < 0)
			return r;
		if ((r = alloc_cluster(s, &h)) < 0)
			return r;
		if (!whole && (r = host_write(s, s->zout, s->cs, h)) < 0)
			return r;
		compressed_span(s, e, &first, &last);
		for (uint64_t c = first; c <= last; c++)
			if ((r = rc_decref(s, c)) < 0)
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

static int qc_pwrite(struct bk *bk, const void *buf, size_t len, uint64_t off)
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
		if ((m.kind == QC_UNALLOC || (m.kind == QC_ZERO && !m.host)) && buf_is_zero(p, n)) {
			/* Zeros over a cluster that reads as zeros: nothing to do. */
			goto next;
		}
		if ((r = cluster_for_write(s, gc, in, n, &host)) < 0)
			return r;
		if (run_len && run_buf + run_len == p && run_host + run_len == host + in) {
			run_len += n;
		} else {
			if (run_len && (r = host_write(s, run_buf, run_len, run_host)) < 0)
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
	if (run_len && (r = host_write(s, run_buf, run_len, run_host)) < 0)
		return r;
	return 0;
}

static int qc_pwrite_zeroes(struct bk *bk, uint64_t off, uint64_t len)
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
			if (overlaps_metadata(s, m.host))
				return -EBADMSG;
			if (run_len && run_end == off && run_host + run_len == m.host + in) {
				run_len += n;
			} else {
				if (run_len && (r = host_zero(s, run_host, run_len)) < 0)
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
					if ((r = rc_decref(s, c)) < 0)
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
	if (run_len && (r = host_zero(s, run_host, run_len)) < 0)
		return r;
	return 0;
}

static int qc_flush(struct bk *bk)
{
	struct qc_state *s = bk->priv;
	int r;

	if (!s->writable)
		return 0;
	if ((r = write_metadata(s)) < 0)
		return r;
	return fsync(s->fd) < 0 ? -errno : 0;
}

static void qc_free(struct qc_state *s)
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

static int qc_close(struct bk *bk)
{
	struct qc_state *s = bk->priv;
	int r = qc_flush(bk);

	if (close(s->fd) < 0 && r == 0)
		r = -errno;
	s->fd = -1;
	qc_free(s);
	return r;
}

/* Buffers and the cache, once cluster_bits is known. */
static int qc_setup(struct qc_state *s)
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

/* ---- probing and opening ---- */

static int qc_probe(const unsigned char *buf, size_t len)
{
	if (len < 8 || be32(buf) != QC_MAGIC)
		return 0;
	return be32(buf + 4) == 2 || be32(buf + 4) == 3 ? 100 : 0;
}

/* The name the feature table gives an incompatible bit, or "". */
static void feature_name(const unsigned char *tbl, uint32_t len, unsigned bit, char *out, size_t outlen)
{
	out[0] = 0;
	for (uint32_t i = 0; i + 48 <= len; i += 48)
		if (tbl[i] == 0 && tbl[i + 1] == bit) {
			size_t k = 0;
			while (k < 46 && tbl[i + 2 + k] && k + 1 < outlen) {
				unsigned char ch = tbl[i + 2 + k];
				out[k] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
				k++;
			}
			out[k] = 0;
			return;
		}
}

#define BAD(...) im_errf(err, IM_EXIT_SOURCE, -EBADMSG, __VA_ARGS__)
#define UNSUPP(...) im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, __VA_ARGS__)

/* What the first cluster tells: header extensions (bounded by the
 * cluster), then the features we refuse, named as well as we can. */
static int check_header_cluster(struct qc_state *s, const unsigned char *cl, uint32_t hdr_len,
				uint64_t backing_off, uint32_t backing_len, uint32_t crypt,
				const char *path, struct im_err *err)
{
	const unsigned char *names = NULL;
	uint32_t names_len = 0;
	uint64_t unknown;

	if (s->version >= 3) {
		for (uint64_t pos = hdr_len;;) {
			uint32_t type, elen;
			if (pos + 8 > s->cs)
				return BAD("%s: header extensions run past the first cluster", path);
			type = be32(cl + pos);
			elen = be32(cl + pos + 4);
			if (type == QC_EXT_END)
				break;
			if (elen > s->cs - pos - 8)
				return BAD("%s: header extension 0x%08x is too long", path, type);
			if (type == QC_EXT_FEATURE_NAMES) {
				names = cl + pos + 8;
				names_len = elen;
			}
			pos += 8 + div_up(elen, 8) * 8;
		}
	}
	if (backing_off) {
		char name[1024] = "";
		if (backing_len < sizeof(name) && backing_off < s->cs && backing_len <= s->cs - backing_off) {
			for (uint32_t i = 0; i < backing_len; i++) {
				unsigned char ch = cl[backing_off + i];
				name[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
			}
			name[backing_len] = 0;
		}
		return UNSUPP("%s: qcow2 with a backing file%s%s%s (a backing file chain): flatten it "
			      "first, e.g. qemu-img convert -O qcow2 %s flat.qcow2", path,
			      name[0] ? " \"" : "", name, name[0] ? "\"" : "", path);
	}
	if (crypt)
		return UNSUPP("%s: encrypted qcow2 (crypt_method %u) is not supported; decrypt it "
			      "first with qemu-img convert", path, crypt);
	if (s->incompat & QC_INCOMPAT_CORRUPT)
		return BAD("%s: the qcow2 image is marked corrupt; repair it with qemu-img check -r all",
			   path);
	if (s->incompat & QC_INCOMPAT_DATA_FILE)
		return UNSUPP("%s: qcow2 with an external data file is not supported", path);
	unknown = s->incompat & ~(QC_INCOMPAT_DIRTY | QC_INCOMPAT_COMPRESS | QC_INCOMPAT_EXT_L2);
	if (unknown) {
		char fname[64] = "";
		unsigned bit = (unsigned)__builtin_ctzll(unknown);
		if (names)
			feature_name(names, names_len, bit, fname, sizeof(fname));
		return UNSUPP("%s: unknown qcow2 incompatible feature bit %u%s%s%s", path, bit,
			      fname[0] ? " (" : "", fname, fname[0] ? ")" : "");
	}
	return 0;
}

/* Header fields that are checked but not kept. */
struct qc_header {
	uint64_t size;                 /* of the virtual disk */
	uint64_t backing_off, snap_off;
	uint32_t backing_len, crypt, rt_clusters, nb_snap;
	uint32_t hdr_len;              /* QC_HDR_V2_LEN unless version 3 says */
};

/* The fields only version 3 has. */
static int parse_v3_fields(struct qc_state *s, const unsigned char *h, struct qc_header *hd,
			   const char *path, struct im_err *err)
{
	if (s->file_size < QC_HDR_V3_LEN)
		return BAD("%s: too short for a qcow2 v3 header", path);
	s->incompat = be64(h + 72);
	s->autoclear = be64(h + 88);
	s->refcount_order = be32(h + 96);
	hd->hdr_len = be32(h + 100);
	if (hd->hdr_len < QC_HDR_V3_LEN || hd->hdr_len % 8 || hd->hdr_len > s->cs)
		return BAD("%s: header_length %u is invalid", path, hd->hdr_len);
	if (s->refcount_order > 6)
		return BAD("%s: refcount_order %u is invalid", path, s->refcount_order);
	if (hd->hdr_len > QC_HDR_V3_LEN)
		s->compression = h[104];
	return 0;
}

/* The header's fixed fields: magic, version, the cluster size, where the
 * tables are. */
static int read_fixed_header(struct qc_state *s, struct qc_header *hd, const char *path,
			     struct im_err *err)
{
	unsigned char h[QC_HDR_V3_LEN + 8];
	int r;

	if (s->file_size < QC_HDR_V2_LEN)
		return BAD("%s: too short for a qcow2 header", path);
	memset(h, 0, sizeof(h));
	if ((r = host_read(s, h, (size_t)min_u64(sizeof(h), s->file_size), 0)) < 0)
		return im_errf(err, IM_EXIT_IO, r, "%s: %s", path, strerror(-r));
	if (be32(h) != QC_MAGIC)
		return BAD("%s: not a qcow2 file", path);
	s->version = be32(h + 4);
	if (s->version != 2 && s->version != 3)
		return UNSUPP("%s: qcow2 version %u is not supported", path, s->version);
	hd->backing_off = be64(h + 8);
	hd->backing_len = be32(h + 16);
	s->cluster_bits = be32(h + 20);
	hd->size = be64(h + 24);
	hd->crypt = be32(h + 32);
	s->l1_size = be32(h + 36);
	s->l1_off = be64(h + 40);
	s->rt_off = be64(h + 48);
	hd->rt_clusters = be32(h + 56);
	hd->nb_snap = be32(h + 60);
	hd->snap_off = be64(h + 64);
	s->refcount_order = 4;
	if (s->cluster_bits < QC_MIN_CLUSTER_BITS || s->cluster_bits > QC_MAX_CLUSTER_BITS)
		return BAD("%s: cluster_bits %u is out of range", path, s->cluster_bits);
	s->cs = 1ull << s->cluster_bits;
	if (s->file_size < s->cs)
		return BAD("%s: shorter than one cluster", path);
	return s->version >= 3 ? parse_v3_fields(s, h, hd, path, err) : 0;
}

/* The header cluster: extensions, the feature names, the backing name. */
static int read_header_cluster(struct qc_state *s, const struct qc_header *hd, const char *path,
			       struct im_err *err)
{
	unsigned char *cl = malloc(s->cs);
	int r;

	if (!cl)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = host_read(s, cl, s->cs, 0);
	if (r < 0)
		r = im_errf(err, IM_EXIT_IO, r, "%s: %s", path, strerror(-r));
	else
		r = check_header_cluster(s, cl, hd->hdr_len, hd->backing_off, hd->backing_len,
					 hd->crypt, path, err);
	free(cl);
	return r;
}

/* The compression type and its feature bit agree; extended L2 entries
 * have subclusters of at least 512 bytes. */
static int check_compression(struct qc_state *s, const struct qc_header *hd, const char *path,
			     struct im_err *err)
{
	if (s->incompat & QC_INCOMPAT_COMPRESS) {
		if (hd->hdr_len <= QC_HDR_V3_LEN || s->compression == 0)
			return BAD("%s: compression type bit without a compression type", path);
		if (s->compression != 1)
			return UNSUPP("%s: qcow2 compression type %u is not supported", path,
				      s->compression);
	} else if (s->compression != 0) {
		return BAD("%s: compression type %u without its feature bit", path, s->compression);
	}
	s->ext_l2 = s->incompat & QC_INCOMPAT_EXT_L2;
	if (s->ext_l2 && s->cluster_bits < 14)
		return BAD("%s: extended L2 entries with clusters below 16 KiB", path);
	return 0;
}

/* The L1 table covers the disk; the L1, refcount and snapshot tables lie
 * inside the file, on cluster boundaries, past the header. */
static int check_tables(struct qc_state *s, const struct qc_header *hd, const char *path,
			struct im_err *err)
{
	uint64_t max_size, l1_need;

	s->l2_bits = s->cluster_bits - (s->ext_l2 ? 4 : 3);
	if ((uint64_t)s->l1_size * 8 > QC_MAX_L1_BYTES)
		return UNSUPP("%s: L1 table of %u entries is too large", path, s->l1_size);
	max_size = (uint64_t)s->l1_size << (s->l2_bits + s->cluster_bits);
	l1_need = div_up(hd->size, s->cs << s->l2_bits);
	if (hd->size > max_size || l1_need > s->l1_size)
		return BAD("%s: L1 table of %u entries too small for %llu bytes", path, s->l1_size,
			   (unsigned long long)hd->size);
	if (s->l1_size && ((s->l1_off & (s->cs - 1)) || s->l1_off < s->cs ||
			   s->l1_off > s->file_size || (uint64_t)s->l1_size * 8 > s->file_size - s->l1_off))
		return BAD("%s: L1 table offset %llu is invalid", path, (unsigned long long)s->l1_off);
	if ((s->rt_off & (s->cs - 1)) || s->rt_off < s->cs || !hd->rt_clusters ||
	    s->rt_off > s->file_size ||
	    (uint64_t)hd->rt_clusters << s->cluster_bits > s->file_size - s->rt_off)
		return BAD("%s: refcount table offset %llu is invalid", path, (unsigned long long)s->rt_off);
	if (hd->nb_snap && ((hd->snap_off & (s->cs - 1)) || hd->snap_off < s->cs ||
			    hd->snap_off >= s->file_size))
		return BAD("%s: snapshot table offset %llu is invalid", path,
			   (unsigned long long)hd->snap_off);
	return 0;
}

/* What writing in place needs: clean refcounts, no snapshots, no
 * subclusters, a refcount table we can keep in memory. */
static int check_writable(struct qc_state *s, const struct qc_header *hd, const char *path,
			  struct im_err *err)
{
	if (s->incompat & QC_INCOMPAT_DIRTY)
		return UNSUPP("%s: the qcow2 image is dirty (lazy refcounts); run qemu-img check "
			      "-r all before writing to it", path);
	if (hd->nb_snap)
		return UNSUPP("%s: writing to a qcow2 image with internal snapshots is not "
			      "supported", path);
	if (s->ext_l2)
		return UNSUPP("%s: writing to a qcow2 image with extended L2 entries is not "
			      "supported", path);
	if ((uint64_t)hd->rt_clusters << s->cluster_bits > QC_MAX_RT_BYTES)
		return UNSUPP("%s: refcount table too large", path);
	s->rt_entries = ((uint64_t)hd->rt_clusters << s->cluster_bits) / 8;
	return 0;
}

static int parse_header(struct bk *bk, struct qc_state *s, const char *path, unsigned flags,
			struct im_err *err)
{
	struct qc_header hd = { .hdr_len = QC_HDR_V2_LEN };

	FORWARD_ERR(read_fixed_header(s, &hd, path, err));
	FORWARD_ERR(read_header_cluster(s, &hd, path, err));
	FORWARD_ERR(check_compression(s, &hd, path, err));
	FORWARD_ERR(check_tables(s, &hd, path, err));
	bk->size = hd.size;
	return flags & BK_OPEN_WRITE ? check_writable(s, &hd, path, err) : 0;
}

static int qc_open(struct bk *bk, const char *path, unsigned flags, struct im_err *err)
{
	struct qc_state *s = bk->priv;
	struct stat st;
	off_t end;
	int r;

	s->fd = open(path, ((flags & BK_OPEN_WRITE) ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (s->fd < 0 && (flags & BK_OPEN_WRITE) &&
	    (errno == EACCES || errno == EPERM || errno == EROFS || errno == ETXTBSY))
		return im_errf(err, IM_EXIT_TARGET, -errno, "%s: cannot write to it: %s", path,
			       strerror(errno));
	if (s->fd < 0)
		return im_errf(err, errno == ENOENT ? IM_EXIT_SOURCE : IM_EXIT_IO, -errno, "%s: %s",
			       path, strerror(errno));
	end = lseek(s->fd, 0, SEEK_END);
	if (end < 0 || fstat(s->fd, &st) < 0) {
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if ((flags & BK_OPEN_WRITE) && !S_ISREG(st.st_mode)) {
		r = UNSUPP("%s: writing to a qcow2 image that is not a regular file is not supported",
			   path);
		goto fail;
	}
	s->file_size = s->phys_size = (uint64_t)end;
	if ((r = parse_header(bk, s, path, flags, err)) < 0)
		goto fail;
	if ((r = qc_setup(s)) < 0) {
		r = im_errf(err, IM_EXIT_INTERNAL, r, "out of memory");
		goto fail;
	}
	s->l1 = calloc(s->l1_size ? s->l1_size : 1, sizeof(*s->l1));
	if (!s->l1) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto fail;
	}
	if ((r = read_table(s, s->l1_off, s->l1_size, s->l1)) < 0) {
		r = im_errf(err, IM_EXIT_IO, r, "%s: reading the L1 table: %s", path, strerror(-r));
		goto fail;
	}
	if (flags & BK_OPEN_WRITE) {
		unsigned char zero8[8] = { 0 };
		s->rt = calloc(s->rt_entries, sizeof(*s->rt));
		if (!s->rt) {
			r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
			goto fail;
		}
		if ((r = read_table(s, s->rt_off, s->rt_entries, s->rt)) < 0) {
			r = im_errf(err, IM_EXIT_IO, r, "%s: reading the refcount table: %s", path,
				    strerror(-r));
			goto fail;
		}
		s->rb_bits = s->cluster_bits + 3 - s->refcount_order;
		s->alloc_next = div_up(s->file_size, s->cs);
		s->file_size = s->alloc_next << s->cluster_bits;
		s->writable = true;
		dio_open(&s->dio, path);
		/* Auto-clear features (bitmaps) we do not maintain: clear them
		 * before the first change, as the specification asks. */
		if (s->autoclear && (r = host_write(s, zero8, 8, 88)) < 0) {
			r = im_errf(err, IM_EXIT_IO, r, "%s: %s", path, strerror(-r));
			goto fail;
		}
	}
	bk->sector_size = 512;
	bk->raw_path[0] = 0;
	return 0;
fail:
	qc_free(s);
	return r;
}

/* ---- creating ---- */

/* The layout of a new container. */
struct qc_layout {
	uint64_t l1_entries, l1_clusters;
	uint64_t rt_clusters;     /* covers the largest the file can become */
	uint64_t rb_first, rb_count;   /* refcount blocks laid out now */
	uint64_t l2_first, l2_count;   /* preallocated: all L2 tables */
	uint64_t data_first, data_count;
	uint64_t total;           /* clusters of the file now */
};

/* Refcount blocks needed for `fixed` clusters plus themselves. */
static uint64_t rb_fix(uint64_t fixed, uint64_t per_block)
{
	uint64_t r = 0, n;

	while ((n = div_up(fixed + r, per_block)) != r)
		r = n;
	return r;
}

static void plan(uint64_t size, unsigned cluster_bits, bool prealloc, struct qc_layout *L)
{
	uint64_t cs = 1ull << cluster_bits, l2e = cs / 8, per_rb = cs * 8 / 16;
	uint64_t data = div_up(size, cs), l2 = div_up(data, l2e), rt = 1, rb_max;

	memset(L, 0, sizeof(*L));
	L->l1_entries = l2;
	L->l1_clusters = div_up(l2 * 8, cs);
	/* The refcount table must reach the largest file: everything mapped. */
	for (;;) {
		rb_max = rb_fix(1 + L->l1_clusters + rt + l2 + data, per_rb);
		uint64_t need = div_up(rb_max * 8, cs);
		if (need <= rt)
			break;
		rt = need;
	}
	L->rt_clusters = rt;
	L->rb_first = 1 + L->l1_clusters + rt;
	if (prealloc) {
		L->rb_count = rb_max;
		L->l2_first = L->rb_first + rb_max;
		L->l2_count = l2;
		L->data_first = L->l2_first + l2;
		L->data_count = data;
		L->total = L->data_first + data;
	} else {
		L->rb_count = rb_fix(L->rb_first, per_rb);
		L->total = L->rb_first + L->rb_count;
	}
}

static int write_zeros(struct qc_state *s, uint64_t off, uint64_t len)
{
	static const unsigned char zeros[1 << 20];

	while (len) {
		size_t n = (size_t)min_u64(len, sizeof(zeros));
		int r = host_write(s, zeros, n, off);
		if (r < 0)
			return r;
		off += n;
		len -= n;
	}
	return 0;
}

static int create_layout(struct qc_state *s, uint64_t size, const struct qc_layout *L)
{
	unsigned char *buf = s->cbuf;
	uint64_t cs = s->cs, per_rb = 1ull << s->rb_bits;
	int r;

	/* Header, version 3, with an empty extension area. */
	memset(buf, 0, cs);
	put_be32(buf, QC_MAGIC);
	put_be32(buf + 4, 3);
	put_be32(buf + 20, s->cluster_bits);
	put_be64(buf + 24, size);
	put_be32(buf + 36, s->l1_size);
	put_be64(buf + 40, s->l1_off);
	put_be64(buf + 48, s->rt_off);
	put_be32(buf + 56, (uint32_t)L->rt_clusters);
	put_be32(buf + 96, s->refcount_order);
	put_be32(buf + 100, QC_NEW_HDR_LEN);
	/* byte 104: compression type 0 (deflate); then the end marker. */
	if ((r = host_write(s, buf, cs, 0)) < 0)
		return r;

	/* L1 entries and refcount table live in memory; write them whole. */
	for (uint64_t i = 0; i < L->l2_count; i++)
		s->l1[i] = ((L->l2_first + i) << s->cluster_bits) | QC_OFLAG_COPIED;
	for (uint64_t k = 0; k < L->rb_count; k++)
		s->rt[k] = (L->rb_first + k) << s->cluster_bits;
	if ((r = host_extend(s, L->total << s->cluster_bits)) < 0)
		return r;
	if ((r = write_table(s, s->l1, s->l1_off, 0, s->l1_size)) < 0)
		return r;
	if ((r = write_table(s, s->rt, s->rt_off, 0, s->rt_entries)) < 0)
		return r;

	/* Refcount blocks: every cluster of the file is used once. */
	for (uint64_t k = 0; k < L->rb_count; k++) {
		uint64_t first = k * per_rb, n = L->total > first ? min_u64(L->total - first, per_rb) : 0;
		memset(buf, 0, cs);
		for (uint64_t i = 0; i < n; i++)
			rc_set(buf, s->refcount_order, i, 1);
		if ((r = host_write(s, buf, cs, (L->rb_first + k) << s->cluster_bits)) < 0)
			return r;
	}

	/* L2 tables: guest cluster i at data_first + i. */
	for (uint64_t t = 0; t < L->l2_count; t++) {
		uint64_t first = t << s->l2_bits;
		uint64_t n = min_u64(L->data_count - first, 1ull << s->l2_bits);
		memset(buf, 0, cs);
		for (uint64_t i = 0; i < n; i++)
			put_be64(buf + 8 * i, ((L->data_first + first + i) << s->cluster_bits) |
				 QC_OFLAG_COPIED);
		if ((r = host_write(s, buf, cs, (L->l2_first + t) << s->cluster_bits)) < 0)
			return r;
	}

	/* The data area. */
	if (L->data_count && s->prealloc == BK_PREALLOC_FALLOC) {
		uint64_t off = L->data_first << s->cluster_bits, len = L->data_count << s->cluster_bits;
		if (fallocate(s->fd, 0, (off_t)off, (off_t)len) < 0) {
			if (errno != EOPNOTSUPP)
				return -errno;
			if ((r = write_zeros(s, off, len)) < 0)
				return r;
		}
	} else if (L->data_count && s->prealloc == BK_PREALLOC_FULL) {
		r = write_zeros(s, L->data_first << s->cluster_bits, L->data_count << s->cluster_bits);
		if (r < 0)
			return r;
	}
	return fsync(s->fd) < 0 ? -errno : 0;
}

static int qc_create(struct bk *bk, const char *path, const struct bk_create_opts *o,
		     struct im_err *err)
{
	struct qc_state *s = bk->priv;
	uint32_t cs = o->cluster_size ? o->cluster_size : 65536;
	bool prealloc = o->prealloc != BK_PREALLOC_OFF;
	struct qc_layout L;
	unsigned bits = 0;
	int r;

	s->fd = -1;
	if (cs < 512 || cs > (2u << 20) || (cs & (cs - 1)))
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "%s: qcow2 cluster size %u is not a power of two from 512 to 2 MiB",
			       path, cs);
	while ((1u << bits) < cs)
		bits++;
	if (o->size > (1ull << 56))
		return im_errf(err, IM_EXIT_USAGE, -EINVAL, "%s: %llu bytes is too large for qcow2",
			       path, (unsigned long long)o->size);
	plan(o->size, bits, prealloc, &L);
	if (L.l1_entries * 8 > QC_MAX_L1_BYTES || (L.rt_clusters << bits) > QC_MAX_RT_BYTES)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "%s: a cluster size of %u bytes is too small for a %llu-byte qcow2; "
			       "choose a larger one", path, cs, (unsigned long long)o->size);

	s->cluster_bits = bits;
	s->version = 3;
	s->refcount_order = 4;
	s->rb_bits = bits + 3 - 4;
	s->prealloc = o->prealloc;
	s->writable = true;
	if ((r = qc_setup(s)) < 0)
		goto nomem;
	s->l1_size = (uint32_t)L.l1_entries;
	s->l1_off = s->cs;
	s->rt_off = (1 + L.l1_clusters) << bits;
	s->rt_entries = (L.rt_clusters << bits) / 8;
	s->l1 = calloc(L.l1_entries ? L.l1_entries : 1, sizeof(*s->l1));
	s->rt = calloc(s->rt_entries, sizeof(*s->rt));
	if (!s->l1 || !s->rt)
		goto nomem;

	s->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (s->fd < 0) {
		r = im_errf(err, IM_EXIT_TARGET, -errno, "cannot create %s: %s", path, strerror(errno));
		qc_free(s);
		return r;
	}
	dio_open(&s->dio, path);
	s->alloc_next = L.total;
	s->file_size = L.total << bits;
	r = create_layout(s, o->size, &L);
	if (r < 0) {
		qc_free(s);
		unlink(path);
		return im_errf(err, r == -ENOSPC ? IM_EXIT_TARGET : IM_EXIT_IO, r,
			       "%s: cannot lay out the qcow2 container: %s", path, strerror(-r));
	}
	bk->size = o->size;
	bk->sector_size = 512;
	bk->zero_init = true;
	bk->raw_path[0] = 0;
	return 0;
nomem:
	qc_free(s);
	return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
}

const struct bk_driver bk_qcow2 = {
	.name = "qcow2",
	.priv_size = sizeof(struct qc_state),
	.probe = qc_probe,
	.create = qc_create,
	.open = qc_open,
	.pread = qc_pread,
	.pwrite = qc_pwrite,
	.pwrite_zeroes = qc_pwrite_zeroes,
	.block_status = qc_block_status,
	.flush = qc_flush,
	.close = qc_close,
};
