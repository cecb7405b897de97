/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * partclone images, format 0002 (include/imager/partclone.h has the layout
 * and the contract).  Every field is checked before it is used; a
 * strip's checksum is checked before its blocks are handed on.
 */
#include "imager/partclone.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zlib.h>

#include "util.h"

#define CSM_NONE 0x00
#define CSM_CRC32 0x20
#define CSM_XXH64 0x30
#define CSM_XXH128 0x31
#define CSM_CRC32_0001 0xFF
#define BM_BIT 0x01
#define V1_HEADER_SIZE 4160
#define V1_BITMAP_MAGIC "BiTmAgIc"

/* partclone's CRC32: zlib's without the final inversion (and seeded with
 * the running value as it is, 0xFFFFFFFF at first). */
static uint32_t pcl_crc(uint32_t running, const void *buf, size_t len)
{
	uLong c = ~running & 0xFFFFFFFFu;
	const unsigned char *p = buf;
	while (len) {
		uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
		c = crc32(c, p, n);
		p += n;
		len -= n;
	}
	return ~(uint32_t)c;
}

/* partclone's crc32_0001() of format 0001: the block's first byte fed
 * len times (its missing "++"), on the running value. */
static uint32_t pcl_crc_0001(uint32_t crc, const unsigned char *buf, size_t len)
{
	static uint32_t tab[256];

	if (!tab[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c >> 1 ^ (0xEDB88320u & -(c & 1u));
			tab[i] = c;
		}
	while (len--)
		crc = crc >> 8 ^ tab[(crc ^ buf[0]) & 0xff];
	return crc;
}

/* The running checksum started (again). */
static void sum_reset(struct pcl_reader *r)
{
	r->crc = 0xFFFFFFFFu;
	if (r->h.checksum_mode == CSM_XXH64)
		XXH64_reset(r->xxh, 0);
	else if (r->h.checksum_mode == CSM_XXH128)
		XXH3_128bits_reset(r->xxh);
}

static void sum_update(struct pcl_reader *r, const unsigned char *p, size_t n)
{
	uint32_t bs = r->h.block_size;

	switch (r->h.checksum_mode) {
	case CSM_CRC32:
		r->crc = pcl_crc(r->crc, p, n);
		break;
	case CSM_CRC32_0001:
		for (size_t o = 0; o < n; o += bs)
			r->crc = pcl_crc_0001(r->crc, p + o, bs);
		break;
	case CSM_XXH64:
		XXH64_update(r->xxh, p, n);
		break;
	case CSM_XXH128:
		XXH3_128bits_update(r->xxh, p, n);
		break;
	}
}

/* The checksum as the image stores it, into out (checksum_size bytes). */
static void sum_value(struct pcl_reader *r, unsigned char *out)
{
	if (r->h.checksum_mode == CSM_XXH64) {
		put_le64(out, XXH64_digest(r->xxh));
	} else if (r->h.checksum_mode == CSM_XXH128) {
		XXH128_hash_t v = XXH3_128bits_digest(r->xxh);
		put_le64(out, v.low64);
		put_le64(out + 8, v.high64);
	} else {
		put_le32(out, r->crc);
	}
}

/* Fill buf: returns the bytes read (fewer only at the stream's end) or a
 * negative errno. */
static ssize_t read_full(struct pcl_reader *r, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = r->read(r->opaque, (char *)buf + got, len - got);
		if (n < 0)
			return n;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static int read_exact(struct pcl_reader *r, void *buf, size_t len, const char *what,
		      struct im_err *err)
{
	ssize_t n = read_full(r, buf, len);
	if (n < 0)
		return im_errf(err, IM_EXIT_IO, (int)n, "%s: reading %s: %s", r->name, what,
			       strerror((int)-n));
	if ((size_t)n < len)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: the stream ends inside %s (%zd of %zu bytes): truncated", r->name,
			       what, n, len);
	return 0;
}

static int check_header_v1(struct pcl_reader *r, const unsigned char *b, struct im_err *err);
static int check_geometry(struct pcl_reader *r, struct im_err *err);
static int check_options(struct pcl_reader *r, unsigned mode, unsigned reseed, unsigned bitmap_mode,
			 struct im_err *err);

static int check_header(struct pcl_reader *r, const unsigned char *b, struct im_err *err)
{
	struct pcl_header *h = &r->h;
	unsigned mode, feature, version, bitmap_mode, reseed;
	int rc;

	if (memcmp(b, "partclone-image", 15))
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: not a partclone image", r->name);
	if (!memcmp(b + 30, "0001", 4))
		return check_header_v1(r, b, err);
	if (memcmp(b + 30, "0002", 4) || b[15] != '\0')
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: partclone image format '%.4s' is not supported (0002 is)", r->name,
			       (const char *)b + 30);
	if (pcl_crc(0xFFFFFFFFu, b, 106) != le32(b + 106))
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: the partclone header's checksum does not match: damaged", r->name);
	if (le16(b + 34) == 0xDEC0)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: a big-endian partclone image is not supported", r->name);
	if (le16(b + 34) != 0xC0DE)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s: bad endianness marker 0x%04x",
			       r->name, le16(b + 34));

	memcpy(h->tool_version, b + 16, 14);
	h->tool_version[14] = '\0';
	memcpy(h->fs, b + 36, 16);
	h->fs[16] = '\0';
	for (char *c = h->tool_version; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	for (char *c = h->fs; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	h->device_size = le64(b + 52);
	h->total_blocks = le64(b + 60);
	h->used_blocks = le64(b + 76);
	h->block_size = le32(b + 84);
	feature = le32(b + 88);
	version = le16(b + 92);
	mode = le16(b + 96);
	h->checksum_size = le16(b + 98);
	h->blocks_per_checksum = le32(b + 100);
	reseed = b[104];
	bitmap_mode = b[105];

	if (feature != 18 || version != 2)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: partclone image options of %u bytes, version %u, are not supported (18 bytes, version 2 are)",
			       r->name, feature, version);
	rc = check_geometry(r, err);
	return rc < 0 ? rc : check_options(r, mode, reseed, bitmap_mode, err);
}

/* Format 0001: the rest of its 4160-byte header read, its fields taken. */
static int check_header_v1(struct pcl_reader *r, const unsigned char *b, struct im_err *err)
{
	struct pcl_header *h = &r->h;
	unsigned char rest[V1_HEADER_SIZE - PCL_HEADER_SIZE], v[V1_HEADER_SIZE];
	int rc = read_exact(r, rest, sizeof(rest), "the format 0001 header", err);

	if (rc < 0)
		return rc;
	memcpy(v, b, PCL_HEADER_SIZE);
	memcpy(v + PCL_HEADER_SIZE, rest, sizeof(rest));
	r->v1 = true;
	snprintf(h->tool_version, sizeof(h->tool_version), "(format 0001)");
	memcpy(h->fs, v + 15, 15);
	h->fs[15] = '\0';
	for (char *c = h->fs; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	h->block_size = le32(v + 36);
	h->device_size = le64(v + 40);
	h->total_blocks = le64(v + 48);
	h->used_blocks = le64(v + 56);
	/* (partclone takes the blocks' span as the device's size) */
	if (h->total_blocks <= PCL_MAX_BLOCKS && h->block_size <= (16u << 20))
		h->device_size = h->total_blocks * h->block_size;
	h->checksum_mode = CSM_CRC32_0001;
	h->checksum_size = 4;
	h->blocks_per_checksum = 1;
	h->reseed = false;
	return check_geometry(r, err);
}

/* What both formats say of the blocks, checked. */
static int check_geometry(struct pcl_reader *r, struct im_err *err)
{
	struct pcl_header *h = &r->h;

	if (h->block_size < 512 || h->block_size > (16u << 20) || h->block_size % 512)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: block size %u is not a multiple of 512 between 512 bytes and 16 MiB",
			       r->name, h->block_size);
	if (h->total_blocks == 0 || h->total_blocks > PCL_MAX_BLOCKS)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: %llu blocks: not between 1 and %llu", r->name,
			       (unsigned long long)h->total_blocks, (unsigned long long)PCL_MAX_BLOCKS);
	/* The blocks must lie inside the device (the last may be partial). */
	if (h->device_size > UINT64_MAX - h->block_size ||
	    h->total_blocks > (h->device_size + h->block_size - 1) / h->block_size)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: %llu blocks of %u bytes do not fit in the device's %llu bytes",
			       r->name, (unsigned long long)h->total_blocks, h->block_size,
			       (unsigned long long)h->device_size);
	if (h->used_blocks > h->total_blocks)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s: %llu used blocks of %llu",
			       r->name, (unsigned long long)h->used_blocks,
			       (unsigned long long)h->total_blocks);
	return 0;
}

/* Format 0002's options: the checksum mode, its size, the bitmap mode. */
static int check_options(struct pcl_reader *r, unsigned mode, unsigned reseed, unsigned bitmap_mode,
			 struct im_err *err)
{
	struct pcl_header *h = &r->h;

	switch (mode) {
	case CSM_NONE:
		if (h->checksum_size != 0)
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				       "%s: no checksums, but a checksum size of %u", r->name,
				       h->checksum_size);
		break;
	case CSM_CRC32:
		if (h->checksum_size != 4 || h->blocks_per_checksum == 0)
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				       "%s: CRC32 checksums of %u bytes every %u blocks", r->name,
				       h->checksum_size, h->blocks_per_checksum);
		break;
	case CSM_XXH64:
	case CSM_XXH128:
		if (h->checksum_size != (mode == CSM_XXH64 ? 8u : 16u) || h->blocks_per_checksum == 0)
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				       "%s: %s checksums of %u bytes every %u blocks", r->name,
				       mode == CSM_XXH64 ? "XXH64" : "XXH128", h->checksum_size,
				       h->blocks_per_checksum);
		r->xxh = mode == CSM_XXH64 ? (void *)XXH64_createState() : (void *)XXH3_createState();
		if (!r->xxh)
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		break;
	case CSM_CRC32_0001:
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: format 0001's checksum mode in a format 0002 header", r->name);
	default:
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "%s: unknown checksum mode 0x%x",
			       r->name, mode);
	}
	h->checksum_mode = mode;
	if (reseed > 1)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s: reseed flag %u", r->name, reseed);
	h->reseed = reseed == 1;
	if (bitmap_mode != BM_BIT)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: bitmap mode %u is not supported (1, a bit per block, is)", r->name,
			       bitmap_mode);
	return 0;
}

/* Format 0001's bitmap: a byte per block (1: used), then its magic.  The
 * used count is the bitmap's, as partclone takes it. */
static int read_bitmap_v1(struct pcl_reader *r, struct im_err *err)
{
	uint64_t total = r->h.total_blocks, done = 0;
	unsigned char buf[65536];
	int rc;

	if (bitmap_init(&r->used, total) < 0)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM,
			       "%s: out of memory for a bitmap of %llu blocks", r->name,
			       (unsigned long long)total);
	while (done < total) {
		size_t n = total - done > sizeof(buf) ? sizeof(buf) : (size_t)(total - done);
		rc = read_exact(r, buf, n, "the bitmap", err);
		if (rc < 0)
			return rc;
		for (size_t i = 0; i < n; i++)
			if (buf[i] == 1)
				r->used.words[(done + i) / 64] |= 1ull << ((done + i) % 64);
		done += n;
	}
	rc = read_exact(r, buf, 8, "the bitmap's magic", err);
	if (rc < 0)
		return rc;
	if (memcmp(buf, V1_BITMAP_MAGIC, 8))
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: no \"%s\" after the bitmap: damaged", r->name, V1_BITMAP_MAGIC);
	r->h.used_blocks = bitmap_count(&r->used);
	return 0;
}

/* The bitmap: ceil(total / 8) bytes read in pieces into r->used, its
 * CRC32, the count, and no bit past the last block. */
static int read_bitmap(struct pcl_reader *r, struct im_err *err)
{
	uint64_t total = r->h.total_blocks, nbytes = (total + 7) / 8, done = 0;
	unsigned char buf[65536], tail[4];
	uint32_t crc = 0xFFFFFFFFu;
	uint64_t count;
	int rc;

	if (bitmap_init(&r->used, total) < 0)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM,
			       "%s: out of memory for a bitmap of %llu blocks", r->name,
			       (unsigned long long)total);
	while (done < nbytes) {
		size_t n = nbytes - done > sizeof(buf) ? sizeof(buf) : (size_t)(nbytes - done);
		rc = read_exact(r, buf, n, "the bitmap", err);
		if (rc < 0)
			return rc;
		crc = pcl_crc(crc, buf, n);
		for (size_t i = 0; i < n; i++) {
			uint64_t byte = done + i;
			if (buf[i])
				r->used.words[byte / 8] |= (uint64_t)buf[i] << (8 * (byte % 8));
		}
		done += n;
	}
	rc = read_exact(r, tail, 4, "the bitmap's checksum", err);
	if (rc < 0)
		return rc;
	if (crc != le32(tail))
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: the bitmap's checksum does not match: damaged", r->name);
	if (total % 64 && r->used.words[total / 64] >> (total % 64))
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: the bitmap marks blocks past the last one (%llu)", r->name,
			       (unsigned long long)total);
	count = bitmap_count(&r->used);
	if (count != r->h.used_blocks)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: the bitmap holds %llu used blocks, the header says %llu", r->name,
			       (unsigned long long)count, (unsigned long long)r->h.used_blocks);
	return 0;
}

int pcl_open(struct pcl_reader *r, pcl_read_fn fn, void *opaque, const char *name,
	     struct im_err *err)
{
	unsigned char b[PCL_HEADER_SIZE];
	ssize_t n;
	int rc;

	memset(r, 0, sizeof(*r));
	r->read = fn;
	r->opaque = opaque;
	snprintf(r->name, sizeof(r->name), "%s", name);
	n = read_full(r, b, sizeof(b));
	if (n < 0)
		return im_errf(err, IM_EXIT_IO, (int)n, "%s: %s", name, strerror((int)-n));
	if (n < 15 || memcmp(b, "partclone-image", 15))
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: not a partclone image", name);
	if ((size_t)n < sizeof(b))
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: the stream ends inside the partclone header (%zd bytes): truncated",
			       name, n);
	rc = check_header(r, b, err);
	if (rc == 0)
		rc = r->v1 ? read_bitmap_v1(r, err) : read_bitmap(r, err);
	if (rc == 0)
		sum_reset(r);
	if (rc < 0)
		pcl_close(r);
	return rc;
}

/* A strip's stored checksum against the running one; the strip's blocks
 * named when they differ.  Then the running one starts again (reseed). */
static int compare_strip(struct pcl_reader *r, const unsigned char *c, uint64_t first,
			 uint64_t last, struct im_err *err)
{
	unsigned char want[16];
	uint64_t bs = r->h.block_size;

	sum_value(r, want);
	if (memcmp(c, want, r->h.checksum_size))
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: the checksum of blocks %llu-%llu does not match (partition bytes %llu-%llu): damaged",
			       r->name, (unsigned long long)first, (unsigned long long)last,
			       (unsigned long long)(first * bs), (unsigned long long)((last + 1) * bs));
	if (r->h.reseed)
		sum_reset(r);
	return 0;
}

/* The checksum after a strip: read, then compared now, or (marked mode)
 * kept in the run's marks for pcl_check_run. */
static int end_strip(struct pcl_reader *r, uint64_t last, size_t at, struct im_err *err)
{
	unsigned char c[16];
	int rc = read_exact(r, c, r->h.checksum_size, "a checksum", err);

	if (rc < 0)
		return rc;
	r->strip_count = 0;
	if (r->marks) {
		struct pcl_mark *m;
		if (r->marks->n >= r->marks->cap)
			return im_errf(err, IM_EXIT_INTERNAL, -EOVERFLOW, "%s: too many checksums in a run",
				       r->name);
		m = &r->marks->m[r->marks->n++];
		m->end = at;
		m->strip_first = r->strip_first;
		m->last = last;
		memcpy(m->sum, c, r->h.checksum_size);
		return 0;
	}
	return compare_strip(r, c, r->strip_first, last, err);
}

int pcl_check_run(struct pcl_reader *r, const void *buf, size_t blocks,
		  const struct pcl_marks *mk, struct im_err *err)
{
	const unsigned char *p = buf;
	size_t bs = r->h.block_size, at = 0;
	int rc;

	if (r->h.checksum_mode == CSM_NONE)
		return 0;
	for (size_t k = 0; k < mk->n; k++) {
		const struct pcl_mark *m = &mk->m[k];
		if (m->end < at || m->end > blocks)
			return im_errf(err, IM_EXIT_INTERNAL, -EINVAL, "%s: a checksum mark out of order",
				       r->name);
		sum_update(r, p + at * bs, (m->end - at) * bs);
		at = m->end;
		if ((rc = compare_strip(r, m->sum, m->strip_first, m->last, err)) < 0)
			return rc;
	}
	sum_update(r, p + at * bs, (blocks - at) * bs);
	return 0;
}

static int finish(struct pcl_reader *r, struct im_err *err)
{
	unsigned char extra;
	ssize_t n;
	int rc;

	if (r->h.checksum_mode != CSM_NONE && r->strip_count) {
		rc = end_strip(r, r->last, 0, err);
		if (rc < 0)
			return rc;
	}
	n = read_full(r, &extra, 1);
	if (n < 0)
		return im_errf(err, IM_EXIT_IO, (int)n, "%s: %s", r->name, strerror((int)-n));
	if (n > 0)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: data follows the %llu used blocks the bitmap holds: the header or the bitmap lies",
			       r->name, (unsigned long long)r->h.used_blocks);
	r->done = true;
	return 0;
}

ssize_t pcl_read_run_marked(struct pcl_reader *r, uint64_t *first, void *buf, size_t max,
			    struct pcl_marks *mk, struct im_err *err)
{
	ssize_t n;

	mk->n = 0;
	r->marks = mk;
	n = pcl_read_run(r, first, buf, max, err);
	r->marks = NULL;
	return n;
}

ssize_t pcl_read_run(struct pcl_reader *r, uint64_t *first, void *buf, size_t max,
		     struct im_err *err)
{
	uint64_t pos = r->next, len;
	uint32_t bs = r->h.block_size;
	size_t i;
	int rc;

	if (r->done || max == 0)
		return 0;
	len = pos < r->h.total_blocks ? bitmap_next_run(&r->used, &pos) : 0;
	if (len == 0) {
		r->next = r->h.total_blocks;
		rc = finish(r, err);
		return rc < 0 ? rc : 0;
	}
	if (len > max)
		len = max;
	/* As many blocks at a time as the current checksum strip still holds. */
	for (i = 0; i < len;) {
		unsigned char *p = (unsigned char *)buf + i * bs;
		size_t k = len - i;
		ssize_t n;

		if (r->h.checksum_mode != CSM_NONE &&
		    k > r->h.blocks_per_checksum - r->strip_count)
			k = r->h.blocks_per_checksum - r->strip_count;
		n = read_full(r, p, k * bs);
		if (n < 0)
			return im_errf(err, IM_EXIT_IO, (int)n, "%s: %s", r->name, strerror((int)-n));
		if ((size_t)n < k * bs) {
			uint64_t at = pos + i + (uint64_t)n / bs;
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				       "%s: the stream ends at block %llu (used block %llu of %llu; partition byte %llu): truncated",
				       r->name, (unsigned long long)at,
				       (unsigned long long)(r->read_blocks + (uint64_t)n / bs + 1),
				       (unsigned long long)r->h.used_blocks,
				       (unsigned long long)(at * bs));
		}
		r->read_blocks += k;
		r->last = pos + i + k - 1;
		if (r->h.checksum_mode != CSM_NONE) {
			if (r->strip_count == 0)
				r->strip_first = pos + i;
			if (!r->marks)
				sum_update(r, p, k * bs);
			r->strip_count += (uint32_t)k;
			if (r->strip_count == r->h.blocks_per_checksum) {
				rc = end_strip(r, r->last, i + k, err);
				if (rc < 0)
					return rc;
			}
		}
		i += k;
	}
	*first = pos;
	r->next = pos + len;
	return (ssize_t)len;
}

void pcl_close(struct pcl_reader *r)
{
	bitmap_free(&r->used);
	if (r->xxh && r->h.checksum_mode == CSM_XXH64)
		XXH64_freeState(r->xxh);
	else if (r->xxh)
		XXH3_freeState(r->xxh);
	memset(r, 0, sizeof(*r));
}
