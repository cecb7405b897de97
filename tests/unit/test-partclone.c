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
 * no crash (this test also runs under ASan and UBSan).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

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
/* Every used block written to fd at its place, as a restore does. */
static int restore_fd(struct pcl_reader *r, int fd, struct im_err *err)
{
	static unsigned char buf[256 * 4096];
	size_t max = sizeof(buf) / r->h.block_size;
	uint64_t first;
	ssize_t n;

	while ((n = pcl_read_run(r, &first, buf, max, err)) > 0)
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
	CHECK(sh("partclone.extfs -q -c %s -s '%s' -o '%s' >/dev/null 2>&1", args, fs, img) == 0);
	if (reference)
		CHECK(sh("truncate -s 48M '%s' && partclone.extfs -q -r -s '%s' -O '%s' >/dev/null 2>&1",
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
		while ((n = pcl_read_run(&r, &first, buf, 64, &err)) > 0)
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
		{ "xxh64", 96, 2, 0x30, 98, 2, 8, IM_EXIT_UNSUPP, "XXH64" },
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

	/* Format 0001 (the other modes it does not take are lies above). */
	memcpy(c, p, len);
	memcpy(c + 30, "0001", 4);
	case_bad(c, len, "format 0001", IM_EXIT_UNSUPP, "format 0001");

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

static void setup(void)
{
	CHECK(make_tmpdir(dir, sizeof(dir), "/tmp/imager-pcl.XXXXXX"));
}

static void cleanup(void)
{
	remove_tmpdir(dir);
}

UNIT_MAIN(UNIT(setup), UNIT(test_real_images), UNIT(test_damage), UNIT(cleanup))
