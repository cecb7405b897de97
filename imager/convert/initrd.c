/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Which tool made an initramfs, read from the image itself (convtext.h,
 * "initramfs images").  The image is walked the way the kernel unpacks it
 * (Documentation/driver-api/early-userspace/buffer-format.rst): newc cpio
 * archives one after the other, zero bytes between them, any of them
 * compressed.  The uncompressed ones (early microcode, dracut's early cpio)
 * are walked here, header by header; the first compressed one goes to
 * libarchive, with the decompressors it has built in (no external
 * program).  Every field is hostile: sizes are checked against what is
 * left, names are bounded, and the work is bounded by INITRD_MAX_NAMES and
 * INITRD_MAX_BYTES.
 */
#include "convtext.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NEWC_HDR 110
#define NEWC_NAME_MAX 4096

const char *initrd_maker_name(int maker)
{
	switch (maker) {
	case IRD_INITRAMFS_TOOLS: return "initramfs-tools";
	case IRD_DRACUT: return "dracut";
	case IRD_MKINITCPIO: return "mkinitcpio";
	case IRD_SUSE_MKINITRD: return "suse-mkinitrd";
	default: return "";
	}
}

/* What one name says: the tool's marker, or IRD_UNKNOWN. */
int initrd_name_says(const char *name, size_t len)
{
	while (len >= 2 && name[0] == '.' && name[1] == '/')
		name += 2, len -= 2;
	while (len && name[0] == '/')
		name++, len--;
#define IS(s) (len == sizeof(s) - 1 && !memcmp(name, s, len))
#define UNDER(s) (len > sizeof(s) - 1 && !memcmp(name, s, sizeof(s) - 1))
	if (IS("usr/lib/dracut") || UNDER("usr/lib/dracut/"))
		return IRD_DRACUT;
	if (IS("conf/initramfs.conf"))
		return IRD_INITRAMFS_TOOLS;
	if (IS("init_functions"))
		return IRD_MKINITCPIO;
	if (IS("run_all.sh"))
		return IRD_SUSE_MKINITRD;
#undef IS
#undef UNDER
	return IRD_UNKNOWN;
}

static bool hex8(const unsigned char *p, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < 8; i++) {
		unsigned c = p[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return false;
		v = v << 4 | d;
	}
	*out = v;
	return true;
}

/* Where the walker reads: the image itself (mem), or what libarchive
 * unpacks from its compressed archive (a, as one "raw" entry).  Only the
 * bytes asked for are held: nothing in the image decides an allocation. */
#define RD_BUF ((size_t)1 << 16)
struct rd {
	const unsigned char *mem;
	size_t len;
	struct archive *a;
	uint64_t pos;         /* bytes consumed from the start of this stream */
	unsigned char *buf;   /* (a) RD_BUF bytes */
	size_t have, off;     /* (a) unpacked bytes in buf, and how many were taken */
	bool eof, bad;
};

/* Up to n bytes at dst; returns how many (fewer only at
 * the end of the stream or on an error, which sets bad). */
static size_t rd_get(struct rd *r, void *dst, size_t n)
{
	size_t got = 0;
	if (r->mem) {
		size_t left = r->len - (size_t)r->pos;
		got = n < left ? n : left;
		if (dst)
			memcpy(dst, r->mem + r->pos, got);
		r->pos += got;
		return got;
	}
	while (got < n) {
		if (r->off == r->have) {
			if (r->eof)
				break;
			la_ssize_t k = archive_read_data(r->a, r->buf, RD_BUF);
			if (k < 0) {
				r->bad = true;
				r->eof = true;
				break;
			}
			if (k == 0) {
				r->eof = true;
				break;
			}
			r->have = (size_t)k;
			r->off = 0;
		}
		size_t take = r->have - r->off;
		if (take > n - got)
			take = n - got;
		if (dst)
			memcpy((unsigned char *)dst + got, r->buf + r->off, take);
		r->off += take;
		got += take;
	}
	r->pos += got;
	return got;
}

/* Pass over n bytes; false when the stream ends first. */
static bool rd_skip(struct rd *r, uint64_t n)
{
	if (r->mem) {
		if (n > r->len - r->pos)
			return false;
		r->pos += n;
		return true;
	}
	while (n) {
		size_t step = n > RD_BUF ? RD_BUF : (size_t)n;
		if (rd_get(r, NULL, step) != step)
			return false;
		n -= step;
	}
	return true;
}

/* The next byte that is not zero padding, without taking it: 1 when there
 * is one, 0 at the end of the stream. */
static int rd_skip_zeros(struct rd *r)
{
	for (;;) {
		if (r->mem) {
			while (r->pos < r->len && r->mem[r->pos] == 0)
				r->pos++;
			return r->pos < r->len;
		}
		while (r->off < r->have && r->buf[r->off] == 0)
			r->off++, r->pos++;
		if (r->off < r->have)
			return 1;
		if (r->eof)
			return 0;
		unsigned char c;
		if (rd_get(r, &c, 1) != 1)
			return 0;
		if (c) {        /* put it back: it was the last byte read into buf */
			r->off--;
			r->pos--;
			return 1;
		}
	}
}

/* newc archives from r's position, each to its trailer, until a marker,
 * the end of the stream (IRD_UNKNOWN), or a byte that starts no archive:
 * in the image that is where a compressed archive begins (returned as 1 in
 * *more, with r at it); in an unpacked stream it is damage.  -EINVAL for
 * a damaged or cut-short archive. */
static int walk_newc(struct rd *r, struct initrd_scan *s, bool *more)
{
	*more = false;
	for (;;) {
		if (!rd_skip_zeros(r))
			return IRD_UNKNOWN;
		if (r->mem && (r->len - r->pos < 5 || memcmp(r->mem + r->pos, "07070", 5))) {
			*more = true;
			return IRD_UNKNOWN;
		}
		s->archives++;
		uint64_t start = r->pos;
		for (;;) {
			unsigned char h[NEWC_HDR];
			char name[NEWC_NAME_MAX];
			uint32_t namesize, filesize;
			if (rd_get(r, h, NEWC_HDR) != NEWC_HDR || memcmp(h, "07070", 5) ||
			    (h[5] != '1' && h[5] != '2'))
				return -EINVAL;
			if (!hex8(h + 54, &filesize) || !hex8(h + 94, &namesize))
				return -EINVAL;
			if (namesize == 0 || namesize > NEWC_NAME_MAX || rd_get(r, name, namesize) != namesize)
				return -EINVAL;
			size_t nl = strnlen(name, namesize);
			/* the data starts 4-aligned from the archive's start */
			if (!rd_skip(r, (4 - (r->pos - start) % 4) % 4))
				return -EINVAL;
			if (nl == 10 && !memcmp(name, "TRAILER!!!", 10))
				break;
			if (++s->names > INITRD_MAX_NAMES)
				return -E2BIG;
			int m = initrd_name_says(name, nl);
			if (m > 0)
				return m;
			if (filesize > INITRD_MAX_BYTES - s->bytes)
				return -E2BIG;
			s->bytes += filesize;
			if (!rd_skip(r, filesize + (4 - (r->pos + filesize - start) % 4) % 4))
				return -EINVAL;   /* cut short: no trailer */
		}
	}
}

/* The rest of the image, from its first compressed archive: unpacked by
 * libarchive as one raw stream, walked by walk_newc. */
static int walk_compressed(const unsigned char *d, size_t len, struct initrd_scan *s)
{
	struct rd *r = calloc(1, sizeof(*r));
	struct archive_entry *e;
	int m;
	bool more;

	if (!r || !(r->buf = malloc(RD_BUF)) || !(r->a = archive_read_new())) {
		if (r)
			free(r->buf);
		free(r);
		return -ENOMEM;
	}
	/* Only decompressors built into libarchive: a filter it would run as
	 * an external program (ARCHIVE_WARN) is not offered hostile data. */
	int (*const filters[])(struct archive *) = {
		archive_read_support_filter_gzip, archive_read_support_filter_zstd,
		archive_read_support_filter_xz, archive_read_support_filter_lzma,
		archive_read_support_filter_lz4, archive_read_support_filter_bzip2,
	};
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
		(void)filters[i](r->a);
	archive_read_support_format_raw(r->a);
	if (archive_read_open_memory(r->a, d, len) != ARCHIVE_OK || archive_filter_count(r->a) < 2 ||
	    archive_read_next_header(r->a, &e) != ARCHIVE_OK) {
		/* no known compression: neither cpio nor a packing read here */
		m = -EINVAL;
	} else {
		m = walk_newc(r, s, &more);
		if (m == IRD_UNKNOWN && r->bad)
			m = -EINVAL;
	}
	archive_read_free(r->a);
	free(r->buf);
	free(r);
	return m;
}

int initrd_maker(const void *data, size_t len, struct initrd_scan *s)
{
	struct initrd_scan own;
	struct rd r = { .mem = data, .len = len };
	bool more;

	if (!s)
		s = &own;
	memset(s, 0, sizeof(*s));
	if (!data)
		return -EINVAL;
	int m = walk_newc(&r, s, &more);
	if (m != IRD_UNKNOWN)
		return m;
	if (!more)
		return s->archives ? IRD_UNKNOWN : -EINVAL;
	s->compressed = true;
	return walk_compressed(r.mem + r.pos, r.len - (size_t)r.pos, s);
}
