/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The ordered list of filesystem plugins.
 *
 * Order matters only when libblkid does not recognise a partition and the
 * engine falls back to the plugins' own magics: then the first plugin whose
 * magic matches and whose probe() accepts wins.  Formats with strong,
 * checksummed or well-placed magics come first (ext at 0x438, swap at the
 * end of the first page), FAT last of the real ones because its "magic"
 * (0x55AA and a jump instruction) is weak and also found on partition
 * tables.  raw is last: it takes anything.
 */
#include "imager/fsplugin.h"

extern const struct fs_plugin fs_plugin_ext;
extern const struct fs_plugin fs_plugin_swap;
extern const struct fs_plugin fs_plugin_xfs;
extern const struct fs_plugin fs_plugin_btrfs;
extern const struct fs_plugin fs_plugin_f2fs;
extern const struct fs_plugin fs_plugin_fat;
extern const struct fs_plugin fs_plugin_ntfs;
extern const struct fs_plugin fs_plugin_exfat;
extern const struct fs_plugin fs_plugin_lvm;
extern const struct fs_plugin fs_plugin_crypt;

const struct fs_plugin *const fs_plugins[] = {
	&fs_plugin_ext,
	&fs_plugin_swap,
	&fs_plugin_xfs,     /* "XFSB" at 0, geometry invariants, CRC32c on v5: strong */
	&fs_plugin_btrfs,   /* "_BHRfS_M" at 64 KiB + 64 in a checksummed superblock: strong */
	&fs_plugin_f2fs,    /* 0xF2F52010 at 1 KiB (copy at 5 KiB), area bounds, CRC'd checkpoints: strong */
	&fs_plugin_lvm,     /* "LABELONE" with a CRC in sectors 0-3: strong, and before FAT */
	&fs_plugin_exfat,   /* "EXFAT   " at 3 and a boot region checksum: before FAT */
	&fs_plugin_ntfs,    /* "NTFS    " at 3 and boot sector invariants: before FAT, whose 0x55AA it shares */
	&fs_plugin_fat,
	&fs_plugin_crypt,   /* libblkid's crypto_LUKS/BitLocker only (no magics): whole, named */
	&fs_plugin_raw,
	NULL,
};
