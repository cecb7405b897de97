/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The ext2/3/4 plugin against filesystems made by the real mke2fs, checked
 * against what dumpe2fs reports, then against corrupted copies of them.
 */
#include "unit-fs.h"

extern const struct fs_plugin fs_plugin_ext;

#define SB 1024u   /* byte offset of the superblock */

static bool have_e2fsprogs(void)
{
	static int have = -1;

	return have_or_skip(&have, "mke2fs dumpe2fs", "SKIP: mke2fs not installed");
}

/* A file of size bytes holding a filesystem made by `mke2fs -q -F args`.
 * Returns false (with a failed check) when mke2fs fails. */
static bool make_image(char path[static 32], const char *args, uint64_t size)
{
	return mkfs_image(path, "/tmp/test-ext-XXXXXX", size, "mke2fs -q -F", args);
}

/* Block count, free blocks and block size as `dumpe2fs -h` prints them. */
static bool dumpe2fs_counts(const char *path, struct tool_count *c)
{
	const struct tool_field f[] = { { "Block count: %llu", &c->blocks },
					{ "Free blocks: %llu", &c->free },
					{ "Block size: %llu", &c->block_size } };

	return tool_fields("dumpe2fs -h %s 2>/dev/null", path, f, 3);
}

/* The ranges dumpe2fs lists as free in its groups ("  Free blocks: 1-5, 9"). */
static void free_ranges(const char *line, const void *ctx, free_range_fn range, void *acc)
{
	char *p = (char *)line + 15;

	(void)ctx;
	if (strncmp(line, "  Free blocks: ", 15) != 0)
		return;
	while (*p >= '0' && *p <= '9') {
		unsigned long long a = strtoull(p, &p, 10), b = a;
		if (*p == '-')
			b = strtoull(p + 1, &p, 10);
		range(acc, a, b - a + 1);
		while (*p == ',' || *p == ' ')
			p++;
	}
}

static const struct free_list dumpe2fs_free = { "dumpe2fs %s 2>/dev/null", free_ranges };

static int examine(const char *path, bool force, struct fs_info *info, struct im_err *err)
{
	return examine_path(&fs_plugin_ext, path, force, info, err);
}

/* The plugin's bitmap against dumpe2fs, for an image already made. */
static void check_image(const char *path, const char *what)
{
	struct tool_count c;

	if (dumpe2fs_counts(path, &c))
		check_count(&fs_plugin_ext, path, what, &c, &dumpe2fs_free, NULL);
}

static const struct mkfs_kind ext = { have_e2fsprogs, make_image, check_image };

static void check_mkfs(const char *args, uint64_t size) { check_mkfs_kind(&ext, args, size); }

#define MiB (1ull << 20)

static void test_ext4_4k(void)        { check_mkfs("-t ext4 -b 4096", 64 * MiB); }
static void test_ext4_2k(void)        { check_mkfs("-t ext4 -b 2048", 96 * MiB); }
static void test_ext4_1k(void)        { check_mkfs("-t ext4 -b 1024", 64 * MiB); }
static void test_ext4_1g(void)        { check_mkfs("-t ext4", 1024 * MiB); }

/* The filesystems the other tests make and check: mke2fs options, a size. */
static const struct mkfs_case ext4_no_flex_bg[] = {
	{ "-t ext4 -b 1024 -O ^flex_bg", 64 * MiB },
	{ "-t ext4 -O ^flex_bg", 1024 * MiB },
};
static const struct mkfs_case ext4_no_64bit[] = {
	{ "-t ext4 -b 1024 -O ^64bit", 64 * MiB },
	{ "-t ext4 -O ^64bit", 1024 * MiB },
};
static const struct mkfs_case ext4_meta_bg[] = {
	{ "-t ext4 -b 1024 -O meta_bg,^resize_inode", 256 * MiB },
	{ "-t ext4 -b 1024 -O meta_bg,^resize_inode,^64bit", 256 * MiB },
	{ "-t ext4 -b 4096 -g 1024 -O meta_bg,^resize_inode", 1024 * MiB },
	{ "-t ext4 -b 4096 -g 1024 -O meta_bg,^resize_inode,^flex_bg", 1024 * MiB },
};
static const struct mkfs_case ext4_no_csum[] = {
	{ "-t ext4 -b 1024 -O ^metadata_csum,^uninit_bg", 64 * MiB },
	{ "-t ext4 -O ^metadata_csum,^uninit_bg", 1024 * MiB },
};
/* crc16 descriptor checksums */
static const struct mkfs_case ext4_uninit_bg[] = {
	{ "-t ext4 -b 1024 -O ^metadata_csum,uninit_bg", 64 * MiB },
	{ "-t ext4 -O ^metadata_csum,uninit_bg,^64bit", 1024 * MiB },
};
static const struct mkfs_case sparse_super[] = {
	{ "-t ext4 -O sparse_super2", 1024 * MiB },
	{ "-t ext2 -b 1024 -O ^sparse_super,^resize_inode", 64 * MiB },
	{ "-t ext4 -O ^sparse_super,^resize_inode", 512 * MiB },
};
static const struct mkfs_case ext4_64k_blocks[] = {
	{ "-t ext4 -b 65536", 512 * MiB },
	/* Two groups of 65528 blocks (mke2fs keeps groups below 2^16 blocks). */
	{ "-t ext4 -b 65536", 8192 * MiB },
};
static const struct mkfs_case ext2[] = {
	{ "-t ext2", 64 * MiB },
	{ "-t ext2 -b 4096", 256 * MiB },
	{ "-t ext2 -r 0", 32 * MiB },   /* revision 0: no features */
};
static const struct mkfs_case ext3[] = {
	{ "-t ext3 -b 1024", 64 * MiB },
	{ "-t ext3", 512 * MiB },
};

static void test_ext4_no_flex_bg(void) { CHECK_MKFS_ALL(&ext, ext4_no_flex_bg); }
static void test_ext4_no_64bit(void)  { CHECK_MKFS_ALL(&ext, ext4_no_64bit); }
static void test_ext4_meta_bg(void)   { CHECK_MKFS_ALL(&ext, ext4_meta_bg); }
static void test_ext4_no_csum(void)   { CHECK_MKFS_ALL(&ext, ext4_no_csum); }
static void test_ext4_uninit_bg(void) { CHECK_MKFS_ALL(&ext, ext4_uninit_bg); }
static void test_sparse_super(void)   { CHECK_MKFS_ALL(&ext, sparse_super); }
static void test_ext4_64k_blocks(void) { CHECK_MKFS_ALL(&ext, ext4_64k_blocks); }
static void test_ext2(void)           { CHECK_MKFS_ALL(&ext, ext2); }
static void test_ext3(void)           { CHECK_MKFS_ALL(&ext, ext3); }

/* The bytes dumpe2fs counts as used, where the plugin takes the image. */
static bool dumpe2fs_used(const char *path, uint64_t *bytes)
{
	struct fs_info info;
	struct im_err err;
	struct tool_count c;

	if (!dumpe2fs_counts(path, &c) || examine(path, false, &info, &err) != 0)
		return false;
	fs_info_free(&info);
	*bytes = (c.blocks - c.free) * c.block_size;
	return true;
}

/* mke2fs -d: a filesystem holding files, checked like the empty ones, and
 * using more blocks than the same filesystem empty. */
static void test_populated(void)
{
	char dir[64], sub[96], args[128];
	const char *types[] = { "-t ext4 -b 1024", "-t ext4 -b 4096", "-t ext2", "-t ext3 -b 2048" };

	if (!have_e2fsprogs())
		return;
	make_sample_tree(dir, "/tmp/test-ext-dir-XXXXXX", sub, sizeof(sub));
	for (int i = 0; i < 20; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", i);
		CHECK(write_pattern_in(sub, name, (size_t)i * 4000, (unsigned)i));
	}
	/* The file data is in the bitmap: more than 5 MiB is used. */
	snprintf(args, sizeof(args), "-d %s", dir);
	check_filled(&ext, types, sizeof(types) / sizeof(types[0]), args, 64 * MiB, dumpe2fs_used,
		     5 * MiB);
	/* Without descriptor checksums BLOCK_UNINIT means nothing: the bitmap,
	 * which holds the files, is still read. */
	snprintf(args, sizeof(args), "-t ext2 -b 4096 -d %s", dir);
	{
		char path[32];
		struct fs_info info;
		struct im_err err;
		struct tool_count c;
		unsigned char flags[2];
		uint64_t off = 4096 + 0x12;   /* bg_flags of group 0 */

		if (make_image(path, args, 64 * MiB) && dumpe2fs_counts(path, &c)) {
			read_at(path, off, flags, 2);
			flags[0] |= 0x2;
			write_at(path, off, flags, 2);
			CHECK(examine(path, false, &info, &err) == 0);
			CHECK_EQ_U(info.used_blocks, c.blocks - c.free);
			fs_info_free(&info);
			unlink(path);
		}
	}
	CHECK(remove_tree(dir));
}

/* An 8 GiB ext4 (2M blocks) is examined in well under a second. */
static void test_large_fast(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	double s;

	if (!have_e2fsprogs() || !make_image(path, "-t ext4", 8192 * MiB))
		return;
	CHECK(examine_timed(&fs_plugin_ext, path, "8 GiB ext4", &info, &err, &s) == 0);
	CHECK(s < 1.0);
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

static void sign_sb_block(unsigned char *sb, size_t len, unsigned arg)
{
	(void)len;
	(void)arg;
	sign_sb(sb);
}

/* The superblock, signed when it has metadata_csum. */
static const struct block_at superblock = { &fs_plugin_ext, SB, 1024, false, sign_sb_block, 0 };

static void test_hostile_superblock(void)
{
	const struct field_case cases[] = {
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
	incompat = (uint32_t)read_le(path, SB + 0x60, 4);
	CHECK(incompat & 0x80);  /* 64bit: the hi fields and desc_size count */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct field_case c = cases[i];
		int r;

		if (strcmp(c.what, "unknown incompat") == 0)
			c.val = incompat | 0x80000000u;
		else if (strcmp(c.what, "compression") == 0)
			c.val = incompat | 0x1;
		else if (strcmp(c.what, "free count off by one") == 0)
			c.val = read_le(path, SB + 0x0C, 4) + 1;
		r = examine_patched(path, &superblock, c.off, c.val, c.width, true, false, &info, &err);
		expect_result(c.what, r, c.want, &err, &info);
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
	struct tool_count c;
	uint32_t incompat;
	int r;

	if (!have_e2fsprogs() || !make_image(path, "-t ext4 -b 1024", 64 * MiB) ||
	    !dumpe2fs_counts(path, &c))
		return;
	r = examine_patched(path, &superblock, 0x3A, 0, 2, true, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
	CHECK(strstr(err.msg, "fsck") != NULL);

	r = examine_patched(path, &superblock, 0x3A, 0, 2, true, true, &info, &err);
	CHECK(r == 0);
	CHECK_EQ_U(info.used_blocks, c.blocks - c.free);
	fs_info_free(&info);

	incompat = (uint32_t)read_le(path, SB + 0x60, 4);
	r = examine_patched(path, &superblock, 0x60, incompat | 0x4, 4, true, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, "journal") != NULL);
	r = examine_patched(path, &superblock, 0x60, incompat | 0x4, 4, true, true, &info, &err);
	CHECK(r == 0);
	fs_info_free(&info);
	unlink(path);
}

static void test_bad_checksum(void)
{
	char path[32];

	if (!have_e2fsprogs() || !make_image(path, "-t ext4 -b 4096", 64 * MiB))
		return;
	/* The volume name changes, the checksum does not. */
	expect_unclean(path, &superblock, 0x78, 0x41, 1, false, "checksum", NULL);

	/* Through the registry, probe() turns such a superblock down and the
	 * raw fallback copies everything; a good one is taken by ext. */
	expect_plugin(path, &fs_plugin_ext, NULL);
	{
		unsigned char orig[1024], sb[1024];
		read_at(path, SB, orig, sizeof(orig));
		memcpy(sb, orig, sizeof(sb));
		sb[0x78] ^= 1;
		write_at(path, SB, sb, sizeof(sb));
		expect_plugin(path, &fs_plugin_raw, NULL);
		/* Geometry wrong under a valid checksum: also not ext's. */
		memcpy(sb, orig, sizeof(sb));
		put_le(sb + 0x20, 0, 4);
		sign_sb(sb);
		write_at(path, SB, sb, sizeof(sb));
		expect_plugin(path, &fs_plugin_raw, NULL);
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
	CHECK(examine_path_size(&fs_plugin_ext, path, 32 * MiB, false, &info, &err) == -EINVAL);
	CHECK(examine_path_size(&fs_plugin_ext, path, 1500, false, &info, &err) < 0);
	CHECK(examine_path_size(&fs_plugin_ext, path, 4096, false, &info, &err) < 0);
	unlink(path);
}

/* Block size and first group descriptor of an image. */
static void first_desc(const char *path, uint32_t *bs, uint64_t *desc_off)
{
	*bs = 1024u << read_le(path, SB + 0x18, 4);
	*desc_off = (uint64_t)(read_le(path, SB + 0x14, 4) + 1) * *bs;
}

static void test_hostile_descriptor(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct tool_count c;
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
	struct tool_count c;
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
	last = c.blocks - 1 - read_le(path, SB + 0x14, 4);
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
	CHECK_EQ_U(info.used_blocks, c.blocks - c.free + 1);
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
/* How many of the blocks [first, first+count) the plugin marked blank. */
static uint64_t blank_in(const struct fs_info *info, uint64_t first, uint64_t count)
{
	uint64_t n = 0;

	for (uint64_t b = first; b < first + count; b++)
		n += b < info->blank.nbits && bitmap_test(&info->blank, b);
	return n;
}

/* The journal's blank blocks in path (examined forced or not). */
static uint64_t journal_blank(const char *path, bool force, uint64_t jsb, uint64_t len)
{
	struct fs_info info;
	struct im_err err;
	uint64_t n = 0;

	CHECK(examine(path, force, &info, &err) == 0);
	n = blank_in(&info, jsb, len);
	CHECK(!blank_in(&info, jsb, 1));   /* (never the journal's superblock) */
	fs_info_free(&info);
	return n;
}

/* The journal inode (8) of path given two extents: lblk 0 at b0 for n0
 * blocks, then lblk n0 at b1 for n1 blocks.  Through debugfs, which
 * writes the inode with a fresh checksum. */
static void set_journal_extents(const char *path, uint64_t b0, uint64_t n0, uint64_t b1, uint64_t n1)
{
	const unsigned long long w[9] = {
		0xF30Au | 2u << 16, 4, 0,   /* header: 2 entries of 4, depth 0 */
		0, n0, b0,                  /* ee_block, ee_len (start_hi 0), ee_start_lo */
		n0, n1, b1,
	};

	for (unsigned i = 0; i < 9; i++)
		CHECK(sh("debugfs -w -R 'sif <8> block[%u] %llu' %s >/dev/null 2>&1", i, w[i], path) == 0);
}

/* The empty journal of a clean ext4 with metadata_csum is blank past its
 * superblock; not when forced, not when the journal inode fails its
 * checksum, not when the journal holds transactions (s_start), and not
 * without metadata_csum. */
static void test_blank_journal(void)
{
	uint64_t jsb = 0, jlast = 0, len = 0, iblk = 0, ioff = 0;
	char path[32], nocsum[32];
	unsigned char b[4], save[4];

	if (!have_e2fsprogs() || !make_image(path, "-t ext4 -b 1024", 64 * MiB))
		return;
	{
		const struct tool_field f[] = { { "Total journal blocks: %llu", &len } };
		const struct tool_field g[] = { { "%llu", &jsb } };
		const struct tool_field h[] = { { "%*[ \t]located at block %llu", &iblk } };
		const struct tool_field o[] = { { "%*[ \t]located at block %*u, offset 0x%llx", &ioff } };
		if (!tool_fields("dumpe2fs -h %s 2>/dev/null", path, f, 1) ||
		    !tool_fields("debugfs -R 'bmap <8> 0' %s 2>/dev/null", path, g, 1) ||
		    !tool_fields("debugfs -R 'imap <8>' %s 2>/dev/null", path, h, 1) ||
		    !tool_fields("debugfs -R 'imap <8>' %s 2>/dev/null", path, o, 1))
			goto out;
	}
	{
		char cmd[64];
		const struct tool_field l[] = { { "%llu", &jlast } };
		snprintf(cmd, sizeof(cmd), "debugfs -R 'bmap <8> %llu' %%s 2>/dev/null",
			 (unsigned long long)len - 1);
		if (!tool_fields(cmd, path, l, 1))
			goto out;
	}
	CHECK(len >= 1024 && jlast == jsb + len - 1);   /* (mke2fs: one run) */
	CHECK_EQ_U(journal_blank(path, false, jsb, len), len - 1);
	CHECK_EQ_U(journal_blank(path, true, jsb, len), 0);

	/* The inode's generation changed: its checksum fails. */
	read_at(path, iblk * 1024 + ioff + 0x64, save, 4);
	memcpy(b, save, 4);
	b[0] ^= 0x55;
	write_at(path, iblk * 1024 + ioff + 0x64, b, 4);
	CHECK_EQ_U(journal_blank(path, false, jsb, len), 0);
	write_at(path, iblk * 1024 + ioff + 0x64, save, 4);

	/* Transactions to replay (s_start, big-endian, at 0x1C). */
	read_at(path, jsb * 1024 + 0x1C, save, 4);
	memcpy(b, "\0\0\0\1", 4);
	write_at(path, jsb * 1024 + 0x1C, b, 4);
	CHECK_EQ_U(journal_blank(path, false, jsb, len), 0);
	write_at(path, jsb * 1024 + 0x1C, save, 4);
	CHECK_EQ_U(journal_blank(path, false, jsb, len), len - 1);

	/* The journal inode's extents rewritten (debugfs signs the inode
	 * anew): its blocks in two extents are still blank; a second extent
	 * that claims the inode table, or the journal's own superblock, makes
	 * the journal untrusted, and nothing is blank. */
	CHECK(len <= 32768 && iblk > 1);
	set_journal_extents(path, jsb, 1, jsb + 1, len - 1);
	CHECK_EQ_U(journal_blank(path, false, jsb, len), len - 1);
	set_journal_extents(path, jsb, 1, iblk - 1, 8);
	CHECK_EQ_U(journal_blank(path, false, jsb, len), 0);
	CHECK_EQ_U(journal_blank(path, false, iblk - 1, 2), 0);   /* (inodes 1-8 in use) */
	set_journal_extents(path, jsb, 1, jsb, len - 1);
	CHECK_EQ_U(journal_blank(path, false, jsb, len), 0);

	if (make_image(nocsum, "-t ext4 -b 1024 -O ^metadata_csum", 64 * MiB)) {
		uint64_t j2 = 0;
		const struct tool_field g[] = { { "%llu", &j2 } };
		if (tool_fields("debugfs -R 'bmap <8> 0' %s 2>/dev/null", nocsum, g, 1))
			CHECK_EQ_U(journal_blank(nocsum, false, j2, len), 0);
		unlink(nocsum);
	}
out:
	unlink(path);
}

static void test_fuzz(void)
{
	const char *images[] = { "-t ext4 -b 1024", "-t ext2 -b 1024 -O ^resize_inode",
				 "-t ext4 -b 1024 -O meta_bg,^resize_inode" };
	int iters = fuzz_rounds("TEST_EXT_FUZZ", 400);
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
			int n = 1 + (int)(rand_r(&seed) % 4);

			memcpy(buf, orig, sizeof(buf));
			for (int j = 0; j < n; j++) {
				size_t at = rand_r(&seed) % 2 ? rand_r(&seed) % 0x280
							       : 1024 + rand_r(&seed) % 512;
				buf[at] = fuzz_byte(&seed);
			}
			if (rand_r(&seed) % 2)
				sign_sb(buf);
			write_at(path, SB, buf, sizeof(buf));
			examine_fuzzed(&fs_plugin_ext, path, &seed, &ok, &failed);
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
	  UNIT(test_hostile_descriptor), UNIT(test_bitmap_mismatch), UNIT(test_blank_journal),
	  UNIT(test_fuzz))
