/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The FAT plugin on real filesystems made by mkfs.fat and filled by mtools.
 * The expected used-sector count comes from fsck.fat -v (data area start,
 * used clusters) and is cross-checked with mdir's free bytes; a copy holding
 * only the sectors the bitmap marks must pass fsck.fat and give the files
 * back byte for byte.  Needs dosfstools and mtools.
 */
#include "unit.h"
#include "imager/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

extern const struct fs_plugin fs_plugin_fat;

/* ---- shell and file helpers ---- */

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Run a command and keep its output (stdout and stderr). */
static int sh_out(char *out, size_t outlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int sh_out(char *out, size_t outlen, const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	FILE *f;
	size_t n;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(out, 1, outlen - 1, f);
	out[n] = '\0';
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static char tmpdir[64];

static bool setup_dir(void)
{
	/* Not a skip: these are in `make deps`, and a missing tool must not
	 * look like a pass. */
	if (sh("{ command -v mkfs.fat && command -v fsck.fat && command -v mcopy && "
	       "command -v mdir && command -v mmd && command -v mdel; } >/dev/null 2>&1") != 0) {
		fprintf(stderr, "  needs dosfstools (mkfs.fat, fsck.fat) and mtools\n");
		return false;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/imager-test-fat-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		tmpdir[0] = '\0';
		return false;
	}
	setenv("MTOOLS_SKIP_CHECK", "1", 1);
	return true;
}

static void cleanup_dir(void)
{
	if (tmpdir[0])
		sh("rm -rf %s", tmpdir);
	tmpdir[0] = '\0';
}

/* A file of pseudo-random bytes (never a zero sector, so nothing passes a
 * comparison by accident). */
static bool write_random_file(const char *path, size_t len, uint32_t seed)
{
	FILE *f = fopen(path, "wb");
	uint32_t x = seed | 1;

	if (!f)
		return false;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		fputc((int)(x & 0xFF), f);
	}
	return fclose(f) == 0;
}

static bool patch(const char *path, uint64_t off, const void *bytes, size_t len)
{
	int fd = open(path, O_WRONLY);
	bool ok;

	if (fd < 0)
		return false;
	ok = pwrite(fd, bytes, len, (off_t)off) == (ssize_t)len;
	return close(fd) == 0 && ok;
}

static bool patch_le16(const char *path, uint64_t off, uint16_t v)
{
	unsigned char b[2] = { (unsigned char)v, (unsigned char)(v >> 8) };
	return patch(path, off, b, 2);
}

static bool patch_le32(const char *path, uint64_t off, uint32_t v)
{
	unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8),
			       (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
	return patch(path, off, b, 4);
}

static bool read_at(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	bool ok;

	if (fd < 0)
		return false;
	ok = pread(fd, buf, len, (off_t)off) == (ssize_t)len;
	close(fd);
	return ok;
}

static int examine(const char *path, bool force, bool with_plugin,
		   struct fs_info *info, struct im_err *err)
{
	struct stat st;
	int fd, r;

	memset(info, 0, sizeof(*info));
	memset(err, 0, sizeof(*err));
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -errno;
	}
	if (with_plugin)
		r = fs_examine_with(&fs_plugin_fat, fd, 0, (uint64_t)st.st_size,
				    force, info, err);
	else
		r = fs_examine(fd, 0, (uint64_t)st.st_size, force, info, err);
	close(fd);
	return r;
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

/* A zero-filled file of the same size holding only the marked sectors;
 * with drop_last_run, all but the last run of them. */
static bool copy_used(const char *img, const struct fs_info *info, const char *out,
		      bool drop_last_run)
{
	struct stat st;
	int in = open(img, O_RDONLY), o = -1;
	bool ok = false;
	unsigned char *buf = NULL;
	uint64_t pos = 0, len, last = 0;

	while ((len = bitmap_next_run(&info->used, &pos)) > 0) {
		last = pos;
		pos += len;
	}
	pos = 0;
	if (in < 0 || fstat(in, &st) < 0)
		goto done;
	o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (o < 0 || ftruncate(o, st.st_size) < 0)
		goto done;
	buf = malloc(info->block_size);
	if (!buf)
		goto done;
	while ((len = bitmap_next_run(&info->used, &pos)) > 0) {
		if (drop_last_run && pos == last)
			break;
		for (uint64_t b = pos; b < pos + len; b++) {
			off_t off = (off_t)(b * info->block_size);
			if (pread(in, buf, info->block_size, off) != (ssize_t)info->block_size ||
			    pwrite(o, buf, info->block_size, off) != (ssize_t)info->block_size)
				goto done;
		}
		pos += len;
	}
	ok = true;
done:
	free(buf);
	if (o >= 0)
		close(o);
	if (in >= 0)
		close(in);
	return ok;
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

	if (!setup_dir()) {
		CHECK(!"setup: tools and a temporary directory");
		return;
	}
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

	if (!setup_dir()) {
		CHECK(!"setup: tools and a temporary directory");
		return;
	}
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

/* Copy base, write `len` little-endian bytes of v at off, and expect the
 * plugin to refuse it with `code`, and fs_examine() to fall back to raw. */
static void check_refused(const char *base, const char *what, uint64_t off,
			  size_t len, uint32_t v, int code, int exit_class)
{
	char img[128];
	unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8),
			       (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
	struct fs_info info;
	struct im_err err;
	int r, before = unit_failures;

	snprintf(img, sizeof(img), "%s/hostile.img", tmpdir);
	CHECK_EQ_U(sh("cp --sparse=always %s %s", base, img), 0);
	CHECK(patch(img, off, b, len));
	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, code);
	CHECK_EQ_U(err.exit_class, exit_class);
	CHECK(err.msg[0] != '\0');
	fs_info_free(&info);
	/* Chosen by libblkid or by the magics, probe() turns a corrupt one
	 * down (raw copy) and lets open() explain an unsupported one. */
	r = examine(img, false, false, &info, &err);
	if (code == -ENOTSUP) {
		CHECK_EQ_U(r, code);
	} else {
		CHECK_EQ_U(r, 0);
		CHECK(info.plugin == &fs_plugin_raw);
	}
	fs_info_free(&info);
	if (unit_failures != before)
		fprintf(stderr, "  ^ case: %s (%s)\n", what, err.msg);
}

static void test_hostile_fat16(void)
{
	char base[128], img[128];
	struct fs_info info;
	struct im_err err;
	int r;

	if (!setup_dir()) {
		CHECK(!"setup: tools and a temporary directory");
		return;
	}
	snprintf(base, sizeof(base), "%s/base.img", tmpdir);
	CHECK(make_fat(base, 16, "-F 16"));
	/* The untouched base is accepted, so the refusals below are the
	 * patches' doing. */
	CHECK_EQ_U(examine(base, false, true, &info, &err), 0);
	fs_info_free(&info);

	check_refused(base, "bytes per sector 3", 11, 2, 3, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "bytes per sector 8192", 11, 2, 8192, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "bytes per sector 0", 11, 2, 0, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "sectors per cluster 0", 13, 1, 0, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "sectors per cluster 3", 13, 1, 3, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "reserved sectors 0", 14, 2, 0, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "num fats 0", 16, 1, 0, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "num fats 9", 16, 1, 9, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "media 0", 21, 1, 0, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "FAT size 0", 22, 2, 0, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "FAT size 1", 22, 2, 1, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "FAT size 65535", 22, 2, 0xFFFF, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "total sectors 0xFFFF > file", 19, 2, 0xFFFF, -EINVAL,
		      IM_EXIT_SOURCE);
	check_refused(base, "1 sector per cluster: FAT too small", 13, 1, 1,
		      -EINVAL, IM_EXIT_SOURCE);
	/* 32-bit total: clear the 16-bit one first. */
	snprintf(img, sizeof(img), "%s/base32.img", tmpdir);
	CHECK_EQ_U(sh("cp --sparse=always %s %s", base, img), 0);
	CHECK(patch_le16(img, 19, 0));
	check_refused(img, "total sectors 0", 32, 4, 0, -EINVAL, IM_EXIT_SOURCE);
	check_refused(img, "total sectors 2^20 > file", 32, 4, 1u << 20, -EINVAL,
		      IM_EXIT_SOURCE);
	check_refused(img, "total sectors 2^32-1", 32, 4, 0xFFFFFFFFu, -EINVAL,
		      IM_EXIT_SOURCE);

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
	check_refused(img, "root entries 65535", 17, 2, 0xFFFF, -EINVAL, IM_EXIT_SOURCE);

	/* Nothing but zeros, and a file too small for any FAT. */
	CHECK_EQ_U(sh("rm -f %s && truncate -s 1M %s", img, img), 0);
	CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
	fs_info_free(&info);
	CHECK_EQ_U(sh("truncate -s 1000 %s", img), 0);
	CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
	fs_info_free(&info);

	/* An MBR's 0x55AA alone does not make a FAT: probe() says no. */
	CHECK_EQ_U(sh("rm -f %s && truncate -s 1M %s", img, img), 0);
	CHECK(patch(img, 510, "\x55\xAA", 2));
	CHECK(patch(img, 0, "\xFA\x33\xC0\x8E\xD0\xBC\x00\x7C\x8B\xF4\x50\x07\x50\x1F\xFB\xFC", 16));
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

	if (!setup_dir()) {
		CHECK(!"setup: tools and a temporary directory");
		return;
	}
	snprintf(base, sizeof(base), "%s/base.img", tmpdir);
	CHECK(make_fat(base, 64, "-F 32"));
	CHECK_EQ_U(examine(base, false, true, &info, &err), 0);
	fs_info_free(&info);

	check_refused(base, "FAT32 size 0", 36, 4, 0, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "FAT32 size 1", 36, 4, 1, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "FAT32 size 2^31", 36, 4, 0x80000000u, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "FAT32 root cluster 0", 44, 4, 0, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "FAT32 root cluster past the end", 44, 4, 0x0FFFFFF0u,
		      -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "FAT32 active FAT 5 of 2", 40, 2, 0x85, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "FAT32 with root entries", 17, 2, 512, -EINVAL, IM_EXIT_SOURCE);
	check_refused(base, "FAT32 version 1.0", 42, 2, 0x0100, -ENOTSUP, IM_EXIT_UNSUPP);
	cleanup_dir();
}

/* ---- unclean filesystems ---- */

/* Patch, expect -EUCLEAN (exit class FSCK), then success when forced with
 * the same used count as the clean image and a warning. */
static void check_dirty(const char *base, const char *what, uint64_t off,
			size_t len, uint32_t v, bool expect_dirty)
{
	char img[128];
	unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8),
			       (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
	struct fs_info info;
	struct im_err err;
	uint64_t clean_used;
	int r, before = unit_failures;

	r = examine(base, false, true, &info, &err);
	CHECK_EQ_U(r, 0);
	clean_used = info.used_blocks;
	fs_info_free(&info);

	snprintf(img, sizeof(img), "%s/dirty.img", tmpdir);
	CHECK_EQ_U(sh("cp --sparse=always %s %s", base, img), 0);
	CHECK(patch(img, off, b, len));
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
	if (unit_failures != before)
		fprintf(stderr, "  ^ case: %s (%s)\n", what, err.msg);
}

/* Byte offset of the first FAT: reserved sectors times bytes per sector. */
static uint64_t first_fat_offset(const char *img)
{
	unsigned char b[5] = { 0 };

	if (!read_at(img, 11, b, sizeof(b)))
		return 0;
	return (uint64_t)(b[0] | b[1] << 8) * (uint64_t)(b[3] | b[4] << 8);
}

static void test_dirty(void)
{
	char img[128];
	uint64_t fat0;

	if (!setup_dir()) {
		CHECK(!"setup: tools and a temporary directory");
		return;
	}
	snprintf(img, sizeof(img), "%s/fat12.img", tmpdir);
	CHECK(make_fat(img, 4, "-F 12"));
	fat0 = first_fat_offset(img);
	CHECK(fat0 >= 512);
	check_dirty(img, "FAT12 state byte", 0x25, 1, 0x01, true);
	/* FAT12 has no clean-shutdown bit: FAT[1] is left alone. */
	check_dirty(img, "FAT12 FAT[1]", fat0 + 1, 2, 0x000F, false);

	snprintf(img, sizeof(img), "%s/fat16.img", tmpdir);
	CHECK(make_fat(img, 32, "-F 16"));
	fat0 = first_fat_offset(img);
	CHECK(fat0 >= 512);
	check_dirty(img, "FAT16 state byte", 0x25, 1, 0x01, true);
	check_dirty(img, "FAT16 FAT[1] bit 15", fat0 + 2, 2, 0x7FFF, true);
	check_dirty(img, "FAT16 FAT[1] bit 14 only", fat0 + 2, 2, 0xBFFF, false);
	/* On FAT12/16, 0x41 (the FAT32 state byte) is boot code. */
	check_dirty(img, "FAT16 byte 0x41", 0x41, 1, 0xFF, false);

	snprintf(img, sizeof(img), "%s/fat32.img", tmpdir);
	CHECK(make_fat(img, 64, "-F 32"));
	fat0 = first_fat_offset(img);
	CHECK(fat0 >= 512);
	check_dirty(img, "FAT32 state byte", 0x41, 1, 0x01, true);
	check_dirty(img, "FAT32 FAT[1] bit 27", fat0 + 4, 4, 0x07FFFFFF, true);
	cleanup_dir();
}

/* ---- FSInfo ---- */

static void test_fsinfo(void)
{
	char img[128];
	struct fs_info info;
	struct im_err err;

	if (!setup_dir()) {
		CHECK(!"setup: tools and a temporary directory");
		return;
	}
	snprintf(img, sizeof(img), "%s/fat32.img", tmpdir);
	CHECK(make_fat(img, 64, "-F 32"));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK_STR(info.warning, "");
	fs_info_free(&info);

	/* Stale: a warning, never a refusal. */
	CHECK(patch_le32(img, 512 + 488, 12345));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK(strstr(info.warning, "FSInfo") != NULL);
	fs_info_free(&info);

	/* Unknown (0xFFFFFFFF): nothing to compare. */
	CHECK(patch_le32(img, 512 + 488, 0xFFFFFFFFu));
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

	if (!setup_dir()) {
		CHECK(!"setup: tools and a temporary directory");
		return;
	}
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
		CHECK(patch_le32(img, fat0 + 4 * c, (uint32_t)c + 1));
	CHECK(patch_le32(img, fat0 + 4 * (entries_per_piece + 2), 0x0FFFFFFF));
	CHECK(patch_le32(img, fat0 + 4 * last, 0x0FFFFFF8));
	CHECK(patch_le32(img, fat0 + 4 * (entries_per_piece + 10), 0x0FFFFFF7));
	CHECK(patch_le32(img, fat0 + 4 * (entries_per_piece + 20), 0xF0000000u));
	CHECK(patch_le32(img, fat0 + 4 * (last + 1), 0x0FFFFFFF));

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
