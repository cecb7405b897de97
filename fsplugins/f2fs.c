/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * F2FS.
 *
 * Used blocks: everything before the main area (both superblocks, the two
 * checkpoint packs, both SIT and NAT copies, the SSA), then every block the
 * segment information table marks valid in the main area.  The bitmap unit
 * is the F2FS block (4 KiB, the only size F2FS has).
 *
 * Facts from f2fs-tools (include/f2fs_fs.h; fsck/mount.c: sanity_check_raw_
 * super, validate_checkpoint, get_valid_checkpoint, build_sit_entries,
 * read_compacted_summaries / read_normal_summaries) and the kernel
 * (fs/f2fs/super.c: sanity_check_raw_super, sanity_check_area_boundary,
 * f2fs_sanity_check_ckpt; checkpoint.c: get_checkpoint_version,
 * f2fs_checkpoint_chksum; segment.c: build_sit_entries; f2fs.h:
 * __bitmap_ptr, f2fs_test_bit):
 *
 *  - The superblock lives at byte 1024 of blocks 0 and 1; the first copy
 *    that passes the checks is used.  With the sb_checksum feature it
 *    carries a CRC at offset 3068.
 *  - A checkpoint pack is a run of blocks at the start of its own segment
 *    (the second pack one segment after the first), starting and ending
 *    with a copy of the checkpoint block.  A pack is valid when both copies
 *    pass their CRC (over the block, the stored CRC skipped) and carry the
 *    same version; of two valid packs the newer version wins.  CRCs are
 *    crc32 (little-endian polynomial) seeded with the F2FS magic, without
 *    final inversion.
 *  - The SIT is kept twice; for each SIT block, the checkpoint's SIT
 *    version bitmap (a bit per block, most significant bit first) says
 *    which copy is current.  It sits after the checkpoint fields, or in the
 *    cp_payload blocks after the checkpoint block, or after the NAT bitmap
 *    and a CRC with CP_LARGE_NAT_BITMAP_FLAG.
 *  - Recent SIT updates may live only in the SIT journal of the cold data
 *    log's summary, inside the checkpoint pack: in the compacted summary
 *    block (second half of its journal area) with CP_COMPACT_SUM_FLAG,
 *    else in the cold data summary block, whose place depends on whether
 *    node summaries were written (CP_UMOUNT_FLAG or CP_FASTBOOT_FLAG).
 *    Journal entries override the SIT block's.
 *  - A SIT entry: vblocks (low 10 bits: valid blocks, high 6: segment
 *    type), a 64-byte map of the segment's 512 blocks (MSB first), mtime.
 *
 * Cross-checks: each entry's count against its map, and the sum over the
 * main area against the checkpoint's valid_block_count: a mismatch is
 * -EUCLEAN unless forced.  A checkpoint without CP_UMOUNT_FLAG (not cleanly
 * unmounted), with CP_ERROR_FLAG or CP_FSCK_FLAG is refused unless forced.
 *
 * Not handled: zoned devices, several devices, and the read-only image
 * format (-ENOTSUP).  A forced copy of an unclean F2FS keeps what its last
 * checkpoint holds: blocks written after it for fsync (roll-forward
 * recovery) are free in the SIT and not copied.
 */
#include "imager/fsplugin.h"
#include "imager/bytes.h"
#include "imager/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F2FS_MAGIC            0xF2F52010u
#define F2FS_SB_OFFSET        1024u
#define F2FS_SB_SIZE          3072u
#define F2FS_BLOCK            4096u
#define F2FS_BLOCK_SHIFT      12
#define LOG_BLOCKS_PER_SEG    9
#define BLOCKS_PER_SEG        512u
#define MIN_SEGMENTS          9u
#define MAX_SEGMENTS          (16u * 1024 * 1024 / 2)
#define MAX_EXTENSIONS        64u
#define CURSEG_PERSIST        6u     /* 3 data + 3 node logs */
#define CP_PACKS              2u

/* Superblock fields (byte offsets in the 3072-byte superblock). */
#define SB_MAGIC              0
#define SB_LOG_SECTORSIZE     8
#define SB_LOG_SECTORS_PER_BLK 12
#define SB_LOG_BLOCKSIZE      16
#define SB_LOG_BLOCKS_PER_SEG 20
#define SB_SEGS_PER_SEC       24
#define SB_SECS_PER_ZONE      28
#define SB_CHECKSUM_OFFSET    32
#define SB_BLOCK_COUNT        36
#define SB_SECTION_COUNT      44
#define SB_SEGMENT_COUNT      48
#define SB_SEGS_CKPT          52
#define SB_SEGS_SIT           56
#define SB_SEGS_NAT           60
#define SB_SEGS_SSA           64
#define SB_SEGS_MAIN          68
#define SB_SEGMENT0           72
#define SB_CP_BLKADDR         76
#define SB_SIT_BLKADDR        80
#define SB_NAT_BLKADDR        84
#define SB_SSA_BLKADDR        88
#define SB_MAIN_BLKADDR       92
#define SB_ROOT_INO           96
#define SB_NODE_INO           100
#define SB_META_INO           104
#define SB_EXTENSION_COUNT    1148
#define SB_CP_PAYLOAD         1664
#define SB_FEATURE            2180
#define SB_DEVS               2201   /* 8 x (64-byte path, le32 segments) */
#define SB_HOT_EXT_COUNT      2757
#define SB_CRC                3068

#define FEATURE_BLKZONED      0x0002u
#define FEATURE_SB_CHKSUM     0x0800u
#define FEATURE_RO            0x4000u

/* Checkpoint fields (byte offsets in the checkpoint block). */
#define CP_VERSION            0
#define CP_USER_BLOCKS        8
#define CP_VALID_BLOCKS       16
#define CP_RSVD_SEGS          24
#define CP_OVERPROV_SEGS      28
#define CP_CUR_NODE_SEGNO     36     /* 8 x le32 */
#define CP_CUR_NODE_BLKOFF    68     /* 8 x le16 */
#define CP_CUR_DATA_SEGNO     84
#define CP_CUR_DATA_BLKOFF    116
#define CP_FLAGS              132
#define CP_PACK_TOTAL         136
#define CP_PACK_START_SUM     140
#define CP_SIT_BITMAP_BYTES   156
#define CP_NAT_BITMAP_BYTES   160
#define CP_CHECKSUM_OFFSET    164
#define CP_BITMAP_OFFSET      192    /* sit_nat_version_bitmap */
#define CP_CHKSUM_MAX         4092   /* CP_CHKSUM_OFFSET of f2fs_fs.h */

#define CP_UMOUNT_FLAG        0x0001u
#define CP_COMPACT_SUM_FLAG   0x0004u
#define CP_ERROR_FLAG         0x0008u
#define CP_FSCK_FLAG          0x0010u
#define CP_FASTBOOT_FLAG      0x0020u
#define CP_LARGE_NAT_BITMAP   0x0400u
#define CP_QUOTA_NEED_FSCK    0x0800u
#define CP_DISABLED_FLAG      0x1000u
#define CP_RESIZEFS_FLAG      0x4000u

/* Summaries and SIT. */
#define SUM_ENTRIES_BYTES     (512u * 7)                  /* 3584 */
#define SUM_JOURNAL_BYTES     (F2FS_BLOCK - 5 - SUM_ENTRIES_BYTES)   /* 507 */
#define SIT_ENTRY_BYTES       74u    /* le16 vblocks, 64-byte map, le64 mtime */
#define SIT_ENTRIES_PER_BLOCK (F2FS_BLOCK / SIT_ENTRY_BYTES)  /* 55 */
#define SIT_JOURNAL_ENTRY     (4u + SIT_ENTRY_BYTES)     /* le32 segno + entry */
#define SIT_JOURNAL_ENTRIES   ((SUM_JOURNAL_BYTES - 2) / SIT_JOURNAL_ENTRY)  /* 6 */
#define SIT_VBLOCKS_MASK      0x03FFu
#define CURSEG_COLD_DATA      2u

struct sit_journal_entry {
	uint32_t segno;
	unsigned char entry[SIT_ENTRY_BYTES];
};

struct f2fs_priv {
	/* superblock */
	unsigned sb_copy;             /* 0 or 1: the copy in use */
	uint64_t block_count;
	uint32_t segment_count, segs_ckpt, segs_sit, segs_nat, segs_ssa, segs_main;
	uint32_t cp_blkaddr, sit_blkaddr, main_blkaddr;
	uint32_t cp_payload;
	uint32_t feature;

	/* the checkpoint in use */
	unsigned pack;                /* 0 or 1 */
	uint64_t version;
	uint32_t pack_start;          /* block of the pack's first checkpoint copy */
	uint32_t flags;
	uint32_t pack_total;
	uint32_t start_sum;
	uint64_t valid_blocks;        /* valid_block_count */
	uint32_t sit_blocks;          /* SIT blocks per copy */
	unsigned char *sit_bitmap;    /* which SIT copy is current, per block */
	uint32_t sit_bitmap_bytes;

	struct sit_journal_entry journal[SIT_JOURNAL_ENTRIES];
	unsigned journal_count;

	unsigned char *block;         /* one F2FS block */
};

/* f2fs_cal_crc32: little-endian CRC-32, seeded, no final inversion. */
static uint32_t f2fs_crc32(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int i = 0; i < 8; i++)
			crc = (crc >> 1) ^ ((crc & 1) ? 0xEDB88320u : 0);
	}
	return crc;
}

/* Bit nr of an F2FS bitmap: most significant bit first (f2fs_test_bit). */
static bool f2fs_bit(const unsigned char *map, uint64_t nr)
{
	return map[nr >> 3] & (0x80u >> (nr & 7));
}

static bool read_block(struct fs_ctx *ctx, uint64_t blkaddr, unsigned char *buf)
{
	return fs_read(ctx, blkaddr << F2FS_BLOCK_SHIFT, buf, F2FS_BLOCK) == 0;
}

/* The layout fields check_superblock keeps only while it checks. */
struct sb_layout {
	uint32_t segs_per_sec, secs_per_zone, sections, segment0;
};

#define BAD(...) return im_errf(why, IM_EXIT_SOURCE, -EINVAL, __VA_ARGS__)

/* The magic, the CRC (sb_checksum feature), and the block, segment and
 * sector sizes: the only ones this plugin reads. */
static int check_format(const unsigned char *sb, struct im_err *why)
{
	uint32_t log_ss, log_spb;

	if (le32(sb + SB_MAGIC) != F2FS_MAGIC)
		BAD("no F2FS magic");
	if ((le32(sb + SB_FEATURE) & FEATURE_SB_CHKSUM) &&
	    (le32(sb + SB_CHECKSUM_OFFSET) != SB_CRC ||
	     f2fs_crc32(F2FS_MAGIC, sb, SB_CRC) != le32(sb + SB_CRC)))
		BAD("superblock CRC mismatch");
	if (le32(sb + SB_LOG_BLOCKSIZE) != F2FS_BLOCK_SHIFT)
		BAD("log_blocksize %u (only 12, 4 KiB blocks)", le32(sb + SB_LOG_BLOCKSIZE));
	if (le32(sb + SB_LOG_BLOCKS_PER_SEG) != LOG_BLOCKS_PER_SEG)
		BAD("log_blocks_per_seg %u (only 9)", le32(sb + SB_LOG_BLOCKS_PER_SEG));
	log_ss = le32(sb + SB_LOG_SECTORSIZE);
	log_spb = le32(sb + SB_LOG_SECTORS_PER_BLK);
	if (log_ss < 9 || log_ss > 12 || log_spb != F2FS_BLOCK_SHIFT - log_ss)
		BAD("log_sectorsize %u with log_sectors_per_block %u", log_ss, log_spb);
	return 0;
}

/* The fields fp keeps, and those only checked into lay; none checked yet. */
static void read_sb_fields(const unsigned char *sb, struct f2fs_priv *fp, struct sb_layout *lay)
{
	fp->block_count = le64(sb + SB_BLOCK_COUNT);
	fp->segment_count = le32(sb + SB_SEGMENT_COUNT);
	fp->segs_ckpt = le32(sb + SB_SEGS_CKPT);
	fp->segs_sit = le32(sb + SB_SEGS_SIT);
	fp->segs_nat = le32(sb + SB_SEGS_NAT);
	fp->segs_ssa = le32(sb + SB_SEGS_SSA);
	fp->segs_main = le32(sb + SB_SEGS_MAIN);
	lay->segment0 = le32(sb + SB_SEGMENT0);
	fp->cp_blkaddr = le32(sb + SB_CP_BLKADDR);
	fp->sit_blkaddr = le32(sb + SB_SIT_BLKADDR);
	fp->main_blkaddr = le32(sb + SB_MAIN_BLKADDR);
	fp->cp_payload = le32(sb + SB_CP_PAYLOAD);
	fp->feature = le32(sb + SB_FEATURE);
	lay->segs_per_sec = le32(sb + SB_SEGS_PER_SEC);
	lay->secs_per_zone = le32(sb + SB_SECS_PER_ZONE);
	lay->sections = le32(sb + SB_SECTION_COUNT);
}

/* The counts: segments, sections and zones agreeing, the blocks inside the
 * device, the reserved inodes, the extension lists and cp_payload. */
static int check_counts(struct fs_ctx *ctx, const unsigned char *sb, const struct f2fs_priv *fp,
			const struct sb_layout *lay, struct im_err *why)
{
	uint64_t device_blocks = fs_device_size(ctx) >> F2FS_BLOCK_SHIFT;

	if (fp->segment_count < MIN_SEGMENTS || fp->segment_count > MAX_SEGMENTS)
		BAD("segment_count %u (%u..%u)", fp->segment_count, MIN_SEGMENTS, MAX_SEGMENTS);
	if (lay->sections == 0 || lay->sections > fp->segs_main || lay->segs_per_sec == 0 ||
	    lay->segs_per_sec > fp->segment_count ||
	    (uint64_t)lay->sections * lay->segs_per_sec != fp->segs_main ||
	    fp->segment_count / lay->segs_per_sec < lay->sections)
		BAD("section_count %u of %u segments does not match segment_count_main %u",
		    lay->sections, lay->segs_per_sec, fp->segs_main);
	if (lay->secs_per_zone == 0 || lay->secs_per_zone > lay->sections)
		BAD("secs_per_zone %u of %u sections", lay->secs_per_zone, lay->sections);
	if (fp->block_count > device_blocks)
		BAD("block_count %llu does not fit in the %llu blocks of the device",
		    (unsigned long long)fp->block_count, (unsigned long long)device_blocks);
	if (fp->segment_count > fp->block_count >> LOG_BLOCKS_PER_SEG)
		BAD("segment_count %u does not fit in block_count %llu", fp->segment_count,
		    (unsigned long long)fp->block_count);
	if (le32(sb + SB_NODE_INO) != 1 || le32(sb + SB_META_INO) != 2 ||
	    le32(sb + SB_ROOT_INO) != 3)
		BAD("reserved inode numbers %u/%u/%u (1/2/3)", le32(sb + SB_NODE_INO),
		    le32(sb + SB_META_INO), le32(sb + SB_ROOT_INO));
	if (le32(sb + SB_EXTENSION_COUNT) > MAX_EXTENSIONS ||
	    le32(sb + SB_EXTENSION_COUNT) + sb[SB_HOT_EXT_COUNT] > MAX_EXTENSIONS)
		BAD("extension counts %u + %u", le32(sb + SB_EXTENSION_COUNT), sb[SB_HOT_EXT_COUNT]);
	if (fp->cp_payload >= BLOCKS_PER_SEG - CP_PACKS - CURSEG_PERSIST)
		BAD("cp_payload %u", fp->cp_payload);
	return 0;
}

/* The areas follow each other, whole segments each, inside the segments
 * and the blocks; the SIT and the SSA are large enough for the main area.
 * Sets fp->sit_blocks. */
static int check_areas(const unsigned char *sb, struct f2fs_priv *fp,
		       const struct sb_layout *lay, struct im_err *why)
{
	uint32_t sit = fp->segs_sit, nat = fp->segs_nat, ssa = fp->segs_ssa;
	uint64_t seg_end, main_end, sit_capacity;

	if (lay->segment0 != fp->cp_blkaddr)
		BAD("segment0_blkaddr %u is not cp_blkaddr %u", lay->segment0, fp->cp_blkaddr);
	if (fp->segs_ckpt < CP_PACKS)
		BAD("segment_count_ckpt %u: room for fewer than two packs", fp->segs_ckpt);
	if ((uint64_t)fp->cp_blkaddr + ((uint64_t)fp->segs_ckpt << LOG_BLOCKS_PER_SEG) !=
	    fp->sit_blkaddr)
		BAD("checkpoint area does not end where the SIT (%u) starts", fp->sit_blkaddr);
	if ((uint64_t)fp->sit_blkaddr + ((uint64_t)sit << LOG_BLOCKS_PER_SEG) !=
	    le32(sb + SB_NAT_BLKADDR))
		BAD("SIT area does not end where the NAT (%u) starts", le32(sb + SB_NAT_BLKADDR));
	if ((uint64_t)le32(sb + SB_NAT_BLKADDR) + ((uint64_t)nat << LOG_BLOCKS_PER_SEG) !=
	    le32(sb + SB_SSA_BLKADDR))
		BAD("NAT area does not end where the SSA (%u) starts", le32(sb + SB_SSA_BLKADDR));
	if ((uint64_t)le32(sb + SB_SSA_BLKADDR) + ((uint64_t)ssa << LOG_BLOCKS_PER_SEG) !=
	    fp->main_blkaddr)
		BAD("SSA area does not end where the main area (%u) starts", fp->main_blkaddr);
	seg_end = (uint64_t)lay->segment0 + ((uint64_t)fp->segment_count << LOG_BLOCKS_PER_SEG);
	main_end = (uint64_t)fp->main_blkaddr + ((uint64_t)fp->segs_main << LOG_BLOCKS_PER_SEG);
	if (main_end > seg_end)
		BAD("main area ends at block %llu, past the segments' end %llu",
		    (unsigned long long)main_end, (unsigned long long)seg_end);
	if (seg_end > fp->block_count)
		BAD("segments end at block %llu, past block_count %llu",
		    (unsigned long long)seg_end, (unsigned long long)fp->block_count);
	/* Each SIT copy holds an entry per main segment; the SSA a block each. */
	fp->sit_blocks = (sit / 2) << LOG_BLOCKS_PER_SEG;
	sit_capacity = (uint64_t)fp->sit_blocks * SIT_ENTRIES_PER_BLOCK;
	if (sit < 2 || sit_capacity < fp->segs_main)
		BAD("SIT of %u segments cannot describe %u main segments", sit, fp->segs_main);
	if (((uint64_t)ssa << LOG_BLOCKS_PER_SEG) < fp->segs_main)
		BAD("SSA of %u segments cannot describe %u main segments", ssa, fp->segs_main);
	return 0;
}

#undef BAD

/* A valid superblock of what this plugin does not handle: -ENOTSUP. */
static int check_supported(const unsigned char *sb, uint32_t feature, struct im_err *why)
{
	if (feature & FEATURE_BLKZONED) 
		return im_errf(why, IM_EXIT_UNSUPP, -ENOTSUP, "zoned block device F2FS (blkzoned feature) is not supported");
	if (feature & FEATURE_RO) 
		return im_errf(why, IM_EXIT_UNSUPP, -ENOTSUP, "read-only image F2FS (ro feature) is not supported");
	if (sb[SB_DEVS] != 0) 
		return im_errf(why, IM_EXIT_UNSUPP, -ENOTSUP, "F2FS spanning several devices is not supported");
	return 0;
}

/*
 * Check one superblock copy, every field as hostile (the kernel's
 * sanity_check_raw_super and sanity_check_area_boundary).  Fills fp and
 * returns 0, or -EINVAL / -ENOTSUP with the reason in why.
 */
static int check_superblock(struct fs_ctx *ctx, const unsigned char *sb,
			    struct f2fs_priv *fp, struct im_err *why)
{
	struct sb_layout lay = { 0 };
	int r;

	r = check_format(sb, why);
	if (r < 0)
		return r;
	read_sb_fields(sb, fp, &lay);
	r = check_counts(ctx, sb, fp, &lay, why);
	if (r == 0)
		r = check_areas(sb, fp, &lay, why);
	if (r == 0)
		r = check_supported(sb, fp->feature, why);
	return r;
}

/* The first superblock copy that passes; fs_error() when none does. */
static int read_superblock(struct fs_ctx *ctx, struct f2fs_priv *fp, bool opening)
{
	struct im_err why[2] = { { 0 }, { 0 } };
	int r[2] = { -EINVAL, -EINVAL };

	for (unsigned copy = 0; copy < 2; copy++) {
		int err = 0;
		const unsigned char *sb = fs_map(ctx, copy * F2FS_BLOCK + F2FS_SB_OFFSET,
						 F2FS_SB_SIZE, &err);

		if (!sb) {
			if (err == -EIO || err == -ENOMEM)
				return fs_error(ctx, err, "cannot read superblock %u", copy);
			im_errf(&why[copy], IM_EXIT_SOURCE, -EINVAL, "beyond the device");
			continue;
		}
		r[copy] = check_superblock(ctx, sb, fp, &why[copy]);
		if (r[copy] == 0 || r[copy] == -ENOTSUP) {
			if (r[copy] == -ENOTSUP)
				return fs_error(ctx, -ENOTSUP, "%s", why[copy].msg);
			fp->sb_copy = copy;
			if (copy == 1 && opening)
				fs_warn(ctx, "the first superblock is invalid (%s); the second is used, as the kernel does (fsck.f2fs rewrites the first)",
					why[0].msg);
			return 0;
		}
	}
	return fs_error(ctx, -EINVAL, "no valid superblock (first: %s; second: %s)",
			why[0].msg, why[1].msg);
}

/* f2fs_checkpoint_chksum: the CRC of [0, offset), continued over the rest
 * of the block after the stored CRC when offset is below 4092. */
static bool cp_block_ok(const unsigned char *cp)
{
	uint32_t off = le32(cp + CP_CHECKSUM_OFFSET), crc;

	if (off < CP_BITMAP_OFFSET || off > CP_CHKSUM_MAX)
		return false;
	crc = f2fs_crc32(F2FS_MAGIC, cp, off);
	if (off < CP_CHKSUM_MAX)
		crc = f2fs_crc32(crc, cp + off + 4, F2FS_BLOCK - off - 4);
	return crc == le32(cp + off);
}

/* Pack p: both checkpoint copies valid and of one version.  Returns 0 and
 * the version, or -EINVAL (not valid), or -EIO. */
static int check_pack(struct fs_ctx *ctx, const struct f2fs_priv *fp, unsigned p,
		      unsigned char *buf, uint64_t *version, uint32_t *total)
{
	uint64_t start = (uint64_t)fp->cp_blkaddr + (uint64_t)p * BLOCKS_PER_SEG;
	uint64_t v;

	if (!read_block(ctx, start, buf))
		return -EIO;
	if (!cp_block_ok(buf))
		return -EINVAL;
	*total = le32(buf + CP_PACK_TOTAL);
	if (*total < 2 || *total > BLOCKS_PER_SEG)
		return -EINVAL;
	v = le64(buf + CP_VERSION);
	if (!read_block(ctx, start + *total - 1, buf))
		return -EIO;
	if (!cp_block_ok(buf) || le64(buf + CP_VERSION) != v)
		return -EINVAL;
	*version = v;
	return 0;
}

/* The sizes and the CRC's place read from the checkpoint in use. */
struct cp_bitmaps {
	uint32_t off;                 /* checksum_offset */
	uint32_t sit_bytes, nat_bytes;
};

/* The newest valid pack (ver_after(): the later version, modulo
 * wrap-around): its version, length and first block into fp. */
static int choose_pack(struct fs_ctx *ctx, struct f2fs_priv *fp, unsigned char *buf)
{
	uint64_t ver[2] = { 0, 0 };
	uint32_t total[2] = { 0, 0 };
	int r[2];

	for (unsigned p = 0; p < 2; p++) {
		r[p] = check_pack(ctx, fp, p, buf, &ver[p], &total[p]);
		if (r[p] == -EIO)
			return fs_error(ctx, -EIO, "cannot read checkpoint pack %u", p + 1);
	}
	if (r[0] < 0 && r[1] < 0)
		return fs_error(ctx, -EINVAL, "no valid checkpoint pack (CRC or version mismatch in both)");
	fp->pack = r[0] < 0 ? 1 : r[1] < 0 ? 0 : (int64_t)(ver[1] - ver[0]) > 0 ? 1 : 0;
	fp->version = ver[fp->pack];
	fp->pack_total = total[fp->pack];
	fp->pack_start = fp->cp_blkaddr + fp->pack * BLOCKS_PER_SEG;
	return 0;
}

/* The chosen pack's first checkpoint copy, read again (it must be what was
 * checked), and the fields kept from it. */
static int map_checkpoint(struct fs_ctx *ctx, struct f2fs_priv *fp, const unsigned char **cpp,
			  struct cp_bitmaps *bm)
{
	const unsigned char *cp;
	int err = 0;

	cp = fs_map(ctx, (uint64_t)fp->pack_start << F2FS_BLOCK_SHIFT, F2FS_BLOCK, &err);
	if (!cp)
		return fs_error(ctx, err, "cannot read the checkpoint");
	if (!cp_block_ok(cp))   /* read again: must be what was checked */
		return fs_error(ctx, -EINVAL, "checkpoint changed while read");
	fp->flags = le32(cp + CP_FLAGS);
	fp->valid_blocks = le64(cp + CP_VALID_BLOCKS);
	fp->start_sum = le32(cp + CP_PACK_START_SUM);
	bm->off = le32(cp + CP_CHECKSUM_OFFSET);
	bm->sit_bytes = le32(cp + CP_SIT_BITMAP_BYTES);
	bm->nat_bytes = le32(cp + CP_NAT_BITMAP_BYTES);
	*cpp = cp;
	return 0;
}

#define BAD(...) return fs_error(ctx, -EINVAL, __VA_ARGS__)

/* The counts: reserved and overprovision segments, user and valid blocks,
 * and the current segments of the six logs inside the main area. */
static int check_cp_counts(struct fs_ctx *ctx, const struct f2fs_priv *fp, const unsigned char *cp)
{
	uint32_t fsmeta = fp->segs_ckpt + fp->segs_sit + fp->segs_nat + fp->segs_ssa;

	if ((uint64_t)fsmeta + le32(cp + CP_RSVD_SEGS) >= fp->segment_count)
		BAD("checkpoint: metadata and %u reserved segments leave no main area",
		    le32(cp + CP_RSVD_SEGS));
	if (le32(cp + CP_RSVD_SEGS) == 0 || le32(cp + CP_OVERPROV_SEGS) == 0)
		BAD("checkpoint: no reserved or overprovision segments");
	if (le64(cp + CP_USER_BLOCKS) == 0 ||
	    le64(cp + CP_USER_BLOCKS) >= (uint64_t)fp->segs_main << LOG_BLOCKS_PER_SEG)
		BAD("checkpoint: user_block_count %llu for %u main segments",
		    (unsigned long long)le64(cp + CP_USER_BLOCKS), fp->segs_main);
	if (fp->valid_blocks > le64(cp + CP_USER_BLOCKS))
		BAD("checkpoint: valid_block_count %llu above user_block_count %llu",
		    (unsigned long long)fp->valid_blocks,
		    (unsigned long long)le64(cp + CP_USER_BLOCKS));
	for (unsigned i = 0; i < 3; i++) {
		if (le32(cp + CP_CUR_NODE_SEGNO + 4 * i) >= fp->segs_main ||
		    le16(cp + CP_CUR_NODE_BLKOFF + 2 * i) >= BLOCKS_PER_SEG ||
		    le32(cp + CP_CUR_DATA_SEGNO + 4 * i) >= fp->segs_main ||
		    le16(cp + CP_CUR_DATA_BLKOFF + 2 * i) >= BLOCKS_PER_SEG)
			BAD("checkpoint: current segment %u out of range", i);
	}
	return 0;
}

/* The version bitmaps sized for the SIT and the NAT, and the summaries,
 * then (with node summaries) three more, then the closing checkpoint copy,
 * all inside the pack. */
static int check_cp_pack(struct fs_ctx *ctx, const struct f2fs_priv *fp,
			 const struct cp_bitmaps *bm)
{
	uint32_t base;

	if (bm->sit_bytes != ((fp->segs_sit / 2) << LOG_BLOCKS_PER_SEG) / 8 ||
	    bm->nat_bytes != ((fp->segs_nat / 2) << LOG_BLOCKS_PER_SEG) / 8)
		BAD("checkpoint: version bitmaps of %u and %u bytes for %u SIT and %u NAT segments",
		    bm->sit_bytes, bm->nat_bytes, fp->segs_sit, fp->segs_nat);
	if (fp->start_sum < fp->cp_payload + 1 ||
	    fp->start_sum > BLOCKS_PER_SEG - 1 - CURSEG_PERSIST)
		BAD("checkpoint: cp_pack_start_sum %u", fp->start_sum);
	base = (fp->flags & (CP_UMOUNT_FLAG | CP_FASTBOOT_FLAG)) ? 6 : 3;
	if ((uint64_t)fp->start_sum + ((fp->flags & CP_COMPACT_SUM_FLAG) ? 1 : 3) +
	    (base == 6 ? 3 : 0) + 1 > fp->pack_total)
		BAD("checkpoint pack of %u blocks is too short for its summaries", fp->pack_total);
	return 0;
}

/* Where the SIT version bitmap is (__bitmap_ptr), checked before anything
 * is allocated for it. */
static int check_bitmap_place(struct fs_ctx *ctx, const struct f2fs_priv *fp,
			      const struct cp_bitmaps *bm)
{
	if (fp->flags & CP_LARGE_NAT_BITMAP) {
		if (bm->off != CP_BITMAP_OFFSET)
			return fs_error(ctx, -ENOTSUP,
					"checkpoint: the deprecated large_nat_bitmap layout (checksum at %u); fsck.f2fs 1.13 or later converts it",
					bm->off);
		if ((uint64_t)CP_BITMAP_OFFSET + 4 + bm->nat_bytes + bm->sit_bytes > F2FS_BLOCK)
			BAD("checkpoint: version bitmaps do not fit in the block");
	} else if (fp->cp_payload > 0) {
		if (bm->sit_bytes > (uint64_t)fp->cp_payload * F2FS_BLOCK ||
		    (uint64_t)CP_BITMAP_OFFSET + bm->nat_bytes > bm->off)
			BAD("checkpoint: version bitmaps do not fit in the pack");
	} else if ((uint64_t)CP_BITMAP_OFFSET + bm->sit_bytes + bm->nat_bytes > bm->off) {
		BAD("checkpoint: version bitmaps of %u bytes overlap the CRC at %u",
		    bm->sit_bytes + bm->nat_bytes, bm->off);
	}
	return 0;
}

#undef BAD

/* The SIT version bitmap into fp->sit_bitmap: at most cp_payload (< 504)
 * blocks now. */
static int load_sit_bitmap(struct fs_ctx *ctx, struct f2fs_priv *fp, const unsigned char *cp,
			   const struct cp_bitmaps *bm)
{
	fp->sit_bitmap_bytes = bm->sit_bytes;
	fp->sit_bitmap = malloc(bm->sit_bytes ? bm->sit_bytes : 1);
	if (!fp->sit_bitmap)
		return fs_error(ctx, -ENOMEM, "out of memory");
	if (fp->flags & CP_LARGE_NAT_BITMAP) {
		memcpy(fp->sit_bitmap, cp + CP_BITMAP_OFFSET + 4 + bm->nat_bytes, bm->sit_bytes);
	} else if (fp->cp_payload > 0) {
		if (fs_read(ctx, (uint64_t)(fp->pack_start + 1) << F2FS_BLOCK_SHIFT,
			    fp->sit_bitmap, bm->sit_bytes) < 0)
			return fs_error(ctx, -EIO, "cannot read the SIT version bitmap");
	} else {
		memcpy(fp->sit_bitmap, cp + CP_BITMAP_OFFSET, bm->sit_bytes);
	}
	return 0;
}

/*
 * Choose the checkpoint (newest valid pack), check it as the kernel's
 * f2fs_sanity_check_ckpt does, and load the SIT version bitmap.
 */
static int read_checkpoint(struct fs_ctx *ctx, struct f2fs_priv *fp, unsigned char *buf)
{
	const unsigned char *cp = NULL;
	struct cp_bitmaps bm = { 0 };
	int r;

	r = choose_pack(ctx, fp, buf);
	if (r == 0)
		r = map_checkpoint(ctx, fp, &cp, &bm);
	if (r == 0)
		r = check_cp_counts(ctx, fp, cp);
	if (r == 0)
		r = check_cp_pack(ctx, fp, &bm);
	if (r == 0)
		r = check_bitmap_place(ctx, fp, &bm);
	if (r == 0)
		r = load_sit_bitmap(ctx, fp, cp, &bm);
	return r;
}

/* The SIT journal of the cold data log's summary. */
static int read_sit_journal(struct fs_ctx *ctx, struct f2fs_priv *fp)
{
	uint64_t blk;
	uint32_t at, n;

	if (fp->flags & CP_COMPACT_SUM_FLAG) {
		/* NAT journal, then SIT journal, then the entries. */
		blk = (uint64_t)fp->pack_start + fp->start_sum;
		at = SUM_JOURNAL_BYTES;
	} else {
		unsigned base = (fp->flags & (CP_UMOUNT_FLAG | CP_FASTBOOT_FLAG)) ?
				CURSEG_PERSIST : 3;

		/* sum_blk_addr(base, type) */
		blk = (uint64_t)fp->pack_start + fp->pack_total - (base + 1) + CURSEG_COLD_DATA;
		at = SUM_ENTRIES_BYTES;
	}
	if (!read_block(ctx, blk, fp->block))
		return fs_error(ctx, -EIO, "cannot read the summary block %llu",
				(unsigned long long)blk);
	n = le16(fp->block + at);
	if (n > SIT_JOURNAL_ENTRIES)
		return fs_error(ctx, -EINVAL, "SIT journal claims %u entries (at most %u)", n,
				SIT_JOURNAL_ENTRIES);
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *e = fp->block + at + 2 + i * SIT_JOURNAL_ENTRY;

		fp->journal[i].segno = le32(e);
		if (fp->journal[i].segno >= fp->segs_main)
			return fs_error(ctx, -EINVAL, "SIT journal entry for segment %u of %u",
					fp->journal[i].segno, fp->segs_main);
		memcpy(fp->journal[i].entry, e + 4, SIT_ENTRY_BYTES);
	}
	fp->journal_count = n;
	return 0;
}

static int f2fs_parse(struct fs_ctx *ctx, struct f2fs_priv *fp, bool opening)
{
	int r;

	r = read_superblock(ctx, fp, opening);
	if (r < 0)
		return r;
	fp->block = malloc(F2FS_BLOCK);
	if (!fp->block)
		return fs_error(ctx, -ENOMEM, "out of memory");
	r = read_checkpoint(ctx, fp, fp->block);
	if (r < 0)
		return r;
	return read_sit_journal(ctx, fp);
}

static void f2fs_release(struct f2fs_priv *fp)
{
	free(fp->block);
	free(fp->sit_bitmap);
	fp->block = NULL;
	fp->sit_bitmap = NULL;
}

static int f2fs_probe(struct fs_ctx *ctx)
{
	struct f2fs_priv fp;
	int r;

	memset(&fp, 0, sizeof(fp));
	r = f2fs_parse(ctx, &fp, false);
	f2fs_release(&fp);
	if (r == -EIO || r == -ENOMEM)
		return r;
	/* -ENOTSUP: ours, and open() says why it refuses. */
	return r < 0 && r != -ENOTSUP ? 1 : 0;
}

static int f2fs_open(struct fs_ctx *ctx, void *priv)
{
	struct f2fs_priv *fp = priv;
	int r;

	r = f2fs_parse(ctx, fp, true);
	if (r < 0)
		return r;
	if (!(fp->flags & CP_UMOUNT_FLAG) || (fp->flags & (CP_ERROR_FLAG | CP_FSCK_FLAG |
							     CP_RESIZEFS_FLAG))) {
		const char *why = fp->flags & CP_ERROR_FLAG ? "its checkpoint records an error (CP_ERROR_FLAG)" :
				  fp->flags & CP_FSCK_FLAG ? "its checkpoint asks for fsck (CP_FSCK_FLAG)" :
				  fp->flags & CP_RESIZEFS_FLAG ? "a resize was interrupted (CP_RESIZEFS_FLAG)" :
				  "not cleanly unmounted (checkpoint without CP_UMOUNT_FLAG)";

		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN, "F2FS %s; run fsck.f2fs", why);
		fs_warn(ctx, "F2FS %s; copied as its last checkpoint has it (forced)", why);
	}
	if (fp->flags & CP_QUOTA_NEED_FSCK)
		fs_warn(ctx, "F2FS quota needs fsck.f2fs (CP_QUOTA_NEED_FSCK_FLAG)");
	if (fp->flags & CP_DISABLED_FLAG)
		fs_warn(ctx, "F2FS was mounted with checkpoint=disable");
	r = fs_set_geometry(ctx, F2FS_BLOCK, fp->block_count);
	if (r < 0)
		return fs_error(ctx, r, "cannot declare %llu blocks of 4 KiB",
				(unsigned long long)fp->block_count);
	return 0;
}

/* Mark the valid blocks of main segment segno; returns how many, or a
 * negative errno. */
static int64_t mark_segment(struct fs_ctx *ctx, const struct f2fs_priv *fp, uint32_t segno,
			    const unsigned char *entry)
{
	const unsigned char *map = entry + 2;
	unsigned vblocks = le16(entry) & SIT_VBLOCKS_MASK, count = 0;
	uint64_t first = (uint64_t)fp->main_blkaddr + ((uint64_t)segno << LOG_BLOCKS_PER_SEG);
	unsigned i = 0;

	while (i < BLOCKS_PER_SEG) {
		unsigned start;
		int r;

		if (!(i & 7) && map[i >> 3] == 0) {
			i += 8;
			continue;
		}
		if (!f2fs_bit(map, i)) {
			i++;
			continue;
		}
		start = i;
		while (i < BLOCKS_PER_SEG && f2fs_bit(map, i))
			i++;
		r = fs_mark_used(ctx, first + start, i - start);
		if (r < 0)
			return fs_error(ctx, r, "segment %u outside the filesystem", segno);
		count += i - start;
	}
	if (count != vblocks) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"SIT entry of segment %u counts %u valid blocks but its map has %u; run fsck.f2fs",
					segno, vblocks, count);
		fs_warn(ctx, "SIT entry of segment %u counts %u valid blocks, its map %u; the map is used (forced)",
			segno, vblocks, count);
	}
	return count;
}

static int f2fs_used_blocks(struct fs_ctx *ctx, void *priv)
{
	struct f2fs_priv *fp = priv;
	uint64_t total = 0, sit_block = UINT64_MAX;
	int r;

	/* Superblocks, checkpoint packs, SIT, NAT and SSA. */
	r = fs_mark_used(ctx, 0, fp->main_blkaddr);
	if (r < 0)
		return fs_error(ctx, r, "metadata area outside the filesystem");

	for (uint32_t segno = 0; segno < fp->segs_main; segno++) {
		uint64_t b = segno / SIT_ENTRIES_PER_BLOCK;
		const unsigned char *entry = NULL;
		int64_t n;

		/* The journal's entry, when it has one, is the newer. */
		for (unsigned j = fp->journal_count; j-- > 0;)
			if (fp->journal[j].segno == segno) {
				entry = fp->journal[j].entry;
				break;
			}
		if (!entry) {
			if (b != sit_block) {
				uint64_t addr = fp->sit_blkaddr + b;

				if (f2fs_bit(fp->sit_bitmap, b))
					addr += fp->sit_blocks;
				if (!read_block(ctx, addr, fp->block))
					return fs_error(ctx, -EIO, "cannot read SIT block %llu",
							(unsigned long long)addr);
				sit_block = b;
			}
			entry = fp->block + (segno % SIT_ENTRIES_PER_BLOCK) * SIT_ENTRY_BYTES;
		}
		n = mark_segment(ctx, fp, segno, entry);
		if (n < 0)
			return (int)n;
		total += (uint64_t)n;
	}

	if (total != fp->valid_blocks) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"the SIT has %llu valid blocks but the checkpoint counts %llu; run fsck.f2fs",
					(unsigned long long)total,
					(unsigned long long)fp->valid_blocks);
		fs_warn(ctx, "the SIT has %llu valid blocks, the checkpoint %llu; the SIT is used (forced)",
			(unsigned long long)total, (unsigned long long)fp->valid_blocks);
	}
	return 0;
}

static void f2fs_close(struct fs_ctx *ctx, void *priv)
{
	(void)ctx;
	f2fs_release(priv);
}

static const char *const f2fs_blkid_types[] = { "f2fs", NULL };

static const struct fs_magic f2fs_magics[] = {
	{ "\x10\x20\xF5\xF2", 4, F2FS_SB_OFFSET },
	{ "\x10\x20\xF5\xF2", 4, F2FS_BLOCK + F2FS_SB_OFFSET },
	{ NULL, 0, 0 },
};

const struct fs_plugin fs_plugin_f2fs = {
	.name = "f2fs",
	.blkid_types = f2fs_blkid_types,
	/* Nine segments of 2 MiB (superblock, two of each area, SSA, main). */
	.min_size = (uint64_t)MIN_SEGMENTS * BLOCKS_PER_SEG * F2FS_BLOCK,
	.magics = f2fs_magics,
	.priv_size = sizeof(struct f2fs_priv),
	.probe = f2fs_probe,
	.open = f2fs_open,
	.used_blocks = f2fs_used_blocks,
	.close = f2fs_close,
};
