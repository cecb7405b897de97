/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Shrinking an LVM2 physical volume in place, without device-mapper
 * (include/imager/lvmfmt.h): the PV read and checked (label, its one
 * metadata area, the VG's text), the LV that gives up extents and how
 * many, the segments after it moved down, then the text, the metadata
 * area header and the label rewritten.  Run by shrink.c on a temporary
 * copy of the PV.
 */
#include "imager/lvmfmt.h"
#include "imager/bytes.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pvw {
	int fd;
	uint64_t off, size;
	unsigned char label[LVM_SECTOR];
	uint64_t label_off;          /* from the PV's start */
	uint32_t pvh;                /* the pv_header's place in the label sector */
	uint64_t mda, mda_size, roff, rsize;
	unsigned char mdah[LVM_MDA_HEADER];
	char *orig;                  /* the committed text as it is */
	struct lvm_tree tree;        /* parsed from a copy */
	const struct lvm_node *vg, *pv;
	char pv_name[64];
	uint64_t extent_bytes, pe_start, pe_count;
};

#define WHY(code, ...) lvm_errf(err, (code), __VA_ARGS__)

static void pvw_free(struct pvw *w)
{
	free(w->orig);
	lvm_tree_free(&w->tree);
}

/* The label (its PV UUID in uuid) and the one metadata area it names. */
static int pvw_label(struct pvw *w, char uuid[33], struct im_err *err)
{
	unsigned char b[LVM_LABEL_SCAN * LVM_SECTOR];
	unsigned list = 0, nmda = 0;
	int s;

	if (w->size < (1u << 20) || util_pread_full(w->fd, b, sizeof(b), w->off) < 0)
		return WHY(-EIO, "the PV cannot be read");
	s = lvm_label_in(b);
	if (s < 0)
		return WHY(-EINVAL, "no LVM2 label with a right checksum");
	w->label_off = (uint64_t)s * LVM_SECTOR;
	memcpy(w->label, b + w->label_off, LVM_SECTOR);
	w->pvh = le32(w->label + 20);
	if (w->pvh < 32 || w->pvh > LVM_SECTOR - 32 - 16)
		return WHY(-EINVAL, "the label's contents lie outside its sector");
	memcpy(uuid, w->label + w->pvh, 32);
	uuid[32] = '\0';
	if (le64(w->label + w->pvh + 32) > w->size)
		return WHY(-EINVAL, "the PV says it is larger than its partition");
	for (uint32_t at = w->pvh + 40; list < 2; at += 16) {
		uint64_t a, sz;

		if (at + 16 > LVM_SECTOR)
			return WHY(-EINVAL, "the label's area lists run past its sector");
		a = le64(w->label + at);
		sz = le64(w->label + at + 8);
		if (!a && !sz) {
			list++;
			continue;
		}
		if (list == 1) {
			if (nmda++)
				return WHY(-ENOTSUP, "the PV has two metadata areas");
			w->mda = a;
			w->mda_size = sz;
		}
	}
	if (!nmda || w->mda < w->label_off + LVM_SECTOR || w->mda_size < 2 * LVM_MDA_HEADER ||
	    w->mda > w->size || w->mda_size > w->size - w->mda)
		return WHY(-ENOTSUP, "the PV has no usable metadata area at its start");
	return 0;
}

/* The metadata area's header and its committed text, checked and parsed. */
static int pvw_text(struct pvw *w, struct im_err *err)
{
	uint64_t first;
	uint32_t crc;
	const char *bad;
	char *copy;
	int r;

	if (util_pread_full(w->fd, w->mdah, LVM_MDA_HEADER, w->off + w->mda) < 0)
		return WHY(-EIO, "the metadata area cannot be read");
	bad = lvm_mda_check(w->mdah, w->mda, w->mda_size, &w->roff, &w->rsize, &crc);
	if (bad)
		return WHY(-EINVAL, "metadata area: %s", bad);
	w->orig = malloc(w->rsize + 1);
	if (!w->orig)
		return WHY(-ENOMEM, "out of memory");
	first = w->roff + w->rsize > w->mda_size ? w->mda_size - w->roff : w->rsize;
	r = util_pread_full(w->fd, w->orig, first, w->off + w->mda + w->roff);
	if (r == 0 && first < w->rsize)
		r = util_pread_full(w->fd, w->orig + first, w->rsize - first,
				    w->off + w->mda + LVM_MDA_HEADER);
	if (r < 0)
		return WHY(-EIO, "the metadata text cannot be read");
	if (lvm_crc(LVM_CRC_SEED, (unsigned char *)w->orig, w->rsize) != crc)
		return WHY(-EINVAL, "the metadata text's checksum is wrong");
	w->orig[w->rsize] = '\0';
	copy = malloc(w->rsize + 1);
	if (!copy)
		return WHY(-ENOMEM, "out of memory");
	memcpy(copy, w->orig, w->rsize + 1);
	if (lvm_tree_parse(&w->tree, copy, w->rsize) < 0)
		return WHY(-EINVAL, "metadata text: %s", w->tree.err);
	return 0;
}

/* The VG of the text: of this one PV, its extents sane. */
static int pvw_vg(struct pvw *w, const char *uuid, struct im_err *err)
{
	const struct lvm_tree *t = &w->tree;
	const struct lvm_node *pvs;
	const char *id;
	char plain[33];
	unsigned npv = 0;
	int64_t v;

	w->vg = lvm_tree_vg(t);
	if (!w->vg)
		return WHY(-EINVAL, "the metadata text holds no volume group");
	pvs = lvm_child(t, w->vg, "physical_volumes");
	for (uint32_t i = pvs->first; i; i = t->nodes[i].next)
		if (t->nodes[i].kind == LVM_N_SECTION && npv++ == 0)
			w->pv = &t->nodes[i];
	if (npv != 1)
		return WHY(-ENOTSUP, "the VG has %u PVs (one is shrunk)", npv);
	id = lvm_get_str(t, w->pv, "id");
	if (lvm_uuid_plain(id ? id : "", plain) != strlen(uuid) || strcmp(plain, uuid))
		return WHY(-EINVAL, "the VG's PV is not this one");
	snprintf(w->pv_name, sizeof(w->pv_name), "%.*s", (int)w->pv->name_len, w->pv->name);
	if (!lvm_get_int(t, w->vg, "extent_size", &v) || v <= 0 || v > (INT64_C(1) << 35))
		return WHY(-EINVAL, "no sane extent_size");
	w->extent_bytes = (uint64_t)v * LVM_SECTOR;
	if (!lvm_get_int(t, w->pv, "pe_start", &v) || v < 0 || (uint64_t)v > w->size / LVM_SECTOR)
		return WHY(-EINVAL, "no sane pe_start");
	w->pe_start = (uint64_t)v * LVM_SECTOR;
	if (!lvm_get_int(t, w->pv, "pe_count", &v) || v < 0 ||
	    (uint64_t)v > (w->size - w->pe_start) / w->extent_bytes)
		return WHY(-EINVAL, "no sane pe_count");
	w->pe_count = (uint64_t)v;
	if (w->mda + w->mda_size > w->pe_start)
		return WHY(-EINVAL, "the metadata area overlaps the extents");
	return 0;
}

/* The PV read and checked, as far as shrinking it needs. */
static int pvw_load(struct pvw *w, int fd, uint64_t off, uint64_t size, struct im_err *err)
{
	char uuid[33];
	int r;

	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->off = off;
	w->size = size;
	r = pvw_label(w, uuid, err);
	if (r == 0)
		r = pvw_text(w, err);
	if (r == 0)
		r = pvw_vg(w, uuid, err);
	return r;
}

typedef int seg_fn(void *arg, const struct lvm_node *lv, const struct lvm_node *count,
		   const struct lvm_node *pe);

/* Each segment of each LV: linear on this PV, or refused.  fn sees the
 * LV's section, the segment's extent_count node and its first PE node. */
static int pvw_segments(struct pvw *w, seg_fn *fn, void *arg, struct im_err *err)
{
	const struct lvm_tree *t = &w->tree;
	const struct lvm_node *lvs = lvm_child(t, w->vg, "logical_volumes");

	for (uint32_t i = lvs ? lvs->first : 0; i; i = t->nodes[i].next) {
		const struct lvm_node *lv = &t->nodes[i];
		if (lv->kind != LVM_N_SECTION)
			continue;
		for (uint32_t k = lv->first; k; k = t->nodes[k].next) {
			const struct lvm_node *seg = &t->nodes[k], *count, *stripes, *nm, *pe;
			const char *type;
			int64_t sc = 0;
			int r;

			if (!lvm_is_segment(seg))
				continue;
			type = lvm_get_str(t, seg, "type");
			count = lvm_child(t, seg, "extent_count");
			stripes = lvm_child(t, seg, "stripes");
			lvm_get_int(t, seg, "stripe_count", &sc);
			if (!type || strcmp(type, "striped") || sc != 1 || !stripes ||
			    stripes->kind != LVM_N_ARRAY || !stripes->first)
				return WHY(-ENOTSUP, "LV %.*s has %s segments (only linear LVs are moved)",
					   (int)lv->name_len, lv->name, type ? type : "untyped");
			nm = &t->nodes[stripes->first];
			pe = nm->next ? &t->nodes[nm->next] : NULL;
			if (nm->kind != LVM_N_STRING || strcmp(nm->str, w->pv_name) || !pe || pe->kind != LVM_N_INT ||
			    pe->next || !count || count->kind != LVM_N_INT || count->num <= 0 || pe->num < 0 ||
			    (uint64_t)pe->num > w->pe_count ||
			    (uint64_t)count->num > w->pe_count - (uint64_t)pe->num)
				return WHY(-EINVAL, "LV %.*s: a segment that is not on this PV's extents",
					   (int)lv->name_len, lv->name);
			r = fn(arg, lv, count, pe);
			if (r)
				return r;
		}
	}
	return 0;
}

struct pick {
	const char *lv;          /* the LV's name in the VG */
	const struct lvm_node *count, *pe;
	unsigned nsegs;
	uint64_t used_end;       /* past the last used extent */
};

static int pick_lv(void *arg, const struct lvm_node *lv, const struct lvm_node *count,
		   const struct lvm_node *pe)
{
	struct pick *k = arg;
	if (strlen(k->lv) == lv->name_len && !memcmp(lv->name, k->lv, lv->name_len)) {
		k->nsegs++;
		k->count = count;
		k->pe = pe;
	}
	if ((uint64_t)(pe->num + count->num) > k->used_end)
		k->used_end = (uint64_t)(pe->num + count->num);
	return 0;
}

/* The LV named, and the extents it gives up for new_size. */
static int pvw_plan(struct pvw *w, const char *name, uint64_t new_size, struct pick *k,
		    uint64_t *delta, struct im_err *err)
{
	size_t vl = strlen(name);
	const char *slash = strchr(name, '/');
	uint64_t keep;
	int r;

	memset(k, 0, sizeof(*k));
	if (!slash || (size_t)(slash - name) != w->vg->name_len ||
	    memcmp(name, w->vg->name, w->vg->name_len) || vl - (size_t)(slash - name) < 2)
		return WHY(-EINVAL, "no LV %s in VG %.*s", name, (int)w->vg->name_len, w->vg->name);
	k->lv = slash + 1;
	r = pvw_segments(w, pick_lv, k, err);
	if (r)
		return r;
	if (k->nsegs != 1)
		return WHY(k->nsegs ? -ENOTSUP : -EINVAL, "LV %s has %u segments (one is shrunk)",
			   name, k->nsegs);
	if (!new_size || new_size >= w->size) {
		*delta = 0;
		return 0;
	}
	if (new_size < w->pe_start + w->extent_bytes)
		return WHY(-ENOSPC, "%llu bytes cannot hold the PV", (unsigned long long)new_size);
	keep = (new_size - w->pe_start) / w->extent_bytes;
	*delta = keep < w->pe_count ? w->pe_count - keep : 0;
	if (*delta >= (uint64_t)k->count->num)
		return WHY(-ENOSPC, "LV %s cannot give up %llu of its %lld extents", name,
			   (unsigned long long)*delta, (long long)k->count->num);
	return 0;
}

int lvm_pv_find_lv(int fd, uint64_t off, uint64_t size, const char *name, uint64_t new_size,
		   struct lvm_pv_lv *out, struct im_err *err)
{
	struct pvw w;
	struct pick k;
	uint64_t delta = 0;
	int r = pvw_load(&w, fd, off, size, err);

	if (r == 0)
		r = pvw_plan(&w, name, new_size, &k, &delta, err);
	if (r == 0) {
		out->extent_bytes = w.extent_bytes;
		out->pe_start = w.pe_start;
		out->pe_count = w.pe_count;
		out->offset = w.pe_start + (uint64_t)k.pe->num * w.extent_bytes;
		out->size = (uint64_t)k.count->num * w.extent_bytes;
		out->new_size = out->size - delta * w.extent_bytes;
	}
	pvw_free(&w);
	return r;
}

/* Bytes [src, src+len) of fd moved down to dst (< src), holes kept holes. */
static int move_down(int fd, uint64_t src, uint64_t dst, uint64_t len)
{
	static unsigned char buf[1 << 20];

	for (uint64_t done = 0; done < len;) {
		size_t n = len - done < sizeof(buf) ? (size_t)(len - done) : sizeof(buf);
		off_t d = lseek(fd, (off_t)(src + done), SEEK_DATA);
		int r;

		if (d < 0 || (uint64_t)d >= src + done + n) {
			r = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      (off_t)(dst + done), (off_t)n) < 0 ? -errno : 0;
			if (r == -EOPNOTSUPP) {
				memset(buf, 0, n);
				r = util_pwrite_full(fd, buf, n, dst + done);
			}
		} else {
			r = util_pread_full(fd, buf, n, src + done);
			if (r == 0)
				r = util_pwrite_full(fd, buf, n, dst + done);
		}
		if (r < 0)
			return r;
		done += n;
	}
	return 0;
}

struct edit {
	uint32_t pos, len;
	int64_t value;
};

struct mover {
	struct pvw *w;
	uint64_t after, delta;    /* segments from PE `after` on move down delta */
	struct edit *edits;
	size_t n, cap;
	int err;
};

static int add_edit(struct mover *m, const struct lvm_node *n, int64_t value)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		struct edit *e = realloc(m->edits, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		m->edits = e;
		m->cap = cap;
	}
	m->edits[m->n++] = (struct edit){ n->pos, n->len, value };
	return 0;
}

static int move_segment(void *arg, const struct lvm_node *lv, const struct lvm_node *count,
			const struct lvm_node *pe)
{
	struct mover *m = arg;
	struct pvw *w = m->w;
	(void)lv;
	if ((uint64_t)pe->num < m->after)
		return 0;
	m->err = move_down(w->fd, w->off + w->pe_start + (uint64_t)pe->num * w->extent_bytes,
			   w->off + w->pe_start + ((uint64_t)pe->num - m->delta) * w->extent_bytes,
			   (uint64_t)count->num * w->extent_bytes);
	if (m->err)
		return m->err;
	return add_edit(m, pe, pe->num - (int64_t)m->delta);
}

static int cmp_edit(const void *a, const void *b)
{
	const struct edit *x = a, *y = b;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* The text with the numbers of m's edits replaced, written after the
 * metadata area's header, then the header pointing at it, then the label
 * with the new device size. */
static int pvw_rewrite(struct pvw *w, struct mover *m, uint64_t new_size,
		       struct im_err *err)
{
	char *text;
	size_t len = 0;
	int r;

	qsort(m->edits, m->n, sizeof(*m->edits), cmp_edit);
	text = malloc(w->rsize + 32 * m->n + 1);
	if (!text)
		return WHY(-ENOMEM, "out of memory");
	for (size_t i = 0, at = 0; i <= m->n; i++) {
		size_t to = i < m->n ? m->edits[i].pos : w->rsize;
		memcpy(text + len, w->orig + at, to - at);
		len += to - at;
		if (i < m->n) {
			len += (size_t)sprintf(text + len, "%lld", (long long)m->edits[i].value);
			at = to + m->edits[i].len;
		}
	}
	if (len > w->mda_size - LVM_MDA_HEADER) {
		free(text);
		return WHY(-ENOSPC, "the new metadata does not fit its area");
	}
	r = util_pwrite_full(w->fd, text, len, w->off + w->mda + LVM_MDA_HEADER);
	put_le64(w->mdah + 40, LVM_MDA_HEADER);
	put_le64(w->mdah + 48, len);
	put_le32(w->mdah + 56, lvm_crc(LVM_CRC_SEED, (unsigned char *)text, len));
	put_le32(w->mdah + 60, 0);
	memset(w->mdah + 64, 0, 24);   /* no second (precommitted) location */
	put_le32(w->mdah, lvm_crc(LVM_CRC_SEED, w->mdah + 4, LVM_MDA_HEADER - 4));
	free(text);
	if (r == 0)
		r = util_pwrite_full(w->fd, w->mdah, LVM_MDA_HEADER, w->off + w->mda);
	put_le64(w->label + w->pvh + 32, new_size);
	if (le64(w->label + w->pvh + 48))   /* a data area with a size: it ends at the new end */
		put_le64(w->label + w->pvh + 48, new_size - le64(w->label + w->pvh + 40));
	put_le32(w->label + 16, lvm_crc(LVM_CRC_SEED, w->label + 20, LVM_SECTOR - 20));
	if (r == 0)
		r = util_pwrite_full(w->fd, w->label, LVM_SECTOR, w->off + w->label_off);
	if (r < 0)
		WHY(r, "writing the PV: %s", strerror(-r));
	return r;
}

int lvm_pv_shrink(int fd, uint64_t off, uint64_t size, const char *name, uint64_t new_size,
		  struct im_err *err)
{
	struct pvw w;
	struct pick k;
	struct mover m = { 0 };
	uint64_t delta = 0;
	int64_t seqno;
	const struct lvm_node *n;
	int r = pvw_load(&w, fd, off, size, err);

	if (r == 0)
		r = pvw_plan(&w, name, new_size, &k, &delta, err);
	if (r)
		goto out;
	/* Every segment checked before a byte moves (pvw_plan walked them). */
	m.w = &w;
	m.after = (uint64_t)(k.pe->num + k.count->num);
	m.delta = delta;
	if (delta) {
		r = pvw_segments(&w, move_segment, &m, err);
		if (r) {
			if (m.err)
				WHY(m.err, "moving extents: %s", strerror(-m.err));
			else if (r == -ENOMEM)
				WHY(r, "out of memory");
			goto out;
		}
	}
	r = add_edit(&m, k.count, k.count->num - (int64_t)delta);
	if (r == 0 && (n = lvm_child(&w.tree, w.pv, "pe_count")) && n->kind == LVM_N_INT)
		r = add_edit(&m, n, (int64_t)(w.pe_count - delta));
	if (r == 0 && (n = lvm_child(&w.tree, w.pv, "dev_size")) && n->kind == LVM_N_INT)
		r = add_edit(&m, n, (int64_t)(new_size / LVM_SECTOR));
	if (r == 0 && lvm_get_int(&w.tree, w.vg, "seqno", &seqno) &&
	    (n = lvm_child(&w.tree, w.vg, "seqno")))
		r = add_edit(&m, n, seqno + 1);
	if (r) {
		r = WHY(-ENOMEM, "out of memory");
		goto out;
	}
	r = pvw_rewrite(&w, &m, new_size, err);
out:
	free(m.edits);
	pvw_free(&w);
	return r;
}
