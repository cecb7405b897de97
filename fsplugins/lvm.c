/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LVM2 physical volumes: the label, the metadata areas and the space before
 * the first extent are kept byte for byte; each logical volume with linear
 * segments on this PV is examined as a filesystem of its own
 * (fs_mark_volume()), so an ext4 root or an XFS /home inside it costs its
 * used blocks only.  Segments of other kinds (thin pools, RAID, mirrors,
 * stripes over several PVs, an LV spread over other PVs) are kept whole and
 * named in the report.  Free extents are not stored.
 *
 * The on-disk facts and the metadata text's parser are the engine's
 * (include/imager/lvmfmt.h, imager/engine/fs/lvmfmt.c); the plugin reads
 * through fs_map()/fs_read() only.
 */
#include "imager/fsplugin.h"
#include "imager/bytes.h"
#include "imager/lvmfmt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LISTS       8u            /* data / metadata areas in a pv_header */
#define MAX_SEGMENTS    4096u

struct lvm_priv {
	uint64_t dev_size;
	uint64_t label_off;
	char uuid[33];                   /* the PV's, from its label */
	struct { uint64_t off, size; } mdas[MAX_LISTS];
	unsigned nmdas;
	struct lvm_tree tree;
	const struct lvm_node *vg;
	char vg_name[64];
	char pv_name[64];                /* "pv0": this PV in the VG's text */
	uint64_t extent_bytes, pe_start, pe_count;
	uint32_t bs;                     /* the block unit declared */
};

/* The label: in sectors 0..3, its own CRC right. */
static int find_label(struct fs_ctx *ctx, uint64_t *where)
{
	int err = 0;
	const unsigned char *b = fs_map(ctx, 0, LVM_LABEL_SCAN * LVM_SECTOR, &err);

	if (!b)
		return err ? err : -EIO;
	int s = lvm_label_in(b);

	if (s < 0)
		return 1;
	*where = (uint64_t)s * LVM_SECTOR;
	return 0;
}

static int lvm_probe(struct fs_ctx *ctx)
{
	uint64_t where;

	return find_label(ctx, &where);
}

static int parse_label(struct fs_ctx *ctx, struct lvm_priv *p)
{
	int err = 0;
	const unsigned char *l = fs_map(ctx, p->label_off, LVM_SECTOR, &err);
	uint32_t off;
	size_t at, end = LVM_SECTOR;
	unsigned list = 0, count = 0;

	if (!l)
		return fs_error(ctx, err, "reading the label");
	off = le32(l + 20);
	if (off < 32 || off > LVM_SECTOR - 32 - 16)
		return fs_error(ctx, -EINVAL, "label: contents at %u, outside the sector", off);
	memcpy(p->uuid, l + off, 32);
	p->uuid[32] = '\0';
	for (int i = 0; i < 32; i++)
		if (!lvm_name_char(p->uuid[i]))
			return fs_error(ctx, -EINVAL, "label: the PV UUID is not printable");
	p->dev_size = le64(l + off + 32);
	/* Two zero-terminated lists: data areas, then metadata areas. */
	for (at = off + 40; list < 2; at += 16) {
		uint64_t a, s;

		if (at + 16 > end)
			return fs_error(ctx, -EINVAL, "label: area lists run past the sector");
		a = le64(l + at);
		s = le64(l + at + 8);
		if (!a && !s) {
			list++;
			count = 0;
			continue;
		}
		if (++count > MAX_LISTS)
			return fs_error(ctx, -EINVAL, "label: more than %u areas in a list", MAX_LISTS);
		if (list == 1) {
			if (s < LVM_MDA_HEADER || a > fs_device_size(ctx) || s > fs_device_size(ctx) - a)
				return fs_error(ctx, -EINVAL, "label: metadata area %llu+%llu outside the device",
						(unsigned long long)a, (unsigned long long)s);
			p->mdas[p->nmdas].off = a;
			p->mdas[p->nmdas].size = s;
			p->nmdas++;
		}
	}
	if (!p->nmdas)
		return fs_error(ctx, -ENOTSUP, "the PV has no metadata area: its VG's layout is on other PVs");
	return 0;
}

/* The committed text of one metadata area, checked; malloc'ed. */
static int read_text(struct fs_ctx *ctx, uint64_t mda, uint64_t mda_size, char **text,
		     size_t *len)
{
	int err = 0;
	const unsigned char *h = fs_map(ctx, mda, LVM_MDA_HEADER, &err);
	uint64_t roff, rsize, first;
	uint32_t crc;
	char *buf;
	int r;

	const char *bad;

	if (!h)
		return fs_error(ctx, err, "reading the metadata area at %llu", (unsigned long long)mda);
	bad = lvm_mda_check(h, mda, mda_size, &roff, &rsize, &crc);
	if (bad && !strcmp(bad, "ignored"))
		return 1;   /* ignored copy: another area holds it */
	if (bad)
		return fs_error(ctx, -EINVAL, "metadata area at %llu: %s", (unsigned long long)mda, bad);
	buf = malloc(rsize + 1);
	if (!buf)
		return fs_error(ctx, -ENOMEM, "out of memory");
	first = roff + rsize > mda_size ? mda_size - roff : rsize;   /* it wraps after the end */
	r = fs_read(ctx, mda + roff, buf, first);
	if (r == 0 && first < rsize)
		r = fs_read(ctx, mda + LVM_MDA_HEADER, buf + first, rsize - first);
	if (r < 0) {
		free(buf);
		return fs_error(ctx, r, "reading the metadata text");
	}
	if (lvm_crc(LVM_CRC_SEED, (unsigned char *)buf, rsize) != crc) {
		free(buf);
		return fs_error(ctx, -EINVAL, "metadata area at %llu: text checksum wrong",
				(unsigned long long)mda);
	}
	buf[rsize] = '\0';
	*text = buf;
	*len = rsize;
	return 0;
}

static int find_vg(struct fs_ctx *ctx, struct lvm_priv *p)
{
	struct lvm_tree *t = &p->tree;
	const struct lvm_node *pvs;

	p->vg = lvm_tree_vg(t);
	if (!p->vg)
		return fs_error(ctx, -EINVAL, "the metadata text holds no volume group");
	snprintf(p->vg_name, sizeof(p->vg_name), "%.*s", (int)p->vg->name_len, p->vg->name);
	pvs = lvm_child(t, p->vg, "physical_volumes");
	for (uint32_t i = pvs->first; i; i = t->nodes[i].next) {
		const struct lvm_node *pv = &t->nodes[i];
		const char *id = lvm_get_str(t, pv, "id");
		char plain[33];
		int64_t start, count;

		if (!id || pv->kind != LVM_N_SECTION)
			continue;
		if (lvm_uuid_plain(id, plain) != strlen(p->uuid) || strcmp(plain, p->uuid))
			continue;
		if (!lvm_get_int(t, pv, "pe_start", &start) || !lvm_get_int(t, pv, "pe_count", &count) ||
		    start < 0 || count < 0 || (uint64_t)start > fs_device_size(ctx) / LVM_SECTOR)
			return fs_error(ctx, -EINVAL, "VG %s: PV %.*s has no sane pe_start/pe_count",
					p->vg_name, (int)pv->name_len, pv->name);
		snprintf(p->pv_name, sizeof(p->pv_name), "%.*s", (int)pv->name_len, pv->name);
		p->pe_start = (uint64_t)start * LVM_SECTOR;
		p->pe_count = (uint64_t)count;
		return 0;
	}
	return fs_error(ctx, -EINVAL, "VG %s does not list this PV (%s)", p->vg_name, p->uuid);
}

static int lvm_open(struct fs_ctx *ctx, void *priv)
{
	struct lvm_priv *p = priv;
	uint64_t size = fs_device_size(ctx);
	int64_t ext;
	uint32_t bs;
	char *text = NULL;
	size_t len = 0;
	int r = 1;

	r = find_label(ctx, &p->label_off);
	if (r)
		return r < 0 ? r : fs_error(ctx, -EINVAL, "no LVM2 label with a right checksum");
	r = parse_label(ctx, p);
	if (r < 0)
		return r;
	r = 1;
	for (unsigned i = 0; i < p->nmdas && r == 1; i++)
		r = read_text(ctx, p->mdas[i].off, p->mdas[i].size, &text, &len);
	if (r == 1)
		return fs_error(ctx, -EINVAL, "every metadata area is marked ignored");
	if (r < 0)
		return r;
	r = lvm_tree_parse(&p->tree, text, len);
	if (r < 0)
		return fs_error(ctx, r, "metadata text: %s (at byte %zu)", p->tree.err, p->tree.pos);
	r = find_vg(ctx, p);
	if (r < 0)
		return r;
	if (!lvm_get_int(&p->tree, p->vg, "extent_size", &ext) || ext <= 0 ||
	    (uint64_t)ext > (UINT64_C(1) << 35))
		return fs_error(ctx, -EINVAL, "VG %s: no sane extent_size", p->vg_name);
	p->extent_bytes = (uint64_t)ext * LVM_SECTOR;
	if (p->pe_start > size || p->pe_count > (size - p->pe_start) / p->extent_bytes)
		return fs_error(ctx, -EINVAL, "VG %s: %llu extents from %llu do not fit the %llu-byte PV",
				p->vg_name, (unsigned long long)p->pe_count,
				(unsigned long long)p->pe_start, (unsigned long long)size);
	/* 4 KiB blocks when everything falls on them, else sectors. */
	bs = 4096;
	if (p->pe_start % bs || p->extent_bytes % bs || size % bs)
		bs = LVM_SECTOR;
	for (unsigned i = 0; i < p->nmdas; i++)
		if (p->mdas[i].off % bs || p->mdas[i].size % bs)
			bs = LVM_SECTOR;
	p->bs = bs;
	return fs_set_geometry(ctx, bs, size / bs);
}

/* Bytes [off, off+len) of the PV. */
static int mark_range(struct fs_ctx *ctx, const struct lvm_priv *p, uint64_t off, uint64_t len)
{
	uint64_t first = off / p->bs, last;

	if (!len)
		return 0;
	last = (off + len - 1) / p->bs;
	if (fs_mark_used(ctx, first, last - first + 1) < 0)
		return fs_error(ctx, -EINVAL, "bytes %llu+%llu are outside the PV",
				(unsigned long long)off, (unsigned long long)len);
	return 0;
}

/* One segment's piece on this PV: its place in the LV, and on the device. */
struct piece {
	uint64_t le, count;     /* logical extents of the LV */
	uint64_t pe;            /* first physical extent here; UINT64_MAX: elsewhere */
	const char *kind;       /* why it cannot be read as part of a linear LV, or NULL */
};

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	return x->le < y->le ? -1 : x->le > y->le;
}

/* One LV's pieces on this PV, and why it cannot be read as a linear LV
 * ("" when it can). */
struct lv_found {
	struct piece *pieces;   /* MAX_SEGMENTS of them, the caller's */
	size_t n;
	char unreadable[64];
};

/* The pieces of one LV's segments (at most MAX_SEGMENTS). */
static int lv_pieces(struct fs_ctx *ctx, struct lvm_priv *p, const struct lvm_node *lv,
		     struct lv_found *f)
{
	struct piece *out = f->pieces;
	const struct lvm_tree *t = &p->tree;
	unsigned others = 0;

	f->n = 0;
	f->unreadable[0] = '\0';
	for (uint32_t i = lv->first; i; i = t->nodes[i].next) {
		const struct lvm_node *seg = &t->nodes[i], *stripes;
		int64_t start, count, sc = 1;
		const char *type;
		unsigned k = 0;

		if (!lvm_is_segment(seg))
			continue;
		type = lvm_get_str(t, seg, "type");
		if (!lvm_get_int(t, seg, "start_extent", &start) || !lvm_get_int(t, seg, "extent_count", &count) ||
		    start < 0 || count <= 0 || !type)
			return fs_error(ctx, -EINVAL, "VG %s, LV %.*s: a segment without start, count or type",
					p->vg_name, (int)lv->name_len, lv->name);
		stripes = lvm_child(t, seg, "stripes");
		lvm_get_int(t, seg, "stripe_count", &sc);
		/* stripes = [ "pv0", 0, "pv1", 0 ... ]: name and first PE pairs */
		for (uint32_t j = stripes && stripes->kind == LVM_N_ARRAY ? stripes->first : 0; j;
		     j = t->nodes[j].next) {
			const struct lvm_node *nm = &t->nodes[j], *pe = nm->next ? &t->nodes[nm->next] : NULL;
			uint64_t len = sc > 1 ? (uint64_t)count / (uint64_t)sc : (uint64_t)count;

			if (nm->kind != LVM_N_STRING || !pe || pe->kind != LVM_N_INT || pe->num < 0)
				return fs_error(ctx, -EINVAL, "VG %s, LV %.*s: a bad stripes list",
						p->vg_name, (int)lv->name_len, lv->name);
			if (!strcmp(nm->str, p->pv_name)) {
				if (f->n >= MAX_SEGMENTS)
					return fs_error(ctx, -ENOTSUP, "an LV with more than %u segments",
							MAX_SEGMENTS);
				out[f->n] = (struct piece){ (uint64_t)start, len, (uint64_t)pe->num, NULL };
				if (strcmp(type, "striped") || sc != 1)
					out[f->n].kind = sc > 1 ? "striped" : type;
				f->n++;
			} else {
				others++;
			}
			j = nm->next;
			if (++k > 64)
				return fs_error(ctx, -EINVAL, "a segment with too many stripes");
		}
		if (!stripes && strcmp(type, "striped"))   /* thin, cache, raid: built from other LVs */
			snprintf(f->unreadable, sizeof(f->unreadable), "%s", type);
	}
	for (size_t i = 0; i < f->n && !f->unreadable[0]; i++)
		if (out[i].kind)
			snprintf(f->unreadable, sizeof(f->unreadable), "%s segments", out[i].kind);
	if (others && !f->unreadable[0])
		snprintf(f->unreadable, sizeof(f->unreadable), "it spans other PVs too");
	qsort(out, f->n, sizeof(*out), cmp_piece);
	for (size_t i = 0; i < f->n; i++)
		if (out[i].pe > p->pe_count || out[i].count > p->pe_count - out[i].pe)
			return fs_error(ctx, -EINVAL, "VG %s, LV %.*s: extents %llu+%llu past this PV's %llu",
					p->vg_name, (int)lv->name_len, lv->name,
					(unsigned long long)out[i].pe, (unsigned long long)out[i].count,
					(unsigned long long)p->pe_count);
	/* A linear LV read here must be whole and in order: no hole in its extents. */
	for (size_t i = 0, le = 0; i < f->n && !f->unreadable[0]; le += out[i].count, i++)
		if (out[i].le != le)
			snprintf(f->unreadable, sizeof(f->unreadable), "its extents are not all on this PV");
	return 0;
}

/* Extent ranges in use on this PV must not overlap (damaged metadata). */
struct used_range {
	uint64_t pe, count;
};

static int cmp_range(const void *a, const void *b)
{
	const struct used_range *x = a, *y = b;

	return x->pe < y->pe ? -1 : x->pe > y->pe;
}

static int lvm_used_blocks(struct fs_ctx *ctx, void *priv)
{
	struct lvm_priv *p = priv;
	const struct lvm_tree *t = &p->tree;
	const struct lvm_node *lvs = lvm_child(t, p->vg, "logical_volumes");
	struct piece *pieces = malloc(MAX_SEGMENTS * sizeof(*pieces));
	struct fs_extent *ext = malloc(MAX_SEGMENTS * sizeof(*ext));
	struct used_range *ranges = NULL;
	size_t nranges = 0, cap = 0;
	unsigned nlvs = 0;
	int r = 0;

	if (!pieces || !ext) {
		r = fs_error(ctx, -ENOMEM, "out of memory");
		goto out;
	}
	/* Label, metadata areas and everything before the first extent. */
	r = mark_range(ctx, p, 0, p->pe_start);
	for (unsigned i = 0; r == 0 && i < p->nmdas; i++)
		r = mark_range(ctx, p, p->mdas[i].off, p->mdas[i].size);
	for (uint32_t i = lvs ? lvs->first : 0; r == 0 && i; i = t->nodes[i].next) {
		const struct lvm_node *lv = &t->nodes[i];
		char name[160];
		struct lv_found f = { .pieces = pieces };
		size_t n;

		if (lv->kind != LVM_N_SECTION)
			continue;
		r = lv_pieces(ctx, p, lv, &f);
		n = f.n;
		if (r < 0 || !n)
			continue;
		nlvs++;
		for (size_t k = 0; k < n; k++) {
			if (nranges == cap) {
				size_t nc = cap ? cap * 2 : 64;
				struct used_range *nr = realloc(ranges, nc * sizeof(*nr));
				if (!nr) {
					r = fs_error(ctx, -ENOMEM, "out of memory");
					goto out;
				}
				ranges = nr;
				cap = nc;
			}
			ranges[nranges++] = (struct used_range){ pieces[k].pe, pieces[k].count };
			ext[k] = (struct fs_extent){ p->pe_start + pieces[k].pe * p->extent_bytes,
						     pieces[k].count * p->extent_bytes };
		}
		snprintf(name, sizeof(name), "%s/%.*s", p->vg_name, (int)lv->name_len, lv->name);
		r = fs_mark_volume(ctx, name, ext, n, f.unreadable[0] ? f.unreadable : NULL);
	}
	if (r == 0 && nranges) {
		qsort(ranges, nranges, sizeof(*ranges), cmp_range);
		for (size_t i = 1; i < nranges; i++)
			if (ranges[i].pe < ranges[i - 1].pe + ranges[i - 1].count) {
				r = fs_error(ctx, -EUCLEAN, "VG %s: two LVs claim extent %llu of this PV",
					     p->vg_name, (unsigned long long)ranges[i].pe);
				break;
			}
	}
	if (r == 0)
		fs_set_container(ctx, "LVM2 VG %s, PV %s, %u LVs here", p->vg_name, p->pv_name, nlvs);
out:
	free(pieces);
	free(ext);
	free(ranges);
	return r;
}

static void lvm_close(struct fs_ctx *ctx, void *priv)
{
	struct lvm_priv *p = priv;

	(void)ctx;
	lvm_tree_free(&p->tree);
}

static const struct fs_magic lvm_magics[] = {
	{ "LABELONE", 8, 0 },
	{ "LABELONE", 8, 512 },
	{ "LABELONE", 8, 1024 },
	{ "LABELONE", 8, 1536 },
	{ NULL, 0, 0 },
};

static const char *const lvm_blkid_types[] = { "LVM2_member", NULL };

const struct fs_plugin fs_plugin_lvm = {
	.name = "lvm",
	.blkid_types = lvm_blkid_types,
	.min_size = 1u << 20,
	.magics = lvm_magics,
	.priv_size = sizeof(struct lvm_priv),
	.probe = lvm_probe,
	.open = lvm_open,
	.used_blocks = lvm_used_blocks,
	.close = lvm_close,
};
