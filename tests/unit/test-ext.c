/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The ext2/3/4 plugin against filesystems made by the real mke2fs, checked
 * against what dumpe2fs reports, then against corrupted copies of them.
 */
#include "imager/fs.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern const struct fs_plugin fs_plugin_ext;

#define SB 1024u   /* byte offset of the superblock */

static bool have_e2fsprogs(void)
{
	static int have = -1;

	if (have < 0)
		have = system("command -v mke2fs >/dev/null 2>&1 && "
			      "command -v dumpe2fs >/dev/null 2>&1") == 0;
	if (!have)
		printf("SKIP: mke2fs not installed\n");
	return have;
}

/* A file of size bytes holding a filesystem made by `mke2fs -q -F args`.
 * Returns false (with a failed check) when mke2fs fails. */
static bool make_image(char path[static 32], const char *args, uint64_t size)
{
	char cmd[512];
	int fd;

	strcpy(path, "/tmp/test-ext-XXXXXX");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return false;
	CHECK(ftruncate(fd, (off_t)size) == 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "mke2fs -q -F %s %s >/dev/null 2>&1", args, path);
	if (system(cmd) != 0) {
		fprintf(stderr, "  failed: %s\n", cmd);
		CHECK(!"mke2fs failed");
		unlink(path);
		return false;
	}
	return true;
}

struct counts {
	uint64_t blocks, free_blocks;
	uint32_t block_size;
};

/* Block count, free blocks and block size as `dumpe2fs -h` prints them. */
static bool dumpe2fs_counts(const char *path, struct counts *c)
{
	char cmd[256], *line = NULL;
	size_t cap = 0;
	int found = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "dumpe2fs -h %s 2>/dev/null", path);
	f = popen(cmd, "r");
	if (!f)
		return false;
	while (getline(&line, &cap, f) > 0) {
		unsigned long long v;
		if (sscanf(line, "Block count: %llu", &v) == 1)
			c->blocks = v, found |= 1;
		else if (sscanf(line, "Free blocks: %llu", &v) == 1)
			c->free_blocks = v, found |= 2;
		else if (sscanf(line, "Block size: %llu", &v) == 1)
			c->block_size = (uint32_t)v, found |= 4;
	}
	free(line);
	pclose(f);
	CHECK_EQ_U(found, 7);
	return found == 7;
}

/* Every range dumpe2fs lists as free in its groups must be clear in the
 * bitmap; with the used count equal to blocks - free, the two agree exactly.
 * Returns the number of free blocks the ranges add up to. */
static uint64_t check_free_ranges(const char *path, const struct bitmap *used)
{
	char cmd[256], *line = NULL;
	size_t cap = 0;
	uint64_t total = 0, wrong = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "dumpe2fs %s 2>/dev/null", path);
	f = popen(cmd, "r");
	CHECK(f != NULL);
	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0) {
		char *p = line;
		if (strncmp(p, "  Free blocks: ", 15) != 0)
			continue;
		p += 15;
		while (*p >= '0' && *p <= '9') {
			unsigned long long a = strtoull(p, &p, 10), b = a;
			if (*p == '-')
				b = strtoull(p + 1, &p, 10);
			for (unsigned long long n = a; n <= b; n++)
				wrong += bitmap_test(used, n);
			total += b - a + 1;
			while (*p == ',' || *p == ' ')
				p++;
		}
	}
	free(line);
	pclose(f);
	CHECK_EQ_U(wrong, 0);
	return total;
}

static int examine_size(const char *path, uint64_t size, bool force,
			struct fs_info *info, struct im_err *err)
{
	int fd = open(path, O_RDONLY), r;

	memset(info, 0, sizeof(*info));
	memset(err, 0, sizeof(*err));
	CHECK(fd >= 0);
	if (fd < 0)
		return -errno;
	r = fs_examine_with(&fs_plugin_ext, fd, 0, size, force, info, err);
	close(fd);
	return r;
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int examine(const char *path, bool force, struct fs_info *info, struct im_err *err)
{
	return examine_size(path, file_size(path), force, info, err);
}

/* The plugin's bitmap against dumpe2fs, for an image already made. */
static void check_image(const char *path, const char *what)
{
	struct fs_info info;
	struct im_err err;
	struct counts c;
	int r;

	if (!dumpe2fs_counts(path, &c))
		return;
	r = examine(path, false, &info, &err);
	if (r != 0)
		fprintf(stderr, "  %s: %d %s\n", what, r, err.msg);
	CHECK(r == 0);
	if (r == 0) {
		CHECK_EQ_U(info.block_size, c.block_size);
		CHECK_EQ_U(info.block_count, c.blocks);
		CHECK_EQ_U(info.used_blocks, c.blocks - c.free_blocks);
		CHECK_EQ_U(check_free_ranges(path, &info.used), c.free_blocks);
		CHECK_STR(info.warning, "");
		if (info.used_blocks != c.blocks - c.free_blocks)
			fprintf(stderr, "  (%s)\n", what);
	}
	fs_info_free(&info);
}

static void check_mkfs(const char *args, uint64_t size)
{
	char path[32];

	if (!have_e2fsprogs() || !make_image(path, args, size))
		return;
	check_image(path, args);
	unlink(path);
}

#define MiB (1ull << 20)

static void test_ext4_4k(void)        { check_mkfs("-t ext4 -b 4096", 64 * MiB); }
static void test_ext4_2k(void)        { check_mkfs("-t ext4 -b 2048", 96 * MiB); }
static void test_ext4_1k(void)        { check_mkfs("-t ext4 -b 1024", 64 * MiB); }
static void test_ext4_1g(void)        { check_mkfs("-t ext4", 1024 * MiB); }
static void test_ext4_no_flex_bg(void)
{
	check_mkfs("-t ext4 -b 1024 -O ^flex_bg", 64 * MiB);
	check_mkfs("-t ext4 -O ^flex_bg", 1024 * MiB);
}
static void test_ext4_no_64bit(void)
{
	check_mkfs("-t ext4 -b 1024 -O ^64bit", 64 * MiB);
	check_mkfs("-t ext4 -O ^64bit", 1024 * MiB);
}
static void test_ext4_meta_bg(void)
{
	check_mkfs("-t ext4 -b 1024 -O meta_bg,^resize_inode", 256 * MiB);
	check_mkfs("-t ext4 -b 1024 -O meta_bg,^resize_inode,^64bit", 256 * MiB);
	check_mkfs("-t ext4 -b 4096 -g 1024 -O meta_bg,^resize_inode", 1024 * MiB);
	check_mkfs("-t ext4 -b 4096 -g 1024 -O meta_bg,^resize_inode,^flex_bg", 1024 * MiB);
}
static void test_ext4_no_csum(void)
{
	check_mkfs("-t ext4 -b 1024 -O ^metadata_csum,^uninit_bg", 64 * MiB);
	check_mkfs("-t ext4 -O ^metadata_csum,^uninit_bg", 1024 * MiB);
}
static void test_ext4_uninit_bg(void)  /* crc16 descriptor checksums */
{
	check_mkfs("-t ext4 -b 1024 -O ^metadata_csum,uninit_bg", 64 * MiB);
	check_mkfs("-t ext4 -O ^metadata_csum,uninit_bg,^64bit", 1024 * MiB);
}
static void test_sparse_super(void)
{
	check_mkfs("-t ext4 -O sparse_super2", 1024 * MiB);
	check_mkfs("-t ext2 -b 1024 -O ^sparse_super,^resize_inode", 64 * MiB);
	check_mkfs("-t ext4 -O ^sparse_super,^resize_inode", 512 * MiB);
}
static void test_ext4_64k_blocks(void)
{
	check_mkfs("-t ext4 -b 65536", 512 * MiB);
	/* Two groups of 65528 blocks (mke2fs keeps groups below 2^16 blocks). */
	check_mkfs("-t ext4 -b 65536", 8192 * MiB);
}
static void test_ext2(void)
{
	check_mkfs("-t ext2", 64 * MiB);
	check_mkfs("-t ext2 -b 4096", 256 * MiB);
	check_mkfs("-t ext2 -r 0", 32 * MiB);   /* revision 0: no features */
}
static void test_ext3(void)
{
	check_mkfs("-t ext3 -b 1024", 64 * MiB);
	check_mkfs("-t ext3", 512 * MiB);
}

/* ---- raw access to images ---- */

static uint32_t crc32c(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
	}
	return crc;
}

static uint64_t get_le(const unsigned char *p, unsigned width)
{
	uint64_t v = 0;

	for (unsigned i = width; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

static void put_le(unsigned char *p, uint64_t v, unsigned width)
{
	for (unsigned i = 0; i < width; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static void read_at(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);

	CHECK(fd >= 0 && pread(fd, buf, len, (off_t)off) == (ssize_t)len);
	close(fd);
}

static void write_at(const char *path, uint64_t off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY);

	CHECK(fd >= 0 && pwrite(fd, buf, len, (off_t)off) == (ssize_t)len);
	close(fd);
}

static bool write_file(const char *dir, const char *name, size_t len, unsigned seed)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return false;
	for (size_t i = 0; i < len; i++)
		fputc((int)((i * 2654435761u + seed) >> 7) & 0xFF, f);
	return fclose(f) == 0;
}

/* mke2fs -d: a filesystem holding files, checked like the empty ones, and
 * using more blocks than the same filesystem empty. */
static void test_populated(void)
{
	char dir[] = "/tmp/test-ext-dir-XXXXXX", sub[64], cmd[256], args[128];
	const char *types[] = { "-t ext4 -b 1024", "-t ext4 -b 4096", "-t ext2", "-t ext3 -b 2048" };

	if (!have_e2fsprogs())
		return;
	CHECK(mkdtemp(dir) != NULL);
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	CHECK(mkdir(sub, 0755) == 0);
	CHECK(write_file(dir, "big", 5 * MiB + 123, 1));
	CHECK(write_file(dir, "small", 10, 2));
	CHECK(write_file(sub, "medium", 300000, 3));
	for (int i = 0; i < 20; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", i);
		CHECK(write_file(sub, name, (size_t)i * 4000, (unsigned)i));
	}
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		char path[32];
		struct fs_info info;
		struct im_err err;
		struct counts c;

		snprintf(args, sizeof(args), "%s -d %s", types[t], dir);
		if (!make_image(path, args, 64 * MiB))
			continue;
		check_image(path, args);
		/* The file data is in the bitmap: more than 5 MiB is used. */
		if (dumpe2fs_counts(path, &c) && examine(path, false, &info, &err) == 0) {
			CHECK((c.blocks - c.free_blocks) * c.block_size > 5 * MiB);
			fs_info_free(&info);
		}
		unlink(path);
	}
	/* Without descriptor checksums BLOCK_UNINIT means nothing: the bitmap,
	 * which holds the files, is still read. */
	snprintf(args, sizeof(args), "-t ext2 -b 4096 -d %s", dir);
	{
		char path[32];
		struct fs_info info;
		struct im_err err;
		struct counts c;
		unsigned char flags[2];
		uint64_t off = 4096 + 0x12;   /* bg_flags of group 0 */

		if (make_image(path, args, 64 * MiB) && dumpe2fs_counts(path, &c)) {
			read_at(path, off, flags, 2);
			flags[0] |= 0x2;
			write_at(path, off, flags, 2);
			CHECK(examine(path, false, &info, &err) == 0);
			CHECK_EQ_U(info.used_blocks, c.blocks - c.free_blocks);
			fs_info_free(&info);
			unlink(path);
		}
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

/* An 8 GiB ext4 (2M blocks) is examined in well under a second. */
static void test_large_fast(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct timespec t0, t1;
	int r;

	if (!have_e2fsprogs() || !make_image(path, "-t ext4", 8192 * MiB))
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = examine(path, false, &info, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(r == 0);
	{
		double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
		printf("# 8 GiB ext4: %llu blocks, %llu used, examined in %.3f s\n",
		       (unsigned long long)info.block_count,
		       (unsigned long long)info.used_blocks, s);
		CHECK(s < 1.0);
	}
	CHECK_EQ_U(info.block_count, 2097152);
	fs_info_free(&info);
	check_image(path, "8 GiB");
	unlink(path);
}

static void test_bigalloc_refused(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;

	if (!have_e2fsprogs() || !make_image(path, "-t ext4 -O bigalloc -C 16384", 256 * MiB))
		return;
	CHECK(examine(path, false, &info, &err) == -ENOTSUP);
	CHECK_EQ_U(err.exit_class, IM_EXIT_UNSUPP);
	CHECK(strstr(err.msg, "bigalloc") != NULL);
	unlink(path);
}

/* ---- hostile images ---- */

/* Re-sign a superblock that has metadata_csum, as mke2fs would. */
static void sign_sb(unsigned char *sb)
{
	if (get_le(sb + 0x64, 4) & 0x400)
		put_le(sb + 0x3FC, crc32c(~0u, sb, 0x3FC), 4);
}

/* Set one superblock field (optionally with a valid checksum), examine,
 * and put the original superblock back.  Returns examine's result. */
static int examine_patched_sb(const char *path, unsigned off, uint64_t val, unsigned width,
			      bool sign, bool force, struct fs_info *info, struct im_err *err)
{
	unsigned char orig[1024], sb[1024];
	int r;

	read_at(path, SB, orig, sizeof(orig));
	memcpy(sb, orig, sizeof(sb));
	put_le(sb + off, val, width);
	if (sign)
		sign_sb(sb);
	write_at(path, SB, sb, sizeof(sb));
	r = examine(path, force, info, err);
	write_at(path, SB, orig, sizeof(orig));
	return r;
}

static uint64_t sb_field(const char *path, unsigned off, unsigned width)
{
	unsigned char b[8];

	read_at(path, SB + off, b, width);
	return get_le(b, width);
}

struct sb_case {
	const char *what;
	unsigned off, width;
	uint64_t val;
	int want;
};

static void test_hostile_superblock(void)
{
	const struct sb_case cases[] = {
		{ "log_block_size 40", 0x18, 4, 40, -EINVAL },
		{ "blocks_per_group 0", 0x20, 4, 0, -EINVAL },
		{ "blocks_per_group > 8*bs", 0x20, 4, 8 * 4096 + 8, -EINVAL },
		{ "inodes_per_group 0", 0x28, 4, 0, -EINVAL },
		{ "blocks_count huge", 0x150, 4, 0xFFFFFFFF, -EINVAL },
		{ "blocks_count one more", 0x04, 4, 16385, -EINVAL },
		{ "blocks_count 0", 0x04, 4, 0, -EINVAL },
		{ "desc_size 3", 0xFE, 2, 3, -EINVAL },
		{ "desc_size 96", 0xFE, 2, 96, -EINVAL },
		{ "desc_size 2048", 0xFE, 2, 2048, -EINVAL },
		{ "first_data_block > count", 0x14, 4, 0x7FFFFFFF, -EINVAL },
		{ "first_data_block 1 on 4 KiB", 0x14, 4, 1, -EINVAL },
		{ "inode_size 100", 0x58, 2, 100, -EINVAL },
		{ "inodes_count wrong", 0x00, 4, 12345, -EINVAL },
		{ "reserved_gdt huge", 0xCE, 2, 60000, -EINVAL },
		{ "free blocks > count", 0x0C, 4, 0xFFFFFFF0, -EINVAL },
		{ "unknown incompat", 0x60, 4, 0, -ENOTSUP },   /* value set below */
		{ "compression", 0x60, 4, 0, -ENOTSUP },
		{ "revision 7", 0x4C, 4, 7, -ENOTSUP },
		{ "not clean", 0x3A, 2, 0, -EUCLEAN },
		{ "errors", 0x3A, 2, 3, -EUCLEAN },
		{ "free count off by one", 0x0C, 4, 0, -EUCLEAN },
	};
	char path[32];
	struct fs_info info;
	struct im_err err;
	uint32_t incompat;

	if (!have_e2fsprogs() || !make_image(path, "-t ext4 -b 4096", 64 * MiB))
		return;
	incompat = (uint32_t)sb_field(path, 0x60, 4);
	CHECK(incompat & 0x80);  /* 64bit: the hi fields and desc_size count */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sb_case c = cases[i];
		int r;

		if (strcmp(c.what, "unknown incompat") == 0)
			c.val = incompat | 0x80000000u;
		else if (strcmp(c.what, "compression") == 0)
			c.val = incompat | 0x1;
		else if (strcmp(c.what, "free count off by one") == 0)
			c.val = sb_field(path, 0x0C, 4) + 1;
		r = examine_patched_sb(path, c.off, c.val, c.width, true, false, &info, &err);
		if (r != c.want)
			fprintf(stderr, "  %s: got %d (%s), expected %d\n", c.what, r, err.msg, c.want);
		CHECK(r == c.want);
		CHECK(err.msg[0] != '\0');
		if (r == 0)
			fs_info_free(&info);
	}
	/* The image is intact again. */
	check_image(path, "restored");
	unlink(path);
}

static void test_unclean(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct counts c;
	uint32_t incompat;
	int r;

	if (!have_e2fsprogs() || !make_image(path, "-t ext4 -b 1024", 64 * MiB) ||
	    !dumpe2fs_counts(path, &c))
		return;
	r = examine_patched_sb(path, 0x3A, 0, 2, true, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
	CHECK(strstr(err.msg, "fsck") != NULL);

	r = examine_patched_sb(path, 0x3A, 0, 2, true, true, &info, &err);
	CHECK(r == 0);
	CHECK_EQ_U(info.used_blocks, c.blocks - c.free_blocks);
	fs_info_free(&info);

	incompat = (uint32_t)sb_field(path, 0x60, 4);
	r = examine_patched_sb(path, 0x60, incompat | 0x4, 4, true, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, "journal") != NULL);
	r = examine_patched_sb(path, 0x60, incompat | 0x4, 4, true, true, &info, &err);
	CHECK(r == 0);
	fs_info_free(&info);
	unlink(path);
}

static void test_bad_checksum(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	int r, fd;

	if (!have_e2fsprogs() || !make_image(path, "-t ext4 -b 4096", 64 * MiB))
		return;
	/* The volume name changes, the checksum does not. */
	r = examine_patched_sb(path, 0x78, 0x41, 1, false, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, "checksum") != NULL);
	r = examine_patched_sb(path, 0x78, 0x41, 1, false, true, &info, &err);
	CHECK(r == 0);
	CHECK(info.warning[0] != '\0');
	fs_info_free(&info);

	/* Through the registry, probe() turns such a superblock down and the
	 * raw fallback copies everything; a good one is taken by ext. */
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	memset(&err, 0, sizeof(err));
	r = fs_examine(fd, 0, file_size(path), false, &info, &err);
	CHECK(r == 0);
	CHECK(info.plugin == &fs_plugin_ext);
	if (r == 0)
		fs_info_free(&info);
	close(fd);
	{
		unsigned char orig[1024], sb[1024];
		read_at(path, SB, orig, sizeof(orig));
		memcpy(sb, orig, sizeof(sb));
		sb[0x78] ^= 1;
		write_at(path, SB, sb, sizeof(sb));
		fd = open(path, O_RDONLY);
		memset(&err, 0, sizeof(err));
		r = fs_examine(fd, 0, file_size(path), false, &info, &err);
		CHECK(r == 0);
		CHECK(info.plugin == &fs_plugin_raw);
		if (r == 0)
			fs_info_free(&info);
		close(fd);
		/* Geometry wrong under a valid checksum: also not ext's. */
		memcpy(sb, orig, sizeof(sb));
		put_le(sb + 0x20, 0, 4);
		sign_sb(sb);
		write_at(path, SB, sb, sizeof(sb));
		fd = open(path, O_RDONLY);
		memset(&err, 0, sizeof(err));
		r = fs_examine(fd, 0, file_size(path), false, &info, &err);
		CHECK(r == 0);
		CHECK(info.plugin == &fs_plugin_raw);
		if (r == 0)
			fs_info_free(&info);
		close(fd);
		write_at(path, SB, orig, sizeof(orig));
	}
	unlink(path);
}

/* The filesystem claims more than the device holds. */
static void test_device_too_small(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;

	if (!have_e2fsprogs() || !make_image(path, "-t ext4 -b 4096", 64 * MiB))
		return;
	CHECK(examine_size(path, 32 * MiB, false, &info, &err) == -EINVAL);
	CHECK(examine_size(path, 1500, false, &info, &err) < 0);
	CHECK(examine_size(path, 4096, false, &info, &err) < 0);
	unlink(path);
}

/* Block size and first group descriptor of an image. */
static void first_desc(const char *path, uint32_t *bs, uint64_t *desc_off)
{
	*bs = 1024u << sb_field(path, 0x18, 4);
	*desc_off = (uint64_t)(sb_field(path, 0x14, 4) + 1) * *bs;
}

static void test_hostile_descriptor(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct counts c;
	unsigned char orig[32], d[32];
	uint64_t off;
	uint32_t bs;
	int r;

	/* No descriptor checksums: the location check itself must catch it. */
	if (!have_e2fsprogs() || !make_image(path, "-t ext2 -b 4096", 64 * MiB) ||
	    !dumpe2fs_counts(path, &c))
		return;
	first_desc(path, &bs, &off);
	read_at(path, off, orig, sizeof(orig));
	const struct { unsigned field; uint32_t val; } bad[] = {
		{ 0x00, 0xFFFFFF00 }, { 0x00, (uint32_t)c.blocks }, { 0x00, 0 },
		{ 0x04, 0xFFFFFFFF }, { 0x08, (uint32_t)c.blocks - 1 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(d, orig, sizeof(d));
		put_le(d + bad[i].field, bad[i].val, 4);
		write_at(path, off, d, sizeof(d));
		r = examine(path, false, &info, &err);
		CHECK(r == -EUCLEAN);
		CHECK(strstr(err.msg, "outside") != NULL);
		/* Forced: the whole group is kept. */
		r = examine(path, true, &info, &err);
		CHECK(r == 0);
		CHECK_EQ_U(info.used_blocks, c.blocks);
		fs_info_free(&info);
	}
	write_at(path, off, orig, sizeof(orig));
	check_image(path, "restored");
	unlink(path);

	/* With checksums the descriptor's own checksum gives it away first. */
	if (!make_image(path, "-t ext4 -b 4096", 64 * MiB))
		return;
	first_desc(path, &bs, &off);
	read_at(path, off, orig, sizeof(orig));
	memcpy(d, orig, sizeof(d));
	put_le(d, 0xFFFFFF00, 4);
	write_at(path, off, d, sizeof(d));
	r = examine(path, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, "checksum") != NULL);
	unlink(path);
}

/* One bit set in the block bitmap of an initialised group: its free count no
 * longer matches the descriptor's.  With metadata_csum the bitmap's checksum
 * catches it first. */
static void flip_free_bit(const char *args, const char *want_msg)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct counts c;
	unsigned char d[8], byte;
	uint64_t off, bitmap, last;
	uint32_t bs;
	int r;

	if (!have_e2fsprogs() || !make_image(path, args, 64 * MiB) || !dumpe2fs_counts(path, &c))
		return;
	first_desc(path, &bs, &off);
	read_at(path, off, d, sizeof(d));
	bitmap = get_le(d, 4) * bs;
	CHECK_EQ_U(c.blocks, 64 * MiB / bs);
	CHECK(c.blocks <= 8ull * bs);        /* one group: the last block is in it */
	last = c.blocks - 1 - sb_field(path, 0x14, 4);
	read_at(path, bitmap + last / 8, &byte, 1);
	CHECK(!(byte & (1u << (last % 8))));  /* free to begin with */
	byte |= (unsigned char)(1u << (last % 8));
	write_at(path, bitmap + last / 8, &byte, 1);

	r = examine(path, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
	if (!strstr(err.msg, want_msg))
		fprintf(stderr, "  message: %s\n", err.msg);
	CHECK(strstr(err.msg, want_msg) != NULL);

	r = examine(path, true, &info, &err);
	CHECK(r == 0);
	CHECK(info.warning[0] != '\0');
	CHECK_EQ_U(info.used_blocks, c.blocks - c.free_blocks + 1);
	fs_info_free(&info);
	unlink(path);
}

static void test_bitmap_mismatch(void)
{
	flip_free_bit("-t ext2 -b 4096", "its descriptor says");
	flip_free_bit("-t ext4 -b 4096 -O ^metadata_csum", "its descriptor says");
	flip_free_bit("-t ext4 -b 4096", "checksum");
}

/* Random damage to the superblock and descriptors, re-signed half the time so
 * the parser's deeper checks are reached: never a crash (ASan/UBSan watch). */
static void test_fuzz(void)
{
	const char *images[] = { "-t ext4 -b 1024", "-t ext2 -b 1024 -O ^resize_inode",
				 "-t ext4 -b 1024 -O meta_bg,^resize_inode" };
	const char *env = getenv("TEST_EXT_FUZZ");   /* iterations, for long runs */
	int iters = env ? atoi(env) : 400;
	unsigned seed = 12345;

	if (!have_e2fsprogs())
		return;
	for (size_t k = 0; k < sizeof(images) / sizeof(images[0]); k++) {
		char path[32];
		unsigned char orig[4096], buf[4096];
		int ok = 0, failed = 0;

		if (!make_image(path, images[k], 64 * MiB))
			continue;
		read_at(path, SB, orig, sizeof(orig));   /* superblock + descriptors */
		for (int it = 0; it < iters; it++) {
			struct fs_info info;
			struct im_err err;
			int n = 1 + (int)(rand_r(&seed) % 4), r;

			memcpy(buf, orig, sizeof(buf));
			for (int j = 0; j < n; j++) {
				size_t at = rand_r(&seed) % 2 ? rand_r(&seed) % 0x280
							       : 1024 + rand_r(&seed) % 512;
				buf[at] = (unsigned char)(rand_r(&seed) % 3 == 0 ? 0xFF : rand_r(&seed));
			}
			if (rand_r(&seed) % 2)
				sign_sb(buf);
			write_at(path, SB, buf, sizeof(buf));
			r = examine(path, rand_r(&seed) % 2, &info, &err);
			if (r == 0) {
				ok++;
				CHECK(info.used_blocks <= info.block_count);
				fs_info_free(&info);
			} else {
				failed++;
				CHECK(err.msg[0] != '\0');
			}
		}
		write_at(path, SB, orig, sizeof(orig));
		CHECK(ok > 0 && failed > 0);
		check_image(path, "after fuzzing");
		unlink(path);
	}
}

UNIT_MAIN(UNIT(test_ext4_4k), UNIT(test_ext4_2k), UNIT(test_ext4_1k), UNIT(test_ext4_1g),
	  UNIT(test_ext4_no_flex_bg), UNIT(test_ext4_no_64bit), UNIT(test_ext4_meta_bg),
	  UNIT(test_ext4_no_csum), UNIT(test_ext4_uninit_bg), UNIT(test_sparse_super),
	  UNIT(test_ext4_64k_blocks), UNIT(test_ext2), UNIT(test_ext3), UNIT(test_populated),
	  UNIT(test_large_fast), UNIT(test_bigalloc_refused), UNIT(test_hostile_superblock),
	  UNIT(test_unclean), UNIT(test_bad_checksum), UNIT(test_device_too_small),
	  UNIT(test_hostile_descriptor), UNIT(test_bitmap_mismatch), UNIT(test_fuzz))
