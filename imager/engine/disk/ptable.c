/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "imager/ptable.h"

#include <errno.h>
#include <fcntl.h>
#include <parted/parted.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "util.h"

/* libparted reports problems through one process-wide callback, offers no
 * per-call context, and is not thread-safe: its calls are serialised by
 * parted_lock (ptable_read), and the handler keeps the first error in the
 * buffer of the call that holds the lock.  Every question is answered with
 * "ignore" or "cancel": the engine never prompts. */
static pthread_mutex_t parted_lock = PTHREAD_MUTEX_INITIALIZER;
static char *parted_msg;           /* the holder's buffer (PARTED_MSG bytes) */
#define PARTED_MSG 512

static PedExceptionOption parted_handler(PedException *ex)
{
	if (parted_msg && !parted_msg[0] && ex->type >= PED_EXCEPTION_ERROR)
		snprintf(parted_msg, PARTED_MSG, "%s", ex->message);
	/* Never "fix": the source is read, not changed.  "Ignore" and "OK"
	 * go on with what libparted could read (for example the primary GPT
	 * when the backup is corrupt; the boot areas keep the bytes as they
	 * are). */
	if (ex->options & PED_EXCEPTION_IGNORE)
		return PED_EXCEPTION_IGNORE;
	if (ex->options & PED_EXCEPTION_OK)
		return PED_EXCEPTION_OK;
	if (ex->options & PED_EXCEPTION_CANCEL)
		return PED_EXCEPTION_CANCEL;
	return PED_EXCEPTION_UNHANDLED;
}

static int add_area(struct ptable *pt, const char *name, uint64_t off, uint64_t len)
{
	if (!len)
		return 0;
	if (pt->nareas >= PT_MAX_AREAS)
		return -E2BIG;
	snprintf(pt->areas[pt->nareas].name, sizeof(pt->areas[0].name), "%s", name);
	pt->areas[pt->nareas].offset = off;
	pt->areas[pt->nareas].length = len;
	pt->nareas++;
	return 0;
}

struct gpt_geom {
	uint64_t alternate_lba, entries_lba, first_usable, last_usable;
	uint32_t num_entries, entry_size, header_size;
	uint64_t entries_sectors;
};

/* Parse and check the primary GPT header (LBA 1).  Hostile input: every
 * field is range-checked against the disk.  Returns 0 or -EINVAL. */
static int gpt_header_parse(const unsigned char *h, unsigned lss, uint64_t disk_size,
			    struct gpt_geom *g)
{
	unsigned char copy[512];
	uint64_t sectors = disk_size / lss;

	if (memcmp(h, "EFI PART", 8))
		return -EINVAL;
	g->header_size = le32(h + 12);
	if (g->header_size < 92 || g->header_size > 512 || g->header_size > lss)
		return -EINVAL;
	memcpy(copy, h, g->header_size);
	memset(copy + 16, 0, 4);
	if ((uint32_t)crc32(0, copy, g->header_size) != le32(h + 16))
		return -EBADMSG;
	g->alternate_lba = le64(h + 32);
	g->first_usable = le64(h + 40);
	g->last_usable = le64(h + 48);
	g->entries_lba = le64(h + 72);
	g->num_entries = le32(h + 80);
	g->entry_size = le32(h + 84);
	if (g->entry_size < 128 || g->entry_size > 4096 || (g->entry_size & 7) ||
	    g->num_entries == 0 || g->num_entries > 65536)
		return -EINVAL;
	g->entries_sectors = ((uint64_t)g->num_entries * g->entry_size + lss - 1) / lss;
	if (g->alternate_lba >= sectors || g->alternate_lba <= g->entries_sectors ||
	    g->entries_lba >= sectors || g->entries_lba + g->entries_sectors > sectors)
		return -EINVAL;
	return 0;
}

/* Where the backup GPT lives, from the primary header; the last 33
 * sectors when the header cannot be trusted. */
static void gpt_backup_area(const char *path, uint64_t size, unsigned lss,
			    uint64_t *off, uint64_t *len)
{
	unsigned char h[4096];
	struct gpt_geom g;
	FILE *f = fopen(path, "rbe");
	bool ok = false;

	if (f) {
		ok = lss <= sizeof(h) && util_pread_full(fileno(f), h, lss, lss) == 0 &&
		     gpt_header_parse(h, lss, size, &g) == 0;
		fclose(f);
	}
	if (ok) {
		*off = (g.alternate_lba - g.entries_sectors) * lss;
		*len = (g.entries_sectors + 1) * lss;
	} else {
		*len = 33ull * lss;
		*off = size > *len ? size - *len : 0;
		*len = size - *off;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return (x[0] > y[0]) - (x[0] < y[0]);
}

/* One partition 0 over the whole disk, so that nothing on it is dropped. */
static void whole_disk(struct ptable *pt)
{
	snprintf(pt->type, sizeof(pt->type), "none");
	pt->nparts = 1;
	memset(&pt->parts[0], 0, sizeof(pt->parts[0]));
	pt->parts[0].size = pt->disk_size;
	snprintf(pt->parts[0].kind, sizeof(pt->parts[0].kind), "whole-disk");
}

/* The table's type into pt: 0 for msdos and gpt, 1 when there is no table
 * (a whole-disk filesystem, or nothing at all: pt is then that one
 * partition), or an error for the types we do not copy. */
static int probe_table_type(PedDevice *dev, const char *path, struct ptable *pt, struct im_err *err)
{
	PedDiskType *type = ped_disk_probe(dev);

	if (!type || !strcmp(type->name, "loop")) {
		whole_disk(pt);
		return 1;
	}
	if (strcmp(type->name, "msdos") && strcmp(type->name, "gpt"))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: partition table type \"%s\" is not supported (msdos and gpt are)",
			       path, type->name);
	snprintf(pt->type, sizeof(pt->type), "%s", type->name);
	pt->sector_size = (unsigned)dev->sector_size;
	return 0;
}

/* What the partitions tell about the bytes between them. */
struct pt_scan {
	uint64_t ext_start, ext_end;   /* the extended partition; 0 when none */
	uint64_t first_start;          /* the lowest start of a data partition */
	uint64_t (*spans)[2];          /* data partitions [start, end), sorted */
	size_t nspans;
};

static void add_partition(struct ptable *pt, PedDisk *disk, PedPartition *p, uint64_t start,
			  uint64_t len)
{
	struct pt_part *pp = &pt->parts[pt->nparts++];

	pp->number = (unsigned)p->num;
	pp->start = start;
	pp->size = len;
	snprintf(pp->kind, sizeof(pp->kind), "%s", !strcmp(pt->type, "gpt") ? "gpt" :
		 (p->type & PED_PARTITION_LOGICAL) ? "logical" : "primary");
	if (ped_disk_type_check_feature(disk->type, PED_DISK_TYPE_PARTITION_NAME)) {
		const char *name = ped_partition_get_name(p);
		snprintf(pp->name, sizeof(pp->name), "%s", name ? name : "");
	}
}

/* Every active partition into pt (the extended one only into sc), each
 * checked to lie inside the disk. */
static int read_partitions(PedDisk *disk, const char *path, struct ptable *pt, struct pt_scan *sc,
			   struct im_err *err)
{
	uint64_t lss = (uint64_t)disk->dev->sector_size, size = pt->disk_size;

	for (PedPartition *p = ped_disk_next_partition(disk, NULL); p;
	     p = ped_disk_next_partition(disk, p)) {
		uint64_t start, len;

		if (p->num < 1 || !ped_partition_is_active(p))
			continue;
		start = (uint64_t)p->geom.start * lss;
		len = (uint64_t)p->geom.length * lss;
		if (start >= size || len > size - start)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "%s: partition %d lies outside the disk", path, p->num);
		if (p->type & PED_PARTITION_EXTENDED) {
			sc->ext_start = start;
			sc->ext_end = start + len;
			continue;
		}
		if (pt->nparts >= PT_MAX_PARTS)
			return im_errf(err, IM_EXIT_UNSUPP, -E2BIG, "%s: more than %d partitions",
				       path, PT_MAX_PARTS);
		add_partition(pt, disk, p, start, len);
		sc->spans[sc->nspans][0] = start;
		sc->spans[sc->nspans][1] = start + len;
		sc->nspans++;
		if (start < sc->first_start)
			sc->first_start = start;
	}
	qsort(sc->spans, sc->nspans, sizeof(*sc->spans), cmp_u64);
	return 0;
}

/* The head: boot code, table, and the gap GRUB's core image uses. */
static int add_head_area(struct ptable *pt, const struct pt_scan *sc)
{
	uint64_t size = pt->disk_size, first_start = sc->first_start;

	if (first_start == UINT64_MAX)
		first_start = size < (1u << 20) ? size : (1u << 20);
	if (sc->ext_start && sc->ext_start < first_start)
		first_start = sc->ext_start + pt->sector_size;   /* the first EBR too */
	return add_area(pt, "head", 0, first_start < PT_HEAD_MAX ? first_start : PT_HEAD_MAX);
}

/* Gaps inside the extended partition hold the EBR chain: each kept whole,
 * or its two ends when it is large. */
static int add_ebr_areas(struct ptable *pt, const struct pt_scan *sc)
{
	uint64_t pos = sc->ext_start;
	int r = 0;

	for (size_t i = 0; i <= sc->nspans && r == 0; i++) {
		uint64_t gap_end = i < sc->nspans ? sc->spans[i][0] : sc->ext_end;
		if (gap_end > sc->ext_end)
			gap_end = sc->ext_end;
		if (gap_end > pos && pos >= sc->ext_start) {
			char name[32];
			snprintf(name, sizeof(name), "ebr-%zu", i);
			if (gap_end - pos <= 2 * PT_EBR_KEEP) {
				r = add_area(pt, name, pos, gap_end - pos);
			} else {
				r = add_area(pt, name, pos, PT_EBR_KEEP);
				if (r == 0)
					r = add_area(pt, name, gap_end - PT_EBR_KEEP, PT_EBR_KEEP);
			}
		}
		if (i < sc->nspans && sc->spans[i][1] > pos)
			pos = sc->spans[i][1];
	}
	return r;
}

static int add_boot_areas(struct ptable *pt, const char *path, const struct pt_scan *sc,
			  struct im_err *err)
{
	int r = add_head_area(pt, sc);

	if (r == 0 && sc->ext_end)
		r = add_ebr_areas(pt, sc);
	if (r == 0 && !strcmp(pt->type, "gpt")) {
		uint64_t off, len;
		gpt_backup_area(path, pt->disk_size, pt->sector_size, &off, &len);
		r = add_area(pt, "gpt-backup", off, len);
	}
	if (r < 0)
		r = im_errf(err, IM_EXIT_UNSUPP, r, "%s: too many boot areas", path);
	return r;
}

/* The partitions of the table libparted read, then the boot areas around
 * them. */
static int read_table(PedDisk *disk, const char *path, struct ptable *pt, struct im_err *err)
{
	struct pt_scan sc = { .first_start = UINT64_MAX };
	int r;

	sc.spans = calloc(PT_MAX_PARTS, sizeof(*sc.spans));
	if (!sc.spans)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = read_partitions(disk, path, pt, &sc, err);
	/* A table without partitions (or a filesystem whose boot sector
	 * libparted took for an empty MBR): copy the whole disk. */
	if (r == 0 && sc.nspans == 0)
		whole_disk(pt);
	else if (r == 0)
		r = add_boot_areas(pt, path, &sc, err);
	free(sc.spans);
	return r;
}

/* libparted 3.5 aborts (ped_malloc's assertion) on a GPT header whose
 * entry array is empty (no entries, or entries of 0 bytes), whatever its
 * checksum (found by fuzz-ptable; `parted print` aborts too): such a
 * header, primary or backup, is refused before libparted sees it, as is
 * one whose checksum holds but whose entry array is impossible.  And it
 * reads the array of a header whose checksum is wrong as well: a damaged
 * or hostile header that claims 32768 entries of 32 KiB had it read 1 GiB
 * for 15 s (fuzz-ptable again): an array over GPT_MAX_ARRAY is refused
 * whatever the checksum (real tables hold 128 entries of 128 bytes, 16 KiB). */
#define GPT_MAX_ARRAY (1u << 20)
static int gpt_headers_sane(const char *path, uint64_t size, unsigned lss, struct im_err *err)
{
	unsigned char h[4096];
	const uint64_t at[2] = { lss, size >= 2 * (uint64_t)lss ? size - lss : 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0 || lss > sizeof(h))
		goto out;
	for (int i = 0; i < 2 && r == 0; i++) {
		uint32_t hs, n, esz;
		unsigned char copy[512];
		if (!at[i] || pread(fd, h, lss, (off_t)at[i]) != (ssize_t)lss || memcmp(h, "EFI PART", 8))
			continue;
		n = le32(h + 80);
		esz = le32(h + 84);
		hs = le32(h + 12);
		/* (libparted reads the entry array of a header before it trusts
		 * its checksum: an empty or a huge array harms it either way) */
		if ((uint64_t)n * esz > GPT_MAX_ARRAY) {
			r = im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				    "%s: the GPT %s header lists %u entries of %u bytes (%llu bytes, "
				    "over the %u imager reads): not a valid table (damaged or hostile; "
				    "if the other header is sound, gdisk's recovery menu rebuilds "
				    "from it)", path, i ? "backup" : "primary", n, esz,
				    (unsigned long long)n * esz, GPT_MAX_ARRAY);
			break;
		}
		if (n && esz) {
			if (hs < 92 || hs > 512 || hs > lss)
				continue;
			memcpy(copy, h, hs);
			memset(copy + 16, 0, 4);
			if ((uint32_t)crc32(0, copy, hs) != le32(h + 16))
				continue;   /* (a broken checksum: libparted passes it over) */
		}
		if (n == 0 || n > 65536 || esz < 128 || esz > 4096 || (esz & 7))
			r = im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				    "%s: the GPT %s header lists %u entries of %u bytes: not a valid "
				    "table (damaged or hostile)", path, i ? "backup" : "primary", n, esz);
	}
out:
	if (fd >= 0)
		close(fd);
	return r;
}

/* libparted 3.5 aborts (an assertion under ped_disk_add_partition) on an
 * EBR chain whose logical partitions lie past the disk's end (found by
 * fuzz-ptable; imager info ended with SIGABRT): every entry of the MBR and
 * of each EBR of the chain is checked against the disk before libparted
 * reads them.  A table with such an entry was refused anyway once read
 * ("lies outside the disk"), so nothing readable is refused here. */
static bool mbr_extended(unsigned type)
{
	return type == 0x05 || type == 0x0f || type == 0x85;
}

static int msdos_entries_sane(const char *path, uint64_t size, unsigned lss, struct im_err *err)
{
	unsigned char s[4096];
	const uint64_t sectors = lss ? size / lss : 0;
	uint64_t ext = 0, ebr;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0, number = 5;

	if (fd < 0 || lss < 512 || lss > sizeof(s) ||
	    pread(fd, s, lss, 0) != (ssize_t)lss || s[510] != 0x55 || s[511] != 0xaa)
		goto out;
	for (int i = 0; i < 4 && r == 0; i++) {
		const unsigned char *e = s + 446 + 16 * i;
		uint64_t start = le32(e + 8), n = le32(e + 12);
		if (!e[4] || !n || e[4] == 0xee)
			continue;
		if (start + n > sectors)
			r = im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				    "%s: partition %d lies outside the disk (the MBR is damaged or "
				    "hostile)", path, i + 1);
		else if (mbr_extended(e[4]) && !ext)
			ext = start;
	}
	/* the chain, bounded: a loop ends after 256 hops */
	ebr = ext;
	for (int hop = 0; r == 0 && ebr && ebr < sectors && hop < 256; hop++) {
		uint64_t next = 0;
		if (pread(fd, s, lss, (off_t)(ebr * lss)) != (ssize_t)lss || s[510] != 0x55 ||
		    s[511] != 0xaa)
			break;
		for (int i = 0; i < 4 && r == 0; i++) {
			const unsigned char *e = s + 446 + 16 * i;
			uint64_t start = le32(e + 8), n = le32(e + 12);
			if (!e[4] || !n)
				continue;
			if (mbr_extended(e[4])) {
				if (!next)
					next = ext + start;
				continue;
			}
			if (ebr + start + n > sectors)
				r = im_errf(err, IM_EXIT_SOURCE, -EINVAL,
					    "%s: partition %d lies outside the disk (an extended boot "
					    "record is damaged or hostile)", path, number);
			number++;
		}
		ebr = next != ebr ? next : 0;
	}
out:
	if (fd >= 0)
		close(fd);
	return r;
}

/* ptable_read, with parted_lock held and msg as the handler's buffer. */
static int read_locked(const char *path, uint64_t size, struct ptable *pt, const char *msg,
		       struct im_err *err)
{
	PedDevice *dev;
	PedDisk *disk;
	int r;

	dev = ped_device_get(path);
	if (!dev)
		return im_errf(err, IM_EXIT_SOURCE, -EIO, "%s: libparted cannot open it: %s", path,
			       msg[0] ? msg : "unknown error");
	r = probe_table_type(dev, path, pt, err);
	if (r != 0) {
		ped_device_destroy(dev);
		return r < 0 ? r : 0;
	}
	if (!strcmp(pt->type, "msdos") &&
	    (r = msdos_entries_sane(path, size, pt->sector_size, err)) < 0) {
		ped_device_destroy(dev);
		return r;
	}
	if (!strcmp(pt->type, "gpt") && (r = gpt_headers_sane(path, size, pt->sector_size, err)) < 0) {
		ped_device_destroy(dev);
		return r;
	}
	disk = ped_disk_new(dev);
	if (!disk) {
		ped_device_destroy(dev);
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: unreadable %s partition table: %s",
			       path, pt->type, msg[0] ? msg : "libparted refused it");
	}
	r = read_table(disk, path, pt, err);
	ped_disk_destroy(disk);
	ped_device_destroy(dev);
	return r;
}

int ptable_read(const char *path, uint64_t size, unsigned lss, struct ptable *pt,
		struct im_err *err)
{
	char msg[PARTED_MSG] = "";
	int r;

	memset(pt, 0, sizeof(*pt));
	pt->disk_size = size;
	pt->sector_size = lss ? lss : 512;
	pthread_mutex_lock(&parted_lock);
	parted_msg = msg;
	ped_exception_set_handler(parted_handler);
	r = read_locked(path, size, pt, msg, err);
	parted_msg = NULL;
	pthread_mutex_unlock(&parted_lock);
	return r;
}

int ptable_gpt_check(const unsigned char *head, size_t len, unsigned lss, uint64_t disk_size,
		     struct im_err *err)
{
	struct gpt_geom g;
	int r;

	if (lss < 512 || lss > 4096 || len < 2ull * lss)
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "no room for a GPT header");
	r = gpt_header_parse(head + lss, lss, disk_size, &g);
	if (r == -EBADMSG)
		return im_errf(err, IM_EXIT_DAMAGED, r,
			       "the GPT header's checksum does not match: damaged");
	if (r < 0)
		return im_errf(err, IM_EXIT_DAMAGED, r, "the GPT header is not valid");
	if (g.entries_lba * lss + g.entries_sectors * lss > len)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "a GPT whose entries lie beyond its first %zu bytes", len);
	if ((uint32_t)crc32(0, head + g.entries_lba * lss,
			    (uInt)((uint64_t)g.num_entries * g.entry_size)) != le32(head + lss + 88))
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "the GPT's partition entries do not match their checksum");
	return 0;
}

int ptable_gpt_relocate_backup(struct bk *bk, uint64_t new_size, unsigned lss, struct im_err *err)
{
	unsigned char hdr[4096], backup[4096], mbr[512];
	unsigned char *entries = NULL;
	struct gpt_geom g;
	uint64_t last = new_size / lss - 1, bentries;
	size_t elen;
	int r;

	if (lss > sizeof(hdr) || lss < 512)
		return im_errf(err, IM_EXIT_UNSUPP, -EINVAL, "sector size %u not supported", lss);
	r = bk_pread(bk, hdr, lss, lss, err);
	if (r < 0)
		return r;
	/* (On a smaller disk the alternate still names the old end.) */
	if (gpt_header_parse(hdr, lss, UINT64_MAX / 2, &g) < 0 ||
	    g.entries_lba + 2 * g.entries_sectors + 2 > last)
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "the restored GPT header is not valid");
	elen = (size_t)(g.entries_sectors * lss);
	entries = malloc(elen);
	if (!entries)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = bk_pread(bk, entries, elen, g.entries_lba * lss, err);
	if (r == 0 && (uint32_t)crc32(0, entries, (uInt)((uint64_t)g.num_entries * g.entry_size)) !=
			      le32(hdr + 88))
		r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			    "the restored GPT's partition entries do not match their checksum");
	if (r < 0) {
		free(entries);
		return r;
	}
	bentries = last - g.entries_sectors;
	/* Primary: new alternate and last usable LBA. */
	put_le64(hdr + 32, last);
	put_le64(hdr + 48, bentries - 1);
	memset(hdr + 16, 0, 4);
	put_le32(hdr + 16, (uint32_t)crc32(0, hdr, g.header_size));
	/* Backup: the primary seen from the other end. */
	memcpy(backup, hdr, lss);
	put_le64(backup + 24, last);
	put_le64(backup + 32, 1);
	put_le64(backup + 72, bentries);
	memset(backup + 16, 0, 4);
	put_le32(backup + 16, (uint32_t)crc32(0, backup, g.header_size));
	r = bk_pwrite(bk, entries, elen, bentries * lss, err);
	if (r == 0)
		r = bk_pwrite(bk, backup, lss, last * lss, err);
	if (r == 0)
		r = bk_pwrite(bk, hdr, lss, lss, err);
	/* The protective MBR covers the whole disk, as far as 32 bits reach. */
	if (r == 0 && (r = bk_pread(bk, mbr, sizeof(mbr), 0, err)) == 0 &&
	    mbr[510] == 0x55 && mbr[511] == 0xAA) {
		for (int i = 0; i < 4; i++) {
			unsigned char *e = mbr + 446 + 16 * i;
			if (e[4] == 0xEE) {
				uint64_t n = new_size / lss - le32(e + 8);
				put_le32(e + 12, n > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)n);
				r = bk_pwrite(bk, mbr, sizeof(mbr), 0, err);
				break;
			}
		}
	}
	free(entries);
	return r;
}

/* Copy [off, off+len) of bk into the shadow file. */
static int shadow_copy(struct bk *bk, int fd, uint64_t off, uint64_t len, unsigned char *buf,
		       struct im_err *err)
{
	int r = bk_pread(bk, buf, len, off, err);
	if (r == 0 && util_pwrite_full(fd, buf, len, off) < 0)
		r = im_errf(err, IM_EXIT_INTERNAL, -EIO, "writing the table's shadow: %s", strerror(errno));
	return r;
}

static bool is_extended(unsigned char type)
{
	return type == 0x05 || type == 0x0f || type == 0x85;
}

int ptable_read_bk(struct bk *bk, struct ptable *pt, struct im_err *err)
{
	const uint64_t mib = 1u << 20;
	unsigned char *buf;
	uint64_t n;
	int fd, r;

	if (bk->raw_path[0])
		return ptable_read(bk->raw_path, bk->size, bk->sector_size, pt, err);
	if (bk->size < 512)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: too small to be a disk", bk->name);
	/* A sparse shadow of the disk in memory (libparted opens it through
	 * /proc/self/fd): only the first and last MiB and the EBRs are
	 * written, so it costs those pages and no temporary file. */
	buf = malloc(mib);
	fd = memfd_create("imager-table", MFD_CLOEXEC);
	if (!buf || fd < 0) {
		r = -errno;
		free(buf);
		if (fd >= 0)
			close(fd);
		return im_errf(err, IM_EXIT_INTERNAL, r, "cannot make the table's shadow in memory: %s",
			       strerror(-r));
	}
	r = ftruncate(fd, (off_t)bk->size) < 0 ? im_errf(err, IM_EXIT_INTERNAL, -errno,
		"cannot size the table's shadow to %llu bytes", (unsigned long long)bk->size) : 0;
	n = bk->size < mib ? bk->size : mib;
	if (r == 0)
		r = shadow_copy(bk, fd, 0, n, buf, err);
	if (r == 0 && bk->size > mib)
		r = shadow_copy(bk, fd, bk->size - mib, mib, buf, err);
	/* Follow the EBR chain of an extended partition, bounded and checked. */
	if (r == 0)
		r = bk_pread(bk, buf, 512, 0, err);
	if (r == 0 && buf[510] == 0x55 && buf[511] == 0xAA) {
		for (int i = 0; i < 4 && r == 0; i++) {
			const unsigned char *e = buf + 446 + 16 * i;
			uint64_t ext = le32(e + 8), next = ext;
			unsigned char sec[512];
			if (!is_extended(e[4]) || !ext)
				continue;
			for (int hops = 0; hops < PT_MAX_PARTS && next * 512 + 512 <= bk->size; hops++) {
				const unsigned char *link = sec + 446 + 16;
				uint64_t following;
				if (bk_pread(bk, sec, 512, next * 512, err) < 0 ||
				    util_pwrite_full(fd, sec, 512, next * 512) < 0) {
					r = -EIO;
					break;
				}
				following = ext + le32(link + 8);
				if (sec[510] != 0x55 || sec[511] != 0xAA || !is_extended(link[4]) ||
				    !le32(link + 8) || following <= next)
					break;   /* the end of the chain, or a loop */
				next = following;
			}
		}
	}
	if (r == 0) {
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		r = ptable_read(proc, bk->size, bk->sector_size, pt, err);
		if (r < 0)
			im_err_prefix(err, "%s: ", bk->name);
	}
	close(fd);
	free(buf);
	return r;
}

static void put_chs(unsigned char *p, uint64_t lba)
{
	unsigned c, h, s;

	if (lba >= 1024ull * 255 * 63) {
		c = 1023;
		h = 254;
		s = 63;
	} else {
		c = (unsigned)(lba / (255 * 63));
		h = (unsigned)(lba / 63 % 255);
		s = (unsigned)(lba % 63 + 1);
	}
	p[0] = (unsigned char)h;
	p[1] = (unsigned char)(s | ((c >> 2) & 0xC0));
	p[2] = (unsigned char)c;
}

void ptable_mbr_entry(unsigned char *e, uint64_t start_lba, uint64_t rel_start, uint64_t sectors)
{
	put_chs(e + 1, start_lba);
	put_chs(e + 5, start_lba + sectors - 1);
	put_le32(e + 8, (uint32_t)rel_start);
	put_le32(e + 12, (uint32_t)sectors);
}
