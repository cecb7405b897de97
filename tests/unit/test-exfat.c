/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The exFAT plugin on volumes made by mkfs.exfat (exfatprogs), filled
 * through exfat-fuse on a loop device when running as root.  The expected
 * used bytes come from dump.exfat (cluster heap offset, cluster count, free
 * clusters); a copy holding only the blocks the bitmap marks must pass
 * `fsck.exfat -n` and, as root, give the files back byte for byte.  Then
 * hostile copies: every boot sector field the parser reads (with the boot
 * checksum recomputed, so the field itself is what is tested), the root
 * directory's bitmap entry, the FAT chains, the checksum, the volume flags,
 * and a synthetic TexFAT volume with two FATs and two bitmaps.
 */
#include "unit-fs.h"

extern const struct fs_plugin fs_plugin_exfat;

static char tmpdir[64];

/* Not a skip: exfatprogs is in `make deps`, and a missing tool must not look
 * like a pass. */
static bool setup_dir(void)
{
	return setup_tmpdir(tmpdir, sizeof(tmpdir), "mkfs.exfat fsck.exfat dump.exfat",
			    "exfatprogs (mkfs.exfat, fsck.exfat, dump.exfat)",
			    "/tmp/imager-test-exfat-XXXXXX");
}

static void cleanup_dir(void)
{
	remove_tmpdir(tmpdir);
}

/* Root with a loop driver and exfat-fuse: else the parts that write files
 * are skipped, and say so. */
static bool can_mount(void)
{
	static int can = -1;

	return root_and(&can, "command -v mount.exfat-fuse >/dev/null 2>&1 && "
			"command -v losetup >/dev/null 2>&1 && losetup -f >/dev/null 2>&1 && "
			"test -c /dev/fuse",
			"SKIP: (part) writing files needs root, a free loop device and exfat-fuse");
}

/* Recompute the main boot region's checksum (sectors 0..10, skipping
 * VolumeFlags and PercentInUse) into sector 11, as mkfs.exfat does. */
static bool fix_checksum(const char *path)
{
	unsigned shift = (unsigned)read_le(path, 108, 1);
	size_t ss = (size_t)1 << (shift >= 9 && shift <= 12 ? shift : 9);
	unsigned char *buf = malloc(12 * ss);
	uint32_t sum = 0;
	bool ok;

	if (!buf || !read_at(path, 0, buf, 12 * ss)) {
		free(buf);
		return false;
	}
	for (size_t i = 0; i < 11 * ss; i++) {
		if (i == 106 || i == 107 || i == 112)
			continue;
		sum = ((sum & 1) ? 0x80000000u : 0) + (sum >> 1) + buf[i];
	}
	for (size_t i = 0; i < ss; i += 4) {
		buf[11 * ss + i] = (unsigned char)sum;
		buf[11 * ss + i + 1] = (unsigned char)(sum >> 8);
		buf[11 * ss + i + 2] = (unsigned char)(sum >> 16);
		buf[11 * ss + i + 3] = (unsigned char)(sum >> 24);
	}
	ok = write_at(path, 11 * ss, buf + 11 * ss, ss);
	free(buf);
	return ok;
}

static int examine(const char *path, bool force, bool with_plugin,
		   struct fs_info *info, struct im_err *err)
{
	return examine_path(with_plugin ? &fs_plugin_exfat : NULL, path, force, info, err);
}

/* ---- what exfatprogs says about a volume ---- */

struct exfat_facts {
	uint64_t volume_sectors;
	uint64_t fat_offset, fat_length;   /* sectors */
	uint64_t heap_offset;              /* sectors */
	uint64_t cluster_count, free_clusters;
	uint64_t root_cluster, bitmap_cluster, bitmap_bytes, upcase_cluster;
	unsigned sector_shift, cluster_shift;   /* cluster_shift: bytes */
};

static bool get_facts(const char *img, struct exfat_facts *f)
{
	static char out[1 << 16];
	unsigned found = 0;
	char *line, *save = NULL;

	memset(f, 0, sizeof(*f));
	if (sh_out(out, sizeof(out), "dump.exfat %s", img) != 0) {
		fprintf(stderr, "  dump.exfat %s failed:\n%s\n", img, out);
		return false;
	}
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long v;
		const char *colon = strchr(line, ':');

		if (!colon || sscanf(colon + 1, " %llu", &v) != 1)
			continue;
#define FACT(prefix, field, bit) \
		if (strncmp(line, prefix, strlen(prefix)) == 0) { f->field = v; found |= bit; continue; }
		FACT("Volume Length(sectors)", volume_sectors, 1)
		FACT("FAT Offset(sector offset)", fat_offset, 2)
		FACT("FAT Length(sectors)", fat_length, 4)
		FACT("Cluster Heap Offset", heap_offset, 8)
		FACT("Cluster Count", cluster_count, 16)
		FACT("Root Cluster", root_cluster, 32)
		FACT("Sector Size Bits", sector_shift, 64)
		FACT("Sector per Cluster bits", cluster_shift, 128)
		FACT("Bitmap start cluster", bitmap_cluster, 256)
		FACT("Bitmap size", bitmap_bytes, 512)
		FACT("Upcase table start cluster", upcase_cluster, 1024)
		FACT("Free Clusters", free_clusters, 2048)
#undef FACT
	}
	if (found != 4095) {
		fprintf(stderr, "  cannot parse dump.exfat for %s (found 0x%x)\n", img, found);
		return false;
	}
	f->cluster_shift += f->sector_shift;
	return true;
}

static uint64_t expected_used_bytes(const struct exfat_facts *f)
{
	return (f->heap_offset << f->sector_shift) +
	       ((f->cluster_count - f->free_clusters) << f->cluster_shift);
}

static uint64_t cluster_off(const struct exfat_facts *f, uint64_t c)
{
	return (f->heap_offset << f->sector_shift) + ((c - 2) << f->cluster_shift);
}

/* Byte offset of FAT entry c of FAT n (0 or 1). */
static uint64_t fat_entry_off(const struct exfat_facts *f, unsigned n, uint64_t c)
{
	return ((f->fat_offset + n * f->fat_length) << f->sector_shift) + 4 * c;
}

/* ---- building volumes ---- */

/* mkfs.exfat on a file of `mib` MiB, first filled with pseudo-random bytes
 * (old data) when `random` is set, else sparse. */
static bool make_exfat(const char *img, unsigned mib, bool random, const char *opts)
{
	if (random) {
		if (!write_random_file(img, (size_t)mib << 20, mib * 7919u))
			return false;
	} else if (sh("rm -f %s && truncate -s %uM %s", img, mib, img) != 0) {
		return false;
	}
	if (sh("mkfs.exfat %s %s >/dev/null 2>&1", opts, img) != 0) {
		fprintf(stderr, "  mkfs.exfat %s %s failed\n", opts, img);
		return false;
	}
	return true;
}

/* dump.exfat's facts, else a failed check and the folder removed. */
static bool facts_or_cleanup(const char *img, struct exfat_facts *f)
{
	if (get_facts(img, f))
		return true;
	CHECK(!"dump.exfat facts");
	cleanup_dir();
	return false;
}

/* The temporary folder, and in it a volume NAME (img: 128 bytes) as
 * make_exfat() makes it; with dump.exfat's facts when f is given. */
static bool new_volume(char *img, const char *name, unsigned mib, bool random, const char *opts,
		       struct exfat_facts *f)
{
	if (!setup_dir())
		return false;
	snprintf(img, 128, "%s/%s", tmpdir, name);
	CHECK(make_exfat(img, mib, random, opts));
	return !f || facts_or_cleanup(img, f);
}

/* The files written into a volume; names relative to src/ and the volume. */
static const char *const kept_files[] = { "big1", "sub/mid", "sub/deep/small", "sub/s039" };

static bool write_sources(void)
{
	char path[160];
	bool ok = sh("rm -rf %s/src && mkdir -p %s/src/sub/deep", tmpdir, tmpdir) == 0;

#define SRC(name, len, seed) \
	(snprintf(path, sizeof(path), "%s/src/%s", tmpdir, name), write_random_file(path, len, seed))
	ok = ok && SRC("big1", 3000001, 1) && SRC("gone1", 700000, 2) && SRC("sub/mid", 300000, 3);
	ok = ok && SRC("sub/deep/small", 5000, 4) && SRC("gone2", 90000, 5);
	for (unsigned i = 0; ok && i < 40; i++) {
		char name[32];
		snprintf(name, sizeof(name), "sub/s%03u", i);
		ok = SRC(name, 100 + 997 * i, 100 + i);
	}
#undef SRC
	return ok;
}

/* Attach, mount through exfat-fuse (a block device: loop), run `cmd` in
 * the mount point ($M), unmount, detach.  Returns cmd's status. */
static int with_mount(const char *img, const char *opts, const char *cmd)
{
	char dev[64] = "", mnt[128];
	int r = -1;

	snprintf(mnt, sizeof(mnt), "%s/mnt", tmpdir);
	if (sh_out(dev, sizeof(dev), "losetup -f --show %s", img) != 0 || dev[0] != '/')
		return -1;
	dev[strcspn(dev, "\n")] = '\0';
	if (sh("mkdir -p %s && mount.exfat-fuse %s %s %s >/dev/null 2>&1", mnt, opts, dev, mnt) == 0) {
		r = sh("cd %s && M=%s && %s", tmpdir, mnt, cmd);
		sh("umount %s", mnt);
	}
	sh("losetup -d %s", dev);
	return r;
}

/* Files in, two deleted afterwards so the used clusters have holes. */
static bool populate(const char *img)
{
	return write_sources() &&
	       with_mount(img, "", "cp -r src/. $M/ && rm $M/gone1 $M/gone2 && mkdir $M/empty") == 0;
}

/* The copy of the marked blocks passes fsck.exfat -n and, when `files`,
 * holds every kept file byte for byte. */
static bool round_trip_ok(const char *img, const struct fs_info *info, bool drop_last_run,
			  bool files)
{
	char copy[128], cmd[512];
	size_t n = 0;

	snprintf(copy, sizeof(copy), "%s/copy.img", tmpdir);
	if (!copy_used(img, info, copy, drop_last_run) ||
	    sh("fsck.exfat -n %s >/dev/null 2>&1", copy) != 0)
		return false;
	if (!files)
		return true;
	for (size_t i = 0; i < sizeof(kept_files) / sizeof(kept_files[0]); i++)
		n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, "cmp -s src/%s $M/%s && ",
				      kept_files[i], kept_files[i]);
	snprintf(cmd + n, sizeof(cmd) - n, "test -d $M/empty && ! test -e $M/gone1");
	return with_mount(copy, "-o ro", cmd) == 0;
}

/* The plugin's count against dump.exfat's, the geometry, and libblkid
 * plus the registry choosing this plugin.  mkfs.exfat writes PercentInUse
 * 0 whatever it allocated; where that rounds to more than 0, the plugin
 * warns (percent_stale). */
static void check_counts(const char *img, const struct exfat_facts *f, uint32_t block_size,
			 bool percent_stale)
{
	struct fs_info info;
	struct im_err err;
	int r;

	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, 0);
	if (r == 0) {
		CHECK_EQ_U(info.block_size, block_size);
		CHECK_EQ_U(info.block_count, (f->volume_sectors << f->sector_shift) / block_size);
		CHECK_EQ_U(info.used_blocks * info.block_size, expected_used_bytes(f));
		if (percent_stale) {
			CHECK(strncmp(info.warning, "PercentInUse is 0%", 18) == 0);
		} else {
			if (info.warning[0])
				fprintf(stderr, "  warning: %s\n", info.warning);
			CHECK_STR(info.warning, "");
		}
	} else {
		fprintf(stderr, "  %s\n", err.msg);
	}
	fs_info_free(&info);
	r = examine(img, false, false, &info, &err);
	CHECK_EQ_U(r, 0);
	CHECK(info.plugin == &fs_plugin_exfat);
	CHECK_STR(info.type, "exfat");
	fs_info_free(&info);
}

/* ---- fresh volumes (no root needed) ---- */

static void check_fresh(unsigned mib, bool random, const char *opts, uint32_t block_size,
			bool percent_stale)
{
	char img[128];
	struct exfat_facts f;
	struct fs_info info;
	struct im_err err;

	if (!new_volume(img, "fresh.img", mib, random, opts, &f))
		return;
	/* Bitmap, up-case table and root directory. */
	CHECK(f.cluster_count - f.free_clusters >= 3);
	check_counts(img, &f, block_size, percent_stale);
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK(round_trip_ok(img, &info, false, false));
	fs_info_free(&info);
	cleanup_dir();
}

static void test_fresh_4k(void) { check_fresh(64, true, "", 4096, false); }
static void test_fresh_512b_clusters(void) { check_fresh(16, true, "-c 512", 512, false); }
static void test_fresh_128k_clusters(void) { check_fresh(512, false, "-c 128K", 128 << 10, false); }
/* Clusters of 32 MiB, the largest: the bitmap unit stops at 1 MiB.  Three
 * of 62 clusters used: mkfs's PercentInUse of 0 is stale. */
static void test_fresh_32m_clusters(void) { check_fresh(2048, false, "-c 32M", 1 << 20, true); }

/* ---- populated volumes (root: loop device and exfat-fuse) ---- */

static void check_populated(unsigned mib, const char *opts, uint32_t block_size)
{
	char img[128];
	struct exfat_facts f;
	struct fs_info info;
	struct im_err err;
	int r;

	if (!can_mount() || !new_volume(img, "full.img", mib, true, opts, NULL))
		return;
	CHECK(populate(img));
	CHECK_EQ_U(sh("fsck.exfat -n %s >/dev/null 2>&1", img), 0);
	if (!facts_or_cleanup(img, &f))
		return;
	CHECK(f.cluster_count - f.free_clusters > 20);
	check_counts(img, &f, block_size, false);
	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, 0);
	if (r == 0) {
		/* Only the marked blocks: fsck clean and the files back; all
		 * but the last run of them: not, so the check has teeth. */
		CHECK(round_trip_ok(img, &info, false, true));
		CHECK(!round_trip_ok(img, &info, true, true));
	}
	fs_info_free(&info);
	cleanup_dir();
}

static void test_populated_4k(void) { check_populated(64, "", 4096); }
static void test_populated_16k(void) { check_populated(48, "-c 16K", 16384); }

/* 4 KiB logical sectors: mkfs.exfat takes the sector size from the
 * device, so it runs on a loop device with 4 KiB blocks. */
static void test_4k_sectors(void)
{
	char img[128], dev[64] = "";
	struct exfat_facts f;
	struct fs_info info;
	struct im_err err;

	if (!can_mount())
		return;
	if (!setup_dir())
		return;
	snprintf(img, sizeof(img), "%s/4kn.img", tmpdir);
	CHECK(write_random_file(img, 40u << 20, 4096));
	if (sh_out(dev, sizeof(dev), "losetup -b 4096 -f --show %s", img) == 0 && dev[0] == '/') {
		dev[strcspn(dev, "\n")] = '\0';
		CHECK_EQ_U(sh("mkfs.exfat -c 64K %s >/dev/null 2>&1", dev), 0);
		sh("losetup -d %s", dev);
	} else {
		CHECK(!"losetup -b 4096");
	}
	if (get_facts(img, &f)) {
		CHECK_EQ_U(f.sector_shift, 12);
		check_counts(img, &f, 65536, false);
		CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
		CHECK(round_trip_ok(img, &info, false, false));
		fs_info_free(&info);
	} else {
		CHECK(!"dump.exfat facts");
	}
	cleanup_dir();
}

/* ---- hostile volumes ---- */

/* Copy base, apply `len` little-endian bytes of v at off (and the boot
 * checksum again when `resum`), and expect `code` from the plugin, and from
 * the registry a raw copy (or the same -ENOTSUP). */
static void check_refused(const char *base, const char *what, uint64_t off, size_t len,
			  uint64_t v, bool resum, int code)
{
	char img[128];
	struct fs_info info;
	struct im_err err;
	int r, before = unit_failures;

	snprintf(img, sizeof(img), "%s/hostile.img", tmpdir);
	copy_patched(base, img, off, len, v);
	if (resum)
		CHECK(fix_checksum(img));
	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, code);
	CHECK(err.msg[0] != '\0');
	fs_info_free(&info);
	if (code == -ENOTSUP)
		expect_registry(img, code, NULL);
	else if (off < 512)
		/* A bad boot sector or checksum: probe() declines, raw copy. */
		expect_registry(img, 0, &fs_plugin_raw);
	else
		/* Past the boot sector: ours, and refused for the same reason. */
		expect_registry(img, code, NULL);
	say_case(before, what, &err);
}

static void test_hostile_boot_sector(void)
{
	char base[128];
	struct fs_info info;
	struct im_err err;

	if (!new_volume(base, "base.img", 32, false, "", NULL))
		return;
	/* The base is accepted, so every refusal below is the patch's. */
	CHECK_EQ_U(examine(base, false, true, &info, &err), 0);
	fs_info_free(&info);

	check_refused(base, "fs name", 3, 1, 'F', true, -EINVAL);
	check_refused(base, "boot signature", 510, 2, 0x55AA, true, -EINVAL);
	check_refused(base, "MustBeZero", 40, 1, 1, true, -EINVAL);
	check_refused(base, "BytesPerSectorShift 8", 108, 1, 8, true, -EINVAL);
	check_refused(base, "BytesPerSectorShift 13", 108, 1, 13, true, -EINVAL);
	check_refused(base, "BytesPerSectorShift 255", 108, 1, 255, true, -EINVAL);
	check_refused(base, "SectorsPerClusterShift 17 (64 MiB)", 109, 1, 17, true, -EINVAL);
	check_refused(base, "SectorsPerClusterShift 255", 109, 1, 255, true, -EINVAL);
	check_refused(base, "SectorsPerClusterShift 4: too many clusters for the heap", 109, 1,
		      4, true, -EINVAL);
	check_refused(base, "revision 2.0", 104, 2, 0x0200, true, -ENOTSUP);
	check_refused(base, "revision 1.100", 104, 2, 0x0164, true, -ENOTSUP);
	check_refused(base, "NumberOfFats 0", 110, 1, 0, true, -EINVAL);
	check_refused(base, "NumberOfFats 3", 110, 1, 3, true, -EINVAL);
	check_refused(base, "VolumeLength 0", 72, 8, 0, true, -EINVAL);
	check_refused(base, "VolumeLength past the file", 72, 8, (64u << 20) / 512, true, -EINVAL);
	check_refused(base, "VolumeLength 2^64-1", 72, 8, UINT64_MAX, true, -EINVAL);
	check_refused(base, "FatOffset 0", 80, 4, 0, true, -EINVAL);
	check_refused(base, "FatOffset 12 (backup boot region)", 80, 4, 12, true, -EINVAL);
	check_refused(base, "FatOffset 2^32-1", 80, 4, 0xFFFFFFFFu, true, -EINVAL);
	check_refused(base, "FatLength 0", 84, 4, 0, true, -EINVAL);
	check_refused(base, "FatLength 1", 84, 4, 1, true, -EINVAL);
	check_refused(base, "FatLength 2^32-1", 84, 4, 0xFFFFFFFFu, true, -EINVAL);
	check_refused(base, "ClusterHeapOffset 0", 88, 4, 0, true, -EINVAL);
	check_refused(base, "ClusterHeapOffset 2^32-1", 88, 4, 0xFFFFFFFFu, true, -EINVAL);
	check_refused(base, "ClusterCount 0", 92, 4, 0, true, -EINVAL);
	check_refused(base, "ClusterCount 2^32-1", 92, 4, 0xFFFFFFFFu, true, -EINVAL);
	check_refused(base, "ClusterCount one past the heap", 92, 4,
		      ((32u << 20) - (read_le(base, 88, 4) << 9)) / 4096 + 1, true, -EINVAL);
	check_refused(base, "root cluster 0", 96, 4, 0, true, -EINVAL);
	check_refused(base, "root cluster 1", 96, 4, 1, true, -EINVAL);
	check_refused(base, "root cluster past the heap", 96, 4, read_le(base, 92, 4) + 2,
		      true, -EINVAL);
	check_refused(base, "ActiveFat 1 with one FAT", 106, 2, 1, false, -EINVAL);
	/* A field changed without the checksum: refused as unclean, and the
	 * registry copies it raw (probe declines a mis-summed region). */
	check_refused(base, "ClusterCount changed, checksum not", 92, 4,
		      read_le(base, 92, 4) - 1, false, -EUCLEAN);

	/* Random boot sectors with the name and signature kept. */
	for (uint32_t seed = 1; seed <= 8; seed++) {
		char img[128], junk[128];
		int r;

		snprintf(img, sizeof(img), "%s/random.img", tmpdir);
		snprintf(junk, sizeof(junk), "%s/junk", tmpdir);
		CHECK(copy_file(base, img));
		CHECK(write_random_file(junk, 512, seed));
		CHECK_EQ_U(sh("dd if=%s of=%s conv=notrunc status=none", junk, img), 0);
		CHECK(write_at(img, 3, "EXFAT   ", 8));
		CHECK(patch_le(img, 510, 2, 0xAA55));
		if (seed & 1) {
			/* Half of them with MustBeZero kept, so later fields
			 * are reached, and the checksum fixed. */
			CHECK(write_at(img, 11, (const char[53]){ 0 }, 53));
			CHECK(fix_checksum(img));
		}
		r = examine(img, false, true, &info, &err);
		CHECK(r < 0);
		fs_info_free(&info);
		r = examine(img, false, false, &info, &err);
		CHECK(r == 0 || r == -ENOTSUP);
		fs_info_free(&info);
	}

	/* The file shorter than the volume, a file of zeros, a tiny file. */
	{
		char img[128];

		snprintf(img, sizeof(img), "%s/short.img", tmpdir);
		CHECK_EQ_U(sh("cp --sparse=always %s %s && truncate -s 20M %s", base, img, img), 0);
		CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
		CHECK(strstr(err.msg, "does not fit") != NULL);
		fs_info_free(&info);
		CHECK_EQ_U(sh("rm -f %s && truncate -s 2M %s", img, img), 0);
		CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
		fs_info_free(&info);
		CHECK_EQ_U(sh("truncate -s 100K %s", img), 0);
		CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
		fs_info_free(&info);
	}
	cleanup_dir();
}

/* Copy base, run patches through `edit`, and expect `code` (with a message
 * naming `words`), then when forced: `forced_code`. */
static void check_damaged(const char *base, const char *what,
			  bool (*edit)(const char *img, const struct exfat_facts *f),
			  const struct exfat_facts *f, int code, const char *words,
			  int forced_code)
{
	char img[128];
	struct fs_info info;
	struct im_err err;
	int r, before = unit_failures;

	snprintf(img, sizeof(img), "%s/damaged.img", tmpdir);
	CHECK(copy_file(base, img));
	CHECK(edit(img, f));
	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, code);
	if (words)
		CHECK(strstr(err.msg, words) != NULL);
	fs_info_free(&info);
	r = examine(img, true, true, &info, &err);
	CHECK_EQ_U(r, forced_code);
	fs_info_free(&info);
	say_case(before, what, &err);
}

/* Root directory entry i (32 bytes each) of the volume. */
static uint64_t root_entry_off(const struct exfat_facts *f, unsigned i)
{
	return cluster_off(f, f->root_cluster) + 32 * i;
}

/* The root directory entry of the given type. */
static uint64_t find_root_entry(const char *img, const struct exfat_facts *f, unsigned type)
{
	for (unsigned i = 0; i < 64; i++)
		if (read_le(img, root_entry_off(f, i), 1) == type)
			return root_entry_off(f, i);
	return 0;
}

static bool bitmap_entry_gone(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, find_root_entry(img, f, 0x81), 1, 0x01);
}
static bool bitmap_short(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, find_root_entry(img, f, 0x81) + 24, 8, f->bitmap_bytes - 1);
}
static bool bitmap_at_0(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, find_root_entry(img, f, 0x81) + 20, 4, 0);
}
static bool bitmap_past_heap(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, find_root_entry(img, f, 0x81) + 20, 4, f->cluster_count + 2);
}
static bool second_bitmap_entry(const char *img, const struct exfat_facts *f)
{
	unsigned char e[32];

	return read_at(img, find_root_entry(img, f, 0x81), e, 32) &&
	       write_at(img, root_entry_off(f, 3), e, 32);
}
static bool bitmap_chain_free(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, fat_entry_off(f, 0, f->bitmap_cluster), 4, 0);
}
static bool bitmap_chain_short(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, fat_entry_off(f, 0, f->bitmap_cluster), 4, 0xFFFFFFFFu);
}
static bool bitmap_chain_bad(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, fat_entry_off(f, 0, f->bitmap_cluster), 4, 0xFFFFFFF7u);
}
static bool bitmap_chain_past_heap(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, fat_entry_off(f, 0, f->bitmap_cluster), 4, f->cluster_count + 2);
}
static bool root_chain_loop(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, fat_entry_off(f, 0, f->root_cluster), 4, f->root_cluster);
}
/* A full root cluster (no end entry) chained to itself. */
static bool root_full_loop(const char *img, const struct exfat_facts *f)
{
	bool ok = root_chain_loop(img, f);

	for (unsigned i = 3; ok && i < (1u << f->cluster_shift) / 32; i++)
		ok = patch_le(img, root_entry_off(f, i), 1, 0x05);   /* deleted entries */
	return ok;
}
static bool root_bit_clear(const char *img, const struct exfat_facts *f)
{
	uint64_t bit = f->root_cluster - 2, off = cluster_off(f, f->bitmap_cluster) + bit / 8;
	uint64_t byte = read_le(img, off, 1);

	return patch_le(img, off, 1, byte & ~(1u << (bit % 8)));
}
static bool bitmap_bit_clear(const char *img, const struct exfat_facts *f)
{
	uint64_t bit = f->bitmap_cluster - 2, off = cluster_off(f, f->bitmap_cluster) + bit / 8;
	uint64_t byte = read_le(img, off, 1);

	return patch_le(img, off, 1, byte & ~(1u << (bit % 8)));
}
static bool upcase_bit_clear(const char *img, const struct exfat_facts *f)
{
	uint64_t bit = f->upcase_cluster - 2, off = cluster_off(f, f->bitmap_cluster) + bit / 8;
	uint64_t byte = read_le(img, off, 1);

	return patch_le(img, off, 1, byte & ~(1u << (bit % 8)));
}
static bool upcase_huge(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, find_root_entry(img, f, 0x82) + 24, 8, UINT64_MAX);
}
static bool upcase_past_heap(const char *img, const struct exfat_facts *f)
{
	return patch_le(img, find_root_entry(img, f, 0x82) + 20, 4, 0xFFFFFFF0u);
}

static void test_hostile_structures(void)
{
	char base[128];
	struct exfat_facts f;
	struct fs_info info;
	struct im_err err;

	/* 512 MiB of 4 KiB clusters: a bitmap of 16 KiB, 4 clusters long. */
	if (!new_volume(base, "base.img", 512, false, "-c 4K", &f))
		return;
	CHECK(f.bitmap_bytes > 3u << f.cluster_shift);
	CHECK(find_root_entry(base, &f, 0x81) != 0 && find_root_entry(base, &f, 0x82) != 0);
	CHECK_EQ_U(read_le(base, root_entry_off(&f, 3), 1), 0);   /* the end entry */
	CHECK_EQ_U(examine(base, false, true, &info, &err), 0);
	fs_info_free(&info);

	check_damaged(base, "no bitmap entry", bitmap_entry_gone, &f, -EINVAL,
		      "no allocation bitmap", -EINVAL);
	check_damaged(base, "bitmap one byte short", bitmap_short, &f, -EINVAL, "too short",
		      -EINVAL);
	check_damaged(base, "bitmap at cluster 0", bitmap_at_0, &f, -EINVAL, "out of range",
		      -EINVAL);
	check_damaged(base, "bitmap past the heap", bitmap_past_heap, &f, -EINVAL,
		      "out of range", -EINVAL);
	check_damaged(base, "two first bitmaps", second_bitmap_entry, &f, -EINVAL,
		      "two allocation bitmap", -EINVAL);
	check_damaged(base, "bitmap chain: free link", bitmap_chain_free, &f, -EINVAL, "free",
		      -EINVAL);
	check_damaged(base, "bitmap chain: ends early", bitmap_chain_short, &f, -EINVAL,
		      "chain ends", -EINVAL);
	check_damaged(base, "bitmap chain: bad cluster", bitmap_chain_bad, &f, -EINVAL, "bad",
		      -EINVAL);
	check_damaged(base, "bitmap chain: past the heap", bitmap_chain_past_heap, &f, -EINVAL,
		      "out of range", -EINVAL);
	check_damaged(base, "root chain loops (after the end entry)", root_chain_loop, &f,
		      -EINVAL, "loop", -EINVAL);
	/* (Seen as the bitmap entry met twice, or as a loop.) */
	check_damaged(base, "root chain loops (full clusters)", root_full_loop, &f, -EINVAL,
		      NULL, -EINVAL);
	check_damaged(base, "up-case table of 2^64-1 bytes", upcase_huge, &f, -EUCLEAN,
		      "fsck.exfat", 0);
	check_damaged(base, "up-case table past the heap", upcase_past_heap, &f, -EUCLEAN,
		      "fsck.exfat", 0);
	/* Clusters the volume cannot be without, free in the bitmap: refused
	 * as inconsistent; forced, they are copied all the same. */
	check_damaged(base, "root cluster free in the bitmap", root_bit_clear, &f, -EUCLEAN,
		      "root directory cluster", 0);
	check_damaged(base, "bitmap cluster free in the bitmap", bitmap_bit_clear, &f,
		      -EUCLEAN, "allocation bitmap cluster", 0);
	check_damaged(base, "up-case cluster free in the bitmap", upcase_bit_clear, &f,
		      -EUCLEAN, "up-case table cluster", 0);
	{
		char img[128];
		uint64_t clean;

		CHECK_EQ_U(examine(base, false, true, &info, &err), 0);
		clean = info.used_blocks;
		fs_info_free(&info);
		snprintf(img, sizeof(img), "%s/forced.img", tmpdir);
		CHECK(copy_file(base, img));
		CHECK(root_bit_clear(img, &f));
		CHECK_EQ_U(examine(img, true, true, &info, &err), 0);
		CHECK_EQ_U(info.used_blocks, clean);
		CHECK(bitmap_test(&info.used, (cluster_off(&f, f.root_cluster)) / info.block_size));
		CHECK(strstr(info.warning, "forced") != NULL);
		fs_info_free(&info);

		/* A longer bitmap than needed: a warning. */
		CHECK(copy_file(base, img));
		CHECK(patch_le(img, find_root_entry(img, &f, 0x81) + 24, 8, f.bitmap_bytes + 1));
		CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
		CHECK_EQ_U(info.used_blocks, clean);
		CHECK(strstr(info.warning, "longer") != NULL);
		fs_info_free(&info);

		/* Bits past ClusterCount in the last byte are ignored. */
		if (f.cluster_count % 8) {
			uint64_t off = cluster_off(&f, f.bitmap_cluster) + f.cluster_count / 8;

			CHECK(copy_file(base, img));
			CHECK(patch_le(img, off, 1, read_le(img, off, 1) | 0x80));
			CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
			CHECK_EQ_U(info.used_blocks, clean);
			fs_info_free(&info);
		}
	}
	cleanup_dir();
}

/* ---- the boot checksum and the volume flags ---- */

static void test_checksum_and_flags(void)
{
	char base[128], img[128];
	struct fs_info info;
	struct im_err err;
	uint64_t clean;
	int r;

	if (!new_volume(base, "base.img", 32, true, "", NULL))
		return;
	snprintf(img, sizeof(img), "%s/flags.img", tmpdir);
	CHECK_EQ_U(examine(base, false, true, &info, &err), 0);
	clean = info.used_blocks;
	fs_info_free(&info);

	/* A byte of an extended boot sector changed: the checksum catches it. */
	CHECK(copy_file(base, img));
	CHECK(patch_le(img, 512 + 100, 1, read_le(img, 512 + 100, 1) ^ 0x10));
	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, -EUCLEAN);
	CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
	CHECK(strstr(err.msg, "checksum") && strstr(err.msg, "fsck.exfat"));
	fs_info_free(&info);
	r = examine(img, false, false, &info, &err);
	CHECK_EQ_U(r, 0);
	CHECK(info.plugin == &fs_plugin_raw);
	CHECK(strstr(info.warning, "raw") != NULL);
	fs_info_free(&info);
	CHECK_EQ_U(examine(img, true, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, clean);
	CHECK(strstr(info.warning, "forced") != NULL);
	fs_info_free(&info);

	/* VolumeDirty: outside the checksum, so no checksum to fix.  Refused
	 * (exit class fsck) naming the fix; forced, the same blocks. */
	CHECK(copy_file(base, img));
	CHECK(patch_le(img, 106, 2, 0x0002));
	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, -EUCLEAN);
	CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
	CHECK(strstr(err.msg, "dirty") && strstr(err.msg, "fsck.exfat") &&
	      strstr(err.msg, "chkdsk"));
	fs_info_free(&info);
	r = examine(img, false, false, &info, &err);   /* through the registry too */
	CHECK_EQ_U(r, -EUCLEAN);
	fs_info_free(&info);
	CHECK_EQ_U(examine(img, true, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, clean);
	CHECK(strstr(info.warning, "forced") != NULL);
	fs_info_free(&info);

	/* MediaFailure: a warning. */
	CHECK(patch_le(img, 106, 2, 0x0004));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK(strstr(info.warning, "MediaFailure") != NULL);
	fs_info_free(&info);

	/* PercentInUse: a hint.  Wrong: a warning; 0xFF (unknown): nothing. */
	CHECK(patch_le(img, 106, 2, 0));
	CHECK(patch_le(img, 112, 1, 50));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, clean);
	CHECK(strstr(info.warning, "PercentInUse is 50%") != NULL);
	fs_info_free(&info);
	CHECK(patch_le(img, 112, 1, 0xFF));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK_STR(info.warning, "");
	fs_info_free(&info);
	cleanup_dir();
}

/* ---- TexFAT: two FATs, two bitmaps, ActiveFat picks ---- */

/*
 * mkfs.exfat makes one FAT; this turns its volume into a two-FAT one by
 * hand: NumberOfFats 2, the FAT copied after itself (mkfs leaves room
 * before the heap), and a second bitmap in a free cluster X, chained in
 * both FATs and marked in both bitmaps.  The second bitmap also marks ten
 * more clusters, so which bitmap was read shows in the count.
 */
static void test_texfat(void)
{
	char img[128];
	struct exfat_facts f;
	struct fs_info info;
	struct im_err err;
	unsigned char entry[32], *bm = NULL, *fat = NULL;
	uint64_t x, fat_bytes, base_used, bytes;

	if (!new_volume(img, "texfat.img", 64, true, "", &f))
		return;
	fat_bytes = f.fat_length << f.sector_shift;
	CHECK(f.fat_offset + 2 * f.fat_length <= f.heap_offset);
	CHECK(f.bitmap_bytes <= 1u << f.cluster_shift);
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	base_used = info.used_blocks;
	bytes = info.block_size;
	fs_info_free(&info);

	x = 100;   /* free in a fresh volume */
	bm = malloc(f.bitmap_bytes);
	fat = malloc(fat_bytes);
	CHECK(bm && fat);
	if (!bm || !fat)
		goto out;
	CHECK(read_at(img, cluster_off(&f, f.bitmap_cluster), bm, f.bitmap_bytes));
	CHECK_EQ_U(bm[(x - 2) / 8] & (1u << ((x - 2) % 8)), 0);
	bm[(x - 2) / 8] |= (unsigned char)(1u << ((x - 2) % 8));
	CHECK(write_at(img, cluster_off(&f, f.bitmap_cluster), bm, f.bitmap_bytes));
	for (uint64_t c = 200; c < 210; c++)
		bm[(c - 2) / 8] |= (unsigned char)(1u << ((c - 2) % 8));
	CHECK(write_at(img, cluster_off(&f, x), bm, f.bitmap_bytes));
	CHECK(patch_le(img, fat_entry_off(&f, 0, x), 4, 0xFFFFFFFFu));
	CHECK(read_at(img, fat_entry_off(&f, 0, 0), fat, fat_bytes));
	CHECK(write_at(img, fat_entry_off(&f, 1, 0), fat, fat_bytes));
	CHECK(read_at(img, find_root_entry(img, &f, 0x81), entry, 32));
	entry[1] = 1;   /* BitmapFlags: the second bitmap */
	entry[20] = (unsigned char)x;
	entry[21] = entry[22] = entry[23] = 0;
	CHECK(write_at(img, root_entry_off(&f, 3), entry, 32));
	CHECK(patch_le(img, 110, 1, 2));
	CHECK(fix_checksum(img));

	/* ActiveFat 0: the first bitmap, which now also holds X. */
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, base_used + (1u << f.cluster_shift) / bytes);
	fs_info_free(&info);
	/* ActiveFat 1: the second bitmap, ten clusters more. */
	CHECK(patch_le(img, 106, 2, 0x0001));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, base_used + 11 * ((1u << f.cluster_shift) / bytes));
	CHECK(bitmap_test(&info.used, cluster_off(&f, 205) / bytes));
	fs_info_free(&info);
	/* The second FAT is the one followed: break the root's chain in it only. */
	CHECK(patch_le(img, fat_entry_off(&f, 1, f.root_cluster), 4, 0));
	CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
	CHECK(strstr(err.msg, "root directory") != NULL);
	fs_info_free(&info);
	CHECK(patch_le(img, 106, 2, 0x0000));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	fs_info_free(&info);
	/* Two FATs that do not fit before the heap. */
	CHECK(patch_le(img, 84, 4, (f.heap_offset - f.fat_offset) / 2 + 1));
	CHECK(fix_checksum(img));
	CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
	CHECK(strstr(err.msg, "inside the FAT") != NULL);
	fs_info_free(&info);
out:
	free(bm);
	free(fat);
	cleanup_dir();
}

UNIT_MAIN(UNIT(test_fresh_4k), UNIT(test_fresh_512b_clusters), UNIT(test_fresh_128k_clusters),
	  UNIT(test_fresh_32m_clusters), UNIT(test_populated_4k), UNIT(test_populated_16k),
	  UNIT(test_4k_sectors), UNIT(test_hostile_boot_sector), UNIT(test_hostile_structures),
	  UNIT(test_checksum_and_flags), UNIT(test_texfat))
