/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The btrfs plugin against filesystems made by the real mkfs.btrfs, checked
 * block for block against what `btrfs inspect-internal dump-tree` and
 * `dump-super` say (the chunks' stripes, the extent tree's EXTENT_ITEM and
 * METADATA_ITEM keys, bytes_used), then against damaged and hostile copies.
 */
#include "unit-fs.h"

extern const struct fs_plugin fs_plugin_btrfs;

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define SB  65536u         /* byte offset of the primary superblock */

static bool have_btrfs_progs(void)
{
	static int have = -1;

	return have_or_skip(&have, "mkfs.btrfs btrfs",
			    "SKIP: mkfs.btrfs or btrfs (btrfs-progs) not installed");
}

/* ---- raw access ---- */

/* A crc32c-checksummed block (superblock or tree block) made valid again. */
static void sign(unsigned char *b, size_t len)
{
	put_le(b, ~crc32c(~0u, b + 32, len - 32), 4);
}

/* ---- images ---- */

/* Old data: the space mkfs gets is full of pseudo-random bytes, so a block
 * the plugin forgets would not come back as zeros by luck. */
static void fill_random(int fd, uint64_t size, uint64_t seed)
{
	static uint64_t buf[MiB / 8];
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	for (uint64_t off = 0; off < size; off += sizeof(buf)) {
		size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		for (size_t i = 0; i < n / 8; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = x;
		}
		CHECK(pwrite(fd, buf, n, (off_t)off) == (ssize_t)n);
	}
}

/* A file of size bytes (random first when asked, else sparse) holding
 * `mkfs.btrfs -q -f ARGS`, with --rootdir DIR when dir is given. */
static bool make_fs(char path[static 40], const char *args, uint64_t size, const char *dir,
		    bool random)
{
	char opts[512];
	int fd = temp_fd(path, "/tmp/test-btrfs-XXXXXX");

	if (fd < 0)
		return false;
	if (random)
		fill_random(fd, size, size ^ (uint64_t)strlen(args));
	CHECK(ftruncate(fd, (off_t)size) == 0);
	close(fd);
	snprintf(opts, sizeof(opts), "%s %s%s", args, dir ? "--rootdir " : "", dir ? dir : "");
	return mkfs_on("mkfs.btrfs -q -f", opts, path);
}

/* A folder of files: one of 5 MiB, one of 300 KB, one of 10 bytes and n
 * of 3 KB (inline in the tree) or 5 KB (an extent each). */
static char *make_tree(int n)
{
	static char dir[64];
	char sub[96];

	make_sample_tree(dir, "/tmp/test-btrfs-dir-XXXXXX", sub, sizeof(sub));
	for (int i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", i);
		CHECK(write_pattern_in(sub, name, (i % 2 ? 3000 : 5000) + (size_t)i % 7, (unsigned)i));
	}
	return dir;
}

/* ---- what btrfs-progs says ---- */

struct tchunk {
	uint64_t logical, length;
	char type[64];
	int nstripes;
	uint64_t off[4];
};

struct layout {
	uint64_t sectorsize, nodesize, bytes_used, dev_bytes, root, chunk_root;
	size_t nchunks;
	struct tchunk chunks[64];
	size_t nextents;
	uint64_t (*ext)[2];          /* bytenr, length */
	uint64_t extent_sum;
	size_t nleaves;
	uint64_t leaves[64];         /* extent tree blocks, from its dump */
	uint64_t extent_root;        /* the first block the dump shows */
};

static bool read_layout(const char *path, struct layout *l)
{
	const struct tool_field super[] = {
		{ "sectorsize %llu", &l->sectorsize }, { "nodesize %llu", &l->nodesize },
		{ "bytes_used %llu", &l->bytes_used }, { "dev_item.total_bytes %llu", &l->dev_bytes },
		{ "root %llu", &l->root }, { "chunk_root %llu", &l->chunk_root },
	};
	struct cmd_lines in;
	size_t ecap = 0;
	bool found;

	memset(l, 0, sizeof(*l));
	found = tool_fields("btrfs inspect-internal dump-super %s 2>/dev/null", path, super, 6);

	lines_open(&in, "btrfs inspect-internal dump-tree -t chunk %s 2>/dev/null", path);
	while (lines_next(&in)) {
		const char *line = in.line;
		unsigned long long a, b;
		char type[64];
		unsigned s;
		struct tchunk *c = l->nchunks ? &l->chunks[l->nchunks - 1] : NULL;
		if (sscanf(line, " item %*u key (FIRST_CHUNK_TREE CHUNK_ITEM %llu)", &a) == 1 &&
		    l->nchunks < 64) {
			l->chunks[l->nchunks++].logical = a;
		} else if (c && sscanf(line, " length %llu owner %*u stripe_len %*u type %63s",
				       &a, type) == 2) {
			c->length = a;
			snprintf(c->type, sizeof(c->type), "%s", type);
		} else if (c && sscanf(line, " stripe %u devid %*u offset %llu", &s, &b) == 2 && s < 4) {
			c->off[s] = b;
			if ((int)s + 1 > c->nstripes)
				c->nstripes = (int)s + 1;
		}
	}
	lines_close(&in);

	lines_open(&in, "btrfs inspect-internal dump-tree -t extent %s 2>/dev/null", path);
	while (lines_next(&in)) {
		const char *line = in.line;
		unsigned long long a, b;
		char type[32];
		if ((sscanf(line, "leaf %llu items", &a) == 1 ||
		     sscanf(line, "node %llu level", &a) == 1) && l->nleaves < 64) {
			if (!l->nleaves)
				l->extent_root = a;
			l->leaves[l->nleaves++] = a;
		}
		if (sscanf(line, " item %*u key (%llu %31s %llu)", &a, type, &b) != 3)
			continue;
		if (strcmp(type, "METADATA_ITEM") == 0)
			b = l->nodesize;
		else if (strcmp(type, "EXTENT_ITEM") != 0)
			continue;
		if (l->nextents == ecap) {
			ecap = ecap ? ecap * 2 : 256;
			l->ext = realloc(l->ext, ecap * sizeof(*l->ext));
		}
		l->ext[l->nextents][0] = a;
		l->ext[l->nextents][1] = b;
		l->nextents++;
		l->extent_sum += b;
	}
	lines_close(&in);
	CHECK(l->nchunks > 0 && l->nextents > 0);
	return found && l->nchunks > 0 && l->nextents > 0;
}

static void free_layout(struct layout *l)
{
	free(l->ext);
	l->ext = NULL;
}

static const struct tchunk *chunk_of(const struct layout *l, uint64_t logical)
{
	for (size_t i = 0; i < l->nchunks; i++)
		if (logical >= l->chunks[i].logical &&
		    logical - l->chunks[i].logical < l->chunks[i].length)
			return &l->chunks[i];
	return NULL;
}

static void mark(struct bitmap *b, const struct layout *l, uint64_t phys, uint64_t len)
{
	uint64_t first = phys / l->sectorsize, last = (phys + len - 1) / l->sectorsize;

	bitmap_set_range(b, first, last - first + 1);
}

/* The blocks btrfs-progs' view says must be kept: the first MiB, the
 * superblock copies, every extent on every stripe (or, all_chunks, every
 * chunk's stripes whole). */
static void expected_map(const struct layout *l, struct bitmap *b, bool all_chunks)
{
	uint64_t blocks = l->dev_bytes / l->sectorsize;

	CHECK(bitmap_init(b, blocks) == 0);
	mark(b, l, 0, MiB);
	for (int i = 1; i < 3; i++) {
		uint64_t off = 16384ull << (12 * i);
		if (off + 4096 <= blocks * l->sectorsize)
			mark(b, l, off, 4096);
	}
	if (all_chunks) {
		for (size_t i = 0; i < l->nchunks; i++)
			for (int s = 0; s < l->chunks[i].nstripes; s++)
				mark(b, l, l->chunks[i].off[s], l->chunks[i].length);
		return;
	}
	for (size_t i = 0; i < l->nextents; i++) {
		const struct tchunk *c = chunk_of(l, l->ext[i][0]);
		CHECK(c != NULL);
		if (!c)
			continue;
		for (int s = 0; s < c->nstripes; s++)
			mark(b, l, c->off[s] + (l->ext[i][0] - c->logical), l->ext[i][1]);
	}
}

/* Physical offsets of the copies of the tree block at logical. */
static int copies_of(const struct layout *l, uint64_t logical, uint64_t off[4])
{
	const struct tchunk *c = chunk_of(l, logical);

	CHECK(c != NULL);
	if (!c)
		return 0;
	for (int s = 0; s < c->nstripes; s++)
		off[s] = c->off[s] + (logical - c->logical);
	return c->nstripes;
}

/* ---- examining ---- */

static int examine(const char *path, bool force, struct fs_info *info, struct im_err *err)
{
	return examine_path(&fs_plugin_btrfs, path, force, info, err);
}

/* The plugin's bitmap against the expected one, bit for bit. */
static void compare_map(const struct fs_info *info, const struct bitmap *want, const char *what)
{
	uint64_t missing = 0, extra = 0;

	CHECK_EQ_U(info->used.nbits, want->nbits);
	if (info->used.nbits != want->nbits)
		return;
	for (uint64_t n = 0; n < want->nbits; n++) {
		bool got, w;
		/* Whole equal words at once: a 300 GiB map has 78 M bits. */
		if (!(n & 63) && want->nbits - n >= 64 && info->used.words[n / 64] == want->words[n / 64]) {
			n += 63;
			continue;
		}
		got = bitmap_test(&info->used, n);
		w = bitmap_test(want, n);
		if (got == w)
			continue;
		if (missing + extra < 5)
			fprintf(stderr, "  %s: block %llu %s\n", what, (unsigned long long)n,
				w ? "missing" : "marked but free");
		missing += w;
		extra += got;
	}
	CHECK_EQ_U(missing, 0);
	CHECK_EQ_U(extra, 0);
}

/* Examine an image and compare with btrfs-progs' view. */
static void check_image(const char *path, const char *what, bool want_warning)
{
	struct fs_info info;
	struct im_err err;
	struct layout l;
	struct bitmap want;

	if (!read_layout(path, &l))
		return;
	/* The real tool's own totals agree with each other. */
	CHECK_EQ_U(l.extent_sum, l.bytes_used);
	if (examine_ok(&fs_plugin_btrfs, path, what, &info, &err)) {
		expected_map(&l, &want, false);
		CHECK_EQ_U(info.block_size, l.sectorsize);
		CHECK_EQ_U(info.block_count, l.dev_bytes / l.sectorsize);
		CHECK_EQ_U(info.used_blocks, bitmap_count(&want));
		compare_map(&info, &want, what);
		if (want_warning)
			CHECK(info.warning[0] != '\0');
		else if (info.warning[0])
			fprintf(stderr, "  %s: unexpected warning: %s\n", what, info.warning);
		if (!want_warning)
			CHECK_STR(info.warning, "");
		printf("# %s: %llu of %llu blocks used (%llu bytes; bytes_used %llu)\n", what,
		       (unsigned long long)info.used_blocks, (unsigned long long)info.block_count,
		       (unsigned long long)(info.used_blocks * info.block_size),
		       (unsigned long long)l.bytes_used);
		bitmap_free(&want);
		fs_info_free(&info);
	}
	free_layout(&l);
}

static void check_mkfs(const char *args, uint64_t size, const char *dir, bool random,
		       bool want_warning)
{
	char path[40], what[256];

	if (!have_btrfs_progs() || !make_fs(path, args, size, dir, random))
		return;
	snprintf(what, sizeof(what), "%s%s", args, dir ? " --rootdir" : "");
	check_image(path, what, want_warning);
	unlink(path);
}

/* A filesystem (`mkfs.btrfs -q -f ARGS`, 160 MiB, over old random data
 * when asked) holding make_tree(nfiles), and btrfs-progs' view of it. */
static bool make_filled(char path[static 40], const char *args, int nfiles, bool random,
			struct layout *l)
{
	char *dir;
	bool ok;

	if (!have_btrfs_progs())
		return false;
	dir = make_tree(nfiles);
	ok = make_fs(path, args, 160 * MiB, dir, random) && read_layout(path, l);
	CHECK(remove_tree(dir));
	return ok;
}

/* ---- real filesystems ---- */

static void test_profiles(void)
{
	char *dir;

	if (!have_btrfs_progs())
		return;
	dir = make_tree(40);
	check_mkfs("", 160 * MiB, dir, true, false);                  /* metadata DUP, data single */
	check_mkfs("-m single -d single", 160 * MiB, dir, true, false);
	check_mkfs("-m dup -d dup", 160 * MiB, dir, true, false);
	CHECK(remove_tree(dir));
}

static void test_empty(void)
{
	check_mkfs("", 128 * MiB, NULL, false, false);
	check_mkfs("-m single -d single", 128 * MiB, NULL, false, false);
}

static void test_variants(void)
{
	char *dir;

	if (!have_btrfs_progs())
		return;
	dir = make_tree(20);
	check_mkfs("-O ^skinny-metadata", 160 * MiB, dir, false, false);  /* EXTENT_ITEM tree blocks */
	check_mkfs("-M", 160 * MiB, dir, false, false);                   /* mixed block groups */
	check_mkfs("-m raid0 -d raid0", 200 * MiB, dir, false, false);     /* one stripe: as single */
	check_mkfs("-R quota", 160 * MiB, dir, false, false);              /* a quota tree */
	check_mkfs("-R ^free-space-tree -O ^no-holes", 160 * MiB, dir, false, false);
	check_mkfs("-n 4096", 160 * MiB, dir, false, false);
	check_mkfs("-n 65536", 160 * MiB, dir, false, false);
	check_mkfs("-s 65536 -n 65536", 200 * MiB, dir, false, false);  /* 64 KiB blocks */
	check_mkfs("--csum xxhash", 160 * MiB, dir, false, false);        /* verified */
	check_mkfs("--csum sha256", 160 * MiB, dir, false, true);         /* not verified: said */
	check_mkfs("--csum blake2", 160 * MiB, dir, false, true);
	CHECK(remove_tree(dir));
}

/* Deep trees (4 KiB nodes, many extents): nodes above the leaves. */
static void test_deep_trees(void)
{
	char *dir;

	if (!have_btrfs_progs())
		return;
	dir = make_tree(1500);
	check_mkfs("-n 4096", 160 * MiB, dir, false, false);
	CHECK(remove_tree(dir));
}

/* 300 GiB (sparse): the third superblock copy at 256 GiB is inside and
 * kept; examining reads only metadata and is quick. */
static void test_large(void)
{
	char path[40];
	struct fs_info info;
	struct im_err err;
	double s;
	int r;

	if (!have_btrfs_progs() || !make_fs(path, "", 300 * GiB, NULL, false))
		return;
	r = examine_timed(&fs_plugin_btrfs, path, "300 GiB btrfs", &info, &err, &s);
	CHECK(r == 0);
	if (r == 0) {
		CHECK(s < 2.0);
		CHECK(bitmap_test(&info.used, 256 * GiB / 4096));
		CHECK(bitmap_test(&info.used, 64 * MiB / 4096));
		fs_info_free(&info);
	}
	check_image(path, "300 GiB", false);
	unlink(path);
}

static void test_two_devices(void)
{
	char a[40], b[40], cmd[256];
	struct fs_info info;
	struct im_err err;
	int r;

	if (!have_btrfs_progs())
		return;
	CHECK(temp_file(a, "/tmp/test-btrfs-XXXXXX", 160 * MiB));
	CHECK(temp_file(b, "/tmp/test-btrfs-XXXXXX", 160 * MiB));
	snprintf(cmd, sizeof(cmd), "mkfs.btrfs -q -f %s %s >/dev/null 2>&1", a, b);
	CHECK(system(cmd) == 0);
	for (int i = 0; i < 2; i++) {
		r = examine(i ? b : a, false, &info, &err);
		CHECK(r == -ENOTSUP);
		CHECK_EQ_U(err.exit_class, IM_EXIT_UNSUPP);
		CHECK(strstr(err.msg, "2 devices") != NULL);
		if (i == 0)
			printf("# two devices: %s\n", err.msg);
		/* --force does not make one member a filesystem. */
		CHECK(examine(i ? b : a, true, &info, &err) == -ENOTSUP);
	}
	unlink(a);
	unlink(b);
}

/* ---- hostile superblocks ---- */

static void sign_block(unsigned char *b, size_t len, unsigned arg)
{
	(void)arg;
	sign(b, len);
}

/* The primary superblock, for examine_patched(). */
static const struct block_at superblock = { &fs_plugin_btrfs, SB, 4096, false, sign_block, 0 };

static void test_hostile_superblock(void)
{
	const struct field_case cases[] = {
		{ "bytenr elsewhere", 48, 8, 4096, -EINVAL },
		{ "sectorsize 0", 144, 4, 0, -EINVAL },
		{ "sectorsize 3000", 144, 4, 3000, -EINVAL },
		{ "sectorsize 1 MiB", 144, 4, 1u << 20, -EINVAL },
		{ "nodesize 2048", 148, 4, 2048, -EINVAL },
		{ "nodesize 128 KiB", 148, 4, 128u << 10, -EINVAL },
		{ "sys_chunk_array_size 4096", 160, 4, 4096, -EINVAL },
		{ "sys_chunk_array_size 0", 160, 4, 0, -EINVAL },
		{ "num_devices 0", 136, 8, 0, -EINVAL },
		{ "num_devices 2", 136, 8, 2, -ENOTSUP },
		{ "csum_type 9", 196, 2, 9, -EINVAL },
		{ "root_level 8", 198, 1, 8, -EINVAL },
		{ "chunk_root_level 200", 199, 1, 200, -EINVAL },
		{ "root 0", 80, 8, 0, -EINVAL },
		{ "root unaligned", 80, 8, 30605313, -EINVAL },
		{ "generation 0", 72, 8, 0, -EINVAL },
		{ "bytes_used > total", 120, 8, 1ull << 50, -EINVAL },
		{ "device bigger than the file", 201 + 8, 8, 1ull << 40, -EINVAL },
		{ "device 0 bytes", 201 + 8, 8, 0, -EINVAL },
		{ "extent-tree-v2", 188, 8, 0, -ENOTSUP },     /* values set below */
		{ "zoned", 188, 8, 0, -ENOTSUP },
		{ "raid-stripe-tree", 188, 8, 0, -ENOTSUP },
		{ "unknown incompat", 188, 8, 0, -ENOTSUP },
		{ "bytes_used + 4096", 120, 8, 0, -EUCLEAN },
		{ "root outside every chunk", 80, 8, 1ull << 45, -EUCLEAN },
		{ "chunk root outside every chunk", 88, 8, 1ull << 45, -EUCLEAN },
		{ "chunk root generation older", 164, 8, 0, -EUCLEAN },
		{ "root level 1 (is 0)", 198, 1, 1, -EUCLEAN },
		{ "devid 7", 201, 8, 7, -EUCLEAN },
		{ "error flag", 56, 8, 0, -EUCLEAN },
		{ "btrfstune interrupted", 56, 8, 0, -EUCLEAN },
		{ "sys chunk array: random", 811, 8, 0x1234567890ABCDEFull, -EUCLEAN },
		{ "sys chunk array: stripes 0xFFFF", 811 + 17 + 44, 2, 0xFFFF, -EUCLEAN },
		{ "sys chunk array: stripe offset huge", 811 + 17 + 48 + 8, 8, 1ull << 60, -EUCLEAN },
		{ "sys chunk array: RAID5", 811 + 17 + 24, 8, (1u << 1) | (1u << 7), -ENOTSUP },
		{ "sys chunk array: RAID1", 811 + 17 + 24, 8, (1u << 1) | (1u << 4), -ENOTSUP },
		{ "sys chunk array: length 0", 811 + 17, 8, 0, -EUCLEAN },
		{ "sys chunk array: stripe_len 4096", 811 + 17 + 16, 8, 4096, -EUCLEAN },
	};
	char path[40];
	struct fs_info info;
	struct im_err err;
	uint64_t incompat, flags, used, gen;

	if (!have_btrfs_progs() || !make_fs(path, "", 160 * MiB, NULL, false))
		return;
	incompat = read_le(path, SB + 188, 8);
	flags = read_le(path, SB + 56, 8);
	used = read_le(path, SB + 120, 8);
	gen = read_le(path, SB + 164, 8);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct field_case c = cases[i];
		int r;

		if (strcmp(c.what, "extent-tree-v2") == 0)
			c.val = incompat | (1u << 13);
		else if (strcmp(c.what, "zoned") == 0)
			c.val = incompat | (1u << 12);
		else if (strcmp(c.what, "raid-stripe-tree") == 0)
			c.val = incompat | (1u << 14);
		else if (strcmp(c.what, "unknown incompat") == 0)
			c.val = incompat | (1ull << 40);
		else if (strcmp(c.what, "bytes_used + 4096") == 0)
			c.val = used + 4096;
		else if (strcmp(c.what, "chunk root generation older") == 0)
			c.val = gen - 1;
		else if (strcmp(c.what, "error flag") == 0)
			c.val = flags | (1u << 2);
		else if (strcmp(c.what, "btrfstune interrupted") == 0)
			c.val = flags | (1ull << 35);
		r = examine_patched(path, &superblock, c.off, c.val, c.width, true, false, &info, &err);
		expect_result(c.what, r, c.want, &err, &info);
		/* Forced: an error of the same kind, or (-EUCLEAN) a save that
		 * keeps more than the extents, never a crash. */
		r = examine_patched(path, &superblock, c.off, c.val, c.width, true, true, &info, &err);
		if (c.want == -EUCLEAN) {
			CHECK(r == 0);
			if (r == 0) {
				CHECK(info.warning[0] != '\0');
				fs_info_free(&info);
			}
		} else {
			CHECK(r == c.want);
		}
	}
	check_image(path, "restored", false);
	unlink(path);
}

/* ---- unclean ---- */

static void test_unclean(void)
{
	char path[40];
	struct fs_info info;
	struct im_err err;
	struct layout l;
	struct bitmap all;
	uint64_t flags;
	int r;

	if (!make_filled(path, "", 10, true, &l))
		return;
	/* A log tree root in the superblock: what a power cut after fsync
	 * leaves. */
	r = examine_patched(path, &superblock, 96, l.root, 8, true, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
	CHECK(strstr(err.msg, "btrfs rescue zero-log") != NULL);
	CHECK(strstr(err.msg, "mount it once") != NULL);
	printf("# log tree: %s\n", err.msg);

	/* Forced: every allocated chunk is kept whole. */
	expected_map(&l, &all, true);
	r = examine_patched(path, &superblock, 96, l.root, 8, true, true, &info, &err);
	CHECK(r == 0);
	if (r == 0) {
		CHECK(strstr(info.warning, "log tree") != NULL);
		CHECK(strstr(info.warning, "every allocated chunk") != NULL);
		CHECK_EQ_U(info.used_blocks, bitmap_count(&all));
		compare_map(&info, &all, "log tree, forced");
		fs_info_free(&info);
	}

	flags = read_le(path, SB + 56, 8);
	r = examine_patched(path, &superblock, 56, flags | 4, 8, true, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, "btrfs check") != NULL);
	r = examine_patched(path, &superblock, 56, flags | 4, 8, true, true, &info, &err);
	CHECK(r == 0);
	if (r == 0) {
		CHECK_EQ_U(info.used_blocks, bitmap_count(&all));
		fs_info_free(&info);
	}

	/* bytes_used disagreeing with the extent tree. */
	r = examine_patched(path, &superblock, 120, l.bytes_used - 4096, 8, true, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, "bytes") != NULL);
	r = examine_patched(path, &superblock, 120, l.bytes_used - 4096, 8, true, true, &info, &err);
	CHECK(r == 0);
	if (r == 0) {
		CHECK(strstr(info.warning, "every allocated chunk") != NULL);
		CHECK_EQ_U(info.used_blocks, bitmap_count(&all));
		fs_info_free(&info);
	}
	bitmap_free(&all);
	free_layout(&l);
	unlink(path);
}

static void test_bad_checksum(void)
{
	char path[40];

	if (!have_btrfs_progs() || !make_fs(path, "", 160 * MiB, NULL, false))
		return;
	/* The label changes, the checksum does not. */
	expect_unclean(path, &superblock, 299, 0x41, 1, false, "checksum", "checksum");

	/* Through the registry: a good superblock is btrfs's, a bad one is
	 * turned down by probe() and copied raw. */
	for (int bad = 0; bad < 2; bad++) {
		unsigned char orig[4096], sb[4096];
		read_at(path, SB, orig, sizeof(orig));
		memcpy(sb, orig, sizeof(sb));
		if (bad)
			sb[299] ^= 1;
		write_at(path, SB, sb, sizeof(sb));
		expect_plugin(path, bad ? &fs_plugin_raw : &fs_plugin_btrfs, NULL);
		write_at(path, SB, orig, sizeof(orig));
	}
	unlink(path);
}

/* The filesystem claims more than the device holds. */
static void test_device_too_small(void)
{
	char path[40];
	struct fs_info info;
	struct im_err err;

	if (!have_btrfs_progs() || !make_fs(path, "", 160 * MiB, NULL, false))
		return;
	CHECK(examine_path_size(&fs_plugin_btrfs, path, 100 * MiB, false, &info, &err) == -EINVAL);
	CHECK(strstr(err.msg, "partition") != NULL);
	CHECK(examine_path_size(&fs_plugin_btrfs, path, 65536 + 100, false, &info, &err) < 0);
	CHECK(examine_path_size(&fs_plugin_btrfs, path, 4096, false, &info, &err) < 0);
	unlink(path);
}

/* ---- damaged and hostile tree blocks ---- */

/* Save the copies of the tree block at logical, so they can be put back. */
struct saved_block {
	int n;
	uint64_t off[4];
	unsigned char *orig[4];
	size_t len;
};

static void save_block(const char *path, const struct layout *l, uint64_t logical,
		       struct saved_block *s)
{
	s->n = copies_of(l, logical, s->off);
	s->len = l->nodesize;
	for (int i = 0; i < s->n; i++) {
		s->orig[i] = malloc(s->len);
		read_at(path, s->off[i], s->orig[i], s->len);
	}
}

static void restore_block(const char *path, struct saved_block *s)
{
	for (int i = 0; i < s->n; i++) {
		write_at(path, s->off[i], s->orig[i], s->len);
		free(s->orig[i]);
	}
	s->n = 0;
}

/* Write buf (a changed copy of the block, re-signed when asked) over the
 * first `copies` copies. */
static void put_block(const char *path, const struct saved_block *s, unsigned char *buf,
		      int copies, bool resign)
{
	if (resign)
		sign(buf, s->len);
	for (int i = 0; i < copies && i < s->n; i++)
		write_at(path, s->off[i], buf, s->len);
}

/* An image to damage: btrfs-progs' view of it, the extent tree root's
 * copies saved, and a buffer of one node. */
struct damage {
	char path[40];
	struct layout l;
	struct saved_block s;
	unsigned char *buf;
};

static bool damage_setup(struct damage *d, const char *args, int nfiles)
{
	if (!make_filled(d->path, args, nfiles, false, &d->l))
		return false;
	d->buf = malloc(d->l.nodesize);
	save_block(d->path, &d->l, d->l.extent_root, &d->s);
	return true;
}

/* The saved block put back, the image checked whole again, and all freed. */
static void put_back(struct damage *d, const char *what)
{
	restore_block(d->path, &d->s);
	check_image(d->path, what, false);
	free(d->buf);
	free_layout(&d->l);
	unlink(d->path);
}

static void test_damaged_block(void)
{
	struct damage d;
	struct fs_info info;
	struct im_err err;
	struct bitmap all;
	int r;

	if (!damage_setup(&d, "", 10))
		return;

	/* One copy of the extent tree root damaged (DUP): the other is read. */
	CHECK_EQ_U(d.s.n, 2);
	memcpy(d.buf, d.s.orig[0], d.l.nodesize);
	d.buf[200] ^= 0x55;
	put_block(d.path, &d.s, d.buf, 1, false);
	r = examine(d.path, false, &info, &err);
	CHECK(r == 0);
	if (r == 0) {
		CHECK(strstr(info.warning, "first copy") != NULL);
		fs_info_free(&info);
	}
	/* Both: not readable, unless forced (then every chunk is kept). */
	put_block(d.path, &d.s, d.buf, 2, false);
	r = examine(d.path, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, "checksum") != NULL);
	CHECK(strstr(err.msg, "btrfs check") != NULL);
	expected_map(&d.l, &all, true);
	r = examine(d.path, true, &info, &err);
	CHECK(r == 0);
	if (r == 0) {
		CHECK_EQ_U(info.used_blocks, bitmap_count(&all));
		fs_info_free(&info);
	}
	bitmap_free(&all);
	restore_block(d.path, &d.s);

	/* The chunk tree unreadable: forced, the whole device is kept. */
	save_block(d.path, &d.l, d.l.chunk_root, &d.s);
	memcpy(d.buf, d.s.orig[0], d.l.nodesize);
	d.buf[300] ^= 0x55;
	put_block(d.path, &d.s, d.buf, 2, false);
	r = examine(d.path, false, &info, &err);
	CHECK(r == -EUCLEAN);
	r = examine(d.path, true, &info, &err);
	CHECK(r == 0);
	if (r == 0) {
		CHECK_EQ_U(info.used_blocks, info.block_count);
		CHECK(strstr(info.warning, "whole device") != NULL);
		fs_info_free(&info);
	}
	put_back(&d, "restored");
}

struct block_case {
	const char *what;
	unsigned off, width;
	uint64_t val;        /* ~0 marks values computed below */
};

/* Changes to a leaf of the extent tree with its checksums made right, so
 * the structural checks must catch them. */
static void test_hostile_leaf(void)
{
	const struct block_case cases[] = {
		{ "nritems huge", 96, 4, 0xFFFFFFFF },
		{ "nritems 0", 96, 4, 0 },
		{ "level 1", 100, 1, 1 },
		{ "level 255", 100, 1, 255 },
		{ "bytenr elsewhere", 48, 8, 16384 },
		{ "owner 5", 88, 8, 5 },
		{ "generation in the future", 80, 8, 1ull << 40 },
		{ "fsid", 32, 8, 0x1122334455667788ull },
		/* The item fields below are relative to the first EXTENT_ITEM. */
		{ "item offset past the end", 17, 4, 0xFFFFFF00 },
		{ "item size huge", 21, 4, 0xFFFFFFFF },
		{ "item key before the one before it", 0, 8, 0 },
		{ "extent length + 4096", 9, 8, ~0ull },
		{ "extent at 1 PiB", 0, 8, 1ull << 50 },
		{ "extent length 0", 9, 8, 0 },
		{ "extent unaligned", 0, 8, ~0ull - 1 },
	};
	struct damage d;
	struct fs_info info;
	struct im_err err;
	unsigned ext_item;

	if (!damage_setup(&d, "-m single", 10))
		return;
	CHECK(d.s.orig[0][100] == 0);   /* a single leaf */
	/* The first EXTENT_ITEM, after at least one other item. */
	ext_item = 0;
	for (uint32_t i = 1; i < get_le(d.s.orig[0] + 96, 4); i++)
		if (d.s.orig[0][101 + i * 25 + 8] == 168) {
			ext_item = 101 + i * 25;
			break;
		}
	CHECK(ext_item != 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]) && ext_item; i++) {
		struct block_case c = cases[i];
		int r;

		if (c.off < 32)
			c.off += ext_item;
		memcpy(d.buf, d.s.orig[0], d.l.nodesize);
		if (c.val == ~0ull)
			c.val = get_le(d.buf + c.off, 8) + 4096;
		else if (c.val == ~0ull - 1)
			c.val = get_le(d.buf + c.off, 8) + 1;
		put_le(d.buf + c.off, c.val, c.width);
		put_block(d.path, &d.s, d.buf, d.s.n, true);
		r = examine(d.path, false, &info, &err);
		if (r != -EUCLEAN)
			fprintf(stderr, "  %s: got %d (%s)\n", c.what, r, err.msg);
		CHECK(r == -EUCLEAN);
		CHECK(err.msg[0] != '\0');
		r = examine(d.path, true, &info, &err);
		CHECK(r == 0);
		if (r == 0) {
			CHECK(info.warning[0] != '\0');
			fs_info_free(&info);
		}
	}
	put_back(&d, "restored");
}

/* A node of the extent tree (4 KiB nodes, many extents) pointing to
 * itself, twice to one child, or to a child of another generation. */
static void test_hostile_node(void)
{
	struct damage d;
	struct fs_info info;
	struct im_err err;
	uint32_t n;

	if (!damage_setup(&d, "-n 4096 -m single", 1500))
		return;
	CHECK(d.s.orig[0][100] >= 1);   /* a node */
	n = (uint32_t)get_le(d.s.orig[0] + 96, 4);
	CHECK(n >= 2);
	for (int k = 0; k < 4 && n >= 2; k++) {
		const unsigned ptr0 = 101, ptr1 = 101 + 33;
		int r;

		memcpy(d.buf, d.s.orig[0], d.l.nodesize);
		switch (k) {
		case 0:  /* to itself */
			put_le(d.buf + ptr1 + 17, d.l.extent_root, 8);
			break;
		case 1:  /* the second pointer to the first child, its key too */
			memcpy(d.buf + ptr1, d.buf + ptr0, 33);
			break;
		case 2:  /* the second pointer to the first child, its own key kept */
			memcpy(d.buf + ptr1 + 17, d.buf + ptr0 + 17, 16);
			break;
		case 3:  /* a child of another generation */
			put_le(d.buf + ptr0 + 25, get_le(d.buf + ptr0 + 25, 8) - 1, 8);
			break;
		}
		put_block(d.path, &d.s, d.buf, d.s.n, true);
		r = examine(d.path, false, &info, &err);
		if (r != -EUCLEAN)
			fprintf(stderr, "  node case %d: got %d (%s)\n", k, r, err.msg);
		CHECK(r == -EUCLEAN);
		r = examine(d.path, true, &info, &err);
		CHECK(r == 0);
		if (r == 0)
			fs_info_free(&info);
	}
	put_back(&d, "deep, restored");
}

/* Random damage to the superblock's system chunk array and to the chunk,
 * root and extent tree leaves, re-signed half the time so the deeper
 * checks are reached: never a crash (ASan/UBSan watch). */
static void test_fuzz(void)
{
	int iters = fuzz_rounds("TEST_BTRFS_FUZZ", 300);
	unsigned seed = 4242;
	char path[40];
	struct layout l;
	struct saved_block blocks[3];
	unsigned char sb_orig[4096], sb[4096], *buf;
	int ok = 0, failed = 0;

	if (!make_filled(path, "-m single", 10, false, &l))
		return;
	buf = malloc(l.nodesize);
	read_at(path, SB, sb_orig, sizeof(sb_orig));
	save_block(path, &l, l.chunk_root, &blocks[0]);
	save_block(path, &l, l.root, &blocks[1]);
	save_block(path, &l, l.extent_root, &blocks[2]);
	for (int it = 0; it < iters; it++) {
		int target = (int)(rand_r(&seed) % 4), n = 1 + (int)(rand_r(&seed) % 4);
		bool resign = rand_r(&seed) % 4 != 0;

		if (target == 3) {
			memcpy(sb, sb_orig, sizeof(sb));
			for (int j = 0; j < n; j++) {
				size_t at = rand_r(&seed) % 2 ? 811 + rand_r(&seed) % 200
							       : 64 + rand_r(&seed) % 200;
				sb[at] = fuzz_byte(&seed);
			}
			if (resign)
				sign(sb, sizeof(sb));
			write_at(path, SB, sb, sizeof(sb));
		} else {
			struct saved_block *s = &blocks[target];
			memcpy(buf, s->orig[0], l.nodesize);
			for (int j = 0; j < n; j++) {
				size_t at = rand_r(&seed) % 3 ? 32 + (size_t)rand_r(&seed) % 400
							       : 32 + rand_r(&seed) % (l.nodesize - 32);
				buf[at] = fuzz_byte(&seed);
			}
			put_block(path, s, buf, s->n, resign);
		}
		examine_fuzzed(&fs_plugin_btrfs, path, &seed, &ok, &failed);
		write_at(path, SB, sb_orig, sizeof(sb_orig));
		for (int b = 0; b < 3; b++)
			for (int i = 0; i < blocks[b].n; i++)
				write_at(path, blocks[b].off[i], blocks[b].orig[i], l.nodesize);
	}
	for (int b = 0; b < 3; b++)
		restore_block(path, &blocks[b]);
	printf("# fuzz: %d saved, %d refused\n", ok, failed);
	CHECK(ok > 0 && failed > 0);
	check_image(path, "after fuzzing", false);
	free(buf);
	free_layout(&l);
	unlink(path);
}

UNIT_MAIN(UNIT(test_profiles), UNIT(test_empty), UNIT(test_variants), UNIT(test_deep_trees),
	  UNIT(test_large), UNIT(test_two_devices), UNIT(test_hostile_superblock),
	  UNIT(test_unclean), UNIT(test_bad_checksum), UNIT(test_device_too_small),
	  UNIT(test_damaged_block), UNIT(test_hostile_leaf), UNIT(test_hostile_node),
	  UNIT(test_fuzz))
