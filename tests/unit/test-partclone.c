/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The partclone image reader (include/imager/partclone.h) on images the real
 * partclone.extfs writes: an ext4 made over old data (pseudo-random bytes
 * first) and filled with files, saved with CRC32 strips (partclone's
 * default, an odd strip length that leaves a partial last strip, and the
 * running CRC without reseeding) and with no checksums.  Each image read
 * back by the reader is byte-identical to what partclone.extfs -r restores
 * onto a zeroed file, and e2fsck -fn passes on it.  Then the image
 * damaged every way the format can be: truncated in the header, the
 * bitmap, a block and the last checksum; a flipped byte in a block, the
 * header or the bitmap; a header that lies with its CRC made right (block
 * count, block size, used count, a bit set past the end), modes it does
 * not take, trailing data, not a partclone image at all.  Each gets its
 * class (damaged, unsupported, not a source) and a message naming it, and
 * no crash (this test also runs under ASan and UBSan).  Then the same
 * blocks in format 0001 (partclone.extfs -r restores it, and refuses it
 * damaged: its CRCs are checked, so the layout is partclone's) and with
 * XXH64 and XXH3-128 strips, each restored identically and its damage
 * found.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <xxhash.h>

#include "imager/partclone.h"
#include "unit-fs.h"
#include "unit.h"

static char dir[256];
static int have = -1;

/* A byte stream from memory. */
struct mem {
	const unsigned char *p;
	size_t len, pos;
};

static ssize_t mem_read(void *opaque, void *buf, size_t len)
{
	struct mem *m = opaque;
	size_t n = m->len - m->pos < len ? m->len - m->pos : len;
	memcpy(buf, m->p + m->pos, n);
	m->pos += n;
	return (ssize_t)n;
}

static ssize_t fd_read(void *opaque, void *buf, size_t len)
{
	ssize_t n = read(*(int *)opaque, buf, len);
	return n < 0 ? -errno : n;
}

static unsigned char *load(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *p;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) < 0) {
		CHECK(!"open");
		return NULL;
	}
	p = malloc((size_t)st.st_size + 1);
	CHECK(p && read_at(path, 0, p, (size_t)st.st_size));
	close(fd);
	*len = (size_t)st.st_size;
	return p;
}

/* partclone's CRC32: zlib's, not inverted at the end. */
static uint32_t pcrc(const void *p, size_t n) { return ~(uint32_t)crc32(0, p, (uInt)n); }
static void fix_header_crc(unsigned char *b) { put_le(b + 106, pcrc(b, 106), 4); }

/* The source filesystem: 48 MiB over old data, 1 KiB blocks, files in it. */
/* Marked mode (the restore's): the checksums read with the runs and
 * compared by pcl_check_run, as its checker thread does.  Every case runs
 * both ways. */
static bool marked;

/* The next run as a restore reads it, in the current mode. */
static ssize_t next_run(struct pcl_reader *r, uint64_t *first, void *buf, size_t max,
			struct im_err *err)
{
	static struct pcl_mark m[1025];
	struct pcl_marks mk = { m, 0, sizeof(m) / sizeof(m[0]) };
	ssize_t n;
	int rc;

	if (!marked)
		return pcl_read_run(r, first, buf, max, err);
	CHECK(max < mk.cap);
	n = pcl_read_run_marked(r, first, buf, max, &mk, err);
	if (n >= 0 && (rc = pcl_check_run(r, buf, (size_t)n, &mk, err)) < 0)
		return rc;
	return n;
}

/* Every used block written to fd at its place, as a restore does. */
static int restore_fd(struct pcl_reader *r, int fd, struct im_err *err)
{
	static unsigned char buf[256 * 4096];
	size_t max = sizeof(buf) / r->h.block_size;
	uint64_t first;
	ssize_t n;

	if (max > 1024)
		max = 1024;
	while ((n = next_run(r, &first, buf, max, err)) > 0)
		if (pwrite(fd, buf, (size_t)n * r->h.block_size,
			   (off_t)(first * r->h.block_size)) != n * (ssize_t)r->h.block_size)
			return -EIO;
	return (int)n;
}

static bool make_source(const char *fs)
{
	char tree[300], sub[300];

	make_sample_tree(tree, "/tmp/imager-pcl-tree.XXXXXX", sub, sizeof(sub));
	CHECK(write_random_file(fs, 48u << 20, 77));
	CHECK(sh("mke2fs -q -F -t ext4 -b 1024 -d '%s' '%s' >/dev/null 2>&1", tree, fs) == 0);
	remove_tree(tree);
	return true;
}

/* The image partclone.extfs writes with ARGS; the reader's restore onto a
 * zeroed file equal to theirs (partclone's own restore of the default
 * image: partclone 0.3.23 crashes restoring its -k 7 and -K images), e2fsck
 * clean. */
static void case_real(const char *fs, const char *name, const char *args, unsigned mode,
		      uint32_t bpc, bool reseed, const char *theirs, bool reference)
{
	char img[300], ours[300];
	struct pcl_reader r;
	struct im_err err = { 0 };
	int in, out, before = unit_failures;

	snprintf(img, sizeof(img), "%s/%s.pcl", dir, name);
	snprintf(ours, sizeof(ours), "%s/%s.ours", dir, name);
	/* (Made in the first pass, read again in marked mode.) */
	CHECK(sh("test -e '%s' || partclone.extfs -q -f 0 -c %s -s '%s' -o '%s' >/dev/null 2>&1", img,
		 args, fs, img) == 0);
	if (reference && !marked)
		CHECK(sh("truncate -s 48M '%s' && partclone.extfs -q -f 0 -r -s '%s' -O '%s' >/dev/null 2>&1",
			 theirs, img, theirs) == 0);
	in = open(img, O_RDONLY);
	out = open(ours, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(in >= 0 && out >= 0);
	CHECK(pcl_open(&r, fd_read, &in, name, &err) == 0);
	CHECK_STR(r.h.fs, "EXTFS");
	CHECK_EQ_U(r.h.block_size, 1024);
	CHECK_EQ_U(r.h.total_blocks, 48 * 1024);
	CHECK_EQ_U(r.h.device_size, 48u << 20);
	CHECK_EQ_U(r.h.checksum_mode, mode);
	if (mode)
		CHECK_EQ_U(r.h.blocks_per_checksum, bpc);
	CHECK_EQ_U(r.h.reseed, reseed);
	CHECK(r.h.used_blocks > 5000 && r.h.used_blocks < r.h.total_blocks);
	CHECK(ftruncate(out, (off_t)r.h.device_size) == 0);
	CHECK(restore_fd(&r, out, &err) == 0);
	CHECK_EQ_U(r.read_blocks, r.h.used_blocks);
	pcl_close(&r);
	close(in);
	close(out);
	CHECK(sh("cmp -s '%s' '%s'", ours, theirs) == 0);
	CHECK(sh("e2fsck -fn '%s' >/dev/null 2>&1", ours) == 0);
	say_case(before, name, &err);
	unlink(ours);
}

static void test_real_images(void)
{
	char fs[300], theirs[300];

	if (!have_or_skip(&have, "partclone.extfs mke2fs e2fsck",
			  "SKIP: needs partclone.extfs, mke2fs and e2fsck"))
		return;
	snprintf(fs, sizeof(fs), "%s/fs.img", dir);
	snprintf(theirs, sizeof(theirs), "%s/theirs.img", dir);
	make_source(fs);
	case_real(fs, "default", "", 0x20, 1024, true, theirs, true);
	case_real(fs, "odd-strips", "-k 7", 0x20, 7, true, theirs, false);
	case_real(fs, "no-reseed", "-k 100 -K", 0x20, 100, false, theirs, false);
	case_real(fs, "no-checksum", "-a 0", 0, 0, true, theirs, false);
}

/* One damaged copy of the image: pcl_open and then every run read; the
 * first failure must have class cls and say what (a substring). */
static void case_bad(const unsigned char *p, size_t len, const char *name, int cls,
		     const char *what)
{
	struct mem m = { p, len, 0 };
	struct pcl_reader r;
	struct im_err err = { 0 };
	unsigned char *buf = NULL;
	uint64_t first;
	ssize_t n = 0;
	int rc, before = unit_failures;

	rc = pcl_open(&r, mem_read, &m, name, &err);
	if (rc == 0) {
		buf = malloc((size_t)64 * r.h.block_size);
		while ((n = next_run(&r, &first, buf, 64, &err)) > 0)
			;
		rc = (int)n;
		pcl_close(&r);
	}
	free(buf);
	CHECK(rc < 0);
	CHECK_EQ_U(err.exit_class, cls);
	CHECK(strstr(err.msg, what) != NULL);
	if (unit_failures != before)
		fprintf(stderr, "  case %s: rc %d, class %d: %s\n", name, rc, err.exit_class, err.msg);
}

static void test_damage(void)
{
	char img[300];
	unsigned char *p, *c;
	size_t len, bm, data;
	uint64_t total;

	if (!have_or_skip(&have, "partclone.extfs mke2fs e2fsck",
			  "SKIP: needs partclone.extfs, mke2fs and e2fsck"))
		return;
	snprintf(img, sizeof(img), "%s/default.pcl", dir);
	p = load(img, &len);
	if (!p)
		return;
	c = malloc(len + 16);
	total = get_le(p + 60, 8);
	bm = (size_t)(total + 7) / 8;
	data = PCL_HEADER_SIZE + bm + 4;

	/* Truncated: in the header, the bitmap, a block, the last checksum. */
	case_bad(p, 60, "header cut", IM_EXIT_DAMAGED, "inside the partclone header");
	case_bad(p, PCL_HEADER_SIZE + bm / 2, "bitmap cut", IM_EXIT_DAMAGED, "inside the bitmap");
	case_bad(p, data + 1024 * 3 + 100, "block cut", IM_EXIT_DAMAGED, "stream ends at block");
	case_bad(p, len - 2, "last checksum cut", IM_EXIT_DAMAGED, "inside a checksum");

	/* Flipped bytes: a block, the header, the bitmap. */
	memcpy(c, p, len);
	c[data + 5000] ^= 0x40;
	case_bad(c, len, "block flipped", IM_EXIT_DAMAGED, "does not match (partition bytes");
	memcpy(c, p, len);
	c[70] ^= 1;
	case_bad(c, len, "header flipped", IM_EXIT_DAMAGED, "header's checksum");
	memcpy(c, p, len);
	c[PCL_HEADER_SIZE + bm - 10] ^= 0x10;
	case_bad(c, len, "bitmap flipped", IM_EXIT_DAMAGED, "bitmap's checksum");

	/* Lies with the header's CRC made right (up to two fields changed),
	 * and modes it does not take. */
	const struct {
		const char *name;
		unsigned off, width;
		uint64_t v;
		unsigned off2, width2;
		uint64_t v2;
		int cls;
		const char *what;
	} lies[] = {
		{ "block count", 60, 8, total * 2, 0, 0, 0, IM_EXIT_DAMAGED, "do not fit" },
		{ "fewer blocks", 60, 8, total - 8, 0, 0, 0, IM_EXIT_DAMAGED, "bitmap" },
		{ "block size", 84, 4, 512, 0, 0, 0, IM_EXIT_DAMAGED, "does not match" },
		{ "block size 0", 84, 4, 0, 0, 0, 0, IM_EXIT_DAMAGED, "block size 0" },
		{ "block size doubled", 84, 4, 2048, 52, 8, total * 2048, IM_EXIT_DAMAGED, "checksum of blocks 1024-2047" },
		{ "used count", 76, 8, get_le(p + 76, 8) + 1, 0, 0, 0, IM_EXIT_DAMAGED, "the bitmap holds" },
		{ "huge", 60, 8, (uint64_t)1 << 40, 52, 8, (uint64_t)1 << 50, IM_EXIT_DAMAGED,
		  "not between 1 and" },
		{ "no strip length", 100, 4, 0, 0, 0, 0, IM_EXIT_DAMAGED, "CRC32 checksums" },
		{ "xxh64", 96, 2, 0x30, 98, 2, 8, IM_EXIT_DAMAGED, "does not match" },
		{ "xxh64 of 4 bytes", 96, 2, 0x30, 0, 0, 0, IM_EXIT_DAMAGED, "XXH64 checksums of 4 bytes" },
		{ "0001's mode", 96, 2, 0xFF, 0, 0, 0, IM_EXIT_DAMAGED, "format 0001's checksum mode" },
		{ "unknown mode", 96, 2, 0x40, 0, 0, 0, IM_EXIT_UNSUPP, "unknown checksum mode" },
		{ "byte bitmap", 105, 1, 8, 0, 0, 0, IM_EXIT_UNSUPP, "bitmap mode 8" },
		{ "big-endian", 34, 2, 0xDEC0, 0, 0, 0, IM_EXIT_UNSUPP, "big-endian" },
	};
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		memcpy(c, p, len);
		put_le(c + lies[i].off, lies[i].v, lies[i].width);
		if (lies[i].width2)
			put_le(c + lies[i].off2, lies[i].v2, lies[i].width2);
		fix_header_crc(c);
		case_bad(c, len, lies[i].name, lies[i].cls, lies[i].what);
	}

	/* A bit past the last block, the bitmap's CRC made right. */
	if (total % 8) {
		memcpy(c, p, len);
		c[PCL_HEADER_SIZE + bm - 1] |= 0x80;
		put_le(c + PCL_HEADER_SIZE + bm, pcrc(c + PCL_HEADER_SIZE, bm), 4);
		case_bad(c, len, "bit past the end", IM_EXIT_DAMAGED, "past the last");
	}

	/* Format 0002's bytes read as a format 0001 header: nonsense found. */
	memcpy(c, p, len);
	memcpy(c + 30, "0001", 4);
	case_bad(c, len, "format 0001", IM_EXIT_DAMAGED, "block size");
	memcpy(c + 30, "0003", 4);
	case_bad(c, len, "format 0003", IM_EXIT_UNSUPP, "format '0003'");

	/* Data after the last checksum; not partclone at all. */
	memcpy(c, p, len);
	memset(c + len, 0xAA, 16);
	case_bad(c, len + 16, "trailing", IM_EXIT_DAMAGED, "data follows");
	memset(c, 'x', 4096 < len ? 4096 : len);
	case_bad(c, 4096, "not partclone", IM_EXIT_SOURCE, "not a partclone image");
	case_bad(c, 3, "three bytes", IM_EXIT_SOURCE, "not a partclone image");

	free(c);
	free(p);
}

/* ---- the other formats, made from the default image's blocks ----
 * Format 0001 as partclone before 0.3.0 wrote it (checked by the real
 * partclone.extfs -r, which reads it and checks its every CRC), and
 * format 0002 with XXH64 and XXH3-128 checksums as newer partclone writes
 * them (facts from its checksum.c; Debian's 0.3.23 writes neither). */

static uint32_t crc0001(uint32_t crc, unsigned char b, size_t n)
{
	while (n--) {
		uint32_t c = (crc ^ b) & 0xff;
		for (int k = 0; k < 8; k++)
			c = c >> 1 ^ (0xEDB88320u & -(c & 1u));
		crc = crc >> 8 ^ c;
	}
	return crc;
}

struct used {
	unsigned char *hdr;      /* the default image's header and bitmap */
	size_t hdr_len;
	unsigned char *data;     /* its used blocks, in order */
	uint64_t n, total;
	uint32_t bs;
};

static bool load_used(struct used *u)
{
	char img[300];
	size_t len;
	unsigned char *p;
	struct mem m;
	struct pcl_reader r;
	struct im_err err = { 0 };
	uint64_t first;
	ssize_t n;

	snprintf(img, sizeof(img), "%s/default.pcl", dir);
	p = load(img, &len);
	if (!p)
		return false;
	m = (struct mem){ p, len, 0 };
	CHECK(pcl_open(&r, mem_read, &m, "default", &err) == 0);
	u->bs = r.h.block_size;
	u->total = r.h.total_blocks;
	u->data = malloc((size_t)r.h.used_blocks * u->bs);
	u->n = 0;
	while ((n = pcl_read_run(&r, &first, u->data + u->n * u->bs, r.h.used_blocks - u->n, &err)) > 0)
		u->n += (uint64_t)n;
	CHECK(n == 0);
	pcl_close(&r);
	u->hdr_len = PCL_HEADER_SIZE + (size_t)(u->total + 7) / 8 + 4;
	u->hdr = p;
	return true;
}

/* Restore img with the reader onto a zeroed file; compared with theirs. */
static void restore_equal(const char *img, const char *name, unsigned mode, const char *theirs)
{
	char ours[300];
	struct pcl_reader r;
	struct im_err err = { 0 };
	int in = open(img, O_RDONLY), out, before = unit_failures;

	snprintf(ours, sizeof(ours), "%s/%s.ours", dir, name);
	out = open(ours, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(in >= 0 && out >= 0);
	CHECK(pcl_open(&r, fd_read, &in, name, &err) == 0);
	CHECK_EQ_U(r.h.checksum_mode, mode);
	CHECK(ftruncate(out, 48 << 20) == 0);
	CHECK(restore_fd(&r, out, &err) == 0);
	pcl_close(&r);
	close(in);
	close(out);
	CHECK(sh("cmp -s '%s' '%s'", ours, theirs) == 0);
	say_case(before, name, &err);
	unlink(ours);
}

static void test_format_0001(void)
{
	struct used u;
	char img[300], theirs[300], theirs1[300];
	unsigned char h[4160] = { 0 };
	uint32_t crc = 0xFFFFFFFFu;
	FILE *f;
	size_t len;
	unsigned char *p, *c;

	if (!have_or_skip(&have, "partclone.extfs mke2fs e2fsck",
			  "SKIP: needs partclone.extfs, mke2fs and e2fsck") || !load_used(&u))
		return;
	snprintf(img, sizeof(img), "%s/v1.pcl", dir);
	snprintf(theirs, sizeof(theirs), "%s/theirs.img", dir);
	snprintf(theirs1, sizeof(theirs1), "%s/theirs-v1.img", dir);
	memcpy(h, "partclone-image", 15);
	memcpy(h + 15, "EXTFS", 5);
	memcpy(h + 30, "0001", 4);
	put_le(h + 36, u.bs, 4);
	put_le(h + 40, u.total * u.bs, 8);
	put_le(h + 48, u.total, 8);
	put_le(h + 56, u.n, 8);
	f = fopen(img, "wb");
	CHECK(f != NULL);
	if (!f)
		return;
	fwrite(h, 1, sizeof(h), f);
	for (uint64_t b = 0; b < u.total; b++)
		fputc(u.hdr[PCL_HEADER_SIZE + b / 8] >> (b % 8) & 1, f);
	fwrite("BiTmAgIc", 1, 8, f);
	for (uint64_t k = 0; k < u.n; k++) {
		unsigned char le[4];
		fwrite(u.data + k * u.bs, 1, u.bs, f);
		crc = crc0001(crc, u.data[k * u.bs], u.bs);
		put_le(le, crc, 4);
		fwrite(le, 1, 4, f);
	}
	CHECK(fclose(f) == 0);
	/* partclone's own restore takes it, every CRC checked */
	CHECK(sh("truncate -s 48M '%s' && partclone.extfs -q -f 0 -r -s '%s' -O '%s' >/dev/null 2>&1",
		 theirs1, img, theirs1) == 0);
	CHECK(sh("cmp -s '%s' '%s'", theirs1, theirs) == 0);
	restore_equal(img, "format 0001", 0xFF, theirs);
	/* its damage: a block's first byte (what its CRC covers), the
	 * bitmap's magic, a cut */
	p = load(img, &len);
	if (p) {
		size_t data = 4160 + (size_t)u.total + 8;
		c = malloc(len);
		memcpy(c, p, len);
		c[data + 3 * (u.bs + 4)] ^= 0x01;
		case_bad(c, len, "0001 block", IM_EXIT_DAMAGED, "checksum of blocks");
		/* partclone's restore refuses it too: it does check those CRCs,
		 * so its taking the undamaged image above means something */
		{
			char bad[300];
			FILE *bf;
			snprintf(bad, sizeof(bad), "%s/v1-bad.pcl", dir);
			bf = fopen(bad, "wb");
			CHECK(bf && fwrite(c, 1, len, bf) == len);
			if (bf)
				fclose(bf);
			CHECK(sh("partclone.extfs -q -f 0 -r -s '%s' -O '%s' >/dev/null 2>&1", bad, theirs1) != 0);
			unlink(bad);
		}
		memcpy(c, p, len);
		c[data - 3] ^= 0x01;
		case_bad(c, len, "0001 magic", IM_EXIT_DAMAGED, "BiTmAgIc");
		case_bad(p, data + 10 * (u.bs + 4) + 7, "0001 cut", IM_EXIT_DAMAGED, "truncated");
		case_bad(p, 3000, "0001 header cut", IM_EXIT_DAMAGED, "0001 header");
		free(c);
		free(p);
	}
	unlink(theirs1);
	unlink(img);
	free(u.data);
	free(u.hdr);
}

/* Format 0002 with XXH64 or XXH3-128 strips of bpc blocks. */
static void make_xxh(const struct used *u, const char *img, unsigned mode, uint32_t bpc, bool reseed)
{
	unsigned csize = mode == 0x30 ? 8 : 16;
	unsigned char h[PCL_HEADER_SIZE], sum[16];
	XXH64_state_t *s64 = XXH64_createState();
	XXH3_state_t *s128 = XXH3_createState();
	FILE *f = fopen(img, "wb");

	memcpy(h, u->hdr, PCL_HEADER_SIZE);
	put_le(h + 96, mode, 2);
	put_le(h + 98, csize, 2);
	put_le(h + 100, bpc, 4);
	h[104] = reseed;
	fix_header_crc(h);
	fwrite(h, 1, sizeof(h), f);
	fwrite(u->hdr + PCL_HEADER_SIZE, 1, u->hdr_len - PCL_HEADER_SIZE, f);
	XXH64_reset(s64, 0);
	XXH3_128bits_reset(s128);
	for (uint64_t k = 0; k < u->n; k++) {
		fwrite(u->data + k * u->bs, 1, u->bs, f);
		XXH64_update(s64, u->data + k * u->bs, u->bs);
		XXH3_128bits_update(s128, u->data + k * u->bs, u->bs);
		if ((k + 1) % bpc == 0 || k + 1 == u->n) {
			if (mode == 0x30) {
				put_le(sum, XXH64_digest(s64), 8);
			} else {
				XXH128_hash_t v = XXH3_128bits_digest(s128);
				put_le(sum, v.low64, 8);
				put_le(sum + 8, v.high64, 8);
			}
			fwrite(sum, 1, csize, f);
			if (reseed) {
				XXH64_reset(s64, 0);
				XXH3_128bits_reset(s128);
			}
		}
	}
	fclose(f);
	XXH64_freeState(s64);
	XXH3_freeState(s128);
}

static void test_xxhash(void)
{
	struct used u;
	char img[300], theirs[300];
	static const struct {
		const char *name;
		unsigned mode;
		uint32_t bpc;
		bool reseed;
	} cases[] = {
		{ "xxh64", 0x30, 1024, true },
		{ "xxh64 no reseed", 0x30, 100, false },
		{ "xxh128", 0x31, 777, true },
	};

	if (!have_or_skip(&have, "partclone.extfs mke2fs e2fsck",
			  "SKIP: needs partclone.extfs, mke2fs and e2fsck") || !load_used(&u))
		return;
	snprintf(theirs, sizeof(theirs), "%s/theirs.img", dir);
	snprintf(img, sizeof(img), "%s/xxh.pcl", dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len;
		unsigned char *p;

		make_xxh(&u, img, cases[i].mode, cases[i].bpc, cases[i].reseed);
		restore_equal(img, cases[i].name, cases[i].mode, theirs);
		p = load(img, &len);
		if (p) {
			p[u.hdr_len + 2 * cases[i].bpc * u.bs + 17] ^= 0x08;
			case_bad(p, len, cases[i].name, IM_EXIT_DAMAGED, "does not match");
			free(p);
		}
	}
	unlink(img);
	free(u.data);
	free(u.hdr);
}

static void setup(void)
{
	CHECK(make_tmpdir(dir, sizeof(dir), "/tmp/imager-pcl.XXXXXX"));
}

static void marked_mode(void)
{
	marked = true;
}

static void cleanup(void)
{
	remove_tmpdir(dir);
}

UNIT_MAIN(UNIT(setup), UNIT(test_real_images), UNIT(test_damage), UNIT(test_format_0001),
	  UNIT(test_xxhash), UNIT(marked_mode), UNIT(test_real_images), UNIT(test_damage),
	  UNIT(test_format_0001), UNIT(test_xxhash), UNIT(cleanup))
