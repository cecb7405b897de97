/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * NTFS's on-disk format (include/imager/ntfsfmt.h): the boot sector, MFT
 * record headers and update sequences, attributes, runlists, index nodes,
 * decoded from bytes fsplugins/ntfs.c has read.  Every field is hostile.
 */
#include "imager/ntfsfmt.h"
#include "imager/bytes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A failure explained: the class says only what kind it is (the plugin
 * passes the message on through fs_error()). */
#define bad(err, code, ...) \
	im_errf(err, (code) == -ENOMEM ? IM_EXIT_INTERNAL : IM_EXIT_SOURCE, code, __VA_ARGS__)

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

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

/* ---- the boot sector ---- */

int ntfs_parse_boot(const unsigned char *bs, uint64_t dev, struct ntfs_vol *v,
		    struct im_err *err)
{
	uint32_t bps, spc, cs;
	uint64_t nr_sectors, rec, mft, mirr;
	unsigned code;
	int8_t cpm, cpi;

	if (memcmp(bs + NTFS_BS_OEM_ID, "NTFS    ", 8) != 0)
		return bad(err, -EINVAL, "no NTFS signature in the boot sector");
	bps = le16(bs + NTFS_BS_BYTES_PER_SECTOR);
	if (!is_pow2(bps) || bps < 512 || bps > 4096)
		return bad(err, -EINVAL, "bad bytes per sector %u", bps);
	code = bs[NTFS_BS_SECTORS_PER_CLUS];
	if (code >= 1 && code <= 128 && is_pow2(code))
		spc = code;
	else if (code >= 244 && code <= 253)   /* 2^(256-code): clusters over 64 KiB */
		spc = 1u << (256 - code);
	else
		return bad(err, -EINVAL, "bad sectors per cluster code 0x%02x", code);
	cs = bps * spc;
	if (cs > NTFS_MAX_CLUSTER)
		return bad(err, -EINVAL, "cluster of %u bytes is larger than 2 MiB", cs);
	if (le16(bs + NTFS_BS_RESERVED_SECTORS) || bs[NTFS_BS_FATS] || le16(bs + NTFS_BS_ROOT_ENTRIES) ||
	    le16(bs + NTFS_BS_SECTORS16) || le16(bs + NTFS_BS_FAT_SIZE) || le32(bs + NTFS_BS_LARGE_SECTORS))
		return bad(err, -EINVAL, "FAT fields of the boot sector are not zero");

	nr_sectors = le64(bs + NTFS_BS_NR_SECTORS);
	if (nr_sectors == 0 || nr_sectors > dev / bps)
		return bad(err, -EINVAL,
			    "volume of %llu sectors of %u bytes does not fit in the %llu bytes of the device",
			    (unsigned long long)nr_sectors, bps, (unsigned long long)dev);
	v->bytes_per_sector = bps;
	v->cluster_size = cs;
	v->cluster_bits = (unsigned)__builtin_ctz(cs);   /* cs: a power of two */
	v->nr_sectors = nr_sectors;
	v->nr_clusters = nr_sectors / spc;
	if (v->nr_clusters < 2)
		return bad(err, -EINVAL, "volume of %llu sectors holds fewer than 2 clusters",
			    (unsigned long long)nr_sectors);

	mft = le64(bs + NTFS_BS_MFT_LCN);
	mirr = le64(bs + NTFS_BS_MFTMIRR_LCN);
	if (mft == 0 || mirr == 0 || mft == mirr || mft >= v->nr_clusters ||
	    mirr >= v->nr_clusters)
		return bad(err, -EINVAL, "$MFT at cluster %lld or $MFTMirr at %lld is out of place (%llu clusters)",
			    (long long)mft, (long long)mirr, (unsigned long long)v->nr_clusters);
	v->mft_lcn = mft;
	v->mftmirr_lcn = mirr;

	cpm = (int8_t)bs[NTFS_BS_CLUS_PER_MFT_REC];
	cpi = (int8_t)bs[NTFS_BS_CLUS_PER_INDEX];
	if (!valid_clusters_per(cpm) || !valid_clusters_per(cpi))
		return bad(err, -EINVAL, "bad clusters per MFT record (%d) or per index record (%d)",
			    cpm, cpi);
	rec = record_bytes(cpm, v->cluster_bits);
	if (rec < NTFS_FIXUP_STRIDE || rec > NTFS_MAX_RECORD)
		return bad(err, -ENOTSUP, "MFT records of %llu bytes", (unsigned long long)rec);
	v->record_size = (uint32_t)rec;
	return 0;
}

/* ---- runlists ---- */


static int rl_add(struct ntfs_runlist *rl, uint64_t lcn, uint64_t len, const char *what,
		  struct im_err *err)
{
	if (rl->n == rl->cap) {
		size_t cap = rl->cap ? rl->cap * 2 : 16;
		struct ntfs_run *r;

		if (rl->cap >= NTFS_MAX_RUNS)
			return bad(err, -ENOTSUP, "%s: more than %u runs", what, NTFS_MAX_RUNS);
		r = realloc(rl->runs, cap * sizeof(*r));
		if (!r)
			return bad(err, -ENOMEM, "out of memory");
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
static int decode_runs(const struct ntfs_vol *v, const unsigned char *a, uint32_t len,
		       struct ntfs_runlist *rl, const char *what, struct im_err *err)
{
	int64_t lowest = (int64_t)le64(a + NTFS_ATTR_LOWEST_VCN);
	int64_t highest = (int64_t)le64(a + NTFS_ATTR_HIGHEST_VCN);
	uint32_t mp = le16(a + NTFS_ATTR_MAPPING_OFS);
	uint64_t max_vcns = (1ull << 62) >> v->cluster_bits;
	const unsigned char *p, *end = a + len;
	int64_t lcn = 0;
	int r;

	if (lowest < 0 || (uint64_t)lowest != rl->vcns)
		return bad(err, -EINVAL, "%s: an extent starts at VCN %lld, expected %llu",
			    what, (long long)lowest, (unsigned long long)rl->vcns);
	if (mp < NTFS_ATTR_NONRES_HDR || mp >= len)
		return bad(err, -EINVAL, "%s: mapping pairs at %u of a %u-byte attribute",
			    what, mp, len);
	for (p = a + mp; p < end && *p; ) {
		unsigned ls = *p & 0x0F, os = *p >> 4;
		int64_t n;

		if (ls == 0 || ls > 8 || os > 8 || (size_t)(end - p) < 1u + ls + os)
			return bad(err, -EINVAL, "%s: bad run header 0x%02x", what, *p);
		n = sle(p + 1, ls);
		if (n <= 0 || (uint64_t)n > max_vcns - rl->vcns)
			return bad(err, -EINVAL, "%s: run of %lld clusters", what, (long long)n);
		if (os) {
			if (__builtin_add_overflow(lcn, sle(p + 1 + ls, os), &lcn) || lcn < 0 ||
			    (uint64_t)lcn >= v->nr_clusters ||
			    (uint64_t)n > v->nr_clusters - (uint64_t)lcn)
				return bad(err, -EINVAL,
					    "%s: run of %lld clusters at cluster %lld is outside the %llu clusters of the volume",
					    what, (long long)n, (long long)lcn,
					    (unsigned long long)v->nr_clusters);
			r = rl_add(rl, (uint64_t)lcn, (uint64_t)n, what, err);
		} else {
			r = rl_add(rl, NTFS_HOLE, (uint64_t)n, what, err);
		}
		if (r < 0)
			return r;
		p += 1 + ls + os;
	}
	if (highest < -1 || (int64_t)rl->vcns != highest + 1)
		return bad(err, -EINVAL, "%s: runs end at VCN %llu, the attribute says %lld",
			    what, (unsigned long long)rl->vcns, (long long)highest);
	return 0;
}

bool ntfs_has_holes(const struct ntfs_runlist *rl)
{
	for (size_t i = 0; i < rl->n; i++)
		if (rl->runs[i].lcn == NTFS_HOLE)
			return true;
	return false;
}

/* Check and undo the update sequence of a record or index block: the last
 * two bytes of every 512-byte stride hold the sequence number, their real
 * value is kept in the array. */
int ntfs_apply_fixups(unsigned char *buf, uint32_t size, const char *magic, const char *what,
		      struct im_err *err)
{
	uint32_t usa_ofs = le16(buf + NTFS_REC_USA_OFS), count = le16(buf + NTFS_REC_USA_COUNT);
	uint16_t usn;

	if (memcmp(buf, magic, 4) != 0) {
		if (memcmp(buf, "BAAD", 4) == 0)
			return bad(err, -EINVAL, "%s is marked bad (a torn write): the volume needs chkdsk /f",
				    what);
		return bad(err, -EINVAL, "%s: no %s signature", what, magic);
	}
	if ((usa_ofs & 1) || usa_ofs < 8 || count != size / NTFS_FIXUP_STRIDE + 1 ||
	    usa_ofs + 2 * count > NTFS_FIXUP_STRIDE - 2)
		return bad(err, -EINVAL, "%s: bad update sequence (offset %u, %u entries)",
			    what, usa_ofs, count);
	usn = le16(buf + usa_ofs);
	for (uint32_t i = 1; i < count; i++) {
		unsigned char *end = buf + i * NTFS_FIXUP_STRIDE - 2;

		if (le16(end) != usn)
			return bad(err, -EINVAL, "%s: update sequence mismatch in its sector %u",
				    what, i - 1);
		memcpy(end, buf + usa_ofs + 2 * i, 2);
	}
	return 0;
}

/* The next attribute at *pos of a checked record: 1 with *a and *alen set,
 * 0 at the end marker, negative when it does not fit in the record. */
int ntfs_next_attr(const unsigned char *rec, uint32_t *pos, const unsigned char **a,
		   uint32_t *alen, const char *what, struct im_err *err)
{
	uint32_t used = le32(rec + NTFS_REC_BYTES_USED), at = *pos, len, nlen, nofs;
	const unsigned char *p = rec + at;

	if (at > used - 4)
		return bad(err, -EINVAL, "%s: attributes run past the record's end", what);
	if (le32(p + NTFS_ATTR_TYPE) == NTFS_AT_END)
		return 0;
	if (used - at < NTFS_ATTR_RESIDENT_HDR)
		return bad(err, -EINVAL, "%s: attribute header past the record's end", what);
	len = le32(p + NTFS_ATTR_LENGTH);
	if (len < NTFS_ATTR_RESIDENT_HDR || len % 8 || len > used - at ||
	    p[NTFS_ATTR_NON_RESIDENT] > 1 || (p[NTFS_ATTR_NON_RESIDENT] && len < NTFS_ATTR_NONRES_HDR))
		return bad(err, -EINVAL, "%s: attribute 0x%x of %u bytes at %u does not fit",
			    what, le32(p + NTFS_ATTR_TYPE), len, at);
	nlen = p[NTFS_ATTR_NAME_LENGTH];
	nofs = le16(p + NTFS_ATTR_NAME_OFS);
	if (nlen && (nofs > len || 2 * nlen > len - nofs))
		return bad(err, -EINVAL, "%s: attribute name outside the attribute", what);
	if (!p[NTFS_ATTR_NON_RESIDENT]) {
		uint32_t vlen = le32(p + NTFS_ATTR_VALUE_LENGTH), vofs = le16(p + NTFS_ATTR_VALUE_OFS);

		if (vofs > len || vlen > len - vofs)
			return bad(err, -EINVAL, "%s: resident value outside the attribute", what);
	}
	*a = p;
	*alen = len;
	*pos = at + len;
	return 1;
}

/* Does UTF-16LE name (n code units) equal ascii?  Case-insensitive for
 * ASCII letters when fold (file names), exact otherwise (stream names). */
bool ntfs_name_is(const unsigned char *name, unsigned n, const char *ascii, bool fold)
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
bool ntfs_attr_is(const unsigned char *a, uint32_t type, const char *name)
{
	if (le32(a + NTFS_ATTR_TYPE) != type)
		return false;
	if (!name)
		return a[NTFS_ATTR_NAME_LENGTH] == 0;
	return ntfs_name_is(a + le16(a + NTFS_ATTR_NAME_OFS), a[NTFS_ATTR_NAME_LENGTH], name, false);
}

void ntfs_attr_free(struct ntfs_attr *d)
{
	free(d->value);
	free(d->rl.runs);
	memset(d, 0, sizeof(*d));
}

/* Add one extent (a checked attribute) to d; the first sets its kind and sizes. */
int ntfs_take_extent(const struct ntfs_vol *v, struct ntfs_attr *d, bool first,
		     const unsigned char *a, uint32_t alen, const char *what, struct im_err *err)
{
	if (first) {
		d->flags = le16(a + NTFS_ATTR_FLAGS);
		d->resident = !a[NTFS_ATTR_NON_RESIDENT];
		if (d->resident) {
			d->value_len = le32(a + NTFS_ATTR_VALUE_LENGTH);
			d->value = malloc(d->value_len ? d->value_len : 1);
			if (!d->value)
				return bad(err, -ENOMEM, "out of memory");
			memcpy(d->value, a + le16(a + NTFS_ATTR_VALUE_OFS), d->value_len);
			return 0;
		}
		d->alloc = le64(a + NTFS_ATTR_ALLOC_SIZE);
		d->size = le64(a + NTFS_ATTR_DATA_SIZE);
		d->init = le64(a + NTFS_ATTR_INIT_SIZE);
		if (d->init > d->size || d->size > d->alloc || d->alloc > (1ull << 62) ||
		    d->alloc % v->cluster_size)
			return bad(err, -EINVAL,
				    "%s: sizes out of order (allocated %llu, data %llu, initialized %llu)",
				    what, (unsigned long long)d->alloc, (unsigned long long)d->size,
				    (unsigned long long)d->init);
	} else if (d->resident || !a[NTFS_ATTR_NON_RESIDENT]) {
		return bad(err, -EINVAL, "%s: a resident attribute in several extents", what);
	}
	return decode_runs(v, a, alen, &d->rl, what, err);
}

/* Look for a file name among the entries of one index node (hdr: its index
 * header, avail bytes from there).  The node pointers are not followed:
 * every block in use is scanned in turn, which is bounded and loop-free. */
int ntfs_scan_entries(const unsigned char *hdr, uint32_t avail, const char *fname,
		      uint64_t *mref, bool *found, const char *what, struct im_err *err)
{
	uint32_t pos = le32(hdr + NTFS_IH_ENTRIES_OFS), ilen = le32(hdr + NTFS_IH_INDEX_LENGTH);

	if (avail < NTFS_IH_LEN || pos < NTFS_IH_LEN || pos % 8 || ilen > avail || pos > ilen)
		return bad(err, -EINVAL, "%s: bad index header (entries at %u, %u bytes)",
			    what, pos, ilen);
	while (pos < ilen) {
		const unsigned char *e = hdr + pos;
		uint32_t elen, klen, eflags, room;

		if (ilen - pos < NTFS_IE_KEY)
			return bad(err, -EINVAL, "%s: index entry past the node's end", what);
		elen = le16(e + NTFS_IE_LENGTH);
		klen = le16(e + NTFS_IE_KEY_LENGTH);
		eflags = le16(e + NTFS_IE_FLAGS);
		if (elen < NTFS_IE_KEY || elen % 8 || elen > ilen - pos)
			return bad(err, -EINVAL, "%s: index entry of %u bytes at %u", what, elen, pos);
		if (eflags & NTFS_IE_END)
			return 0;
		room = elen - NTFS_IE_KEY - ((eflags & NTFS_IE_NODE) ? 8 : 0);
		if (elen < NTFS_IE_KEY + ((eflags & NTFS_IE_NODE) ? 8u : 0u) || klen < NTFS_FN_NAME ||
		    klen > room || NTFS_FN_NAME + 2u * e[NTFS_IE_KEY + NTFS_FN_NAME_LENGTH] > klen)
			return bad(err, -EINVAL, "%s: index key of %u bytes at %u", what, klen, pos);
		if (ntfs_name_is(e + NTFS_IE_KEY + NTFS_FN_NAME, e[NTFS_IE_KEY + NTFS_FN_NAME_LENGTH], fname, true)) {
			*mref = le64(e);
			*found = true;
			return 0;
		}
		pos += elen;
	}
	return bad(err, -EINVAL, "%s: index node without an end entry", what);
}

/* ---- records ---- */

int ntfs_check_record(const unsigned char *buf, uint32_t size, uint64_t recno, const char *what,
		      struct im_err *err)
{
	uint32_t usa_end, attrs, used;

	usa_end = le16(buf + NTFS_REC_USA_OFS) + 2u * le16(buf + NTFS_REC_USA_COUNT);
	attrs = le16(buf + NTFS_REC_ATTRS_OFS);
	used = le32(buf + NTFS_REC_BYTES_USED);
	if (attrs < usa_end || attrs % 8 || used > size || used < attrs + 8 ||
	    le32(buf + NTFS_REC_BYTES_ALLOC) != size)
		return bad(err, -EINVAL, "%s: bad record header (attributes at %u, %u of %u bytes used)",
			    what, attrs, used, le32(buf + NTFS_REC_BYTES_ALLOC));
	if (le16(buf + NTFS_REC_USA_OFS) >= 0x30 && le32(buf + NTFS_REC_NUMBER) != (uint32_t)recno)
		return bad(err, -EINVAL, "%s: MFT record %llu says it is record %u",
			    what, (unsigned long long)recno, le32(buf + NTFS_REC_NUMBER));
	return 0;
}
