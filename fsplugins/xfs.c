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
 * The format's constants and its superblock and log record header decoders
 * are in include/imager/xfsfmt.h (imager/engine/fs/xfsfmt.c).
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
#include "imager/xfsfmt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_CHUNK_BBS         128u

struct xfs_priv {
	struct xfs_geom g;           /* the superblock's geometry and features */
	uint32_t crc_table[256];
	unsigned char *sect;         /* one sector: AGF, AGFL */
	unsigned char *path;         /* XFS_BTREE_MAXLEVELS btree blocks */
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

/* The first sector of the filesystem, its length checked.  NULL with *err
 * -EINVAL when it is not an XFS superblock. */
static const unsigned char *map_superblock(struct fs_ctx *ctx, int *err)
{
	const unsigned char *sb;
	uint32_t sect;

	*err = 0;
	if (fs_device_size(ctx) < XFS_BBSIZE) {
		*err = -EINVAL;
		return NULL;
	}
	sb = fs_map(ctx, 0, XFS_BBSIZE, err);
	if (!sb)
		return NULL;
	if (be32(sb) != XFS_SB_MAGIC) {
		*err = -EINVAL;
		return NULL;
	}
	sect = be16(sb + XFS_SB_SECTSIZE);
	if (sect < XFS_BBSIZE || sect > 32768 || !is_pow2(sect) ||
	    sect > fs_device_size(ctx)) {
		*err = -EINVAL;
		return NULL;
	}
	return fs_map(ctx, 0, sect, err);
}

/* The geometry the superblock declares (xfs_parse_geometry), or -EINVAL
 * with the reason given. */
static int parse_geometry(struct fs_ctx *ctx, const unsigned char *sb, struct xfs_priv *p)
{
	struct im_err err = { 0 };
	int r = xfs_parse_geometry(sb, fs_device_size(ctx), &p->g, &err);

	return r < 0 ? fs_error(ctx, r, "%s", err.msg) : 0;
}

/* The features (xfs_check_features), or -ENOTSUP with the reason given. */
static int check_features(struct fs_ctx *ctx, const unsigned char *sb, struct xfs_priv *p)
{
	struct im_err err = { 0 };
	int r = xfs_check_features(sb, &p->g, &err);

	return r < 0 ? fs_error(ctx, r, "%s", err.msg) : 0;
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
	if (p.g.v5) {
		crc32c_init(p.crc_table);
		if (!xfs_csum_ok(p.crc_table, sb, p.g.sect_size, XFS_SB_CRC))
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
	int r = fs_read(ctx, log->off + bb * XFS_BBSIZE, buf, (size_t)count * XFS_BBSIZE);

	return r < 0 ? fs_error(ctx, r, "reading the log at block %llu",
				(unsigned long long)bb) : 0;
}

static int log_cycle(struct fs_ctx *ctx, struct xfs_priv *p, const struct xlog *log,
		     uint64_t bb, uint32_t *cycle)
{
	int r = log_read(ctx, log, bb, p->logbuf, 1);

	if (r == 0)
		*cycle = xfs_bb_cycle(p->logbuf);
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
			if (xfs_bb_cycle(p->logbuf + (size_t)i * XFS_BBSIZE) == stop) {
				*found = (int64_t)(start + i);
				return 0;
			}
		start += k;
		n -= k;
	}
	return 0;
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
	if (*last - i + extra != xfs_rec_bbs(p->g.log_v2, p->logbuf))
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

	log.off = ((uint64_t)p->g.log_agno * p->g.agblocks + p->g.log_agbno) * p->g.block_size;
	log.bbs = (uint64_t)p->g.log_blocks * (p->g.block_size / XFS_BBSIZE);
	log.total_scan = 8u * (p->g.log_v2 ? XLOG_MAX_RECORD_BSIZE : 32768u) / XFS_BBSIZE;
	log.rec_scan = (p->g.log_v2 ? XLOG_MAX_RECORD_BSIZE : 32768u) / XFS_BBSIZE;

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
		uint64_t after = (rec + xfs_rec_bbs(p->g.log_v2, h)) % log.bbs;
		uint32_t hblks = xfs_rec_hblks(p->g.log_v2, h);

		/* The uuid the kernel checks (xlog_header_check_mount). */
		if (p->g.log_v2 && memcmp(h + XFS_LH_FS_UUID, zero_uuid, 16) &&
		    memcmp(h + XFS_LH_FS_UUID, p->g.uuid, 16)) {
			*why = "the log belongs to another filesystem";
			return 0;
		}
		if (after != head || be32(h + XFS_LH_NUM_LOGOPS) != 1)
			return 0;
		/* Its one operation header, right after the header blocks. */
		if ((r = log_read(ctx, &log, (rec + hblks) % log.bbs, p->logbuf, 1)) < 0)
			return r;
		return (p->logbuf[XFS_OH_FLAGS] & XLOG_UNMOUNT_TRANS) ? 1 : 0;
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
	if (p->g.v5 && !xfs_csum_ok(p->crc_table, sb, p->g.sect_size, XFS_SB_CRC)) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN, "superblock checksum mismatch; run xfs_repair");
		fs_warn(ctx, "superblock checksum mismatch, going on as forced");
	}
	if ((r = check_features(ctx, sb, p)) < 0)
		return r;
	if (be64(sb + XFS_SB_LOGSTART) == 0)
		return fs_error(ctx, -ENOTSUP,
				"the log is on an external device (mkfs.xfs -l logdev=), which a copy of this device alone would lack");
	if (be64(sb + XFS_SB_RBLOCKS) != 0 || be64(sb + XFS_SB_REXTENTS) != 0)
		return fs_error(ctx, -ENOTSUP,
				"it has a realtime section on another device (mkfs.xfs -r rtdev=), which a copy of this device alone would lack");
	/* Forced past any of these, every block is kept: the trees on disk
	 * cannot be trusted to show everything that is in use. */
	if (sb[XFS_SB_INPROGRESS]) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN, "mkfs.xfs did not finish making it (sb_inprogress): make it again");
		fs_warn(ctx, "mkfs.xfs did not finish making it: every block is kept, as forced");
		p->keep_all = true;
	}
	if (p->g.v5 && (be32(sb + XFS_SB_FEAT_INCOMPAT) & XFS_INCOMPAT_NEEDSREPAIR)) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN, "it is marked as needing repair; run xfs_repair");
		fs_warn(ctx, "marked as needing xfs_repair: every block is kept, as forced");
		p->keep_all = true;
	}

	p->sect = malloc(p->g.sect_size);
	p->path = malloc((size_t)XFS_BTREE_MAXLEVELS * p->g.block_size);
	p->logbuf = malloc((size_t)LOG_CHUNK_BBS * XFS_BBSIZE);
	p->agfl = malloc((size_t)p->g.agfl_size * sizeof(*p->agfl));
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
	return fs_set_geometry(ctx, p->g.block_size, p->g.dblocks);
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

	if (len == 0 || start < p->g.hdr_blocks || end > s->len)
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
	if (count > p->g.agfl_size || first >= p->g.agfl_size || last >= p->g.agfl_size)
		return ag_broken(ctx, s->agno, "free list of %u blocks from slot %u to %u does not fit its %u slots",
				 count, first, last, p->g.agfl_size);
	r = fs_read(ctx, (s->first * p->g.block_size) + 3 * (uint64_t)p->g.sect_size,
		    p->sect, p->g.sect_size);
	if (r < 0)
		return fs_error(ctx, r, "reading the free list of allocation group %u", s->agno);
	if (p->g.v5) {
		if (be32(p->sect) != XFS_AGFL_MAGIC || be32(p->sect + XFS_AGFL_SEQNO) != s->agno ||
		    memcmp(p->sect + XFS_AGFL_UUID, p->g.meta_uuid, 16))
			return ag_broken(ctx, s->agno, "bad free list header");
		if (!xfs_csum_ok(p->crc_table, p->sect, p->g.sect_size, XFS_AGFL_CRC))
			return ag_broken(ctx, s->agno, "free list checksum mismatch");
	}
	bno = p->sect + (p->g.v5 ? XFS_AGFL_V5_HDR : 0);
	for (uint32_t i = first;; i = (i + 1) % p->g.agfl_size) {
		uint32_t b = be32(bno + 4 * (size_t)i);
		if (n == count)
			return ag_broken(ctx, s->agno, "free list holds more than its count of %u blocks",
					 count);
		if (b < p->g.hdr_blocks || b >= s->len)
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
	uint32_t hdr = p->g.v5 ? XFS_BTREE_SHDR_V5 : XFS_BTREE_SHDR_V4;
	uint32_t maxrecs = (p->g.block_size - hdr) /
			   (level ? XFS_ALLOC_KEY_SIZE + XFS_ALLOC_PTR_SIZE : XFS_ALLOC_REC_SIZE);
	uint64_t fsb = s->first + bno;
	int r;

	if (bno < p->g.hdr_blocks || bno >= s->len)
		return ag_broken(ctx, s->agno, "free-space btree block %u lies outside the group or in its headers", bno);
	/* No tree has more blocks than its group: a limit against loops. */
	if (++s->visits > s->len)
		return ag_broken(ctx, s->agno, "free-space btree visits more blocks than the group has");
	if ((r = remember_visit(ctx, p, bno)) < 0)
		return r;
	r = fs_read(ctx, fsb * p->g.block_size, buf, p->g.block_size);
	if (r < 0)
		return fs_error(ctx, r, "reading free-space btree block %u/%u", s->agno, bno);
	if (be32(buf) != (p->g.v5 ? XFS_ABTB_CRC_MAGIC : XFS_ABTB_MAGIC))
		return ag_broken(ctx, s->agno, "block %u is not a free-space btree block", bno);
	if (be16(buf + XFS_BB_LEVEL) != level)
		return ag_broken(ctx, s->agno, "free-space btree block %u is at level %u, expected %u",
				 bno, be16(buf + XFS_BB_LEVEL), level);
	*numrecs = be16(buf + XFS_BB_NUMRECS);
	if (*numrecs > maxrecs || (*numrecs == 0 && (!root || level > 0)))
		return ag_broken(ctx, s->agno, "free-space btree block %u holds %u records (at most %u)",
				 bno, *numrecs, maxrecs);
	if (p->g.v5) {
		if (be64(buf + XFS_BB_BLKNO) != fsb * (p->g.block_size / XFS_BBSIZE) ||
		    memcmp(buf + XFS_BB_UUID, p->g.meta_uuid, 16) || be32(buf + XFS_BB_OWNER) != s->agno)
			return ag_broken(ctx, s->agno, "free-space btree block %u does not belong here", bno);
		if (!xfs_csum_ok(p->crc_table, buf, p->g.block_size, XFS_BB_CRC))
			return ag_broken(ctx, s->agno, "free-space btree block %u fails its checksum", bno);
	}
	return 0;
}

/* Walk the bnobt from its root, depth first in key order, handing every
 * record to free_extent().  Returns 0, 1 (broken, forced) or an error. */
static int walk_bnobt(struct fs_ctx *ctx, struct xfs_priv *p, struct ag_scan *s,
		      uint32_t root, uint32_t levels)
{
	uint32_t hdr = p->g.v5 ? XFS_BTREE_SHDR_V5 : XFS_BTREE_SHDR_V4;
	uint32_t node_maxrecs = (p->g.block_size - hdr) / (XFS_ALLOC_KEY_SIZE + XFS_ALLOC_PTR_SIZE);
	uint32_t n[XFS_BTREE_MAXLEVELS], idx[XFS_BTREE_MAXLEVELS];
	int d = 0, r;

	if (levels < 1 || levels > XFS_BTREE_MAXLEVELS)
		return ag_broken(ctx, s->agno, "free-space btree of %u levels", levels);
	r = read_bnobt_block(ctx, p, s, root, levels - 1, true, p->path, &n[0]);
	if (r)
		return r;
	idx[0] = 0;
	while (d >= 0) {
		unsigned char *blk = p->path + (size_t)d * p->g.block_size;
		uint32_t level = levels - 1 - (uint32_t)d;

		if (level == 0) {
			for (uint32_t i = 0; i < n[d]; i++) {
				const unsigned char *rec = blk + hdr + (size_t)i * XFS_ALLOC_REC_SIZE;
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
			const unsigned char *ptrs = blk + hdr + (size_t)node_maxrecs * XFS_ALLOC_KEY_SIZE;
			uint32_t child = be32(ptrs + (size_t)idx[d]++ * XFS_ALLOC_PTR_SIZE);

			r = read_bnobt_block(ctx, p, s, child, level - 1, false,
					     p->path + (size_t)(d + 1) * p->g.block_size, &n[d + 1]);
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
	for (uint32_t b = 0; b < p->g.hdr_blocks; b++)
		if (!fs_is_used(ctx, s->first + b))
			return ag_broken(ctx, s->agno, "its header block %u is listed as free", b);
	for (size_t i = 0; i < p->nvisited; i++)
		if (!fs_is_used(ctx, s->first + p->visited[i]))
			return ag_broken(ctx, s->agno, "free-space btree block %u is listed as free",
					 p->visited[i]);
	if (p->g.log_blocks && s->agno == p->g.log_agno)
		for (uint32_t b = p->g.log_agbno; b - p->g.log_agbno < p->g.log_blocks; b++)
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
	s.first = (uint64_t)agno * p->g.agblocks;
	s.len = agno == p->g.agcount - 1 ? (uint32_t)(p->g.dblocks - s.first) : p->g.agblocks;
	p->nvisited = 0;

	r = fs_read(ctx, s.first * p->g.block_size + p->g.sect_size, p->sect, p->g.sect_size);
	if (r < 0)
		return fs_error(ctx, r, "reading the AGF of allocation group %u", agno);
	if (be32(agf) != XFS_AGF_MAGIC || be32(agf + XFS_AGF_VERSIONNUM) != 1 ||
	    be32(agf + XFS_AGF_SEQNO) != agno)
		return ag_broken(ctx, agno, "bad AGF header");
	if (be32(agf + XFS_AGF_LENGTH) != s.len)
		return ag_broken(ctx, agno, "its AGF says %u blocks, the superblock %u",
				 be32(agf + XFS_AGF_LENGTH), s.len);
	if (p->g.v5) {
		if (memcmp(agf + XFS_AGF_UUID, p->g.meta_uuid, 16))
			return ag_broken(ctx, agno, "its AGF belongs to another filesystem");
		if (!xfs_csum_ok(p->crc_table, agf, p->g.sect_size, XFS_AGF_CRC))
			return ag_broken(ctx, agno, "AGF checksum mismatch");
	}
	root = be32(agf + XFS_AGF_BNO_ROOT);
	levels = be32(agf + XFS_AGF_BNO_LEVEL);
	freeblks = be32(agf + XFS_AGF_FREEBLKS);
	longest = be32(agf + XFS_AGF_LONGEST);
	c->freeblks = freeblks;
	c->flcount = be32(agf + XFS_AGF_FLCOUNT);
	c->btreeblks = be32(agf + XFS_AGF_BTREEBLKS);

	/* The AGF is in p->sect: take what is needed before the AGFL's read. */
	{
		unsigned char fl[12];
		memcpy(fl, agf + XFS_AGF_FLFIRST, sizeof(fl));
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
		return fs_mark_used(ctx, 0, p->g.dblocks);
	for (uint32_t agno = 0; agno < p->g.agcount; agno++) {
		struct ag_counts c = { 0, 0, 0 };
		int r = scan_ag(ctx, p, agno, &c);

		if (r < 0)
			return r;
		if (r > 0) {
			uint64_t first = (uint64_t)agno * p->g.agblocks;
			uint64_t len = agno == p->g.agcount - 1 ? p->g.dblocks - first : p->g.agblocks;
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
	if (all_counted && counted != p->g.fdblocks) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"the allocation groups count %llu free blocks, the superblock says %llu; run xfs_repair",
					(unsigned long long)counted, (unsigned long long)p->g.fdblocks);
		fs_warn(ctx, "the allocation groups count %llu free blocks, the superblock says %llu%s",
			(unsigned long long)counted, (unsigned long long)p->g.fdblocks,
			p->g.lazy_count ? " (lazy counters, stale after a crash)" : "");
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
	.min_size = XFS_BBSIZE,
	.magics = xfs_magics,
	.priv_size = sizeof(struct xfs_priv),
	.probe = xfs_probe,
	.open = xfs_open,
	.used_blocks = xfs_used_blocks,
	.close = xfs_close,
};
