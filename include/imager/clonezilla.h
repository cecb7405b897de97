/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Clonezilla image folders as a source (ocs-sr savedisk): restored onto a
 * block device or a new raw or qcow2 file through the same writer as
 * imager's own folders (the table and every partition's first bytes held
 * back until the end, a created file removed on failure).  im_restore()
 * turns to cz_restore() for a folder without manifest.json that has
 * Clonezilla's "disk" file, so restore, convert DIR and p2v DIR take both.
 *
 * What a folder holds (facts from images ocs-sr 5.3 writes):
 *   disk                  the disk's name ("sda"); one disk is taken
 *   parts                 its partitions' names, blank-separated (a
 *                         partition image, ocs-sr saveparts, has no "disk":
 *                         the disk is the one DISK-pt.sf names, and its
 *                         partitions not in "parts" are restored empty)
 *   DISK-pt.sf            sfdisk's dump: label (dos, gpt), sector-size,
 *                         last-lba, one line per partition (start=, size=)
 *   DISK-mbr              the first sector
 *   DISK-hidden-data-after-mbr   what lies between it and the first
 *                         partition (MBR disks)
 *   DISK-gpt-1st          the protective MBR, the primary GPT header and
 *                         its entries (34 sectors); DISK-gpt-2nd is not
 *                         used: it is the disk's last 32 sectors, which
 *                         miss the first sector of the backup entries, so
 *                         the backup is made from the primary instead
 *   PART.FS-ptcl-img.COMP[.aa .ab ...]   a partclone image (partclone.h),
 *                         compressed (gz, bz2, xz, zst, lz4, lzo, or
 *                         uncomp), split into parts or not; read through
 *                         libarchive's raw reader, the parts in name order
 *   PART.dd-ptcl-img.COMP[...]   partclone.dd's stream (a filesystem
 *                         Clonezilla does not know, LUKS): the partition's
 *                         raw bytes, exactly its size
 *   PART.ntfs-img.COMP[...]   older Clonezilla: ntfsclone --save-image's
 *                         stream (format in clonezilla.c), every count
 *                         checked against the header and the partition
 *   PART.dd-img.COMP[...]  older Clonezilla: dd's stream, as dd-ptcl-img
 *   lvm_vg_dev.list       "VG /dev/PART PVUUID" lines: the PVs on this disk
 *   lvm_VG.conf           the VG's text as vgcfgbackup writes it; each PV
 *                         is made afresh from it (lvmfmt.h: label,
 *                         metadata area and text, as pvcreate
 *                         --restorefile and vgcfgrestore make them)
 *   VG-LV.FS-ptcl-img.COMP, swappt-VG-LV.info   an LV's stream, written
 *                         at its extents (linear LVs; an LV without a
 *                         stream is left as the target has it)
 *   swappt-PART.info      a swap partition: UUID="..." LABEL="...";
 *                         written as a fresh swap header with that UUID
 *                         and label
 *   EXT-ebr               the extended partition's first sector; ocs-sr
 *                         rebuilds the EBR chain with sfdisk from DISK-pt.sf
 *                         and puts back only this sector's first 446 bytes.
 *                         So does cz_restore(): each logical partition's
 *                         EBR is made from its line (type, start, size), the
 *                         first at the extended partition's start, the
 *                         second where EXT-ebr's link points, the others as
 *                         far before their partition as the first is
 *                         before its own (within the gap before it).  The
 *                         MBR's four entries are made from DISK-pt.sf as
 *                         well (type, bootable); its other bytes are
 *                         DISK-mbr's.
 * Refused by name (IM_EXIT_UNSUPP): encrypted images (ecryptfs.info),
 * images of several disks (or of partitions of several disks), logical
 * partitions out of disk order, aufs streams, ntfsclone images other than
 * version 10.0/10.1.  Damage
 * (a bad checksum, a truncated or missing part, a corrupt compressed
 * stream, a lying header) is IM_EXIT_DAMAGED with the partition named.
 */
#ifndef IMAGER_CLONEZILLA_H
#define IMAGER_CLONEZILLA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/error.h"

#define CZ_MAX_PARTS 128
#define CZ_MAX_FILES 676   /* split parts of one stream: aa to zz */
#define CZ_MAX_VGS   8
#define CZ_MAX_LVS   64
#define CZ_MAX_SEGS  64

/* CZ_PV: an LVM physical volume, made afresh from lvm_VG.conf (no stream) */
enum cz_kind { CZ_NONE, CZ_PTCL, CZ_DD, CZ_NTFSCLONE, CZ_SWAP, CZ_PV };

struct cz_part {
	char name[64];             /* "sda1" */
	unsigned number;
	uint64_t start, size;      /* bytes */
	unsigned char mbr_type;    /* msdos: the type= of the table's line */
	bool bootable;             /* msdos: ", bootable" */
	bool logical;              /* msdos: number 5 and up, in the extended partition */
	char fs[32];               /* Clonezilla's name: "ext4", "vfat", "ntfs", "swap", "dd"... */
	enum cz_kind kind;
	char stream[256];          /* the first file's name, or the .info file's */
	char comp[8];              /* gz, bz2, xz, zst, lz4, lzo, uncomp */
	unsigned nfiles;           /* 1, or the number of split parts */
	uint64_t bytes;            /* the stream's files' sizes together */
	char swap_uuid[37], swap_label[17];
	unsigned vg, pv;           /* CZ_PV: its VG (cz_image.vgs) and PV (in the VG's text) */
	uint64_t pe_start;         /* CZ_PV: bytes */
};

/* A logical volume: its stream (part.name is Clonezilla's "VG-LV", its
 * size the LV's) and where its bytes lie, on partitions of this disk. */
struct cz_lv {
	struct cz_part part;
	unsigned vg;
	char lv[128];
	bool linear;
	size_t nsegs;
	struct {
		uint64_t lv_off, len;
		size_t part;               /* index in cz_image.parts */
		uint64_t part_off;
	} segs[CZ_MAX_SEGS];
};

struct cz_image {
	char disk[64];
	bool partitions_only;      /* saveparts: no "disk" file; partitions not in
				    * "parts" are restored empty */
	char table[8];             /* "msdos" or "gpt" */
	unsigned lss;
	uint64_t disk_size;        /* gpt: from the header; msdos: the last partition's end, in MiB */
	bool size_known;           /* false: msdos (the disk's size is not in the folder) */
	size_t nparts;
	struct cz_part parts[CZ_MAX_PARTS];  /* in the table's order (logical ones by number) */
	/* msdos: the extended partition, a container (not in parts) */
	char ext_name[64];
	unsigned ext_number;
	unsigned char ext_type;
	uint64_t ext_start, ext_size;       /* bytes; 0: none */
	/* LVM: the VGs of lvm_vg_dev.list, and their LVs */
	size_t nvgs;
	char vgs[CZ_MAX_VGS][128];
	size_t nlvs;
	struct cz_lv lvs[CZ_MAX_LVS];
};

/* Read and check the folder's description (no stream is read). */
int cz_read(const char *dir, struct cz_image *cz, struct im_err *err);

/* Partition p's stream: its partclone header (h), and with read_all every
 * block read and every checksum checked (*strips: the checksum strips
 * checked).  With a progress function, it is told *done plus the stream's
 * bytes read so far, out of total (the bytes of the streams to read, from
 * cz_part.bytes); *done grows by p->bytes at the end.  Returns 0 or a
 * negative errno with the damage in err. */
struct pcl_header;
struct im_progress;
int cz_read_stream(const char *dir, const struct cz_part *p, bool read_all,
		   const struct im_progress *progress, uint64_t *done, uint64_t total,
		   struct pcl_header *h, uint64_t *strips, struct im_err *err);

#endif
