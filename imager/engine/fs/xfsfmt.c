/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * XFS's on-disk format (include/imager/xfsfmt.h): the superblock's geometry
 * and features, log record headers, decoded from bytes fsplugins/xfs.c has
 * read.  Every field is hostile.
 */
#include "imager/xfsfmt.h"
#include "imager/bytes.h"

#include <errno.h>
#include <string.h>

/* A failure explained (the plugin passes the message on: fs_error()). */
#define geom_err(err, code, ...) im_errf(err, IM_EXIT_SOURCE, code, __VA_ARGS__)

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

/* Parse and check the geometry the superblock declares.  Returns 0, or
 * -EINVAL with the reason recorded.  Features are judged by the caller. */
int xfs_parse_geometry(const unsigned char *sb, uint64_t dev, struct xfs_geom *g,
		       struct im_err *err)
{
	uint16_t versionnum = be16(sb + XFS_SB_VERSIONNUM);
	uint32_t version = versionnum & XFS_VERSION_NUMBITS;
	uint64_t last_ag, logstart, agbno_mask;

	if (version != 4 && version != 5)
		return geom_err(err, -EINVAL, "superblock version %u is not 4 or 5", version);
	g->v5 = version == 5;
	g->block_size = be32(sb + XFS_SB_BLOCKSIZE);
	g->sect_size = be16(sb + XFS_SB_SECTSIZE);
	if (g->block_size < 512 || g->block_size > 65536 || !is_pow2(g->block_size) ||
	    sb[XFS_SB_BLOCKLOG] != log2_floor(g->block_size))
		return geom_err(err, -EINVAL, "block size %u (log %u) out of range",
				g->block_size, sb[XFS_SB_BLOCKLOG]);
	/* map_superblock() checked the sector size is a power of two. */
	if (g->sect_size > g->block_size || sb[XFS_SB_SECTLOG] != log2_floor(g->sect_size) ||
	    (g->v5 && g->sect_size < XFS_SB_V5_END))
		return geom_err(err, -EINVAL, "sector size %u (log %u) out of range",
				g->sect_size, sb[XFS_SB_SECTLOG]);

	g->agblocks = be32(sb + XFS_SB_AGBLOCKS);
	g->agcount = be32(sb + XFS_SB_AGCOUNT);
	g->agblklog = sb[XFS_SB_AGBLKLOG];
	g->dblocks = be64(sb + XFS_SB_DBLOCKS);
	g->fdblocks = be64(sb + XFS_SB_FDBLOCKS);
	/* xfs_validate_sb_common: XFS_MIN_AG_BLOCKS .. 1 TiB of 512-byte blocks. */
	if (g->agblocks < 64 || g->agblocks > (1u << 31) ||
	    g->agblklog != log2_floor(g->agblocks) + !is_pow2(g->agblocks))
		return geom_err(err, -EINVAL, "%u blocks per allocation group (log %u) out of range",
				g->agblocks, g->agblklog);
	if (g->agcount == 0)
		return geom_err(err, -EINVAL, "no allocation groups");
	last_ag = (uint64_t)(g->agcount - 1) * g->agblocks;
	if (g->dblocks > last_ag + g->agblocks || g->dblocks < last_ag + 64)
		return geom_err(err, -EINVAL, "%llu blocks do not make %u allocation groups of %u",
				(unsigned long long)g->dblocks, g->agcount, g->agblocks);
	if (g->dblocks > dev / g->block_size)
		return geom_err(err, -EINVAL,
				"%llu blocks of %u bytes do not fit in the %llu-byte device",
				(unsigned long long)g->dblocks, g->block_size,
				(unsigned long long)dev);
	if (g->fdblocks > g->dblocks)
		return geom_err(err, -EINVAL, "%llu free blocks out of %llu",
				(unsigned long long)g->fdblocks, (unsigned long long)g->dblocks);

	/* The superblock, AGF, AGI and AGFL occupy the first 4 sectors. */
	g->hdr_blocks = 3 * g->sect_size / g->block_size + 1;
	g->agfl_size = g->v5 ? (g->sect_size - XFS_AGFL_V5_HDR) / 4 : g->sect_size / 4;

	/* The internal log, when there is one, lies inside one AG. */
	logstart = be64(sb + XFS_SB_LOGSTART);
	g->log_blocks = be32(sb + XFS_SB_LOGBLOCKS);
	if (logstart != 0) {
		uint64_t agno = logstart >> g->agblklog, ag_len;

		agbno_mask = ((uint64_t)1 << g->agblklog) - 1;
		g->log_agbno = (uint32_t)(logstart & agbno_mask);
		if (agno >= g->agcount)
			return geom_err(err, -EINVAL, "log start %llu is beyond the last allocation group",
					(unsigned long long)logstart);
		g->log_agno = (uint32_t)agno;
		ag_len = g->log_agno == g->agcount - 1 ? g->dblocks - last_ag : g->agblocks;
		if (g->log_blocks < 64 || g->log_agbno < g->hdr_blocks ||
		    g->log_agbno >= ag_len || g->log_blocks > ag_len - g->log_agbno)
			return geom_err(err, -EINVAL, "a log of %u blocks at %u/%u does not fit its allocation group",
					g->log_blocks, g->log_agno, g->log_agbno);
	}
	memcpy(g->uuid, sb + XFS_SB_UUID, 16);
	return 0;
}

/* Features, as xfs_sb_good_version() and the v5 feature masks judge them.
 * Returns 0, or -ENOTSUP with the reason. */
int xfs_check_features(const unsigned char *sb, struct xfs_geom *g, struct im_err *err)
{
	uint16_t versionnum = be16(sb + XFS_SB_VERSIONNUM);
	uint32_t features2 = be32(sb + XFS_SB_FEATURES2) | be32(sb + XFS_SB_BAD_FEATURES2);
	bool morebits = versionnum & XFS_VERSION_MOREBITSBIT;

	if (!g->v5) {
		if (!(versionnum & XFS_VERSION_DIRV2BIT) || (versionnum & XFS_VERSION_SHAREDBIT))
			return geom_err(err, -ENOTSUP, "v4 feature bits 0x%04x are not supported",
					versionnum);
		if (morebits && (features2 & ~XFS_VERSION2_V4_OK))
			return geom_err(err, -ENOTSUP, "unknown v4 feature bits 0x%x",
					features2 & ~XFS_VERSION2_V4_OK);
		g->lazy_count = morebits && (features2 & XFS_VERSION2_LAZYSBCOUNT);
		g->log_v2 = versionnum & XFS_VERSION_LOGV2BIT;
		memcpy(g->meta_uuid, g->uuid, 16);
		return 0;
	}
	{
		uint32_t incompat = be32(sb + XFS_SB_FEAT_INCOMPAT);
		uint32_t ro_compat = be32(sb + XFS_SB_FEAT_RO_COMPAT);

		if (incompat & XFS_INCOMPAT_METADIR)
			return geom_err(err, -ENOTSUP, "the metadir feature is not supported");
		if (incompat & XFS_INCOMPAT_ZONED)
			return geom_err(err, -ENOTSUP, "the zoned feature is not supported");
		if (incompat & ~XFS_INCOMPAT_UNDERSTOOD)
			return geom_err(err, -ENOTSUP, "unknown incompatible features 0x%x",
					incompat & ~XFS_INCOMPAT_UNDERSTOOD);
		if (ro_compat & ~XFS_RO_COMPAT_KNOWN)
			return geom_err(err, -ENOTSUP, "unknown read-only features 0x%x",
					ro_compat & ~XFS_RO_COMPAT_KNOWN);
		g->lazy_count = true;
		g->log_v2 = true;
		memcpy(g->meta_uuid, (incompat & XFS_INCOMPAT_META_UUID) ? sb + XFS_SB_META_UUID : sb + XFS_SB_UUID, 16);
	}
	return 0;
}

/* The cycle a basic block was written in: its first word, or the cycle
 * field of a record header (xlog_get_cycle). */
uint32_t xfs_bb_cycle(const unsigned char *b)
{
	return be32(b) == XLOG_HEADER_MAGIC ? be32(b + XFS_LH_CYCLE) : be32(b);
}

/* Header blocks of a record (xlog_logrec_hblks): v2 records of in-core logs
 * above 32 KiB carry extended headers for their cycle data. */
uint32_t xfs_rec_hblks(bool log_v2, const unsigned char *h)
{
	uint32_t size = be32(h + XFS_LH_SIZE);

	if (log_v2 && (be32(h + XFS_LH_VERSION) & 2) && size > XLOG_HEADER_CYCLE_SIZE)
		return (uint32_t)(((uint64_t)size + XLOG_HEADER_CYCLE_SIZE - 1) /
				  XLOG_HEADER_CYCLE_SIZE);
	return 1;
}

/* Blocks a record spans, its header(s) included. */
uint64_t xfs_rec_bbs(bool log_v2, const unsigned char *h)
{
	return xfs_rec_hblks(log_v2, h) + ((uint64_t)be32(h + XFS_LH_LEN) + XFS_BBSIZE - 1) / XFS_BBSIZE;
}

