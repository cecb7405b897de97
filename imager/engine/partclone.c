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
#include <zlib.h>

#include "util.h"

#define CSM_NONE 0x00
#define CSM_CRC32 0x20
#define CSM_XXH64 0x30
#define CSM_XXH128 0x31
#define CSM_CRC32_0001 0xFF
#define BM_BIT 0x01

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

static int check_header(struct pcl_reader *r, const unsigned char *b, struct im_err *err)
{
	struct pcl_header *h = &r->h;
	unsigned mode, feature, version, bitmap_mode, reseed;

	if (memcmp(b, "partclone-image", 15))
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: not a partclone image", r->name);
	if (!memcmp(b + 30, "0001", 4))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: partclone image format 0001 (partclone before 0.3.0) is not supported; partclone.restore reads it",
			       r->name);
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
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: %s checksums are not supported yet (CRC32 and none are)", r->name,
			       mode == CSM_XXH64 ? "XXH64" : "XXH128");
	case CSM_CRC32_0001:
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: format 0001's CRC32 checksums are not supported", r->name);
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
	r->crc = 0xFFFFFFFFu;
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
		rc = read_bitmap(r, err);
	if (rc < 0)
		bitmap_free(&r->used);
	return rc;
}

/* The checksum after a strip: read and compared; the strip's blocks named
 * when it differs. */
static int end_strip(struct pcl_reader *r, uint64_t last, struct im_err *err)
{
	unsigned char c[4];
	uint64_t bs = r->h.block_size;
	int rc = read_exact(r, c, 4, "a checksum", err);
	if (rc < 0)
		return rc;
	if (le32(c) != r->crc)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "%s: the checksum of blocks %llu-%llu does not match (partition bytes %llu-%llu): damaged",
			       r->name, (unsigned long long)r->strip_first, (unsigned long long)last,
			       (unsigned long long)(r->strip_first * bs),
			       (unsigned long long)((last + 1) * bs));
	if (r->h.reseed)
		r->crc = 0xFFFFFFFFu;
	r->strip_count = 0;
	return 0;
}

static int finish(struct pcl_reader *r, struct im_err *err)
{
	unsigned char extra;
	ssize_t n;
	int rc;

	if (r->h.checksum_mode != CSM_NONE && r->strip_count) {
		rc = end_strip(r, r->last, err);
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
			r->crc = pcl_crc(r->crc, p, k * bs);
			r->strip_count += (uint32_t)k;
			if (r->strip_count == r->h.blocks_per_checksum) {
				rc = end_strip(r, r->last, err);
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
	memset(r, 0, sizeof(*r));
}
