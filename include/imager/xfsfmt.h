/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * XFS's on-disk format, as fsplugins/xfs.c reads it (from xfsprogs and the
 * kernel: libxfs/xfs_format.h, xfs_log_format.h): the superblock, AG
 * headers (AGF, AGFL), free-space btree blocks and log record headers.
 * Big-endian but the CRC32c fields.  The decoders (imager/engine/fs/xfsfmt.c)
 * work on bytes already read and do no I/O; every field is hostile.
 */
#ifndef IMAGER_XFSFMT_H
#define IMAGER_XFSFMT_H

#include <stdbool.h>
#include <stdint.h>

#include "imager/error.h"

#define XFS_SB_MAGIC               0x58465342u   /* "XFSB" */
#define XFS_AGF_MAGIC              0x58414746u   /* "XAGF" */
#define XFS_AGFL_MAGIC             0x5841464Cu   /* "XAFL" */
#define XFS_ABTB_MAGIC             0x41425442u   /* "ABTB": bnobt, v4 */
#define XFS_ABTB_CRC_MAGIC         0x41423342u   /* "AB3B": bnobt, v5 */

/* Superblock (struct xfs_dsb) field offsets. */
#define XFS_SB_BLOCKSIZE           4
#define XFS_SB_DBLOCKS             8
#define XFS_SB_RBLOCKS             16
#define XFS_SB_REXTENTS            24
#define XFS_SB_UUID                32
#define XFS_SB_LOGSTART            48
#define XFS_SB_AGBLOCKS            84
#define XFS_SB_AGCOUNT             88
#define XFS_SB_LOGBLOCKS           96
#define XFS_SB_VERSIONNUM          100
#define XFS_SB_SECTSIZE            102
#define XFS_SB_BLOCKLOG            120
#define XFS_SB_SECTLOG             121
#define XFS_SB_AGBLKLOG            124
#define XFS_SB_INPROGRESS          126
#define XFS_SB_FDBLOCKS            144
#define XFS_SB_FEATURES2           200
#define XFS_SB_BAD_FEATURES2       204
#define XFS_SB_FEAT_RO_COMPAT      212
#define XFS_SB_FEAT_INCOMPAT       216
#define XFS_SB_CRC                 224
#define XFS_SB_META_UUID           248
#define XFS_SB_V5_END              264

#define XFS_VERSION_NUMBITS        0x000Fu
#define XFS_VERSION_SHAREDBIT      0x0200u
#define XFS_VERSION_LOGV2BIT       0x0400u
#define XFS_VERSION_DIRV2BIT       0x2000u
#define XFS_VERSION_MOREBITSBIT    0x8000u

#define XFS_VERSION2_LAZYSBCOUNT   0x00000002u
#define XFS_VERSION2_ATTR2         0x00000008u
#define XFS_VERSION2_PROJID32      0x00000080u
#define XFS_VERSION2_FTYPE         0x00000200u
#define XFS_VERSION2_V4_OK         (XFS_VERSION2_LAZYSBCOUNT | XFS_VERSION2_ATTR2 | \
				    XFS_VERSION2_PROJID32 | XFS_VERSION2_FTYPE)

#define XFS_RO_COMPAT_FINOBT       0x1u
#define XFS_RO_COMPAT_RMAPBT       0x2u
#define XFS_RO_COMPAT_REFLINK      0x4u
#define XFS_RO_COMPAT_INOBTCNT     0x8u
#define XFS_RO_COMPAT_KNOWN        (XFS_RO_COMPAT_FINOBT | XFS_RO_COMPAT_RMAPBT | \
				    XFS_RO_COMPAT_REFLINK | XFS_RO_COMPAT_INOBTCNT)

#define XFS_INCOMPAT_FTYPE         0x001u
#define XFS_INCOMPAT_SPINODES      0x002u
#define XFS_INCOMPAT_META_UUID     0x004u
#define XFS_INCOMPAT_BIGTIME       0x008u
#define XFS_INCOMPAT_NEEDSREPAIR   0x010u
#define XFS_INCOMPAT_NREXT64       0x020u
#define XFS_INCOMPAT_EXCHRANGE     0x040u
#define XFS_INCOMPAT_PARENT        0x080u
#define XFS_INCOMPAT_METADIR       0x100u
#define XFS_INCOMPAT_ZONED         0x200u
/* Features that change nothing about the AGs' free-space accounting
 * (NEEDSREPAIR is judged separately: it means "unclean"). */
#define XFS_INCOMPAT_UNDERSTOOD    (XFS_INCOMPAT_FTYPE | XFS_INCOMPAT_SPINODES | \
				    XFS_INCOMPAT_META_UUID | XFS_INCOMPAT_BIGTIME | \
				    XFS_INCOMPAT_NEEDSREPAIR | XFS_INCOMPAT_NREXT64 | \
				    XFS_INCOMPAT_EXCHRANGE | XFS_INCOMPAT_PARENT)

/* AGF (struct xfs_agf) field offsets. */
#define XFS_AGF_VERSIONNUM         4
#define XFS_AGF_SEQNO              8
#define XFS_AGF_LENGTH             12
#define XFS_AGF_BNO_ROOT           16
#define XFS_AGF_BNO_LEVEL          28
#define XFS_AGF_FLFIRST            40
#define XFS_AGF_FLLAST             44
#define XFS_AGF_FLCOUNT            48
#define XFS_AGF_FREEBLKS           52
#define XFS_AGF_LONGEST            56
#define XFS_AGF_BTREEBLKS          60
#define XFS_AGF_UUID               64
#define XFS_AGF_CRC                216

/* AGFL (struct xfs_agfl, v5 only has a header). */
#define XFS_AGFL_SEQNO             4
#define XFS_AGFL_UUID              8
#define XFS_AGFL_CRC               32
#define XFS_AGFL_V5_HDR            36

/* Short-form (AG) btree block header. */
#define XFS_BB_LEVEL               4
#define XFS_BB_NUMRECS             6
#define XFS_BB_BLKNO               16
#define XFS_BB_UUID                32
#define XFS_BB_OWNER               48
#define XFS_BB_CRC                 52
#define XFS_BTREE_SHDR_V4          16
#define XFS_BTREE_SHDR_V5          56
#define XFS_ALLOC_REC_SIZE         8     /* startblock, blockcount */
#define XFS_ALLOC_KEY_SIZE         8
#define XFS_ALLOC_PTR_SIZE         4
/* The old fixed bound on any XFS btree's height; the free-space trees of
 * the largest AG in the smallest blocks need 7 levels. */
#define XFS_BTREE_MAXLEVELS        9

/* Log (xlog_rec_header, xlog_op_header), in 512-byte basic blocks. */
#define XFS_BBSIZE                 512u
#define XLOG_HEADER_MAGIC          0xFEEDBABEu
#define XFS_LH_CYCLE               4
#define XFS_LH_VERSION             8
#define XFS_LH_LEN                 12
#define XFS_LH_NUM_LOGOPS          40
#define XFS_LH_FS_UUID             304
#define XFS_LH_SIZE                320
#define XLOG_HEADER_CYCLE_SIZE     (32u * 1024)
#define XLOG_MAX_RECORD_BSIZE      (256u * 1024)
#define XFS_OH_FLAGS               9
#define XLOG_UNMOUNT_TRANS         0x20

/* What the superblock declares, checked. */
struct xfs_geom {
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
};

/* The geometry superblock sb declares (its sector, whose size was checked
 * to be a power of two from 512 to 32768) on a device of dev bytes, as
 * xfs_validate_sb_common() checks it.  0, or -EINVAL with the reason in err.
 * Features are judged by xfs_check_features(). */
int xfs_parse_geometry(const unsigned char *sb, uint64_t dev, struct xfs_geom *g,
		       struct im_err *err);

/* The features, as xfs_sb_good_version() and the v5 feature masks judge
 * them (g from xfs_parse_geometry: lazy_count, log_v2, meta_uuid set).
 * 0, or -ENOTSUP with the reason in err. */
int xfs_check_features(const unsigned char *sb, struct xfs_geom *g, struct im_err *err);

/* The cycle a log basic block was written in: its first word, or the cycle
 * field of a record header (xlog_get_cycle). */
uint32_t xfs_bb_cycle(const unsigned char *b);

/* Header blocks of the log record whose header is h (xlog_logrec_hblks):
 * v2 records of in-core logs above 32 KiB carry extended headers. */
uint32_t xfs_rec_hblks(bool log_v2, const unsigned char *h);

/* Basic blocks a log record spans, its header(s) included. */
uint64_t xfs_rec_bbs(bool log_v2, const unsigned char *h);

#endif
