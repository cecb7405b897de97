/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The FAT plugin on real filesystems made by mkfs.fat and filled by mtools.
 * The expected used-sector count comes from fsck.fat -v (data area start,
 * used clusters) and is cross-checked with mdir's free bytes; a copy holding
 * only the sectors the bitmap marks must pass fsck.fat and give the files
 * back byte for byte.  Needs dosfstools and mtools.
 */
#include "unit-fs.h"

extern const struct fs_plugin fs_plugin_fat;

static char tmpdir[64];

/* The tools (not a skip: these are in `make deps`, and a missing tool must
 * not look like a pass) and a temporary folder; checked. */
static bool setup_dir(void)
{
	if (!setup_tmpdir(tmpdir, sizeof(tmpdir), "mkfs.fat fsck.fat mcopy mdir mmd mdel",
			  "dosfstools (mkfs.fat, fsck.fat) and mtools", "/tmp/imager-test-fat-XXXXXX"))
		return false;
	setenv("MTOOLS_SKIP_CHECK", "1", 1);
	return true;
}

static void cleanup_dir(void)
{
	remove_tmpdir(tmpdir);
}

static int examine(const char *path, bool force, bool with_plugin,
		   struct fs_info *info, struct im_err *err)
{
	return examine_path(with_plugin ? &fs_plugin_fat : NULL, path, force, info, err);
}

/* ---- what dosfstools and mtools say about an image ---- */

struct fat_facts {
	int fsck_status;
	uint64_t sector_size;
	uint64_t cluster_bytes;
	uint64_t data_sector;       /* first sector of the data area */
	uint64_t total_sectors;
	uint64_t used_clusters;
	uint64_t data_clusters;
	uint64_t mdir_free_bytes;
};

static bool get_facts(const char *img, struct fat_facts *f)
{
	static char out[1 << 16];
	uint64_t data_byte = 0;
	bool have_summary = false;
	char *line, *save = NULL;

	memset(f, 0, sizeof(*f));
	f->fsck_status = sh_out(out, sizeof(out), "fsck.fat -n -v %s", img);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long a, b;
		const char *p;

		/* (sscanf cannot tell whether literal text after the last
		 * conversion matched, hence strstr first.) */
		if (strstr(line, " bytes per logical sector") && sscanf(line, "%llu", &a) == 1)
			f->sector_size = a;
		else if (strstr(line, " bytes per cluster") && sscanf(line, "%llu", &a) == 1)
			f->cluster_bytes = a;
		else if (sscanf(line, "Data area starts at byte %llu", &a) == 1)
			data_byte = a;
		else if (strstr(line, " sectors total") && sscanf(line, "%llu", &a) == 1)
			f->total_sectors = a;
		else if ((p = strstr(line, " files, ")) &&
			 sscanf(p, " files, %llu/%llu clusters", &a, &b) == 2) {
			f->used_clusters = a;
			f->data_clusters = b;
			have_summary = true;
		}
	}
	if (!f->sector_size || !f->cluster_bytes || !data_byte || !have_summary) {
		fprintf(stderr, "  cannot parse fsck.fat -v output for %s\n", img);
		return false;
	}
	f->data_sector = data_byte / f->sector_size;

	/* mdir's last line: "   16 726 016 bytes free" */
	sh_out(out, sizeof(out), "mdir -i %s ::", img);
	line = strstr(out, "bytes free");
	if (!line)
		return false;
	while (line > out && line[-1] != '\n')
		line--;
	for (; *line && *line != 'b'; line++)
		if (*line >= '0' && *line <= '9')
			f->mdir_free_bytes = f->mdir_free_bytes * 10 + (uint64_t)(*line - '0');
	return true;
}

static uint64_t expected_used(const struct fat_facts *f)
{
	return f->data_sector + f->used_clusters * (f->cluster_bytes / f->sector_size);
}

/* ---- building images ---- */

/* mkfs.fat on a sparse file of `mib` MiB with extra options. */
static bool make_fat(const char *img, unsigned mib, const char *mkfs_opts)
{
	return sh("truncate -s %uM %s && mkfs.fat %s %s >/dev/null 2>&1",
		  mib, img, mkfs_opts, img) == 0;
}

static bool write_src(const char *name, size_t len, uint32_t seed)
{
	char path[160];

	snprintf(path, sizeof(path), "%s/src/%s", tmpdir, name);
	return write_random_file(path, len, seed);
}

/* Several files, two directory levels, a directory grown past one cluster,
 * and two files deleted after copying so the used clusters have holes. */
static bool populate(const char *img)
{
	bool ok = true;

	if (sh("rm -rf %s/src && mkdir -p %s/src", tmpdir, tmpdir) != 0)
		return false;
	ok &= write_src("a", 100000, 1);
	ok &= write_src("b", 300001, 2);
	ok &= write_src("c", 5000, 3);
	ok &= write_src("d", 1048576, 4);
	ok &= write_src("e", 70000, 5);
	for (unsigned i = 0; i < 40; i++) {
		char name[32];
		snprintf(name, sizeof(name), "small%02u.txt", i);
		ok &= write_src(name, 700 + 37 * i, 100 + i);
	}
	if (!ok)
		return false;
	return sh("mmd -i %s ::/sub ::/sub/deep", img) == 0 &&
	       sh("mcopy -i %s %s/src/a ::/a", img, tmpdir) == 0 &&
	       sh("mcopy -i %s %s/src/b ::/sub/b", img, tmpdir) == 0 &&
	       sh("mcopy -i %s %s/src/e ::/e", img, tmpdir) == 0 &&
	       sh("mcopy -i %s %s/src/c ::/sub/deep/c", img, tmpdir) == 0 &&
	       sh("mcopy -i %s %s/src/small*.txt ::/sub", img, tmpdir) == 0 &&
	       sh("mcopy -i %s %s/src/d ::/d", img, tmpdir) == 0 &&
	       sh("mdel -i %s ::/a ::/e", img) == 0;
}

/* fsck.fat finds the copy clean and the files come back identical. */
static bool round_trip_ok(const char *img, const struct fs_info *info, bool drop_last_run)
{
	char copy[128];

	snprintf(copy, sizeof(copy), "%s/copy.img", tmpdir);
	sh("rm -rf %s/out && mkdir %s/out", tmpdir, tmpdir);
	return copy_used(img, info, copy, drop_last_run) &&
	       sh("fsck.fat -n %s >/dev/null 2>&1", copy) == 0 &&
	       sh("mcopy -n -i %s ::/sub/b ::/d ::/sub/deep/c ::/sub/small39.txt %s/out/ "
		  ">/dev/null 2>&1", copy, tmpdir) == 0 &&
	       sh("cd %s && cmp -s out/b src/b && cmp -s out/d src/d && cmp -s out/c src/c && "
		  "cmp -s out/small39.txt src/small39.txt", tmpdir) == 0;
}

/* The full check of one populated image. */
static void check_populated(const char *mkfs_opts, unsigned mib)
{
	char img[128];
	struct fat_facts f;
	struct fs_info info;
	struct im_err err;
	int r;

	if (!setup_dir())
		return;
	snprintf(img, sizeof(img), "%s/fat.img", tmpdir);
	CHECK(make_fat(img, mib, mkfs_opts));
	CHECK(populate(img));
	if (!get_facts(img, &f)) {
		CHECK(!"fsck.fat and mdir facts");
		cleanup_dir();
		return;
	}
	CHECK_EQ_U(f.fsck_status, 0);
	CHECK(f.used_clusters > 5);
	/* mdir agrees with fsck.fat on the number of used clusters. */
	CHECK_EQ_U(f.data_clusters - f.mdir_free_bytes / f.cluster_bytes, f.used_clusters);

	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, 0);
	if (r == 0) {
		CHECK_EQ_U(info.block_size, f.sector_size);
		CHECK_EQ_U(info.block_count, f.total_sectors);
		CHECK_EQ_U(info.used_blocks, expected_used(&f));
		CHECK(info.used_blocks < info.block_count);
		if (info.warning[0]) {
			fprintf(stderr, "  unexpected warning: %s\n", info.warning);
			CHECK(!info.warning[0]);
		}
		/* Round trip through only the marked sectors; without the
		 * last run of them it must fail, so the check has teeth. */
		CHECK(round_trip_ok(img, &info, false));
		CHECK(!round_trip_ok(img, &info, true));
	}
	fs_info_free(&info);

	/* libblkid and the registry pick this plugin. */
	r = examine(img, false, false, &info, &err);
	CHECK_EQ_U(r, 0);
	CHECK(info.plugin == &fs_plugin_fat);
	CHECK_STR(info.type, "vfat");
	fs_info_free(&info);
	cleanup_dir();
}

static void test_fat12(void) { check_populated("-F 12", 4); }
static void test_fat16(void) { check_populated("-F 16", 32); }
static void test_fat32(void) { check_populated("-F 32", 64); }
static void test_fat16_4k_sectors(void) { check_populated("-F 16 -S 4096", 64); }

/* mkfs.fat -F 32 on a small volume: fewer clusters than FAT32 should have.
 * mtools reads it as FAT16 and cannot fill it, so only fsck.fat checks. */
static void test_fat32_few_clusters(void)
{
	char img[128], copy[128];
	struct fat_facts f = { 0 };
	struct fs_info info;
	struct im_err err;
	int r;

	if (!setup_dir())
		return;
	snprintf(img, sizeof(img), "%s/fat.img", tmpdir);
	snprintf(copy, sizeof(copy), "%s/copy.img", tmpdir);
	CHECK(make_fat(img, 64, "-F 32 -s 8"));
	get_facts(img, &f);   /* mdir fails on it; fsck.fat's part is enough */
	CHECK(f.data_clusters > 0 && f.data_clusters < 65525);
	CHECK_EQ_U(f.used_clusters, 1);   /* the root directory */
	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, 0);
	if (r == 0 && f.sector_size) {
		CHECK_EQ_U(info.used_blocks, expected_used(&f));
		CHECK(strstr(info.warning, "FAT32 with only") != NULL);
		CHECK(copy_used(img, &info, copy, false));
		CHECK_EQ_U(sh("fsck.fat -n %s >/dev/null 2>&1", copy), 0);
	}
	fs_info_free(&info);
	cleanup_dir();
}

/* ---- hostile boot sectors ---- */

/* A boot sector field to damage (len little-endian bytes of v at off), and
 * the refusal it must get. */
struct refusal {
	const char *what;
	uint64_t off;
	size_t len;
	uint32_t v;
	int code, exit_class;
};

/* Copy base, apply the case, and expect the plugin to refuse it with its
 * code, and fs_examine() to fall back to raw. */
static void check_refused(const char *base, const struct refusal *c)
{
	char img[128];
	struct fs_info info;
	struct im_err err;
	int r, before = unit_failures;

	snprintf(img, sizeof(img), "%s/hostile.img", tmpdir);
	copy_patched(base, img, c->off, c->len, c->v);
	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, c->code);
	CHECK_EQ_U(err.exit_class, c->exit_class);
	CHECK(err.msg[0] != '\0');
	fs_info_free(&info);
	/* Chosen by libblkid or by the magics, probe() turns a corrupt one
	 * down (raw copy) and lets open() explain an unsupported one. */
	expect_registry(img, c->code == -ENOTSUP ? c->code : 0, &fs_plugin_raw);
	say_case(before, c->what, &err);
}

static void check_refusals(const char *base, const struct refusal *cases, size_t n)
{
	for (size_t i = 0; i < n; i++)
		check_refused(base, &cases[i]);
}

static const struct refusal fat16_refusals[] = {
	{ "bytes per sector 3", 11, 2, 3, -EINVAL, IM_EXIT_SOURCE },
	{ "bytes per sector 8192", 11, 2, 8192, -EINVAL, IM_EXIT_SOURCE },
	{ "bytes per sector 0", 11, 2, 0, -EINVAL, IM_EXIT_SOURCE },
	{ "sectors per cluster 0", 13, 1, 0, -EINVAL, IM_EXIT_SOURCE },
	{ "sectors per cluster 3", 13, 1, 3, -EINVAL, IM_EXIT_SOURCE },
	{ "reserved sectors 0", 14, 2, 0, -EINVAL, IM_EXIT_SOURCE },
	{ "num fats 0", 16, 1, 0, -EINVAL, IM_EXIT_SOURCE },
	{ "num fats 9", 16, 1, 9, -EINVAL, IM_EXIT_SOURCE },
	{ "media 0", 21, 1, 0, -EINVAL, IM_EXIT_SOURCE },
	{ "FAT size 0", 22, 2, 0, -EINVAL, IM_EXIT_SOURCE },
	{ "FAT size 1", 22, 2, 1, -EINVAL, IM_EXIT_SOURCE },
	{ "FAT size 65535", 22, 2, 0xFFFF, -EINVAL, IM_EXIT_SOURCE },
	{ "total sectors 0xFFFF > file", 19, 2, 0xFFFF, -EINVAL, IM_EXIT_SOURCE },
	{ "1 sector per cluster: FAT too small", 13, 1, 1, -EINVAL, IM_EXIT_SOURCE },
};

/* With the 16-bit total cleared, the 32-bit one. */
static const struct refusal fat16_total32_refusals[] = {
	{ "total sectors 0", 32, 4, 0, -EINVAL, IM_EXIT_SOURCE },
	{ "total sectors 2^20 > file", 32, 4, 1u << 20, -EINVAL, IM_EXIT_SOURCE },
	{ "total sectors 2^32-1", 32, 4, 0xFFFFFFFFu, -EINVAL, IM_EXIT_SOURCE },
};

static const struct refusal fat12_root_refusal = {
	"root entries 65535", 17, 2, 0xFFFF, -EINVAL, IM_EXIT_SOURCE
};

static const struct refusal fat32_refusals[] = {
	{ "FAT32 size 0", 36, 4, 0, -EINVAL, IM_EXIT_SOURCE },
	{ "FAT32 size 1", 36, 4, 1, -EINVAL, IM_EXIT_SOURCE },
	{ "FAT32 size 2^31", 36, 4, 0x80000000u, -EINVAL, IM_EXIT_SOURCE },
	{ "FAT32 root cluster 0", 44, 4, 0, -EINVAL, IM_EXIT_SOURCE },
	{ "FAT32 root cluster past the end", 44, 4, 0x0FFFFFF0u, -EINVAL, IM_EXIT_SOURCE },
	{ "FAT32 active FAT 5 of 2", 40, 2, 0x85, -EINVAL, IM_EXIT_SOURCE },
	{ "FAT32 with root entries", 17, 2, 512, -EINVAL, IM_EXIT_SOURCE },
	{ "FAT32 version 1.0", 42, 2, 0x0100, -ENOTSUP, IM_EXIT_UNSUPP },
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void test_hostile_fat16(void)
{
	char base[128], img[128];
	struct fs_info info;
	struct im_err err;
	int r;

	if (!setup_dir())
		return;
	snprintf(base, sizeof(base), "%s/base.img", tmpdir);
	CHECK(make_fat(base, 16, "-F 16"));
	/* The untouched base is accepted, so the refusals below are the
	 * patches' doing. */
	CHECK_EQ_U(examine(base, false, true, &info, &err), 0);
	fs_info_free(&info);

	check_refusals(base, fat16_refusals, N_OF(fat16_refusals));
	/* 32-bit total: clear the 16-bit one first. */
	snprintf(img, sizeof(img), "%s/base32.img", tmpdir);
	copy_patched(base, img, 19, 2, 0);
	check_refusals(img, fat16_total32_refusals, N_OF(fat16_total32_refusals));

	/* The file itself shorter than the filesystem. */
	CHECK_EQ_U(sh("cp --sparse=always %s %s && truncate -s 8M %s", base, img, img), 0);
	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, -EINVAL);
	CHECK(strstr(err.msg, "do not fit") != NULL);
	fs_info_free(&info);

	/* A root directory that does not fit in a 1 MiB FAT12. */
	snprintf(img, sizeof(img), "%s/small12.img", tmpdir);
	CHECK(make_fat(img, 1, "-F 12"));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	fs_info_free(&info);
	check_refused(img, &fat12_root_refusal);

	/* Nothing but zeros, and a file too small for any FAT. */
	CHECK_EQ_U(sh("rm -f %s && truncate -s 1M %s", img, img), 0);
	CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
	fs_info_free(&info);
	CHECK_EQ_U(sh("truncate -s 1000 %s", img), 0);
	CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
	fs_info_free(&info);

	/* An MBR's 0x55AA alone does not make a FAT: probe() says no. */
	CHECK_EQ_U(sh("rm -f %s && truncate -s 1M %s", img, img), 0);
	CHECK(write_at(img, 510, "\x55\xAA", 2));
	CHECK(write_at(img, 0, "\xFA\x33\xC0\x8E\xD0\xBC\x00\x7C\x8B\xF4\x50\x07\x50\x1F\xFB\xFC", 16));
	CHECK_EQ_U(examine(img, false, false, &info, &err), 0);
	CHECK(info.plugin == &fs_plugin_raw);
	fs_info_free(&info);
	cleanup_dir();
}

static void test_hostile_fat32(void)
{
	char base[128];
	struct fs_info info;
	struct im_err err;

	if (!setup_dir())
		return;
	snprintf(base, sizeof(base), "%s/base.img", tmpdir);
	CHECK(make_fat(base, 64, "-F 32"));
	CHECK_EQ_U(examine(base, false, true, &info, &err), 0);
	fs_info_free(&info);

	check_refusals(base, fat32_refusals, N_OF(fat32_refusals));
	cleanup_dir();
}

/* ---- unclean filesystems ---- */

/* A byte to change (len little-endian bytes of v at off, from the first
 * FAT when in_fat, else from the boot sector), and whether it makes the
 * filesystem dirty. */
struct dirty_case {
	const char *what;
	bool in_fat;
	uint64_t off;
	size_t len;
	uint32_t v;
	bool dirty;
};

/* Patch, expect -EUCLEAN (exit class FSCK), then success when forced with
 * the same used count as the clean image and a warning. */
static void check_dirty(const char *base, const char *what, uint64_t off,
			size_t len, uint32_t v, bool expect_dirty)
{
	char img[128];
	struct fs_info info;
	struct im_err err;
	uint64_t clean_used;
	int r, before = unit_failures;

	r = examine(base, false, true, &info, &err);
	CHECK_EQ_U(r, 0);
	clean_used = info.used_blocks;
	fs_info_free(&info);

	snprintf(img, sizeof(img), "%s/dirty.img", tmpdir);
	copy_patched(base, img, off, len, v);
	r = examine(img, false, true, &info, &err);
	if (expect_dirty) {
		CHECK_EQ_U(r, -EUCLEAN);
		CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
		CHECK(strstr(err.msg, "fsck") != NULL);
	} else {
		CHECK_EQ_U(r, 0);
	}
	fs_info_free(&info);

	r = examine(img, true, true, &info, &err);
	CHECK_EQ_U(r, 0);
	CHECK_EQ_U(info.used_blocks, clean_used);
	if (expect_dirty)
		CHECK(strstr(info.warning, "forced") != NULL);
	fs_info_free(&info);
	say_case(before, what, &err);
}

/* Byte offset of the first FAT: reserved sectors times bytes per sector. */
static uint64_t first_fat_offset(const char *img)
{
	unsigned char b[5] = { 0 };

	if (!read_at(img, 11, b, sizeof(b)))
		return 0;
	return (uint64_t)(b[0] | b[1] << 8) * (uint64_t)(b[3] | b[4] << 8);
}

/* A new filesystem (name, mib MiB, mkfs.fat options) and each case on it. */
static void check_dirty_all(const char *name, unsigned mib, const char *opts,
			    const struct dirty_case *cases, size_t n)
{
	char img[128];
	uint64_t fat0;

	snprintf(img, sizeof(img), "%s/%s", tmpdir, name);
	CHECK(make_fat(img, mib, opts));
	fat0 = first_fat_offset(img);
	CHECK(fat0 >= 512);
	for (size_t i = 0; i < n; i++)
		check_dirty(img, cases[i].what, (cases[i].in_fat ? fat0 : 0) + cases[i].off,
			    cases[i].len, cases[i].v, cases[i].dirty);
}

static const struct dirty_case fat12_dirty[] = {
	{ "FAT12 state byte", false, 0x25, 1, 0x01, true },
	/* FAT12 has no clean-shutdown bit: FAT[1] is left alone. */
	{ "FAT12 FAT[1]", true, 1, 2, 0x000F, false },
};

static const struct dirty_case fat16_dirty[] = {
	{ "FAT16 state byte", false, 0x25, 1, 0x01, true },
	{ "FAT16 FAT[1] bit 15", true, 2, 2, 0x7FFF, true },
	{ "FAT16 FAT[1] bit 14 only", true, 2, 2, 0xBFFF, false },
	/* On FAT12/16, 0x41 (the FAT32 state byte) is boot code. */
	{ "FAT16 byte 0x41", false, 0x41, 1, 0xFF, false },
};

static const struct dirty_case fat32_dirty[] = {
	{ "FAT32 state byte", false, 0x41, 1, 0x01, true },
	{ "FAT32 FAT[1] bit 27", true, 4, 4, 0x07FFFFFF, true },
};

static void test_dirty(void)
{
	if (!setup_dir())
		return;
	check_dirty_all("fat12.img", 4, "-F 12", fat12_dirty, N_OF(fat12_dirty));
	check_dirty_all("fat16.img", 32, "-F 16", fat16_dirty, N_OF(fat16_dirty));
	check_dirty_all("fat32.img", 64, "-F 32", fat32_dirty, N_OF(fat32_dirty));
	cleanup_dir();
}

/* ---- FSInfo ---- */

static void test_fsinfo(void)
{
	char img[128];
	struct fs_info info;
	struct im_err err;

	if (!setup_dir())
		return;
	snprintf(img, sizeof(img), "%s/fat32.img", tmpdir);
	CHECK(make_fat(img, 64, "-F 32"));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK_STR(info.warning, "");
	fs_info_free(&info);

	/* Stale: a warning, never a refusal. */
	CHECK(patch_le(img, 512 + 488, 4, 12345));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK(strstr(info.warning, "FSInfo") != NULL);
	fs_info_free(&info);

	/* Unknown (0xFFFFFFFF): nothing to compare. */
	CHECK(patch_le(img, 512 + 488, 4, 0xFFFFFFFFu));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK_STR(info.warning, "");
	fs_info_free(&info);
	cleanup_dir();
}

/* ---- a FAT larger than FS_MAP_MAX, read in pieces ---- */

static void test_big_fat32(void)
{
	char img[128];
	unsigned char bpb[48];
	struct fat_facts f;
	struct fs_info info;
	struct im_err err;
	uint64_t fat0, fat_bytes, last, entries_per_piece = (3u << 20) / 4;
	int r;

	if (!setup_dir())
		return;
	snprintf(img, sizeof(img), "%s/big.img", tmpdir);
	CHECK(make_fat(img, 9 * 1024, "-F 32 -s 1"));
	if (!get_facts(img, &f)) {
		CHECK(!"fsck.fat and mdir facts");
		cleanup_dir();
		return;
	}
	CHECK(read_at(img, 0, bpb, sizeof(bpb)));
	fat0 = (uint64_t)(bpb[14] | bpb[15] << 8) * (uint64_t)(bpb[11] | bpb[12] << 8);
	fat_bytes = ((uint64_t)bpb[36] | (uint64_t)bpb[37] << 8 |
		     (uint64_t)bpb[38] << 16 | (uint64_t)bpb[39] << 24) * f.sector_size;
	CHECK(fat_bytes > FS_MAP_MAX);
	last = f.data_clusters + 1;
	CHECK((last + 2) * 4 <= fat_bytes);

	/* A chain across the boundary between two pieces, the last cluster,
	 * a bad cluster (no data), an entry that is free once its reserved
	 * top bits are masked, and an entry past the last cluster. */
	for (uint64_t c = entries_per_piece - 2; c < entries_per_piece + 2; c++)
		CHECK(patch_le(img, fat0 + 4 * c, 4, (uint32_t)c + 1));
	CHECK(patch_le(img, fat0 + 4 * (entries_per_piece + 2), 4, 0x0FFFFFFF));
	CHECK(patch_le(img, fat0 + 4 * last, 4, 0x0FFFFFF8));
	CHECK(patch_le(img, fat0 + 4 * (entries_per_piece + 10), 4, 0x0FFFFFF7));
	CHECK(patch_le(img, fat0 + 4 * (entries_per_piece + 20), 4, 0xF0000000u));
	CHECK(patch_le(img, fat0 + 4 * (last + 1), 4, 0x0FFFFFFF));

	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, 0);
	if (r == 0) {
		CHECK_EQ_U(info.block_count, f.total_sectors);
		CHECK_EQ_U(info.used_blocks, f.data_sector + f.used_clusters + 6);
		/* One sector per cluster: cluster c is sector data + c - 2. */
#define CLUSTER_USED(c) bitmap_test(&info.used, f.data_sector + (c) - 2)
		for (uint64_t c = entries_per_piece - 2; c <= entries_per_piece + 2; c++)
			CHECK(CLUSTER_USED(c));
		CHECK(!CLUSTER_USED(entries_per_piece - 3));
		CHECK(!CLUSTER_USED(entries_per_piece + 3));
		CHECK(CLUSTER_USED(last));
		CHECK(!CLUSTER_USED(last - 1));
		CHECK(!CLUSTER_USED(entries_per_piece + 10));
		CHECK(!CLUSTER_USED(entries_per_piece + 20));
#undef CLUSTER_USED
		/* mkfs.fat's FSInfo count no longer matches. */
		CHECK(strstr(info.warning, "FSInfo") != NULL);
	}
	fs_info_free(&info);
	cleanup_dir();
}

UNIT_MAIN(UNIT(test_fat12), UNIT(test_fat16), UNIT(test_fat32),
	  UNIT(test_fat16_4k_sectors), UNIT(test_fat32_few_clusters),
	  UNIT(test_hostile_fat16), UNIT(test_hostile_fat32), UNIT(test_dirty),
	  UNIT(test_fsinfo), UNIT(test_big_fat32))
