/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * FAT12, FAT16 and FAT32.
 *
 * Used sectors: everything before the data region (boot sector and the rest
 * of the reserved area, every copy of the FAT, the FAT12/16 root directory),
 * then each data cluster whose FAT entry is not free.  Clusters marked bad
 * hold no data and are left out.  The bitmap unit is the logical sector.
 *
 * The FAT type follows Microsoft's specification ("FAT: General Overview of
 * On-Disk Format", 1.03): it is decided by the number of data clusters, never
 * by the "FAT16   " label.  One exception, which dosfstools and Linux share:
 * a boot sector laid out for FAT32 (no 16-bit FAT size, no fixed root
 * directory) with fewer than 65525 clusters, as `mkfs.fat -F 32` makes on
 * small volumes, cannot be FAT12/16 and is read as FAT32.
 */
#include "imager/fsplugin.h"
#include "imager/bytes.h"

#include <errno.h>
#include <stdlib.h>

#define FAT_BOOT_SECTOR_LEN   512u
#define FAT12_MIN_CLUSTERS_16 4085u        /* fewer clusters: FAT12 */
#define FAT16_MIN_CLUSTERS_32 65525u       /* fewer clusters: FAT16 */
#define FAT32_MAX_CLUSTERS    0x0FFFFFF5u  /* highest cluster 0x0FFFFFF6 */
#define FAT_MAX_CLUSTER_BYTES (256u << 10) /* Windows stops at 64 KiB; Linux
					      and dosfstools accept 256 KiB */
#define FAT_FIRST_CLUSTER     2u

/* Boot sector fields shared by every FAT (byte offsets). */
#define BPB_BYTES_PER_SECTOR  11
#define BPB_SECTORS_PER_CLUS  13
#define BPB_RESERVED_SECTORS  14
#define BPB_NUM_FATS          16
#define BPB_ROOT_ENTRIES      17
#define BPB_TOTAL_SECTORS16   19
#define BPB_MEDIA             21
#define BPB_FAT_SIZE16        22
#define BPB_TOTAL_SECTORS32   32
/* FAT12/16 extended boot record. */
#define BS16_STATE            0x25
#define BS16_SIGNATURE        0x26
/* FAT32 extended BPB. */
#define BPB32_FAT_SIZE        36
#define BPB32_EXT_FLAGS       40
#define BPB32_VERSION         42
#define BPB32_ROOT_CLUSTER    44
#define BPB32_FSINFO_SECTOR   48
#define BS32_STATE            0x41
#define BS32_SIGNATURE        0x42

#define BS_STATE_DIRTY        0x01  /* set by Linux while mounted */
#define EXT_FLAGS_NO_MIRROR   0x0080
#define EXT_FLAGS_ACTIVE_FAT  0x000F
#define FAT16_CLEAN_SHUTDOWN  0x8000u      /* in FAT[1]; clear = dirty */
#define FAT32_CLEAN_SHUTDOWN  0x08000000u
#define FAT32_ENTRY_MASK      0x0FFFFFFFu

/* FSInfo sector. */
#define FSINFO_LEAD_SIG_OFF   0
#define FSINFO_STRUC_SIG_OFF  484
#define FSINFO_FREE_COUNT_OFF 488
#define FSINFO_TRAIL_SIG_OFF  508
#define FSINFO_LEAD_SIG       0x41615252u
#define FSINFO_STRUC_SIG      0x61417272u
#define FSINFO_TRAIL_SIG      0xAA550000u
#define FSINFO_UNKNOWN        0xFFFFFFFFu

/* FAT tables larger than FS_MAP_MAX are read in pieces of this size, a
 * multiple of 3 bytes (two FAT12 entries) and of 4 (one FAT32 entry), so a
 * piece always starts and ends on whole entries. */
#define FAT_CHUNK_BYTES       (3u << 20)

struct fat_priv {
	unsigned type;               /* 12, 16 or 32 */
	uint32_t bytes_per_sector;
	uint32_t sectors_per_cluster;
	uint32_t total_sectors;
	uint64_t data_start;         /* first sector of cluster 2 */
	uint64_t fat_offset;         /* byte offset of the FAT that is read */
	uint32_t clusters;           /* data clusters: numbers 2..clusters+1 */
	uint32_t fsinfo_sector;      /* FAT32; 0 when absent */
	unsigned char *chunk;        /* FAT piece buffer, for very large FATs */
};

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* The media descriptor values the FAT specification allows. */
static bool valid_media(unsigned m)
{
	return m == 0xF0 || m >= 0xF8;
}

/* Bytes holding the first n entries of a FAT of the given type. */
static uint64_t fat_table_bytes(unsigned type, uint64_t n)
{
	if (type == 12)
		return (n * 3 + 1) / 2;
	return n * (type / 8);
}

/* Entry i of a FAT piece that starts at an even entry (FAT12 packs two
 * entries in three bytes, so the piece must start on a pair). */
static uint32_t fat_entry(unsigned type, const unsigned char *p, uint64_t i)
{
	if (type == 12) {
		uint16_t v = le16(p + i + i / 2);
		return (i & 1) ? v >> 4 : v & 0x0FFF;
	}
	if (type == 16)
		return le16(p + 2 * i);
	return le32(p + 4 * i) & FAT32_ENTRY_MASK;
}

static uint32_t fat_bad_mark(unsigned type)
{
	return type == 12 ? 0xFF7u : type == 16 ? 0xFFF7u : 0x0FFFFFF7u;
}

/* The boot sector's fields every FAT has. */
struct fat_bpb {
	uint32_t bps, spc, reserved, nfats, root_entries, total, fat_size;
	bool fat32_layout;           /* no 16-bit FAT size, no fixed root directory */
};

/* The shared fields, each in its range, and the sectors inside the device. */
static int read_bpb(struct fs_ctx *ctx, const unsigned char *bs, struct fat_bpb *b)
{
	uint16_t total16 = le16(bs + BPB_TOTAL_SECTORS16);

	b->bps = le16(bs + BPB_BYTES_PER_SECTOR);
	b->spc = bs[BPB_SECTORS_PER_CLUS];
	b->reserved = le16(bs + BPB_RESERVED_SECTORS);
	b->nfats = bs[BPB_NUM_FATS];
	b->root_entries = le16(bs + BPB_ROOT_ENTRIES);
	if (!is_pow2(b->bps) || b->bps < 512 || b->bps > 4096)
		return fs_error(ctx, -EINVAL, "bad bytes per sector %u", b->bps);
	if (!is_pow2(b->spc) || b->spc > 128)
		return fs_error(ctx, -EINVAL, "bad sectors per cluster %u", b->spc);
	if (b->spc * b->bps > FAT_MAX_CLUSTER_BYTES)
		return fs_error(ctx, -EINVAL, "cluster of %u bytes is too large",
				b->spc * b->bps);
	if (b->reserved < 1)
		return fs_error(ctx, -EINVAL, "no reserved sectors");
	if (b->nfats < 1 || b->nfats > 4)
		return fs_error(ctx, -EINVAL, "bad number of FATs %u", b->nfats);
	if (!valid_media(bs[BPB_MEDIA]))
		return fs_error(ctx, -EINVAL, "bad media descriptor 0x%02x",
				bs[BPB_MEDIA]);
	b->total = total16 ? total16 : le32(bs + BPB_TOTAL_SECTORS32);
	if (b->total == 0)
		return fs_error(ctx, -EINVAL, "total sector count is 0");
	if ((uint64_t)b->total * b->bps > fs_device_size(ctx))
		return fs_error(ctx, -EINVAL,
				"%u sectors of %u bytes do not fit in the %llu bytes of the device",
				b->total, b->bps, (unsigned long long)fs_device_size(ctx));
	return 0;
}

/* Only a boot sector without a 16-bit FAT size and without a fixed root
 * directory has the FAT32 fields; on FAT12/16 the same bytes are the drive
 * number, the serial number and boot code. */
static int read_fat_size(struct fs_ctx *ctx, const unsigned char *bs, struct fat_bpb *b)
{
	uint16_t fat_size16 = le16(bs + BPB_FAT_SIZE16);

	b->fat32_layout = fat_size16 == 0 && b->root_entries == 0;
	if (fat_size16)
		b->fat_size = fat_size16;
	else if (b->fat32_layout)
		b->fat_size = le32(bs + BPB32_FAT_SIZE);
	else
		return fs_error(ctx, -EINVAL, "FAT size is 0 (FAT12/16 layout)");
	if (b->fat_size == 0)
		return fs_error(ctx, -EINVAL, "FAT size is 0");
	return 0;
}

/* Where cluster 2 starts, and how many whole clusters follow. */
static int data_region(struct fs_ctx *ctx, const struct fat_bpb *b, uint64_t *data_start,
		       uint64_t *clusters)
{
	uint64_t root_sectors = ((uint64_t)b->root_entries * 32 + b->bps - 1) / b->bps;

	*data_start = b->reserved + (uint64_t)b->nfats * b->fat_size + root_sectors;
	if (*data_start >= b->total)
		return fs_error(ctx, -EINVAL,
				"data region starts at sector %llu, past the %u sectors of the filesystem",
				(unsigned long long)*data_start, b->total);
	*clusters = (b->total - *data_start) / b->spc;
	if (*clusters == 0)
		return fs_error(ctx, -EINVAL, "no room for a data cluster");
	return 0;
}

/* The type the cluster count makes (see the top of the file), checked
 * against the layout of the boot sector and against the FAT's size. */
static int fat_type(struct fs_ctx *ctx, const struct fat_bpb *b, uint64_t clusters, bool opening,
		    unsigned *type)
{
	*type = clusters < FAT12_MIN_CLUSTERS_16 ? 12 :
		clusters < FAT16_MIN_CLUSTERS_32 ? 16 : 32;
	if (*type == 32 && !b->fat32_layout)
		return fs_error(ctx, -EINVAL,
				"%llu clusters make FAT32, but the boot sector is laid out for FAT12/16",
				(unsigned long long)clusters);
	if (*type != 32 && b->fat32_layout) {
		if (opening)
			fs_warn(ctx, "FAT32 with only %llu clusters (fewer than %u); read as FAT32, as Linux does",
				(unsigned long long)clusters, FAT16_MIN_CLUSTERS_32);
		*type = 32;
	}
	if (*type != 32 && b->root_entries == 0)
		return fs_error(ctx, -EINVAL, "FAT%u without a root directory", *type);
	if (*type == 32 && clusters > FAT32_MAX_CLUSTERS)
		return fs_error(ctx, -EINVAL, "%llu clusters are too many for FAT32",
				(unsigned long long)clusters);
	if ((uint64_t)b->fat_size * b->bps < fat_table_bytes(*type, clusters + FAT_FIRST_CLUSTER))
		return fs_error(ctx, -EINVAL,
				"FAT of %u sectors is too small for %llu clusters",
				b->fat_size, (unsigned long long)clusters);
	return 0;
}

/* The FAT32 extended BPB: version, root directory, which FAT is read, and
 * the FSInfo sector. */
static int read_fat32_fields(struct fs_ctx *ctx, const unsigned char *bs, const struct fat_bpb *b,
			     uint64_t clusters, struct fat_priv *fp)
{
	uint16_t ext_flags = le16(bs + BPB32_EXT_FLAGS);
	uint32_t root_cluster = le32(bs + BPB32_ROOT_CLUSTER);
	uint16_t fsinfo = le16(bs + BPB32_FSINFO_SECTOR);

	if (le16(bs + BPB32_VERSION) != 0)
		return fs_error(ctx, -ENOTSUP, "FAT32 version %u.%u",
				bs[BPB32_VERSION + 1], bs[BPB32_VERSION]);
	if (root_cluster < FAT_FIRST_CLUSTER ||
	    root_cluster - FAT_FIRST_CLUSTER >= clusters)
		return fs_error(ctx, -EINVAL, "root directory cluster %u out of range",
				root_cluster);
	/* With mirroring off only the active FAT is kept up to date. */
	if (ext_flags & EXT_FLAGS_NO_MIRROR) {
		uint32_t active = ext_flags & EXT_FLAGS_ACTIVE_FAT;

		if (active >= b->nfats)
			return fs_error(ctx, -EINVAL, "active FAT %u of %u",
					active, b->nfats);
		fp->fat_offset += (uint64_t)active * b->fat_size * b->bps;
	}
	if (fsinfo != 0 && fsinfo != 0xFFFF && fsinfo < b->reserved)
		fp->fsinfo_sector = fsinfo;
	return 0;
}

/*
 * Read and validate the boot sector, every field as hostile.  Fills fp and
 * returns 0, or a negative errno with the reason recorded.  Warnings are
 * recorded only when `opening` (probe() runs on a context of its own).
 */
static int fat_parse(struct fs_ctx *ctx, struct fat_priv *fp, bool opening)
{
	const unsigned char *bs;
	struct fat_bpb b = { 0 };
	uint64_t data_start = 0, clusters = 0;
	unsigned type = 0;
	int r, err = 0;

	bs = fs_map(ctx, 0, FAT_BOOT_SECTOR_LEN, &err);
	if (!bs)
		return fs_error(ctx, err, "cannot read the boot sector");
	r = read_bpb(ctx, bs, &b);
	if (r == 0)
		r = read_fat_size(ctx, bs, &b);
	if (r == 0)
		r = data_region(ctx, &b, &data_start, &clusters);
	if (r == 0)
		r = fat_type(ctx, &b, clusters, opening, &type);
	if (r < 0)
		return r;
	fp->fat_offset = (uint64_t)b.reserved * b.bps;
	fp->fsinfo_sector = 0;
	if (type == 32 && (r = read_fat32_fields(ctx, bs, &b, clusters, fp)) < 0)
		return r;
	fp->type = type;
	fp->bytes_per_sector = b.bps;
	fp->sectors_per_cluster = b.spc;
	fp->total_sectors = b.total;
	fp->data_start = data_start;
	fp->clusters = (uint32_t)clusters;
	return 0;
}

/* Unclean: the boot sector's state byte (Linux sets it while mounted), or
 * the clean-shutdown bit in FAT[1] cleared (Windows). */
static int fat_check_clean(struct fs_ctx *ctx, const struct fat_priv *fp)
{
	const unsigned char *bs, *fat;
	unsigned state_off = fp->type == 32 ? BS32_STATE : BS16_STATE;
	unsigned sig_off = fp->type == 32 ? BS32_SIGNATURE : BS16_SIGNATURE;
	int err = 0;

	bs = fs_map(ctx, 0, FAT_BOOT_SECTOR_LEN, &err);
	if (!bs)
		return fs_error(ctx, err, "cannot read the boot sector");
	/* Without an extended boot signature that byte is boot code. */
	if ((bs[sig_off] == 0x29 || bs[sig_off] == 0x28) &&
	    (bs[state_off] & BS_STATE_DIRTY)) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"FAT%u marked dirty in its boot sector (not cleanly unmounted)",
					fp->type);
		fs_warn(ctx, "FAT%u marked dirty in its boot sector; copied as it is (forced)",
			fp->type);
	}

	if (fp->type == 12)
		return 0;
	fat = fs_map(ctx, fp->fat_offset, 8, &err);
	if (!fat)
		return fs_error(ctx, err, "cannot read the FAT");
	if (fp->type == 16 ? !(le16(fat + 2) & FAT16_CLEAN_SHUTDOWN)
			   : !(le32(fat + 4) & FAT32_CLEAN_SHUTDOWN)) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"FAT%u clean-shutdown bit is clear (not cleanly unmounted)",
					fp->type);
		fs_warn(ctx, "FAT%u clean-shutdown bit is clear; copied as it is (forced)",
			fp->type);
	}
	return 0;
}

static int fat_probe(struct fs_ctx *ctx)
{
	struct fat_priv fp = { 0 };
	int r = fat_parse(ctx, &fp, false);

	/* -ENOTSUP: ours, but open() will refuse it and say why. */
	if (r == -EIO || r == -ENOMEM)
		return r;
	return r < 0 && r != -ENOTSUP ? 1 : 0;
}

static int fat_open(struct fs_ctx *ctx, void *priv)
{
	struct fat_priv *fp = priv;
	int r;

	r = fat_parse(ctx, fp, true);
	if (r < 0)
		return r;
	r = fat_check_clean(ctx, fp);
	if (r < 0)
		return r;
	r = fs_set_geometry(ctx, fp->bytes_per_sector, fp->total_sectors);
	if (r < 0)
		return fs_error(ctx, r, "cannot declare %u sectors of %u bytes",
				fp->total_sectors, fp->bytes_per_sector);
	return 0;
}

/* A run of used clusters waiting to be marked in one call. */
struct cluster_run {
	uint64_t first;   /* cluster number */
	uint64_t count;
};

static int flush_run(struct fs_ctx *ctx, const struct fat_priv *fp,
		     struct cluster_run *run)
{
	int r;

	if (!run->count)
		return 0;
	r = fs_mark_used(ctx, fp->data_start +
			 (run->first - FAT_FIRST_CLUSTER) * fp->sectors_per_cluster,
			 run->count * fp->sectors_per_cluster);
	run->count = 0;
	if (r < 0)
		return fs_error(ctx, r, "clusters %llu.. outside the filesystem",
				(unsigned long long)run->first);
	return 0;
}

/* Entries [first, first+n) of the FAT, whose bytes start at p. */
static int scan_piece(struct fs_ctx *ctx, const struct fat_priv *fp,
		      const unsigned char *p, uint64_t first, uint64_t n,
		      struct cluster_run *run, uint64_t *free_clusters)
{
	uint32_t bad = fat_bad_mark(fp->type);
	uint64_t last = (uint64_t)fp->clusters + FAT_FIRST_CLUSTER;  /* exclusive */

	for (uint64_t i = 0; i < n; i++) {
		uint64_t cluster = first + i;
		uint32_t v;
		int r;

		if (cluster < FAT_FIRST_CLUSTER || cluster >= last)
			continue;
		v = fat_entry(fp->type, p, i);
		if (v == 0)
			++*free_clusters;
		if (v == 0 || v == bad) {
			r = flush_run(ctx, fp, run);
			if (r < 0)
				return r;
			continue;
		}
		if (run->count && run->first + run->count == cluster) {
			run->count++;
			continue;
		}
		r = flush_run(ctx, fp, run);
		if (r < 0)
			return r;
		run->first = cluster;
		run->count = 1;
	}
	return 0;
}

static int scan_fat(struct fs_ctx *ctx, struct fat_priv *fp, uint64_t *free_clusters)
{
	uint64_t entries = (uint64_t)fp->clusters + FAT_FIRST_CLUSTER;
	uint64_t bytes = fat_table_bytes(fp->type, entries);
	struct cluster_run run = { 0, 0 };
	int r, err = 0;

	*free_clusters = 0;
	if (bytes <= FS_MAP_MAX) {
		const unsigned char *p = fs_map(ctx, fp->fat_offset, (size_t)bytes, &err);

		if (!p)
			return fs_error(ctx, err, "cannot read the FAT (%llu bytes)",
					(unsigned long long)bytes);
		r = scan_piece(ctx, fp, p, 0, entries, &run, free_clusters);
	} else {
		uint64_t per_chunk = fp->type == 12 ? FAT_CHUNK_BYTES / 3 * 2 :
				     FAT_CHUNK_BYTES / (fp->type / 8);

		fp->chunk = malloc(FAT_CHUNK_BYTES);
		if (!fp->chunk)
			return fs_error(ctx, -ENOMEM, "no memory for the FAT");
		r = 0;
		for (uint64_t first = 0; first < entries && r >= 0; first += per_chunk) {
			uint64_t n = entries - first < per_chunk ? entries - first : per_chunk;
			uint64_t off = fat_table_bytes(fp->type, first);

			r = fs_read(ctx, fp->fat_offset + off, fp->chunk,
				    (size_t)fat_table_bytes(fp->type, n));
			if (r < 0)
				r = fs_error(ctx, r, "cannot read the FAT at byte %llu",
					     (unsigned long long)(fp->fat_offset + off));
			else
				r = scan_piece(ctx, fp, fp->chunk, first, n, &run,
					       free_clusters);
		}
		free(fp->chunk);
		fp->chunk = NULL;
	}
	if (r < 0)
		return r;
	return flush_run(ctx, fp, &run);
}

/* The FSInfo free count is only a hint (Windows leaves it stale), so a
 * disagreement is worth a warning, not a refusal. */
static void check_fsinfo(struct fs_ctx *ctx, const struct fat_priv *fp,
			 uint64_t free_clusters)
{
	const unsigned char *fi;
	uint32_t hint;
	int err = 0;

	if (!fp->fsinfo_sector)
		return;
	fi = fs_map(ctx, (uint64_t)fp->fsinfo_sector * fp->bytes_per_sector, 512, &err);
	if (!fi || le32(fi + FSINFO_LEAD_SIG_OFF) != FSINFO_LEAD_SIG ||
	    le32(fi + FSINFO_STRUC_SIG_OFF) != FSINFO_STRUC_SIG ||
	    le32(fi + FSINFO_TRAIL_SIG_OFF) != FSINFO_TRAIL_SIG)
		return;
	hint = le32(fi + FSINFO_FREE_COUNT_OFF);
	if (hint != FSINFO_UNKNOWN && hint != free_clusters)
		fs_warn(ctx, "FSInfo free cluster count %u is stale: the FAT has %llu free",
			hint, (unsigned long long)free_clusters);
}

static int fat_used_blocks(struct fs_ctx *ctx, void *priv)
{
	struct fat_priv *fp = priv;
	uint64_t free_clusters;
	int r;

	/* Reserved area, every FAT copy and the FAT12/16 root directory. */
	r = fs_mark_used(ctx, 0, fp->data_start);
	if (r < 0)
		return fs_error(ctx, r, "metadata region outside the filesystem");
	r = scan_fat(ctx, fp, &free_clusters);
	if (r < 0)
		return r;
	check_fsinfo(ctx, fp, free_clusters);
	return 0;
}

static void fat_close(struct fs_ctx *ctx, void *priv)
{
	struct fat_priv *fp = priv;

	(void)ctx;
	free(fp->chunk);
	fp->chunk = NULL;
}

static const char *const fat_blkid_types[] = { "vfat", "msdos", NULL };

static const struct fs_magic fat_magics[] = {
	{ "FAT12   ", 8, 54 },
	{ "FAT16   ", 8, 54 },
	{ "FAT32   ", 8, 82 },
	/* Weak (partition tables carry it too): probe() decides. */
	{ "\x55\xAA", 2, 510 },
	{ NULL, 0, 0 },
};

const struct fs_plugin fs_plugin_fat = {
	.name = "fat",
	.blkid_types = fat_blkid_types,
	/* Boot sector, one FAT sector, one root directory sector, one cluster. */
	.min_size = 4 * 512,
	.magics = fat_magics,
	.priv_size = sizeof(struct fat_priv),
	.probe = fat_probe,
	.open = fat_open,
	.used_blocks = fat_used_blocks,
	.close = fat_close,
};
