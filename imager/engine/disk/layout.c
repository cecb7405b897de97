/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "imager/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "imager/ptable.h"
#include "util.h"

#define MIB (1ull << 20)

static uint64_t align_down(uint64_t v, uint64_t a) { return v / a * a; }
static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* The last byte a partition may use, plus one. */
static uint64_t usable_end(const char *table, unsigned lss, uint64_t disk)
{
	if (!strcmp(table, "gpt"))
		return disk - 34ull * lss;   /* backup entries (32 sectors) and header */
	if (disk > 0xFFFFFFFFull * lss)
		return 0xFFFFFFFFull * lss;  /* what 32-bit MBR fields can address */
	return disk;
}

int layout_changed(const struct layout_part *parts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (parts[i].new_start != parts[i].old_start || parts[i].new_size != parts[i].old_size)
			return 1;
	return 0;
}

int layout_plan(enum grow_mode mode, const char *table, unsigned lss, uint64_t old_disk,
		uint64_t new_disk, struct layout_part *parts, size_t n, struct im_err *err)
{
	uint64_t old_end, new_end, first, old_span, new_span, prev_old_end, prev_new_end;
	(void)old_span;

	for (size_t i = 0; i < n; i++) {
		parts[i].new_start = parts[i].old_start;
		parts[i].new_size = parts[i].old_size;
	}
	if (mode == GROW_NONE || n == 0)
		return 0;
	if (!strcmp(table, "none"))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "the source has no partition table: there is no partition to grow");
	if (new_disk <= old_disk)
		return im_errf(err, IM_EXIT_TARGET, -EINVAL,
			       "growing needs a larger target (%llu bytes, the source has %llu)",
			       (unsigned long long)new_disk, (unsigned long long)old_disk);
	for (size_t i = 1; i < n; i++)
		if (parts[i].old_start < parts[i - 1].old_start + parts[i - 1].old_size)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "partitions overlap or are out of order");
	new_end = align_down(usable_end(table, lss, new_disk), MIB);
	old_end = parts[n - 1].old_start + parts[n - 1].old_size;
	if (new_end <= old_end)
		return 0;   /* nothing to gain */
	if (mode == GROW_LAST) {
		struct layout_part *p = &parts[n - 1];
		p->new_size = new_end - p->old_start;
		return 0;
	}
	/* Proportional: the space from the first partition's start on is
	 * scaled; each start rounds up and each size down to 1 MiB, and a
	 * partition never starts before the previous one ends plus the gap it
	 * had (a logical partition's EBR lives in that gap). */
	/* As Clonezilla's -k1: every partition scaled by the ratio of the disk
	 * sizes, so that free space at the end stays in proportion too. */
	first = parts[0].old_start;
	old_span = old_disk - first;
	new_span = new_disk - first;
	prev_old_end = prev_new_end = first;
	for (size_t i = 0; i < n; i++) {
		struct layout_part *p = &parts[i];
		uint64_t gap = p->old_start - prev_old_end;
		uint64_t start = first + (uint64_t)((long double)(p->old_start - first) * new_span / old_span);
		uint64_t size = (uint64_t)((long double)p->old_size * new_span / old_span);
		if (i == 0)
			start = first;
		else
			start = align_up(start, MIB);
		if (start < prev_new_end + gap)
			start = align_up(prev_new_end + gap, MIB);
		size = align_down(size, MIB);
		if (size < p->old_size)
			size = p->old_size;
		if (start + p->old_size > new_end)
			return im_errf(err, IM_EXIT_TARGET, -ENOSPC, "partition %u does not fit", p->number);
		if (start + size > new_end)
			size = new_end - start;
		p->new_start = start;
		p->new_size = size;
		prev_old_end = p->old_start + p->old_size;
		prev_new_end = start + size;
	}
	return 0;
}

/* Starts packed from the first partition's on (each after the previous
 * one's end, aligned), sizes as given; the end of the last. */
static uint64_t pack(struct layout_part *parts, size_t n)
{
	uint64_t end = parts[0].old_start;

	for (size_t i = 0; i < n; i++) {
		/* A logical partition keeps the gap before it: its EBR (and for
		 * the first, the extended partition's start) lives there. */
		uint64_t gap = i && !strcmp(parts[i].kind, "logical")
				       ? parts[i].old_start - (parts[i - 1].old_start + parts[i - 1].old_size)
				       : 0;
		parts[i].new_start = i ? align_up(end + gap, MIB) : parts[0].old_start;
		end = parts[i].new_start + parts[i].new_size;
	}
	return end;
}

int layout_plan_shrink(const char *table, unsigned lss, uint64_t new_disk,
		       struct layout_part *parts, const uint64_t *min_size, size_t n,
		       uint64_t *needed, struct im_err *err)
{
	uint64_t new_end, end;

	*needed = 0;
	if (n == 0 || !strcmp(table, "none"))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "the source has no partition table: there is no partition to shrink");
	for (size_t i = 0; i < n; i++) {
		if (i && parts[i].old_start < parts[i - 1].old_start + parts[i - 1].old_size)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "partitions overlap or are out of order");
		if (min_size[i] > parts[i].old_size || min_size[i] == 0)
			return im_errf(err, IM_EXIT_INTERNAL, -EINVAL, "partition %u: bad minimum size",
				       parts[i].number);
		parts[i].new_size = min_size[i];
	}
	new_end = align_down(usable_end(table, lss, new_disk), MIB);
	end = pack(parts, n);
	/* The smallest disk that holds the packed layout (and a GPT's backup). */
	*needed = align_up(end, MIB) + (strcmp(table, "gpt") ? 0 : MIB);
	if (end > new_end)
		return im_errf(err, IM_EXIT_TARGET, -ENOSPC,
			       "the partitions need at least %llu bytes even shrunk; the target has %llu",
			       (unsigned long long)*needed, (unsigned long long)new_disk);
	/* Shrink as little as the target needs: start again from the old
	 * sizes, and take what is missing from the partition with the most
	 * room to give first, then the next. */
	for (size_t i = 0; i < n; i++)
		parts[i].new_size = parts[i].old_size;
	for (;;) {
		size_t best = n;
		uint64_t missing, take;

		end = pack(parts, n);
		if (end <= new_end)
			break;
		missing = align_up(end - new_end, MIB);
		for (size_t i = 0; i < n; i++)
			if (parts[i].new_size > min_size[i] &&
			    (best == n || parts[i].new_size - min_size[i] >
						  parts[best].new_size - min_size[best]))
				best = i;
		if (best == n)
			break;   /* (cannot happen: the smallest layout fits) */
		take = parts[best].new_size - min_size[best];
		if (take > missing)
			take = missing;
		parts[best].new_size = align_down(parts[best].new_size - take, MIB);
		if (parts[best].new_size < min_size[best])
			parts[best].new_size = min_size[best];
	}
	end = pack(parts, n);
	if (end > new_end)   /* (alignment cannot make it grow past: checked) */
		return im_errf(err, IM_EXIT_INTERNAL, -ENOSPC, "the shrunk layout does not fit");
	return 0;
}

/* ---- tables ---- */

/* Bytes of the source at [off, off+len) from its boot areas, or NULL. */
static const unsigned char *area_bytes(size_t nareas, const uint64_t *offs, const uint64_t *lens,
				       unsigned char *const *data, uint64_t off, uint64_t len)
{
	for (size_t i = 0; i < nareas; i++)
		if (off >= offs[i] && off - offs[i] <= lens[i] && len <= lens[i] - (off - offs[i]))
			return data[i] + (off - offs[i]);
	return NULL;
}

static bool is_ext_type(unsigned char t) { return t == 0x05 || t == 0x0f || t == 0x85; }

static bool moved_logical(const struct layout_part *parts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(parts[i].kind, "logical") &&
		    (parts[i].new_start != parts[i].old_start || parts[i].new_size != parts[i].old_size))
			return true;
	return false;
}

static int write_mbr(struct bk *tgt, unsigned lss, const struct layout_part *parts, size_t n,
		     size_t nareas, const uint64_t *offs, const uint64_t *lens,
		     unsigned char *const *data, struct im_err *err)
{
	unsigned char mbr[512];
	uint64_t ext_start = 0, ext_end = 0;
	int ext_index = -1, r;
	/* The source's EBR chain, walked through its boot areas. */
	uint64_t ebr_old[128];
	size_t nebr = 0, nlog = 0;

	if (lss != 512)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "MBR with %u-byte sectors", lss);
	r = bk_pread(tgt, mbr, 512, 0, err);
	if (r < 0)
		return r;
	for (int i = 0; i < 4; i++) {
		unsigned char *e = mbr + 446 + 16 * i;
		if (is_ext_type(e[4])) {
			ext_index = i;
			ext_start = (uint64_t)le32(e + 8) * 512;
			ext_end = ext_start + (uint64_t)le32(e + 12) * 512;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct layout_part *p = &parts[i];
		if (!strcmp(p->kind, "primary") && p->number >= 1 && p->number <= 4)
			ptable_mbr_entry(mbr + 446 + 16 * (p->number - 1), p->new_start / 512, p->new_start / 512,
				  p->new_size / 512);
		if (!strcmp(p->kind, "logical"))
			nlog++;
	}
	if (nlog && ext_index >= 0) {
		uint64_t next = ext_start, last_end = 0;
		for (size_t hops = 0; hops < 128; hops++) {
			const unsigned char *sec = area_bytes(nareas, offs, lens, data, next, 512);
			const unsigned char *link;
			if (!sec || sec[510] != 0x55 || sec[511] != 0xAA)
				break;
			ebr_old[nebr++] = next;
			link = sec + 446 + 16;
			if (!is_ext_type(link[4]) || !le32(link + 8) ||
			    ext_start + (uint64_t)le32(link + 8) * 512 <= next)
				break;
			next = ext_start + (uint64_t)le32(link + 8) * 512;
		}
		if (nebr != nlog)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "the source's EBR chain has %zu links for %zu logical partitions",
				       nebr, nlog);
		/* The extended partition starts with the first EBR: it moves with
		 * the first logical partition. */
		for (size_t k = 0; k < n; k++)
			if (!strcmp(parts[k].kind, "logical")) {
				uint64_t shift = parts[k].old_start - ebr_old[0];
				ext_end = ext_end - ext_start;      /* its old length */
				ext_start = parts[k].new_start - shift;
				ext_end += ext_start;
				break;
			}
		/* Rebuild each EBR at its logical partition's new place. */
		for (size_t k = 0, li = 0; k < n; k++) {
			const struct layout_part *p = &parts[k], *q = NULL;
			unsigned char sec[512];
			uint64_t gap, ebr_new;
			if (strcmp(p->kind, "logical"))
				continue;
			gap = p->old_start - ebr_old[li];
			ebr_new = p->new_start - gap;
			memcpy(sec, area_bytes(nareas, offs, lens, data, ebr_old[li], 512), 512);
			ptable_mbr_entry(sec + 446, p->new_start / 512, gap / 512, p->new_size / 512);
			for (size_t m = k + 1; m < n && !q; m++)
				if (!strcmp(parts[m].kind, "logical"))
					q = &parts[m];
			if (q) {
				uint64_t qgap = q->old_start - ebr_old[li + 1];
				uint64_t qebr = q->new_start - qgap;
				ptable_mbr_entry(sec + 446 + 16, qebr / 512, (qebr - ext_start) / 512,
					  (q->new_start + q->new_size - qebr) / 512);
			} else {
				memset(sec + 446 + 16, 0, 16);
			}
			r = bk_pwrite(tgt, sec, 512, ebr_new, err);
			if (r < 0)
				return r;
			if (p->new_start + p->new_size > last_end)
				last_end = p->new_start + p->new_size;
			li++;
		}
		if (last_end > ext_end || moved_logical(parts, n))
			ext_end = last_end;
		ptable_mbr_entry(mbr + 446 + 16 * ext_index, ext_start / 512, ext_start / 512,
			  (ext_end - ext_start) / 512);
	}
	return bk_pwrite(tgt, mbr, 512, 0, err);
}

static int write_gpt(struct bk *tgt, unsigned lss, const struct layout_part *parts, size_t n,
		     struct im_err *err)
{
	unsigned char hdr[4096], *entries;
	uint64_t elba;
	uint32_t nent, esz, hsz;
	size_t elen;
	int r;

	if (lss > sizeof(hdr))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "sector size %u", lss);
	r = bk_pread(tgt, hdr, lss, lss, err);
	if (r < 0)
		return r;
	hsz = le32(hdr + 12);
	elba = le64(hdr + 72);
	nent = le32(hdr + 80);
	esz = le32(hdr + 84);
	if (memcmp(hdr, "EFI PART", 8) || hsz < 92 || hsz > lss || esz < 128 || esz > 4096 ||
	    nent == 0 || nent > 65536 || elba >= tgt->size / lss)
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "the GPT header on the target is not valid");
	elen = (size_t)nent * esz;
	entries = malloc(elen);
	if (!entries)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = bk_pread(tgt, entries, elen, elba * lss, err);
	for (size_t i = 0; i < n && r == 0; i++) {
		const struct layout_part *p = &parts[i];
		unsigned char *e;
		if (p->number < 1 || p->number > nent) {
			r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "GPT partition %u out of range", p->number);
			break;
		}
		e = entries + (size_t)(p->number - 1) * esz;
		put_le64(e + 32, p->new_start / lss);
		put_le64(e + 40, (p->new_start + p->new_size) / lss - 1);
	}
	if (r == 0) {
		put_le32(hdr + 88, (uint32_t)crc32(0, entries, (uInt)elen));
		memset(hdr + 16, 0, 4);
		put_le32(hdr + 16, (uint32_t)crc32(0, hdr, hsz));
		r = bk_pwrite(tgt, entries, elen, elba * lss, err);
	}
	if (r == 0)
		r = bk_pwrite(tgt, hdr, lss, lss, err);
	free(entries);
	return r;
}

int layout_write_table(struct bk *tgt, const char *table, unsigned lss,
		       const struct layout_part *parts, size_t n, size_t nareas,
		       const uint64_t *area_offs, const uint64_t *area_lens,
		       unsigned char *const *area_data, struct im_err *err)
{
	if (!strcmp(table, "msdos"))
		return write_mbr(tgt, lss, parts, n, nareas, area_offs, area_lens, area_data, err);
	if (!strcmp(table, "gpt"))
		return write_gpt(tgt, lss, parts, n, err);
	return 0;
}
