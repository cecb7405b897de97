/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A VG's text (vgcfgbackup's format: Clonezilla's lvm_VG.conf) mapped,
 * parsed as hostile input (include/imager/lvmfmt.h): its PVs and where
 * each LV's bytes lie on them; and a PV's head (label, metadata area
 * header, text) made afresh from it, as pvcreate --restorefile and
 * vgcfgrestore make them.  Used by the Clonezilla restore.
 */
#include "imager/lvmfmt.h"
#include "imager/bytes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHY(code, ...) lvm_errf(err, (code), __VA_ARGS__)
#define MAX_LVS  4096u
#define FAR      (UINT64_C(1) << 50)   /* no sane count of bytes reaches it */

/* ---- a VG's text mapped ---- */

void lvm_vg_map_free(struct lvm_vg_map *m)
{
	free(m->lvs);
	m->lvs = NULL;
	m->nlvs = 0;
}

/* The PVs of the VG into m. */
static int map_pvs(const struct lvm_tree *t, const struct lvm_node *pvs, struct lvm_vg_map *m,
		   struct im_err *err)
{
	for (uint32_t i = pvs->first; i; i = t->nodes[i].next) {
		const struct lvm_node *pv = &t->nodes[i];
		const char *id = lvm_get_str(t, pv, "id");
		int64_t start, count, dev = 0;

		if (pv->kind != LVM_N_SECTION)
			continue;
		if (m->npvs == LVM_MAP_PVS)
			return WHY(-ENOTSUP, "VG %s has more than %u PVs", m->vg, LVM_MAP_PVS);
		if (!id || !lvm_get_int(t, pv, "pe_start", &start) ||
		    !lvm_get_int(t, pv, "pe_count", &count) || start <= 0 || count < 0 ||
		    start > (INT64_C(1) << 40) || (uint64_t)count > FAR / m->extent_bytes)
			return WHY(-EINVAL, "VG %s: PV %.*s has no sane id, pe_start or pe_count", m->vg,
				   (int)pv->name_len, pv->name);
		lvm_get_int(t, pv, "dev_size", &dev);
		if (lvm_uuid_plain(id, m->pvs[m->npvs].uuid) < 32)
			return WHY(-EINVAL, "VG %s: a PV id that is not 32 characters", m->vg);
		m->pvs[m->npvs].pe_start = (uint64_t)start * LVM_SECTOR;
		m->pvs[m->npvs].dev_size = dev > 0 && dev < (INT64_C(1) << 50) ? (uint64_t)dev * LVM_SECTOR : 0;
		m->npvs++;
	}
	return 0;
}

/* The index in physical_volumes of the PV named name, or -1. */
static int pv_index(const struct lvm_tree *t, const struct lvm_node *pvs, const char *name)
{
	int n = 0;

	for (uint32_t j = pvs->first; j; j = t->nodes[j].next) {
		const struct lvm_node *pv = &t->nodes[j];

		if (pv->kind != LVM_N_SECTION)
			continue;
		if (strlen(name) == pv->name_len && !memcmp(name, pv->name, pv->name_len))
			return n;
		n++;
	}
	return -1;
}

/* One segment of LV l into l->segs (or l->linear made false). */
static int map_seg(const struct lvm_tree *t, const struct lvm_node *pvs, const struct lvm_node *seg,
		   struct lvm_vg_map *m, struct lvm_map_lv *l, struct im_err *err)
{
	const struct lvm_node *stripes, *nm, *pe;
	const char *type = lvm_get_str(t, seg, "type");
	int64_t start, count, sc = 0;
	int pvi;

	stripes = lvm_child(t, seg, "stripes");
	lvm_get_int(t, seg, "stripe_count", &sc);
	if (!lvm_get_int(t, seg, "start_extent", &start) ||
	    !lvm_get_int(t, seg, "extent_count", &count) || start < 0 || count <= 0 ||
	    (uint64_t)start > FAR / m->extent_bytes || (uint64_t)count > FAR / m->extent_bytes)
		return WHY(-EINVAL, "VG %s, LV %s: a segment without a sane start or count", m->vg, l->name);
	if (l->size < (uint64_t)(start + count) * m->extent_bytes)
		l->size = (uint64_t)(start + count) * m->extent_bytes;
	if (!type || strcmp(type, "striped") || sc != 1 || !stripes ||
	    stripes->kind != LVM_N_ARRAY || !stripes->first) {
		l->linear = false;
		return 0;
	}
	nm = &t->nodes[stripes->first];
	pe = nm->next ? &t->nodes[nm->next] : NULL;
	if (nm->kind != LVM_N_STRING || !pe || pe->kind != LVM_N_INT || pe->num < 0 ||
	    (uint64_t)pe->num > FAR / m->extent_bytes)
		return WHY(-EINVAL, "VG %s, LV %s: a bad stripes list", m->vg, l->name);
	pvi = pv_index(t, pvs, nm->str);
	if (pvi < 0)
		return WHY(-EINVAL, "VG %s, LV %s: a segment on an unknown PV", m->vg, l->name);
	if (l->nsegs == LVM_MAP_SEGS)
		return WHY(-ENOTSUP, "VG %s, LV %s has more than %u segments", m->vg, l->name, LVM_MAP_SEGS);
	l->segs[l->nsegs++] = (struct lvm_seg){
		(uint64_t)start * m->extent_bytes, (uint64_t)count * m->extent_bytes, (unsigned)pvi,
		m->pvs[pvi].pe_start + (uint64_t)pe->num * m->extent_bytes };
	return 0;
}

/* LV lv's segments into l; a linear LV is whole: its segments cover it
 * without a hole. */
static int map_lv(const struct lvm_tree *t, const struct lvm_node *pvs, const struct lvm_node *lv,
		  struct lvm_vg_map *m, struct lvm_map_lv *l, struct im_err *err)
{
	uint64_t covered = 0;

	snprintf(l->name, sizeof(l->name), "%.*s", (int)(lv->name_len < 127 ? lv->name_len : 127),
		 lv->name);
	l->linear = true;
	for (uint32_t k = lv->first; k; k = t->nodes[k].next) {
		int r;

		if (!lvm_is_segment(&t->nodes[k]))
			continue;
		r = map_seg(t, pvs, &t->nodes[k], m, l, err);
		if (r)
			return r;
	}
	for (size_t a = 0; a < l->nsegs && l->linear; a++)
		for (size_t b = a + 1; b < l->nsegs; b++)
			if (l->segs[a].lv_off < l->segs[b].lv_off + l->segs[b].len &&
			    l->segs[b].lv_off < l->segs[a].lv_off + l->segs[a].len)
				return WHY(-EINVAL, "VG %s, LV %s: two segments overlap", m->vg, l->name);
	if (l->linear) {
		for (size_t a = 0; a < l->nsegs; a++)
			covered += l->segs[a].len;
		if (covered != l->size)
			l->linear = false;
	}
	return 0;
}

/* The VG vg of t into m. */
static int map_vg(const struct lvm_tree *t, const struct lvm_node *vg, struct lvm_vg_map *m,
		  struct im_err *err)
{
	const struct lvm_node *pvs = lvm_child(t, vg, "physical_volumes"), *lvs;
	int64_t ext;
	int r;

	snprintf(m->vg, sizeof(m->vg), "%.*s", (int)(vg->name_len < 127 ? vg->name_len : 127), vg->name);
	m->vg_start = vg->pos;
	m->vg_end = vg->pos + vg->len;
	if (!lvm_get_int(t, vg, "extent_size", &ext) || ext <= 0 || ext > (INT64_C(1) << 35))
		return WHY(-EINVAL, "VG %s: no sane extent_size", m->vg);
	m->extent_bytes = (uint64_t)ext * LVM_SECTOR;
	r = map_pvs(t, pvs, m, err);
	if (r)
		return r;
	lvs = lvm_child(t, vg, "logical_volumes");
	for (uint32_t i = lvs ? lvs->first : 0; i; i = t->nodes[i].next)
		if (t->nodes[i].kind == LVM_N_SECTION)
			m->nlvs++;
	if (m->nlvs > MAX_LVS)
		return WHY(-EINVAL, "VG %s has too many LVs", m->vg);
	m->lvs = calloc(m->nlvs ? m->nlvs : 1, sizeof(*m->lvs));
	if (!m->lvs)
		return WHY(-ENOMEM, "out of memory");
	m->nlvs = 0;
	for (uint32_t i = lvs ? lvs->first : 0; i; i = t->nodes[i].next) {
		if (t->nodes[i].kind != LVM_N_SECTION)
			continue;
		r = map_lv(t, pvs, &t->nodes[i], m, &m->lvs[m->nlvs++], err);
		if (r)
			return r;
	}
	return 0;
}

int lvm_text_map(const char *text, size_t len, struct lvm_vg_map *m, struct im_err *err)
{
	struct lvm_tree t;
	const struct lvm_node *vg;
	char *copy;
	int r;

	memset(m, 0, sizeof(*m));
	if (len > LVM_TEXT_MAX)
		return WHY(-EINVAL, "the VG's text is larger than %u bytes", LVM_TEXT_MAX);
	copy = malloc(len + 1);
	if (!copy)
		return WHY(-ENOMEM, "out of memory");
	memcpy(copy, text, len);
	copy[len] = '\0';
	if (lvm_tree_parse(&t, copy, len) < 0) {
		r = WHY(-EINVAL, "the VG's text: %s (at byte %zu)", t.err, t.pos);
	} else if (!(vg = lvm_tree_vg(&t))) {
		r = WHY(-EINVAL, "the text holds no volume group");
	} else {
		r = map_vg(&t, vg, m, err);
	}
	lvm_tree_free(&t);
	if (r)
		lvm_vg_map_free(m);
	return r;
}

/* ---- a PV's head made from it ---- */

int lvm_pv_head(const struct lvm_vg_map *m, unsigned pv, const char *text, size_t len,
		uint64_t size, unsigned char **head, struct im_err *err)
{
	uint64_t pe_start, mda = 4096, mda_size;
	unsigned char *h, *l, *a;

	*head = NULL;
	if (pv >= m->npvs)
		return WHY(-EINVAL, "no PV %u", pv);
	pe_start = m->pvs[pv].pe_start;
	if (pe_start > (64u << 20) || pe_start > size || pe_start % LVM_SECTOR)
		return WHY(-EINVAL, "PV %s: pe_start %llu does not fit", m->pvs[pv].uuid,
			   (unsigned long long)pe_start);
	if (m->vg_end > len || m->vg_start >= m->vg_end)
		return WHY(-EINVAL, "the VG's section is not in this text");
	if (pe_start < mda + LVM_MDA_HEADER + len + 2)
		return WHY(-ENOSPC, "PV %s: the VG's text does not fit before pe_start", m->pvs[pv].uuid);
	mda_size = pe_start - mda;
	h = calloc(1, pe_start);
	if (!h)
		return WHY(-ENOMEM, "out of memory");
	l = h + LVM_SECTOR;
	memcpy(l, "LABELONE", 8);
	put_le64(l + 8, 1);
	put_le32(l + 20, 32);
	memcpy(l + 24, "LVM2 001", 8);
	memcpy(l + 32, m->pvs[pv].uuid, 32);
	put_le64(l + 64, size);
	put_le64(l + 72, pe_start);   /* the data area, to the end */
	put_le64(l + 104, mda);       /* the metadata area */
	put_le64(l + 112, mda_size);
	put_le32(l + 136, 2);         /* pv_header_extension: version 2, */
	put_le32(l + 140, 1);         /* PV_EXT_USED, no bootloader area */
	put_le32(l + 16, lvm_crc(LVM_CRC_SEED, l + 20, LVM_SECTOR - 20));
	a = h + mda;
	memcpy(a + 4, LVM_MDA_MAGIC, 16);
	put_le32(a + 20, 1);
	put_le64(a + 24, mda);
	put_le64(a + 32, mda_size);
	put_le64(a + 40, LVM_MDA_HEADER);
	/* The VG's section first (lvm2 looks for the VG's name at the text's
	 * start), then what came before and after it, then a NUL as lvm2
	 * writes it. */
	{
		unsigned char *o = a + LVM_MDA_HEADER;
		memcpy(o, text + m->vg_start, m->vg_end - m->vg_start);
		o += m->vg_end - m->vg_start;
		*o++ = '\n';
		memcpy(o, text, m->vg_start);
		o += m->vg_start;
		memcpy(o, text + m->vg_end, len - m->vg_end);
	}
	put_le64(a + 48, len + 2);
	put_le32(a + 56, lvm_crc(LVM_CRC_SEED, a + LVM_MDA_HEADER, len + 2));
	put_le32(a, lvm_crc(LVM_CRC_SEED, a + 4, LVM_MDA_HEADER - 4));
	*head = h;
	return 0;
}