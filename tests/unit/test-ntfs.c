/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The NTFS plugin against volumes made by the real mkntfs (filled through
 * ntfs-3g when it can mount here), checked against ntfsinfo's free count
 * and, cluster by cluster, against the bitmap partclone.ntfs stores; then
 * dirty and hibernated volumes, and corrupted copies.
 */
#include "unit-fs.h"

extern const struct fs_plugin fs_plugin_ntfs;

#define MiB (1ull << 20)

static bool have_ntfsprogs(void)
{
	static int have = -1;

	return have_or_skip(&have, "mkntfs ntfsinfo", "SKIP: mkntfs/ntfsinfo not installed (ntfs-3g)");
}

/* Can ntfs-3g mount a plain file here (FUSE, root)?  Checked once. */
static bool can_mount(void)
{
	static int can = -1;

	return root_and(&can, "command -v ntfs-3g >/dev/null 2>&1 && test -r /dev/fuse -a -w /dev/fuse",
			"SKIP (parts): ntfs-3g cannot mount here (needs root and /dev/fuse)");
}

/* A file of size bytes holding a volume made by `mkntfs -F -f -q args`. */
static bool make_image(char path[static 32], const char *args, uint64_t size)
{
	return mkfs_image(path, "/tmp/test-ntfs-XXXXXX", size, "mkntfs -F -f -q", args);
}

/* Run a shell script with $D the volume mounted read-write by ntfs-3g. */
static bool in_mounted(const char *path, const char *script)
{
	char dir[] = "/tmp/test-ntfs-mnt-XXXXXX", cmd[4096];
	int r;

	if (!mkdtemp(dir))
		return false;
	snprintf(cmd, sizeof(cmd),
		 "ntfs-3g %s %s >/dev/null 2>&1 || exit 9; D=%s; (set -e; %s) >/dev/null 2>&1; rc=$?; "
		 "umount %s || fusermount -u %s; exit $rc",
		 path, dir, dir, script, dir, dir);
	r = system(cmd);
	rmdir(dir);
	if (r != 0)
		fprintf(stderr, "  failed (%d): %s\n", r, script);
	CHECK(r == 0);
	return r == 0;
}

static int examine(const char *path, bool force, struct fs_info *info, struct im_err *err)
{
	return examine_path(&fs_plugin_ntfs, path, force, info, err);
}

/* ---- raw access ---- */

struct geom {
	uint32_t bps, cs, rs;
	uint64_t sectors, clusters, mft_lcn;
};

static struct geom geometry(const char *path)
{
	unsigned char bs[512];
	struct geom g;
	int8_t cpm;
	unsigned spc;

	read_at(path, 0, bs, sizeof(bs));
	g.bps = (uint32_t)get_le(bs + 11, 2);
	spc = bs[13] <= 128 ? bs[13] : 1u << (256 - bs[13]);
	g.cs = g.bps * spc;
	g.sectors = get_le(bs + 0x28, 8);
	g.clusters = g.sectors / spc;
	g.mft_lcn = get_le(bs + 0x30, 8);
	cpm = (int8_t)bs[0x40];
	g.rs = cpm < 0 ? 1u << -cpm : (uint32_t)cpm * g.cs;
	return g;
}

/* The low MFT records lie in $MFT's first run, at mft_lcn (mkntfs). */
static uint64_t rec_off(const struct geom *g, unsigned recno)
{
	return g->mft_lcn * g->cs + (uint64_t)recno * g->rs;
}

/* size bytes at off (a record or an index block) with the update
 * sequence undone. */
static void blk_load(const char *path, uint64_t off, uint32_t size, unsigned char *buf)
{
	unsigned usa, count;

	read_at(path, off, buf, size);
	usa = (unsigned)get_le(buf + 4, 2);
	count = (unsigned)get_le(buf + 6, 2);
	CHECK(count == size / 512 + 1);
	for (unsigned i = 1; i < count && usa + 2 * i + 2 <= size; i++)
		memcpy(buf + i * 512 - 2, buf + usa + 2 * i, 2);
}

/* Write buf back at off, protected by its update sequence. */
static void blk_store(const char *path, uint64_t off, uint32_t size, const unsigned char *buf)
{
	unsigned char out[65536];
	unsigned usa = (unsigned)get_le(buf + 4, 2), count = (unsigned)get_le(buf + 6, 2);

	memcpy(out, buf, size);
	for (unsigned i = 1; i < count && usa + 2 * i + 2 <= size && i * 512 <= size; i++) {
		memcpy(out + usa + 2 * i, buf + i * 512 - 2, 2);
		memcpy(out + i * 512 - 2, buf + usa, 2);
	}
	write_at(path, off, out, size);
}

static void rec_load(const char *path, const struct geom *g, unsigned recno, unsigned char *buf)
{
	blk_load(path, rec_off(g, recno), g->rs, buf);
}

static void rec_store(const char *path, const struct geom *g, unsigned recno,
		      const unsigned char *buf)
{
	blk_store(path, rec_off(g, recno), g->rs, buf);
}

/* Offset of the first attribute of type in a loaded record, or 0. */
static unsigned attr_off(const unsigned char *rec, uint32_t type)
{
	unsigned at = (unsigned)get_le(rec + 20, 2);

	while (at + 8 <= 4096) {
		uint32_t t = (uint32_t)get_le(rec + at, 4), len = (uint32_t)get_le(rec + at + 4, 4);
		if (t == 0xFFFFFFFFu || len == 0)
			return 0;
		if (t == type)
			return at;
		at += len;
	}
	return 0;
}

/* The LCN of the first run of the non-resident attribute at `at`. */
static uint64_t first_run_lcn(const unsigned char *rec, unsigned at)
{
	const unsigned char *mp = rec + at + get_le(rec + at + 32, 2);
	unsigned ls = mp[0] & 15, os = mp[0] >> 4;

	return get_le(mp + 1 + ls, os);
}

/* ---- what the real tools say ---- */

struct counts {
	uint64_t clusters, free_clusters, cluster_size;
};

static bool ntfsinfo_counts(const char *path, struct counts *c)
{
	const struct tool_field f[] = { { " Volume Size in Clusters: %llu", &c->clusters },
					{ " Free Clusters: %llu", &c->free_clusters },
					{ " Cluster Size: %llu", &c->cluster_size } };

	return tool_fields("ntfsinfo -m %s 2>/dev/null", path, f, 3);
}

/* partclone.ntfs's own view: its image's bitmap (format v2: a 110-byte
 * header with the block count at 60, then one bit per cluster, LSB first),
 * compared cluster by cluster with ours.  Returns false when partclone is
 * not installed. */
static bool same_as_partclone(const char *path, const struct fs_info *info, uint32_t cs)
{
	char img[] = "/tmp/test-ntfs-pc-XXXXXX", cmd[512];
	unsigned char hdr[110], *bits;
	uint64_t total, differ = 0, per = cs / info->block_size;
	int fd;

	if (!have_tools("partclone.ntfs"))
		return false;
	fd = mkstemp(img);
	CHECK(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "partclone.ntfs -f 0 -c -q -s %s -O %s -L /dev/null >/dev/null 2>&1",
		 path, img);
	CHECK(system(cmd) == 0);
	read_at(img, 0, hdr, sizeof(hdr));
	CHECK(memcmp(hdr, "partclone-image", 15) == 0);
	total = get_le(hdr + 60, 8);
	CHECK_EQ_U(get_le(hdr + 84, 4), cs);
	bits = malloc((size_t)(total + 7) / 8);
	CHECK(bits != NULL);
	if (bits) {
		read_at(img, sizeof(hdr), bits, (size_t)(total + 7) / 8);
		for (uint64_t c = 0; c < total; c++) {
			bool pc = bits[c / 8] & (1u << (c % 8));
			for (uint64_t b = c * per; b < (c + 1) * per; b++)
				differ += pc != bitmap_test(&info->used, b);
		}
		free(bits);
	}
	CHECK_EQ_U(differ, 0);
	unlink(img);
	return true;
}

/* The plugin's map against ntfsinfo's free count and partclone's bitmap:
 * the same clusters, plus the block holding the partition's last sector. */
static void check_image_pc(const char *path, const char *what, bool partclone)
{
	struct geom g = geometry(path);
	struct fs_info info;
	struct im_err err;
	struct counts c;
	uint64_t size = file_size(path), last, per;

	if (!ntfsinfo_counts(path, &c))
		return;
	CHECK_EQ_U(c.clusters, g.clusters);
	CHECK_EQ_U(c.cluster_size, g.cs);
	if (!examine_ok(&fs_plugin_ntfs, path, what, &info, &err))
		return;
	per = g.cs / info.block_size;
	last = (size / g.bps - 1) * g.bps / info.block_size;
	CHECK(info.block_size <= g.cs && info.block_size <= 4096);
	CHECK_EQ_U(info.block_count, size / info.block_size);
	CHECK(last >= g.clusters * per);           /* past the clusters: counted apart */
	CHECK(bitmap_test(&info.used, last));
	CHECK_EQ_U(info.used_blocks, (c.clusters - c.free_clusters) * per + 1);
	CHECK_STR(info.warning, "");
	if (info.used_blocks != (c.clusters - c.free_clusters) * per + 1)
		fprintf(stderr, "  (%s)\n", what);
	/* Each cluster is all its blocks or none of them. */
	for (uint64_t cl = 0; cl < g.clusters; cl++)
		for (uint64_t b = cl * per + 1; b < (cl + 1) * per; b++)
			if (bitmap_test(&info.used, b) != bitmap_test(&info.used, cl * per)) {
				CHECK(!"a cluster partly used");
				cl = g.clusters;
				break;
			}
	/* partclone.ntfs takes 2 s, mostly asleep: only where it says most. */
	if (partclone && !same_as_partclone(path, &info, g.cs))
		unit_skip("SKIP (part): partclone.ntfs not installed, bitmaps not compared");
	fs_info_free(&info);
}

static void check_image(const char *path, const char *what)
{
	check_image_pc(path, what, false);
}

static const struct mkfs_kind ntfs = { have_ntfsprogs, make_image, check_image };

static void check_mkfs(const char *args, uint64_t size) { check_mkfs_kind(&ntfs, args, size); }

static void test_4k(void)        { check_mkfs("", 64 * MiB); }
static void test_512(void)       { check_mkfs("-c 512", 32 * MiB); }
static void test_64k(void)       { check_mkfs("-c 65536", 64 * MiB); }
/* 2 MiB clusters: the negative-shift encoding, and 512 blocks of 4 KiB each. */
static void test_2m(void)        { check_mkfs("-c 2097152", 512 * MiB); }
static void test_4k_sectors(void) { check_mkfs("-s 4096", 64 * MiB); }
static void test_1g(void)        { check_mkfs("", 1024 * MiB); }

/* A partition whose end is not cluster-aligned: the blocks shrink until the
 * last sector has one of its own. */
static void test_unaligned_end(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;

	if (!have_ntfsprogs() || !make_image(path, "", 64 * MiB + 3 * 512))
		return;
	check_image(path, "64 MiB + 3 sectors");
	CHECK(examine(path, false, &info, &err) == 0);
	CHECK_EQ_U(info.block_size, 512);
	fs_info_free(&info);
	unlink(path);
}

/* Files of every size, many in the root (an index with blocks), a file with
 * an attribute list (many hard links), a fragmented one. */
static const char populate_script[] =
	"mkdir -p $D/sub/deep; "
	"head -c 5000000 /dev/urandom >$D/big.bin; "
	"for i in $(seq 1 60); do head -c $((i * 997 % 9000 + 1)) /dev/urandom >$D/f$i.txt; done; "
	"for i in $(seq 1 20); do head -c $((i * 3000)) /dev/urandom >$D/sub/s$i; done; "
	"for i in $(seq 1 10); do rm $D/sub/s$((i * 2)); done; "
	"head -c 3000000 /dev/urandom >$D/sub/deep/fragmented.bin; "
	"head -c 20000 /dev/urandom >$D/linked; "
	"for i in $(seq 1 30); do ln $D/linked $D/sub/link-with-a-rather-long-name-$i; done";

static void test_populated(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;

	if (!have_ntfsprogs() || !can_mount() || !make_image(path, "", 64 * MiB))
		return;
	if (in_mounted(path, populate_script)) {
		check_image_pc(path, "populated", true);
		CHECK(examine(path, false, &info, &err) == 0);
		CHECK(info.used_blocks * info.block_size > 8 * MiB);
		fs_info_free(&info);
	}
	unlink(path);
}

/* ---- unclean volumes ---- */

static void test_dirty(void)
{
	char path[32], cmd[128];
	struct fs_info info;
	struct im_err err;
	struct counts c;

	if (!have_ntfsprogs() || !make_image(path, "", 64 * MiB) || !ntfsinfo_counts(path, &c))
		return;
	/* ntfsfix without -n or -d sets the dirty flag, so that Windows runs
	 * chkdsk (ntfsfix.c, set_dirty_flag). */
	snprintf(cmd, sizeof(cmd), "ntfsfix %s >/dev/null 2>&1", path);
	CHECK(system(cmd) == 0);
	CHECK(examine(path, false, &info, &err) == -EUCLEAN);
	CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
	CHECK(strstr(err.msg, "dirty") != NULL);
	CHECK(strstr(err.msg, "chkdsk /f") != NULL);
	CHECK(examine(path, true, &info, &err) == 0);
	CHECK(strstr(info.warning, "dirty") != NULL);
	CHECK_EQ_U(info.used_blocks, c.clusters - c.free_clusters + 1);
	fs_info_free(&info);
	snprintf(cmd, sizeof(cmd), "ntfsfix -d %s >/dev/null 2>&1", path);
	CHECK(system(cmd) == 0);
	check_image(path, "ntfsfix -d");
	unlink(path);
}

/* hiberfil.sys made of header (printf format) and then zeros up to size. */
static void put_hiberfil(const char *path, const char *where, const char *header, unsigned size,
			 const char *extra)
{
	char script[1024];

	snprintf(script, sizeof(script),
		 "rm -f $D/hiberfil.sys $D/sub/hiberfil.sys; mkdir -p $D/sub; "
		 "{ printf '%s'; head -c %u /dev/zero; } | head -c %u >$D/%s; %s",
		 header, size, size, where, extra);
	in_mounted(path, script);
}

struct hib_case {
	const char *what, *where, *header;
	unsigned size;
	const char *extra;
	int want;
};

static void test_hibernated(void)
{
	static const struct hib_case cases[] = {
		{ "hibr", "hiberfil.sys", "hibr", 1u << 20, "", -EUCLEAN },
		{ "HIBR (Fast Startup)", "hiberfil.sys", "HIBR", 1u << 20, "", -EUCLEAN },
		{ "resumed: zeros", "hiberfil.sys", "", 1u << 20, "", 0 },
		{ "resumed: wake", "hiberfil.sys", "wake", 1u << 20, "", 0 },
		{ "uppercase name", "HIBERFIL.SYS", "HIBR", 65536, "", -EUCLEAN },
		{ "shorter than 4 KiB", "hiberfil.sys", "", 100, "", -EUCLEAN },
		{ "resident", "hiberfil.sys", "hibr", 200, "", -EUCLEAN },
		{ "not in the root", "sub/hiberfil.sys", "HIBR", 65536, "", 0 },
		{ "among 300 files (index blocks)", "hiberfil.sys", "HIBR", 65536,
		  "for i in $(seq 1 300); do : >$D/zz-file-$i; : >$D/aa-file-$i; done", -EUCLEAN },
		{ "with an attribute list", "hiberfil.sys", "HIBR", 65536,
		  "for i in $(seq 1 30); do ln $D/hiberfil.sys $D/sub/a-long-hard-link-name-$i; done",
		  -EUCLEAN },
		{ "fragmented", "hiberfil.sys", "HIBR", 2u << 20,
		  "for i in $(seq 1 64); do head -c 8192 /dev/zero >$D/gap$i; done; "
		  "head -c 1000000 /dev/zero >>$D/hiberfil.sys", -EUCLEAN },
	};
	struct counts c;

	if (!have_ntfsprogs() || !can_mount())
		return;
	/* A fresh volume each: ntfs-3g will not mount a hibernated one
	 * read-write again. */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct hib_case *hc = &cases[i];
		struct fs_info info;
		struct im_err err;
		char path[32];
		int r;

		if (!make_image(path, "", 64 * MiB))
			continue;
		put_hiberfil(path, hc->where, hc->header, hc->size, hc->extra);
		if (!ntfsinfo_counts(path, &c)) {
			unlink(path);
			continue;
		}
		r = examine(path, false, &info, &err);
		if (r != hc->want)
			fprintf(stderr, "  %s: got %d (%s), expected %d\n", hc->what, r, err.msg, hc->want);
		CHECK(r == hc->want);
		if (r == 0) {
			CHECK_STR(info.warning, "");
			fs_info_free(&info);
		} else {
			CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
			CHECK(strstr(err.msg, "Fast Startup") != NULL);
			CHECK(strstr(err.msg, "shutdown /s /t 0") != NULL);
			r = examine(path, true, &info, &err);
			CHECK(r == 0);
			if (r == 0) {
				CHECK(strstr(info.warning, "hibernated") != NULL);
				CHECK_EQ_U(info.used_blocks, c.clusters - c.free_clusters + 1);
				fs_info_free(&info);
			}
		}
		unlink(path);
	}
}

/* ---- hostile copies ---- */

static bool valid_result(int r, const struct im_err *err)
{
	return r == -EINVAL || r == -EUCLEAN || r == -ENOTSUP || (r == 0 && !err->msg[0]);
}

/* The boot sector: no checksum. */
static const struct block_at boot_sector = { &fs_plugin_ntfs, 0, 512, false, NULL, 0 };

static void test_hostile_boot(void)
{
	const struct field_case cases[] = {
		{ "bytes per sector 0", 11, 2, 0, -EINVAL },
		{ "bytes per sector 1000", 11, 2, 1000, -EINVAL },
		{ "bytes per sector 8192", 11, 2, 8192, -EINVAL },
		{ "sectors per cluster 3", 13, 1, 3, -EINVAL },
		{ "sectors per cluster 0", 13, 1, 0, -EINVAL },
		{ "sectors per cluster 2^13 (4 MiB)", 13, 1, 256 - 13, -EINVAL },
		{ "sectors per cluster 0xff", 13, 1, 0xff, -EINVAL },
		{ "reserved sectors 1", 14, 2, 1, -EINVAL },
		{ "number of FATs 2", 16, 1, 2, -EINVAL },
		{ "number of sectors 0", 0x28, 8, 0, -EINVAL },
		{ "number of sectors past the device", 0x28, 8, 131073, -EINVAL },
		{ "number of sectors huge", 0x28, 8, ~0ull, -EINVAL },
		{ "MFT at cluster 0", 0x30, 8, 0, -EINVAL },
		{ "MFT past the end", 0x30, 8, 16383, -EINVAL },
		{ "MFT at -1", 0x30, 8, ~0ull, -EINVAL },
		/* Sound boot sectors over no MFT: damaged (forced: kept whole). */
		{ "MFT elsewhere", 0x30, 8, 100, -EUCLEAN },
		{ "MFT records of 2 KiB", 0x40, 1, 256 - 11, -EUCLEAN },
		{ "MFTMirr = MFT", 0x38, 8, 4, -EINVAL },
		{ "MFTMirr past the end", 0x38, 8, 1ull << 40, -EINVAL },
		{ "clusters per MFT record 3", 0x40, 1, 3, -EINVAL },
		{ "clusters per MFT record -8", 0x40, 1, 0xF8, -EINVAL },
		{ "clusters per MFT record 2^30", 0x40, 1, 256 - 30, -ENOTSUP },
		{ "clusters per index record 0", 0x44, 1, 0, -EINVAL },
	};
	char path[32];
	struct fs_info info;
	struct im_err err;
	int r;

	if (!have_ntfsprogs() || !make_image(path, "", 64 * MiB))
		return;
	CHECK_EQ_U(geometry(path).mft_lcn, 4);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct field_case *c = &cases[i];

		r = examine_patched(path, &boot_sector, c->off, c->val, c->width, false, false, &info,
				    &err);
		expect_result(c->what, r, c->want, &err, &info);
	}
	/* The device smaller than the volume. */
	CHECK(examine_path_size(&fs_plugin_ntfs, path, 32 * MiB, false, &info, &err) == -EINVAL);
	CHECK(examine_path_size(&fs_plugin_ntfs, path, 4096, false, &info, &err) < 0);

	/* Through the registry: a good boot sector is ntfs's; one that fails
	 * its invariants is copied by the raw fallback. */
	expect_plugin(path, &fs_plugin_ntfs, "ntfs");
	{
		unsigned char orig[512], bs[512];

		read_at(path, 0, orig, sizeof(orig));
		memcpy(bs, orig, sizeof(bs));
		bs[13] = 3;
		write_at(path, 0, bs, sizeof(bs));
		expect_plugin(path, &fs_plugin_raw, NULL);
		write_at(path, 0, orig, sizeof(orig));
	}
	check_image(path, "boot sector restored");
	unlink(path);
}

/* Patch bytes of a record (fixups kept valid unless raw), examine, restore. */
static int examine_rec(const char *path, unsigned recno, unsigned off, uint64_t val,
		       unsigned width, bool raw, bool force, struct fs_info *info,
		       struct im_err *err)
{
	struct geom g = geometry(path);
	unsigned char orig[65536], rec[65536];
	int r;

	read_at(path, rec_off(&g, recno), orig, g.rs);
	if (raw) {
		memcpy(rec, orig, g.rs);
		put_le(rec + off, val, width);
		write_at(path, rec_off(&g, recno), rec, g.rs);
	} else {
		rec_load(path, &g, recno, rec);
		put_le(rec + off, val, width);
		rec_store(path, &g, recno, rec);
	}
	r = examine(path, force, info, err);
	write_at(path, rec_off(&g, recno), orig, g.rs);
	return r;
}

/* A field of the first attribute of type in record recno (-1: not found). */
static int attr_field(const char *path, unsigned recno, uint32_t type, unsigned field)
{
	struct geom g = geometry(path);
	unsigned char rec[65536];
	unsigned at;

	rec_load(path, &g, recno, rec);
	at = attr_off(rec, type);
	CHECK(at != 0);
	return at ? (int)(at + field) : -1;
}

struct rec_case {
	const char *what;
	unsigned recno;
	uint32_t type;   /* 0: offset in the record; else in that attribute */
	unsigned off, width;
	uint64_t val;
	bool raw;        /* leave the update sequence as it falls */
	int want, want_forced;
};

static void test_hostile_records(void)
{
	const struct rec_case cases[] = {
		{ "record 0 magic", 0, 0, 0, 4, 0x44414142 /* BAAD */, true, -EUCLEAN, 0 },
		{ "record 0 torn (sector 1)", 0, 0, 1022, 2, 0x1234, true, -EUCLEAN, 0 },
		{ "usa offset odd", 0, 0, 4, 2, 0x31, true, -EUCLEAN, 0 },
		{ "usa offset past the first sector", 0, 0, 4, 2, 600, true, -EUCLEAN, 0 },
		{ "usa count 9", 0, 0, 6, 2, 9, true, -EUCLEAN, 0 },
		{ "attributes at 0", 0, 0, 20, 2, 0, false, -EUCLEAN, 0 },
		{ "attributes at 1020", 0, 0, 20, 2, 1020, false, -EUCLEAN, 0 },
		{ "bytes in use 4096", 0, 0, 24, 4, 4096, false, -EUCLEAN, 0 },
		{ "bytes in use 0", 0, 0, 24, 4, 0, false, -EUCLEAN, 0 },
		{ "bytes allocated 512", 0, 0, 28, 4, 512, false, -EUCLEAN, 0 },
		{ "record number 7", 0, 0, 44, 4, 7, false, -EUCLEAN, 0 },
		{ "record 0 not in use", 0, 0, 22, 2, 0, false, -EUCLEAN, 0 },
		{ "record 0 an extension", 0, 0, 32, 8, 3, false, -EUCLEAN, 0 },
		{ "$MFT $DATA length 0", 0, 0x80, 4, 4, 0, false, -EUCLEAN, 0 },
		{ "$MFT $DATA length huge", 0, 0x80, 4, 4, 0x10000, false, -EUCLEAN, 0 },
		{ "$MFT $DATA resident", 0, 0x80, 8, 1, 0, false, -EUCLEAN, 0 },
		{ "$MFT $DATA non-resident 2", 0, 0x80, 8, 1, 2, false, -EUCLEAN, 0 },
		{ "$MFT $DATA name past the end", 0, 0x80, 9, 1, 200, false, -EUCLEAN, 0 },
		{ "$MFT $DATA compressed", 0, 0x80, 12, 2, 1, false, -EUCLEAN, 0 },
		{ "$MFT lowest VCN 5", 0, 0x80, 16, 8, 5, false, -EUCLEAN, 0 },
		{ "$MFT highest VCN huge", 0, 0x80, 24, 8, 1ull << 40, false, -EUCLEAN, 0 },
		{ "$MFT mapping pairs at 0", 0, 0x80, 32, 2, 0, false, -EUCLEAN, 0 },
		{ "$MFT mapping pairs past the end", 0, 0x80, 32, 2, 0x400, false, -EUCLEAN, 0 },
		{ "$MFT allocated size odd", 0, 0x80, 40, 8, 12345, false, -EUCLEAN, 0 },
		{ "$MFT allocated size huge", 0, 0x80, 40, 8, 1ull << 62, false, -EUCLEAN, 0 },
		{ "$MFT data size > allocated", 0, 0x80, 48, 8, 1ull << 40, false, -EUCLEAN, 0 },
		{ "$MFT initialized size 0", 0, 0x80, 56, 8, 0, false, -EUCLEAN, 0 },
		{ "$MFT run header 0x09", 0, 0x80, 0x40, 1, 0x09, false, -EUCLEAN, 0 },
		{ "$MFT run header 0x90", 0, 0x80, 0x40, 1, 0x90, false, -EUCLEAN, 0 },
		{ "$MFT run header 0xff", 0, 0x80, 0x40, 1, 0xff, false, -EUCLEAN, 0 },
		{ "$MFT run is a hole", 0, 0x80, 0x40, 1, 0x01, false, -EUCLEAN, 0 },
		{ "$MFT run length 0", 0, 0x80, 0x41, 1, 0, false, -EUCLEAN, 0 },
		{ "$MFT run length -1", 0, 0x80, 0x41, 1, 0xff, false, -EUCLEAN, 0 },
		{ "$MFT run past the end", 0, 0x80, 0x40, 8, 0xffff1331, false, -EUCLEAN, 0 },
		{ "$MFT run longer than the volume", 0, 0x80, 0x40, 8, 0x04ffff12, false, -EUCLEAN, 0 },
		{ "$MFT run before cluster 0", 0, 0x80, 0x42, 1, 0x80, false, -EUCLEAN, 0 },
		{ "$Bitmap magic", 6, 0, 0, 4, 0x44414142, true, -EUCLEAN, 0 },
		{ "$Bitmap data size 100", 6, 0x80, 48, 8, 100, false, -EUCLEAN, 0 },
		{ "$Bitmap initialized size 100", 6, 0x80, 56, 8, 100, false, -EUCLEAN, 0 },
		{ "$Bitmap sparse", 6, 0x80, 12, 2, 0x8000, false, -EUCLEAN, 0 },
		{ "$Bitmap run moved to free space", 6, 0x80, 0x42, 2, 9000, false, -EUCLEAN, 0 },
		{ "$Bitmap run past the end", 6, 0x80, 0x42, 2, 0x7ff0, false, -EUCLEAN, 0 },
		{ "$Bitmap missing", 6, 0x80, 0, 4, 0x81, false, -EUCLEAN, 0 },
		{ "$Volume version 9", 3, 0x70, 0x18 + 8, 1, 9, false, -ENOTSUP, -ENOTSUP },
		{ "$Volume information missing", 3, 0x70, 0, 4, 0x71, false, -EUCLEAN, 0 },
		{ "$Volume information short", 3, 0x70, 16, 4, 4, false, -EUCLEAN, 0 },
		{ "$Volume torn", 3, 0, 510, 2, 0x4242, true, -EUCLEAN, 0 },
		{ "root torn", 5, 0, 510, 2, 0x4242, true, -EUCLEAN, 0 },
		{ "root index missing", 5, 0x90, 0, 4, 0x91, false, -EUCLEAN, 0 },
		{ "root index of $DATA", 5, 0x90, 0x20, 4, 0x80, false, -EUCLEAN, 0 },
		{ "root index blocks of 3 bytes", 5, 0x90, 0x20 + 8, 4, 3, false, -EUCLEAN, 0 },
		{ "root index entries at 0", 5, 0x90, 0x20 + 16, 4, 0, false, -EUCLEAN, 0 },
		{ "root index length huge", 5, 0x90, 0x20 + 20, 4, 0xffff, false, -EUCLEAN, 0 },
		{ "root first entry length 0", 5, 0x90, 0x20 + 32 + 8, 2, 0, false, -EUCLEAN, 0 },
		{ "root first entry length 7", 5, 0x90, 0x20 + 32 + 8, 2, 7, false, -EUCLEAN, 0 },
	};
	char path[32];
	struct geom g;
	struct counts c;

	if (!have_ntfsprogs() || !make_image(path, "", 64 * MiB) || !ntfsinfo_counts(path, &c))
		return;
	g = geometry(path);
	CHECK_EQ_U(g.rs, 1024);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rec_case *rc = &cases[i];
		struct fs_info info;
		struct im_err err;
		int off = (int)rc->off, r;

		if (rc->type) {
			int base = attr_field(path, rc->recno, rc->type, 0);
			if (base < 0)
				continue;
			/* Resident values and mapping pairs follow their header. */
			off = base + (int)rc->off;
		}
		for (int forced = 0; forced < 2; forced++) {
			int want = forced ? rc->want_forced : rc->want;

			r = examine_rec(path, rc->recno, (unsigned)off, rc->val, rc->width, rc->raw,
					forced, &info, &err);
			if (r != want)
				fprintf(stderr, "  %s%s: got %d (%s), expected %d\n", rc->what,
					forced ? " (forced)" : "", r, err.msg, want);
			CHECK(r == want);
			CHECK(r == 0 || err.msg[0] != '\0');
			if (r == 0) {
				CHECK(info.warning[0] != '\0');
				CHECK(info.used_blocks <= info.block_count);
				/* $MFT or $Bitmap unusable: every cluster kept. */
				if (strstr(info.warning, "every cluster kept"))
					CHECK_EQ_U(info.used_blocks,
						   g.clusters * (g.cs / info.block_size) + 1);
				fs_info_free(&info);
			}
		}
	}
	check_image(path, "records restored");
	unlink(path);
}

/* The root directory's first index block (mkntfs makes the root a large
 * index): damaged, the hibernation check cannot tell, and says so. */
static void test_hostile_index_block(void)
{
	const struct { const char *what; unsigned off, width; uint64_t val; bool raw; } cases[] = {
		{ "magic", 0, 4, 0x44414142, true },
		{ "torn", 1022, 2, 0x4242, true },
		{ "usa count 3", 6, 2, 3, true },
		{ "entries at 0", 24, 4, 0, false },
		{ "entries at 4090", 24, 4, 4088, false },
		{ "index length huge", 28, 4, 0x10000, false },
		{ "first entry length 0", 0, 2, 0, false },
		{ "first entry length huge", 0, 2, 0xfff8, false },
		{ "first key huge", 2, 2, 0xfff0, false },
		{ "first key short", 2, 2, 10, false },
		{ "first name long", 8 + 64, 1, 255, false },
		{ "no end entry", 28, 4, 0, false },   /* index length = entries offset */
	};
	char path[32];
	struct geom g;
	unsigned char rec[65536], blk[65536];
	uint64_t off;
	unsigned at, first;

	if (!have_ntfsprogs() || !make_image(path, "", 64 * MiB))
		return;
	g = geometry(path);
	rec_load(path, &g, 5, rec);
	at = attr_off(rec, 0xA0);
	CHECK(at != 0);
	if (!at) {
		unlink(path);
		return;
	}
	off = first_run_lcn(rec, at) * g.cs;
	blk_load(path, off, 4096, blk);
	CHECK(memcmp(blk, "INDX", 4) == 0);
	first = 24 + (unsigned)get_le(blk + 24, 4);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned char orig[4096], b[4096];
		struct fs_info info;
		struct im_err err;
		/* Entry fields count from the first entry, after its 8-byte reference. */
		unsigned o = cases[i].off >= 24 || cases[i].raw ? cases[i].off
							    : first + 8 + cases[i].off;
		uint64_t val = cases[i].val;
		int r;

		if (strcmp(cases[i].what, "no end entry") == 0)
			val = get_le(blk + 24, 4);
		read_at(path, off, orig, sizeof(orig));
		if (cases[i].raw) {
			memcpy(b, orig, sizeof(b));
			put_le(b + o, val, cases[i].width);
			write_at(path, off, b, sizeof(b));
		} else {
			memcpy(b, blk, sizeof(b));
			put_le(b + o, val, cases[i].width);
			blk_store(path, off, 4096, b);
		}
		r = examine(path, false, &info, &err);
		if (r != -EUCLEAN)
			fprintf(stderr, "  index block %s: got %d (%s)\n", cases[i].what, r, err.msg);
		CHECK(r == -EUCLEAN);
		CHECK(strstr(err.msg, "hibernated") != NULL);
		r = examine(path, true, &info, &err);
		CHECK(r == 0);
		if (r == 0) {
			CHECK(strstr(info.warning, "cannot tell") != NULL);
			fs_info_free(&info);
		}
		write_at(path, off, orig, sizeof(orig));
	}
	check_image(path, "index block restored");
	unlink(path);
}

/* One bit of $Bitmap: clearing $MFT's first cluster is caught by the
 * cross-check; setting a free one is simply more data. */
static void test_bitmap_cross_check(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct counts c;
	struct geom g;
	unsigned char rec[65536], byte;
	uint64_t bitmap_lcn;
	unsigned at;

	if (!have_ntfsprogs() || !make_image(path, "", 64 * MiB) || !ntfsinfo_counts(path, &c))
		return;
	g = geometry(path);
	rec_load(path, &g, 6, rec);
	at = attr_off(rec, 0x80);
	CHECK(at && rec[at + 8] == 1);
	bitmap_lcn = first_run_lcn(rec, at);
	read_at(path, bitmap_lcn * g.cs + g.mft_lcn / 8, &byte, 1);
	CHECK(byte & (1u << (g.mft_lcn % 8)));
	byte &= (unsigned char)~(1u << (g.mft_lcn % 8));
	write_at(path, bitmap_lcn * g.cs + g.mft_lcn / 8, &byte, 1);
	CHECK(examine(path, false, &info, &err) == -EUCLEAN);
	CHECK(strstr(err.msg, "$MFT") != NULL);
	CHECK(examine(path, true, &info, &err) == 0);
	CHECK(strstr(info.warning, "free") != NULL);
	CHECK_EQ_U(info.used_blocks, c.clusters - c.free_clusters + 1);
	fs_info_free(&info);
	byte |= (unsigned char)(1u << (g.mft_lcn % 8));
	write_at(path, bitmap_lcn * g.cs + g.mft_lcn / 8, &byte, 1);

	/* A bit at or past nr_clusters describes nothing. */
	read_at(path, bitmap_lcn * g.cs + g.clusters / 8, &byte, 1);
	byte |= (unsigned char)(0xFFu << (g.clusters % 8));
	write_at(path, bitmap_lcn * g.cs + g.clusters / 8, &byte, 1);
	CHECK(examine(path, false, &info, &err) == 0);
	CHECK_EQ_U(info.used_blocks, c.clusters - c.free_clusters + 1);
	fs_info_free(&info);
	unlink(path);
}

/* The attribute list of a file: its bytes, and where they live (in the
 * base record, or in a cluster of their own). */
struct alist {
	bool resident;
	uint64_t off;            /* non-resident: byte offset on the volume */
	unsigned len;
	unsigned char data[4096];
};

static bool list_load(const char *path, const struct geom *g, unsigned base, struct alist *l)
{
	unsigned char rec[65536];
	unsigned at;

	rec_load(path, g, base, rec);
	at = attr_off(rec, 0x20);
	if (!at)
		return false;
	l->resident = rec[at + 8] == 0;
	if (l->resident) {
		l->len = (unsigned)get_le(rec + at + 16, 4);
		memcpy(l->data, rec + at + get_le(rec + at + 20, 2), l->len);
	} else {
		l->len = (unsigned)get_le(rec + at + 48, 8);
		l->off = first_run_lcn(rec, at) * g->cs;
		if (l->len > sizeof(l->data))
			return false;
		read_at(path, l->off, l->data, l->len);
	}
	return true;
}

static void list_store(const char *path, const struct geom *g, unsigned base,
		       const struct alist *l)
{
	unsigned char rec[65536];
	unsigned at;

	if (!l->resident) {
		write_at(path, l->off, l->data, l->len);
		return;
	}
	rec_load(path, g, base, rec);
	at = attr_off(rec, 0x20);
	memcpy(rec + at + get_le(rec + at + 20, 2), l->data, l->len);
	rec_store(path, g, base, rec);
}

/* Offset in the list of the first entry of type, or -1. */
static int list_entry(const struct alist *l, uint32_t type)
{
	for (unsigned e = 0; e + 26 <= l->len && get_le(l->data + e + 4, 2);
	     e += (unsigned)get_le(l->data + e + 4, 2))
		if (get_le(l->data + e, 4) == type)
			return (int)e;
	return -1;
}

/*
 * ntfs-3g keeps a file's $DATA in its base record and moves $FILE_NAMEs
 * out; Windows moves whatever does not fit.  Move the $DATA of base into
 * the roomiest of its extension records, as Windows could have, and point
 * its list entry there.  Returns the extension record, or 0.
 */
static unsigned move_data_out(const char *path, const struct geom *g, unsigned base)
{
	unsigned char b[65536], e[65536];
	unsigned da, dlen, bused, best = 0, best_room = 0, eused, end, inst;
	struct alist l;
	int entry;

	if (!list_load(path, g, base, &l) || (entry = list_entry(&l, 0x80)) < 0)
		return 0;
	rec_load(path, g, base, b);
	da = attr_off(b, 0x80);
	if (!da)
		return 0;
	for (unsigned o = 0; o + 26 <= l.len && get_le(l.data + o + 4, 2);
	     o += (unsigned)get_le(l.data + o + 4, 2)) {
		unsigned n = (unsigned)get_le(l.data + o + 16, 6);
		if (n != base) {
			rec_load(path, g, n, e);
			if (g->rs - get_le(e + 24, 4) > best_room)
				best = n, best_room = g->rs - (unsigned)get_le(e + 24, 4);
		}
	}
	dlen = (unsigned)get_le(b + da + 4, 4);
	if (!best || best_room < dlen)
		return 0;
	rec_load(path, g, best, e);
	eused = (unsigned)get_le(e + 24, 4);
	end = eused - 8;
	CHECK(get_le(e + end, 4) == 0xFFFFFFFFu);
	memmove(e + end + dlen, e + end, 8);
	memcpy(e + end, b + da, dlen);
	inst = (unsigned)get_le(e + 40, 2);
	put_le(e + end + 14, inst, 2);
	put_le(e + 40, inst + 1, 2);
	put_le(e + 24, eused + dlen, 4);
	bused = (unsigned)get_le(b + 24, 4);
	memmove(b + da, b + da + dlen, bused - da - dlen);
	put_le(b + 24, bused - dlen, 4);
	rec_store(path, g, best, e);
	rec_store(path, g, base, b);
	put_le(l.data + entry + 16, best | get_le(e + 16, 2) << 48, 8);
	put_le(l.data + entry + 24, inst, 2);
	list_store(path, g, base, &l);
	return best;
}

/* Attribute lists: a hiberfil.sys with 30 hard links has one (ntfs-3g
 * makes it non-resident), and its $DATA is moved into an extension record;
 * lists that point elsewhere, loop or lie about their extents leave the
 * question open (forced: a warning), never a crash. */
static void test_hostile_attribute_list(void)
{
	char path[32], cmd[256];
	struct geom g;
	struct fs_info info;
	struct im_err err;
	struct alist l;
	unsigned char rec[65536];
	unsigned base = 0, ext;
	int r, entry;

	if (!have_ntfsprogs() || !can_mount() || !make_image(path, "", 64 * MiB))
		return;
	put_hiberfil(path, "hiberfil.sys", "HIBR", 65536,
		     "for i in $(seq 1 30); do ln $D/hiberfil.sys $D/sub/a-long-hard-link-name-$i; done");
	g = geometry(path);
	/* The file: the user record (from 64 on) with a list. */
	for (unsigned n = 64; n < 71 && !base; n++) {
		rec_load(path, &g, n, rec);
		if (memcmp(rec, "FILE", 4) == 0 && get_le(rec + 32, 8) == 0 && attr_off(rec, 0x20) &&
		    attr_off(rec, 0x80))
			base = n;
	}
	CHECK(base != 0);
	ext = base ? move_data_out(path, &g, base) : 0;
	CHECK(ext != 0);
	if (!ext || !list_load(path, &g, base, &l) || (entry = list_entry(&l, 0x80)) < 0) {
		unlink(path);
		return;
	}
	/* libntfs-3g reads the moved data. */
	snprintf(cmd, sizeof(cmd), "ntfscat %s /hiberfil.sys 2>/dev/null | head -c 4 | grep -q HIBR", path);
	CHECK(system(cmd) == 0);
	r = examine(path, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, "begins with \"HIBR\"") != NULL);

	{
		/* recno 0: a field of the list entry; else of that record. */
		const struct { const char *what; unsigned recno; int off; unsigned width; uint64_t val; } bad[] = {
			{ "entry length 0", 0, 4, 2, 0 },
			{ "entry length huge", 0, 4, 2, 0xfff0 },
			{ "entry points at record 0", 0, 16, 8, 0 },
			{ "entry points at the base", 0, 16, 8, base },
			{ "entry points past the MFT", 0, 16, 8, 0xffffffffffull },
			{ "entry lowest VCN 7", 0, 8, 8, 7 },
			{ "entry name past the entry", 0, 6, 2, 0xff01 },
			{ "extension of another file", ext, 32, 8, 3 },
			{ "extension not in use", ext, 22, 2, 0 },
			{ "extension's data at VCN 1", ext, -1, 8, 1 },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			for (int forced = 0; forced < 2; forced++) {
				if (bad[i].recno == 0) {
					struct alist damaged = l;
					put_le(damaged.data + entry + bad[i].off, bad[i].val, bad[i].width);
					list_store(path, &g, base, &damaged);
					r = examine(path, forced, &info, &err);
					list_store(path, &g, base, &l);
				} else {
					unsigned off = (unsigned)bad[i].off;
					if (bad[i].off < 0) {
						rec_load(path, &g, ext, rec);
						off = attr_off(rec, 0x80) + 16;
					}
					r = examine_rec(path, bad[i].recno, off, bad[i].val, bad[i].width,
							false, forced, &info, &err);
				}
				if (r != (forced ? 0 : -EUCLEAN))
					fprintf(stderr, "  %s%s: got %d (%s)\n", bad[i].what,
						forced ? " (forced)" : "", r, err.msg);
				if (!forced) {
					CHECK(r == -EUCLEAN);
					CHECK(strstr(err.msg, "cannot tell") != NULL);
				} else {
					CHECK(r == 0);
					if (r == 0) {
						CHECK(strstr(info.warning, "cannot tell") != NULL);
						fs_info_free(&info);
					}
				}
			}
		}
	}
	/* Intact again. */
	CHECK(examine(path, false, &info, &err) == -EUCLEAN);
	CHECK(strstr(err.msg, "begins with \"HIBR\"") != NULL);
	unlink(path);
}

/* Random bytes over the boot sector and records 0, 3, 5 and 6 (their
 * update sequences kept valid half the time, so that the damage reaches the
 * parser): never a crash, a hang or a map past the geometry. */
static void test_fuzz(void)
{
	int iters = fuzz_rounds("TEST_NTFS_FUZZ", 600), ok = 0, failed = 0;
	const unsigned recs[] = { 0, 3, 5, 6 };
	unsigned seed = 4242;
	char path[32];
	struct geom g;
	unsigned char orig[4][4096], boot[512];

	if (!have_ntfsprogs() || !make_image(path, "", 64 * MiB))
		return;
	g = geometry(path);
	read_at(path, 0, boot, sizeof(boot));
	for (int k = 0; k < 4; k++)
		read_at(path, rec_off(&g, recs[k]), orig[k], g.rs);
	for (int it = 0; it < iters; it++) {
		struct fs_info info;
		struct im_err err;
		unsigned k = (unsigned)rand_r(&seed) % 5, n = 1 + (unsigned)rand_r(&seed) % 6;
		int r;

		if (k == 4) {
			unsigned char bs[512];

			memcpy(bs, boot, sizeof(bs));
			for (unsigned j = 0; j < n; j++)
				bs[rand_r(&seed) % 0x50] = (unsigned char)rand_r(&seed);
			write_at(path, 0, bs, sizeof(bs));
		} else {
			unsigned char rec[4096];

			rec_load(path, &g, recs[k], rec);
			for (unsigned j = 0; j < n; j++) {
				unsigned span = rand_r(&seed) % 2 ? g.rs : 0x100;
				unsigned at = (unsigned)rand_r(&seed) % span;
				rec[at] = fuzz_byte(&seed);
			}
			if (rand_r(&seed) % 4)
				rec_store(path, &g, recs[k], rec);
			else
				write_at(path, rec_off(&g, recs[k]), rec, g.rs);
		}
		r = examine(path, rand_r(&seed) % 2, &info, &err);
		CHECK(valid_result(r, &err) || r < 0);
		count_fuzzed(r, &info, &err, &ok, &failed);
		if (k == 4)
			write_at(path, 0, boot, sizeof(boot));
		else
			write_at(path, rec_off(&g, recs[k]), orig[k], g.rs);
	}
	printf("# fuzz: %d examined, %d refused\n", ok, failed);
	CHECK(ok > 0 && failed > 0);
	check_image(path, "after fuzzing");
	unlink(path);
}

/* An 8 GiB volume (2M clusters) is examined in well under a second. */
static void test_large_fast(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	double s;
	int r;

	if (!have_ntfsprogs() || !make_image(path, "", 8192 * MiB))
		return;
	r = examine_timed(&fs_plugin_ntfs, path, "8 GiB NTFS", &info, &err, &s);
	CHECK(r == 0);
	if (r == 0) {
		CHECK(s < 1.0);
		CHECK_EQ_U(info.block_count, 2097152);
		fs_info_free(&info);
	}
	check_image(path, "8 GiB");
	unlink(path);
}

UNIT_MAIN(UNIT(test_4k), UNIT(test_512), UNIT(test_64k), UNIT(test_2m), UNIT(test_4k_sectors),
	  UNIT(test_1g), UNIT(test_unaligned_end), UNIT(test_populated), UNIT(test_dirty),
	  UNIT(test_hibernated), UNIT(test_hostile_boot), UNIT(test_hostile_records),
	  UNIT(test_hostile_index_block), UNIT(test_bitmap_cross_check),
	  UNIT(test_hostile_attribute_list), UNIT(test_fuzz), UNIT(test_large_fast))
