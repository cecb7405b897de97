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
 *
 * This file probes, opens (the header's checks) and creates; qcow2-host.c
 * and qcow2-rw.c hold the rest (qcow2-int.h).
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

#include "qcow2-int.h"

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
	if ((r = qc_host_read(s, h, (size_t)min_u64(sizeof(h), s->file_size), 0)) < 0)
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
	r = qc_host_read(s, cl, s->cs, 0);
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
	if ((r = qc_read_table(s, s->l1_off, s->l1_size, s->l1)) < 0) {
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
		if ((r = qc_read_table(s, s->rt_off, s->rt_entries, s->rt)) < 0) {
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
		if (s->autoclear && (r = qc_host_write(s, zero8, 8, 88)) < 0) {
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
		int r = qc_host_write(s, zeros, n, off);
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
	if ((r = qc_host_write(s, buf, cs, 0)) < 0)
		return r;

	/* L1 entries and refcount table live in memory; write them whole. */
	for (uint64_t i = 0; i < L->l2_count; i++)
		s->l1[i] = ((L->l2_first + i) << s->cluster_bits) | QC_OFLAG_COPIED;
	for (uint64_t k = 0; k < L->rb_count; k++)
		s->rt[k] = (L->rb_first + k) << s->cluster_bits;
	if ((r = qc_host_extend(s, L->total << s->cluster_bits)) < 0)
		return r;
	if ((r = qc_write_table(s, s->l1, s->l1_off, 0, s->l1_size)) < 0)
		return r;
	if ((r = qc_write_table(s, s->rt, s->rt_off, 0, s->rt_entries)) < 0)
		return r;

	/* Refcount blocks: every cluster of the file is used once. */
	for (uint64_t k = 0; k < L->rb_count; k++) {
		uint64_t first = k * per_rb, n = L->total > first ? min_u64(L->total - first, per_rb) : 0;
		memset(buf, 0, cs);
		for (uint64_t i = 0; i < n; i++)
			qc_rc_set(buf, s->refcount_order, i, 1);
		if ((r = qc_host_write(s, buf, cs, (L->rb_first + k) << s->cluster_bits)) < 0)
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
		if ((r = qc_host_write(s, buf, cs, (L->l2_first + t) << s->cluster_bits)) < 0)
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
