/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The XFS plugin against filesystems made by the real mkfs.xfs, checked
 * against xfs_db's own view of free space (freesp: the bnobt's extents and
 * the AGFL's blocks), then against corrupted copies of them.  Where this
 * runs as root with loop devices, a filesystem is also mounted to fragment
 * its free space (a multi-level bnobt, blocks on the AGFL and in
 * agf_btreeblks) and to leave a log that needs recovery.
 */
#include "unit-fs.h"

extern const struct fs_plugin fs_plugin_xfs;

#define MiB (1ull << 20)

static bool have_xfsprogs(void)
{
	static int have = -1;

	return have_or_skip(&have, "mkfs.xfs xfs_db", "SKIP: mkfs.xfs or xfs_db not installed (xfsprogs)");
}

static bool can_mount(void)
{
	static int can = -1;

	return root_and(&can, "command -v losetup >/dev/null 2>&1 && losetup -f >/dev/null 2>&1 && "
			"command -v xfs_io >/dev/null 2>&1 && "
			"{ grep -qw xfs /proc/filesystems || modprobe xfs; } >/dev/null 2>&1",
			"SKIP: mounting XFS needs root, losetup, xfs_io and the xfs module");
}

/* Images live in tmpfs where there is one: the loop mounts' flushes then
 * cost nothing, whatever else the machine is writing. */
static const char *image_dir(void)
{
	return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}

/* A sparse file of size bytes holding `mkfs.xfs -f -q args`. */
static bool make_image(char path[static 32], const char *args, uint64_t size)
{
	char tmpl[32];

	snprintf(tmpl, sizeof(tmpl), "%s/test-xfs-XXXXXX", image_dir());
	return mkfs_image(path, tmpl, size, "mkfs.xfs -f -q", args);
}

struct counts {
	uint64_t dblocks, fdblocks, freesp, block_size, agblocks;
};

/* Geometry, sb_fdblocks and freesp's total as xfs_db prints them. */
static bool xfs_db_counts(const char *path, struct counts *c)
{
	const struct tool_field f[] = {
		{ "dblocks = %llu", &c->dblocks }, { "blocksize = %llu", &c->block_size },
		{ "agblocks = %llu", &c->agblocks }, { "fdblocks = %llu", &c->fdblocks },
		{ "total free blocks %llu", &c->freesp },
	};

	return tool_fields("xfs_db -r -c 'sb 0' -c 'print dblocks blocksize agblocks fdblocks' "
			   "-c 'freesp -s' %s 2>/dev/null", path, f, 5);
}

/* The free extents `freesp -d` lists ("AGNO AGBNO LEN"); ctx: the counts. */
static void free_extents(const char *line, const void *ctx, free_range_fn range, void *acc)
{
	const struct counts *c = ctx;
	unsigned long long agno, agbno, len;

	if (sscanf(line, " %llu %llu %llu", &agno, &agbno, &len) != 3 ||
	    strchr(line, '.'))   /* the histogram's lines have a percentage */
		return;
	range(acc, agno * c->agblocks + agbno, len);
}

static const struct free_list freesp_free = { "xfs_db -r -c 'freesp -d' %s 2>/dev/null",
					      free_extents };

static int examine(const char *path, bool force, struct fs_info *info, struct im_err *err)
{
	return examine_path(&fs_plugin_xfs, path, force, info, err);
}

/* The plugin's bitmap against xfs_db, for an image already made. */
static void check_image(const char *path, const char *what)
{
	struct counts c;

	if (xfs_db_counts(path, &c)) {
		const struct tool_count n = { c.block_size, c.dblocks, c.freesp };

		check_count(&fs_plugin_xfs, path, what, &n, &freesp_free, &c);
	}
}

static const struct mkfs_kind xfs = { have_xfsprogs, make_image, check_image };

static void check_mkfs(const char *args, uint64_t size) { check_mkfs_kind(&xfs, args, size); }

static void test_v5_4k(void)      { check_mkfs("", 512 * MiB); }
static void test_v5_1k(void)      { check_mkfs("-b size=1024", 512 * MiB); }
static void test_v5_64k(void)     { check_mkfs("-b size=65536", 512 * MiB); }
static void test_v5_sector_4k(void) { check_mkfs("-s size=4096", 512 * MiB); }
static void test_v5_rmapbt(void)  { check_mkfs("-m rmapbt=1,reflink=0", 512 * MiB); }
static void test_v5_log_su(void)  { check_mkfs("-l su=32k", 512 * MiB); }
/* The last AG shorter than the others. */
static void test_v5_short_ag(void) { check_mkfs("-d agcount=5", 613 * MiB + 12288); }
static const struct mkfs_case v4[] = {
	{ "-m crc=0", 512 * MiB },
	{ "-m crc=0 -b size=1024", 512 * MiB },
	{ "-m crc=0 -b size=512", 512 * MiB },
	{ "-m crc=0 -l lazy-count=0", 512 * MiB },
	{ "-m crc=0 -l version=1", 512 * MiB },
};

static void test_v4(void) { CHECK_MKFS_ALL(&xfs, v4); }

/* ---- raw access ---- */

/* XFS's CRC of buf with its checksum at off: CRC32c over the buffer with
 * the field zeroed, inverted, little-endian. */
static void xfs_sign(unsigned char *buf, size_t len, unsigned off)
{
	uint32_t c;

	memset(buf + off, 0, 4);
	c = ~crc32c(~0u, buf, len);
	for (int i = 0; i < 4; i++)
		buf[off + i] = (unsigned char)(c >> (8 * i));
}

/* The superblock's geometry, read directly. */
struct geo {
	uint32_t bs, ss, agblocks, agcount, logblocks;
	uint64_t logstart, log_off;
	bool v5;
};

static void read_geo(const char *path, struct geo *g)
{
	unsigned char sb[512];

	read_at(path, 0, sb, sizeof(sb));
	g->bs = (uint32_t)get_be(sb + 4, 4);
	g->ss = (uint32_t)get_be(sb + 102, 2);
	g->agblocks = (uint32_t)get_be(sb + 84, 4);
	g->agcount = (uint32_t)get_be(sb + 88, 4);
	g->logblocks = (uint32_t)get_be(sb + 96, 4);
	g->logstart = get_be(sb + 48, 8);
	g->v5 = (get_be(sb + 100, 2) & 0xF) == 5;
	g->log_off = ((g->logstart >> sb[124]) * g->agblocks +
		      (g->logstart & ((1ull << sb[124]) - 1))) * g->bs;
}

/* Patch a width-byte big-endian field of the sector at byte off (a
 * superblock or AGF whose checksum is at csum_off), re-sign it when asked
 * and v5, examine, and put the sector back.  Returns examine's result. */
static int examine_sector(const char *path, const struct geo *g, uint64_t off,
			  unsigned field, uint64_t val, unsigned width, unsigned csum_off,
			  bool sign, bool force, struct fs_info *info, struct im_err *err)
{
	const struct block_at sector = { &fs_plugin_xfs, off, g->ss, true, g->v5 ? xfs_sign : NULL,
					 csum_off };

	return examine_patched(path, &sector, field, val, width, sign, force, info, err);
}

#define SB_CRC 224
#define AGF_CRC 216

static uint64_t sector_field(const char *path, uint64_t off, unsigned field, unsigned width)
{
	return read_be(path, off + field, width);
}

static void run_sb_cases(const char *args)
{
	const struct field_case cases[] = {
		{ "blocksize 3000", 4, 4, 3000, -EINVAL },
		{ "blocksize 128K", 4, 4, 131072, -EINVAL },
		{ "blocklog wrong", 120, 1, 13, -EINVAL },
		{ "sectsize 8192 > block", 102, 2, 8192, -EINVAL },
		{ "sectlog wrong", 121, 1, 10, -EINVAL },
		{ "agblocks 0", 84, 4, 0, -EINVAL },
		{ "agblocks huge", 84, 4, 0xFFFFFFFF, -EINVAL },
		{ "agblklog wrong", 124, 1, 30, -EINVAL },
		{ "agcount 0", 88, 4, 0, -EINVAL },
		{ "agcount huge", 88, 4, 0x7FFFFFFF, -EINVAL },
		{ "dblocks 0", 8, 8, 0, -EINVAL },
		{ "dblocks huge", 8, 8, 0xFFFFFFFFFFFFull, -EINVAL },
		{ "fdblocks > dblocks", 144, 8, 0xFFFFFFFFFull, -EINVAL },
		{ "logstart beyond the AGs", 48, 8, 0xFFFFFFFFFFull, -EINVAL },
		{ "logblocks huge", 96, 4, 0x7FFFFFFF, -EINVAL },
		{ "version 3", 100, 2, 0, -EINVAL },   /* value set below */
		{ "log external", 48, 8, 0, -ENOTSUP },
		{ "realtime blocks", 16, 8, 1000, -ENOTSUP },
		{ "realtime extents", 24, 8, 1000, -ENOTSUP },
		{ "inprogress", 126, 1, 1, -EUCLEAN },
		{ "fdblocks off by one", 144, 8, 0, -EUCLEAN },   /* value set below */
	};
	char path[32], what[160];
	struct fs_info info;
	struct im_err err;
	struct geo g;

	if (!have_xfsprogs() || !make_image(path, args, 512 * MiB))
		return;
	read_geo(path, &g);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct field_case c = cases[i];
		int r;

		if (strcmp(c.what, "version 3") == 0)
			c.val = (sector_field(path, 0, 100, 2) & ~0xFull) | 3;
		else if (strcmp(c.what, "fdblocks off by one") == 0)
			c.val = sector_field(path, 0, 144, 8) + 1;
		r = examine_sector(path, &g, 0, c.off, c.val, c.width, SB_CRC, true, false,
				   &info, &err);
		snprintf(what, sizeof(what), "%s %s", args, c.what);
		expect_result(what, r, c.want, &err, &info);
	}
	if (g.v5) {
		const struct field_case v5[] = {
			{ "unknown incompat", 216, 4, 0x80000000u, -ENOTSUP },
			{ "metadir", 216, 4, 0x100, -ENOTSUP },
			{ "needsrepair", 216, 4, 0x10, -EUCLEAN },
			{ "unknown ro_compat", 212, 4, 0x1000, -ENOTSUP },
		};
		uint64_t incompat = sector_field(path, 0, 216, 4);
		uint64_t ro = sector_field(path, 0, 212, 4);
		for (size_t i = 0; i < sizeof(v5) / sizeof(v5[0]); i++) {
			uint64_t base = v5[i].off == 216 ? incompat : ro;
			int r = examine_sector(path, &g, 0, v5[i].off, base | v5[i].val, 4, SB_CRC,
						true, false, &info, &err);
			if (r != v5[i].want)
				fprintf(stderr, "  %s: got %d (%s)\n", v5[i].what, r, err.msg);
			CHECK(r == v5[i].want);
		}
		/* A change the checksum does not cover. */
		CHECK(examine_sector(path, &g, 0, 108, 0x41, 1, SB_CRC, false, false,
				      &info, &err) == -EUCLEAN);
		CHECK(strstr(err.msg, "checksum") != NULL);
		CHECK(examine_sector(path, &g, 0, 108, 0x41, 1, SB_CRC, false, true,
				      &info, &err) == 0);
		CHECK(strstr(info.warning, "checksum") != NULL);
		fs_info_free(&info);
	} else {
		/* v4: an unknown features2 bit, the shared bit. */
		uint64_t f2 = sector_field(path, 0, 200, 4);
		uint64_t vn = sector_field(path, 0, 100, 2);
		CHECK(examine_sector(path, &g, 0, 200, f2 | 0x4000, 4, 0, false, false,
				      &info, &err) == -ENOTSUP);
		CHECK(examine_sector(path, &g, 0, 100, vn | 0x200, 2, 0, false, false,
				      &info, &err) == -ENOTSUP);
	}
	/* A device smaller than the filesystem. */
	{
		int fd = open(path, O_RDONLY), r;
		memset(&err, 0, sizeof(err));
		r = fs_examine_with(&fs_plugin_xfs, fd, 0, 256 * MiB, false, &info, &err);
		CHECK(r == -EINVAL);
		r = fs_examine_with(&fs_plugin_xfs, fd, 0, 100, false, &info, &err);
		CHECK(r < 0);
		close(fd);
	}
	check_image(path, "restored superblock");
	unlink(path);
}

static void test_hostile_superblock(void)
{
	run_sb_cases("");
	run_sb_cases("-m crc=0");
}

/* Corrupt fields of AG 1's AGF: an error without --force; forced, the
 * whole group is kept. */
static void run_agf_cases(const char *args)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct counts c;
	struct geo g;
	uint64_t agf;

	if (!have_xfsprogs() || !make_image(path, args, 512 * MiB) || !xfs_db_counts(path, &c))
		return;
	read_geo(path, &g);
	agf = (uint64_t)g.agblocks * g.bs + g.ss;
	{
		const uint64_t root = sector_field(path, agf, 16, 4);
		const uint64_t flfirst = sector_field(path, agf, 40, 4);
		const struct field_case cases[] = {
			{ "magic", 0, 4, 0x12345678, -EUCLEAN },
			{ "version", 4, 4, 2, -EUCLEAN },
			{ "seqno", 8, 4, 0, -EUCLEAN },
			{ "length", 12, 4, g.agblocks - 1, -EUCLEAN },
			{ "bno root 0", 16, 4, 0, -EUCLEAN },
			{ "bno root beyond", 16, 4, g.agblocks, -EUCLEAN },
			{ "bno root = cnt root", 16, 4, sector_field(path, agf, 20, 4), -EUCLEAN },
			{ "bno levels 0", 28, 4, 0, -EUCLEAN },
			{ "bno levels 2", 28, 4, 2, -EUCLEAN },
			{ "bno levels 50", 28, 4, 50, -EUCLEAN },
			{ "flfirst beyond", 40, 4, 100000, -EUCLEAN },
			{ "fllast beyond", 44, 4, 0xFFFFFFF0, -EUCLEAN },
			{ "flcount huge", 48, 4, 0x7FFFFFFF, -EUCLEAN },
			{ "flcount one more", 48, 4, sector_field(path, agf, 48, 4) + 1, -EUCLEAN },
			{ "freeblks off by one", 52, 4, sector_field(path, agf, 52, 4) + 1, -EUCLEAN },
			{ "longest off by one", 56, 4, sector_field(path, agf, 56, 4) - 1, -EUCLEAN },
			{ "btreeblks off by one", 60, 4, sector_field(path, agf, 60, 4) + 1, -EUCLEAN },
			/* (a byte of the uuid made other than it is: a fixed value
			 * was already there once in 256 runs) */
			{ "uuid", 64, 1, sector_field(path, agf, 64, 1) ^ 0xFF, g.v5 ? -EUCLEAN : 0 },
		};
		(void)root;
		(void)flfirst;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			int r = examine_sector(path, &g, agf, cases[i].off, cases[i].val,
						cases[i].width, AGF_CRC, true, false, &info, &err);
			if (r != cases[i].want)
				fprintf(stderr, "  %s AGF %s: got %d (%s)\n", args, cases[i].what, r,
					err.msg);
			CHECK(r == cases[i].want);
			if (r == 0) {
				fs_info_free(&info);
				continue;
			}
			CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
			CHECK(strstr(err.msg, "xfs_repair") != NULL);
			r = examine_sector(path, &g, agf, cases[i].off, cases[i].val,
					    cases[i].width, AGF_CRC, true, true, &info, &err);
			CHECK(r == 0);
			if (r != 0)
				continue;
			CHECK(info.warning[0] != '\0');
			/* Forced: at least what is used, at most that plus AG 1. */
			CHECK(info.used_blocks >= c.dblocks - c.freesp);
			CHECK(info.used_blocks <= c.dblocks - c.freesp + g.agblocks);
			fs_info_free(&info);
		}
		if (g.v5) {
			CHECK(examine_sector(path, &g, agf, 52, 1, 4, AGF_CRC, false, false,
					      &info, &err) == -EUCLEAN);
			CHECK(strstr(err.msg, "checksum") != NULL);
		}
	}
	check_image(path, "restored AGF");
	unlink(path);
}

static void test_hostile_agf(void)
{
	run_agf_cases("");
	run_agf_cases("-m crc=0 -b size=1024");
}

/* The AGFL: a listed block outside the group, one listed twice, one that
 * is also in a free extent. */
static void test_hostile_agfl(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct geo g;
	uint64_t agf, agfl;
	unsigned char orig[4096], s[4096];
	uint32_t first, count, hdr;

	if (!have_xfsprogs() || !make_image(path, "", 512 * MiB))
		return;
	read_geo(path, &g);
	agf = g.ss;
	agfl = 3ull * g.ss;
	first = (uint32_t)sector_field(path, agf, 40, 4);
	count = (uint32_t)sector_field(path, agf, 48, 4);
	CHECK(count >= 2);
	hdr = g.v5 ? 36 : 0;
	read_at(path, agfl, orig, g.ss);
	{
		const struct { const char *what; uint32_t slot_delta; uint64_t val; } cases[] = {
			{ "block beyond the group", 0, g.agblocks + 5 },
			{ "block 0", 0, 0 },
			{ "listed twice", 1, 0 },   /* value: the first slot's block */
			{ "in free space", 0, g.agblocks - 1 },
		};
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			uint64_t v = cases[i].val;
			int r;
			memcpy(s, orig, g.ss);
			if (strcmp(cases[i].what, "listed twice") == 0)
				v = get_be(s + hdr + 4 * first, 4);
			put_be(s + hdr + 4 * (first + cases[i].slot_delta), v, 4);
			if (g.v5)
				xfs_sign(s, g.ss, 32);
			write_at(path, agfl, s, g.ss);
			r = examine(path, false, &info, &err);
			if (r != -EUCLEAN)
				fprintf(stderr, "  AGFL %s: got %d (%s)\n", cases[i].what, r, err.msg);
			CHECK(r == -EUCLEAN);
			CHECK(examine(path, true, &info, &err) == 0);
			fs_info_free(&info);
		}
		/* Unsigned: the checksum catches it. */
		memcpy(s, orig, g.ss);
		s[hdr + 4 * first + 3] ^= 1;
		write_at(path, agfl, s, g.ss);
		CHECK(examine(path, false, &info, &err) == -EUCLEAN);
		CHECK(strstr(err.msg, "checksum") != NULL);
	}
	write_at(path, agfl, orig, g.ss);
	check_image(path, "restored AGFL");
	unlink(path);
}

/* ---- the log ---- */

static void test_log(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct geo g;
	unsigned char orig[1024], b[1024];
	int r;

	if (!have_xfsprogs() || !make_image(path, "", 512 * MiB))
		return;
	read_geo(path, &g);
	read_at(path, g.log_off, orig, sizeof(orig));
	/* mkfs leaves one unmount record: header, then its operation. */
	CHECK_EQ_U(get_be(orig, 4), 0xFEEDBABE);
	CHECK_EQ_U(orig[512 + 9] & 0x20, 0x20);

	/* Not an unmount record any more. */
	memcpy(b, orig, sizeof(b));
	b[512 + 9] = 0;
	write_at(path, g.log_off, b, sizeof(b));
	r = examine(path, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK_EQ_U(err.exit_class, IM_EXIT_FSCK);
	CHECK(strstr(err.msg, "xfs_repair") && strstr(err.msg, "mount and unmount"));
	/* Forced: every block kept, as what the log allocated may lie in
	 * blocks the trees still call free. */
	r = examine(path, true, &info, &err);
	CHECK(r == 0);
	CHECK(strstr(info.warning, "log") != NULL);
	CHECK_EQ_U(info.used_blocks, info.block_count);
	fs_info_free(&info);
	write_at(path, g.log_off, orig, sizeof(orig));

	/* A block written after the unmount record: the head moved past it. */
	put_be(b, 1, 4);
	write_at(path, g.log_off + 1024, b, 512);
	CHECK(examine(path, false, &info, &err) == -EUCLEAN);
	/* A record of more than one operation. */
	memset(b, 0, 512);
	write_at(path, g.log_off + 1024, b, 512);
	memcpy(b, orig, 512);
	put_be(b + 40, 2, 4);
	write_at(path, g.log_off, b, 512);
	CHECK(examine(path, false, &info, &err) == -EUCLEAN);
	/* Its length one block short of the head, or pointing past it. */
	memcpy(b, orig, 512);
	put_be(b + 12, 0, 4);
	write_at(path, g.log_off, b, 512);
	CHECK(examine(path, false, &info, &err) == -EUCLEAN);
	put_be(b + 12, 4096, 4);
	write_at(path, g.log_off, b, 512);
	CHECK(examine(path, false, &info, &err) == -EUCLEAN);
	/* Another filesystem's log. */
	memcpy(b, orig, 512);
	b[304] ^= 0xFF;
	write_at(path, g.log_off, b, 512);
	r = examine(path, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, "another filesystem") != NULL);
	/* No record header anywhere before a head of cycle 1: the head's
	 * search finds none. */
	memcpy(b, orig, 512);
	put_be(b, 1, 4);
	write_at(path, g.log_off, b, 512);
	CHECK(examine(path, false, &info, &err) == -EUCLEAN);
	/* Zeros after a first block of cycle 7: only a first pass leaves
	 * zeros ("Log inconsistent or not a log" to the kernel). */
	memcpy(b, orig, 512);
	put_be(b + 4, 7, 4);
	write_at(path, g.log_off, b, 512);
	CHECK(examine(path, false, &info, &err) == -EUCLEAN);
	/* What the kernel takes as clean, the plugin does too: a log whose
	 * first block is zero is zeroed whole to it, whatever follows. */
	memset(b, 0, 512);
	write_at(path, g.log_off, b, 512);
	CHECK(examine(path, false, &info, &err) == 0);
	fs_info_free(&info);
	/* A log zeroed whole (as xfs_repair -L leaves it) holds nothing. */
	{
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of=%s bs=4096 seek=%llu count=%u conv=notrunc status=none",
			 path, (unsigned long long)(g.log_off / 4096), g.logblocks * (g.bs / 4096));
		CHECK(g.bs >= 4096 && system(cmd) == 0);
		CHECK(examine(path, false, &info, &err) == 0);
		fs_info_free(&info);
	}
	write_at(path, g.log_off, orig, sizeof(orig));
	check_image(path, "restored log");
	unlink(path);
}

/* The whole log stamped with one cycle, records ending at its very end:
 * the head is block 0, as the kernel's xlog_find_head() puts it. */
static void test_log_wrapped(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct geo g;
	unsigned char rec[1024];
	uint64_t bbs, rec_bb;

	if (!have_xfsprogs() || !make_image(path, "", 512 * MiB))
		return;
	read_geo(path, &g);
	bbs = (uint64_t)g.logblocks * g.bs / 512;
	read_at(path, g.log_off, rec, sizeof(rec));
	/* Stamp every block with cycle 2, then move the unmount record to
	 * the last two blocks. */
	{
		unsigned char *buf = calloc(1, 1 << 20);
		CHECK(buf != NULL);
		for (uint64_t off = 0; off < bbs * 512; off += 1 << 20) {
			for (unsigned i = 0; i < (1u << 20); i += 512)
				put_be(buf + i, 2, 4);
			write_at(path, g.log_off + off, buf, 1 << 20);
		}
		free(buf);
	}
	rec_bb = bbs - 2;
	put_be(rec + 4, 2, 4);                       /* h_cycle */
	put_be(rec + 16, 2ull << 32 | rec_bb, 8);    /* h_lsn */
	put_be(rec + 512, 2, 4);                     /* the stamped first word */
	write_at(path, g.log_off + rec_bb * 512, rec, sizeof(rec));
	CHECK(examine(path, false, &info, &err) == 0);
	if (err.msg[0])
		fprintf(stderr, "  %s\n", err.msg);
	fs_info_free(&info);
	/* One block of the previous cycle shortly before the end: a hole the
	 * kernel takes as the head, so the unmount record is not the last.
	 * (Further back than in-flight writes reach, the kernel does not look,
	 * and neither does the plugin.) */
	put_be(rec, 1, 4);
	write_at(path, g.log_off + (bbs - 100) * 512, rec, 512);
	CHECK(examine(path, false, &info, &err) == -EUCLEAN);
	unlink(path);
}

/* A log rewritten by xfs_db's uuid command (xfs_admin -U, and xfs_repair
 * on v5 the same way): a record of the next cycle at block 0, zeros, then
 * records of the previous cycle in 256 KiB steps.  The kernel's head search
 * backs up to block 0 and finds the last filler record ending there: clean. */
static void test_log_rewritten_by_xfs_db(void)
{
	char path[32], cmd[128];

	if (!have_xfsprogs() || !make_image(path, "", 512 * MiB))
		return;
	snprintf(cmd, sizeof(cmd), "xfs_db -x -c 'uuid generate' %s >/dev/null 2>&1", path);
	CHECK(system(cmd) == 0);
	check_image(path, "uuid generate");
	snprintf(cmd, sizeof(cmd), "xfs_repair %s >/dev/null 2>&1", path);
	CHECK(system(cmd) == 0);
	check_image(path, "xfs_repair");
	unlink(path);
}

/* ---- other devices ---- */

static void test_external_log_and_realtime(void)
{
	char path[32], other[32], args[128];
	struct fs_info info;
	struct im_err err;
	int fd;

	if (!have_xfsprogs())
		return;
	snprintf(other, sizeof(other), "%s/test-xfs-dev-XXXXXX", image_dir());
	fd = mkstemp(other);
	CHECK(fd >= 0 && ftruncate(fd, 64 * MiB) == 0);
	close(fd);
	snprintf(args, sizeof(args), "-l logdev=%s", other);
	if (make_image(path, args, 512 * MiB)) {
		CHECK(examine(path, true, &info, &err) == -ENOTSUP);
		CHECK_EQ_U(err.exit_class, IM_EXIT_UNSUPP);
		CHECK(strstr(err.msg, "external") != NULL);
		unlink(path);
	}
	snprintf(args, sizeof(args), "-r rtdev=%s", other);
	if (make_image(path, args, 512 * MiB)) {
		CHECK(examine(path, true, &info, &err) == -ENOTSUP);
		CHECK(strstr(err.msg, "realtime") != NULL);
		unlink(path);
	}
	unlink(other);
}

/* Through the registry: libblkid's "xfs" picks the plugin; a superblock
 * failing its checksum is turned down by probe() and copied raw. */
static void test_registry(void)
{
	char path[32];
	unsigned char sb[512];

	if (!have_xfsprogs() || !make_image(path, "", 512 * MiB))
		return;
	expect_plugin(path, &fs_plugin_xfs, "xfs");
	read_at(path, 0, sb, sizeof(sb));
	sb[108] ^= 1;   /* the label: covered only by the CRC */
	write_at(path, 0, sb, sizeof(sb));
	expect_plugin(path, &fs_plugin_raw, NULL);
	unlink(path);
}

/* ---- filled filesystems ---- */

/* The bytes the plugin counts as used, where it takes the image. */
static bool plugin_used(const char *path, uint64_t *bytes)
{
	struct fs_info info;
	struct im_err err;

	if (examine(path, false, &info, &err) != 0)
		return false;
	*bytes = info.used_blocks * info.block_size;
	fs_info_free(&info);
	return true;
}

/* mkfs.xfs -p: files of varied sizes, a folder, a symbolic link. */
static void test_protofile(void)
{
	char dir[] = "/tmp/test-xfs-proto-XXXXXX", proto[128], file[160], args[256];
	const char *kinds[] = { "", "-b size=1024", "-m crc=0" };
	FILE *pf;

	if (!have_xfsprogs())
		return;
	CHECK(mkdtemp(dir) != NULL);
	snprintf(proto, sizeof(proto), "%s/proto", dir);
	pf = fopen(proto, "w");
	CHECK(pf != NULL);
	if (!pf)
		return;
	fprintf(pf, "/dev/null\n0 0\nd--755 0 0\n");
	snprintf(file, sizeof(file), "%s/big", dir);
	CHECK(write_pattern_file(file, 9 * MiB + 123, 1));
	fprintf(pf, "big ---644 0 0 %s\n", file);
	fprintf(pf, "link l--777 0 0 big\nsub d--755 0 0\n");
	for (int i = 0; i < 40; i++) {
		snprintf(file, sizeof(file), "%s/f%d", dir, i);
		CHECK(write_pattern_file(file, (size_t)i * 7000 + 1, (unsigned)i));
		fprintf(pf, "f%d ---600 0 0 %s\n", i, file);
	}
	fprintf(pf, "$\n$\n");
	fclose(pf);
	/* The files' data is in the bitmap: more than 9 MiB beyond an empty fs. */
	snprintf(args, sizeof(args), "-p %s", proto);
	check_filled(&xfs, kinds, sizeof(kinds) / sizeof(kinds[0]), args, 512 * MiB, plugin_used,
		     9 * MiB);
	CHECK(remove_tree(dir));
}

/* Mounted through a loop device, xfs_io runs the commands of `script` on
 * one file, 50 small files are written, then the shell commands `extra`
 * ($m is the mount point) before the unmount.  Returns false when it could
 * not be done (a failed check only when must_mount). */
static bool run_mounted(const char *path, const char *script, const char *extra, bool must_mount)
{
	char cmd[1024];
	int r;

	snprintf(cmd, sizeof(cmd),
		 "set -e; m=$(mktemp -d /tmp/test-xfs-mnt-XXXXXX); d=$(losetup -f --show %s); "
		 "trap 'umount $m 2>/dev/null || true; losetup -d $d; rmdir $m' EXIT; "
		 "mount -t xfs $d $m %s; xfs_io -f $m/frag < %s >/dev/null; "
		 "seq 1 50 | while read i; do head -c $((i * 3000)) /dev/urandom > $m/s$i; done; %s; "
		 "umount $m",
		 path, must_mount ? "" : "2>/dev/null", script, extra);
	r = system(cmd);
	if (must_mount)
		CHECK(r == 0);
	return r == 0;
}

/* An xfs_io script in a temporary file (path[32]); false on failure. */
static FILE *io_script(char path[static 32])
{
	int fd;

	strcpy(path, "/tmp/test-xfs-io-XXXXXX");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	return fd >= 0 ? fdopen(fd, "w") : NULL;
}

/* A file with every other few blocks punched out fragments the free space
 * into thousands of extents (a bnobt of two or three levels, blocks taken
 * from the AGFL into agf_btreeblks). */
static bool fragment_as(const char *path, unsigned holes, unsigned step_kib, const char *extra,
			bool must_mount)
{
	char script[32];
	FILE *f = io_script(script);
	bool ok;

	if (!f)
		return false;
	fprintf(f, "falloc 0 %uk\n", holes * step_kib * 2);
	for (unsigned i = 0; i < holes; i++)
		fprintf(f, "fpunch %uk %uk\n", i * step_kib * 2, step_kib);
	fclose(f);
	ok = run_mounted(path, script, extra, must_mount);
	unlink(script);
	return ok;
}

static bool fragment(const char *path, unsigned holes, unsigned step_kib, const char *extra)
{
	return fragment_as(path, holes, step_kib, extra, true);
}

/* Kernels from 6.x on may be built without v4 support: then v4 is only
 * checked unmounted. */
/* The fragmented 1 KiB-block v5 filesystem, made once for the tests that
 * read it (test_fragmented) and damage copies of it (test_hostile_bnobt). */
static char frag_path[32];

static void check_fragmented(const char *args, unsigned holes, unsigned step_kib, bool v4)
{
	char path[32];
	struct counts c;
	unsigned char agf[512];
	struct geo g;
	uint32_t max_levels = 0;

	if (!have_xfsprogs() || !can_mount() || !make_image(path, args, 512 * MiB))
		return;
	if (!fragment_as(path, holes, step_kib, "true", !v4) || !xfs_db_counts(path, &c)) {
		if (v4)
			printf("SKIP: this kernel does not mount v4 XFS (%s)\n", args);
		unlink(path);
		return;
	}
	read_geo(path, &g);
	for (uint32_t a = 0; a < g.agcount; a++) {
		read_at(path, (uint64_t)a * g.agblocks * g.bs + g.ss, agf, sizeof(agf));
		if (get_be(agf + 28, 4) > max_levels)
			max_levels = (uint32_t)get_be(agf + 28, 4);
	}
	printf("# %s: bnobt of %u levels, sb_fdblocks %llu, freesp %llu\n", args, max_levels,
	       (unsigned long long)c.fdblocks, (unsigned long long)c.freesp);
	CHECK(max_levels >= 2);
	check_image(path, args);
	if (strcmp(args, "-b size=1024") == 0 && !frag_path[0] && max_levels >= 3)
		memcpy(frag_path, path, sizeof(frag_path));
	else
		unlink(path);
}

static void test_fragmented(void)
{
	check_fragmented("-b size=1024", 12000, 4, false);
	check_fragmented("", 3000, 8, false);
	/* rmapbt blocks come off the AGFL too, and count in agf_btreeblks. */
	check_fragmented("-m rmapbt=1 -b size=1024", 3000, 4, false);
	check_fragmented("-m crc=0", 3000, 8, true);
}

/* A log left dirty by a shutdown while files were being written. */
static void test_dirty_log_mounted(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	int r;

	if (!have_xfsprogs() || !can_mount() || !make_image(path, "", 512 * MiB))
		return;
	if (!fragment(path, 100, 4, "xfs_io -c syncfs $m; head -c 300000 /dev/urandom > $m/late; xfs_io -x -c shutdown $m")) {
		unlink(path);
		return;
	}
	r = examine(path, false, &info, &err);
	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, "log") != NULL);
	r = examine(path, true, &info, &err);
	CHECK(r == 0);
	if (r == 0) {
		CHECK_EQ_U(info.used_blocks, info.block_count);
		fs_info_free(&info);
	}
	unlink(path);
}

/* A log written round by the kernel: with a 256 KiB log stripe unit every
 * fsync writes a 256 KiB record, so 320 of them go round a 64 MiB log.
 * Clean after the unmount; dirty after a shutdown. */
static void test_wrapped_log_mounted(void)
{
	const char *extra[] = { "true", "xfs_io -c syncfs $m; xfs_io -c 'pwrite 0 4k' $m/s1 >/dev/null; xfs_io -x -c shutdown $m" };

	for (int k = 0; k < 2; k++) {
		char path[32], script[32];
		struct fs_info info;
		struct im_err err;
		struct geo g;
		unsigned char bb[8];
		FILE *f;
		int r;

		if (!have_xfsprogs() || !can_mount() || !make_image(path, "-l su=256k", 512 * MiB))
			return;
		if (!(f = io_script(script))) {
			unlink(path);
			return;
		}
		for (int i = 1; i <= 320; i++)
			fprintf(f, "pwrite %d 1\nfsync\n", i);
		fclose(f);
		r = run_mounted(path, script, extra[k], true);
		unlink(script);
		if (!r) {
			unlink(path);
			return;
		}
		read_geo(path, &g);
		read_at(path, g.log_off, bb, sizeof(bb));
		printf("# log after 320 fsyncs%s: cycle %llu at its first block\n",
		       k ? " and a shutdown" : "", (unsigned long long)get_be(bb + 4, 4));
		CHECK(get_be(bb + 4, 4) >= 2);   /* a record header: h_cycle */
		if (k == 0) {
			check_image(path, "wrapped log");
		} else {
			r = examine(path, false, &info, &err);
			CHECK(r == -EUCLEAN);
			CHECK(strstr(err.msg, "log") != NULL);
		}
		unlink(path);
	}
}

/* Damage to the bnobt of a fragmented filesystem's busiest AG, re-signed
 * so that the walk itself must catch it: loops, a record out of order or
 * out of the group, absurd counts. */
static void test_hostile_bnobt(void)
{
	char path[32];
	struct fs_info info;
	struct im_err err;
	struct geo g;
	unsigned char agf[512], *orig, *blk;
	uint64_t root_off = 0;
	uint32_t ag = 0, root = 0, levels = 0, hdr, node_max;

	if (!have_xfsprogs() || !can_mount())
		return;
	if (!frag_path[0]) {
		CHECK(!"test_fragmented left no 3-level filesystem");
		return;
	}
	memcpy(path, frag_path, sizeof(path));
	read_geo(path, &g);
	for (uint32_t a = 0; a < g.agcount; a++) {
		read_at(path, (uint64_t)a * g.agblocks * g.bs + g.ss, agf, sizeof(agf));
		if (get_be(agf + 28, 4) > levels) {
			levels = (uint32_t)get_be(agf + 28, 4);
			root = (uint32_t)get_be(agf + 16, 4);
			ag = a;
		}
	}
	CHECK(levels >= 2);
	hdr = 56;
	node_max = (g.bs - hdr) / 12;
	root_off = ((uint64_t)ag * g.agblocks + root) * g.bs;
	orig = malloc(g.bs);
	blk = malloc(g.bs);
	read_at(path, root_off, orig, g.bs);
	CHECK_EQ_U(get_be(orig, 4), 0x41423342);   /* AB3B */
	CHECK(get_be(orig + 6, 2) >= 2);
	{
		uint32_t ptr1 = (uint32_t)get_be(orig + hdr + node_max * 8 + 4, 4);
		const struct { const char *what; unsigned off, width; uint64_t val; } cases[] = {
			{ "pointer to the root itself", hdr + node_max * 8, 4, root },
			{ "two pointers to one child", hdr + node_max * 8, 4, ptr1 },
			{ "pointer beyond the group", hdr + node_max * 8, 4, g.agblocks + 10 },
			{ "pointer to an AG header", hdr + node_max * 8, 4, 0 },
			{ "numrecs huge", 6, 2, 0xFFFF },
			{ "numrecs 0", 6, 2, 0 },
			{ "level wrong", 4, 2, 7 },
			{ "magic", 0, 4, 0x41425443 },
			{ "blkno", 16, 8, 12345 },
			{ "owner", 48, 4, ag + 1 },
		};
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			int r;
			memcpy(blk, orig, g.bs);
			put_be(blk + cases[i].off, cases[i].val, cases[i].width);
			xfs_sign(blk, g.bs, 52);
			write_at(path, root_off, blk, g.bs);
			r = examine(path, false, &info, &err);
			if (r != -EUCLEAN)
				fprintf(stderr, "  bnobt %s: got %d (%s)\n", cases[i].what, r, err.msg);
			CHECK(r == -EUCLEAN);
			r = examine(path, true, &info, &err);
			CHECK(r == 0);
			if (r == 0)
				fs_info_free(&info);
		}
	}
	write_at(path, root_off, orig, g.bs);
	/* The leftmost leaf: its first record beyond the group, empty,
	 * overlapping the next. */
	{
		uint64_t leaf_off = root_off;

		memcpy(blk, orig, g.bs);
		while (get_be(blk + 4, 2) > 0) {
			uint32_t child = (uint32_t)get_be(blk + hdr + node_max * 8, 4);
			leaf_off = ((uint64_t)ag * g.agblocks + child) * g.bs;
			read_at(path, leaf_off, blk, g.bs);
		}
		const struct { const char *what; unsigned off; uint32_t val; } cases[] = {
			{ "start beyond the group", hdr, g.agblocks },
			{ "length 0", hdr + 4, 0 },
			{ "length past the group", hdr + 4, 0x7FFFFFFF },
			{ "overlaps the next", hdr + 4, 0 },   /* value set below */
		};
		read_at(path, leaf_off, orig, g.bs);
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			uint32_t v = cases[i].val;
			memcpy(blk, orig, g.bs);
			if (strcmp(cases[i].what, "overlaps the next") == 0)
				v = (uint32_t)(get_be(orig + hdr + 8, 4) - get_be(orig + hdr, 4) + 1);
			put_be(blk + cases[i].off, v, 4);
			xfs_sign(blk, g.bs, 52);
			write_at(path, leaf_off, blk, g.bs);
			CHECK(examine(path, false, &info, &err) == -EUCLEAN);
			CHECK(examine(path, true, &info, &err) == 0);
			fs_info_free(&info);
		}
		/* Unsigned: the checksum. */
		memcpy(blk, orig, g.bs);
		blk[hdr + 3] ^= 1;
		write_at(path, leaf_off, blk, g.bs);
		CHECK(examine(path, false, &info, &err) == -EUCLEAN);
		CHECK(strstr(err.msg, "checksum") != NULL);
		write_at(path, leaf_off, orig, g.bs);
	}
	free(orig);
	free(blk);
	check_image(path, "restored bnobt");
	unlink(path);
}

/* Random bytes over the superblock, AGF and AGFL of AG 0, re-signed half
 * the time so the deeper checks are reached: never a crash. */
static void test_fuzz(void)
{
	int iters = fuzz_rounds("TEST_XFS_FUZZ", 300);
	unsigned seed = 4242;
	char path[32];
	unsigned char orig[2048], buf[2048];
	int ok = 0, failed = 0;

	if (!have_xfsprogs() || !make_image(path, "", 512 * MiB))
		return;
	read_at(path, 0, orig, sizeof(orig));
	for (int it = 0; it < iters; it++) {
		int n = 1 + (int)(rand_r(&seed) % 4);

		memcpy(buf, orig, sizeof(buf));
		for (int j = 0; j < n; j++) {
			size_t sect = rand_r(&seed) % 4;
			size_t at = sect * 512 + rand_r(&seed) % (sect == 3 ? 512 : 264);
			buf[at] = fuzz_byte(&seed);
		}
		if (rand_r(&seed) % 2) {
			xfs_sign(buf, 512, SB_CRC);
			xfs_sign(buf + 512, 512, AGF_CRC);
			xfs_sign(buf + 1536, 512, 32);
		}
		write_at(path, 0, buf, sizeof(buf));
		examine_fuzzed(&fs_plugin_xfs, path, &seed, &ok, &failed);
	}
	write_at(path, 0, orig, sizeof(orig));
	CHECK(ok > 0 && failed > 0);
	check_image(path, "after fuzzing");
	unlink(path);
}

UNIT_MAIN(UNIT(test_v5_4k), UNIT(test_v5_1k), UNIT(test_v5_64k), UNIT(test_v5_sector_4k),
	  UNIT(test_v5_rmapbt), UNIT(test_v5_log_su), UNIT(test_v5_short_ag), UNIT(test_v4),
	  UNIT(test_hostile_superblock), UNIT(test_hostile_agf), UNIT(test_hostile_agfl),
	  UNIT(test_log), UNIT(test_log_wrapped), UNIT(test_log_rewritten_by_xfs_db), UNIT(test_external_log_and_realtime),
	  UNIT(test_registry), UNIT(test_protofile), UNIT(test_fragmented),
	  UNIT(test_dirty_log_mounted), UNIT(test_wrapped_log_mounted), UNIT(test_hostile_bnobt), UNIT(test_fuzz))
