/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * NTFS's on-disk format, as fsplugins/ntfs.c reads it: the boot sector, MFT
 * records and their update sequences, attributes and their runlists,
 * directory index nodes.  The decoders (imager/engine/fs/ntfsfmt.c) work on
 * bytes already read and do no I/O; every field is hostile: each is
 * checked before it is used, and a failure is -EINVAL (out of range),
 * -ENOTSUP or -ENOMEM, explained in err (the first message wins).
 */
#ifndef IMAGER_NTFSFMT_H
#define IMAGER_NTFSFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/error.h"

/* ---- boot sector ---- */
#define NTFS_BS_OEM_ID           3
#define NTFS_BS_BYTES_PER_SECTOR 0x0B
#define NTFS_BS_SECTORS_PER_CLUS 0x0D
#define NTFS_BS_RESERVED_SECTORS 0x0E
#define NTFS_BS_FATS             0x10
#define NTFS_BS_ROOT_ENTRIES     0x11
#define NTFS_BS_SECTORS16        0x13
#define NTFS_BS_FAT_SIZE         0x16
#define NTFS_BS_LARGE_SECTORS    0x20
#define NTFS_BS_NR_SECTORS       0x28
#define NTFS_BS_MFT_LCN          0x30
#define NTFS_BS_MFTMIRR_LCN      0x38
#define NTFS_BS_CLUS_PER_MFT_REC 0x40
#define NTFS_BS_CLUS_PER_INDEX   0x44
#define NTFS_BS_LEN              512u

#define NTFS_MAX_CLUSTER         (2u << 20)   /* Windows 10 1703 and libntfs-3g */
#define NTFS_MAX_BLOCK           4096u        /* the bitmap unit, at most */
#define NTFS_FIXUP_STRIDE        512u         /* update sequence stride, always */
#define NTFS_MAX_RECORD          (64u << 10)  /* Windows writes 1 KiB or 4 KiB */

/* ---- MFT records ---- */
#define NTFS_REC_USA_OFS         4
#define NTFS_REC_USA_COUNT       6
#define NTFS_REC_SEQUENCE        16
#define NTFS_REC_ATTRS_OFS       20
#define NTFS_REC_FLAGS           22
#define NTFS_REC_BYTES_USED      24
#define NTFS_REC_BYTES_ALLOC     28
#define NTFS_REC_BASE            32
#define NTFS_REC_NUMBER          44           /* NTFS 3.1 (usa_ofs >= 0x30) */
#define NTFS_REC_IN_USE          0x0001
#define NTFS_REC_IS_DIRECTORY    0x0002
#define NTFS_MREF_MASK           0x0000FFFFFFFFFFFFull

#define NTFS_FILE_MFT            0
#define NTFS_FILE_VOLUME         3
#define NTFS_FILE_ROOT           5
#define NTFS_FILE_BITMAP         6

/* ---- attributes ---- */
#define NTFS_AT_ATTRIBUTE_LIST   0x20u
#define NTFS_AT_FILE_NAME        0x30u
#define NTFS_AT_VOLUME_INFO      0x70u
#define NTFS_AT_DATA             0x80u
#define NTFS_AT_INDEX_ROOT       0x90u
#define NTFS_AT_INDEX_ALLOCATION 0xA0u
#define NTFS_AT_BITMAP           0xB0u
#define NTFS_AT_END              0xFFFFFFFFu

#define NTFS_ATTR_TYPE           0
#define NTFS_ATTR_LENGTH         4
#define NTFS_ATTR_NON_RESIDENT   8
#define NTFS_ATTR_NAME_LENGTH    9
#define NTFS_ATTR_NAME_OFS       10
#define NTFS_ATTR_FLAGS          12
#define NTFS_ATTR_VALUE_LENGTH   16           /* resident */
#define NTFS_ATTR_VALUE_OFS      20
#define NTFS_ATTR_LOWEST_VCN     16           /* non-resident */
#define NTFS_ATTR_HIGHEST_VCN    24
#define NTFS_ATTR_MAPPING_OFS    32
#define NTFS_ATTR_ALLOC_SIZE     40
#define NTFS_ATTR_DATA_SIZE      48
#define NTFS_ATTR_INIT_SIZE      56
#define NTFS_ATTR_RESIDENT_HDR   24u
#define NTFS_ATTR_NONRES_HDR     64u

#define NTFS_ATTR_COMPRESSED     0x00FFu
#define NTFS_ATTR_ENCRYPTED      0x4000u
#define NTFS_ATTR_SPARSE         0x8000u

/* $ATTRIBUTE_LIST entries. */
#define NTFS_AL_TYPE             0
#define NTFS_AL_LENGTH           4
#define NTFS_AL_NAME_LENGTH      6
#define NTFS_AL_NAME_OFS         7
#define NTFS_AL_LOWEST_VCN       8
#define NTFS_AL_MREF             16
#define NTFS_AL_MIN_LEN          26u
#define NTFS_MAX_ATTR_LIST       (256u << 10)

/* $VOLUME_INFORMATION. */
#define NTFS_VI_MAJOR            8
#define NTFS_VI_FLAGS            10
#define NTFS_VI_LEN              12u
#define NTFS_VOLUME_IS_DIRTY     0x0001u

/* Directory indexes. */
#define NTFS_IR_TYPE             0            /* $INDEX_ROOT value */
#define NTFS_IR_BLOCK_SIZE       8
#define NTFS_IR_HEADER           16
#define NTFS_IH_ENTRIES_OFS      0            /* index header */
#define NTFS_IH_INDEX_LENGTH     4
#define NTFS_IH_FLAGS            12
#define NTFS_IH_LEN              16u
#define NTFS_IH_LARGE_INDEX      0x01
#define NTFS_INDX_HEADER         24           /* index header inside a block */
#define NTFS_IE_LENGTH           8            /* index entry */
#define NTFS_IE_KEY_LENGTH       10
#define NTFS_IE_FLAGS            12
#define NTFS_IE_KEY              16
#define NTFS_IE_NODE             0x0001
#define NTFS_IE_END              0x0002
#define NTFS_FN_NAME_LENGTH      64           /* $FILE_NAME key */
#define NTFS_FN_NAME             66
#define NTFS_MAX_INDEX_BLOCKS    16384u      /* searched in the root directory */

#define NTFS_HOLE                UINT64_MAX   /* the LCN of a sparse run */
#define NTFS_MAX_RUNS            (1u << 20)

struct ntfs_run {
	uint64_t vcn, lcn, len;   /* lcn NTFS_HOLE: sparse */
};

struct ntfs_runlist {
	struct ntfs_run *runs;
	size_t n, cap;
	uint64_t vcns;            /* clusters described so far: the next VCN */
};

/* One attribute gathered from all its extents. */
struct ntfs_attr {
	bool resident;
	uint16_t flags;
	unsigned char *value;     /* resident: a copy of the value */
	uint32_t value_len;
	uint64_t alloc, size, init;   /* non-resident sizes */
	struct ntfs_runlist rl;
};

/* The volume's geometry, from its boot sector. */
struct ntfs_vol {
	uint32_t bytes_per_sector, cluster_size, record_size;
	unsigned cluster_bits;
	uint64_t nr_sectors, nr_clusters, mft_lcn, mftmirr_lcn;
};

/* The boot sector bs (NTFS_BS_LEN bytes) of a volume on a device of dev
 * bytes: its geometry checked as libntfs-3g's ntfs_boot_sector_is_ntfs()
 * and ntfs_boot_sector_parse() do.  -ENOTSUP: NTFS, but MFT records of a
 * size not handled. */
int ntfs_parse_boot(const unsigned char *bs, uint64_t dev, struct ntfs_vol *v,
		    struct im_err *err);

/* Check and undo the update sequence of a record or index block (size
 * bytes, signature magic): the last two bytes of every 512-byte stride
 * hold the sequence number, their real value is kept in the array. */
int ntfs_apply_fixups(unsigned char *buf, uint32_t size, const char *magic, const char *what,
		      struct im_err *err);

/* The header of MFT record recno (size bytes, fixups applied) checked. */
int ntfs_check_record(const unsigned char *buf, uint32_t size, uint64_t recno, const char *what,
		      struct im_err *err);

/* The next attribute at *pos of a checked record: 1 with *a and *alen set,
 * 0 at the end marker, negative when it does not fit in the record. */
int ntfs_next_attr(const unsigned char *rec, uint32_t *pos, const unsigned char **a,
		   uint32_t *alen, const char *what, struct im_err *err);

/* Does UTF-16LE name (n code units) equal ascii?  Case-insensitive for
 * ASCII letters when fold (file names), exact otherwise (stream names). */
bool ntfs_name_is(const unsigned char *name, unsigned n, const char *ascii, bool fold);

/* Is a (a checked attribute) of this type and name (NULL: unnamed)? */
bool ntfs_attr_is(const unsigned char *a, uint32_t type, const char *name);

/* Add one extent (a checked attribute of alen bytes) to d; the first sets
 * its kind and sizes.  A non-resident extent's mapping pairs are appended
 * to d->rl: the extent must start where d->rl ends and end where its
 * header says; every run must lie inside the volume v. */
int ntfs_take_extent(const struct ntfs_vol *v, struct ntfs_attr *d, bool first,
		     const unsigned char *a, uint32_t alen, const char *what, struct im_err *err);

/* Does the runlist have a sparse run? */
bool ntfs_has_holes(const struct ntfs_runlist *rl);

/* Free what d holds; d is zeroed. */
void ntfs_attr_free(struct ntfs_attr *d);

/* Look for a file name among the entries of one index node (hdr: its index
 * header, avail bytes from there): *mref and *found when it is there.  The
 * node pointers are not followed. */
int ntfs_scan_entries(const unsigned char *hdr, uint32_t avail, const char *fname,
		      uint64_t *mref, bool *found, const char *what, struct im_err *err);

#endif
