/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * exFAT.
 *
 * Used blocks: everything before the cluster heap (the main and backup boot
 * regions, the FAT or the two FATs of TexFAT, and the gaps between them),
 * then each heap cluster whose bit is set in the allocation bitmap.  The
 * bitmap, not the FAT, says what is allocated: a contiguous file
 * (NoFatChain) leaves its FAT entries unused.
 *
 * Layout facts come from Microsoft's "exFAT file system specification"
 * (main boot sector fields, section 3.1; the boot checksum, 3.4; the
 * allocation bitmap entry, 7.1), checked against the Linux driver
 * (fs/exfat/super.c: exfat_read_boot_sector, exfat_verify_boot_region;
 * balloc.c: exfat_load_bitmap, exfat_count_used_clusters) and exfatprogs
 * (fsck/fsck.c: read_boot_region, read_bitmap; mkfs/mkfs.c).
 *
 *  - The boot region (sectors 0..10) carries a checksum, repeated over
 *    sector 11, that skips VolumeFlags and PercentInUse so that those two
 *    can change without rewriting it.  A mismatch makes probe() decline
 *    (the partition is then copied raw) and open() refuse unless forced.
 *  - VolumeFlags: bit 0 ActiveFat (TexFAT: the second FAT and bitmap are
 *    the live ones), bit 1 VolumeDirty (set while mounted read-write),
 *    bit 2 MediaFailure.  Dirty is refused unless forced.
 *  - The allocation bitmap is found through the root directory's
 *    Allocation Bitmap entry (type 0x81; BitmapFlags bit 0 says first or
 *    second bitmap), its clusters through the active FAT.  Its length must
 *    cover ClusterCount bits; bits past ClusterCount are ignored, as Linux
 *    ignores them.
 *  - PercentInUse is only a hint: the specification lets an implementation
 *    leave it at 0xFF ("unknown"), the Linux driver never updates it and
 *    mkfs.exfat writes 0, so a value that disagrees with the bitmap is a
 *    warning, never a refusal.  The cross-check that can refuse is that the
 *    clusters of the root directory, the bitmap itself and the up-case table
 *    are all marked in the bitmap.
 */
#include "imager/fsplugin.h"
#include "imager/bytes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Main boot sector (byte offsets). */
#define BS_FS_NAME            3
#define BS_MUST_BE_ZERO       11     /* 53 bytes, zero so FAT BPBs never match */
#define BS_MUST_BE_ZERO_LEN   53
#define BS_VOLUME_LENGTH      72
#define BS_FAT_OFFSET         80
#define BS_FAT_LENGTH         84
#define BS_HEAP_OFFSET        88
#define BS_CLUSTER_COUNT      92
#define BS_ROOT_CLUSTER       96
#define BS_REVISION_MINOR     104
#define BS_REVISION_MAJOR     105
#define BS_VOLUME_FLAGS       106    /* 2 bytes, outside the checksum */
#define BS_SECTOR_SHIFT       108
#define BS_CLUSTER_SHIFT      109
#define BS_NUMBER_OF_FATS     110
#define BS_PERCENT_IN_USE     112    /* outside the checksum */
#define BS_SIGNATURE          510

#define VOL_ACTIVE_FAT        0x0001
#define VOL_DIRTY             0x0002
#define VOL_MEDIA_FAILURE     0x0004

#define BOOT_REGION_SECTORS   12     /* 0 main, 1-8 extended, 9 OEM, 10 reserved, 11 checksum */
#define BOOT_CHECKSUM_SECTOR  11
#define FIRST_FAT_SECTOR_MIN  24     /* after the main and backup boot regions */
#define MIN_VOLUME_BYTES      (1u << 20)
#define MAX_CLUSTER_SHIFT     25     /* 32 MiB */
#define MAX_CLUSTER_COUNT     0xFFFFFFF5u
#define PERCENT_UNKNOWN       0xFF

#define FIRST_CLUSTER         2u
#define FAT_BAD               0xFFFFFFF7u
#define FAT_EOF               0xFFFFFFFFu

/* Directory entries. */
#define DENTRY_SIZE           32
#define DENTRY_END            0x00   /* no entries after this one */
#define DENTRY_BITMAP         0x81
#define DENTRY_UPCASE         0x82
#define DENTRY_FIRST_CLUSTER  20
#define DENTRY_DATA_LENGTH    24
#define BITMAP_FLAGS          1      /* bit 0: 0 = first bitmap, 1 = second */
#define MAX_DIR_BYTES         (256u << 20)  /* 8,388,608 entries of 32 bytes */
#define MAX_UPCASE_BYTES      (128u << 10)  /* 65,536 UTF-16 code units */

#define IO_CHUNK              (1u << 20)
#define FAT_WINDOW_ENTRIES    16384u        /* 64 KiB of FAT per read */
#define MAX_BLOCK_SIZE        (1u << 20)    /* fs_set_geometry's limit */

struct exfat_priv {
	unsigned sector_shift;
	unsigned cluster_shift;       /* bytes per cluster = 1 << cluster_shift */
	uint64_t volume_sectors;
	uint32_t fat_offset;          /* sectors */
	uint32_t fat_length;          /* sectors */
	uint32_t heap_offset;         /* sectors */
	uint32_t cluster_count;
	uint32_t root_cluster;
	unsigned nfats;
	unsigned active_fat;          /* 0 or 1 */
	uint16_t volume_flags;
	uint8_t percent_in_use;
	uint32_t checksum;            /* of sectors 0..10, when it mismatched */
	uint32_t stored_checksum;

	uint32_t block_size;          /* bitmap unit declared to the engine */
	uint64_t heap_block;          /* first block of cluster 2 */
	uint64_t blocks_per_cluster;

	unsigned char *buf;           /* IO_CHUNK bytes: directory and bitmap pieces */
	unsigned char *fat_window;    /* FAT_WINDOW_ENTRIES entries of the active FAT */
	uint64_t window_first;        /* first entry held, or UINT64_MAX */
	uint64_t window_len;
};

/* A cluster chain described by a directory entry: first cluster, bytes. */
struct exfat_stream {
	bool found;
	uint32_t first;
	uint64_t length;
};

static uint64_t cluster_bytes(const struct exfat_priv *xp)
{
	return (uint64_t)1 << xp->cluster_shift;
}

static bool heap_cluster(const struct exfat_priv *xp, uint64_t c)
{
	return c >= FIRST_CLUSTER && c - FIRST_CLUSTER < xp->cluster_count;
}

static uint64_t cluster_offset(const struct exfat_priv *xp, uint32_t c)
{
	return ((uint64_t)xp->heap_offset << xp->sector_shift) +
	       ((uint64_t)(c - FIRST_CLUSTER) << xp->cluster_shift);
}

/* The boot checksum of the specification (3.4): a rotate-right-and-add
 * over sectors 0..10, skipping VolumeFlags and PercentInUse. */
static uint32_t boot_checksum(const unsigned char *region, size_t sector_size)
{
	uint32_t sum = 0;

	for (size_t i = 0; i < 11 * sector_size; i++) {
		if (i == BS_VOLUME_FLAGS || i == BS_VOLUME_FLAGS + 1 || i == BS_PERCENT_IN_USE)
			continue;
		sum = ((sum & 1) ? 0x80000000u : 0) + (sum >> 1) + region[i];
	}
	return sum;
}

/* The marks of an exFAT boot sector: its name, the boot signature, and the
 * MustBeZero bytes where a FAT BPB would be. */
static int check_marks(struct fs_ctx *ctx, const unsigned char *bs)
{
	if (memcmp(bs + BS_FS_NAME, "EXFAT   ", 8) != 0)
		return fs_error(ctx, -EINVAL, "no \"EXFAT   \" name in the boot sector");
	if (le16(bs + BS_SIGNATURE) != 0xAA55)
		return fs_error(ctx, -EINVAL, "boot signature 0x%04x is not 0xAA55",
				le16(bs + BS_SIGNATURE));
	for (unsigned i = 0; i < BS_MUST_BE_ZERO_LEN; i++)
		if (bs[BS_MUST_BE_ZERO + i])
			return fs_error(ctx, -EINVAL, "MustBeZero byte %u is 0x%02x",
					BS_MUST_BE_ZERO + i, bs[BS_MUST_BE_ZERO + i]);
	return 0;
}

/* The sector and cluster sizes, and a revision this plugin knows. */
static int check_sizes(struct fs_ctx *ctx, const unsigned char *bs)
{
	unsigned ss_shift = bs[BS_SECTOR_SHIFT], spc_shift = bs[BS_CLUSTER_SHIFT];

	if (ss_shift < 9 || ss_shift > 12)
		return fs_error(ctx, -EINVAL, "BytesPerSectorShift %u (9..12)", ss_shift);
	if (spc_shift > MAX_CLUSTER_SHIFT - ss_shift)
		return fs_error(ctx, -EINVAL,
				"SectorsPerClusterShift %u makes clusters larger than 32 MiB",
				spc_shift);
	if (bs[BS_REVISION_MAJOR] != 1 || bs[BS_REVISION_MINOR] > 99)
		return fs_error(ctx, -ENOTSUP, "exFAT revision %u.%02u (only 1.x is known)",
				bs[BS_REVISION_MAJOR], bs[BS_REVISION_MINOR]);
	return 0;
}

/* The boot sector's fields into xp, not checked yet. */
static void read_fields(const unsigned char *bs, struct exfat_priv *xp)
{
	xp->sector_shift = bs[BS_SECTOR_SHIFT];
	xp->cluster_shift = bs[BS_SECTOR_SHIFT] + bs[BS_CLUSTER_SHIFT];
	xp->volume_sectors = le64(bs + BS_VOLUME_LENGTH);
	xp->fat_offset = le32(bs + BS_FAT_OFFSET);
	xp->fat_length = le32(bs + BS_FAT_LENGTH);
	xp->heap_offset = le32(bs + BS_HEAP_OFFSET);
	xp->cluster_count = le32(bs + BS_CLUSTER_COUNT);
	xp->root_cluster = le32(bs + BS_ROOT_CLUSTER);
	xp->nfats = bs[BS_NUMBER_OF_FATS];
	xp->volume_flags = le16(bs + BS_VOLUME_FLAGS);
	xp->percent_in_use = bs[BS_PERCENT_IN_USE];
	xp->active_fat = xp->volume_flags & VOL_ACTIVE_FAT;
}

/* The volume inside the device, and one or two FATs, the active one of them. */
static int check_volume(struct fs_ctx *ctx, const struct exfat_priv *xp)
{
	uint64_t device = fs_device_size(ctx), volume = xp->volume_sectors;

	if (volume < (MIN_VOLUME_BYTES >> xp->sector_shift))
		return fs_error(ctx, -EINVAL, "VolumeLength %llu sectors is under 1 MiB",
				(unsigned long long)volume);
	if (volume > device >> xp->sector_shift)
		return fs_error(ctx, -EINVAL,
				"VolumeLength %llu sectors of %u bytes does not fit in the %llu bytes of the device",
				(unsigned long long)volume, 1u << xp->sector_shift,
				(unsigned long long)device);
	if (xp->nfats != 1 && xp->nfats != 2)
		return fs_error(ctx, -EINVAL, "NumberOfFats %u (1 or 2)", xp->nfats);
	if (xp->active_fat >= xp->nfats)
		return fs_error(ctx, -EINVAL, "ActiveFat is the second FAT of a volume with one");
	return 0;
}

/* The FATs after the boot regions, the cluster heap after the FATs and
 * inside the volume, a FAT entry for each of its clusters, and the root
 * directory among them. */
static int check_fat_and_heap(struct fs_ctx *ctx, const struct exfat_priv *xp)
{
	uint64_t volume = xp->volume_sectors, fats_end, heap_room, need_fat;

	if (xp->fat_offset < FIRST_FAT_SECTOR_MIN)
		return fs_error(ctx, -EINVAL, "FatOffset %u overlaps the boot regions",
				xp->fat_offset);
	if (xp->fat_length == 0)
		return fs_error(ctx, -EINVAL, "FatLength is 0");
	fats_end = xp->fat_offset + (uint64_t)xp->fat_length * xp->nfats;
	if (xp->heap_offset < fats_end)
		return fs_error(ctx, -EINVAL, "ClusterHeapOffset %u is inside the FAT (which ends at %llu)",
				xp->heap_offset, (unsigned long long)fats_end);
	if (xp->heap_offset >= volume)
		return fs_error(ctx, -EINVAL, "ClusterHeapOffset %u is past VolumeLength %llu",
				xp->heap_offset, (unsigned long long)volume);
	heap_room = (volume - xp->heap_offset) >> (xp->cluster_shift - xp->sector_shift);
	if (xp->cluster_count == 0 || xp->cluster_count > MAX_CLUSTER_COUNT ||
	    xp->cluster_count > heap_room)
		return fs_error(ctx, -EINVAL,
				"ClusterCount %u (the volume has room for %llu clusters)",
				xp->cluster_count, (unsigned long long)heap_room);
	need_fat = ((uint64_t)xp->cluster_count + FIRST_CLUSTER) * 4;
	if (((uint64_t)xp->fat_length << xp->sector_shift) < need_fat)
		return fs_error(ctx, -EINVAL, "FAT of %u sectors is too small for %u clusters",
				xp->fat_length, xp->cluster_count);
	if (!heap_cluster(xp, xp->root_cluster))
		return fs_error(ctx, -EINVAL, "FirstClusterOfRootDirectory %u out of range",
				xp->root_cluster);
	return 0;
}

/* The boot region's checksum against each word of sector 11: *mismatch,
 * and on a mismatch both sums kept in xp.  Last, so that when forced past
 * a mismatch the fields were still all checked.  The region, checksum
 * sector included. */
static int check_boot_checksum(struct fs_ctx *ctx, struct exfat_priv *xp, bool *mismatch)
{
	uint32_t sector_size = 1u << xp->sector_shift, sum;
	const unsigned char *region;
	int err = 0;

	region = fs_map(ctx, 0, (size_t)BOOT_REGION_SECTORS * sector_size, &err);
	if (!region)
		return fs_error(ctx, err, "cannot read the boot region (%u sectors of %u bytes)",
				BOOT_REGION_SECTORS, sector_size);
	sum = boot_checksum(region, sector_size);
	*mismatch = false;
	for (uint32_t i = 0; i < sector_size; i += 4) {
		uint32_t stored = le32(region + BOOT_CHECKSUM_SECTOR * sector_size + i);

		if (stored != sum) {
			*mismatch = true;
			xp->checksum = sum;
			xp->stored_checksum = stored;
			break;
		}
	}
	return 0;
}

/*
 * Read and validate the main boot sector, every field as hostile, then the
 * boot region checksum.  Fills xp and returns 0, or a negative errno with
 * the reason recorded: -EINVAL for a field out of range, -ENOTSUP for an
 * unknown revision.  A checksum mismatch is no error here: *mismatch is
 * then true, and the caller decides (probe declines, open refuses
 * unless forced).
 */
static int exfat_parse(struct fs_ctx *ctx, struct exfat_priv *xp, bool *mismatch)
{
	const unsigned char *bs;
	int r, err = 0;

	bs = fs_map(ctx, 0, 512, &err);
	if (!bs)
		return fs_error(ctx, err, "cannot read the main boot sector");
	r = check_marks(ctx, bs);
	if (r == 0)
		r = check_sizes(ctx, bs);
	if (r < 0)
		return r;
	read_fields(bs, xp);
	r = check_volume(ctx, xp);
	if (r == 0)
		r = check_fat_and_heap(ctx, xp);
	if (r == 0)
		r = check_boot_checksum(ctx, xp, mismatch);
	return r;
}

static int exfat_probe(struct fs_ctx *ctx)
{
	struct exfat_priv xp;
	bool mismatch = false;
	int r;

	memset(&xp, 0, sizeof(xp));
	r = exfat_parse(ctx, &xp, &mismatch);
	if (r == -EIO || r == -ENOMEM)
		return r;
	/* -ENOTSUP: ours, and open() says why it refuses.  A corrupt or
	 * mis-summed boot region is declined: copied raw. */
	if (r == -ENOTSUP)
		return 0;
	return r < 0 || mismatch ? 1 : 0;
}

/* The bitmap unit: as large as a cluster (at most 1 MiB) while the cluster
 * heap still starts on a unit boundary. */
static uint32_t choose_block_size(const struct exfat_priv *xp)
{
	uint64_t heap_bytes = (uint64_t)xp->heap_offset << xp->sector_shift;
	uint64_t bs = cluster_bytes(xp);

	if (bs > MAX_BLOCK_SIZE)
		bs = MAX_BLOCK_SIZE;
	while (heap_bytes % bs)
		bs >>= 1;   /* stops at the sector size, which divides heap_bytes */
	return (uint32_t)bs;
}

static int exfat_open(struct fs_ctx *ctx, void *priv)
{
	struct exfat_priv *xp = priv;
	uint64_t volume_bytes;
	bool mismatch = false;
	int r;

	r = exfat_parse(ctx, xp, &mismatch);
	if (r < 0)
		return r;
	if (mismatch) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"boot region checksum 0x%08x does not match sector 11's 0x%08x; run fsck.exfat, which restores the region from its backup",
					xp->checksum, xp->stored_checksum);
		fs_warn(ctx, "boot region checksum mismatch; copied as it is (forced)");
	}
	if (xp->volume_flags & VOL_DIRTY) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"exFAT volume is marked dirty (VolumeFlags 0x%04x: not cleanly unmounted); run fsck.exfat (or chkdsk on Windows)",
					xp->volume_flags);
		fs_warn(ctx, "exFAT volume marked dirty; copied as it is (forced)");
	}
	if (xp->volume_flags & VOL_MEDIA_FAILURE)
		fs_warn(ctx, "exFAT MediaFailure flag set: the medium reported errors");

	xp->block_size = choose_block_size(xp);
	xp->heap_block = ((uint64_t)xp->heap_offset << xp->sector_shift) / xp->block_size;
	xp->blocks_per_cluster = cluster_bytes(xp) / xp->block_size;
	volume_bytes = xp->volume_sectors << xp->sector_shift;
	r = fs_set_geometry(ctx, xp->block_size, volume_bytes / xp->block_size);
	if (r < 0)
		return fs_error(ctx, r, "cannot declare %llu blocks of %u bytes",
				(unsigned long long)(volume_bytes / xp->block_size),
				xp->block_size);

	xp->buf = malloc(IO_CHUNK);
	xp->fat_window = malloc((size_t)FAT_WINDOW_ENTRIES * 4);
	if (!xp->buf || !xp->fat_window)
		return fs_error(ctx, -ENOMEM, "out of memory");
	xp->window_first = UINT64_MAX;
	return 0;
}

/* FAT entry c of the active FAT, through a window of FAT_WINDOW_ENTRIES. */
static int fat_next(struct fs_ctx *ctx, struct exfat_priv *xp, uint32_t c, uint32_t *next)
{
	uint64_t entries = (uint64_t)xp->cluster_count + FIRST_CLUSTER;

	if (xp->window_first == UINT64_MAX || c < xp->window_first ||
	    c - xp->window_first >= xp->window_len) {
		uint64_t first = c - c % FAT_WINDOW_ENTRIES;
		uint64_t n = entries - first < FAT_WINDOW_ENTRIES ? entries - first :
								  FAT_WINDOW_ENTRIES;
		uint64_t fat = (uint64_t)xp->fat_offset +
			       (uint64_t)xp->active_fat * xp->fat_length;
		int r = fs_read(ctx, (fat << xp->sector_shift) + first * 4, xp->fat_window,
				(size_t)n * 4);

		if (r < 0)
			return fs_error(ctx, r, "cannot read FAT entries %llu..",
					(unsigned long long)first);
		xp->window_first = first;
		xp->window_len = n;
	}
	*next = le32(xp->fat_window + (c - xp->window_first) * 4);
	return 0;
}

/*
 * Step from cluster c to the next one of its chain.  *c becomes the next
 * cluster, or FAT_EOF at the end.  Free, bad or out-of-range links are
 * errors (-EINVAL): `what` names the chain.
 */
static int chain_step(struct fs_ctx *ctx, struct exfat_priv *xp, uint32_t *c,
		      const char *what)
{
	uint32_t next = 0;
	int r = fat_next(ctx, xp, *c, &next);

	if (r < 0)
		return r;
	if (next == FAT_EOF || heap_cluster(xp, next)) {
		*c = next;
		return 0;
	}
	return fs_error(ctx, -EINVAL, "%s: FAT entry of cluster %u is 0x%08x (%s)", what, *c,
			next, next == 0 ? "free" : next == FAT_BAD ? "bad" : "out of range");
}

/* Clusters in a chain of `length` bytes (at least one). */
static uint64_t chain_clusters(const struct exfat_priv *xp, uint64_t length)
{
	uint64_t n = (length >> xp->cluster_shift) +
		     ((length & (cluster_bytes(xp) - 1)) ? 1 : 0);
	return n ? n : 1;
}

/* Scan the root directory for the allocation bitmap of the active FAT and
 * the up-case table. */
struct root_scan {
	struct exfat_stream bitmap;
	struct exfat_stream upcase;
	unsigned bitmaps_seen;
};

/* One root directory entry; returns 1 at the end-of-directory entry. */
static int root_entry(struct fs_ctx *ctx, const struct exfat_priv *xp,
		      const unsigned char *e, struct root_scan *rs)
{
	struct exfat_stream s;

	if (e[0] == DENTRY_END)
		return 1;
	if (e[0] != DENTRY_BITMAP && e[0] != DENTRY_UPCASE)
		return 0;
	s.found = true;
	s.first = le32(e + DENTRY_FIRST_CLUSTER);
	s.length = le64(e + DENTRY_DATA_LENGTH);
	if (e[0] == DENTRY_UPCASE) {
		if (rs->upcase.found)
			return fs_error(ctx, -EINVAL, "two up-case table entries in the root directory");
		rs->upcase = s;
		return 0;
	}
	rs->bitmaps_seen++;
	if ((e[BITMAP_FLAGS] & 1) != xp->active_fat)
		return 0;   /* the other bitmap of a TexFAT volume */
	if (rs->bitmap.found)
		return fs_error(ctx, -EINVAL, "two allocation bitmap entries for FAT %u",
				xp->active_fat + 1);
	rs->bitmap = s;
	return 0;
}

/* The most clusters a directory can span: 256 MiB, and never more than
 * the heap holds.  A longer chain is a loop. */
static uint64_t dir_cluster_limit(const struct exfat_priv *xp)
{
	uint64_t limit = MAX_DIR_BYTES >> xp->cluster_shift;

	if (limit == 0)
		limit = 1;
	return limit < xp->cluster_count ? limit : xp->cluster_count;
}

static int scan_root(struct fs_ctx *ctx, struct exfat_priv *xp, struct root_scan *rs)
{
	uint64_t limit = dir_cluster_limit(xp), steps = 0;
	uint64_t piece = cluster_bytes(xp) < IO_CHUNK ? cluster_bytes(xp) : IO_CHUNK;
	uint32_t c = xp->root_cluster;
	int r;

	memset(rs, 0, sizeof(*rs));
	while (c != FAT_EOF) {
		if (++steps > limit)
			return fs_error(ctx, -EINVAL,
					"root directory chain longer than %llu clusters (a loop?)",
					(unsigned long long)limit);
		for (uint64_t off = 0; off < cluster_bytes(xp); off += piece) {
			r = fs_read(ctx, cluster_offset(xp, c) + off, xp->buf, (size_t)piece);
			if (r < 0)
				return fs_error(ctx, r, "cannot read root directory cluster %u", c);
			for (uint64_t i = 0; i < piece; i += DENTRY_SIZE) {
				r = root_entry(ctx, xp, xp->buf + i, rs);
				if (r < 0)
					return r;
				if (r == 1)
					return 0;
			}
		}
		r = chain_step(ctx, xp, &c, "root directory");
		if (r < 0)
			return r;
	}
	return 0;
}

/* A run of set bitmap bits waiting to be marked in one call. */
struct cluster_run {
	uint64_t first;   /* index into the heap: cluster - 2 */
	uint64_t count;
};

static int flush_run(struct fs_ctx *ctx, const struct exfat_priv *xp,
		     struct cluster_run *run)
{
	int r;

	if (!run->count)
		return 0;
	r = fs_mark_used(ctx, xp->heap_block + run->first * xp->blocks_per_cluster,
			 run->count * xp->blocks_per_cluster);
	if (r < 0)
		return fs_error(ctx, r, "clusters %llu.. outside the volume",
				(unsigned long long)(run->first + FIRST_CLUSTER));
	run->count = 0;
	return 0;
}

/* Bitmap bytes p[0..n) describe heap clusters from index `first` on (a
 * multiple of 8); only the first cluster_count bits count. */
static int scan_bitmap_piece(struct fs_ctx *ctx, const struct exfat_priv *xp,
			     const unsigned char *p, uint64_t n, uint64_t first,
			     struct cluster_run *run, uint64_t *used)
{
	uint64_t end = first + n * 8;
	int r;

	if (end > xp->cluster_count)
		end = xp->cluster_count;
	for (uint64_t i = first; i < end; i++) {
		unsigned char byte = p[(i - first) >> 3];

		/* Whole bytes of zeros or ones, the common case. */
		if (!(i & 7) && end - i >= 8 && (byte == 0x00 || byte == 0xFF)) {
			if (byte == 0x00) {
				r = flush_run(ctx, xp, run);
				if (r < 0)
					return r;
			} else if (run->count && run->first + run->count == i) {
				run->count += 8;
				*used += 8;
			} else {
				r = flush_run(ctx, xp, run);
				if (r < 0)
					return r;
				run->first = i;
				run->count = 8;
				*used += 8;
			}
			i += 7;
			continue;
		}
		if (!((byte >> (i & 7)) & 1)) {
			r = flush_run(ctx, xp, run);
			if (r < 0)
				return r;
			continue;
		}
		++*used;
		if (run->count && run->first + run->count == i) {
			run->count++;
			continue;
		}
		r = flush_run(ctx, xp, run);
		if (r < 0)
			return r;
		run->first = i;
		run->count = 1;
	}
	return 0;
}

/* Read the bitmap along its cluster chain and mark the allocated clusters. */
static int read_bitmap(struct fs_ctx *ctx, struct exfat_priv *xp,
		       const struct exfat_stream *bm, uint64_t *used)
{
	uint64_t need = ((uint64_t)xp->cluster_count + 7) / 8;   /* bytes */
	uint64_t done = 0;
	uint32_t c = bm->first;
	struct cluster_run run = { 0, 0 };
	int r;

	*used = 0;
	while (done < need) {
		uint64_t in_cluster = need - done < cluster_bytes(xp) ? need - done :
									 cluster_bytes(xp);

		for (uint64_t off = 0; off < in_cluster; off += IO_CHUNK) {
			uint64_t n = in_cluster - off < IO_CHUNK ? in_cluster - off : IO_CHUNK;

			r = fs_read(ctx, cluster_offset(xp, c) + off, xp->buf, (size_t)n);
			if (r < 0)
				return fs_error(ctx, r, "cannot read allocation bitmap cluster %u", c);
			r = scan_bitmap_piece(ctx, xp, xp->buf, n, (done + off) * 8, &run, used);
			if (r < 0)
				return r;
		}
		done += in_cluster;
		if (done == need)
			break;
		/* At most need / cluster steps: a loop cannot run on. */
		r = chain_step(ctx, xp, &c, "allocation bitmap");
		if (r < 0)
			return r;
		if (c == FAT_EOF)
			return fs_error(ctx, -EINVAL,
					"allocation bitmap chain ends after %llu of %llu bytes",
					(unsigned long long)done, (unsigned long long)need);
	}
	return flush_run(ctx, xp, &run);
}

static bool cluster_marked(const struct fs_ctx *ctx, const struct exfat_priv *xp, uint32_t c)
{
	return fs_is_used(ctx, xp->heap_block + (uint64_t)(c - FIRST_CLUSTER) * xp->blocks_per_cluster);
}

/*
 * Every cluster of a chain (`clusters` long, or, when clusters is 0, up to
 * its end and at most `limit` long) must be marked in the bitmap.  A missing one is an
 * inconsistency: -EUCLEAN unless forced; forced, it is marked used so that
 * it is copied anyway.
 */
static int check_chain_marked(struct fs_ctx *ctx, struct exfat_priv *xp, uint32_t first,
			      uint64_t clusters, uint64_t limit, const char *what)
{
	uint32_t c = first;
	int r;

	if (clusters)
		limit = clusters;
	for (uint64_t i = 0; c != FAT_EOF; i++) {
		if (i == limit)
			return fs_error(ctx, -EINVAL, "%s chain longer than %llu clusters (a loop?)",
					what, (unsigned long long)limit);
		if (!cluster_marked(ctx, xp, c)) {
			if (!fs_forced(ctx))
				return fs_error(ctx, -EUCLEAN,
						"%s cluster %u is free in the allocation bitmap; run fsck.exfat (or chkdsk on Windows)",
						what, c);
			fs_warn(ctx, "%s cluster %u is free in the allocation bitmap; copied anyway (forced)",
				what, c);
			r = fs_mark_used(ctx, xp->heap_block +
					 (uint64_t)(c - FIRST_CLUSTER) * xp->blocks_per_cluster,
					 xp->blocks_per_cluster);
			if (r < 0)
				return fs_error(ctx, r, "cluster %u outside the volume", c);
		}
		if (clusters && i + 1 == clusters)
			break;
		r = chain_step(ctx, xp, &c, what);
		if (r < 0)
			return r;
		if (clusters && c == FAT_EOF)
			return fs_error(ctx, -EINVAL, "%s chain ends after %llu of %llu clusters",
					what, (unsigned long long)(i + 1),
					(unsigned long long)clusters);
	}
	return 0;
}

/* The up-case table is only used for this cross-check: a broken entry
 * means the volume needs repair, not that its layout is unreadable. */
static int check_upcase(struct fs_ctx *ctx, struct exfat_priv *xp, const struct exfat_stream *up)
{
	if (!up->found)
		return 0;   /* Linux falls back to a built-in table */
	if (!heap_cluster(xp, up->first) || up->length == 0 || up->length > MAX_UPCASE_BYTES) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"up-case table entry (cluster %u, %llu bytes) is invalid; run fsck.exfat",
					up->first, (unsigned long long)up->length);
		fs_warn(ctx, "up-case table entry is invalid; copied as it is (forced)");
		return 0;
	}
	return check_chain_marked(ctx, xp, up->first, chain_clusters(xp, up->length), 0,
				  "up-case table");
}

/* PercentInUse against the bitmap: a warning only (see the top comment).
 * Implementations round either way (libexfat to nearest), so both the
 * floor and the ceiling of the exact share are accepted. */
static void check_percent(struct fs_ctx *ctx, const struct exfat_priv *xp, uint64_t used)
{
	uint64_t total = xp->cluster_count;
	uint64_t lo = used * 100 / total, hi = (used * 100 + total - 1) / total;
	unsigned p = xp->percent_in_use;

	if (p == PERCENT_UNKNOWN || p == lo || p == hi)
		return;
	fs_warn(ctx, "PercentInUse is %u%% but the allocation bitmap has %llu of %llu clusters (%llu%%) in use; the field is only a hint",
		p, (unsigned long long)used, (unsigned long long)total,
		(unsigned long long)lo);
}

static int exfat_used_blocks(struct fs_ctx *ctx, void *priv)
{
	struct exfat_priv *xp = priv;
	struct root_scan rs;
	uint64_t need, used;
	int r;

	/* Boot regions, FAT(s) and everything else before the heap. */
	r = fs_mark_used(ctx, 0, xp->heap_block);
	if (r < 0)
		return fs_error(ctx, r, "metadata before the cluster heap is outside the volume");

	r = scan_root(ctx, xp, &rs);
	if (r < 0)
		return r;
	if (!rs.bitmap.found)
		return fs_error(ctx, -EINVAL,
				"no allocation bitmap entry for FAT %u in the root directory (%u seen)",
				xp->active_fat + 1, rs.bitmaps_seen);
	need = ((uint64_t)xp->cluster_count + 7) / 8;
	if (!heap_cluster(xp, rs.bitmap.first))
		return fs_error(ctx, -EINVAL, "allocation bitmap starts at cluster %u, out of range",
				rs.bitmap.first);
	if (rs.bitmap.length < need)
		return fs_error(ctx, -EINVAL,
				"allocation bitmap of %llu bytes is too short for %u clusters",
				(unsigned long long)rs.bitmap.length, xp->cluster_count);
	if (rs.bitmap.length > need)
		fs_warn(ctx, "allocation bitmap of %llu bytes is longer than the %llu its %u clusters need",
			(unsigned long long)rs.bitmap.length, (unsigned long long)need,
			xp->cluster_count);

	r = read_bitmap(ctx, xp, &rs.bitmap, &used);
	if (r < 0)
		return r;

	/* Clusters the volume cannot be without must be allocated. */
	r = check_chain_marked(ctx, xp, rs.bitmap.first, chain_clusters(xp, need), 0,
			       "allocation bitmap");
	if (r >= 0)
		r = check_chain_marked(ctx, xp, xp->root_cluster, 0, dir_cluster_limit(xp),
				       "root directory");
	if (r >= 0)
		r = check_upcase(ctx, xp, &rs.upcase);
	if (r < 0)
		return r;
	check_percent(ctx, xp, used);
	return 0;
}

static void exfat_close(struct fs_ctx *ctx, void *priv)
{
	struct exfat_priv *xp = priv;

	(void)ctx;
	free(xp->buf);
	free(xp->fat_window);
	xp->buf = xp->fat_window = NULL;
}

static const char *const exfat_blkid_types[] = { "exfat", NULL };

static const struct fs_magic exfat_magics[] = {
	{ "EXFAT   ", 8, BS_FS_NAME },
	{ NULL, 0, 0 },
};

const struct fs_plugin fs_plugin_exfat = {
	.name = "exfat",
	.blkid_types = exfat_blkid_types,
	.min_size = MIN_VOLUME_BYTES,
	.magics = exfat_magics,
	.priv_size = sizeof(struct exfat_priv),
	.probe = exfat_probe,
	.open = exfat_open,
	.used_blocks = exfat_used_blocks,
	.close = exfat_close,
};
