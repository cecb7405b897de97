/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * NTFS (every version Windows writes: 1.2, 3.0, 3.1).
 *
 * Used clusters: the set bits of $Bitmap (MFT record 6, its unnamed $DATA)
 * below nr_clusters; bits at or past it describe no cluster and are
 * ignored.  Plus the backup boot sector, the last sector of the partition:
 * it lies outside nr_clusters (mkntfs and Windows give the volume one
 * sector less than the partition), partclone.ntfs drops it, and then
 * `ntfsfix -n` reports "alternate boot sector BAD".  ntfsfix, libntfs-3g
 * and Linux all look for it in the device's last sector.
 *
 * The format is parsed here rather than through libntfs-3g: the plugin
 * contract wants every byte through fs_read(), no allocation sized by an
 * unchecked field and no output, and libntfs-3g logs, allocates from
 * on-disk sizes and keeps its own caches.  What is read, all bounded:
 *   the boot sector (geometry invariants as libntfs-3g's
 *     ntfs_boot_sector_is_ntfs() and ntfs_boot_sector_parse(): 512..4096
 *     bytes per sector, a power-of-two cluster of at most 2 MiB, encoded as
 *     a negative shift above 64 KiB, reserved FAT fields zero, $MFT and
 *     $MFTMirr inside the volume);
 *   MFT record 0 at mft_lcn, then $MFT's own $DATA runlist (through its
 *     $ATTRIBUTE_LIST when it has one) to reach every other record;
 *   record 6 ($Bitmap), record 3 ($Volume: the dirty flag), record 5 (the
 *     root directory, for hiberfil.sys) and hiberfil.sys's first 4 KiB.
 * Every record and index block has its update sequence checked and
 * applied; every attribute is checked to lie inside its record; every run
 * of a runlist inside the volume's clusters.
 *
 * Refused unless --force (-EUCLEAN):
 *   - a dirty volume ($VOLUME_INFORMATION flag 0x0001): Windows did not
 *     unmount it, or chkdsk is scheduled;
 *   - a hibernated Windows, Fast Startup included: a hiberfil.sys in the
 *     root directory whose data begins with "hibr" or "HIBR", or that holds
 *     fewer than 4096 bytes, which is what libntfs-3g's
 *     ntfs_volume_check_hiberfile() refuses to mount read-write;
 *   - a $Bitmap that leaves clusters of $MFT, $Bitmap, the boot sector or
 *     $MFTMirr free (the cross-check: NTFS keeps no free count to compare);
 *     forced, they are kept;
 *   - a sound boot sector over a $MFT or $Bitmap that cannot be read
 *     (damaged records, runs outside the volume): forced, every cluster is
 *     kept.  A boot sector that fails its checks is not NTFS's: the raw
 *     fallback copies the partition.
 * The bitmap unit is the cluster up to 4 KiB, and 4 KiB for larger ones: the
 * backup boot sector is kept as the whole block holding it, and with 64 KiB
 * or 2 MiB blocks that block would carry that much of the old data found
 * past the volume's last cluster (2% of a small image).  4 KiB blocks keep
 * the bitmap as small as on the usual 4 KiB-cluster volume.  Smaller still
 * when the partition's end is not so aligned (the backup boot sector's
 * block must lie inside the device).
 */
#include "imager/fsplugin.h"
#include "imager/bytes.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- boot sector ---- */
#define BS_OEM_ID            3
#define BS_BYTES_PER_SECTOR  0x0B
#define BS_SECTORS_PER_CLUS  0x0D
#define BS_RESERVED_SECTORS  0x0E
#define BS_FATS              0x10
#define BS_ROOT_ENTRIES      0x11
#define BS_SECTORS16         0x13
#define BS_FAT_SIZE          0x16
#define BS_LARGE_SECTORS     0x20
#define BS_NR_SECTORS        0x28
#define BS_MFT_LCN           0x30
#define BS_MFTMIRR_LCN       0x38
#define BS_CLUS_PER_MFT_REC  0x40
#define BS_CLUS_PER_INDEX    0x44
#define BS_LEN               512u

#define NTFS_MAX_CLUSTER     (2u << 20)   /* Windows 10 1703 and libntfs-3g */
#define NTFS_MAX_BLOCK       4096u        /* the bitmap unit, at most */
#define NTFS_FIXUP_STRIDE    512u         /* update sequence stride, always */
#define NTFS_MAX_RECORD      (64u << 10)  /* Windows writes 1 KiB or 4 KiB */

/* ---- MFT records ---- */
#define REC_USA_OFS          4
#define REC_USA_COUNT        6
#define REC_SEQUENCE         16
#define REC_ATTRS_OFS        20
#define REC_FLAGS            22
#define REC_BYTES_USED       24
#define REC_BYTES_ALLOC      28
#define REC_BASE             32
#define REC_NUMBER           44           /* NTFS 3.1 (usa_ofs >= 0x30) */
#define REC_IN_USE           0x0001
#define REC_IS_DIRECTORY     0x0002
#define MREF_MASK            0x0000FFFFFFFFFFFFull

#define FILE_MFT             0
#define FILE_VOLUME          3
#define FILE_ROOT            5
#define FILE_BITMAP          6

/* ---- attributes ---- */
#define AT_ATTRIBUTE_LIST    0x20u
#define AT_FILE_NAME         0x30u
#define AT_VOLUME_INFO       0x70u
#define AT_DATA              0x80u
#define AT_INDEX_ROOT        0x90u
#define AT_INDEX_ALLOCATION  0xA0u
#define AT_BITMAP            0xB0u
#define AT_END               0xFFFFFFFFu

#define ATTR_TYPE            0
#define ATTR_LENGTH          4
#define ATTR_NON_RESIDENT    8
#define ATTR_NAME_LENGTH     9
#define ATTR_NAME_OFS        10
#define ATTR_FLAGS           12
#define ATTR_VALUE_LENGTH    16           /* resident */
#define ATTR_VALUE_OFS       20
#define ATTR_LOWEST_VCN      16           /* non-resident */
#define ATTR_HIGHEST_VCN     24
#define ATTR_MAPPING_OFS     32
#define ATTR_ALLOC_SIZE      40
#define ATTR_DATA_SIZE       48
#define ATTR_INIT_SIZE       56
#define ATTR_RESIDENT_HDR    24u
#define ATTR_NONRES_HDR      64u

#define ATTR_COMPRESSED      0x00FFu
#define ATTR_ENCRYPTED       0x4000u
#define ATTR_SPARSE          0x8000u

/* $ATTRIBUTE_LIST entries. */
#define AL_TYPE              0
#define AL_LENGTH            4
#define AL_NAME_LENGTH       6
#define AL_NAME_OFS          7
#define AL_LOWEST_VCN        8
#define AL_MREF              16
#define AL_MIN_LEN           26u
#define NTFS_MAX_ATTR_LIST   (256u << 10)

/* $VOLUME_INFORMATION. */
#define VI_MAJOR             8
#define VI_FLAGS             10
#define VI_LEN               12u
#define VOLUME_IS_DIRTY      0x0001u

/* Directory indexes. */
#define IR_TYPE              0            /* $INDEX_ROOT value */
#define IR_BLOCK_SIZE        8
#define IR_HEADER            16
#define IH_ENTRIES_OFS       0            /* index header */
#define IH_INDEX_LENGTH      4
#define IH_FLAGS             12
#define IH_LEN               16u
#define IH_LARGE_INDEX       0x01
#define INDX_HEADER          24           /* index header inside a block */
#define IE_LENGTH            8            /* index entry */
#define IE_KEY_LENGTH        10
#define IE_FLAGS             12
#define IE_KEY               16
#define IE_NODE              0x0001
#define IE_END               0x0002
#define FN_NAME_LENGTH       64           /* $FILE_NAME key */
#define FN_NAME              66
#define NTFS_MAX_INDEX_BLOCKS 16384u      /* searched in the root directory */

/* hiberfil.sys: libntfs-3g reads this much and refuses a shorter file. */
#define HIBERFILE_HEADER     4096u

#define NTFS_HOLE            UINT64_MAX
#define NTFS_MAX_RUNS        (1u << 20)
#define NTFS_CHUNK           (1u << 20)   /* $Bitmap read in pieces */

struct run {
	uint64_t vcn, lcn, len;   /* lcn NTFS_HOLE: sparse */
};

struct runlist {
	struct run *runs;
	size_t n, cap;
	uint64_t vcns;            /* clusters described so far: the next VCN */
};

/* One attribute gathered from all its extents. */
struct attr_data {
	bool resident;
	uint16_t flags;
	unsigned char *value;     /* resident: a copy of the value */
	uint32_t value_len;
	uint64_t alloc, size, init;   /* non-resident sizes */
	struct runlist rl;
};

struct ntfs_priv {
	uint32_t bytes_per_sector, cluster_size, record_size;
	unsigned cluster_bits;
	uint64_t nr_sectors, nr_clusters, mft_lcn, mftmirr_lcn;
	uint32_t block_size;      /* the bitmap unit */
	uint32_t blocks_per_cluster;
	uint64_t block_count;
	uint64_t backup_block;    /* holds the partition's last sector */
	struct attr_data mft;     /* $MFT's $DATA: every record is read through it */
	uint64_t nr_records;
	bool whole;               /* damaged, forced: every cluster is kept */
	unsigned char *chunk;
	char msg[384];            /* the first failure, for fs_error() */
};

/* A sign-extended little-endian integer of n bytes (1..8). */
static int64_t sle(const unsigned char *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = n; i-- > 0;)
		v = v << 8 | p[i];
	if (n < 8 && (p[n - 1] & 0x80))
		v |= ~0ull << (8 * n);
	return (int64_t)v;
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static unsigned log2u(uint64_t v)
{
	unsigned n = 0;

	while (v > 1) {
		v >>= 1;
		n++;
	}
	return n;
}

/*
 * Record why something failed, and return err.  Inner functions explain
 * themselves here rather than with fs_error(), whose first message wins:
 * a failure the caller recovers from (--force) must not leave its message
 * behind for a later one.
 */
__attribute__((format(printf, 3, 4)))
static int fail(struct ntfs_priv *np, int err, const char *fmt, ...)
{
	va_list ap;

	if (np->msg[0])
		return err;
	va_start(ap, fmt);
	vsnprintf(np->msg, sizeof(np->msg), fmt, ap);
	va_end(ap);
	return err;
}

static int report(struct fs_ctx *ctx, struct ntfs_priv *np, int err)
{
	return fs_error(ctx, err, "%s", np->msg[0] ? np->msg : "unreadable metadata");
}

/* ---- the boot sector ---- */

/* A clusters-per-record byte: a count of clusters, or below zero the
 * log2 of the size in bytes (libntfs-3g accepts -31..-9 and 1..64). */
static bool valid_clusters_per(int8_t c)
{
	return (c >= -31 && c <= -9) || (c > 0 && is_pow2((uint64_t)c) && c <= 64);
}

static uint64_t record_bytes(int8_t c, unsigned cluster_bits)
{
	return c < 0 ? 1ull << -c : (uint64_t)c << cluster_bits;
}

static int parse_boot(struct fs_ctx *ctx, struct ntfs_priv *np)
{
	const unsigned char *bs;
	uint32_t bps, spc, cs;
	uint64_t dev = fs_device_size(ctx), nr_sectors, rec, mft, mirr;
	unsigned code;
	int8_t cpm, cpi;
	int err = 0;

	bs = fs_map(ctx, 0, BS_LEN, &err);
	if (!bs)
		return fail(np, err, "cannot read the boot sector");
	if (memcmp(bs + BS_OEM_ID, "NTFS    ", 8) != 0)
		return fail(np, -EINVAL, "no NTFS signature in the boot sector");
	bps = le16(bs + BS_BYTES_PER_SECTOR);
	if (!is_pow2(bps) || bps < 512 || bps > 4096)
		return fail(np, -EINVAL, "bad bytes per sector %u", bps);
	code = bs[BS_SECTORS_PER_CLUS];
	if (code >= 1 && code <= 128 && is_pow2(code))
		spc = code;
	else if (code >= 244 && code <= 253)   /* 2^(256-code): clusters over 64 KiB */
		spc = 1u << (256 - code);
	else
		return fail(np, -EINVAL, "bad sectors per cluster code 0x%02x", code);
	cs = bps * spc;
	if (cs > NTFS_MAX_CLUSTER)
		return fail(np, -EINVAL, "cluster of %u bytes is larger than 2 MiB", cs);
	if (le16(bs + BS_RESERVED_SECTORS) || bs[BS_FATS] || le16(bs + BS_ROOT_ENTRIES) ||
	    le16(bs + BS_SECTORS16) || le16(bs + BS_FAT_SIZE) || le32(bs + BS_LARGE_SECTORS))
		return fail(np, -EINVAL, "FAT fields of the boot sector are not zero");

	nr_sectors = le64(bs + BS_NR_SECTORS);
	if (nr_sectors == 0 || nr_sectors > dev / bps)
		return fail(np, -EINVAL,
			    "volume of %llu sectors of %u bytes does not fit in the %llu bytes of the device",
			    (unsigned long long)nr_sectors, bps, (unsigned long long)dev);
	np->bytes_per_sector = bps;
	np->cluster_size = cs;
	np->cluster_bits = log2u(cs);
	np->nr_sectors = nr_sectors;
	np->nr_clusters = nr_sectors / spc;
	if (np->nr_clusters < 2)
		return fail(np, -EINVAL, "volume of %llu sectors holds fewer than 2 clusters",
			    (unsigned long long)nr_sectors);

	mft = le64(bs + BS_MFT_LCN);
	mirr = le64(bs + BS_MFTMIRR_LCN);
	if (mft == 0 || mirr == 0 || mft == mirr || mft >= np->nr_clusters ||
	    mirr >= np->nr_clusters)
		return fail(np, -EINVAL, "$MFT at cluster %lld or $MFTMirr at %lld is out of place (%llu clusters)",
			    (long long)mft, (long long)mirr, (unsigned long long)np->nr_clusters);
	np->mft_lcn = mft;
	np->mftmirr_lcn = mirr;

	cpm = (int8_t)bs[BS_CLUS_PER_MFT_REC];
	cpi = (int8_t)bs[BS_CLUS_PER_INDEX];
	if (!valid_clusters_per(cpm) || !valid_clusters_per(cpi))
		return fail(np, -EINVAL, "bad clusters per MFT record (%d) or per index record (%d)",
			    cpm, cpi);
	rec = record_bytes(cpm, np->cluster_bits);
	if (rec < NTFS_FIXUP_STRIDE || rec > NTFS_MAX_RECORD)
		return fail(np, -ENOTSUP, "MFT records of %llu bytes", (unsigned long long)rec);
	np->record_size = (uint32_t)rec;
	return 0;
}

/* The bitmap unit: the cluster up to 4 KiB, so that the backup boot sector
 * falls in a whole block inside the device.  The backup is the sector right
 * after the volume's (the partition's last one as mkntfs makes it; after
 * ntfsresize shrank the volume in a partition not yet shrunk, further in). */
static void choose_blocks(struct fs_ctx *ctx, struct ntfs_priv *np)
{
	uint64_t dev = fs_device_size(ctx);
	uint64_t last = np->nr_sectors < dev / np->bytes_per_sector
				? np->nr_sectors * np->bytes_per_sector
				: (dev / np->bytes_per_sector - 1) * np->bytes_per_sector;
	uint32_t b = np->cluster_size < NTFS_MAX_BLOCK ? np->cluster_size : NTFS_MAX_BLOCK;

	while (b > np->bytes_per_sector && (last / b + 1) * b > dev)
		b >>= 1;
	np->block_size = b;
	np->blocks_per_cluster = np->cluster_size / b;
	np->block_count = dev / b;
	np->backup_block = last / b;
}

/* ---- runlists ---- */

static int rl_add(struct ntfs_priv *np, struct runlist *rl, uint64_t lcn, uint64_t len,
		  const char *what)
{
	if (rl->n == rl->cap) {
		size_t cap = rl->cap ? rl->cap * 2 : 16;
		struct run *r;

		if (rl->cap >= NTFS_MAX_RUNS)
			return fail(np, -ENOTSUP, "%s: more than %u runs", what, NTFS_MAX_RUNS);
		r = realloc(rl->runs, cap * sizeof(*r));
		if (!r)
			return fail(np, -ENOMEM, "out of memory");
		rl->runs = r;
		rl->cap = cap;
	}
	rl->runs[rl->n].vcn = rl->vcns;
	rl->runs[rl->n].lcn = lcn;
	rl->runs[rl->n].len = len;
	rl->n++;
	rl->vcns += len;
	return 0;
}

/*
 * The mapping pairs of one non-resident attribute extent a (len bytes,
 * already checked to hold a non-resident header), appended to rl.  The
 * extent must start where rl ends and end where its header says; every
 * run must lie inside the volume.
 */
static int decode_runs(struct ntfs_priv *np, const unsigned char *a, uint32_t len,
		       struct runlist *rl, const char *what)
{
	int64_t lowest = (int64_t)le64(a + ATTR_LOWEST_VCN);
	int64_t highest = (int64_t)le64(a + ATTR_HIGHEST_VCN);
	uint32_t mp = le16(a + ATTR_MAPPING_OFS);
	uint64_t max_vcns = (1ull << 62) >> np->cluster_bits;
	const unsigned char *p, *end = a + len;
	int64_t lcn = 0;
	int r;

	if (lowest < 0 || (uint64_t)lowest != rl->vcns)
		return fail(np, -EINVAL, "%s: an extent starts at VCN %lld, expected %llu",
			    what, (long long)lowest, (unsigned long long)rl->vcns);
	if (mp < ATTR_NONRES_HDR || mp >= len)
		return fail(np, -EINVAL, "%s: mapping pairs at %u of a %u-byte attribute",
			    what, mp, len);
	for (p = a + mp; p < end && *p; ) {
		unsigned ls = *p & 0x0F, os = *p >> 4;
		int64_t n;

		if (ls == 0 || ls > 8 || os > 8 || (size_t)(end - p) < 1u + ls + os)
			return fail(np, -EINVAL, "%s: bad run header 0x%02x", what, *p);
		n = sle(p + 1, ls);
		if (n <= 0 || (uint64_t)n > max_vcns - rl->vcns)
			return fail(np, -EINVAL, "%s: run of %lld clusters", what, (long long)n);
		if (os) {
			if (__builtin_add_overflow(lcn, sle(p + 1 + ls, os), &lcn) || lcn < 0 ||
			    (uint64_t)lcn >= np->nr_clusters ||
			    (uint64_t)n > np->nr_clusters - (uint64_t)lcn)
				return fail(np, -EINVAL,
					    "%s: run of %lld clusters at cluster %lld is outside the %llu clusters of the volume",
					    what, (long long)n, (long long)lcn,
					    (unsigned long long)np->nr_clusters);
			r = rl_add(np, rl, (uint64_t)lcn, (uint64_t)n, what);
		} else {
			r = rl_add(np, rl, NTFS_HOLE, (uint64_t)n, what);
		}
		if (r < 0)
			return r;
		p += 1 + ls + os;
	}
	if (highest < -1 || (int64_t)rl->vcns != highest + 1)
		return fail(np, -EINVAL, "%s: runs end at VCN %llu, the attribute says %lld",
			    what, (unsigned long long)rl->vcns, (long long)highest);
	return 0;
}

static bool has_holes(const struct runlist *rl)
{
	for (size_t i = 0; i < rl->n; i++)
		if (rl->runs[i].lcn == NTFS_HOLE)
			return true;
	return false;
}

/* Bytes [off, off+len) of a non-resident attribute; bytes at or past init
 * (its initialized size) read as zeros, as NTFS defines them. */
static int read_runs(struct fs_ctx *ctx, struct ntfs_priv *np, const struct runlist *rl,
		     uint64_t init, uint64_t off, void *buf, size_t len, const char *what)
{
	unsigned char *out = buf;
	size_t lo = 0;

	while (len) {
		uint64_t vcn = off >> np->cluster_bits, in, piece;
		size_t hi = rl->n;
		const struct run *run;
		int r;

		if (off >= init) {
			memset(out, 0, len);
			return 0;
		}
		while (lo < hi) {           /* the run holding vcn; runs are sorted */
			size_t mid = lo + (hi - lo) / 2;
			if (rl->runs[mid].vcn + rl->runs[mid].len <= vcn)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == rl->n || rl->runs[lo].vcn > vcn)
			return fail(np, -EINVAL, "%s: byte %llu is not mapped", what,
				    (unsigned long long)off);
		run = &rl->runs[lo];
		in = off - (run->vcn << np->cluster_bits);
		piece = (run->len << np->cluster_bits) - in;
		if (piece > len)
			piece = len;
		if (piece > init - off)
			piece = init - off;
		if (run->lcn == NTFS_HOLE) {
			memset(out, 0, piece);
		} else {
			r = fs_read(ctx, (run->lcn << np->cluster_bits) + in, out, piece);
			if (r < 0)
				return fail(np, r, "%s: cannot read cluster %llu", what,
					    (unsigned long long)(run->lcn + (in >> np->cluster_bits)));
		}
		out += piece;
		off += piece;
		len -= piece;
	}
	return 0;
}

/* ---- records ---- */

/* Check and undo the update sequence of a record or index block: the last
 * two bytes of every 512-byte stride hold the sequence number, their real
 * value is kept in the array. */
static int apply_fixups(struct ntfs_priv *np, unsigned char *buf, uint32_t size,
			const char *magic, const char *what)
{
	uint32_t usa_ofs = le16(buf + REC_USA_OFS), count = le16(buf + REC_USA_COUNT);
	uint16_t usn;

	if (memcmp(buf, magic, 4) != 0) {
		if (memcmp(buf, "BAAD", 4) == 0)
			return fail(np, -EINVAL, "%s is marked bad (a torn write): the volume needs chkdsk /f",
				    what);
		return fail(np, -EINVAL, "%s: no %s signature", what, magic);
	}
	if ((usa_ofs & 1) || usa_ofs < 8 || count != size / NTFS_FIXUP_STRIDE + 1 ||
	    usa_ofs + 2 * count > NTFS_FIXUP_STRIDE - 2)
		return fail(np, -EINVAL, "%s: bad update sequence (offset %u, %u entries)",
			    what, usa_ofs, count);
	usn = le16(buf + usa_ofs);
	for (uint32_t i = 1; i < count; i++) {
		unsigned char *end = buf + i * NTFS_FIXUP_STRIDE - 2;

		if (le16(end) != usn)
			return fail(np, -EINVAL, "%s: update sequence mismatch in its sector %u",
				    what, i - 1);
		memcpy(end, buf + usa_ofs + 2 * i, 2);
	}
	return 0;
}

/*
 * MFT record recno into buf (record_size bytes), fixups applied and its
 * header checked.  Before $MFT's runlist is known, only record 0 can be
 * read, from mft_lcn.
 */
static int read_record(struct fs_ctx *ctx, struct ntfs_priv *np, uint64_t recno,
		       unsigned char *buf, const char *what)
{
	uint32_t rs = np->record_size, usa_end, attrs, used;
	int r;

	if (np->mft.rl.n == 0) {
		if (recno != 0)
			return fail(np, -EINVAL, "%s: record %llu read before $MFT is mapped",
				    what, (unsigned long long)recno);
		r = fs_read(ctx, np->mft_lcn << np->cluster_bits, buf, rs);
		if (r < 0)
			return fail(np, r, "cannot read MFT record 0 at cluster %llu",
				    (unsigned long long)np->mft_lcn);
	} else {
		if (recno >= np->mft.init / rs)
			return fail(np, -EINVAL, "%s: MFT record %llu is past the MFT's %llu records",
				    what, (unsigned long long)recno,
				    (unsigned long long)(np->mft.init / rs));
		r = read_runs(ctx, np, &np->mft.rl, np->mft.init, recno * rs, buf, rs, what);
		if (r < 0)
			return r;
	}
	r = apply_fixups(np, buf, rs, "FILE", what);
	if (r < 0)
		return r;
	usa_end = le16(buf + REC_USA_OFS) + 2u * le16(buf + REC_USA_COUNT);
	attrs = le16(buf + REC_ATTRS_OFS);
	used = le32(buf + REC_BYTES_USED);
	if (attrs < usa_end || attrs % 8 || used > rs || used < attrs + 8 ||
	    le32(buf + REC_BYTES_ALLOC) != rs)
		return fail(np, -EINVAL, "%s: bad record header (attributes at %u, %u of %u bytes used)",
			    what, attrs, used, le32(buf + REC_BYTES_ALLOC));
	if (le16(buf + REC_USA_OFS) >= 0x30 && le32(buf + REC_NUMBER) != (uint32_t)recno)
		return fail(np, -EINVAL, "%s: MFT record %llu says it is record %u",
			    what, (unsigned long long)recno, le32(buf + REC_NUMBER));
	return 0;
}

/* The next attribute at *pos of a checked record: 1 with *a and *alen set,
 * 0 at the end marker, negative when it does not fit in the record. */
static int next_attr(struct ntfs_priv *np, const unsigned char *rec, uint32_t *pos,
		     const unsigned char **a, uint32_t *alen, const char *what)
{
	uint32_t used = le32(rec + REC_BYTES_USED), at = *pos, len, nlen, nofs;
	const unsigned char *p = rec + at;

	if (at > used - 4)
		return fail(np, -EINVAL, "%s: attributes run past the record's end", what);
	if (le32(p + ATTR_TYPE) == AT_END)
		return 0;
	if (used - at < ATTR_RESIDENT_HDR)
		return fail(np, -EINVAL, "%s: attribute header past the record's end", what);
	len = le32(p + ATTR_LENGTH);
	if (len < ATTR_RESIDENT_HDR || len % 8 || len > used - at ||
	    p[ATTR_NON_RESIDENT] > 1 || (p[ATTR_NON_RESIDENT] && len < ATTR_NONRES_HDR))
		return fail(np, -EINVAL, "%s: attribute 0x%x of %u bytes at %u does not fit",
			    what, le32(p + ATTR_TYPE), len, at);
	nlen = p[ATTR_NAME_LENGTH];
	nofs = le16(p + ATTR_NAME_OFS);
	if (nlen && (nofs > len || 2 * nlen > len - nofs))
		return fail(np, -EINVAL, "%s: attribute name outside the attribute", what);
	if (!p[ATTR_NON_RESIDENT]) {
		uint32_t vlen = le32(p + ATTR_VALUE_LENGTH), vofs = le16(p + ATTR_VALUE_OFS);

		if (vofs > len || vlen > len - vofs)
			return fail(np, -EINVAL, "%s: resident value outside the attribute", what);
	}
	*a = p;
	*alen = len;
	*pos = at + len;
	return 1;
}

/* Does UTF-16LE name (n code units) equal ascii?  Case-insensitive for
 * ASCII letters when fold (file names), exact otherwise (stream names). */
static bool name_is(const unsigned char *name, unsigned n, const char *ascii, bool fold)
{
	size_t len = strlen(ascii);

	if (n != len)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned c = le16(name + 2 * i), want = (unsigned char)ascii[i];

		if (fold && c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (fold && want >= 'A' && want <= 'Z')
			want += 'a' - 'A';
		if (c != want)
			return false;
	}
	return true;
}

/* Is a (a checked attribute) of this type and name (NULL: unnamed)? */
static bool attr_is(const unsigned char *a, uint32_t type, const char *name)
{
	if (le32(a + ATTR_TYPE) != type)
		return false;
	if (!name)
		return a[ATTR_NAME_LENGTH] == 0;
	return name_is(a + le16(a + ATTR_NAME_OFS), a[ATTR_NAME_LENGTH], name, false);
}

static void attr_data_free(struct attr_data *d)
{
	free(d->value);
	free(d->rl.runs);
	memset(d, 0, sizeof(*d));
}

/* Add one extent (a checked attribute) to d; the first sets its kind and sizes. */
static int take_extent(struct ntfs_priv *np, struct attr_data *d, bool first,
		       const unsigned char *a, uint32_t alen, const char *what)
{
	if (first) {
		d->flags = le16(a + ATTR_FLAGS);
		d->resident = !a[ATTR_NON_RESIDENT];
		if (d->resident) {
			d->value_len = le32(a + ATTR_VALUE_LENGTH);
			d->value = malloc(d->value_len ? d->value_len : 1);
			if (!d->value)
				return fail(np, -ENOMEM, "out of memory");
			memcpy(d->value, a + le16(a + ATTR_VALUE_OFS), d->value_len);
			return 0;
		}
		d->alloc = le64(a + ATTR_ALLOC_SIZE);
		d->size = le64(a + ATTR_DATA_SIZE);
		d->init = le64(a + ATTR_INIT_SIZE);
		if (d->init > d->size || d->size > d->alloc || d->alloc > (1ull << 62) ||
		    d->alloc % np->cluster_size)
			return fail(np, -EINVAL,
				    "%s: sizes out of order (allocated %llu, data %llu, initialized %llu)",
				    what, (unsigned long long)d->alloc, (unsigned long long)d->size,
				    (unsigned long long)d->init);
	} else if (d->resident || !a[ATTR_NON_RESIDENT]) {
		return fail(np, -EINVAL, "%s: a resident attribute in several extents", what);
	}
	return decode_runs(np, a, alen, &d->rl, what);
}

/* The value of an $ATTRIBUTE_LIST attribute l (checked, in the base record). */
static int load_list(struct fs_ctx *ctx, struct ntfs_priv *np, const unsigned char *l,
		     uint32_t llen, struct attr_data *list, const char *what)
{
	int r = take_extent(np, list, true, l, llen, what);

	if (r < 0 || list->resident)
		return r;
	if (list->size > NTFS_MAX_ATTR_LIST || list->rl.vcns << np->cluster_bits != list->alloc)
		return fail(np, -EINVAL, "%s: attribute list of %llu bytes", what,
			    (unsigned long long)list->size);
	list->value_len = (uint32_t)list->size;
	list->value = malloc(list->value_len ? list->value_len : 1);
	if (!list->value)
		return fail(np, -ENOMEM, "out of memory");
	return read_runs(ctx, np, &list->rl, list->init, 0, list->value, list->value_len, what);
}

/* What load_attr looks for, and where it puts it. */
struct attr_query {
	uint64_t base;               /* the file's base MFT record */
	uint32_t type;
	const char *name;            /* NULL: unnamed */
	struct attr_data *d;
	bool *found;
	const char *what;
};

/* The file's base record into rec: read, in use, and a base record. */
static int read_base_record(struct fs_ctx *ctx, struct ntfs_priv *np,
			    const struct attr_query *q, unsigned char *rec)
{
	int r = read_record(ctx, np, q->base, rec, q->what);

	if (r < 0)
		return r;
	if (!(le16(rec + REC_FLAGS) & REC_IN_USE) || (le64(rec + REC_BASE) & MREF_MASK) != 0)
		return fail(np, -EINVAL, "%s: MFT record %llu is not a base record in use", q->what,
			    (unsigned long long)q->base);
	return 0;
}

/* No list: the base record holds the attribute whole (one extent), taken
 * into q->d.  Stops at an $ATTRIBUTE_LIST, left in *l and *llen. */
static int scan_base_record(struct ntfs_priv *np, const struct attr_query *q,
			    const unsigned char *rec, const unsigned char **l, uint32_t *llen)
{
	const unsigned char *a;
	uint32_t pos = le16(rec + REC_ATTRS_OFS), alen;
	int r;

	while ((r = next_attr(np, rec, &pos, &a, &alen, q->what)) > 0) {
		if (le32(a + ATTR_TYPE) == AT_ATTRIBUTE_LIST) {
			*l = a;
			*llen = alen;
			break;
		}
		if (!*q->found && attr_is(a, q->type, q->name) &&
		    (!a[ATTR_NON_RESIDENT] || le64(a + ATTR_LOWEST_VCN) == 0)) {
			*q->found = true;
			r = take_extent(np, q->d, true, a, alen, q->what);
			if (r < 0)
				return r;
		}
	}
	return r;
}

/* Extension record mref into ext: read, in use, and one of the file's. */
static int read_extension_record(struct fs_ctx *ctx, struct ntfs_priv *np,
				 const struct attr_query *q, uint64_t mref, unsigned char *ext)
{
	int r = read_record(ctx, np, mref, ext, q->what);

	if (r < 0)
		return r;
	if (!(le16(ext + REC_FLAGS) & REC_IN_USE) ||
	    (le64(ext + REC_BASE) & MREF_MASK) != q->base)
		return fail(np, -EINVAL, "%s: extension record %llu does not belong to record %llu",
			    q->what, (unsigned long long)mref, (unsigned long long)q->base);
	return 0;
}

/* The extent starting at VCN lowest in record src (number mref): *a and
 * *alen, or an error when the record does not hold it. */
static int find_extent(struct ntfs_priv *np, const struct attr_query *q,
		       const unsigned char *src, uint64_t mref, uint64_t lowest,
		       const unsigned char **a, uint32_t *alen)
{
	uint32_t pos = le16(src + REC_ATTRS_OFS);
	int r;

	while ((r = next_attr(np, src, &pos, a, alen, q->what)) > 0) {
		if (attr_is(*a, q->type, q->name) &&
		    ((*a)[ATTR_NON_RESIDENT] ? le64(*a + ATTR_LOWEST_VCN) == lowest
					     : lowest == 0))
			return 0;
	}
	if (r < 0)
		return r;
	return fail(np, -EINVAL, "%s: the extent at VCN %llu is not in record %llu",
		    q->what, (unsigned long long)lowest, (unsigned long long)mref);
}

/* The attribute list entry at *at, which is moved past it: when it names
 * an extent of the attribute, that extent (from the base record rec, or
 * from the extension record it names, read into ext) is added to q->d.
 * Negative on error, 1 once the attribute is whole (resident), else 0. */
static int list_entry(struct fs_ctx *ctx, struct ntfs_priv *np, const struct attr_query *q,
		      const struct attr_data *list, uint32_t *at, const unsigned char *rec,
		      unsigned char *ext)
{
	const unsigned char *e = list->value + *at, *src = rec, *a = NULL;
	uint32_t elen = le16(e + AL_LENGTH), nlen = e[AL_NAME_LENGTH];
	uint32_t nofs = e[AL_NAME_OFS], alen = 0;
	uint64_t mref = le64(e + AL_MREF) & MREF_MASK;
	uint64_t lowest = le64(e + AL_LOWEST_VCN);
	int r;

	if (elen < AL_MIN_LEN || elen > list->value_len - *at ||
	    (nlen && (nofs > elen || 2 * nlen > elen - nofs)))
		return fail(np, -EINVAL, "%s: attribute list entry at %u does not fit",
			    q->what, *at);
	*at += elen;
	if (le32(e + AL_TYPE) != q->type ||
	    (q->name ? !name_is(e + nofs, nlen, q->name, false) : nlen != 0))
		return 0;
	if (*q->found && lowest != q->d->rl.vcns)
		return fail(np, -EINVAL, "%s: extents listed out of order (VCN %llu after %llu)",
			    q->what, (unsigned long long)lowest,
			    (unsigned long long)q->d->rl.vcns);
	if (mref != q->base) {
		r = read_extension_record(ctx, np, q, mref, ext);
		if (r < 0)
			return r;
		src = ext;
	}
	r = find_extent(np, q, src, mref, lowest, &a, &alen);
	if (r < 0)
		return r;
	r = take_extent(np, q->d, !*q->found, a, alen, q->what);
	*q->found = true;
	if (r < 0)
		return r;
	return q->d->resident ? 1 : 0;
}

/* With a list (l, checked, in the base record rec): the attribute again
 * from nothing, its extents in the order the list gives them. */
static int load_listed(struct fs_ctx *ctx, struct ntfs_priv *np, const struct attr_query *q,
		       const unsigned char *rec, const unsigned char *l, uint32_t llen)
{
	struct attr_data list = { 0 };
	unsigned char *ext = NULL;
	uint32_t at = 0;
	int r;

	if (*q->found) {            /* start again from the list */
		attr_data_free(q->d);
		*q->found = false;
	}
	r = load_list(ctx, np, l, llen, &list, q->what);
	if (r >= 0) {
		ext = malloc(np->record_size);
		if (!ext)
			r = fail(np, -ENOMEM, "out of memory");
	}
	while (r >= 0 && list.value_len - at >= AL_MIN_LEN) {
		r = list_entry(ctx, np, q, &list, &at, rec, ext);
		if (r > 0)
			break;
	}
	attr_data_free(&list);
	free(ext);
	return r;
}

/*
 * Attribute (type, name) of the file whose base MFT record is base, from
 * all its extents: the base record alone, or the records its
 * $ATTRIBUTE_LIST names.  *found says whether the file has it.  Loading
 * $MFT's own $DATA (base 0, d == &np->mft) bootstraps: each extent read
 * makes the records it maps readable for the next.
 */
static int load_attr(struct fs_ctx *ctx, struct ntfs_priv *np, uint64_t base, uint32_t type,
		     const char *name, struct attr_data *d, bool *found, const char *what)
{
	struct attr_query q = { base, type, name, d, found, what };
	const unsigned char *l = NULL;
	unsigned char *rec;
	uint32_t llen = 0;
	int r;

	*found = false;
	rec = malloc(np->record_size);
	if (!rec)
		return fail(np, -ENOMEM, "out of memory");
	r = read_base_record(ctx, np, &q, rec);
	if (r >= 0)
		r = scan_base_record(np, &q, rec, &l, &llen);
	if (r >= 0 && l)
		r = load_listed(ctx, np, &q, rec, l, llen);
	if (r >= 0 && *found && !d->resident && d->rl.vcns << np->cluster_bits != d->alloc)
		r = fail(np, -EINVAL, "%s: runs cover %llu clusters, the attribute allocates %llu bytes",
			 what, (unsigned long long)d->rl.vcns, (unsigned long long)d->alloc);
	free(rec);
	return r < 0 ? r : 0;
}

/* ---- $MFT ---- */

static int load_mft(struct fs_ctx *ctx, struct ntfs_priv *np)
{
	bool found;
	int r = load_attr(ctx, np, FILE_MFT, AT_DATA, NULL, &np->mft, &found, "$MFT");

	if (r < 0)
		return r;
	if (!found || np->mft.resident)
		return fail(np, -EINVAL, "$MFT has no non-resident $DATA");
	if (np->mft.flags & (ATTR_COMPRESSED | ATTR_ENCRYPTED | ATTR_SPARSE) ||
	    has_holes(&np->mft.rl))
		return fail(np, -EINVAL, "$MFT's data is compressed, encrypted or sparse");
	if (np->mft.rl.runs[0].lcn != np->mft_lcn)
		return fail(np, -EINVAL, "$MFT starts at cluster %llu, the boot sector says %llu",
			    (unsigned long long)np->mft.rl.runs[0].lcn,
			    (unsigned long long)np->mft_lcn);
	np->nr_records = np->mft.init / np->record_size;
	if (np->nr_records <= FILE_BITMAP)
		return fail(np, -EINVAL, "$MFT holds only %llu records",
			    (unsigned long long)np->nr_records);
	return 0;
}

/* ---- dirty flag and hibernation ---- */

static int read_volume_flags(struct fs_ctx *ctx, struct ntfs_priv *np, uint16_t *flags)
{
	struct attr_data vi = { 0 };
	bool found;
	int r = load_attr(ctx, np, FILE_VOLUME, AT_VOLUME_INFO, NULL, &vi, &found, "$Volume");

	if (r >= 0 && (!found || !vi.resident || vi.value_len < VI_LEN))
		r = fail(np, -EINVAL, "$Volume has no $VOLUME_INFORMATION");
	if (r >= 0 && (vi.value[VI_MAJOR] < 1 || vi.value[VI_MAJOR] > 3))
		r = fail(np, -ENOTSUP, "NTFS version %u.%u", vi.value[VI_MAJOR],
			 vi.value[VI_MAJOR + 1]);
	if (r >= 0)
		*flags = le16(vi.value + VI_FLAGS);
	attr_data_free(&vi);
	return r;
}

/* Look for a file name among the entries of one index node (hdr: its index
 * header, avail bytes from there).  The node pointers are not followed:
 * every block in use is scanned in turn, which is bounded and loop-free. */
static int scan_entries(struct ntfs_priv *np, const unsigned char *hdr, uint32_t avail,
			const char *fname, uint64_t *mref, bool *found, const char *what)
{
	uint32_t pos = le32(hdr + IH_ENTRIES_OFS), ilen = le32(hdr + IH_INDEX_LENGTH);

	if (avail < IH_LEN || pos < IH_LEN || pos % 8 || ilen > avail || pos > ilen)
		return fail(np, -EINVAL, "%s: bad index header (entries at %u, %u bytes)",
			    what, pos, ilen);
	while (pos < ilen) {
		const unsigned char *e = hdr + pos;
		uint32_t elen, klen, eflags, room;

		if (ilen - pos < IE_KEY)
			return fail(np, -EINVAL, "%s: index entry past the node's end", what);
		elen = le16(e + IE_LENGTH);
		klen = le16(e + IE_KEY_LENGTH);
		eflags = le16(e + IE_FLAGS);
		if (elen < IE_KEY || elen % 8 || elen > ilen - pos)
			return fail(np, -EINVAL, "%s: index entry of %u bytes at %u", what, elen, pos);
		if (eflags & IE_END)
			return 0;
		room = elen - IE_KEY - ((eflags & IE_NODE) ? 8 : 0);
		if (elen < IE_KEY + ((eflags & IE_NODE) ? 8u : 0u) || klen < FN_NAME ||
		    klen > room || FN_NAME + 2u * e[IE_KEY + FN_NAME_LENGTH] > klen)
			return fail(np, -EINVAL, "%s: index key of %u bytes at %u", what, klen, pos);
		if (name_is(e + IE_KEY + FN_NAME, e[IE_KEY + FN_NAME_LENGTH], fname, true)) {
			*mref = le64(e);
			*found = true;
			return 0;
		}
		pos += elen;
	}
	return fail(np, -EINVAL, "%s: index node without an end entry", what);
}

/* The blocks of the root directory's $I30 index allocation that its
 * bitmap marks in use, scanned for fname. */
static int scan_index_blocks(struct fs_ctx *ctx, struct ntfs_priv *np, uint32_t ibs,
			     const char *fname, uint64_t *mref, bool *found)
{
	struct attr_data alloc = { 0 }, bmp = { 0 };
	unsigned char *blk = NULL, *bits = NULL;
	uint64_t nblocks;
	bool have, have_bmp;
	int r;

	r = load_attr(ctx, np, FILE_ROOT, AT_INDEX_ALLOCATION, "$I30", &alloc, &have,
		      "root directory index");
	if (r >= 0 && (!have || alloc.resident || alloc.flags & (ATTR_COMPRESSED | ATTR_ENCRYPTED)))
		r = fail(np, -EINVAL, "root directory: a large index without its allocation");
	if (r < 0)
		goto out;
	nblocks = alloc.size / ibs;
	if (nblocks > NTFS_MAX_INDEX_BLOCKS) {
		r = fail(np, -ENOTSUP, "root directory of %llu index blocks", (unsigned long long)nblocks);
		goto out;
	}
	r = load_attr(ctx, np, FILE_ROOT, AT_BITMAP, "$I30", &bmp, &have_bmp,
		      "root directory index bitmap");
	if (r < 0)
		goto out;
	if (have_bmp) {
		uint64_t have_bytes = bmp.resident ? bmp.value_len : bmp.size;

		if (have_bytes < (nblocks + 7) / 8) {
			r = fail(np, -EINVAL, "root directory: index bitmap of %llu bytes for %llu blocks",
				 (unsigned long long)have_bytes, (unsigned long long)nblocks);
			goto out;
		}
		if (bmp.resident) {
			bits = bmp.value;
			bmp.value = NULL;
		} else {
			bits = malloc((size_t)(nblocks + 7) / 8 + 1);
			if (!bits) {
				r = fail(np, -ENOMEM, "out of memory");
				goto out;
			}
			r = read_runs(ctx, np, &bmp.rl, bmp.init, 0, bits, (size_t)(nblocks + 7) / 8,
				      "root directory index bitmap");
			if (r < 0)
				goto out;
		}
	}
	blk = malloc(ibs);
	if (!blk) {
		r = fail(np, -ENOMEM, "out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < nblocks && !*found; i++) {
		char what[64];

		if (bits && !(bits[i / 8] & (1u << (i % 8))))
			continue;
		snprintf(what, sizeof(what), "root directory index block %llu", (unsigned long long)i);
		r = read_runs(ctx, np, &alloc.rl, alloc.init, i * ibs, blk, ibs, what);
		if (r >= 0)
			r = apply_fixups(np, blk, ibs, "INDX", what);
		if (r >= 0)
			r = scan_entries(np, blk + INDX_HEADER, ibs - INDX_HEADER, fname, mref, found,
					 what);
		if (r < 0)
			break;
	}
out:
	free(blk);
	free(bits);
	attr_data_free(&alloc);
	attr_data_free(&bmp);
	return r;
}

/* Find fname in the root directory: its $INDEX_ROOT, then every index
 * block in use. */
static int find_in_root(struct fs_ctx *ctx, struct ntfs_priv *np, const char *fname,
			uint64_t *mref, bool *found)
{
	struct attr_data root = { 0 };
	bool have;
	uint32_t ibs;
	int r;

	*found = false;
	r = load_attr(ctx, np, FILE_ROOT, AT_INDEX_ROOT, "$I30", &root, &have, "root directory");
	if (r >= 0 && (!have || !root.resident || root.value_len < IR_HEADER + IH_LEN ||
		       le32(root.value + IR_TYPE) != AT_FILE_NAME))
		r = fail(np, -EINVAL, "root directory: no file name index");
	if (r < 0)
		goto out;
	ibs = le32(root.value + IR_BLOCK_SIZE);
	if (!is_pow2(ibs) || ibs < NTFS_FIXUP_STRIDE || ibs > NTFS_MAX_RECORD) {
		r = fail(np, -EINVAL, "root directory: index blocks of %u bytes", ibs);
		goto out;
	}
	r = scan_entries(np, root.value + IR_HEADER, root.value_len - IR_HEADER, fname, mref,
			 found, "root directory");
	if (r >= 0 && !*found && (root.value[IR_HEADER + IH_FLAGS] & IH_LARGE_INDEX))
		r = scan_index_blocks(ctx, np, ibs, fname, mref, found);
out:
	attr_data_free(&root);
	return r;
}

/*
 * Is Windows hibernated (Fast Startup included)?  As libntfs-3g's
 * ntfs_volume_check_hiberfile(): a hiberfil.sys in the root directory
 * whose first 4096 bytes cannot all be read, or which begin with "hibr" or
 * "HIBR".  *why describes what was found.
 */
static int check_hibernation(struct fs_ctx *ctx, struct ntfs_priv *np, bool *hibernated,
			     char *why, size_t whylen)
{
	struct attr_data d = { 0 };
	unsigned char *rec = NULL, head[HIBERFILE_HEADER];
	uint64_t mref, recno;
	uint32_t n;
	bool found;
	int r;

	*hibernated = false;
	r = find_in_root(ctx, np, "hiberfil.sys", &mref, &found);
	if (r < 0 || !found)
		return r;
	recno = mref & MREF_MASK;
	rec = malloc(np->record_size);
	if (!rec)
		return fail(np, -ENOMEM, "out of memory");
	r = read_record(ctx, np, recno, rec, "hiberfil.sys");
	if (r >= 0 && (!(le16(rec + REC_FLAGS) & REC_IN_USE) ||
		       (le16(rec + REC_FLAGS) & REC_IS_DIRECTORY) ||
		       ((mref >> 48) && le16(rec + REC_SEQUENCE) != (mref >> 48))))
		r = fail(np, -EINVAL, "hiberfil.sys: the root directory names MFT record %llu, which is not that file",
			 (unsigned long long)recno);
	free(rec);
	if (r >= 0)
		r = load_attr(ctx, np, recno, AT_DATA, NULL, &d, &found, "hiberfil.sys");
	if (r >= 0 && !found)
		r = fail(np, -EINVAL, "hiberfil.sys has no data");
	if (r >= 0 && (d.flags & (ATTR_COMPRESSED | ATTR_ENCRYPTED)))
		r = fail(np, -ENOTSUP, "hiberfil.sys is compressed or encrypted");
	if (r < 0)
		goto out;
	if (d.resident) {
		n = d.value_len < HIBERFILE_HEADER ? d.value_len : HIBERFILE_HEADER;
		memcpy(head, d.value, n);
	} else {
		n = d.size < HIBERFILE_HEADER ? (uint32_t)d.size : HIBERFILE_HEADER;
		r = read_runs(ctx, np, &d.rl, d.init, 0, head, n, "hiberfil.sys");
		if (r < 0)
			goto out;
	}
	if (n < HIBERFILE_HEADER) {
		*hibernated = true;
		snprintf(why, whylen, "hiberfil.sys holds only %u bytes, which ntfs-3g takes for a hibernated volume",
			 n);
	} else if (memcmp(head, "hibr", 4) == 0 || memcmp(head, "HIBR", 4) == 0) {
		*hibernated = true;
		snprintf(why, whylen, "hiberfil.sys begins with \"%.4s\"", (const char *)head);
	}
out:
	attr_data_free(&d);
	return r;
}

#define HIBERNATED_FIX "boot it and shut down fully (shutdown /s /t 0, or turn Fast Startup off)"
#define DIRTY_FIX      "run chkdsk /f on Windows (or ntfsfix -d)"
#define DAMAGED_FIX    "run chkdsk /f on Windows"

/* An unreadable $Volume or root directory leaves the question open: that is
 * an inconsistent volume too, unless forced. */
static int cannot_tell(struct fs_ctx *ctx, struct ntfs_priv *np, int r, const char *question,
		       const char *fix)
{
	if (r == -EIO || r == -ENOMEM)
		return report(ctx, np, r);
	if (!fs_forced(ctx))
		return fs_error(ctx, -EUCLEAN, "cannot tell whether %s (%s): %s", question,
				np->msg, fix);
	fs_warn(ctx, "cannot tell whether %s (%s); copied as it is (forced)", question, np->msg);
	np->msg[0] = '\0';
	return 0;
}

static int check_clean(struct fs_ctx *ctx, struct ntfs_priv *np)
{
	char why[160] = "";
	bool hibernated;
	uint16_t flags = 0;
	int r;

	r = check_hibernation(ctx, np, &hibernated, why, sizeof(why));
	if (r < 0) {
		r = cannot_tell(ctx, np, r, "Windows is hibernated", HIBERNATED_FIX);
		if (r < 0)
			return r;
	} else if (hibernated) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"Windows is hibernated or was shut down with Fast Startup (%s): "
					HIBERNATED_FIX, why);
		fs_warn(ctx, "Windows is hibernated or was shut down with Fast Startup (%s); "
			"copied as it is (forced): what Windows kept in memory is not on the disk",
			why);
	}

	r = read_volume_flags(ctx, np, &flags);
	if (r == -ENOTSUP)
		return report(ctx, np, r);
	if (r < 0)
		return cannot_tell(ctx, np, r, "the volume is clean", DIRTY_FIX);
	if (flags & VOLUME_IS_DIRTY) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"the volume is marked dirty (not cleanly unmounted, or chkdsk is scheduled): "
					DIRTY_FIX);
		fs_warn(ctx, "the volume is marked dirty; copied as it is (forced)");
	}
	return 0;
}

/* ---- callbacks ---- */

static int ntfs_probe(struct fs_ctx *ctx)
{
	struct ntfs_priv np = { 0 };
	int r = parse_boot(ctx, &np);

	/* -ENOTSUP: ours, but open() will refuse it and say why. */
	if (r == -EIO || r == -ENOMEM)
		return r;
	return r < 0 && r != -ENOTSUP ? 1 : 0;
}

/*
 * $MFT or $Bitmap cannot be used although the boot sector is sound: the
 * volume is damaged (as ext's descriptors pointing outside the volume).
 * Forced, every cluster is kept, so that a damaged volume can be saved.
 */
static int damaged(struct fs_ctx *ctx, struct ntfs_priv *np, int r)
{
	if (r == -EIO || r == -ENOMEM || r == -ENOTSUP)
		return report(ctx, np, r);
	if (!fs_forced(ctx))
		return fs_error(ctx, -EUCLEAN, "%s: the volume is damaged; " DAMAGED_FIX, np->msg);
	fs_warn(ctx, "%s: the volume is damaged; every cluster kept (forced)", np->msg);
	np->msg[0] = '\0';
	np->whole = true;
	return 0;
}

static int ntfs_open(struct fs_ctx *ctx, void *priv)
{
	struct ntfs_priv *np = priv;
	int r;

	r = parse_boot(ctx, np);
	if (r < 0)
		return report(ctx, np, r);
	choose_blocks(ctx, np);
	r = fs_set_geometry(ctx, np->block_size, np->block_count);
	if (r < 0)
		return fs_error(ctx, r, "cannot declare %llu blocks of %u bytes",
				(unsigned long long)np->block_count, np->block_size);
	r = load_mft(ctx, np);
	if (r < 0)
		return damaged(ctx, np, r);
	return check_clean(ctx, np);
}

static int mark_clusters(struct fs_ctx *ctx, struct ntfs_priv *np, uint64_t first, uint64_t n)
{
	int r = fs_mark_used(ctx, first * np->blocks_per_cluster, n * np->blocks_per_cluster);

	if (r < 0)
		return fail(np, r, "clusters %llu..%llu are outside the volume",
			    (unsigned long long)first, (unsigned long long)(first + n - 1));
	return 0;
}

/* A run of set bits waiting to be marked in one call. */
struct bit_run {
	uint64_t first, count;
};

static int flush_bits(struct fs_ctx *ctx, struct ntfs_priv *np, struct bit_run *run)
{
	int r = run->count ? mark_clusters(ctx, np, run->first, run->count) : 0;

	run->count = 0;
	return r;
}

/* Bits for clusters [first, first + nbits) from p. */
static int scan_bits(struct fs_ctx *ctx, struct ntfs_priv *np, const unsigned char *p,
		     uint64_t first, uint64_t nbits, struct bit_run *run, uint64_t *used)
{
	for (uint64_t i = 0; i < nbits; ) {
		unsigned byte = p[i / 8];
		int r;

		if (i % 8 == 0 && nbits - i >= 8 && (byte == 0 || byte == 0xFF)) {
			if (byte == 0) {
				r = flush_bits(ctx, np, run);
				if (r < 0)
					return r;
			} else {
				if (!run->count)
					run->first = first + i;
				run->count += 8;
				*used += 8;
			}
			i += 8;
			continue;
		}
		if (byte & (1u << (i % 8))) {
			if (!run->count)
				run->first = first + i;
			run->count++;
			++*used;
		} else {
			r = flush_bits(ctx, np, run);
			if (r < 0)
				return r;
		}
		i++;
	}
	return 0;
}

static int scan_bitmap(struct fs_ctx *ctx, struct ntfs_priv *np, const struct attr_data *bm,
		       uint64_t *used)
{
	uint64_t need = (np->nr_clusters + 7) / 8;
	struct bit_run run = { 0, 0 };
	int r = 0;

	*used = 0;
	if (bm->resident)
		r = scan_bits(ctx, np, bm->value, 0, np->nr_clusters, &run, used);
	else {
		np->chunk = malloc(NTFS_CHUNK);
		if (!np->chunk)
			return fail(np, -ENOMEM, "out of memory");
		for (uint64_t off = 0; off < need && r >= 0; off += NTFS_CHUNK) {
			size_t n = need - off < NTFS_CHUNK ? (size_t)(need - off) : NTFS_CHUNK;
			uint64_t first = off * 8, bits = np->nr_clusters - first;

			if (bits > (uint64_t)n * 8)
				bits = (uint64_t)n * 8;
			r = read_runs(ctx, np, &bm->rl, bm->init, off, np->chunk, n, "$Bitmap");
			if (r >= 0)
				r = scan_bits(ctx, np, np->chunk, first, bits, &run, used);
		}
		free(np->chunk);
		np->chunk = NULL;
	}
	return r < 0 ? r : flush_bits(ctx, np, &run);
}

/* Clusters [first, first+n) free in $Bitmap (checked before anything else
 * is marked). */
static uint64_t count_free(const struct fs_ctx *ctx, const struct ntfs_priv *np,
			   uint64_t first, uint64_t n)
{
	uint64_t missing = 0;

	for (uint64_t c = first; c < first + n; c++)
		missing += !fs_is_used(ctx, c * np->blocks_per_cluster);
	return missing;
}

static uint64_t runs_free(const struct fs_ctx *ctx, const struct ntfs_priv *np,
			  const struct runlist *rl)
{
	uint64_t missing = 0;

	for (size_t i = 0; i < rl->n; i++)
		if (rl->runs[i].lcn != NTFS_HOLE)
			missing += count_free(ctx, np, rl->runs[i].lcn, rl->runs[i].len);
	return missing;
}

static int mark_runs(struct fs_ctx *ctx, struct ntfs_priv *np, const struct runlist *rl)
{
	for (size_t i = 0; i < rl->n; i++)
		if (rl->runs[i].lcn != NTFS_HOLE) {
			int r = mark_clusters(ctx, np, rl->runs[i].lcn, rl->runs[i].len);
			if (r < 0)
				return r;
		}
	return 0;
}

/*
 * The cross-check.  NTFS keeps no free count, but the clusters holding the
 * boot sector, $MFT, $MFTMirr and $Bitmap itself are in use on every
 * volume: a $Bitmap that says otherwise is stale or damaged.  Forced, they
 * are kept anyway.
 */
static int cross_check(struct fs_ctx *ctx, struct ntfs_priv *np, const struct attr_data *bm)
{
	uint64_t missing = count_free(ctx, np, 0, 1) + count_free(ctx, np, np->mftmirr_lcn, 1) +
			   runs_free(ctx, np, &np->mft.rl) +
			   (bm->resident ? 0 : runs_free(ctx, np, &bm->rl));
	int r;

	if (!missing)
		return 0;
	if (!fs_forced(ctx))
		return fs_error(ctx, -EUCLEAN,
				"$Bitmap marks %llu clusters of the boot sector, $MFT, $MFTMirr or $Bitmap as free: "
				"the volume is inconsistent; " DAMAGED_FIX,
				(unsigned long long)missing);
	fs_warn(ctx, "$Bitmap marks %llu clusters of the boot sector, $MFT, $MFTMirr or $Bitmap as free; kept (forced)",
		(unsigned long long)missing);
	r = mark_clusters(ctx, np, 0, 1);
	if (r >= 0)
		r = mark_clusters(ctx, np, np->mftmirr_lcn, 1);
	if (r >= 0)
		r = mark_runs(ctx, np, &np->mft.rl);
	if (r >= 0 && !bm->resident)
		r = mark_runs(ctx, np, &bm->rl);
	return r < 0 ? report(ctx, np, r) : 0;
}

static int ntfs_used_blocks(struct fs_ctx *ctx, void *priv)
{
	struct ntfs_priv *np = priv;
	struct attr_data bm = { 0 };
	uint64_t need = (np->nr_clusters + 7) / 8, used;
	bool found;
	int r = 0;

	if (np->whole)
		goto backup;
	r = load_attr(ctx, np, FILE_BITMAP, AT_DATA, NULL, &bm, &found, "$Bitmap");
	if (r >= 0 && !found)
		r = fail(np, -EINVAL, "$Bitmap has no $DATA");
	if (r >= 0 && (bm.flags & (ATTR_COMPRESSED | ATTR_ENCRYPTED | ATTR_SPARSE) ||
		       (!bm.resident && has_holes(&bm.rl))))
		r = fail(np, -EINVAL, "$Bitmap's data is compressed, encrypted or sparse");
	if (r >= 0 && (bm.resident ? bm.value_len < need : bm.init < need))
		r = fail(np, -EINVAL, "$Bitmap holds %llu bytes, fewer than the %llu its %llu clusters need",
			 (unsigned long long)(bm.resident ? bm.value_len : bm.init),
			 (unsigned long long)need, (unsigned long long)np->nr_clusters);
	if (r >= 0)
		r = scan_bitmap(ctx, np, &bm, &used);
	if (r < 0) {
		attr_data_free(&bm);
		r = damaged(ctx, np, r);
		if (r < 0)
			return r;
		goto backup;
	}
	r = cross_check(ctx, np, &bm);
	attr_data_free(&bm);
	if (r < 0)
		return r;
backup:
	if (np->whole) {
		r = mark_clusters(ctx, np, 0, np->nr_clusters);
		if (r < 0)
			return report(ctx, np, r);
	}
	/* The backup boot sector, after the check: it is no cluster. */
	r = fs_mark_used(ctx, np->backup_block, 1);
	if (r < 0)
		return fs_error(ctx, r, "the backup boot sector is outside the device");
	return 0;
}

static void ntfs_close(struct fs_ctx *ctx, void *priv)
{
	struct ntfs_priv *np = priv;

	(void)ctx;
	attr_data_free(&np->mft);
	free(np->chunk);
	np->chunk = NULL;
}

static const char *const ntfs_blkid_types[] = { "ntfs", NULL };

static const struct fs_magic ntfs_magics[] = {
	{ "NTFS    ", 8, BS_OEM_ID },
	{ NULL, 0, 0 },
};

const struct fs_plugin fs_plugin_ntfs = {
	.name = "ntfs",
	.blkid_types = ntfs_blkid_types,
	/* mkntfs's smallest volume. */
	.min_size = 1u << 20,
	.magics = ntfs_magics,
	.priv_size = sizeof(struct ntfs_priv),
	.probe = ntfs_probe,
	.open = ntfs_open,
	.used_blocks = ntfs_used_blocks,
	.close = ntfs_close,
};
