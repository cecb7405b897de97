/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * btrfs's on-disk format, as fsplugins/btrfs.c reads it (the kernel's
 * include/uapi/linux/btrfs_tree.h and btrfs-progs' kernel-shared/): the
 * superblock, tree block headers, keys and items, root items, chunk items
 * and their stripes.  Little-endian.  The decoders (imager/engine/fs/btrfsfmt.c)
 * work on bytes already read and do no I/O; every field is hostile.
 */
#ifndef IMAGER_BTRFSFMT_H
#define IMAGER_BTRFSFMT_H

#include <stdbool.h>
#include <stdint.h>

#include "imager/error.h"

#define BTRFS_SB_OFFSET                 65536u
#define BTRFS_SB_SIZE                   4096u
#define BTRFS_SB_MIRROR_BASE            16384u   /* copy i (1, 2) at 16 KiB << (12 * i) */
#define BTRFS_SB_MIRRORS                3
#define BTRFS_RESERVED_START            (1u << 20)
#define BTRFS_MAGIC                     "_BHRfS_M"
#define BTRFS_CSUM_SIZE                 32u
#define BTRFS_MAX_LEVEL                 8u
#define BTRFS_STRIPE_LEN                65536u
#define BTRFS_SYS_CHUNK_ARRAY_MAX       2048u

/* Superblock field offsets (struct btrfs_super_block). */
#define BTRFS_SB_CSUM                   0
#define BTRFS_SB_FSID                   32
#define BTRFS_SB_BYTENR                 48
#define BTRFS_SB_FLAGS                  56
#define BTRFS_SB_MAGIC                  64
#define BTRFS_SB_GENERATION             72
#define BTRFS_SB_ROOT                   80
#define BTRFS_SB_CHUNK_ROOT             88
#define BTRFS_SB_LOG_ROOT               96
#define BTRFS_SB_TOTAL_BYTES            112
#define BTRFS_SB_BYTES_USED             120
#define BTRFS_SB_NUM_DEVICES            136
#define BTRFS_SB_SECTORSIZE             144
#define BTRFS_SB_NODESIZE               148
#define BTRFS_SB_SYS_ARRAY_SIZE         160
#define BTRFS_SB_CHUNK_ROOT_GEN         164
#define BTRFS_SB_COMPAT_RO              180
#define BTRFS_SB_INCOMPAT               188
#define BTRFS_SB_CSUM_TYPE              196
#define BTRFS_SB_ROOT_LEVEL             198
#define BTRFS_SB_CHUNK_ROOT_LEVEL       199
#define BTRFS_SB_DEV_ITEM               201
#define BTRFS_SB_METADATA_UUID          571
#define BTRFS_SB_SYS_ARRAY              811
/* In struct btrfs_dev_item. */
#define BTRFS_DEV_ITEM_DEVID            0
#define BTRFS_DEV_ITEM_TOTAL_BYTES      8

#define BTRFS_SUPER_FLAG_ERROR          (1ull << 2)
#define BTRFS_SUPER_FLAG_CHANGING       ((1ull << 35) | (1ull << 36) | (1ull << 38) | \
					 (1ull << 39) | (1ull << 40))

#define BTRFS_CSUM_CRC32C               0
#define BTRFS_CSUM_XXHASH               1
#define BTRFS_CSUM_SHA256               2
#define BTRFS_CSUM_BLAKE2               3

#define BTRFS_INCOMPAT_MIXED_BACKREF    (1ull << 0)
#define BTRFS_INCOMPAT_DEFAULT_SUBVOL   (1ull << 1)
#define BTRFS_INCOMPAT_MIXED_GROUPS     (1ull << 2)
#define BTRFS_INCOMPAT_COMPRESS_LZO     (1ull << 3)
#define BTRFS_INCOMPAT_COMPRESS_ZSTD    (1ull << 4)
#define BTRFS_INCOMPAT_BIG_METADATA     (1ull << 5)
#define BTRFS_INCOMPAT_EXTENDED_IREF    (1ull << 6)
#define BTRFS_INCOMPAT_RAID56           (1ull << 7)
#define BTRFS_INCOMPAT_SKINNY_METADATA  (1ull << 8)
#define BTRFS_INCOMPAT_NO_HOLES         (1ull << 9)
#define BTRFS_INCOMPAT_METADATA_UUID    (1ull << 10)
#define BTRFS_INCOMPAT_RAID1C34         (1ull << 11)
#define BTRFS_INCOMPAT_ZONED            (1ull << 12)
#define BTRFS_INCOMPAT_EXTENT_TREE_V2   (1ull << 13)
#define BTRFS_INCOMPAT_RAID_STRIPE_TREE (1ull << 14)
#define BTRFS_INCOMPAT_SIMPLE_QUOTA     (1ull << 16)
#define BTRFS_INCOMPAT_REMAP_TREE       (1ull << 17)
/* Features that leave the chunk tree the map of every address and the
 * extent tree the record of every allocated byte.  RAID56 and RAID1C34 only
 * allow such chunks, which are judged one by one. */
#define BTRFS_INCOMPAT_UNDERSTOOD \
	(BTRFS_INCOMPAT_MIXED_BACKREF | BTRFS_INCOMPAT_DEFAULT_SUBVOL | \
	 BTRFS_INCOMPAT_MIXED_GROUPS | BTRFS_INCOMPAT_COMPRESS_LZO | \
	 BTRFS_INCOMPAT_COMPRESS_ZSTD | BTRFS_INCOMPAT_BIG_METADATA | \
	 BTRFS_INCOMPAT_EXTENDED_IREF | BTRFS_INCOMPAT_RAID56 | \
	 BTRFS_INCOMPAT_SKINNY_METADATA | BTRFS_INCOMPAT_NO_HOLES | \
	 BTRFS_INCOMPAT_METADATA_UUID | BTRFS_INCOMPAT_RAID1C34 | \
	 BTRFS_INCOMPAT_SIMPLE_QUOTA)
#define BTRFS_COMPAT_RO_KNOWN           0xFull  /* free space tree (+valid), verity, block group tree */

/* Tree block header (struct btrfs_header) and items. */
#define BTRFS_HDR_FSID                  32
#define BTRFS_HDR_BYTENR                48
#define BTRFS_HDR_GENERATION            80
#define BTRFS_HDR_OWNER                 88
#define BTRFS_HDR_NRITEMS               96
#define BTRFS_HDR_LEVEL                 100
#define BTRFS_HDR_SIZE                  101u
#define BTRFS_KEY_SIZE                  17u
#define BTRFS_ITEM_SIZE                 25u   /* key, offset, size */
#define BTRFS_KEY_PTR_SIZE              33u   /* key, blockptr, generation */

/* Tree ids and key types. */
#define BTRFS_ROOT_TREE_OBJECTID        1ull
#define BTRFS_EXTENT_TREE_OBJECTID      2ull
#define BTRFS_CHUNK_TREE_OBJECTID       3ull
#define BTRFS_DEV_ITEMS_OBJECTID        1ull
#define BTRFS_FIRST_CHUNK_TREE_OBJECTID 256ull
#define BTRFS_KEY_ROOT_ITEM             132
#define BTRFS_KEY_EXTENT_ITEM           168
#define BTRFS_KEY_METADATA_ITEM         169
#define BTRFS_KEY_DEV_ITEM              216
#define BTRFS_KEY_CHUNK_ITEM            228

/* struct btrfs_root_item: bytenr and level after the 160-byte inode item. */
#define BTRFS_ROOT_ITEM_GENERATION      160
#define BTRFS_ROOT_ITEM_BYTENR          176
#define BTRFS_ROOT_ITEM_LEVEL           238
#define BTRFS_ROOT_ITEM_MIN_SIZE        239u

/* struct btrfs_chunk, then num_stripes struct btrfs_stripe. */
#define BTRFS_CHUNK_LENGTH              0
#define BTRFS_CHUNK_STRIPE_LEN          16
#define BTRFS_CHUNK_TYPE                24
#define BTRFS_CHUNK_NUM_STRIPES         44
#define BTRFS_CHUNK_HEAD_SIZE           48u
#define BTRFS_STRIPE_SIZE               32u
#define BTRFS_STRIPE_DEVID              0
#define BTRFS_STRIPE_OFFSET             8

#define BTRFS_BG_DATA                   (1ull << 0)
#define BTRFS_BG_SYSTEM                 (1ull << 1)
#define BTRFS_BG_METADATA               (1ull << 2)
#define BTRFS_BG_RAID0                  (1ull << 3)
#define BTRFS_BG_RAID1                  (1ull << 4)
#define BTRFS_BG_DUP                    (1ull << 5)
#define BTRFS_BG_RAID10                 (1ull << 6)
#define BTRFS_BG_RAID5                  (1ull << 7)
#define BTRFS_BG_RAID6                  (1ull << 8)
#define BTRFS_BG_RAID1C3                (1ull << 9)
#define BTRFS_BG_RAID1C4                (1ull << 10)
#define BTRFS_BG_TYPE_MASK              (BTRFS_BG_DATA | BTRFS_BG_SYSTEM | BTRFS_BG_METADATA)
#define BTRFS_BG_PROFILE_MASK \
	(BTRFS_BG_RAID0 | BTRFS_BG_RAID1 | BTRFS_BG_DUP | BTRFS_BG_RAID10 | BTRFS_BG_RAID5 | \
	 BTRFS_BG_RAID6 | BTRFS_BG_RAID1C3 | BTRFS_BG_RAID1C4)

/* A key: (objectid, type, offset), 17 bytes on disk. */
struct btrfs_key {
	uint64_t objectid, offset;
	uint8_t type;
};

/* What the superblock says, checked. */
struct btrfs_super {
	uint32_t sectorsize, nodesize;
	uint16_t csum_type;
	uint64_t flags, incompat, compat_ro;
	uint64_t generation, chunk_root_gen;
	uint64_t root, chunk_root, log_root;
	uint8_t root_level, chunk_root_level;
	uint64_t bytes_used, num_devices;
	uint64_t devid, dev_bytes;       /* this device, from the superblock */
	unsigned char meta_fsid[16];     /* the fsid tree block headers carry */
	uint32_t sys_array_size;
	unsigned char sys_array[BTRFS_SYS_CHUNK_ARRAY_MAX];
};

/* The key at p (BTRFS_KEY_SIZE bytes). */
void btrfs_read_key(const unsigned char *p, struct btrfs_key *k);

/* Keys in btrfs's order: objectid, type, offset.  <0, 0, >0. */
int btrfs_key_cmp(const struct btrfs_key *a, const struct btrfs_key *b);

/* The fields and geometry of superblock sb (BTRFS_SB_SIZE bytes, its magic
 * checked) on a device of dev_size bytes: sizes, tree roots and levels,
 * generations, this device's item, the system chunk array (copied).  0, or
 * -EINVAL with the reason in err.  Features and flags are the caller's. */
int btrfs_parse_super(const unsigned char *sb, uint64_t dev_size, struct btrfs_super *s,
		      struct im_err *err);

#endif
