/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * btrfs's on-disk format (include/imager/btrfsfmt.h): keys and the
 * superblock, decoded from bytes fsplugins/btrfs.c has read.  Every field
 * is hostile.
 */
#include "imager/btrfsfmt.h"
#include "imager/bytes.h"

#include <errno.h>
#include <string.h>

/* A failure explained (the plugin passes the message on: fs_error()). */
#define sb_error(err, code, ...) im_errf(err, IM_EXIT_SOURCE, code, __VA_ARGS__)

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

void btrfs_read_key(const unsigned char *p, struct btrfs_key *k)
{
	k->objectid = le64(p);
	k->type = p[8];
	k->offset = le64(p + 9);
}

int btrfs_key_cmp(const struct btrfs_key *a, const struct btrfs_key *b)
{
	if (a->objectid != b->objectid)
		return a->objectid < b->objectid ? -1 : 1;
	if (a->type != b->type)
		return a->type < b->type ? -1 : 1;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	return 0;
}

/* Fields and geometry of the superblock into p.  Returns 0, or -EINVAL
 * with the reason recorded. */
int btrfs_parse_super(const unsigned char *sb, uint64_t dev_size, struct btrfs_super *s,
		      struct im_err *err)
{
	const unsigned char *dev = sb + BTRFS_SB_DEV_ITEM;
	uint64_t size = dev_size;

	if (le64(sb + BTRFS_SB_BYTENR) != BTRFS_SB_OFFSET)
		return sb_error(err, -EINVAL, "the superblock says it lives at %llu, not %u",
				(unsigned long long)le64(sb + BTRFS_SB_BYTENR), BTRFS_SB_OFFSET);
	s->csum_type = le16(sb + BTRFS_SB_CSUM_TYPE);
	if (s->csum_type > BTRFS_CSUM_BLAKE2)
		return sb_error(err, -EINVAL, "checksum type %u is unknown", s->csum_type);
	s->sectorsize = le32(sb + BTRFS_SB_SECTORSIZE);
	s->nodesize = le32(sb + BTRFS_SB_NODESIZE);
	if (!is_pow2(s->sectorsize) || s->sectorsize < 4096 || s->sectorsize > 65536)
		return sb_error(err, -EINVAL, "sector size %u out of range", s->sectorsize);
	if (!is_pow2(s->nodesize) || s->nodesize < s->sectorsize || s->nodesize > 65536)
		return sb_error(err, -EINVAL, "node size %u out of range for %u-byte sectors",
				s->nodesize, s->sectorsize);
	s->flags = le64(sb + BTRFS_SB_FLAGS);
	s->generation = le64(sb + BTRFS_SB_GENERATION);
	s->root = le64(sb + BTRFS_SB_ROOT);
	s->chunk_root = le64(sb + BTRFS_SB_CHUNK_ROOT);
	s->log_root = le64(sb + BTRFS_SB_LOG_ROOT);
	s->chunk_root_gen = le64(sb + BTRFS_SB_CHUNK_ROOT_GEN);
	s->root_level = sb[BTRFS_SB_ROOT_LEVEL];
	s->chunk_root_level = sb[BTRFS_SB_CHUNK_ROOT_LEVEL];
	if (!s->root || !s->chunk_root || s->root % s->sectorsize ||
	    s->chunk_root % s->sectorsize || (s->log_root % s->sectorsize))
		return sb_error(err, -EINVAL, "tree roots %llu, %llu, %llu are not sector-aligned",
				(unsigned long long)s->root, (unsigned long long)s->chunk_root,
				(unsigned long long)s->log_root);
	if (s->root_level >= BTRFS_MAX_LEVEL || s->chunk_root_level >= BTRFS_MAX_LEVEL)
		return sb_error(err, -EINVAL, "tree root levels %u and %u out of range",
				s->root_level, s->chunk_root_level);
	if (!s->generation || s->chunk_root_gen > s->generation)
		return sb_error(err, -EINVAL, "generation %llu, chunk root generation %llu",
				(unsigned long long)s->generation,
				(unsigned long long)s->chunk_root_gen);
	s->num_devices = le64(sb + BTRFS_SB_NUM_DEVICES);
	if (s->num_devices == 0)
		return sb_error(err, -EINVAL, "no devices");
	s->bytes_used = le64(sb + BTRFS_SB_BYTES_USED);
	if (s->bytes_used > le64(sb + BTRFS_SB_TOTAL_BYTES))
		return sb_error(err, -EINVAL, "%llu bytes used out of %llu",
				(unsigned long long)s->bytes_used,
				(unsigned long long)le64(sb + BTRFS_SB_TOTAL_BYTES));
	s->devid = le64(dev + BTRFS_DEV_ITEM_DEVID);
	s->dev_bytes = le64(dev + BTRFS_DEV_ITEM_TOTAL_BYTES);
	if (s->dev_bytes < BTRFS_SB_OFFSET + BTRFS_SB_SIZE || s->dev_bytes > size)
		return sb_error(err, -EINVAL,
				"the filesystem's device is %llu bytes; the partition holds %llu",
				(unsigned long long)s->dev_bytes, (unsigned long long)size);
	s->dev_bytes -= s->dev_bytes % s->sectorsize;   /* what the bitmap covers */
	s->sys_array_size = le32(sb + BTRFS_SB_SYS_ARRAY_SIZE);
	if (s->sys_array_size > BTRFS_SYS_CHUNK_ARRAY_MAX ||
	    s->sys_array_size < BTRFS_KEY_SIZE + BTRFS_CHUNK_HEAD_SIZE + BTRFS_STRIPE_SIZE)
		return sb_error(err, -EINVAL, "system chunk array of %u bytes", s->sys_array_size);
	memcpy(s->sys_array, sb + BTRFS_SB_SYS_ARRAY, s->sys_array_size);
	s->incompat = le64(sb + BTRFS_SB_INCOMPAT);
	s->compat_ro = le64(sb + BTRFS_SB_COMPAT_RO);
	memcpy(s->meta_fsid, sb + ((s->incompat & BTRFS_INCOMPAT_METADATA_UUID) ? BTRFS_SB_METADATA_UUID
									   : BTRFS_SB_FSID), 16);
	return 0;
}

