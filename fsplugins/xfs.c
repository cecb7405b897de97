/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * XFS (v4 and v5): the used blocks are everything but the free extents of
 * each allocation group's by-block-number free-space B+tree (bnobt) and the
 * blocks on its free list (AGFL).
 *
 * The AGFL holds free blocks set aside for the free-space and reverse-map
 * trees to grow into: they are in no tree, the kernel counts them as free
 * (sb_fdblocks), xfs_db's freesp lists them as free, and whoever takes one
 * writes it whole before using it.  So, as partclone.xfs does, they are
 * not copied.  The internal log is allocated space and is always copied.
 *
 * Format facts come from xfsprogs and the kernel (libxfs/xfs_format.h,
 * xfs_log_format.h; the checks follow xfs_repair's scan_allocbt and
 * scan_freelist, and the log's head and clean test follow the kernel's
 * xlog_find_zeroed, xlog_find_head and xlog_check_unmount_rec).  Everything
 * on disk is big-endian but the CRC32c fields, which are little-endian.
 *
 * Refused: an external log or a realtime section (-ENOTSUP: those live on
 * other devices that would not be saved), a log that needs recovery, a
 * filesystem marked needsrepair or left by an unfinished mkfs (-EUCLEAN;
 * forced, every block is kept, as the trees on disk may not show what is
 * in use), damaged AG structures or free counts that disagree (-EUCLEAN;
 * forced, the AG is kept whole), and features that could change where free
 * space is accounted (unknown ones, metadir, zoned: -ENOTSUP).
 */
#include "imager/fsplugin.h"
#include "imager/bytes.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XFS_SB_MAGIC          0x58465342u   /* "XFSB" */
#define XFS_AGF_MAGIC         0x58414746u   /* "XAGF" */
#define XFS_AGFL_MAGIC        0x5841464Cu   /* "XAFL" */
#define XFS_ABTB_MAGIC        0x41425442u   /* "ABTB": bnobt, v4 */
#define XFS_ABTB_CRC_MAGIC    0x41423342u   /* "AB3B": bnobt, v5 */

/* Superblock (struct xfs_dsb) field offsets. */
#define SB_BLOCKSIZE          4
#define SB_DBLOCKS            8
#define SB_RBLOCKS            16
#define SB_REXTENTS           24
#define SB_UUID               32
#define SB_LOGSTART           48
#define SB_AGBLOCKS           84
#define SB_AGCOUNT            88
#define SB_LOGBLOCKS          96
#define SB_VERSIONNUM         100
#define SB_SECTSIZE           102
#define SB_BLOCKLOG           120
#define SB_SECTLOG            121
#define SB_AGBLKLOG           124
#define SB_INPROGRESS         126
#define SB_FDBLOCKS           144
#define SB_FEATURES2          200
#define SB_BAD_FEATURES2      204
#define SB_FEAT_RO_COMPAT     212
#define SB_FEAT_INCOMPAT      216
#define SB_CRC                224
#define SB_META_UUID          248
#define SB_V5_END             264

#define VERSION_NUMBITS       0x000Fu
#define VERSION_SHAREDBIT     0x0200u
#define VERSION_LOGV2BIT      0x0400u
#define VERSION_DIRV2BIT      0x2000u
#define VERSION_MOREBITSBIT   0x8000u

#define VERSION2_LAZYSBCOUNT  0x00000002u
#define VERSION2_ATTR2        0x00000008u
#define VERSION2_PROJID32     0x00000080u
#define VERSION2_FTYPE        0x00000200u
#define VERSION2_V4_OK        (VERSION2_LAZYSBCOUNT | VERSION2_ATTR2 | \
			       VERSION2_PROJID32 | VERSION2_FTYPE)

#define RO_COMPAT_FINOBT      0x1u
#define RO_COMPAT_RMAPBT      0x2u
#define RO_COMPAT_REFLINK     0x4u
#define RO_COMPAT_INOBTCNT    0x8u
#define RO_COMPAT_KNOWN       (RO_COMPAT_FINOBT | RO_COMPAT_RMAPBT | \
			       RO_COMPAT_REFLINK | RO_COMPAT_INOBTCNT)

#define INCOMPAT_FTYPE        0x001u
#define INCOMPAT_SPINODES     0x002u
#define INCOMPAT_META_UUID    0x004u
#define INCOMPAT_BIGTIME      0x008u
#define INCOMPAT_NEEDSREPAIR  0x010u
#define INCOMPAT_NREXT64      0x020u
#define INCOMPAT_EXCHRANGE    0x040u
#define INCOMPAT_PARENT       0x080u
#define INCOMPAT_METADIR      0x100u
#define INCOMPAT_ZONED        0x200u
/* Features that change nothing about the AGs' free-space accounting
 * (NEEDSREPAIR is judged separately: it means "unclean"). */
#define INCOMPAT_UNDERSTOOD   (INCOMPAT_FTYPE | INCOMPAT_SPINODES |          \
			       INCOMPAT_META_UUID | INCOMPAT_BIGTIME |        \
			       INCOMPAT_NEEDSREPAIR | INCOMPAT_NREXT64 |      \
			       INCOMPAT_EXCHRANGE | INCOMPAT_PARENT)

/* AGF (struct xfs_agf) field offsets. */
#define AGF_VERSIONNUM        4
#define AGF_SEQNO             8
#define AGF_LENGTH            12
#define AGF_BNO_ROOT          16
#define AGF_BNO_LEVEL         28
#define AGF_FLFIRST           40
#define AGF_FLLAST            44
#define AGF_FLCOUNT           48
#define AGF_FREEBLKS          52
#define AGF_LONGEST           56
#define AGF_BTREEBLKS         60
#define AGF_UUID              64
#define AGF_CRC               216

/* AGFL (struct xfs_agfl, v5 only has a header). */
#define AGFL_SEQNO            4
#define AGFL_UUID             8
#define AGFL_CRC              32
#define AGFL_V5_HDR           36

/* Short-form (AG) btree block header. */
#define BB_LEVEL              4
#define BB_NUMRECS            6
#define BB_BLKNO              16
#define BB_UUID               32
#define BB_OWNER              48
#define BB_CRC                52
#define BTREE_SHDR_V4         16
#define BTREE_SHDR_V5         56
#define ALLOC_REC_SIZE        8     /* startblock, blockcount */
#define ALLOC_KEY_SIZE        8
#define ALLOC_PTR_SIZE        4
/* The old fixed bound on any XFS btree's height; the free-space trees of
 * the largest AG in the smallest blocks need 7 levels. */
#define BTREE_MAXLEVELS       9

/* Log (xlog_rec_header, xlog_op_header), in 512-byte basic blocks. */
#define BBSIZE                512u
#define XLOG_HEADER_MAGIC     0xFEEDBABEu
#define LH_CYCLE              4
#define LH_VERSION            8
#define LH_LEN                12
#define LH_NUM_LOGOPS         40
#define LH_FS_UUID            304
#define LH_SIZE               320
#define XLOG_HEADER_CYCLE_SIZE (32u * 1024)
#define XLOG_MAX_RECORD_BSIZE (256u * 1024)
#define OH_FLAGS              9
#define XLOG_UNMOUNT_TRANS    0x20
#define LOG_CHUNK_BBS         128u

struct xfs_priv {
	uint32_t block_size, sect_size;
	uint64_t dblocks, fdblocks;
	uint32_t agblocks, agcount, agblklog;
	bool v5, lazy_count, log_v2;
	unsigned char uuid[16];      /* sb_uuid: the log's records carry it */
	unsigned char meta_uuid[16]; /* what metadata blocks are stamped with */
	uint32_t log_agno, log_agbno, log_blocks;
	uint32_t hdr_blocks;         /* blocks at the start of an AG holding
				      * its superblock, AGF, AGI and AGFL */
	uint32_t agfl_size;          /* entries in the AGFL sector */
	uint32_t crc_table[256];
	unsigned char *sect;         /* one sector: AGF, AGFL */
	unsigned char *path;         /* BTREE_MAXLEVELS btree blocks */
	unsigned char *logbuf;       /* LOG_CHUNK_BBS log blocks */
	uint32_t *agfl;              /* one AG's free list, sorted */
	uint32_t *visited;           /* one AG's bnobt blocks */
	size_t nvisited, visited_cap;
	bool keep_all;               /* forced past an unclean state */
};

static void crc32c_init(uint32_t table[256])
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
		table[i] = c;
	}
}

/* XFS's checksum of a buffer: CRC32c seeded with ~0 over the buffer with
 * its 4-byte checksum field taken as zero, inverted, stored little-endian
 * (xfs_start_cksum_safe / xfs_end_cksum). */
static bool xfs_csum_ok(const uint32_t table[256], const unsigned char *buf,
			size_t len, size_t csum_off)
{
	uint32_t crc = ~0u;

	for (size_t i = 0; i < len; i++) {
		unsigned char b = (i >= csum_off && i < csum_off + 4) ? 0 : buf[i];
		crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
	}
	return ~crc == le32(buf + csum_off);
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static uint32_t log2_floor(uint64_t v)
{
	uint32_t n = 0;

	while (v > 1) {
		v >>= 1;
		n++;
	}
	return n;
}

/* The first sector of the filesystem, its length checked.  NULL with *err
 * -EINVAL when it is not an XFS superblock. */
static const unsigned char *map_superblock(struct fs_ctx *ctx, int *err)
{
	const unsigned char *sb;
	uint32_t sect;

	*err = 0;
	if (fs_device_size(ctx) < BBSIZE) {
		*err = -EINVAL;
		return NULL;
	}
	sb = fs_map(ctx, 0, BBSIZE, err);
	if (!sb)
		return NULL;
	if (be32(sb) != XFS_SB_MAGIC) {
		*err = -EINVAL;
		return NULL;
	}
	sect = be16(sb + SB_SECTSIZE);
	if (sect < BBSIZE || sect > 32768 || !is_pow2(sect) ||
	    sect > fs_device_size(ctx)) {
		*err = -EINVAL;
		return NULL;
	}
	return fs_map(ctx, 0, sect, err);
}

/* Parse and check the geometry the superblock declares.  Returns 0, or
 * -EINVAL with the reason recorded.  Features are judged by the caller. */
static int parse_geometry(struct fs_ctx *ctx, const unsigned char *sb, struct xfs_priv *p)
{
	uint16_t versionnum = be16(sb + SB_VERSIONNUM);
	uint32_t version = versionnum & VERSION_NUMBITS;
	uint64_t last_ag, logstart, agbno_mask;

	if (version != 4 && version != 5)
		return fs_error(ctx, -EINVAL, "superblock version %u is not 4 or 5", version);
	p->v5 = version == 5;
	p->block_size = be32(sb + SB_BLOCKSIZE);
	p->sect_size = be16(sb + SB_SECTSIZE);
	if (p->block_size < 512 || p->block_size > 65536 || !is_pow2(p->block_size) ||
	    sb[SB_BLOCKLOG] != log2_floor(p->block_size))
		return fs_error(ctx, -EINVAL, "block size %u (log %u) out of range",
				p->block_size, sb[SB_BLOCKLOG]);
	/* map_superblock() checked the sector size is a power of two. */
	if (p->sect_size > p->block_size || sb[SB_SECTLOG] != log2_floor(p->sect_size) ||
	    (p->v5 && p->sect_size < SB_V5_END))
		return fs_error(ctx, -EINVAL, "sector size %u (log %u) out of range",
				p->sect_size, sb[SB_SECTLOG]);

	p->agblocks = be32(sb + SB_AGBLOCKS);
	p->agcount = be32(sb + SB_AGCOUNT);
	p->agblklog = sb[SB_AGBLKLOG];
	p->dblocks = be64(sb + SB_DBLOCKS);
	p->fdblocks = be64(sb + SB_FDBLOCKS);
	/* xfs_validate_sb_common: XFS_MIN_AG_BLOCKS .. 1 TiB of 512-byte blocks. */
	if (p->agblocks < 64 || p->agblocks > (1u << 31) ||
	    p->agblklog != log2_floor(p->agblocks) + !is_pow2(p->agblocks))
		return fs_error(ctx, -EINVAL, "%u blocks per allocation group (log %u) out of range",
				p->agblocks, p->agblklog);
	if (p->agcount == 0)
		return fs_error(ctx, -EINVAL, "no allocation groups");
	last_ag = (uint64_t)(p->agcount - 1) * p->agblocks;
	if (p->dblocks > last_ag + p->agblocks || p->dblocks < last_ag + 64)
		return fs_error(ctx, -EINVAL, "%llu blocks do not make %u allocation groups of %u",
				(unsigned long long)p->dblocks, p->agcount, p->agblocks);
	if (p->dblocks > fs_device_size(ctx) / p->block_size)
		return fs_error(ctx, -EINVAL,
				"%llu blocks of %u bytes do not fit in the %llu-byte device",
				(unsigned long long)p->dblocks, p->block_size,
				(unsigned long long)fs_device_size(ctx));
	if (p->fdblocks > p->dblocks)
		return fs_error(ctx, -EINVAL, "%llu free blocks out of %llu",
				(unsigned long long)p->fdblocks, (unsigned long long)p->dblocks);

	/* The superblock, AGF, AGI and AGFL occupy the first 4 sectors. */
	p->hdr_blocks = 3 * p->sect_size / p->block_size + 1;
	p->agfl_size = p->v5 ? (p->sect_size - AGFL_V5_HDR) / 4 : p->sect_size / 4;

	/* The internal log, when there is one, lies inside one AG. */
	logstart = be64(sb + SB_LOGSTART);
	p->log_blocks = be32(sb + SB_LOGBLOCKS);
	if (logstart != 0) {
		uint64_t agno = logstart >> p->agblklog, ag_len;

		agbno_mask = ((uint64_t)1 << p->agblklog) - 1;
		p->log_agbno = (uint32_t)(logstart & agbno_mask);
		if (agno >= p->agcount)
			return fs_error(ctx, -EINVAL, "log start %llu is beyond the last allocation group",
					(unsigned long long)logstart);
		p->log_agno = (uint32_t)agno;
		ag_len = p->log_agno == p->agcount - 1 ? p->dblocks - last_ag : p->agblocks;
		if (p->log_blocks < 64 || p->log_agbno < p->hdr_blocks ||
		    p->log_agbno >= ag_len || p->log_blocks > ag_len - p->log_agbno)
			return fs_error(ctx, -EINVAL, "a log of %u blocks at %u/%u does not fit its allocation group",
					p->log_blocks, p->log_agno, p->log_agbno);
	}
	memcpy(p->uuid, sb + SB_UUID, 16);
	return 0;
}

/* Features, as xfs_sb_good_version() and the v5 feature masks judge them.
 * Returns 0, or -ENOTSUP with the reason. */
static int check_features(struct fs_ctx *ctx, const unsigned char *sb, struct xfs_priv *p)
{
	uint16_t versionnum = be16(sb + SB_VERSIONNUM);
	uint32_t features2 = be32(sb + SB_FEATURES2) | be32(sb + SB_BAD_FEATURES2);
	bool morebits = versionnum & VERSION_MOREBITSBIT;

	if (!p->v5) {
		if (!(versionnum & VERSION_DIRV2BIT) || (versionnum & VERSION_SHAREDBIT))
			return fs_error(ctx, -ENOTSUP, "v4 feature bits 0x%04x are not supported",
					versionnum);
		if (morebits && (features2 & ~VERSION2_V4_OK))
			return fs_error(ctx, -ENOTSUP, "unknown v4 feature bits 0x%x",
					features2 & ~VERSION2_V4_OK);
		p->lazy_count = morebits && (features2 & VERSION2_LAZYSBCOUNT);
		p->log_v2 = versionnum & VERSION_LOGV2BIT;
		memcpy(p->meta_uuid, p->uuid, 16);
		return 0;
	}
	{
		uint32_t incompat = be32(sb + SB_FEAT_INCOMPAT);
		uint32_t ro_compat = be32(sb + SB_FEAT_RO_COMPAT);

		if (incompat & INCOMPAT_METADIR)
			return fs_error(ctx, -ENOTSUP, "the metadir feature is not supported");
		if (incompat & INCOMPAT_ZONED)
			return fs_error(ctx, -ENOTSUP, "the zoned feature is not supported");
		if (incompat & ~INCOMPAT_UNDERSTOOD)
			return fs_error(ctx, -ENOTSUP, "unknown incompatible features 0x%x",
					incompat & ~INCOMPAT_UNDERSTOOD);
		if (ro_compat & ~RO_COMPAT_KNOWN)
			return fs_error(ctx, -ENOTSUP, "unknown read-only features 0x%x",
					ro_compat & ~RO_COMPAT_KNOWN);
		p->lazy_count = true;
		p->log_v2 = true;
		memcpy(p->meta_uuid, (incompat & INCOMPAT_META_UUID) ? sb + SB_META_UUID : sb + SB_UUID, 16);
	}
	return 0;
}

static int xfs_probe(struct fs_ctx *ctx)
{
	struct xfs_priv p;
	const unsigned char *sb;
	int err;

	sb = map_superblock(ctx, &err);
	if (!sb)
		return err == -EINVAL ? 1 : err;
	memset(&p, 0, sizeof(p));
	if (parse_geometry(ctx, sb, &p) != 0)
		return 1;
	if (p.v5) {
		crc32c_init(p.crc_table);
		if (!xfs_csum_ok(p.crc_table, sb, p.sect_size, SB_CRC))
			return 1;
	}
	return 0;
}

/* ---- the log ----
 *
 * Clean or not is decided as the kernel decides it at mount (xlog_find_head,
 * xlog_find_tail, xlog_check_unmount_rec; xfs_repair and xfs_logprint use
 * the same code): the head found, the last record before it must be a lone
 * unmount operation ending exactly at the head.  What the kernel takes as
 * clean it does not replay, so the trees on disk are what it will use.
 * The kernel checks the records' CRCs near the head (xlog_verify_head)
 * only once the log is found dirty, to trim torn writes: not needed here.
 */

struct xlog {
	uint64_t off;         /* byte offset of the log */
	uint64_t bbs;         /* its length in basic blocks */
	uint64_t total_scan;  /* XLOG_TOTAL_REC_SHIFT: all in-core logs */
	uint64_t rec_scan;    /* XLOG_REC_SHIFT: one record */
};

/* The verdicts of the search, beside errors. */
#define LOG_FOUND     0
#define LOG_AT_START  1   /* searched back to block 0 without a header */
#define LOG_BROKEN    2   /* no record header where one must be */

static int log_read(struct fs_ctx *ctx, const struct xlog *log, uint64_t bb,
		    void *buf, uint32_t count)
{
	int r = fs_read(ctx, log->off + bb * BBSIZE, buf, (size_t)count * BBSIZE);

	return r < 0 ? fs_error(ctx, r, "reading the log at block %llu",
				(unsigned long long)bb) : 0;
}

/* The cycle a basic block was written in: its first word, or the cycle
 * field of a record header (xlog_get_cycle). */
static uint32_t bb_cycle(const unsigned char *b)
{
	return be32(b) == XLOG_HEADER_MAGIC ? be32(b + LH_CYCLE) : be32(b);
}

static int log_cycle(struct fs_ctx *ctx, struct xfs_priv *p, const struct xlog *log,
		     uint64_t bb, uint32_t *cycle)
{
	int r = log_read(ctx, log, bb, p->logbuf, 1);

	if (r == 0)
		*cycle = bb_cycle(p->logbuf);
	return r;
}

/* xlog_find_cycle_start: a binary search between first (not of `cycle`)
 * and *last (of it) for where `cycle` begins. */
static int log_cycle_start(struct fs_ctx *ctx, struct xfs_priv *p, const struct xlog *log,
			   uint64_t first, uint64_t *last, uint32_t cycle)
{
	uint64_t end = *last;

	while (end - first > 1) {
		uint64_t mid = first + (end - first) / 2;
		uint32_t c = 0;
		int r = log_cycle(ctx, p, log, mid, &c);

		if (r < 0)
			return r;
		if (c == cycle)
			end = mid;
		else
			first = mid;
	}
	*last = end;
	return 0;
}

/* xlog_find_verify_cycle: the first of blocks [start, start+n) written in
 * cycle `stop`, or -1 in *found. */
static int log_find_cycle(struct fs_ctx *ctx, struct xfs_priv *p, const struct xlog *log,
			  uint64_t start, uint64_t n, uint32_t stop, int64_t *found)
{
	*found = -1;
	while (n) {
		uint32_t k = n < LOG_CHUNK_BBS ? (uint32_t)n : LOG_CHUNK_BBS;
		int r = log_read(ctx, log, start, p->logbuf, k);

		if (r < 0)
			return r;
		for (uint32_t i = 0; i < k; i++)
			if (bb_cycle(p->logbuf + (size_t)i * BBSIZE) == stop) {
				*found = (int64_t)(start + i);
				return 0;
			}
		start += k;
		n -= k;
	}
	return 0;
}

/* Header blocks of a record (xlog_logrec_hblks): v2 records of in-core logs
 * above 32 KiB carry extended headers for their cycle data. */
static uint32_t rec_hblks(const struct xfs_priv *p, const unsigned char *h)
{
	uint32_t size = be32(h + LH_SIZE);

	if (p->log_v2 && (be32(h + LH_VERSION) & 2) && size > XLOG_HEADER_CYCLE_SIZE)
		return (uint32_t)(((uint64_t)size + XLOG_HEADER_CYCLE_SIZE - 1) /
				  XLOG_HEADER_CYCLE_SIZE);
	return 1;
}

/* Blocks a record spans, its header(s) included. */
static uint64_t rec_bbs(const struct xfs_priv *p, const unsigned char *h)
{
	return rec_hblks(p, h) + ((uint64_t)be32(h + LH_LEN) + BBSIZE - 1) / BBSIZE;
}

/* xlog_find_verify_log_record: back from *last - 1 to start for a record
 * header; when *last is not right after that whole record (extra blocks
 * of it lie past the end of the log), *last moves back to the header. */
static int log_verify_record(struct fs_ctx *ctx, struct xfs_priv *p, const struct xlog *log,
			     uint64_t start, uint64_t *last, uint64_t extra)
{
	uint64_t i = *last;
	int r;

	for (;;) {
		if (i == 0)
			return LOG_AT_START;
		i--;
		if (i < start)
			return LOG_BROKEN;
		if ((r = log_read(ctx, log, i, p->logbuf, 1)) < 0)
			return r;
		if (be32(p->logbuf) == XLOG_HEADER_MAGIC)
			break;
	}
	if (*last - i + extra != rec_bbs(p, p->logbuf))
		*last = i;
	return LOG_FOUND;
}

/* xlog_find_head, from the kernel.  *head is in [0, bbs).  Returns
 * LOG_FOUND, LOG_BROKEN or an error. */
static int log_find_head(struct fs_ctx *ctx, struct xfs_priv *p, const struct xlog *log,
			 uint64_t *head)
{
	uint32_t first_cycle = 0, last_cycle = 0, stop;
	uint64_t scan = log->total_scan < log->bbs ? log->total_scan : log->bbs, start;
	int64_t found;
	int r;

	if ((r = log_cycle(ctx, p, log, 0, &first_cycle)) < 0)
		return r;
	if (first_cycle == 0) {            /* zeroed whole: nothing written */
		*head = 0;
		return LOG_FOUND;
	}
	if ((r = log_cycle(ctx, p, log, log->bbs - 1, &last_cycle)) < 0)
		return r;
	if (last_cycle == 0) {
		/* xlog_find_zeroed: written up to some block, zeros after,
		 * which only a first pass (cycle 1) leaves. */
		uint64_t last = log->bbs - 1, n;

		if (first_cycle != 1)
			return LOG_BROKEN;
		if ((r = log_cycle_start(ctx, p, log, 0, &last, 0)) < 0)
			return r;
		n = scan < last ? scan : last;
		start = last - n;
		if ((r = log_find_cycle(ctx, p, log, start, n, 0, &found)) < 0)
			return r;
		if (found >= 0)
			last = (uint64_t)found;
		r = log_verify_record(ctx, p, log, start, &last, 0);
		if (r != LOG_FOUND)
			return r < 0 ? r : LOG_BROKEN;
		*head = last;
		return LOG_FOUND;
	}

	if (first_cycle == last_cycle) {
		/* One cycle everywhere: the head is at the end (block 0),
		 * unless a hole of the previous cycle says otherwise. */
		*head = log->bbs;
		stop = last_cycle - 1;
	} else {
		*head = log->bbs - 1;
		stop = last_cycle;
		if ((r = log_cycle_start(ctx, p, log, 0, head, last_cycle)) < 0)
			return r;
	}
	/* Writes may land out of order: the earliest block of `stop` within
	 * reach of the in-core logs before the head is the real head. */
	if (*head >= scan) {
		if ((r = log_find_cycle(ctx, p, log, *head - scan, scan, stop, &found)) < 0)
			return r;
		if (found >= 0)
			*head = (uint64_t)found;
	} else {
		start = log->bbs - (scan - *head);
		if ((r = log_find_cycle(ctx, p, log, start, scan - *head, stop - 1, &found)) < 0)
			return r;
		if (found >= 0) {
			*head = (uint64_t)found;
		} else {
			if ((r = log_find_cycle(ctx, p, log, 0, *head, stop, &found)) < 0)
				return r;
			if (found >= 0)
				*head = (uint64_t)found;
		}
	}

	/* Not in the middle of a record. */
	scan = log->rec_scan < log->bbs ? log->rec_scan : log->bbs;
	if (*head >= scan) {
		r = log_verify_record(ctx, p, log, *head - scan, head, 0);
		if (r != LOG_FOUND)
			return r < 0 ? r : LOG_BROKEN;
	} else {
		r = log_verify_record(ctx, p, log, 0, head, 0);
		if (r < 0 || r == LOG_BROKEN)
			return r;
		if (r == LOG_AT_START) {
			uint64_t end = log->bbs;

			r = log_verify_record(ctx, p, log, log->bbs - (scan - *head), &end, *head);
			if (r != LOG_FOUND)
				return r < 0 ? r : LOG_BROKEN;
			if (end != log->bbs)
				*head = end;
		}
	}
	if (*head == log->bbs)
		*head = 0;
	return LOG_FOUND;
}

/* Is the log clean?  Returns 1 clean, 0 needs recovery (*why says what
 * was seen), or an error. */
static int log_is_clean(struct fs_ctx *ctx, struct xfs_priv *p, const char **why)
{
	static const unsigned char zero_uuid[16];
	struct xlog log;
	uint64_t head, rec;
	uint32_t first_cycle = 0;
	int r;

	log.off = ((uint64_t)p->log_agno * p->agblocks + p->log_agbno) * p->block_size;
	log.bbs = (uint64_t)p->log_blocks * (p->block_size / BBSIZE);
	log.total_scan = 8u * (p->log_v2 ? XLOG_MAX_RECORD_BSIZE : 32768u) / BBSIZE;
	log.rec_scan = (p->log_v2 ? XLOG_MAX_RECORD_BSIZE : 32768u) / BBSIZE;

	r = log_find_head(ctx, p, &log, &head);
	if (r < 0)
		return r;
	if (r == LOG_BROKEN) {
		*why = "no log record header where the head's search needs one";
		return 0;
	}
	if (head == 0) {
		if ((r = log_cycle(ctx, p, &log, 0, &first_cycle)) < 0)
			return r;
		if (first_cycle == 0)
			return 1;          /* zeroed: nothing to replay */
	}
	/* The last record header before the head (wrapping at the start).  A
	 * record spans at most 8 header blocks and 256 KiB: one further back
	 * cannot end at the head. */
	*why = "the last log record is not an unmount record";
	rec = head;
	for (uint64_t back = 0;; back++) {
		if (back >= log.bbs || back > 2 * log.rec_scan + 8)
			return 0;
		rec = rec == 0 ? log.bbs - 1 : rec - 1;
		if ((r = log_read(ctx, &log, rec, p->logbuf, 1)) < 0)
			return r;
		if (be32(p->logbuf) == XLOG_HEADER_MAGIC)
			break;
	}
	{
		const unsigned char *h = p->logbuf;
		uint64_t after = (rec + rec_bbs(p, h)) % log.bbs;
		uint32_t hblks = rec_hblks(p, h);

		/* The uuid the kernel checks (xlog_header_check_mount). */
		if (p->log_v2 && memcmp(h + LH_FS_UUID, zero_uuid, 16) &&
		    memcmp(h + LH_FS_UUID, p->uuid, 16)) {
			*why = "the log belongs to another filesystem";
			return 0;
		}
		if (after != head || be32(h + LH_NUM_LOGOPS) != 1)
			return 0;
		/* Its one operation header, right after the header blocks. */
		if ((r = log_read(ctx, &log, (rec + hblks) % log.bbs, p->logbuf, 1)) < 0)
			return r;
		return (p->logbuf[OH_FLAGS] & XLOG_UNMOUNT_TRANS) ? 1 : 0;
	}
}

static int xfs_open(struct fs_ctx *ctx, void *priv)
{
	struct xfs_priv *p = priv;
	const unsigned char *sb;
	const char *why = "";
	int r;

	sb = map_superblock(ctx, &r);
	if (!sb)
		return r == -EINVAL ? fs_error(ctx, r, "no XFS superblock") : r;
	if ((r = parse_geometry(ctx, sb, p)) < 0)
		return r;
	crc32c_init(p->crc_table);
	if (p->v5 && !xfs_csum_ok(p->crc_table, sb, p->sect_size, SB_CRC)) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN, "superblock checksum mismatch; run xfs_repair");
		fs_warn(ctx, "superblock checksum mismatch, going on as forced");
	}
	if ((r = check_features(ctx, sb, p)) < 0)
		return r;
	if (be64(sb + SB_LOGSTART) == 0)
		return fs_error(ctx, -ENOTSUP,
				"the log is on an external device (mkfs.xfs -l logdev=), which a copy of this device alone would lack");
	if (be64(sb + SB_RBLOCKS) != 0 || be64(sb + SB_REXTENTS) != 0)
		return fs_error(ctx, -ENOTSUP,
				"it has a realtime section on another device (mkfs.xfs -r rtdev=), which a copy of this device alone would lack");
	/* Forced past any of these, every block is kept: the trees on disk
	 * cannot be trusted to show everything that is in use. */
	if (sb[SB_INPROGRESS]) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN, "mkfs.xfs did not finish making it (sb_inprogress): make it again");
		fs_warn(ctx, "mkfs.xfs did not finish making it: every block is kept, as forced");
		p->keep_all = true;
	}
	if (p->v5 && (be32(sb + SB_FEAT_INCOMPAT) & INCOMPAT_NEEDSREPAIR)) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN, "it is marked as needing repair; run xfs_repair");
		fs_warn(ctx, "marked as needing xfs_repair: every block is kept, as forced");
		p->keep_all = true;
	}

	p->sect = malloc(p->sect_size);
	p->path = malloc((size_t)BTREE_MAXLEVELS * p->block_size);
	p->logbuf = malloc((size_t)LOG_CHUNK_BBS * BBSIZE);
	p->agfl = malloc((size_t)p->agfl_size * sizeof(*p->agfl));
	if (!p->sect || !p->path || !p->logbuf || !p->agfl)
		return fs_error(ctx, -ENOMEM, "out of memory");

	r = log_is_clean(ctx, p, &why);
	if (r < 0)
		return r;
	if (r == 0) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"the log needs recovery (%s): run xfs_repair (or mount and unmount it once)",
					why);
		/* What the log allocated is not in the free-space trees yet:
		 * file data written before a crash lies in blocks they still
		 * list as free, and replaying the log would point at them. */
		fs_warn(ctx, "the log needs recovery (%s): every block is kept, as forced", why);
		p->keep_all = true;
	}
	return fs_set_geometry(ctx, p->block_size, p->dblocks);
}

static void xfs_close(struct fs_ctx *ctx, void *priv)
{
	struct xfs_priv *p = priv;

	(void)ctx;
	free(p->sect);
	free(p->path);
	free(p->logbuf);
	free(p->agfl);
	free(p->visited);
	memset(p, 0, sizeof(*p));
}

/* ---- allocation groups ---- */

/* One AG being scanned. */
struct ag_scan {
	uint32_t agno, len;
	uint64_t first;           /* filesystem block of its block 0 */
	uint32_t cursor;          /* blocks below it are accounted for */
	uint32_t agfl_n, agfl_i;  /* free list entries, next one not passed */
	uint64_t free_blocks;     /* in the bnobt's records */
	uint32_t longest;
	uint64_t visits;
};

/* An AG whose structures cannot be believed: an error, or, forced, a
 * warning and the whole AG kept (returns 1). */
static int ag_broken(struct fs_ctx *ctx, uint32_t agno, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int ag_broken(struct fs_ctx *ctx, uint32_t agno, const char *fmt, ...)
{
	char msg[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!fs_forced(ctx))
		return fs_error(ctx, -EUCLEAN, "allocation group %u: %s; run xfs_repair", agno, msg);
	fs_warn(ctx, "allocation group %u: %s; the whole group is kept, as forced", agno, msg);
	return 1;
}

/* Mark AG blocks [a, b) used, but for the free list's blocks among them. */
static int mark_used_gap(struct fs_ctx *ctx, const struct xfs_priv *p, struct ag_scan *s,
			 uint32_t a, uint32_t b)
{
	int r;

	while (s->agfl_i < s->agfl_n && p->agfl[s->agfl_i] < b) {
		uint32_t f = p->agfl[s->agfl_i++];
		if (f > a && (r = fs_mark_used(ctx, s->first + a, f - a)) < 0)
			return r;
		a = f + 1;
	}
	if (b > a && (r = fs_mark_used(ctx, s->first + a, b - a)) < 0)
		return r;
	return 0;
}

/* A free extent from the bnobt, in key order. */
static int free_extent(struct fs_ctx *ctx, const struct xfs_priv *p, struct ag_scan *s,
		       uint32_t start, uint32_t len)
{
	uint64_t end = (uint64_t)start + len;
	int r;

	if (len == 0 || start < p->hdr_blocks || end > s->len)
		return ag_broken(ctx, s->agno, "free extent %u+%u lies outside the group or over its headers",
				 start, len);
	if (start < s->cursor)
		return ag_broken(ctx, s->agno, "free extent %u+%u is out of order or overlaps another",
				 start, len);
	if ((r = mark_used_gap(ctx, p, s, s->cursor, start)) < 0)
		return r;
	if (s->agfl_i < s->agfl_n && p->agfl[s->agfl_i] < end)
		return ag_broken(ctx, s->agno, "free list block %u lies in free extent %u+%u",
				 p->agfl[s->agfl_i], start, len);
	s->cursor = (uint32_t)end;
	s->free_blocks += len;
	if (len > s->longest)
		s->longest = len;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Read the AGFL into p->agfl, sorted.  Returns 0, 1 (broken, forced) or
 * an error. */
static int read_agfl(struct fs_ctx *ctx, struct xfs_priv *p, struct ag_scan *s,
		     const unsigned char *agf_first_last_count)
{
	uint32_t first = be32(agf_first_last_count);
	uint32_t last = be32(agf_first_last_count + 4);
	uint32_t count = be32(agf_first_last_count + 8);
	const unsigned char *bno;
	uint32_t n = 0;
	int r;

	s->agfl_n = s->agfl_i = 0;
	if (count == 0)
		return 0;
	if (count > p->agfl_size || first >= p->agfl_size || last >= p->agfl_size)
		return ag_broken(ctx, s->agno, "free list of %u blocks from slot %u to %u does not fit its %u slots",
				 count, first, last, p->agfl_size);
	r = fs_read(ctx, (s->first * p->block_size) + 3 * (uint64_t)p->sect_size,
		    p->sect, p->sect_size);
	if (r < 0)
		return fs_error(ctx, r, "reading the free list of allocation group %u", s->agno);
	if (p->v5) {
		if (be32(p->sect) != XFS_AGFL_MAGIC || be32(p->sect + AGFL_SEQNO) != s->agno ||
		    memcmp(p->sect + AGFL_UUID, p->meta_uuid, 16))
			return ag_broken(ctx, s->agno, "bad free list header");
		if (!xfs_csum_ok(p->crc_table, p->sect, p->sect_size, AGFL_CRC))
			return ag_broken(ctx, s->agno, "free list checksum mismatch");
	}
	bno = p->sect + (p->v5 ? AGFL_V5_HDR : 0);
	for (uint32_t i = first;; i = (i + 1) % p->agfl_size) {
		uint32_t b = be32(bno + 4 * (size_t)i);
		if (n == count)
			return ag_broken(ctx, s->agno, "free list holds more than its count of %u blocks",
					 count);
		if (b < p->hdr_blocks || b >= s->len)
			return ag_broken(ctx, s->agno, "free list block %u lies outside the group or in its headers", b);
		p->agfl[n++] = b;
		if (i == last)
			break;
	}
	if (n != count)
		return ag_broken(ctx, s->agno, "free list holds %u blocks, its count says %u", n, count);
	qsort(p->agfl, n, sizeof(*p->agfl), cmp_u32);
	for (uint32_t i = 1; i < n; i++)
		if (p->agfl[i] == p->agfl[i - 1])
			return ag_broken(ctx, s->agno, "free list block %u is listed twice", p->agfl[i]);
	s->agfl_n = n;
	return 0;
}

static int remember_visit(struct fs_ctx *ctx, struct xfs_priv *p, uint32_t bno)
{
	if (p->nvisited == p->visited_cap) {
		size_t cap = p->visited_cap ? 2 * p->visited_cap : 64;
		uint32_t *v = realloc(p->visited, cap * sizeof(*v));
		if (!v)
			return fs_error(ctx, -ENOMEM, "out of memory");
		p->visited = v;
		p->visited_cap = cap;
	}
	p->visited[p->nvisited++] = bno;
	return 0;
}

/* Read bnobt block bno, expected at `level`, into buf and check its header.
 * Returns 0 with *numrecs set, 1 (broken, forced) or an error. */
static int read_bnobt_block(struct fs_ctx *ctx, struct xfs_priv *p, struct ag_scan *s,
			    uint32_t bno, uint32_t level, bool root, unsigned char *buf,
			    uint32_t *numrecs)
{
	uint32_t hdr = p->v5 ? BTREE_SHDR_V5 : BTREE_SHDR_V4;
	uint32_t maxrecs = (p->block_size - hdr) /
			   (level ? ALLOC_KEY_SIZE + ALLOC_PTR_SIZE : ALLOC_REC_SIZE);
	uint64_t fsb = s->first + bno;
	int r;

	if (bno < p->hdr_blocks || bno >= s->len)
		return ag_broken(ctx, s->agno, "free-space btree block %u lies outside the group or in its headers", bno);
	/* No tree has more blocks than its group: a limit against loops. */
	if (++s->visits > s->len)
		return ag_broken(ctx, s->agno, "free-space btree visits more blocks than the group has");
	if ((r = remember_visit(ctx, p, bno)) < 0)
		return r;
	r = fs_read(ctx, fsb * p->block_size, buf, p->block_size);
	if (r < 0)
		return fs_error(ctx, r, "reading free-space btree block %u/%u", s->agno, bno);
	if (be32(buf) != (p->v5 ? XFS_ABTB_CRC_MAGIC : XFS_ABTB_MAGIC))
		return ag_broken(ctx, s->agno, "block %u is not a free-space btree block", bno);
	if (be16(buf + BB_LEVEL) != level)
		return ag_broken(ctx, s->agno, "free-space btree block %u is at level %u, expected %u",
				 bno, be16(buf + BB_LEVEL), level);
	*numrecs = be16(buf + BB_NUMRECS);
	if (*numrecs > maxrecs || (*numrecs == 0 && (!root || level > 0)))
		return ag_broken(ctx, s->agno, "free-space btree block %u holds %u records (at most %u)",
				 bno, *numrecs, maxrecs);
	if (p->v5) {
		if (be64(buf + BB_BLKNO) != fsb * (p->block_size / BBSIZE) ||
		    memcmp(buf + BB_UUID, p->meta_uuid, 16) || be32(buf + BB_OWNER) != s->agno)
			return ag_broken(ctx, s->agno, "free-space btree block %u does not belong here", bno);
		if (!xfs_csum_ok(p->crc_table, buf, p->block_size, BB_CRC))
			return ag_broken(ctx, s->agno, "free-space btree block %u fails its checksum", bno);
	}
	return 0;
}

/* Walk the bnobt from its root, depth first in key order, handing every
 * record to free_extent().  Returns 0, 1 (broken, forced) or an error. */
static int walk_bnobt(struct fs_ctx *ctx, struct xfs_priv *p, struct ag_scan *s,
		      uint32_t root, uint32_t levels)
{
	uint32_t hdr = p->v5 ? BTREE_SHDR_V5 : BTREE_SHDR_V4;
	uint32_t node_maxrecs = (p->block_size - hdr) / (ALLOC_KEY_SIZE + ALLOC_PTR_SIZE);
	uint32_t n[BTREE_MAXLEVELS], idx[BTREE_MAXLEVELS];
	int d = 0, r;

	if (levels < 1 || levels > BTREE_MAXLEVELS)
		return ag_broken(ctx, s->agno, "free-space btree of %u levels", levels);
	r = read_bnobt_block(ctx, p, s, root, levels - 1, true, p->path, &n[0]);
	if (r)
		return r;
	idx[0] = 0;
	while (d >= 0) {
		unsigned char *blk = p->path + (size_t)d * p->block_size;
		uint32_t level = levels - 1 - (uint32_t)d;

		if (level == 0) {
			for (uint32_t i = 0; i < n[d]; i++) {
				const unsigned char *rec = blk + hdr + (size_t)i * ALLOC_REC_SIZE;
				if ((r = free_extent(ctx, p, s, be32(rec), be32(rec + 4))))
					return r;
			}
			d--;
			continue;
		}
		if (idx[d] >= n[d]) {
			d--;
			continue;
		}
		{
			const unsigned char *ptrs = blk + hdr + (size_t)node_maxrecs * ALLOC_KEY_SIZE;
			uint32_t child = be32(ptrs + (size_t)idx[d]++ * ALLOC_PTR_SIZE);

			r = read_bnobt_block(ctx, p, s, child, level - 1, false,
					     p->path + (size_t)(d + 1) * p->block_size, &n[d + 1]);
			if (r)
				return r;
			idx[++d] = 0;
		}
	}
	return 0;
}

/* The blocks that must be in use whatever the trees say (headers, the
 * bnobt itself, the log) are: a block of them left unmarked lies in free
 * space, which the free-space trees must never claim. */
static int check_claimed(struct fs_ctx *ctx, const struct xfs_priv *p, const struct ag_scan *s)
{
	for (uint32_t b = 0; b < p->hdr_blocks; b++)
		if (!fs_is_used(ctx, s->first + b))
			return ag_broken(ctx, s->agno, "its header block %u is listed as free", b);
	for (size_t i = 0; i < p->nvisited; i++)
		if (!fs_is_used(ctx, s->first + p->visited[i]))
			return ag_broken(ctx, s->agno, "free-space btree block %u is listed as free",
					 p->visited[i]);
	if (p->log_blocks && s->agno == p->log_agno)
		for (uint32_t b = p->log_agbno; b - p->log_agbno < p->log_blocks; b++)
			if (!fs_is_used(ctx, s->first + b))
				return ag_broken(ctx, s->agno, "log block %u is listed as free", b);
	return 0;
}

struct ag_counts {
	uint64_t freeblks, flcount, btreeblks;
};

/* Mark what AG agno uses.  Returns 0 with its AGF's counts, 1 when it was
 * kept whole (forced), or an error. */
static int scan_ag(struct fs_ctx *ctx, struct xfs_priv *p, uint32_t agno, struct ag_counts *c)
{
	struct ag_scan s;
	const unsigned char *agf = p->sect;
	uint32_t root, levels, freeblks, longest;
	int r;

	memset(&s, 0, sizeof(s));
	s.agno = agno;
	s.first = (uint64_t)agno * p->agblocks;
	s.len = agno == p->agcount - 1 ? (uint32_t)(p->dblocks - s.first) : p->agblocks;
	p->nvisited = 0;

	r = fs_read(ctx, s.first * p->block_size + p->sect_size, p->sect, p->sect_size);
	if (r < 0)
		return fs_error(ctx, r, "reading the AGF of allocation group %u", agno);
	if (be32(agf) != XFS_AGF_MAGIC || be32(agf + AGF_VERSIONNUM) != 1 ||
	    be32(agf + AGF_SEQNO) != agno)
		return ag_broken(ctx, agno, "bad AGF header");
	if (be32(agf + AGF_LENGTH) != s.len)
		return ag_broken(ctx, agno, "its AGF says %u blocks, the superblock %u",
				 be32(agf + AGF_LENGTH), s.len);
	if (p->v5) {
		if (memcmp(agf + AGF_UUID, p->meta_uuid, 16))
			return ag_broken(ctx, agno, "its AGF belongs to another filesystem");
		if (!xfs_csum_ok(p->crc_table, agf, p->sect_size, AGF_CRC))
			return ag_broken(ctx, agno, "AGF checksum mismatch");
	}
	root = be32(agf + AGF_BNO_ROOT);
	levels = be32(agf + AGF_BNO_LEVEL);
	freeblks = be32(agf + AGF_FREEBLKS);
	longest = be32(agf + AGF_LONGEST);
	c->freeblks = freeblks;
	c->flcount = be32(agf + AGF_FLCOUNT);
	c->btreeblks = be32(agf + AGF_BTREEBLKS);

	/* The AGF is in p->sect: take what is needed before the AGFL's read. */
	{
		unsigned char fl[12];
		memcpy(fl, agf + AGF_FLFIRST, sizeof(fl));
		if ((r = read_agfl(ctx, p, &s, fl)))
			return r;
	}
	if ((r = walk_bnobt(ctx, p, &s, root, levels)))
		return r;
	if ((r = mark_used_gap(ctx, p, &s, s.cursor, s.len)) < 0)
		return r;
	if ((r = check_claimed(ctx, p, &s)))
		return r;
	if (s.free_blocks != freeblks)
		return ag_broken(ctx, agno, "its free-space btree holds %llu free blocks, its AGF says %u",
				 (unsigned long long)s.free_blocks, freeblks);
	if (s.longest != longest)
		return ag_broken(ctx, agno, "its longest free extent is %u blocks, its AGF says %u",
				 s.longest, longest);
	return 0;
}

static int xfs_used_blocks(struct fs_ctx *ctx, void *priv)
{
	struct xfs_priv *p = priv;
	uint64_t counted = 0;
	bool all_counted = true;

	if (p->keep_all)
		return fs_mark_used(ctx, 0, p->dblocks);
	for (uint32_t agno = 0; agno < p->agcount; agno++) {
		struct ag_counts c = { 0, 0, 0 };
		int r = scan_ag(ctx, p, agno, &c);

		if (r < 0)
			return r;
		if (r > 0) {
			uint64_t first = (uint64_t)agno * p->agblocks;
			uint64_t len = agno == p->agcount - 1 ? p->dblocks - first : p->agblocks;
			if ((r = fs_mark_used(ctx, first, len)) < 0)
				return r;
			all_counted = false;
			continue;
		}
		counted += c.freeblks + c.flcount + c.btreeblks;
	}
	/* sb_fdblocks counts free extents, free-list blocks and the free-space
	 * trees' blocks beyond their roots (the kernel's
	 * xfs_initialize_perag_data, xfs_repair's scan_ags).  With lazy
	 * counters the superblock's figure is only written at unmount, so it
	 * is stale after a crash: the AGFs are the truth then, as for
	 * xfs_repair.  After a clean unmount the two agree. */
	if (all_counted && counted != p->fdblocks) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"the allocation groups count %llu free blocks, the superblock says %llu; run xfs_repair",
					(unsigned long long)counted, (unsigned long long)p->fdblocks);
		fs_warn(ctx, "the allocation groups count %llu free blocks, the superblock says %llu%s",
			(unsigned long long)counted, (unsigned long long)p->fdblocks,
			p->lazy_count ? " (lazy counters, stale after a crash)" : "");
	}
	return 0;
}

static const struct fs_magic xfs_magics[] = {
	{ .magic = "XFSB", .len = 4, .offset = 0 },
	{ .magic = NULL },
};

static const char *const xfs_blkid_types[] = { "xfs", NULL };

const struct fs_plugin fs_plugin_xfs = {
	.name = "xfs",
	.blkid_types = xfs_blkid_types,
	.min_size = BBSIZE,
	.magics = xfs_magics,
	.priv_size = sizeof(struct xfs_priv),
	.probe = xfs_probe,
	.open = xfs_open,
	.used_blocks = xfs_used_blocks,
	.close = xfs_close,
};
