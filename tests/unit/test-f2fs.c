/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The F2FS plugin on filesystems made by mkfs.f2fs and filled offline by
 * sload.f2fs (f2fs-tools; the kernel here has no f2fs).  The expected count
 * is main_blkaddr + valid_block_count as `fsck.f2fs --dry-run -d 1` prints
 * them, after fsck.f2fs found the source consistent; a copy holding only
 * the marked blocks must pass fsck.f2fs and give files back byte for byte
 * through dump.f2fs.  Then every layout the plugin reads, made real by
 * hand where mkfs.f2fs does not make it: the SIT journal of normal
 * summaries, the second SIT copy chosen by the version bitmap, the bitmap
 * in cp_payload blocks, the large NAT bitmap layout (mkfs.f2fs -i), packs
 * of newer version; and hostile copies of the superblocks, checkpoints
 * and SIT.
 */
#include "unit-fs.h"

extern const struct fs_plugin fs_plugin_f2fs;

#define BLK 4096u

static char tmpdir[64];

/* Not a skip: f2fs-tools is in `make deps`, and a missing tool must not look
 * like a pass. */
static bool setup_dir(void)
{
	return setup_tmpdir(tmpdir, sizeof(tmpdir), "mkfs.f2fs fsck.f2fs sload.f2fs dump.f2fs",
			    "f2fs-tools (mkfs.f2fs, fsck.f2fs, sload.f2fs, dump.f2fs)",
			    "/tmp/imager-test-f2fs-XXXXXX");
}

static void cleanup_dir(void)
{
	remove_tmpdir(tmpdir);
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static int examine(const char *path, bool force, bool with_plugin,
		   struct fs_info *info, struct im_err *err)
{
	return examine_path(with_plugin ? &fs_plugin_f2fs : NULL, path, force, info, err);
}

/* ---- checkpoint editing (f2fs_checkpoint_chksum, as mkfs.f2fs) ---- */

static uint32_t crc32_f2fs(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int i = 0; i < 8; i++)
			crc = (crc >> 1) ^ ((crc & 1) ? 0xEDB88320u : 0);
	}
	return crc;
}

static void cp_seal(unsigned char *cp)
{
	uint32_t off = get32(cp + 164), crc;

	if (off < 192 || off > 4092)
		return;
	crc = crc32_f2fs(0xF2F52010u, cp, off);
	if (off < 4092)
		crc = crc32_f2fs(crc, cp + off + 4, BLK - off - 4);
	put32(cp + off, crc);
}

/* The layout facts the tests need, from fsck.f2fs and from the packs. */
struct f2fs_facts {
	uint64_t block_count, main_blkaddr, valid_blocks;
	uint64_t cp_blkaddr, sit_blkaddr, segs_sit, segs_main, cp_payload;
	unsigned pack;            /* current pack, 0 or 1 */
	uint64_t pack_start;      /* its first block */
	uint32_t pack_total, flags;
	int fsck_status;
};

static bool pack_valid(const char *img, uint64_t start, uint64_t *ver, uint32_t *total)
{
	unsigned char a[BLK], b[BLK], c[BLK];

	if (!read_at(img, start * BLK, a, BLK))
		return false;
	memcpy(c, a, BLK);
	cp_seal(c);
	if (memcmp(a, c, BLK) != 0)
		return false;
	*total = get32(a + 136);
	if (*total < 2 || *total > 512 || !read_at(img, (start + *total - 1) * BLK, b, BLK))
		return false;
	*ver = get32(a) | (uint64_t)get32(a + 4) << 32;
	return memcmp(a, b, 8) == 0;
}

static bool get_facts(const char *img, struct f2fs_facts *f)
{
	static char out[1 << 17];
	unsigned found = 0;
	char *line, *save = NULL;
	uint64_t v0 = 0, v1 = 0;
	uint32_t t0 = 0, t1 = 0;
	bool ok0, ok1;

	memset(f, 0, sizeof(*f));
	f->fsck_status = sh_out(out, sizeof(out), "fsck.f2fs --dry-run -d 1 %s", img);
	if (strstr(out, "[Fail]"))
		f->fsck_status = f->fsck_status ? f->fsck_status : 1;
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long v;
		const char *colon = strrchr(line, ':');

		if (!colon || sscanf(colon + 1, " %llu", &v) != 1)
			continue;
#define FACT(name, field, bit) \
		if (strncmp(line, name " ", strlen(name) + 1) == 0 && !(found & bit)) \
			{ f->field = v; found |= bit; continue; }
		FACT("block_count", block_count, 1)
		FACT("main_blkaddr", main_blkaddr, 2)
		FACT("valid_block_count", valid_blocks, 4)
		FACT("cp_blkaddr", cp_blkaddr, 8)
		FACT("sit_blkaddr", sit_blkaddr, 16)
		FACT("segment_count_sit", segs_sit, 32)
		FACT("segment_count_main", segs_main, 64)
		FACT("cp_payload", cp_payload, 128)
#undef FACT
	}
	if (found != 255) {
		fprintf(stderr, "  cannot parse fsck.f2fs -d 1 for %s (0x%x)\n", img, found);
		return false;
	}
	/* The current pack, as the tools choose it (the newer valid one, the
	 * first on a tie). */
	ok0 = pack_valid(img, f->cp_blkaddr, &v0, &t0);
	ok1 = pack_valid(img, f->cp_blkaddr + 512, &v1, &t1);
	if (!ok0 && !ok1)
		return false;
	f->pack = !ok0 ? 1 : !ok1 ? 0 : (int64_t)(v1 - v0) > 0 ? 1 : 0;
	f->pack_start = f->cp_blkaddr + 512 * f->pack;
	f->pack_total = f->pack ? t1 : t0;
	f->flags = (uint32_t)read_le(img, f->pack_start * BLK + 132, 4);
	return true;
}

/* Read both checkpoint copies of the current pack, let `edit` change the
 * block, and write both back sealed. */
static bool edit_cp(const char *img, const struct f2fs_facts *f,
		    void (*edit)(unsigned char *cp, uintptr_t arg), uintptr_t arg)
{
	unsigned char cp[BLK];

	if (!read_at(img, f->pack_start * BLK, cp, BLK))
		return false;
	edit(cp, arg);
	cp_seal(cp);
	return write_at(img, f->pack_start * BLK, cp, BLK) &&
	       write_at(img, (f->pack_start + get32(cp + 136) - 1) * BLK, cp, BLK);
}

static void set_flags(unsigned char *cp, uintptr_t flags) { put32(cp + 132, (uint32_t)flags); }
static void set_valid(unsigned char *cp, uintptr_t n)
{
	put32(cp + 16, (uint32_t)n);
	put32(cp + 20, 0);
}
static void set_u32_at(unsigned char *cp, uintptr_t off_val)
{
	put32(cp + (off_val >> 32), (uint32_t)off_val);
}
#define OFF_VAL(off, val) (((uintptr_t)(off) << 32) | (uint32_t)(val))

/* ---- building filesystems ---- */

static bool make_f2fs(const char *img, unsigned mib, bool random, const char *opts)
{
	if (random) {
		if (!write_random_file(img, (size_t)mib << 20, mib * 131u))
			return false;
	} else if (sh("rm -f %s && truncate -s %uM %s", img, mib, img) != 0) {
		return false;
	}
	/* -t 0: no discard, which on a file punches holes over the old data. */
	if (sh("mkfs.f2fs -q -f -t 0 %s %s >/dev/null 2>&1", opts, img) != 0) {
		fprintf(stderr, "  mkfs.f2fs %s %s failed\n", opts, img);
		return false;
	}
	return true;
}

/* fsck.f2fs's facts, else a failed check and the folder removed. */
static bool facts_or_cleanup(const char *img, struct f2fs_facts *f)
{
	if (get_facts(img, f))
		return true;
	CHECK(!"fsck.f2fs facts");
	cleanup_dir();
	return false;
}

static bool sload(const char *img);

/* The temporary folder, and in it a filesystem NAME (img: 128 bytes) as
 * make_f2fs() makes it, filled by sload() when fill; and fsck.f2fs's facts
 * about it. */
static bool new_f2fs(char *img, const char *name, unsigned mib, bool random, const char *opts,
		     bool fill, struct f2fs_facts *f)
{
	if (!setup_dir())
		return false;
	snprintf(img, 128, "%s/%s", tmpdir, name);
	CHECK(make_f2fs(img, mib, random, opts));
	if (fill)
		CHECK(sload(img));
	return facts_or_cleanup(img, f);
}

/* Files with unique names (dump.f2fs writes them by name into one
 * folder); those listed in `kept` are compared after round trips. */
static const char *const kept[] = { "big1", "mid7", "tiny250" };

static bool write_tree(void)
{
	char path[192];
	bool ok = sh("rm -rf %s/src && mkdir -p %s/src/a/b %s/src/c", tmpdir, tmpdir, tmpdir) == 0;

#define SRC(rel, len, seed) \
	(snprintf(path, sizeof(path), "%s/src/%s", tmpdir, rel), write_random_file(path, len, seed))
	ok = ok && SRC("big1", 3000001, 1) && SRC("a/mid7", 500000, 7) && SRC("a/b/small13", 13000, 13);
	ok = ok && SRC("empty0", 0, 0);
	for (unsigned i = 0; ok && i < 300; i++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "%s/tiny%u", i % 2 ? "c" : "a/b", i);
		ok = SRC(rel, 1 + (i * 389) % 7000, 1000 + i);   /* many are inline */
	}
#undef SRC
	return ok;
}

static bool sload(const char *img)
{
	return write_tree() && sh("sload.f2fs -f %s/src %s >/dev/null 2>&1", tmpdir, img) == 0;
}

static bool fsck_clean(const char *img)
{
	static char out[1 << 16];
	int st = sh_out(out, sizeof(out), "fsck.f2fs --dry-run %s", img);

	return st == 0 && !strstr(out, "[Fail]");
}

/* Every kept file, dumped by dump.f2fs from `img` (inode numbers from
 * fsck.f2fs -t), equals its source. */
static bool files_ok(const char *img)
{
	static char out[1 << 17];
	int ok = 1;

	sh_out(out, sizeof(out), "fsck.f2fs --dry-run -t %s", img);
	sh("rm -rf %s/dump && mkdir -p %s/dump/lost_found", tmpdir, tmpdir);
	for (size_t i = 0; ok && i < sizeof(kept) / sizeof(kept[0]); i++) {
		char key[64];
		const char *p;
		unsigned long ino;

		snprintf(key, sizeof(key), "-- %s <ino = 0x", kept[i]);
		p = strstr(out, key);
		if (!p || sscanf(p + strlen(key), "%lx", &ino) != 1) {
			fprintf(stderr, "  %s not in the directory tree of %s\n", kept[i], img);
			return false;
		}
		ok = sh("cd %s/dump && echo y | dump.f2fs -i 0x%lx %s >/dev/null 2>&1 && "
			"f=$(find %s/src -name %s) && cmp -s lost_found/%s \"$f\"",
			tmpdir, ino, img, tmpdir, kept[i], kept[i]) == 0;
	}
	return ok;
}

static bool round_trip_ok(const char *img, const struct fs_info *info, bool drop_last_run,
			  bool files)
{
	char copy[128];

	snprintf(copy, sizeof(copy), "%s/copy.img", tmpdir);
	return copy_used(img, info, copy, drop_last_run) && fsck_clean(copy) &&
	       (!files || files_ok(copy));
}

/* The count against fsck.f2fs, libblkid and the registry choosing us. */
static uint64_t check_counts(const char *img, const struct f2fs_facts *f)
{
	struct fs_info info;
	struct im_err err;
	uint64_t used = 0;
	int r;

	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, 0);
	if (r == 0) {
		CHECK_EQ_U(info.block_size, BLK);
		CHECK_EQ_U(info.block_count, f->block_count);
		CHECK_EQ_U(info.used_blocks, f->main_blkaddr + f->valid_blocks);
		if (info.warning[0])
			fprintf(stderr, "  warning: %s\n", info.warning);
		CHECK_STR(info.warning, "");
		used = info.used_blocks;
	} else {
		fprintf(stderr, "  %s\n", err.msg);
	}
	fs_info_free(&info);
	r = examine(img, false, false, &info, &err);
	CHECK_EQ_U(r, 0);
	CHECK(info.plugin == &fs_plugin_f2fs);
	CHECK_STR(info.type, "f2fs");
	fs_info_free(&info);
	return used;
}

/* mkfs (+ sload) and the full check. */
static void check_real(const char *opts, bool fill, unsigned mib, bool random, bool files)
{
	char img[128];
	struct f2fs_facts f;
	struct fs_info info;
	struct im_err err;

	if (!new_f2fs(img, "f2fs.img", mib, random, opts, fill, &f))
		return;
	CHECK_EQ_U(f.fsck_status, 0);
	if (fill)
		CHECK(f.valid_blocks > 1000);
	check_counts(img, &f);
	if (examine(img, false, true, &info, &err) == 0) {
		CHECK(round_trip_ok(img, &info, false, fill && files));
		if (fill && files)
			CHECK(!round_trip_ok(img, &info, true, true));
	}
	fs_info_free(&info);
	cleanup_dir();
}

/* mkfs alone: compacted summaries, the six logs' SIT entries in the journal. */
static void test_fresh(void) { check_real("", false, 64, false, false); }
/* sload: normal summaries, SIT blocks written. */
static void test_sload(void) { check_real("", true, 100, true, true); }
static void test_sload_features(void)
{
	/* (Not flexible_inline_xattr: sload.f2fs 1.15 writes a wrong inline
	 * xattr size with it, and its own fsck then repairs.) */
	check_real("-O extra_attr,inode_checksum,sb_checksum,inode_crtime,lost_found", true, 100,
		   false, false);
}
/* -i: CP_LARGE_NAT_BITMAP_FLAG, CRC at 192 and the bitmaps after it. */
static void test_sload_large_nat_bitmap(void) { check_real("-i", true, 100, false, false); }
static void test_sload_sections(void) { check_real("-s 2 -z 2", true, 160, false, false); }

/* ---- layouts made by hand ---- */

/* The cold data summary block of normal summaries in the current pack. */
static uint64_t cold_data_sum(const struct f2fs_facts *f)
{
	unsigned base = (f->flags & 0x21) ? 6 : 3;
	return f->pack_start + f->pack_total - (base + 1) + 2;
}

/* SIT entry of main segment s, in SIT copy `copy`. */
static uint64_t sit_entry_off(const struct f2fs_facts *f, unsigned copy, uint64_t s)
{
	return (f->sit_blkaddr + copy * (f->segs_sit / 2) * 512 + s / 55) * BLK + (s % 55) * 74;
}

/* The first main segment with valid blocks, per SIT copy 0. */
static uint64_t busy_segment(const char *img, const struct f2fs_facts *f)
{
	for (uint64_t s = 0; s < f->segs_main; s++)
		if (read_le(img, sit_entry_off(f, 0, s), 2) & 0x3FF)
			return s;
	return UINT64_MAX;
}

static void set_bit0(unsigned char *cp, uintptr_t at) { cp[at] |= 0x80; }

static void test_sit_layouts(void)
{
	char img[128], work[128];
	struct f2fs_facts f, g;
	struct fs_info info;
	struct im_err err;
	unsigned char entry[74], zero[74] = { 0 }, block[BLK];
	uint64_t clean, seg, sum;

	if (!new_f2fs(img, "f2fs.img", 100, false, "", true, &f))
		return;
	snprintf(work, sizeof(work), "%s/work.img", tmpdir);
	CHECK(!(f.flags & 0x4));   /* normal summaries after sload */
	clean = check_counts(img, &f);
	seg = busy_segment(img, &f);
	CHECK(seg != UINT64_MAX);
	sum = cold_data_sum(&f);
	CHECK_EQ_U(read_le(img, sum * BLK + 3584, 2), 0);   /* journal empty */

	/* 1. A segment's SIT entry only in the journal: moved there, and the
	 * SIT block's entry zeroed.  The count holds only if the journal is
	 * read, and fsck.f2fs agrees with the copy. */
	CHECK(copy_file(img, work));
	CHECK(read_at(work, sit_entry_off(&f, 0, seg), entry, 74));
	CHECK(patch_le(work, sum * BLK + 3584, 2, 1));
	CHECK(patch_le(work, sum * BLK + 3586, 4, seg));
	CHECK(write_at(work, sum * BLK + 3590, entry, 74));
	CHECK(write_at(work, sit_entry_off(&f, 0, seg), zero, 74));
	CHECK(get_facts(work, &g) && g.fsck_status == 0);
	CHECK_EQ_U(examine(work, false, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, clean);
	CHECK(round_trip_ok(work, &info, false, true));
	fs_info_free(&info);
	/* The journal's entry wins over the SIT block's: one block fewer in
	 * it, one fewer counted (and the checkpoint told so). */
	{
		unsigned char e2[74];
		unsigned bit = 0;

		memcpy(e2, entry, 74);
		while (bit < 512 && !(e2[2 + bit / 8] & (0x80 >> (bit % 8))))
			bit++;
		e2[2 + bit / 8] &= (unsigned char)~(0x80 >> (bit % 8));
		e2[0] = (unsigned char)(e2[0] - 1);   /* vblocks - 1 (low byte > 0 here) */
		CHECK(write_at(work, sit_entry_off(&f, 0, seg), entry, 74));
		CHECK(write_at(work, sum * BLK + 3590, e2, 74));
		CHECK(edit_cp(work, &f, set_valid, (uintptr_t)(f.valid_blocks - 1)));
		CHECK_EQ_U(examine(work, false, true, &info, &err), 0);
		CHECK_EQ_U(info.used_blocks, clean - 1);
		CHECK(!bitmap_test(&info.used, f.main_blkaddr + seg * 512 + bit));
		fs_info_free(&info);
	}
	/* Journal claims: too many entries, a segment past the main area. */
	CHECK(copy_file(img, work));
	CHECK(patch_le(work, sum * BLK + 3584, 2, 7));
	CHECK_EQ_U(examine(work, false, true, &info, &err), -EINVAL);
	CHECK(strstr(err.msg, "SIT journal") != NULL);
	fs_info_free(&info);
	CHECK(patch_le(work, sum * BLK + 3584, 2, 1));
	CHECK(patch_le(work, sum * BLK + 3586, 4, f.segs_main));
	CHECK_EQ_U(examine(work, false, true, &info, &err), -EINVAL);
	fs_info_free(&info);

	/* 2. The second SIT copy, chosen by the checkpoint's version bitmap:
	 * SIT block 0 moved to copy 1, copy 0 zeroed, bit 0 set. */
	CHECK(copy_file(img, work));
	CHECK(read_at(work, f.sit_blkaddr * BLK, block, BLK));
	CHECK(write_at(work, (f.sit_blkaddr + (f.segs_sit / 2) * 512) * BLK, block, BLK));
	memset(block, 0, BLK);
	CHECK(write_at(work, f.sit_blkaddr * BLK, block, BLK));
	CHECK(edit_cp(work, &f, set_bit0, 192));
	CHECK(get_facts(work, &g) && g.fsck_status == 0);
	CHECK_EQ_U(examine(work, false, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, clean);
	CHECK(round_trip_ok(work, &info, false, false));
	fs_info_free(&info);

	/* 3. The same with the SIT bitmap in a cp_payload block: the pack is
	 * rebuilt one block longer ([cp][payload][summaries...][cp]), the NAT
	 * bitmap moved to the start of the bitmap area, as with large
	 * volumes. */
	{
		unsigned char *pack = malloc((size_t)(f.pack_total + 1) * BLK), cp[BLK];
		uint32_t sit_bytes, nat_bytes;

		CHECK(pack != NULL);
		if (pack) {
			CHECK(read_at(work, f.pack_start * BLK, pack, (size_t)f.pack_total * BLK));
			memcpy(cp, pack, BLK);
			sit_bytes = get32(cp + 156);
			nat_bytes = get32(cp + 160);
			memset(pack + BLK, 0, BLK);
			memcpy(pack + BLK, cp + 192, sit_bytes);   /* SIT bitmap, bit 0 set */
			CHECK(read_at(work, (f.pack_start + 1) * BLK, pack + 2 * BLK,
				      (size_t)(f.pack_total - 1) * BLK));
			memmove(cp + 192, cp + 192 + sit_bytes, nat_bytes);
			memset(cp + 192 + nat_bytes, 0, sit_bytes);
			put32(cp + 136, f.pack_total + 1);
			put32(cp + 140, get32(cp + 140) + 1);
			cp_seal(cp);
			memcpy(pack, cp, BLK);
			memcpy(pack + (size_t)f.pack_total * BLK, cp, BLK);
			CHECK(write_at(work, f.pack_start * BLK, pack, (size_t)(f.pack_total + 1) * BLK));
			CHECK(patch_le(work, 1024 + 1664, 4, 1));          /* cp_payload, both */
			CHECK(patch_le(work, BLK + 1024 + 1664, 4, 1));    /* superblocks */
			free(pack);
			CHECK(get_facts(work, &g) && g.fsck_status == 0 && g.cp_payload == 1);
			CHECK_EQ_U(examine(work, false, true, &info, &err), 0);
			CHECK_EQ_U(info.used_blocks, clean);
			CHECK(round_trip_ok(work, &info, false, false));
			fs_info_free(&info);
		}
	}
	cleanup_dir();
}

/* The version bitmap with CP_LARGE_NAT_BITMAP_FLAG: after the CRC at 192
 * and the NAT bitmap. */
static void test_large_nat_bitmap_sit_copy(void)
{
	char img[128];
	struct f2fs_facts f, g;
	struct fs_info info;
	struct im_err err;
	unsigned char block[BLK];
	uint64_t clean, nat_bytes;

	if (!new_f2fs(img, "f2fs.img", 100, false, "-i", true, &f))
		return;
	CHECK(f.flags & 0x400);
	CHECK_EQ_U(read_le(img, f.pack_start * BLK + 164, 4), 192);
	clean = check_counts(img, &f);
	nat_bytes = read_le(img, f.pack_start * BLK + 160, 4);
	CHECK(read_at(img, f.sit_blkaddr * BLK, block, BLK));
	CHECK(write_at(img, (f.sit_blkaddr + (f.segs_sit / 2) * 512) * BLK, block, BLK));
	memset(block, 0, BLK);
	CHECK(write_at(img, f.sit_blkaddr * BLK, block, BLK));
	CHECK(edit_cp(img, &f, set_bit0, (uintptr_t)(196 + nat_bytes)));
	CHECK(get_facts(img, &g) && g.fsck_status == 0);
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, clean);
	CHECK(round_trip_ok(img, &info, false, true));
	fs_info_free(&info);
	/* The deprecated layout (large NAT bitmap, CRC at the end). */
	CHECK(edit_cp(img, &f, set_u32_at, OFF_VAL(164, 4092)));
	CHECK_EQ_U(examine(img, false, true, &info, &err), -ENOTSUP);
	fs_info_free(&info);
	cleanup_dir();
}

/* ---- checkpoint packs ---- */

static void set_version(unsigned char *cp, uintptr_t v)
{
	put32(cp, (uint32_t)v);
	put32(cp + 4, (uint32_t)((uint64_t)v >> 32));
}

/* The other pack, made current-looking with `version` and a
 * valid_block_count of `valid`. */
static bool forge_other_pack(const char *img, const struct f2fs_facts *f, uint64_t version,
			     uint64_t valid)
{
	struct f2fs_facts o = *f;
	unsigned char cp[BLK];

	o.pack = 1 - f->pack;
	o.pack_start = f->cp_blkaddr + 512 * o.pack;
	if (!read_at(img, f->pack_start * BLK, cp, BLK))
		return false;
	/* A copy of the current pack, then edited. */
	for (uint32_t i = 0; i < f->pack_total; i++) {
		unsigned char b[BLK];
		if (!read_at(img, (f->pack_start + i) * BLK, b, BLK) ||
		    !write_at(img, (o.pack_start + i) * BLK, b, BLK))
			return false;
	}
	return edit_cp(img, &o, set_version, (uintptr_t)version) &&
	       edit_cp(img, &o, set_valid, (uintptr_t)valid);
}

static void test_checkpoint_packs(void)
{
	char img[128], work[128];
	struct f2fs_facts f;
	struct fs_info info;
	struct im_err err;
	uint64_t clean, ver;
	unsigned char cp[BLK];

	if (!new_f2fs(img, "f2fs.img", 100, false, "", true, &f))
		return;
	snprintf(work, sizeof(work), "%s/work.img", tmpdir);
	clean = check_counts(img, &f);
	ver = read_le(img, f.pack_start * BLK, 8);

	/* The other pack newer: it is the one read (its count is off by one,
	 * so that shows); older or equal: not. */
	CHECK(copy_file(img, work));
	CHECK(forge_other_pack(work, &f, ver + 1, f.valid_blocks + 1));
	CHECK_EQ_U(examine(work, false, true, &info, &err), -EUCLEAN);
	CHECK(strstr(err.msg, "checkpoint counts") != NULL);
	fs_info_free(&info);
	CHECK(copy_file(img, work));
	CHECK(forge_other_pack(work, &f, ver, f.valid_blocks + 1));
	CHECK_EQ_U(examine(work, false, true, &info, &err), f.pack == 0 ? 0 : -EUCLEAN);
	fs_info_free(&info);
	CHECK(copy_file(img, work));
	CHECK(forge_other_pack(work, &f, ver - 1, f.valid_blocks + 1));
	CHECK_EQ_U(examine(work, false, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, clean);
	fs_info_free(&info);
	/* Versions wrap: 0 is after 2^64-1. */
	CHECK(copy_file(img, work));
	CHECK(edit_cp(work, &f, set_version, (uintptr_t)UINT64_MAX));
	CHECK(forge_other_pack(work, &f, 0, f.valid_blocks + 1));
	CHECK_EQ_U(examine(work, false, true, &info, &err), -EUCLEAN);
	fs_info_free(&info);

	/* The current pack broken: the other (forged older, right count) is
	 * used; both broken: no checkpoint, and the registry copies raw. */
	CHECK(copy_file(img, work));
	CHECK(forge_other_pack(work, &f, ver - 1, f.valid_blocks));
	CHECK(patch_le(work, f.pack_start * BLK + 40, 1, 0x5A));   /* CRC now wrong */
	CHECK_EQ_U(examine(work, false, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, clean);
	fs_info_free(&info);
	/* Last copy of a different version: the pack is not valid. */
	CHECK(copy_file(img, work));
	CHECK(forge_other_pack(work, &f, ver - 1, f.valid_blocks));
	CHECK(read_at(work, (f.pack_start + f.pack_total - 1) * BLK, cp, BLK));
	set_version(cp, (uintptr_t)(ver + 5));
	cp_seal(cp);
	CHECK(write_at(work, (f.pack_start + f.pack_total - 1) * BLK, cp, BLK));
	CHECK_EQ_U(examine(work, false, true, &info, &err), 0);   /* the other one */
	fs_info_free(&info);
	CHECK(patch_le(work, (f.cp_blkaddr + 512 * (1 - f.pack)) * BLK + 40, 1, 0x5A));
	CHECK_EQ_U(examine(work, false, true, &info, &err), -EINVAL);
	CHECK(strstr(err.msg, "no valid checkpoint") != NULL);
	fs_info_free(&info);
	CHECK_EQ_U(examine(work, false, false, &info, &err), 0);
	CHECK(info.plugin == &fs_plugin_raw);
	fs_info_free(&info);

	/* Absurd fields of the current pack, sealed: the pack is invalid
	 * (checksum offset, length), or the checkpoint fails its checks. */
	{
		static const struct { const char *what; uint32_t off, val; int code; } cases[] = {
			{ "checksum_offset 100", 164, 100, -EINVAL },
			{ "checksum_offset 5000", 164, 5000, -EINVAL },
			{ "cp_pack_total_block_count 0", 136, 0, -EINVAL },
			{ "cp_pack_total_block_count 1000", 136, 1000, -EINVAL },
			{ "valid_block_count above user_block_count", 16, 0x7FFFFFFF, -EINVAL },
			{ "user_block_count 0", 8, 0, -EINVAL },
			{ "rsvd_segment_count 0", 24, 0, -EINVAL },
			{ "rsvd_segment_count huge", 24, 0x7FFFFFFF, -EINVAL },
			{ "cur_node_segno past main", 36, 0x7FFFFFFF, -EINVAL },
			{ "cur_data_blkoff 512", 116, 512, -EINVAL },
			{ "sit_ver_bitmap_bytesize 65", 156, 65, -EINVAL },
			{ "nat_ver_bitmap_bytesize 0", 160, 0, -EINVAL },
			{ "cp_pack_start_sum 0", 140, 0, -EINVAL },
			{ "cp_pack_start_sum 600", 140, 600, -EINVAL },
			{ "cp_pack_start_sum 7: summaries past the pack", 140, 7, -EINVAL },
		};
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			int before = unit_failures;

			CHECK(copy_file(img, work));
			/* The other pack invalid, so this one is all there is. */
			CHECK(patch_le(work, (f.cp_blkaddr + 512 * (1 - f.pack)) * BLK + 40, 1, 0x5A));
			CHECK(edit_cp(work, &f, set_u32_at, OFF_VAL(cases[i].off, cases[i].val)));
			CHECK_EQ_U(examine(work, false, true, &info, &err), cases[i].code);
			fs_info_free(&info);
			CHECK_EQ_U(examine(work, false, false, &info, &err), 0);
			CHECK(info.plugin == &fs_plugin_raw);
			fs_info_free(&info);
			say_case(before, cases[i].what, &err);
		}
	}
	cleanup_dir();
}

/* ---- unclean, and counts that disagree ---- */

static void test_unclean_and_counts(void)
{
	char img[128], fresh[128], work[128];
	struct f2fs_facts f, fr;
	struct fs_info info;
	struct im_err err;
	uint64_t clean, fresh_used;

	if (!new_f2fs(img, "f2fs.img", 100, false, "", true, &f))
		return;
	snprintf(fresh, sizeof(fresh), "%s/fresh.img", tmpdir);
	snprintf(work, sizeof(work), "%s/work.img", tmpdir);
	CHECK(make_f2fs(fresh, 64, false, ""));
	if (!facts_or_cleanup(fresh, &fr))
		return;
	clean = check_counts(img, &f);
	fresh_used = check_counts(fresh, &fr);

	/* Not cleanly unmounted (CP_UMOUNT_FLAG cleared), an error recorded,
	 * fsck asked for: refused naming fsck.f2fs; forced, the same blocks.
	 * On the mkfs image (compacted summaries) and the sload one. */
	{
		static const struct { const char *what; uint32_t clear, set; const char *words; } cases[] = {
			{ "no CP_UMOUNT_FLAG", 0x1, 0, "not cleanly unmounted" },
			{ "CP_ERROR_FLAG", 0, 0x8, "error" },
			{ "CP_FSCK_FLAG", 0, 0x10, "fsck" },
		};
		const char *bases[2] = { img, fresh };
		const struct f2fs_facts *facts[2] = { &f, &fr };
		uint64_t counts[2] = { clean, fresh_used };

		for (size_t b = 0; b < 2; b++)
			for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
				int before = unit_failures;
				uint32_t flags = (facts[b]->flags & ~cases[i].clear) | cases[i].set;

				CHECK(copy_file(bases[b], work));
				CHECK(edit_cp(work, facts[b], set_flags, flags));
				CHECK_EQ_U(examine(work, false, true, &info, &err), -EUCLEAN);
				CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
				CHECK(strstr(err.msg, "run fsck.f2fs") && strstr(err.msg, cases[i].words));
				fs_info_free(&info);
				CHECK_EQ_U(examine(work, false, false, &info, &err), -EUCLEAN);
				fs_info_free(&info);
				CHECK_EQ_U(examine(work, true, true, &info, &err), 0);
				CHECK_EQ_U(info.used_blocks, counts[b]);
				CHECK(strstr(info.warning, "forced") != NULL);
				fs_info_free(&info);
				if (unit_failures != before)
					fprintf(stderr, "  ^ case: %s on %s (%s)\n", cases[i].what,
						bases[b], err.msg);
			}
	}

	/* valid_block_count against the SIT. */
	CHECK(copy_file(img, work));
	CHECK(edit_cp(work, &f, set_valid, (uintptr_t)(f.valid_blocks + 1)));
	CHECK_EQ_U(examine(work, false, true, &info, &err), -EUCLEAN);
	CHECK(strstr(err.msg, "fsck.f2fs") != NULL);
	fs_info_free(&info);
	CHECK_EQ_U(examine(work, true, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, clean);
	CHECK(strstr(info.warning, "forced") != NULL);
	fs_info_free(&info);

	/* An entry's count against its map. */
	{
		uint64_t seg = busy_segment(img, &f), off = sit_entry_off(&f, 0, seg);

		CHECK(copy_file(img, work));
		CHECK(patch_le(work, off, 2, read_le(work, off, 2) + 1));
		CHECK_EQ_U(examine(work, false, true, &info, &err), -EUCLEAN);
		CHECK(strstr(err.msg, "map has") != NULL);
		fs_info_free(&info);
		/* A stray bit in another entry's map, with its count and the
		 * checkpoint's raised to match: consistent, and copied. */
		CHECK(copy_file(img, work));
		CHECK_EQ_U(read_le(work, off + 2 + 63, 1) & 0x01, 0);   /* block 511 free */
		CHECK(patch_le(work, off, 2, read_le(work, off, 2) + 1));
		CHECK(patch_le(work, off + 2 + 63, 1, read_le(work, off + 2 + 63, 1) | 0x01));
		CHECK(edit_cp(work, &f, set_valid, (uintptr_t)(f.valid_blocks + 1)));
		CHECK_EQ_U(examine(work, false, true, &info, &err), 0);
		CHECK_EQ_U(info.used_blocks, clean + 1);
		CHECK(bitmap_test(&info.used, f.main_blkaddr + seg * 512 + 511));
		fs_info_free(&info);
	}
	cleanup_dir();
}

/* ---- hostile superblocks ---- */

static void check_sb_refused(const char *base, const char *what, uint32_t off, size_t len,
			     uint64_t v, bool both, int code)
{
	char img[128];
	struct fs_info info;
	struct im_err err;
	int r, before = unit_failures;

	snprintf(img, sizeof(img), "%s/hostile.img", tmpdir);
	copy_patched(base, img, 1024 + off, len, v);
	if (both)
		CHECK(patch_le(img, BLK + 1024 + off, len, v));
	r = examine(img, false, true, &info, &err);
	CHECK_EQ_U(r, code);
	if (code == 0)
		CHECK(strstr(info.warning, "first superblock is invalid") != NULL);
	else
		CHECK(err.msg[0] != '\0');
	fs_info_free(&info);
	if (code == -ENOTSUP)
		expect_registry(img, code, NULL);
	else
		expect_registry(img, 0, code == 0 ? &fs_plugin_f2fs : &fs_plugin_raw);
	say_case(before, what, &err);
}

static void test_hostile_superblock(void)
{
	char base[128], img[128];
	struct f2fs_facts f;
	struct fs_info info;
	struct im_err err;

	if (!new_f2fs(base, "base.img", 64, false, "", false, &f))
		return;
	CHECK_EQ_U(examine(base, false, true, &info, &err), 0);
	fs_info_free(&info);

	/* One copy bad: the other is used, with a warning. */
	check_sb_refused(base, "first copy's magic", 0, 4, 0x12345678, false, 0);
	check_sb_refused(base, "first copy's log_blocksize", 16, 4, 13, false, 0);

	/* Both copies. */
	check_sb_refused(base, "magic", 0, 4, 0xF2F52011, true, -EINVAL);
	check_sb_refused(base, "log_sectorsize 8", 8, 4, 8, true, -EINVAL);
	check_sb_refused(base, "log_sectorsize 13", 8, 4, 13, true, -EINVAL);
	check_sb_refused(base, "log_sectors_per_block 2", 12, 4, 2, true, -EINVAL);
	check_sb_refused(base, "log_blocksize 13", 16, 4, 13, true, -EINVAL);
	check_sb_refused(base, "log_blocks_per_seg 10", 20, 4, 10, true, -EINVAL);
	check_sb_refused(base, "segs_per_sec 0", 24, 4, 0, true, -EINVAL);
	check_sb_refused(base, "segs_per_sec 2^32-1", 24, 4, 0xFFFFFFFFu, true, -EINVAL);
	check_sb_refused(base, "secs_per_zone 0", 28, 4, 0, true, -EINVAL);
	check_sb_refused(base, "block_count 2^64-1", 36, 8, UINT64_MAX, true, -EINVAL);
	check_sb_refused(base, "block_count 100", 36, 8, 100, true, -EINVAL);
	check_sb_refused(base, "section_count 0", 44, 4, 0, true, -EINVAL);
	check_sb_refused(base, "section_count 2^32-1", 44, 4, 0xFFFFFFFFu, true, -EINVAL);
	check_sb_refused(base, "segment_count 8", 48, 4, 8, true, -EINVAL);
	check_sb_refused(base, "segment_count 2^32-1", 48, 4, 0xFFFFFFFFu, true, -EINVAL);
	check_sb_refused(base, "segment_count_ckpt 1", 52, 4, 1, true, -EINVAL);
	check_sb_refused(base, "segment_count_sit 2^31", 56, 4, 0x80000000u, true, -EINVAL);
	check_sb_refused(base, "segment_count_nat 0", 60, 4, 0, true, -EINVAL);
	check_sb_refused(base, "segment_count_main 2^32-1", 68, 4, 0xFFFFFFFFu, true, -EINVAL);
	check_sb_refused(base, "segment0_blkaddr + 1", 72, 4, f.cp_blkaddr + 1, true, -EINVAL);
	check_sb_refused(base, "sit_blkaddr + 1", 80, 4, f.sit_blkaddr + 1, true, -EINVAL);
	check_sb_refused(base, "main_blkaddr 2^32-1", 92, 4, 0xFFFFFFFFu, true, -EINVAL);
	check_sb_refused(base, "root_ino 4", 96, 4, 4, true, -EINVAL);
	check_sb_refused(base, "extension_count 65", 1148, 4, 65, true, -EINVAL);
	check_sb_refused(base, "cp_payload 504", 1664, 4, 504, true, -EINVAL);
	check_sb_refused(base, "cp_payload 2^32-1", 1664, 4, 0xFFFFFFFFu, true, -EINVAL);
	check_sb_refused(base, "blkzoned feature", 2180, 4, 0x0002, true, -ENOTSUP);
	check_sb_refused(base, "ro feature", 2180, 4, 0x4000, true, -ENOTSUP);
	check_sb_refused(base, "a second device", 2201, 1, '/', true, -ENOTSUP);

	/* sb_checksum: a changed byte without the CRC fails that copy. */
	snprintf(img, sizeof(img), "%s/sbcrc.img", tmpdir);
	CHECK(make_f2fs(img, 64, false, "-O extra_attr,inode_checksum,sb_checksum"));
	CHECK_EQ_U(examine(img, false, true, &info, &err), 0);
	CHECK_STR(info.warning, "");
	fs_info_free(&info);
	check_sb_refused(img, "CRC'd copy changed", 1700, 1, 'x', false, 0);
	check_sb_refused(img, "both CRC'd copies changed", 1700, 1, 'x', true, -EINVAL);

	/* The file shorter than the filesystem; zeros; a tiny file. */
	CHECK(copy_file(base, img));
	CHECK_EQ_U(sh("truncate -s 40M %s", img), 0);
	CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
	CHECK(strstr(err.msg, "does not fit") != NULL);
	fs_info_free(&info);
	CHECK_EQ_U(sh("rm -f %s && truncate -s 64M %s", img, img), 0);
	CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
	fs_info_free(&info);
	CHECK_EQ_U(sh("truncate -s 5000 %s", img), 0);
	CHECK_EQ_U(examine(img, false, true, &info, &err), -EINVAL);
	fs_info_free(&info);

	/* Random superblocks with the magic kept, and random SIT blocks:
	 * an error or a copy, never a crash. */
	for (uint32_t seed = 1; seed <= 6; seed++) {
		char junk[128];
		int r;

		snprintf(junk, sizeof(junk), "%s/junk", tmpdir);
		CHECK(copy_file(base, img));
		CHECK(write_random_file(junk, 3072, seed));
		CHECK_EQ_U(sh("dd if=%s of=%s bs=1024 seek=1 conv=notrunc status=none && "
			      "dd if=%s of=%s bs=1024 seek=5 conv=notrunc status=none",
			      junk, img, junk, img), 0);
		CHECK(patch_le(img, 1024, 4, 0xF2F52010u) && patch_le(img, 5120, 4, 0xF2F52010u));
		r = examine(img, false, false, &info, &err);
		CHECK(r == 0 || r == -ENOTSUP);
		fs_info_free(&info);

		CHECK(copy_file(base, img));
		CHECK(write_random_file(junk, BLK, seed + 100));
		CHECK_EQ_U(sh("dd if=%s of=%s bs=4096 seek=%llu conv=notrunc status=none", junk,
			      img, (unsigned long long)f.sit_blkaddr), 0);
		r = examine(img, false, false, &info, &err);
		CHECK(r == 0 || r == -EUCLEAN);
		fs_info_free(&info);
	}
	cleanup_dir();
}

UNIT_MAIN(UNIT(test_fresh), UNIT(test_sload), UNIT(test_sload_features),
	  UNIT(test_sload_large_nat_bitmap), UNIT(test_sload_sections), UNIT(test_sit_layouts),
	  UNIT(test_large_nat_bitmap_sit_copy), UNIT(test_checkpoint_packs),
	  UNIT(test_unclean_and_counts), UNIT(test_hostile_superblock))
