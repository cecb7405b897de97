/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Clonezilla image folders (../sources/clonezilla.c) restored through the writer:
 * the boot areas planned, the PVs made afresh, each stream written, and
 * the folder described as the copy job's source (copyjob.h).
 */
#include "imager/clonezilla.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imager/lvmfmt.h"
#include "imager/ptable.h"
#include "imager/swapfmt.h"
#include "clonezilla-int.h"
#include "copyjob.h"
#include "util.h"

/* ---- the boot areas ---- */

/* A boot area's file, which must hold at least need bytes. */
static int read_area(const char *dir, const char *name, uint64_t need, unsigned char **buf,
		     size_t *len, struct im_err *err)
{
	int r = cz_read_file(dir, name, PT_HEAD_MAX, buf, len, err);

	if (r == -ENOENT)
		return im_errf(err, IM_EXIT_DAMAGED, r, "%s/%s: missing", dir, name);
	if (r == 0 && *len < need) {
		free(*buf);
		*buf = NULL;
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s/%s: shorter than %llu bytes", dir,
			       name, (unsigned long long)need);
	}
	return r;
}

/* The EBR chain of the logical partitions (facts in clonezilla.h), as
 * boot areas "ebr" after the head. */
static int plan_ebrs(const char *dir, const struct cz_image *cz, struct disk_plan *pl,
		     struct im_err *err)
{
	char name[128];
	unsigned char *first = NULL;
	uint64_t pos[CZ_MAX_PARTS], prev_end = cz->ext_start, lead = 0;
	size_t nlog = 0, len = 0, log[CZ_MAX_PARTS];
	int r;

	snprintf(name, sizeof(name), "%s-ebr", cz->ext_name);
	r = cz_read_file(dir, name, 512, &first, &len, err);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0 && (len != 512 || first[510] != 0x55 || first[511] != 0xAA)) {
		free(first);
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s/%s: not an EBR", dir, name);
	}
	for (size_t i = 0; i < cz->nparts; i++)
		if (cz->parts[i].logical)
			log[nlog++] = i;
	for (size_t k = 0; k < nlog; k++) {
		const struct cz_part *p = &cz->parts[log[k]];
		uint64_t at = p->start - lead;

		if (k == 0) {
			at = cz->ext_start;
			lead = p->start - at;
		} else if (k == 1 && first && le32(first + 446 + 16 + 8)) {
			uint64_t link = cz->ext_start + (uint64_t)le32(first + 446 + 16 + 8) * 512;
			if (link >= prev_end && link < p->start)
				at = link;
		}
		if (lead > p->start - prev_end)
			at = prev_end;
		pos[k] = at;
		prev_end = p->start + p->size;
	}
	for (size_t k = 0; k < nlog; k++) {
		const struct cz_part *p = &cz->parts[log[k]];
		unsigned char *sec = calloc(1, 512);
		size_t a = pl->nareas;

		if (!sec) {
			free(first);
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		}
		if (k == 0 && first)
			memcpy(sec, first, 446);  /* its boot code, as ocs-restore-ebr puts back */
		ptable_mbr_entry(sec + 446, p->start / 512, (p->start - pos[k]) / 512, p->size / 512);
		sec[446 + 4] = p->mbr_type;
		if (k + 1 < nlog) {
			const struct cz_part *q = &cz->parts[log[k + 1]];
			ptable_mbr_entry(sec + 446 + 16, pos[k + 1] / 512,
					 (pos[k + 1] - cz->ext_start) / 512,
					 (q->start + q->size - pos[k + 1]) / 512);
			sec[446 + 16 + 4] = 0x05;
		}
		sec[510] = 0x55;
		sec[511] = 0xAA;
		pl->area_data[a] = sec;
		/* (the plan keeps the name's pointer: a literal; the EBRs are told
		 * apart by their offsets) */
		disk_plan_set_area(pl, a, "ebr", pos[k], 512);
		pl->nareas++;
	}
	free(first);
	return 0;
}

/* The boot areas: the table's sectors and what Clonezilla kept of the
 * gap before the first partition. */
static int plan_areas(const char *dir, const struct cz_image *cz, struct disk_plan *pl,
		      struct im_err *err)
{
	char name[128];
	unsigned char *d;
	uint64_t first = cz->disk_size;
	size_t len;
	int r;

	for (size_t i = 0; i < cz->nparts; i++)
		if (cz->parts[i].start < first)
			first = cz->parts[i].start;
	if (cz->ext_size && cz->ext_start < first)
		first = cz->ext_start;  /* the first EBR */
	pl->nareas = 1;
	if (!strcmp(cz->table, "gpt")) {
		snprintf(name, sizeof(name), "%s-gpt-1st", cz->disk);
		r = read_area(dir, name, 34ull * cz->lss, &pl->area_data[0], &len, err);
		if (r == 0)
			r = ptable_gpt_check(pl->area_data[0], 34ull * cz->lss, cz->lss, cz->disk_size,
					     err);
		if (r < 0) {
			if (!strstr(err->msg, name))
				im_err_prefix(err, "%s: ", name);
			return r;
		}
		/* The backup is made from the primary when the table is written
		 * (Clonezilla's gpt-2nd misses the backup entries' first sector). */
		disk_plan_set_area(pl, 0, "head", 0, 34ull * cz->lss);
		return 0;
	}
	snprintf(name, sizeof(name), "%s-mbr", cz->disk);
	r = read_area(dir, name, 512, &pl->area_data[0], &len, err);
	if (r < 0)
		return r;
	d = pl->area_data[0];
	if (d[510] != 0x55 || d[511] != 0xAA)
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s/%s: no MBR signature", dir, name);
	/* The four entries as DISK-pt.sf has them (ocs-sr writes the table
	 * with sfdisk and puts back only the MBR's first 446 bytes). */
	memset(d + 446, 0, 64);
	for (size_t i = 0; i < cz->nparts; i++) {
		const struct cz_part *p = &cz->parts[i];
		unsigned char *e = d + 446 + 16 * (p->number - 1);
		if (p->logical)
			continue;
		ptable_mbr_entry(e, p->start / 512, p->start / 512, p->size / 512);
		e[0] = p->bootable ? 0x80 : 0;
		e[4] = p->mbr_type;
	}
	if (cz->ext_size) {
		unsigned char *e = d + 446 + 16 * (cz->ext_number - 1);
		ptable_mbr_entry(e, cz->ext_start / 512, cz->ext_start / 512, cz->ext_size / 512);
		e[4] = cz->ext_type;
		r = plan_ebrs(dir, cz, pl, err);
		if (r < 0)
			return r;
	}
	disk_plan_set_area(pl, 0, "head", 0, 512);
	snprintf(name, sizeof(name), "%s-hidden-data-after-mbr", cz->disk);
	r = first > 512 ? read_area(dir, name, 1, &pl->area_data[pl->nareas], &len, err) : -ENOENT;
	if (r == 0) {
		if (len > first - 512)
			len = first - 512;  /* never over the first partition */
		disk_plan_set_area(pl, pl->nareas, "head-gap", 512, len);
		pl->nareas++;
	}
	/* No hidden data: the gap stays as the target has it (and read_area's
	 * "missing" is no error: a later failure names its own cause). */
	if (r == -ENOENT)
		memset(err, 0, sizeof(*err));
	return r == -ENOENT ? 0 : r;
}

/* The LVs that lie on partition i alone (a PV), as the shrink planner
 * takes them (fs.h): out[] gets one per LV, at most CZ_MAX_LVS in all.
 * An LV's used bytes are its stream's; one not read by partclone (dd, a
 * swap's header) is kept whole. */
static size_t pv_volumes(const struct cz_image *cz, size_t i, const uint64_t *lv_used,
			 struct fs_volume *out)
{
	size_t n = 0;

	for (size_t l = 0; l < cz->nlvs; l++) {
		const struct cz_lv *lv = &cz->lvs[l];
		struct fs_volume *v = &out[n];
		bool here = lv->nsegs > 0;
		uint64_t size = 0, end = 0;

		for (size_t k = 0; k < lv->nsegs; k++) {
			here &= lv->segs[k].part == i;
			size += lv->segs[k].len;
			if (lv->segs[k].part_off + lv->segs[k].len > end)
				end = lv->segs[k].part_off + lv->segs[k].len;
		}
		if (!here)
			continue;
		memset(v, 0, sizeof(*v));
		snprintf(v->name, sizeof(v->name), "%s/%s", cz->vgs[lv->vg], lv->lv);
		snprintf(v->type, sizeof(v->type), "%s", lv->part.fs);
		snprintf(v->plugin, sizeof(v->plugin), "%s",
			 lv->part.kind == CZ_PTCL ? "partclone" : "whole");
		v->size = size;
		v->used_bytes = lv_used[l];
		v->end = end;
		n++;
	}
	return n;
}

/* A write of [off, off+len) of partition i, or, for an LV (j->lv), of the
 * LV's bytes, split over its segments. */
/* (struct cz_job's put) */
static int cz_put(struct cz_job *j, size_t i, uint64_t off, uint64_t len, const void *buf,
		  struct im_err *err)
{
	const struct cz_lv *lv = j->lv;
	const unsigned char *b = buf;

	if (!lv)
		return j->part_put(j->sink, i, off, len, buf, err);
	while (len) {
		size_t k;
		uint64_t n;
		int r;
		for (k = 0; k < lv->nsegs; k++)
			if (off >= lv->segs[k].lv_off && off - lv->segs[k].lv_off < lv->segs[k].len)
				break;
		if (k == lv->nsegs)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				       "LV %s: byte %llu of its stream lies outside its extents",
				       lv->part.name, (unsigned long long)off);
		n = lv->segs[k].len - (off - lv->segs[k].lv_off);
		if (n > len)
			n = len;
		r = j->part_put(j->sink, lv->segs[k].part,
				lv->segs[k].part_off + (off - lv->segs[k].lv_off), n, b, err);
		if (r < 0)
			return r;
		off += n;
		b += n;
		len -= n;
	}
	return 0;
}

/* One partition's or LV's stream written (j->lv: an LV). */
static int restore_part(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
			struct im_err *err)
{
	if (p->kind == CZ_PTCL)
		return cz_restore_ptcl(dir, p, i, j, err);
	if (p->kind == CZ_DD)
		return cz_read_dd(dir, p, i, j, NULL, NULL, 0, err);
	if (p->kind == CZ_NTFSCLONE)
		return cz_read_ntfsclone(dir, p, i, j, NULL, NULL, 0, err);
	if (p->kind == CZ_SWAP && p->size >= 40960) {
		unsigned char swap[4096], uuid[16];
		for (int k = 0, c = 0; p->swap_uuid[0] && k < 16; k++, c += 2) {
			if (p->swap_uuid[c] == '-')
				c++;
			uuid[k] = (unsigned char)strtoul(
				(char[3]){ p->swap_uuid[c], p->swap_uuid[c + 1], 0 }, NULL, 16);
		}
		swap_header_make(swap, p->size, p->swap_uuid[0] ? uuid : NULL, p->swap_label);
		j->done += sizeof(swap);
		return cz_put(j, i, 0, sizeof(swap), swap, err);
	}
	return 0;
}

/* Each PV made afresh from its VG's text. */
static int write_pvs(const char *dir, const struct cz_image *cz, struct cz_job *j,
		     struct im_err *err)
{
	for (size_t v = 0; v < cz->nvgs; v++) {
		struct lvm_vg_map map;
		char *text;
		size_t len;
		int r = cz_load_vg(dir, cz->vgs[v], &map, &text, &len, err);

		if (r < 0)
			return r;
		for (size_t i = 0; r == 0 && i < cz->nparts; i++) {
			const struct cz_part *p = &cz->parts[i];
			struct im_err e = { 0 };
			unsigned char *head;
			if (p->kind != CZ_PV || p->vg != v)
				continue;
			if (lvm_pv_head(&map, p->pv, text, len, p->size, &head, &e) < 0) {
				r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "partition %s: VG %s: %s",
					    p->name, cz->vgs[v], e.msg);
				break;
			}
			r = j->part_put(j->sink, i, 0, p->pe_start, head, err);
			j->done += p->pe_start;
			free(head);
		}
		lvm_vg_map_free(&map);
		free(text);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Does LV a lie before LV b on the disk (their first segments)?  LVs
 * without a segment come last. */
static bool lv_before(const struct cz_lv *a, const struct cz_lv *b)
{
	if (!a->nsegs || !b->nsegs)
		return a->nsegs > b->nsegs;
	if (a->segs[0].part != b->segs[0].part)
		return a->segs[0].part < b->segs[0].part;
	return a->segs[0].part_off < b->segs[0].part_off;
}

/* ---- the folder as the source of the copy job (copyjob.h) ---- */

struct czsrc {
	const char *dir;
	struct cz_image *cz;
	uint64_t used[CZ_MAX_PARTS], lv_used[CZ_MAX_LVS];
	struct fs_volume *vols;    /* CZ_MAX_LVS: the PVs' LVs, for the shrink planner */
	size_t nvols;
	struct cz_job j;
};

int cz_plan(const char *dir, const struct cz_image *cz, struct disk_plan *pl, uint64_t *total,
	    uint64_t *used, uint64_t *lv_used, struct im_err *err)
{
	int r = disk_plan_alloc(pl, cz->disk_size, cz->table, cz->lss, cz->nparts, 2 + cz->nparts,
				err);

	for (size_t i = 0; r == 0 && i < cz->nparts; i++) {
		const struct cz_part *p = &cz->parts[i];
		disk_plan_set_part(pl, i, p->number,
				   !strcmp(cz->table, "gpt") ? "gpt" : p->logical ? "logical" : "primary",
				   p->start, p->size);
		grow_fs_set(&pl->fs[i], p->fs[0] ? p->fs : NULL, NULL, 0);
	}
	if (r == 0)
		r = plan_areas(dir, cz, pl, err);
	if (r == 0)
		r = cz_count_used(dir, cz, total, used, lv_used, err);
	return r;
}

static int czsrc_plan(void *ctx, struct disk_plan *pl, uint64_t *total, struct im_err *err)
{
	struct czsrc *c = ctx;
	int r = cz_plan(c->dir, c->cz, pl, &c->j.total, c->used, c->lv_used, err);

	*total = c->j.total;
	return r;
}

static void czsrc_shrink_part(void *ctx, size_t i, struct shrink_part *sp)
{
	struct czsrc *c = ctx;

	if (i == 0)
		c->nvols = 0;
	snprintf(sp->fs, sizeof(sp->fs), "%s", c->cz->parts[i].fs);
	sp->used = c->used[i];
	if (c->cz->parts[i].kind == CZ_PV) {
		/* (an LV may shrink with its PV) */
		strcpy(sp->fs, "LVM2_member");
		sp->vols = c->vols + c->nvols;
		sp->nvols = pv_volumes(c->cz, i, c->lv_used, c->vols + c->nvols);
		c->nvols += sp->nvols;
	}
}

int cz_copy_part(const char *dir, const struct cz_image *cz, size_t i, struct cz_job *j,
		 struct im_err *err)
{
	bool done[CZ_MAX_LVS] = { false };
	int r;

	j->put = cz_put;
	r = i == 0 ? write_pvs(dir, cz, j, err) : 0;
	if (r == 0)
		r = restore_part(dir, &cz->parts[i], i, j, err);
	/* The LVs in the order of their first extent on the disk, so that
	 * each PV is written front to back. */
	for (size_t n = 0; r == 0 && i + 1 == cz->nparts && n < cz->nlvs; n++) {
		size_t l = cz->nlvs;
		for (size_t k = 0; k < cz->nlvs; k++)
			if (!done[k] && (l == cz->nlvs || lv_before(&cz->lvs[k], &cz->lvs[l])))
				l = k;
		done[l] = true;
		j->lv = &cz->lvs[l];
		r = restore_part(dir, &cz->lvs[l].part, 0, j, err);
		j->lv = NULL;
	}
	return r;
}

/* (the writer as struct cz_job's part_put) */
static int cz_writer_put(void *sink, size_t i, uint64_t off, uint64_t len, const void *buf,
			 struct im_err *err)
{
	return writer_put(sink, i, off, len, buf, err);
}

/* Partition i's stream; the PVs made afresh before the first, the LVs
 * written after the last. */
static int czsrc_copy(void *ctx, struct copyjob *cj, size_t i, uint64_t from, struct im_err *err)
{
	struct czsrc *c = ctx;
	int r;

	(void)from;   /* (no journal: nothing to resume) */
	if (i == 0) {
		c->j.sink = &cj->w;
		c->j.part_put = cz_writer_put;
		c->j.done = 0;
	}
	r = cz_copy_part(c->dir, c->cz, i, &c->j, err);
	cj->written = c->j.done;
	return r;
}

int cz_restore(const struct disk_roots *roots, const char *dir, const char *target,
	       const struct restore_opts *opts, struct restore_stats *stats, struct im_err *err)
{
	struct czsrc *c = calloc(1, sizeof(*c));
	const struct cj_source src = {
		.ctx = c, .what = "restore", .name = dir, .kind = TJNL_RESTORE,
		.plan = czsrc_plan, .shrink_part = czsrc_shrink_part, .copy = czsrc_copy,
	};
	const struct cj_opts o = cj_restore_opts(roots, target, opts);
	struct cj_stats st = CJ_STATS(stats);
	int r;

	memset(stats, 0, sizeof(*stats));
	if (c) {
		c->dir = dir;
		c->j.put = cz_put;
		c->j.progress = &opts->progress;
		c->cz = calloc(1, sizeof(*c->cz));
		c->vols = calloc(CZ_MAX_LVS, sizeof(*c->vols));
	}
	if (!c || !c->cz || !c->vols)
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	else
		r = cz_read(dir, c->cz, err);
	if (r == 0)
		r = cj_run(&src, &o, &st, err);
	if (c) {
		free(c->vols);
		free(c->cz);
	}
	free(c);
	return r;
}
