/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ext2, ext3 and ext4: the used blocks are the set bits of the per-group
 * block bitmaps, plus the metadata of groups whose bitmap was never written
 * (BLOCK_UNINIT).
 *
 * Every superblock and descriptor field is hostile until it is checked.  The
 * layout rules (where backups and descriptor blocks live) follow the kernel's
 * ext4_bg_has_super(), descriptor_loc() and ext4_num_base_meta_clusters(),
 * which agree with e2fsprogs' ext2fs_super_and_bgd_loc2() and
 * ext2fs_descriptor_block_loc2() for the primary superblock.
 *
 * Not handled: bigalloc (the bitmaps count clusters), the compression
 * feature, and external journal devices (those carry no groups; probe()
 * declines them so they are copied raw).
 */
#include "imager/fsplugin.h"
#include "imager/bytes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EXT_SB_OFFSET         1024u
#define EXT_SB_SIZE           1024u
#define EXT_MAGIC             0xEF53u

/* Superblock field offsets. */
#define SB_INODES_COUNT       0x00
#define SB_BLOCKS_COUNT_LO    0x04
#define SB_FREE_BLOCKS_LO     0x0C
#define SB_FIRST_DATA_BLOCK   0x14
#define SB_LOG_BLOCK_SIZE     0x18
#define SB_BLOCKS_PER_GROUP   0x20
#define SB_INODES_PER_GROUP   0x28
#define SB_MAGIC              0x38
#define SB_STATE              0x3A
#define SB_REV_LEVEL          0x4C
#define SB_INODE_SIZE         0x58
#define SB_FEATURE_COMPAT     0x5C
#define SB_FEATURE_INCOMPAT   0x60
#define SB_FEATURE_RO_COMPAT  0x64
#define SB_UUID               0x68
#define SB_RESERVED_GDT       0xCE
#define SB_DESC_SIZE          0xFE
#define SB_FIRST_META_BG      0x104
#define SB_BLOCKS_COUNT_HI    0x150
#define SB_FREE_BLOCKS_HI     0x158
#define SB_CHECKSUM_TYPE      0x175
#define SB_JOURNAL_INUM       0xE0
#define SB_JOURNAL_DEV        0xE4
#define SB_BACKUP_BGS         0x24C
#define SB_CHECKSUM_SEED      0x270
#define SB_CHECKSUM           0x3FC

#define STATE_VALID           0x1
#define STATE_ERROR           0x2

#define COMPAT_HAS_JOURNAL    0x4u
#define COMPAT_SPARSE_SUPER2  0x200u

#define INCOMPAT_COMPRESSION  0x1u
#define INCOMPAT_FILETYPE     0x2u
#define INCOMPAT_RECOVER      0x4u
#define INCOMPAT_JOURNAL_DEV  0x8u
#define INCOMPAT_META_BG      0x10u
#define INCOMPAT_EXTENTS      0x40u
#define INCOMPAT_64BIT        0x80u
#define INCOMPAT_MMP          0x100u
#define INCOMPAT_FLEX_BG      0x200u
#define INCOMPAT_EA_INODE     0x400u
#define INCOMPAT_DIRDATA      0x1000u
#define INCOMPAT_CSUM_SEED    0x2000u
#define INCOMPAT_LARGEDIR     0x4000u
#define INCOMPAT_INLINE_DATA  0x8000u
#define INCOMPAT_ENCRYPT      0x10000u
#define INCOMPAT_CASEFOLD     0x20000u
/* Features that change nothing about where blocks are or how they are
 * accounted (RECOVER is judged separately: it means "unclean"). */
#define INCOMPAT_UNDERSTOOD   (INCOMPAT_FILETYPE | INCOMPAT_RECOVER |          \
			       INCOMPAT_META_BG | INCOMPAT_EXTENTS |            \
			       INCOMPAT_64BIT | INCOMPAT_MMP | INCOMPAT_FLEX_BG | \
			       INCOMPAT_EA_INODE | INCOMPAT_DIRDATA |           \
			       INCOMPAT_CSUM_SEED | INCOMPAT_LARGEDIR |         \
			       INCOMPAT_INLINE_DATA | INCOMPAT_ENCRYPT |        \
			       INCOMPAT_CASEFOLD)

#define RO_COMPAT_SPARSE_SUPER  0x1u
#define RO_COMPAT_GDT_CSUM      0x10u
#define RO_COMPAT_BIGALLOC      0x200u
#define RO_COMPAT_METADATA_CSUM 0x400u

/* Group descriptor field offsets. */
#define BG_BLOCK_BITMAP_LO    0x00
#define BG_INODE_BITMAP_LO    0x04
#define BG_INODE_TABLE_LO     0x08
#define BG_FREE_BLOCKS_LO     0x0C
#define BG_FLAGS              0x12
#define BG_BLOCK_BITMAP_CSUM_LO 0x18
#define BG_ITABLE_UNUSED_LO   0x1C
#define BG_CHECKSUM           0x1E
#define BG_BLOCK_BITMAP_HI    0x20
#define BG_INODE_BITMAP_HI    0x24
#define BG_INODE_TABLE_HI     0x28
#define BG_FREE_BLOCKS_HI     0x2C
#define BG_ITABLE_UNUSED_HI   0x32
#define BG_BLOCK_BITMAP_CSUM_HI 0x38
#define BG_BLOCK_BITMAP_CSUM_HI_END 0x3C

#define BG_INODE_UNINIT       0x1
#define BG_BLOCK_UNINIT       0x2

/* Inode field offsets, and the extent tree. */
#define I_MODE                0x00
#define I_FLAGS               0x20
#define I_BLOCK               0x28
#define I_BLOCK_LEN           60u
#define I_GENERATION          0x64
#define I_CHECKSUM_LO         0x7C
#define I_EXTRA_ISIZE         0x80
#define I_CHECKSUM_HI         0x82
#define I_GOOD_OLD_SIZE       128u
#define I_MODE_REG            0x8000u
#define I_EXTENTS_FL          0x80000u
#define EH_MAGIC              0xF30Au
#define EH_SIZE               12u
#define EXT_MAX_DEPTH         5u
#define EXT_INIT_MAX_LEN      32768u

/* The journal (jbd2) superblock, big-endian. */
#define JBD2_MAGIC            0xC03B3998u
#define JSB_BLOCKTYPE         0x04
#define JSB_BLOCKSIZE         0x0C
#define JSB_MAXLEN            0x10
#define JSB_FIRST             0x14
#define JSB_START             0x1C
#define JOURNAL_MAX_RUNS      4096u
#define JOURNAL_MAX_TREE      64u

#define DESC_SIZE_MIN         32u
#define DESC_SIZE_MIN_64BIT   64u
#define DESC_SIZE_MAX         1024u

struct ext_priv {
	uint32_t block_size;
	uint64_t blocks_count;
	uint64_t free_blocks;         /* the superblock's count */
	uint32_t first_data_block;
	uint32_t blocks_per_group;
	uint32_t groups;
	uint32_t desc_size;
	uint32_t descs_per_block;
	uint32_t desc_blocks;         /* blocks holding all descriptors */
	uint32_t first_meta_bg;
	uint32_t reserved_gdt;
	uint32_t itable_blocks;       /* inode table blocks per group */
	uint32_t inodes_per_group, inode_size;
	uint32_t backup_bgs[2];
	uint32_t csum_seed;
	unsigned char uuid[16];
	bool is_64bit, meta_bg, sparse_super, sparse_super2;
	bool gdt_csum, metadata_csum;
	uint32_t journal_inum;        /* an internal journal, judged blank or not */
	uint64_t journal_itable;      /* its group's inode table (0: not seen) */
	unsigned char *desc_buf;      /* one descriptor block */
	unsigned char *bitmap_buf;    /* one block bitmap */
};

/* CRC32c (Castagnoli, reflected), without the final inversion: the form
 * ext4 stores (the kernel's crc32c_le(), e2fsprogs' ext2fs_crc32c_le()). */
static uint32_t crc32c(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
	}
	return crc;
}

/* CRC16 (reflected 0x8005) as e2fsprogs' ext2fs_crc16(), for uninit_bg. */
static uint16_t crc16(uint16_t crc, const unsigned char *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (uint16_t)((crc >> 1) ^ (0xA001u & (0u - (crc & 1u))));
	}
	return crc;
}

static const unsigned char *map_superblock(struct fs_ctx *ctx, int *err)
{
	const unsigned char *sb;

	*err = 0;
	if (fs_device_size(ctx) < EXT_SB_OFFSET + EXT_SB_SIZE) {
		*err = -EINVAL;
		return NULL;
	}
	sb = fs_map(ctx, EXT_SB_OFFSET, EXT_SB_SIZE, err);
	if (sb && le16(sb + SB_MAGIC) != EXT_MAGIC) {
		*err = -EINVAL;
		return NULL;
	}
	return sb;
}

static bool superblock_csum_ok(const unsigned char *sb)
{
	if (!(le32(sb + SB_FEATURE_RO_COMPAT) & RO_COMPAT_METADATA_CSUM))
		return true;
	return sb[SB_CHECKSUM_TYPE] == 1 &&
	       crc32c(~0u, sb, SB_CHECKSUM) == le32(sb + SB_CHECKSUM);
}

/* The block size, and the features that change where blocks are. */
static int read_block_size(struct fs_ctx *ctx, const unsigned char *sb, struct ext_priv *p)
{
	uint32_t incompat = le32(sb + SB_FEATURE_INCOMPAT);
	uint32_t ro_compat = le32(sb + SB_FEATURE_RO_COMPAT);
	uint32_t log_bs = le32(sb + SB_LOG_BLOCK_SIZE);

	if (log_bs > 6)
		return fs_error(ctx, -EINVAL, "block size 2^(10+%u) out of range", log_bs);
	p->block_size = 1024u << log_bs;
	p->is_64bit = incompat & INCOMPAT_64BIT;
	p->meta_bg = incompat & INCOMPAT_META_BG;
	p->sparse_super = ro_compat & RO_COMPAT_SPARSE_SUPER;
	p->sparse_super2 = le32(sb + SB_FEATURE_COMPAT) & COMPAT_SPARSE_SUPER2;
	p->gdt_csum = ro_compat & RO_COMPAT_GDT_CSUM;
	p->metadata_csum = ro_compat & RO_COMPAT_METADATA_CSUM;
	return 0;
}

/* The block counts inside the device, and the first data block the block
 * size makes. */
static int read_block_counts(struct fs_ctx *ctx, const unsigned char *sb, struct ext_priv *p)
{
	uint64_t dev_blocks;

	p->blocks_count = le32(sb + SB_BLOCKS_COUNT_LO);
	p->free_blocks = le32(sb + SB_FREE_BLOCKS_LO);
	if (p->is_64bit) {
		p->blocks_count |= (uint64_t)le32(sb + SB_BLOCKS_COUNT_HI) << 32;
		p->free_blocks |= (uint64_t)le32(sb + SB_FREE_BLOCKS_HI) << 32;
	}
	dev_blocks = fs_device_size(ctx) / p->block_size;
	if (p->blocks_count == 0 || p->blocks_count > dev_blocks)
		return fs_error(ctx, -EINVAL,
				"%llu blocks of %u bytes do not fit in the %llu-byte device",
				(unsigned long long)p->blocks_count, p->block_size,
				(unsigned long long)fs_device_size(ctx));
	if (p->free_blocks > p->blocks_count)
		return fs_error(ctx, -EINVAL, "%llu free blocks out of %llu",
				(unsigned long long)p->free_blocks,
				(unsigned long long)p->blocks_count);

	p->first_data_block = le32(sb + SB_FIRST_DATA_BLOCK);
	if (p->first_data_block != (p->block_size == 1024 ? 1u : 0u) ||
	    p->first_data_block >= p->blocks_count)
		return fs_error(ctx, -EINVAL, "first data block %u is wrong for %u-byte blocks",
				p->first_data_block, p->block_size);
	return 0;
}

/* The groups: blocks and inodes per group, the inode size and so the inode
 * table's length, the number of groups and the inode count they make. */
static int read_groups(struct fs_ctx *ctx, const unsigned char *sb, struct ext_priv *p)
{
	uint32_t inodes_per_group, inode_size, rev;
	uint64_t groups;

	p->blocks_per_group = le32(sb + SB_BLOCKS_PER_GROUP);
	if (p->blocks_per_group < 8 || p->blocks_per_group > 8 * p->block_size)
		return fs_error(ctx, -EINVAL, "%u blocks per group out of range",
				p->blocks_per_group);
	inodes_per_group = le32(sb + SB_INODES_PER_GROUP);
	if (inodes_per_group == 0 || inodes_per_group > 8 * p->block_size)
		return fs_error(ctx, -EINVAL, "%u inodes per group out of range",
				inodes_per_group);

	rev = le32(sb + SB_REV_LEVEL);
	inode_size = rev == 0 ? 128 : le16(sb + SB_INODE_SIZE);
	if (inode_size < 128 || inode_size > p->block_size ||
	    (inode_size & (inode_size - 1)))
		return fs_error(ctx, -EINVAL, "inode size %u out of range", inode_size);
	p->inodes_per_group = inodes_per_group;
	p->inode_size = inode_size;
	p->itable_blocks = (uint32_t)(((uint64_t)inodes_per_group * inode_size +
				       p->block_size - 1) / p->block_size);

	groups = (p->blocks_count - p->first_data_block + p->blocks_per_group - 1) /
		 p->blocks_per_group;
	if (groups > UINT32_MAX)
		return fs_error(ctx, -EINVAL, "%llu block groups",
				(unsigned long long)groups);
	p->groups = (uint32_t)groups;
	if ((uint64_t)inodes_per_group * groups != le32(sb + SB_INODES_COUNT))
		return fs_error(ctx, -EINVAL, "%u inodes do not make %u groups of %u",
				le32(sb + SB_INODES_COUNT), p->groups, inodes_per_group);
	return 0;
}

/* The group descriptors: their size, the blocks they fill, the blocks
 * reserved for them to grow, and where meta_bg takes over. */
static int read_descriptors(struct fs_ctx *ctx, const unsigned char *sb, struct ext_priv *p)
{
	if (p->is_64bit) {
		p->desc_size = le16(sb + SB_DESC_SIZE);
		if (p->desc_size < DESC_SIZE_MIN_64BIT || p->desc_size > DESC_SIZE_MAX ||
		    (p->desc_size & (p->desc_size - 1)))
			return fs_error(ctx, -EINVAL, "group descriptor size %u out of range",
					p->desc_size);
	} else {
		p->desc_size = DESC_SIZE_MIN;
	}
	p->descs_per_block = p->block_size / p->desc_size;
	p->desc_blocks = (uint32_t)(((uint64_t)p->groups + p->descs_per_block - 1) /
				    p->descs_per_block);

	p->reserved_gdt = le16(sb + SB_RESERVED_GDT);
	if (p->reserved_gdt > p->block_size / 4)
		return fs_error(ctx, -EINVAL, "%u reserved descriptor blocks out of range",
				p->reserved_gdt);
	p->first_meta_bg = p->meta_bg ? le32(sb + SB_FIRST_META_BG) : p->desc_blocks;
	if (p->first_meta_bg > p->desc_blocks)
		return fs_error(ctx, -EINVAL, "first meta group %u beyond the %u descriptor blocks",
				p->first_meta_bg, p->desc_blocks);
	/* The descriptor blocks kept after the superblock (all of them without
	 * meta_bg), and the blocks reserved for them to grow, must fit. */
	if ((uint64_t)p->first_data_block + 1 + p->first_meta_bg + p->reserved_gdt >
	    p->blocks_count)
		return fs_error(ctx, -EINVAL, "%u group descriptor blocks do not fit in %llu blocks",
				p->first_meta_bg, (unsigned long long)p->blocks_count);
	return 0;
}

/* What the checksums and sparse_super2 need: the backup groups, the UUID
 * and the checksum seed. */
static void read_checksum_fields(const unsigned char *sb, struct ext_priv *p)
{
	p->backup_bgs[0] = le32(sb + SB_BACKUP_BGS);
	p->backup_bgs[1] = le32(sb + SB_BACKUP_BGS + 4);
	memcpy(p->uuid, sb + SB_UUID, sizeof(p->uuid));
	if (le32(sb + SB_FEATURE_INCOMPAT) & INCOMPAT_CSUM_SEED)
		p->csum_seed = le32(sb + SB_CHECKSUM_SEED);
	else
		p->csum_seed = crc32c(~0u, sb + SB_UUID, 16);
}

/* Parse and check the geometry of the superblock into p.  Returns 0, or
 * -EINVAL with the reason recorded. */
static int parse_geometry(struct fs_ctx *ctx, const unsigned char *sb,
			  struct ext_priv *p)
{
	int r;

	r = read_block_size(ctx, sb, p);
	if (r == 0)
		r = read_block_counts(ctx, sb, p);
	if (r == 0)
		r = read_groups(ctx, sb, p);
	if (r == 0)
		r = read_descriptors(ctx, sb, p);
	if (r < 0)
		return r;
	read_checksum_fields(sb, p);
	return 0;
}

static int ext_probe(struct fs_ctx *ctx)
{
	struct ext_priv p;
	const unsigned char *sb;
	int err;

	sb = map_superblock(ctx, &err);
	if (!sb)
		return err == -EINVAL ? 1 : err;
	/* An external journal has an ext superblock but no block groups:
	 * leave it to the raw fallback. */
	if (le32(sb + SB_FEATURE_INCOMPAT) & INCOMPAT_JOURNAL_DEV)
		return 1;
	if (!superblock_csum_ok(sb))
		return 1;
	memset(&p, 0, sizeof(p));
	return parse_geometry(ctx, sb, &p) == 0 ? 0 : 1;
}

static int ext_open(struct fs_ctx *ctx, void *priv)
{
	struct ext_priv *p = priv;
	const unsigned char *sb;
	uint32_t incompat, ro_compat, rev;
	uint16_t state;
	int r;

	sb = map_superblock(ctx, &r);
	if (!sb)
		return r == -EINVAL ? fs_error(ctx, r, "no ext superblock") : r;
	if (!superblock_csum_ok(sb)) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN, "superblock checksum mismatch");
		fs_warn(ctx, "superblock checksum mismatch, going on as forced");
	}
	incompat = le32(sb + SB_FEATURE_INCOMPAT);
	ro_compat = le32(sb + SB_FEATURE_RO_COMPAT);
	rev = le32(sb + SB_REV_LEVEL);
	if (rev > 1)
		return fs_error(ctx, -ENOTSUP, "revision level %u is unknown", rev);
	if (incompat & INCOMPAT_JOURNAL_DEV)
		return fs_error(ctx, -ENOTSUP, "an external journal device, not a filesystem");
	if (incompat & INCOMPAT_COMPRESSION)
		return fs_error(ctx, -ENOTSUP, "the compression feature is not supported");
	if (incompat & ~INCOMPAT_UNDERSTOOD)
		return fs_error(ctx, -ENOTSUP, "unknown incompatible features 0x%x",
				incompat & ~INCOMPAT_UNDERSTOOD);
	if (ro_compat & RO_COMPAT_BIGALLOC)
		return fs_error(ctx, -ENOTSUP, "the bigalloc feature is not supported");

	r = parse_geometry(ctx, sb, p);
	if (r < 0)
		return r;

	state = le16(sb + SB_STATE);
	if (!fs_forced(ctx)) {
		if (!(state & STATE_VALID))
			return fs_error(ctx, -EUCLEAN, "not cleanly unmounted");
		if (state & STATE_ERROR)
			return fs_error(ctx, -EUCLEAN, "has errors recorded");
		if (incompat & INCOMPAT_RECOVER)
			return fs_error(ctx, -EUCLEAN, "the journal needs recovery");
	}

	/* An internal journal of a clean filesystem (see blank_journal()). */
	if (!fs_forced(ctx) && (le32(sb + SB_FEATURE_COMPAT) & COMPAT_HAS_JOURNAL) &&
	    !le32(sb + SB_JOURNAL_DEV) && p->metadata_csum)
		p->journal_inum = le32(sb + SB_JOURNAL_INUM);

	p->desc_buf = malloc(p->block_size);
	p->bitmap_buf = malloc(p->block_size);
	if (!p->desc_buf || !p->bitmap_buf)
		return fs_error(ctx, -ENOMEM, "out of memory");
	return fs_set_geometry(ctx, p->block_size, p->blocks_count);
}

static void ext_close(struct fs_ctx *ctx, void *priv)
{
	struct ext_priv *p = priv;

	(void)ctx;
	free(p->desc_buf);
	free(p->bitmap_buf);
	p->desc_buf = p->bitmap_buf = NULL;
}

/* Is a a power of b (b^k, k >= 1)? */
static bool is_power_of(uint32_t a, uint32_t b)
{
	while (a >= b) {
		if (a == b)
			return true;
		if (a % b)
			return false;
		a /= b;
	}
	return false;
}

/* Does group g hold a superblock (primary or backup)? (ext4_bg_has_super) */
static bool group_has_super(const struct ext_priv *p, uint32_t g)
{
	if (g == 0)
		return true;
	if (p->sparse_super2)
		return g == p->backup_bgs[0] || g == p->backup_bgs[1];
	if (g <= 1 || !p->sparse_super)
		return true;
	if (!(g & 1))
		return false;
	return is_power_of(g, 3) || is_power_of(g, 5) || is_power_of(g, 7);
}

static uint64_t group_first_block(const struct ext_priv *p, uint32_t g)
{
	return p->first_data_block + (uint64_t)g * p->blocks_per_group;
}

static uint64_t group_length(const struct ext_priv *p, uint32_t g)
{
	uint64_t first = group_first_block(p, g);
	uint64_t left = p->blocks_count - first;

	return left < p->blocks_per_group ? left : p->blocks_per_group;
}

/* Block holding descriptor block d (the kernel's descriptor_loc()). */
static uint64_t desc_block_loc(const struct ext_priv *p, uint32_t d)
{
	uint32_t g;

	if (!p->meta_bg || d < p->first_meta_bg)
		return (uint64_t)p->first_data_block + 1 + d;
	g = d * p->descs_per_block;   /* < groups, so no overflow */
	return group_first_block(p, g) + (group_has_super(p, g) ? 1 : 0);
}

/* Blocks at the start of group g taken by the superblock backup, group
 * descriptors and reserved descriptor blocks (ext4_num_base_meta_clusters). */
static uint64_t group_base_meta(const struct ext_priv *p, uint32_t g)
{
	bool has_super = group_has_super(p, g);
	uint64_t n = has_super ? 1 : 0;

	if (!p->meta_bg || g / p->descs_per_block < p->first_meta_bg) {
		if (has_super)
			n += p->first_meta_bg + p->reserved_gdt;
	} else {
		uint32_t i = g % p->descs_per_block;
		if (i == 0 || i == 1 || i == p->descs_per_block - 1)
			n++;
	}
	return n;
}

/* The descriptor's own checksum (ext2fs_group_desc_csum): crc32c with
 * metadata_csum, crc16 with uninit_bg; no checksum otherwise. */
static bool desc_csum_ok(const struct ext_priv *p, uint32_t g, const unsigned char *d)
{
	static const unsigned char zero[2];
	const unsigned char gle[4] = { (unsigned char)g, (unsigned char)(g >> 8),
				       (unsigned char)(g >> 16), (unsigned char)(g >> 24) };
	size_t rest = p->desc_size - BG_CHECKSUM - 2;

	if (p->metadata_csum) {
		uint32_t c = crc32c(p->csum_seed, gle, sizeof(gle));
		c = crc32c(c, d, BG_CHECKSUM);
		c = crc32c(c, zero, sizeof(zero));
		c = crc32c(c, d + BG_CHECKSUM + 2, rest);
		return (c & 0xFFFF) == le16(d + BG_CHECKSUM);
	}
	if (p->gdt_csum) {
		uint16_t c = crc16(0xFFFF, p->uuid, sizeof(p->uuid));
		c = crc16(c, gle, sizeof(gle));
		c = crc16(c, d, BG_CHECKSUM);
		c = crc16(c, d + BG_CHECKSUM + 2, rest);
		return c == le16(d + BG_CHECKSUM);
	}
	return true;
}

/* Does [first, first+count) lie inside the filesystem, after the block
 * holding the primary superblock? */
static bool in_fs(const struct ext_priv *p, uint64_t first, uint64_t count)
{
	return first > p->first_data_block && count <= p->blocks_count &&
	       first <= p->blocks_count - count;
}

/* First bit at or after i, below len, whose value is want (or len). */
static uint64_t next_bit(const unsigned char *map, uint64_t i, uint64_t len, bool want)
{
	const unsigned char skip = want ? 0x00 : 0xFF;

	while (i < len) {
		if (!(i & 7) && len - i >= 8 && map[i >> 3] == skip) {
			i += 8;
			continue;
		}
		if (((map[i >> 3] >> (i & 7)) & 1) == want)
			return i;
		i++;
	}
	return len;
}

/* Mark the set bits of a group's block bitmap, in runs; returns the number
 * of set bits, or a negative errno. */
static int64_t mark_bitmap(struct fs_ctx *ctx, const unsigned char *map,
			   uint64_t group_first, uint64_t len)
{
	uint64_t used = 0, i = 0;

	for (;;) {
		uint64_t start = next_bit(map, i, len, true);
		int r;

		if (start >= len)
			break;
		i = next_bit(map, start, len, false);
		r = fs_mark_used(ctx, group_first + start, i - start);
		if (r < 0)
			return r;
		used += i - start;
	}
	return (int64_t)used;
}

/* Report an inconsistency: an error, or when forced a warning. */
#define INCONSISTENT(ctx, ...)                                    \
	do {                                                      \
		if (!fs_forced(ctx))                              \
			return fs_error((ctx), -EUCLEAN, __VA_ARGS__); \
		fs_warn((ctx), __VA_ARGS__);                      \
	} while (0)

/* The inode table past the group's last used inode: with descriptor
 * checksums, bg_itable_unused (or INODE_UNINIT: all of it) tells the kernel
 * and e2fsck that those inodes were never used, and neither reads them (the
 * kernel's lazy init zeroes them when ITABLE_ZEROED is not set).  Blank,
 * unless the descriptor fails its checksum, the count is out of range or
 * the filesystem is copied as it is (--force): e2fsck would read the whole
 * table then. */
static int blank_itable(struct fs_ctx *ctx, const struct ext_priv *p, const unsigned char *d,
			uint64_t it, bool desc_ok)
{
	uint32_t unused = le16(d + BG_ITABLE_UNUSED_LO), used_inodes;
	uint64_t need;

	if (fs_forced(ctx) || !desc_ok || !(p->gdt_csum || p->metadata_csum))
		return 0;
	if (p->is_64bit && p->desc_size >= DESC_SIZE_MIN_64BIT)
		unused |= (uint32_t)le16(d + BG_ITABLE_UNUSED_HI) << 16;
	if (le16(d + BG_FLAGS) & BG_INODE_UNINIT)
		unused = p->inodes_per_group;
	if (unused > p->inodes_per_group)
		return 0;
	used_inodes = p->inodes_per_group - unused;
	need = ((uint64_t)used_inodes * p->inode_size + p->block_size - 1) / p->block_size;
	if (need >= p->itable_blocks)
		return 0;
	return fs_mark_blank(ctx, it + need, p->itable_blocks - need);
}

/* Where descriptor d puts its group's block bitmap, inode bitmap and inode
 * table (unchecked). */
static void desc_locs(const struct ext_priv *p, const unsigned char *d, uint64_t *bb,
		      uint64_t *ib, uint64_t *it)
{
	*bb = le32(d + BG_BLOCK_BITMAP_LO);
	*ib = le32(d + BG_INODE_BITMAP_LO);
	*it = le32(d + BG_INODE_TABLE_LO);
	if (p->is_64bit) {
		*bb |= (uint64_t)le32(d + BG_BLOCK_BITMAP_HI) << 32;
		*ib |= (uint64_t)le32(d + BG_INODE_BITMAP_HI) << 32;
		*it |= (uint64_t)le32(d + BG_INODE_TABLE_HI) << 32;
	}
}

static int group_used_blocks(struct fs_ctx *ctx, struct ext_priv *p, uint32_t g,
			     const unsigned char *d, uint64_t *free_total)
{
	uint64_t first = group_first_block(p, g), len = group_length(p, g);
	uint64_t bb, ib, it;
	uint64_t desc_free = le16(d + BG_FREE_BLOCKS_LO), bitmap_free;
	uint16_t flags = le16(d + BG_FLAGS);
	bool desc_ok = desc_csum_ok(p, g, d), uninit;
	int64_t used;
	int r;

	desc_locs(p, d, &bb, &ib, &it);
	if (p->is_64bit)
		desc_free |= (uint64_t)le16(d + BG_FREE_BLOCKS_HI) << 16;
	if (!desc_ok)
		INCONSISTENT(ctx, "group descriptor %u fails its checksum", g);
	if (!in_fs(p, bb, 1) || !in_fs(p, ib, 1) || !in_fs(p, it, p->itable_blocks)) {
		INCONSISTENT(ctx, "group %u: block bitmap %llu, inode bitmap %llu or inode table %llu lies outside the filesystem",
			     g, (unsigned long long)bb, (unsigned long long)ib,
			     (unsigned long long)it);
		/* Forced: keep the whole group, whatever it holds. */
		*free_total += desc_free;
		return fs_mark_used(ctx, first, len);
	}
	/* The group's bitmaps and inode table are in use wherever they lie
	 * (flex_bg packs them into other groups), even if a bitmap says not. */
	if ((r = fs_mark_used(ctx, bb, 1)) < 0 || (r = fs_mark_used(ctx, ib, 1)) < 0 ||
	    (r = fs_mark_used(ctx, it, p->itable_blocks)) < 0)
		return r;

	if ((r = blank_itable(ctx, p, d, it, desc_ok)) < 0)
		return r;
	if (p->journal_inum && desc_ok && p->journal_inum <= (uint64_t)p->groups * p->inodes_per_group &&
	    g == (p->journal_inum - 1) / p->inodes_per_group)
		p->journal_itable = it;

	/* BLOCK_UNINIT counts only when descriptors carry checksums; then the
	 * bitmap on disk was never written and the group holds nothing but
	 * its superblock backup and descriptor blocks. */
	uninit = (flags & BG_BLOCK_UNINIT) && (p->gdt_csum || p->metadata_csum);
	if (uninit || !desc_ok) {
		uint64_t meta = group_base_meta(p, g);
		if ((r = fs_mark_used(ctx, first, meta < len ? meta : len)) < 0)
			return r;
	}
	if (uninit && desc_ok) {
		*free_total += desc_free;
		return 0;
	}

	/* Only the group's bits: a 64 KiB block may hold far more. */
	r = fs_read(ctx, bb * p->block_size, p->bitmap_buf, (p->blocks_per_group + 7) / 8);
	if (r < 0)
		return fs_error(ctx, r, "reading the block bitmap of group %u", g);
	if (p->metadata_csum && !uninit) {
		uint32_t c = crc32c(p->csum_seed, p->bitmap_buf, p->blocks_per_group / 8);
		uint32_t want = le16(d + BG_BLOCK_BITMAP_CSUM_LO);
		if (p->desc_size >= BG_BLOCK_BITMAP_CSUM_HI_END)
			want |= (uint32_t)le16(d + BG_BLOCK_BITMAP_CSUM_HI) << 16;
		else
			c &= 0xFFFF;
		if (c != want)
			INCONSISTENT(ctx, "block bitmap of group %u fails its checksum", g);
	}
	used = mark_bitmap(ctx, p->bitmap_buf, first, len);
	if (used < 0)
		return (int)used;
	bitmap_free = len - (uint64_t)used;
	if (bitmap_free != desc_free)
		INCONSISTENT(ctx, "block bitmap of group %u counts %llu free blocks, its descriptor says %llu",
			     g, (unsigned long long)bitmap_free, (unsigned long long)desc_free);
	*free_total += bitmap_free;
	return 0;
}

/* The journal's blocks, as extent runs of the journal inode. */
struct jmap {
	uint64_t lblk[JOURNAL_MAX_RUNS], pblk[JOURNAL_MAX_RUNS], len[JOURNAL_MAX_RUNS];
	unsigned n;
	uint64_t tree[JOURNAL_MAX_TREE];   /* the extent tree's own blocks */
	unsigned ntree;
	uint32_t seed;                /* the inode's checksum seed */
	/* The spans to be marked blank, sorted by start; reach: the largest
	 * end among this span and those before it. */
	struct jspan { uint64_t start, end, reach; } span[JOURNAL_MAX_RUNS];
	unsigned nspan;
};

/* The inode's checksum (metadata_csum): crc32c over the inode, its
 * checksum fields as zeros, seeded with its number and generation (the
 * kernel's ext4_inode_csum()). */
static bool inode_csum_ok(const struct ext_priv *p, uint32_t ino, const unsigned char *raw,
			  uint32_t *seed)
{
	static const unsigned char zero[2];
	unsigned char n[4];
	uint32_t c, want = le16(raw + I_CHECKSUM_LO), extra = 0;
	bool hi = false;

	put_le32(n, ino);
	c = crc32c(p->csum_seed, n, 4);
	c = crc32c(c, raw + I_GENERATION, 4);
	*seed = c;
	c = crc32c(c, raw, I_CHECKSUM_LO);
	c = crc32c(c, zero, 2);
	c = crc32c(c, raw + I_CHECKSUM_LO + 2, I_GOOD_OLD_SIZE - I_CHECKSUM_LO - 2);
	if (p->inode_size > I_GOOD_OLD_SIZE) {
		uint32_t off = I_CHECKSUM_HI;
		extra = le16(raw + I_EXTRA_ISIZE);
		if (extra > p->inode_size - I_GOOD_OLD_SIZE)
			return false;
		hi = I_CHECKSUM_HI + 2 <= I_GOOD_OLD_SIZE + extra;
		c = crc32c(c, raw + I_GOOD_OLD_SIZE, I_CHECKSUM_HI - I_GOOD_OLD_SIZE);
		if (hi) {
			c = crc32c(c, zero, 2);
			off += 2;
			want |= (uint32_t)le16(raw + I_CHECKSUM_HI) << 16;
		}
		c = crc32c(c, raw + off, p->inode_size - off);
	}
	return hi ? c == want : (c & 0xFFFF) == want;
}

/* One node of the journal inode's extent tree (the inode's i_block, or a
 * tree block of room bytes), expected at depth want (-1 at the root).
 * false: anything out of place. */
static bool journal_node(struct fs_ctx *ctx, const struct ext_priv *p, const unsigned char *node,
			 size_t room, int want, unsigned level, struct jmap *m)
{
	uint16_t entries = le16(node + 2), max = le16(node + 4), depth = le16(node + 6);
	const unsigned char *e = node + EH_SIZE;

	if (le16(node) != EH_MAGIC || entries > max || EH_SIZE + (size_t)max * 12 > room ||
	    depth >= EXT_MAX_DEPTH || (want >= 0 && depth != want) || level >= EXT_MAX_DEPTH)
		return false;
	for (uint16_t i = 0; i < entries; i++, e += 12) {
		if (depth == 0) {
			uint64_t len = le16(e + 4), pb = le32(e + 8) | (uint64_t)le16(e + 6) << 32;
			if (len > EXT_INIT_MAX_LEN)
				len -= EXT_INIT_MAX_LEN;   /* (unwritten) */
			if (!len || !in_fs(p, pb, len) || m->n == JOURNAL_MAX_RUNS)
				return false;
			m->lblk[m->n] = le32(e);
			m->pblk[m->n] = pb;
			m->len[m->n++] = len;
			continue;
		}
		uint64_t child = le32(e + 4) | (uint64_t)le16(e + 8) << 32;
		unsigned char *b;
		bool ok;
		if (!in_fs(p, child, 1) || !fs_is_used(ctx, child) || m->ntree == JOURNAL_MAX_TREE ||
		    !(b = malloc(p->block_size)))
			return false;
		m->tree[m->ntree++] = child;
		/* A tree block ends with the crc32c of what comes before its
		 * tail, seeded as the inode's. */
		size_t tail = 0;
		ok = fs_read(ctx, child * p->block_size, b, p->block_size) == 0;
		if (ok)
			tail = EH_SIZE + (size_t)le16(b + 4) * 12;
		ok = ok && tail + 4 <= p->block_size && crc32c(m->seed, b, tail) == le32(b + tail) &&
		     journal_node(ctx, p, b, tail, depth - 1, level + 1, m);
		free(b);
		if (!ok)
			return false;
	}
	return true;
}

static int jspan_cmp(const void *a, const void *b)
{
	const struct jspan *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Does a span to be blanked meet [first, first+count)? */
static bool jspans_meet(const struct jmap *m, uint64_t first, uint64_t count)
{
	uint64_t end = first + count < first ? UINT64_MAX : first + count;
	unsigned lo = 0, hi = m->nspan;

	while (lo < hi) {   /* (the spans starting before the range's end) */
		unsigned mid = lo + (hi - lo) / 2;
		if (m->span[mid].start < end)
			lo = mid + 1;
		else
			hi = mid;
	}
	return count && lo && m->span[lo - 1].reach > first;
}

/* Do the spans to be blanked keep clear of every other structure that can
 * be found without reading inodes: the journal's superblock and extent
 * tree, and each group's superblock backup, descriptor blocks, bitmaps and
 * inode table?  A journal inode that claims any of them (hostile, or
 * cross-linked) is not trusted: its blocks are copied. */
static bool journal_apart(struct fs_ctx *ctx, struct ext_priv *p, struct jmap *m, uint64_t jsb_blk)
{
	uint64_t reach = 0;

	qsort(m->span, m->nspan, sizeof(m->span[0]), jspan_cmp);
	for (unsigned i = 0; i < m->nspan; i++) {
		if (m->span[i].end > reach)
			reach = m->span[i].end;
		m->span[i].reach = reach;
	}
	if (jspans_meet(m, jsb_blk, 1))
		return false;
	for (unsigned i = 0; i < m->ntree; i++)
		if (jspans_meet(m, m->tree[i], 1))
			return false;
	for (uint32_t db = 0; db < p->desc_blocks; db++) {
		if (fs_read(ctx, desc_block_loc(p, db) * p->block_size, p->desc_buf, p->block_size) < 0)
			return false;
		for (uint32_t i = 0; i < p->descs_per_block; i++) {
			uint64_t g = (uint64_t)db * p->descs_per_block + i, bb, ib, it;
			if (g >= p->groups)
				break;
			desc_locs(p, p->desc_buf + (size_t)i * p->desc_size, &bb, &ib, &it);
			if (jspans_meet(m, group_first_block(p, (uint32_t)g), group_base_meta(p, (uint32_t)g)) ||
			    jspans_meet(m, bb, 1) || jspans_meet(m, ib, 1) ||
			    jspans_meet(m, it, p->itable_blocks))
				return false;
		}
	}
	return true;
}

/* The internal journal of a cleanly unmounted filesystem: its superblock
 * says it is empty (s_start 0), so neither the kernel nor e2fsck reads the
 * rest of it (the kernel's journal_reset() starts writing at s_first);
 * those blocks are blank.  Judged only with metadata_csum (the journal
 * inode's checksum and its extent blocks' checksums must hold), an
 * extent-mapped journal, a jbd2 superblock that agrees with the
 * filesystem, not forced (ext_open() leaves journal_inum 0 then), and
 * blocks that meet none of the filesystem's fixed structures
 * (journal_apart()).  Anything else, and the journal is copied as it is. */
static int blank_journal(struct fs_ctx *ctx, struct ext_priv *p)
{
	uint32_t ino = p->journal_inum, idx = (ino - 1) % p->inodes_per_group;
	uint64_t at = p->journal_itable * p->block_size + (uint64_t)idx * p->inode_size;
	unsigned char *raw = p->desc_buf, *jsb = p->bitmap_buf;
	uint64_t jsb_blk = 0, maxlen;
	struct jmap *m;
	int r = 0;
	bool ok;

	if (fs_read(ctx, at, raw, p->inode_size) < 0 || !(m = calloc(1, sizeof(*m))))
		return 0;
	ok = inode_csum_ok(p, ino, raw, &m->seed) && (le16(raw + I_MODE) & 0xF000) == I_MODE_REG &&
	     (le32(raw + I_FLAGS) & I_EXTENTS_FL) &&
	     journal_node(ctx, p, raw + I_BLOCK, I_BLOCK_LEN, -1, 0, m);
	for (unsigned i = 0; ok && i < m->n; i++)
		if (m->lblk[i] == 0)
			jsb_blk = m->pblk[i];
	ok = ok && jsb_blk && fs_read(ctx, jsb_blk * p->block_size, jsb, 1024) == 0 &&
	     be32(jsb) == JBD2_MAGIC && (be32(jsb + JSB_BLOCKTYPE) == 3 || be32(jsb + JSB_BLOCKTYPE) == 4) &&
	     be32(jsb + JSB_BLOCKSIZE) == p->block_size && be32(jsb + JSB_FIRST) >= 1 &&
	     be32(jsb + JSB_START) == 0;
	maxlen = ok ? be32(jsb + JSB_MAXLEN) : 0;
	/* Every block of the journal but its superblock. */
	for (unsigned i = 0; ok && i < m->n; i++) {
		uint64_t l = m->lblk[i], pb = m->pblk[i], len = m->len[i];
		if (l == 0) {
			pb++;
			l++;
			len--;
		}
		if (l >= maxlen)
			continue;
		if (len > maxlen - l)
			len = maxlen - l;
		if (len)
			m->span[m->nspan++] = (struct jspan){ .start = pb, .end = pb + len };
	}
	ok = ok && journal_apart(ctx, p, m, jsb_blk);
	for (unsigned i = 0; ok && r == 0 && i < m->nspan; i++)
		r = fs_mark_blank(ctx, m->span[i].start, m->span[i].end - m->span[i].start);
	free(m);
	return r;
}

static int ext_used_blocks(struct fs_ctx *ctx, void *priv)
{
	struct ext_priv *p = priv;
	uint64_t free_total = 0;
	int r;

	/* The boot block of 1 KiB filesystems, before the superblock. */
	if (p->first_data_block && (r = fs_mark_used(ctx, 0, p->first_data_block)) < 0)
		return r;

	for (uint32_t db = 0; db < p->desc_blocks; db++) {
		uint64_t loc = desc_block_loc(p, db);

		if (!in_fs(p, loc, 1))
			return fs_error(ctx, -EINVAL, "group descriptor block %u at %llu lies outside the filesystem",
					db, (unsigned long long)loc);
		r = fs_read(ctx, loc * p->block_size, p->desc_buf, p->block_size);
		if (r < 0)
			return fs_error(ctx, r, "reading group descriptor block %u", db);
		if ((r = fs_mark_used(ctx, loc, 1)) < 0)
			return r;
		for (uint32_t i = 0; i < p->descs_per_block; i++) {
			uint64_t g = (uint64_t)db * p->descs_per_block + i;
			if (g >= p->groups)
				break;
			r = group_used_blocks(ctx, p, (uint32_t)g,
					      p->desc_buf + (size_t)i * p->desc_size,
					      &free_total);
			if (r < 0)
				return r;
		}
	}
	if (free_total != p->free_blocks)
		INCONSISTENT(ctx, "the block groups count %llu free blocks, the superblock says %llu",
			     (unsigned long long)free_total,
			     (unsigned long long)p->free_blocks);
	return p->journal_itable ? blank_journal(ctx, p) : 0;
}

static const struct fs_magic ext_magics[] = {
	{ .magic = "\x53\xEF", .len = 2, .offset = EXT_SB_OFFSET + SB_MAGIC },
	{ .magic = NULL },
};

static const char *const ext_blkid_types[] = { "ext2", "ext3", "ext4", NULL };

const struct fs_plugin fs_plugin_ext = {
	.name = "ext",
	.blkid_types = ext_blkid_types,
	.min_size = EXT_SB_OFFSET + EXT_SB_SIZE,
	.magics = ext_magics,
	.priv_size = sizeof(struct ext_priv),
	.probe = ext_probe,
	.open = ext_open,
	.used_blocks = ext_used_blocks,
	.close = ext_close,
};
