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
 * The format is parsed here and by the decoders of include/imager/ntfsfmt.h
 * (imager/engine/fs/ntfsfmt.c: the boot sector, record headers and update
 * sequences, attributes, runlists and index nodes, over bytes this file has
 * read) rather than through libntfs-3g: the plugin
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
#include "imager/ntfsfmt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* hiberfil.sys: libntfs-3g reads this much and refuses a shorter file. */
#define HIBERFILE_HEADER     4096u

#define NTFS_CHUNK           (1u << 20)   /* $Bitmap read in pieces */

struct ntfs_priv {
	struct ntfs_vol vol;      /* the boot sector's geometry */
	uint32_t block_size;      /* the bitmap unit */
	uint32_t blocks_per_cluster;
	uint64_t block_count;
	uint64_t backup_block;    /* holds the partition's last sector */
	struct ntfs_attr mft;     /* $MFT's $DATA: every record is read through it */
	uint64_t nr_records;
	bool whole;               /* damaged, forced: every cluster is kept */
	unsigned char *chunk;
	struct im_err err;        /* the first failure, for fs_error() */
};

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
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

	if (np->err.exit_class)
		return err;
	np->err.exit_class = IM_EXIT_SOURCE;
	np->err.code = err;
	va_start(ap, fmt);
	vsnprintf(np->err.msg, sizeof(np->err.msg), fmt, ap);
	va_end(ap);
	return err;
}

static int report(struct fs_ctx *ctx, struct ntfs_priv *np, int err)
{
	return fs_error(ctx, err, "%s", np->err.exit_class ? np->err.msg : "unreadable metadata");
}

/* ---- the boot sector ---- */

static int parse_boot(struct fs_ctx *ctx, struct ntfs_priv *np)
{
	const unsigned char *bs;
	int err = 0;

	bs = fs_map(ctx, 0, NTFS_BS_LEN, &err);
	if (!bs)
		return fail(np, err, "cannot read the boot sector");
	return ntfs_parse_boot(bs, fs_device_size(ctx), &np->vol, &np->err);
}

/* The bitmap unit: the cluster up to 4 KiB, so that the backup boot sector
 * falls in a whole block inside the device.  The backup is the sector right
 * after the volume's (the partition's last one as mkntfs makes it; after
 * ntfsresize shrank the volume in a partition not yet shrunk, further in). */
static void choose_blocks(struct fs_ctx *ctx, struct ntfs_priv *np)
{
	uint64_t dev = fs_device_size(ctx);
	uint64_t last = np->vol.nr_sectors < dev / np->vol.bytes_per_sector
				? np->vol.nr_sectors * np->vol.bytes_per_sector
				: (dev / np->vol.bytes_per_sector - 1) * np->vol.bytes_per_sector;
	uint32_t b = np->vol.cluster_size < NTFS_MAX_BLOCK ? np->vol.cluster_size : NTFS_MAX_BLOCK;

	while (b > np->vol.bytes_per_sector && (last / b + 1) * b > dev)
		b >>= 1;
	np->block_size = b;
	np->blocks_per_cluster = np->vol.cluster_size / b;
	np->block_count = dev / b;
	np->backup_block = last / b;
}

/* ---- runlists ---- */

/* Bytes [off, off+len) of a non-resident attribute; bytes at or past init
 * (its initialized size) read as zeros, as NTFS defines them. */
static int read_runs(struct fs_ctx *ctx, struct ntfs_priv *np, const struct ntfs_runlist *rl,
		     uint64_t init, uint64_t off, void *buf, size_t len, const char *what)
{
	unsigned char *out = buf;
	size_t lo = 0;

	while (len) {
		uint64_t vcn = off >> np->vol.cluster_bits, in, piece;
		size_t hi = rl->n;
		const struct ntfs_run *run;
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
		in = off - (run->vcn << np->vol.cluster_bits);
		piece = (run->len << np->vol.cluster_bits) - in;
		if (piece > len)
			piece = len;
		if (piece > init - off)
			piece = init - off;
		if (run->lcn == NTFS_HOLE) {
			memset(out, 0, piece);
		} else {
			r = fs_read(ctx, (run->lcn << np->vol.cluster_bits) + in, out, piece);
			if (r < 0)
				return fail(np, r, "%s: cannot read cluster %llu", what,
					    (unsigned long long)(run->lcn + (in >> np->vol.cluster_bits)));
		}
		out += piece;
		off += piece;
		len -= piece;
	}
	return 0;
}

/* ---- records ---- */

/*
 * MFT record recno into buf (record_size bytes), fixups applied and its
 * header checked.  Before $MFT's runlist is known, only record 0 can be
 * read, from mft_lcn.
 */
static int read_record(struct fs_ctx *ctx, struct ntfs_priv *np, uint64_t recno,
		       unsigned char *buf, const char *what)
{
	uint32_t rs = np->vol.record_size;
	int r;

	if (np->mft.rl.n == 0) {
		if (recno != 0)
			return fail(np, -EINVAL, "%s: record %llu read before $MFT is mapped",
				    what, (unsigned long long)recno);
		r = fs_read(ctx, np->vol.mft_lcn << np->vol.cluster_bits, buf, rs);
		if (r < 0)
			return fail(np, r, "cannot read MFT record 0 at cluster %llu",
				    (unsigned long long)np->vol.mft_lcn);
	} else {
		if (recno >= np->mft.init / rs)
			return fail(np, -EINVAL, "%s: MFT record %llu is past the MFT's %llu records",
				    what, (unsigned long long)recno,
				    (unsigned long long)(np->mft.init / rs));
		r = read_runs(ctx, np, &np->mft.rl, np->mft.init, recno * rs, buf, rs, what);
		if (r < 0)
			return r;
	}
	r = ntfs_apply_fixups(buf, rs, "FILE", what, &np->err);
	if (r < 0)
		return r;
	return ntfs_check_record(buf, rs, recno, what, &np->err);
}

/* The value of an $ATTRIBUTE_LIST attribute l (checked, in the base record). */
static int load_list(struct fs_ctx *ctx, struct ntfs_priv *np, const unsigned char *l,
		     uint32_t llen, struct ntfs_attr *list, const char *what)
{
	int r = ntfs_take_extent(&np->vol, list, true, l, llen, what, &np->err);

	if (r < 0 || list->resident)
		return r;
	if (list->size > NTFS_MAX_ATTR_LIST || list->rl.vcns << np->vol.cluster_bits != list->alloc)
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
	struct ntfs_attr *d;
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
	if (!(le16(rec + NTFS_REC_FLAGS) & NTFS_REC_IN_USE) || (le64(rec + NTFS_REC_BASE) & NTFS_MREF_MASK) != 0)
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
	uint32_t pos = le16(rec + NTFS_REC_ATTRS_OFS), alen;
	int r;

	while ((r = ntfs_next_attr(rec, &pos, &a, &alen, q->what, &np->err)) > 0) {
		if (le32(a + NTFS_ATTR_TYPE) == NTFS_AT_ATTRIBUTE_LIST) {
			*l = a;
			*llen = alen;
			break;
		}
		if (!*q->found && ntfs_attr_is(a, q->type, q->name) &&
		    (!a[NTFS_ATTR_NON_RESIDENT] || le64(a + NTFS_ATTR_LOWEST_VCN) == 0)) {
			*q->found = true;
			r = ntfs_take_extent(&np->vol, q->d, true, a, alen, q->what, &np->err);
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
	if (!(le16(ext + NTFS_REC_FLAGS) & NTFS_REC_IN_USE) ||
	    (le64(ext + NTFS_REC_BASE) & NTFS_MREF_MASK) != q->base)
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
	uint32_t pos = le16(src + NTFS_REC_ATTRS_OFS);
	int r;

	while ((r = ntfs_next_attr(src, &pos, a, alen, q->what, &np->err)) > 0) {
		if (ntfs_attr_is(*a, q->type, q->name) &&
		    ((*a)[NTFS_ATTR_NON_RESIDENT] ? le64(*a + NTFS_ATTR_LOWEST_VCN) == lowest
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
		      const struct ntfs_attr *list, uint32_t *at, const unsigned char *rec,
		      unsigned char *ext)
{
	const unsigned char *e = list->value + *at, *src = rec, *a = NULL;
	uint32_t elen = le16(e + NTFS_AL_LENGTH), nlen = e[NTFS_AL_NAME_LENGTH];
	uint32_t nofs = e[NTFS_AL_NAME_OFS], alen = 0;
	uint64_t mref = le64(e + NTFS_AL_MREF) & NTFS_MREF_MASK;
	uint64_t lowest = le64(e + NTFS_AL_LOWEST_VCN);
	int r;

	if (elen < NTFS_AL_MIN_LEN || elen > list->value_len - *at ||
	    (nlen && (nofs > elen || 2 * nlen > elen - nofs)))
		return fail(np, -EINVAL, "%s: attribute list entry at %u does not fit",
			    q->what, *at);
	*at += elen;
	if (le32(e + NTFS_AL_TYPE) != q->type ||
	    (q->name ? !ntfs_name_is(e + nofs, nlen, q->name, false) : nlen != 0))
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
	r = ntfs_take_extent(&np->vol, q->d, !*q->found, a, alen, q->what, &np->err);
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
	struct ntfs_attr list = { 0 };
	unsigned char *ext = NULL;
	uint32_t at = 0;
	int r;

	if (*q->found) {            /* start again from the list */
		ntfs_attr_free(q->d);
		*q->found = false;
	}
	r = load_list(ctx, np, l, llen, &list, q->what);
	if (r >= 0) {
		ext = malloc(np->vol.record_size);
		if (!ext)
			r = fail(np, -ENOMEM, "out of memory");
	}
	while (r >= 0 && list.value_len - at >= NTFS_AL_MIN_LEN) {
		r = list_entry(ctx, np, q, &list, &at, rec, ext);
		if (r > 0)
			break;
	}
	ntfs_attr_free(&list);
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
		     const char *name, struct ntfs_attr *d, bool *found, const char *what)
{
	struct attr_query q = { base, type, name, d, found, what };
	const unsigned char *l = NULL;
	unsigned char *rec;
	uint32_t llen = 0;
	int r;

	*found = false;
	rec = malloc(np->vol.record_size);
	if (!rec)
		return fail(np, -ENOMEM, "out of memory");
	r = read_base_record(ctx, np, &q, rec);
	if (r >= 0)
		r = scan_base_record(np, &q, rec, &l, &llen);
	if (r >= 0 && l)
		r = load_listed(ctx, np, &q, rec, l, llen);
	if (r >= 0 && *found && !d->resident && d->rl.vcns << np->vol.cluster_bits != d->alloc)
		r = fail(np, -EINVAL, "%s: runs cover %llu clusters, the attribute allocates %llu bytes",
			 what, (unsigned long long)d->rl.vcns, (unsigned long long)d->alloc);
	free(rec);
	return r < 0 ? r : 0;
}

/* ---- $MFT ---- */

static int load_mft(struct fs_ctx *ctx, struct ntfs_priv *np)
{
	bool found;
	int r = load_attr(ctx, np, NTFS_FILE_MFT, NTFS_AT_DATA, NULL, &np->mft, &found, "$MFT");

	if (r < 0)
		return r;
	if (!found || np->mft.resident)
		return fail(np, -EINVAL, "$MFT has no non-resident $DATA");
	if (np->mft.flags & (NTFS_ATTR_COMPRESSED | NTFS_ATTR_ENCRYPTED | NTFS_ATTR_SPARSE) ||
	    ntfs_has_holes(&np->mft.rl))
		return fail(np, -EINVAL, "$MFT's data is compressed, encrypted or sparse");
	if (np->mft.rl.runs[0].lcn != np->vol.mft_lcn)
		return fail(np, -EINVAL, "$MFT starts at cluster %llu, the boot sector says %llu",
			    (unsigned long long)np->mft.rl.runs[0].lcn,
			    (unsigned long long)np->vol.mft_lcn);
	np->nr_records = np->mft.init / np->vol.record_size;
	if (np->nr_records <= NTFS_FILE_BITMAP)
		return fail(np, -EINVAL, "$MFT holds only %llu records",
			    (unsigned long long)np->nr_records);
	return 0;
}

/* ---- dirty flag and hibernation ---- */

static int read_volume_flags(struct fs_ctx *ctx, struct ntfs_priv *np, uint16_t *flags)
{
	struct ntfs_attr vi = { 0 };
	bool found;
	int r = load_attr(ctx, np, NTFS_FILE_VOLUME, NTFS_AT_VOLUME_INFO, NULL, &vi, &found, "$Volume");

	if (r >= 0 && (!found || !vi.resident || vi.value_len < NTFS_VI_LEN))
		r = fail(np, -EINVAL, "$Volume has no $VOLUME_INFORMATION");
	if (r >= 0 && (vi.value[NTFS_VI_MAJOR] < 1 || vi.value[NTFS_VI_MAJOR] > 3))
		r = fail(np, -ENOTSUP, "NTFS version %u.%u", vi.value[NTFS_VI_MAJOR],
			 vi.value[NTFS_VI_MAJOR + 1]);
	if (r >= 0)
		*flags = le16(vi.value + NTFS_VI_FLAGS);
	ntfs_attr_free(&vi);
	return r;
}

/* The blocks of the root directory's $I30 index allocation that its
 * bitmap marks in use, scanned for fname. */
static int scan_index_blocks(struct fs_ctx *ctx, struct ntfs_priv *np, uint32_t ibs,
			     const char *fname, uint64_t *mref, bool *found)
{
	struct ntfs_attr alloc = { 0 }, bmp = { 0 };
	unsigned char *blk = NULL, *bits = NULL;
	uint64_t nblocks;
	bool have, have_bmp;
	int r;

	r = load_attr(ctx, np, NTFS_FILE_ROOT, NTFS_AT_INDEX_ALLOCATION, "$I30", &alloc, &have,
		      "root directory index");
	if (r >= 0 && (!have || alloc.resident || alloc.flags & (NTFS_ATTR_COMPRESSED | NTFS_ATTR_ENCRYPTED)))
		r = fail(np, -EINVAL, "root directory: a large index without its allocation");
	if (r < 0)
		goto out;
	nblocks = alloc.size / ibs;
	if (nblocks > NTFS_MAX_INDEX_BLOCKS) {
		r = fail(np, -ENOTSUP, "root directory of %llu index blocks", (unsigned long long)nblocks);
		goto out;
	}
	r = load_attr(ctx, np, NTFS_FILE_ROOT, NTFS_AT_BITMAP, "$I30", &bmp, &have_bmp,
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
			r = ntfs_apply_fixups(blk, ibs, "INDX", what, &np->err);
		if (r >= 0)
			r = ntfs_scan_entries(blk + NTFS_INDX_HEADER, ibs - NTFS_INDX_HEADER, fname,
					      mref, found, what, &np->err);
		if (r < 0)
			break;
	}
out:
	free(blk);
	free(bits);
	ntfs_attr_free(&alloc);
	ntfs_attr_free(&bmp);
	return r;
}

/* Find fname in the root directory: its $INDEX_ROOT, then every index
 * block in use. */
static int find_in_root(struct fs_ctx *ctx, struct ntfs_priv *np, const char *fname,
			uint64_t *mref, bool *found)
{
	struct ntfs_attr root = { 0 };
	bool have;
	uint32_t ibs;
	int r;

	*found = false;
	r = load_attr(ctx, np, NTFS_FILE_ROOT, NTFS_AT_INDEX_ROOT, "$I30", &root, &have, "root directory");
	if (r >= 0 && (!have || !root.resident || root.value_len < NTFS_IR_HEADER + NTFS_IH_LEN ||
		       le32(root.value + NTFS_IR_TYPE) != NTFS_AT_FILE_NAME))
		r = fail(np, -EINVAL, "root directory: no file name index");
	if (r < 0)
		goto out;
	ibs = le32(root.value + NTFS_IR_BLOCK_SIZE);
	if (!is_pow2(ibs) || ibs < NTFS_FIXUP_STRIDE || ibs > NTFS_MAX_RECORD) {
		r = fail(np, -EINVAL, "root directory: index blocks of %u bytes", ibs);
		goto out;
	}
	r = ntfs_scan_entries(root.value + NTFS_IR_HEADER, root.value_len - NTFS_IR_HEADER, fname,
			      mref, found, "root directory", &np->err);
	if (r >= 0 && !*found && (root.value[NTFS_IR_HEADER + NTFS_IH_FLAGS] & NTFS_IH_LARGE_INDEX))
		r = scan_index_blocks(ctx, np, ibs, fname, mref, found);
out:
	ntfs_attr_free(&root);
	return r;
}

/*
 * Is Windows hibernated (Fast Startup included)?  As libntfs-3g's
 * ntfs_volume_check_hiberfile(): a hiberfil.sys in the root directory
 * whose first 4096 bytes cannot all be read, or which begin with "hibr" or
 * "HIBR".  h->why describes what was found.
 */
struct hibernation {
	bool found;
	char why[160];
};

static int check_hibernation(struct fs_ctx *ctx, struct ntfs_priv *np, struct hibernation *h)
{
	struct ntfs_attr d = { 0 };
	unsigned char *rec = NULL, head[HIBERFILE_HEADER];
	uint64_t mref, recno;
	uint32_t n;
	bool found;
	int r;

	h->found = false;
	r = find_in_root(ctx, np, "hiberfil.sys", &mref, &found);
	if (r < 0 || !found)
		return r;
	recno = mref & NTFS_MREF_MASK;
	rec = malloc(np->vol.record_size);
	if (!rec)
		return fail(np, -ENOMEM, "out of memory");
	r = read_record(ctx, np, recno, rec, "hiberfil.sys");
	if (r >= 0 && (!(le16(rec + NTFS_REC_FLAGS) & NTFS_REC_IN_USE) ||
		       (le16(rec + NTFS_REC_FLAGS) & NTFS_REC_IS_DIRECTORY) ||
		       ((mref >> 48) && le16(rec + NTFS_REC_SEQUENCE) != (mref >> 48))))
		r = fail(np, -EINVAL, "hiberfil.sys: the root directory names MFT record %llu, which is not that file",
			 (unsigned long long)recno);
	free(rec);
	if (r >= 0)
		r = load_attr(ctx, np, recno, NTFS_AT_DATA, NULL, &d, &found, "hiberfil.sys");
	if (r >= 0 && !found)
		r = fail(np, -EINVAL, "hiberfil.sys has no data");
	if (r >= 0 && (d.flags & (NTFS_ATTR_COMPRESSED | NTFS_ATTR_ENCRYPTED)))
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
		h->found = true;
		snprintf(h->why, sizeof(h->why), "hiberfil.sys holds only %u bytes, which ntfs-3g takes for a hibernated volume",
			 n);
	} else if (memcmp(head, "hibr", 4) == 0 || memcmp(head, "HIBR", 4) == 0) {
		h->found = true;
		snprintf(h->why, sizeof(h->why), "hiberfil.sys begins with \"%.4s\"", (const char *)head);
	}
out:
	ntfs_attr_free(&d);
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
				np->err.msg, fix);
	fs_warn(ctx, "cannot tell whether %s (%s); copied as it is (forced)", question, np->err.msg);
	np->err = (struct im_err){ 0 };
	return 0;
}

static int check_clean(struct fs_ctx *ctx, struct ntfs_priv *np)
{
	struct hibernation h = { 0 };
	uint16_t flags = 0;
	int r;

	r = check_hibernation(ctx, np, &h);
	if (r < 0) {
		r = cannot_tell(ctx, np, r, "Windows is hibernated", HIBERNATED_FIX);
		if (r < 0)
			return r;
	} else if (h.found) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"Windows is hibernated or was shut down with Fast Startup (%s): "
					HIBERNATED_FIX, h.why);
		fs_warn(ctx, "Windows is hibernated or was shut down with Fast Startup (%s); "
			"copied as it is (forced): what Windows kept in memory is not on the disk",
			h.why);
	}

	r = read_volume_flags(ctx, np, &flags);
	if (r == -ENOTSUP)
		return report(ctx, np, r);
	if (r < 0)
		return cannot_tell(ctx, np, r, "the volume is clean", DIRTY_FIX);
	if (flags & NTFS_VOLUME_IS_DIRTY) {
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
		return fs_error(ctx, -EUCLEAN, "%s: the volume is damaged; " DAMAGED_FIX, np->err.msg);
	fs_warn(ctx, "%s: the volume is damaged; every cluster kept (forced)", np->err.msg);
	np->err = (struct im_err){ 0 };
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

static int scan_bitmap(struct fs_ctx *ctx, struct ntfs_priv *np, const struct ntfs_attr *bm,
		       uint64_t *used)
{
	uint64_t need = (np->vol.nr_clusters + 7) / 8;
	struct bit_run run = { 0, 0 };
	int r = 0;

	*used = 0;
	if (bm->resident)
		r = scan_bits(ctx, np, bm->value, 0, np->vol.nr_clusters, &run, used);
	else {
		np->chunk = malloc(NTFS_CHUNK);
		if (!np->chunk)
			return fail(np, -ENOMEM, "out of memory");
		for (uint64_t off = 0; off < need && r >= 0; off += NTFS_CHUNK) {
			size_t n = need - off < NTFS_CHUNK ? (size_t)(need - off) : NTFS_CHUNK;
			uint64_t first = off * 8, bits = np->vol.nr_clusters - first;

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
			  const struct ntfs_runlist *rl)
{
	uint64_t missing = 0;

	for (size_t i = 0; i < rl->n; i++)
		if (rl->runs[i].lcn != NTFS_HOLE)
			missing += count_free(ctx, np, rl->runs[i].lcn, rl->runs[i].len);
	return missing;
}

static int mark_runs(struct fs_ctx *ctx, struct ntfs_priv *np, const struct ntfs_runlist *rl)
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
static int cross_check(struct fs_ctx *ctx, struct ntfs_priv *np, const struct ntfs_attr *bm)
{
	uint64_t missing = count_free(ctx, np, 0, 1) + count_free(ctx, np, np->vol.mftmirr_lcn, 1) +
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
		r = mark_clusters(ctx, np, np->vol.mftmirr_lcn, 1);
	if (r >= 0)
		r = mark_runs(ctx, np, &np->mft.rl);
	if (r >= 0 && !bm->resident)
		r = mark_runs(ctx, np, &bm->rl);
	return r < 0 ? report(ctx, np, r) : 0;
}

static int ntfs_used_blocks(struct fs_ctx *ctx, void *priv)
{
	struct ntfs_priv *np = priv;
	struct ntfs_attr bm = { 0 };
	uint64_t need = (np->vol.nr_clusters + 7) / 8, used;
	bool found;
	int r = 0;

	if (np->whole)
		goto backup;
	r = load_attr(ctx, np, NTFS_FILE_BITMAP, NTFS_AT_DATA, NULL, &bm, &found, "$Bitmap");
	if (r >= 0 && !found)
		r = fail(np, -EINVAL, "$Bitmap has no $DATA");
	if (r >= 0 && (bm.flags & (NTFS_ATTR_COMPRESSED | NTFS_ATTR_ENCRYPTED | NTFS_ATTR_SPARSE) ||
		       (!bm.resident && ntfs_has_holes(&bm.rl))))
		r = fail(np, -EINVAL, "$Bitmap's data is compressed, encrypted or sparse");
	if (r >= 0 && (bm.resident ? bm.value_len < need : bm.init < need))
		r = fail(np, -EINVAL, "$Bitmap holds %llu bytes, fewer than the %llu its %llu clusters need",
			 (unsigned long long)(bm.resident ? bm.value_len : bm.init),
			 (unsigned long long)need, (unsigned long long)np->vol.nr_clusters);
	if (r >= 0)
		r = scan_bitmap(ctx, np, &bm, &used);
	if (r < 0) {
		ntfs_attr_free(&bm);
		r = damaged(ctx, np, r);
		if (r < 0)
			return r;
		goto backup;
	}
	r = cross_check(ctx, np, &bm);
	ntfs_attr_free(&bm);
	if (r < 0)
		return r;
backup:
	if (np->whole) {
		r = mark_clusters(ctx, np, 0, np->vol.nr_clusters);
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
	ntfs_attr_free(&np->mft);
	free(np->chunk);
	np->chunk = NULL;
}

static const char *const ntfs_blkid_types[] = { "ntfs", NULL };

static const struct fs_magic ntfs_magics[] = {
	{ "NTFS    ", 8, NTFS_BS_OEM_ID },
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
