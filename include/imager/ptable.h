/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Partition tables (read through libparted) and the boot areas around them:
 * byte-exact copies of what lies outside the partitions that booting
 * depends on.
 */
#ifndef IMAGER_PTABLE_H
#define IMAGER_PTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "imager/backend.h"
#include "imager/error.h"

/* The most of the gap before the first partition that is kept (GRUB's core
 * image needs well under 1 MiB; a first partition far into the disk should
 * not make the image huge). */
#define PT_HEAD_MAX   (32ull << 20)
/* Kept of each end of a gap inside an extended partition (EBRs). */
#define PT_EBR_KEEP   (1ull << 20)

#define PT_MAX_PARTS  256
#define PT_MAX_AREAS  (2 * PT_MAX_PARTS + 4)

struct pt_part {
	unsigned number;        /* 1..; 0 for a whole-disk filesystem */
	uint64_t start, size;   /* bytes */
	char kind[16];          /* primary, logical, gpt, whole-disk */
	char name[80];          /* GPT partition name, "" otherwise */
};

struct pt_area {
	char name[32];          /* head, ebr-N, gpt-backup */
	uint64_t offset, length;
};

struct ptable {
	char type[16];          /* "msdos", "gpt" or "none" */
	uint64_t disk_size;
	unsigned sector_size;
	size_t nparts;
	struct pt_part parts[PT_MAX_PARTS];
	size_t nareas;
	struct pt_area areas[PT_MAX_AREAS];
};

/* Read the table of the disk or image at path (size bytes, logical sector
 * size lss).  A disk without a table is one whole-disk partition 0.
 * Extended partitions are containers, not listed; the gaps in them are
 * areas.  Returns 0 or negative errno (IM_EXIT_SOURCE: an unreadable or
 * inconsistent table; IM_EXIT_UNSUPP: a table type other than msdos/gpt). */
int ptable_read(const char *path, uint64_t size, unsigned lss, struct ptable *pt,
		struct im_err *err);

/* Check a primary GPT held in head[0, len) (protective MBR, header,
 * entries) for a disk of disk_size bytes: the header's fields and CRC and
 * the entries' CRC.  Returns 0 or negative errno (IM_EXIT_DAMAGED;
 * IM_EXIT_UNSUPP for entries beyond len). */
int ptable_gpt_check(const unsigned char *head, size_t len, unsigned lss, uint64_t disk_size,
		     struct im_err *err);

/* Write the backup GPT (entries, then header) at the end of a disk of
 * new_size bytes from the primary on bk (its header and entries checked
 * against their CRCs first), and update the primary header (alternate LBA,
 * last usable LBA, CRCs) and the protective MBR's size: after a disk image
 * was written onto a larger target, or from a source that kept no usable
 * backup.  Partitions stay byte-identical.  Returns 0 or negative errno
 * (IM_EXIT_DAMAGED: a primary that fails its checks). */
int ptable_gpt_relocate_backup(struct bk *bk, uint64_t new_size, unsigned lss, struct im_err *err);

/* ptable_read() for any container: raw ones are read in place; for others
 * (qcow2, NBD) libparted is shown a sparse temporary copy holding the
 * regions a table lives in (the first and last MiB, and the EBR chain of an
 * extended partition, followed here with every link checked). */
int ptable_read_bk(struct bk *bk, struct ptable *pt, struct im_err *err);

/* Fill the 16-byte MBR or EBR entry e (its type and boot flag kept): CHS
 * from the absolute start_lba (1023/254/63 past the CHS limit), the LBA
 * start relative to the table's base (rel_start) and the size, in
 * 512-byte sectors. */
void ptable_mbr_entry(unsigned char *e, uint64_t start_lba, uint64_t rel_start, uint64_t sectors);

#endif
