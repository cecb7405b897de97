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
 * The on-disk facts (lvm2's lib/label/label.h and lib/format_text/layout.h):
 *   label in one of sectors 0..3: "LABELONE", u64 sector, u32 crc of bytes
 *   20..511, u32 offset of the contents (pv_header), "LVM2 001";
 *   pv_header: 32-byte PV UUID, u64 device size, a zero-terminated list of
 *   data areas (u64 offset, u64 size) then one of metadata areas;
 *   metadata area header (512 bytes): u32 crc of bytes 4..511, magic
 *   " LVM2 x[5A%r0N*>", u32 version 1, u64 start, u64 size, then raw
 *   locations (u64 offset from start, u64 size, u32 crc of the text, u32
 *   flags); the text is a circular buffer after the header: it wraps to
 *   start + 512.  Every CRC is lvm2's: CRC-32 (0xEDB88320) seeded
 *   0xf597a6cf, no final XOR.
 * The text (a VG section with physical_volumes and logical_volumes) is
 * parsed as hostile input: bounded size, depth and node count.
 */
#include "imager/fsplugin.h"
#include "imager/bytes.h"
#include "imager/lvmfmt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SECTOR          512u
#define LABEL_SCAN      4u            /* the label is in one of sectors 0..3 */
#define MDA_HEADER      512u
#define MDA_MAGIC       "\040\114\126\115\062\040\170\133\065\101\045\162\060\116\052\076"
#define TEXT_MAX        (8u << 20)    /* lvm2's own metadata limit is far below */
#define MAX_LISTS       8u            /* data / metadata areas in a pv_header */
#define MAX_NODES       200000u
#define MAX_DEPTH       16u
#define MAX_SEGMENTS    4096u

#define FORWARD_ERR_PLUGIN(expr) do { int _r = (expr); if (_r < 0) return _r; } while (0)

static uint32_t lvm_crc(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc >> 1 ^ (0xEDB88320u & -(crc & 1u));
	}
	return crc;
}
#define LVM_CRC_SEED 0xf597a6cfu

/* ---- the text: a tree of sections, values and arrays ---- */

enum node_kind { N_SECTION, N_INT, N_STRING, N_ARRAY };

struct node {
	enum node_kind kind;
	const char *name;       /* key or section name (points into the text copy) */
	size_t name_len;
	int64_t num;            /* N_INT */
	uint32_t pos, len;      /* N_INT: where its digits are in the text;
				 * N_SECTION: its name to its '}' */
	const char *str;        /* N_STRING: unescaped, NUL-ended (in the copy) */
	uint32_t first, next;   /* children (N_SECTION, N_ARRAY) and siblings; 0: none */
};

struct tree {
	struct node *nodes;     /* nodes[1] is the root section; 0 means none */
	uint32_t n, cap;
	char *text;             /* a writable copy: strings are unescaped in place */
	size_t len, pos;
	const char *err;
};

static uint32_t new_node(struct tree *t, enum node_kind k)
{
	if (t->n >= MAX_NODES) {
		t->err = "too many entries";
		return 0;
	}
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;
		struct node *nn = realloc(t->nodes, (size_t)cap * sizeof(*nn));
		if (!nn) {
			t->err = "out of memory";
			return 0;
		}
		t->nodes = nn;
		t->cap = cap;
	}
	memset(&t->nodes[t->n], 0, sizeof(t->nodes[0]));
	t->nodes[t->n].kind = k;
	return t->n++;
}

static void skip_space(struct tree *t)
{
	while (t->pos < t->len) {
		char c = t->text[t->pos];
		if (c == '#') {
			while (t->pos < t->len && t->text[t->pos] != '\n')
				t->pos++;
		} else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0') {
			t->pos++;
		} else {
			break;
		}
	}
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '+' || c == '.';
}

/* A quoted string, unescaped in place; returns its start or NULL. */
static const char *parse_string(struct tree *t)
{
	size_t out;
	const char *s;

	if (t->pos >= t->len || t->text[t->pos] != '"')
		return NULL;
	out = ++t->pos;
	s = t->text + out;
	while (t->pos < t->len && t->text[t->pos] != '"') {
		if (t->text[t->pos] == '\\' && t->pos + 1 < t->len)
			t->pos++;
		t->text[out++] = t->text[t->pos++];
	}
	if (t->pos >= t->len) {
		t->err = "unterminated string";
		return NULL;
	}
	t->text[out] = '\0';   /* out <= pos: the closing quote's place at the latest */
	t->pos++;
	return s;
}

static uint32_t parse_value(struct tree *t)
{
	uint32_t id;

	skip_space(t);
	if (t->pos >= t->len) {
		t->err = "a value is missing";
		return 0;
	}
	if (t->text[t->pos] == '"') {
		const char *s = parse_string(t);
		if (!s || !(id = new_node(t, N_STRING)))
			return 0;
		t->nodes[id].str = s;
		return id;
	}
	if (t->text[t->pos] == '-' || (t->text[t->pos] >= '0' && t->text[t->pos] <= '9')) {
		bool neg = t->text[t->pos] == '-';
		uint64_t v = 0;
		size_t at = t->pos;

		if (neg)
			t->pos++;
		if (t->pos >= t->len || t->text[t->pos] < '0' || t->text[t->pos] > '9') {
			t->err = "a bad number";
			return 0;
		}
		while (t->pos < t->len && t->text[t->pos] >= '0' && t->text[t->pos] <= '9') {
			if (v > (UINT64_C(1) << 62) / 10) {
				t->err = "a number out of range";
				return 0;
			}
			v = v * 10 + (uint64_t)(t->text[t->pos++] - '0');
		}
		/* (lvm2 writes no fractions in VG metadata; skip one if found) */
		if (t->pos < t->len && t->text[t->pos] == '.')
			for (t->pos++; t->pos < t->len && t->text[t->pos] >= '0' && t->text[t->pos] <= '9';)
				t->pos++;
		if (!(id = new_node(t, N_INT)))
			return 0;
		t->nodes[id].num = neg ? -(int64_t)v : (int64_t)v;
		t->nodes[id].pos = (uint32_t)at;
		t->nodes[id].len = (uint32_t)(t->pos - at);
		return id;
	}
	if (t->text[t->pos] == '[') {
		uint32_t last = 0;

		t->pos++;
		if (!(id = new_node(t, N_ARRAY)))
			return 0;
		for (;;) {
			uint32_t v;

			skip_space(t);
			if (t->pos < t->len && t->text[t->pos] == ']') {
				t->pos++;
				return id;
			}
			v = parse_value(t);
			if (!v)
				return 0;
			if (t->nodes[v].kind == N_ARRAY) {
				t->err = "an array inside an array";
				return 0;
			}
			if (last)
				t->nodes[last].next = v;
			else
				t->nodes[id].first = v;
			last = v;
			skip_space(t);
			if (t->pos < t->len && t->text[t->pos] == ',')
				t->pos++;
			else if (t->pos >= t->len || t->text[t->pos] != ']') {
				t->err = "an array without its ']'";
				return 0;
			}
		}
	}
	t->err = "an unknown kind of value";
	return 0;
}

/* Entries up to '}' (or the end of the text at depth 0) into section sec. */
static bool parse_entries(struct tree *t, uint32_t sec, unsigned depth)
{
	uint32_t last = 0;

	if (depth > MAX_DEPTH) {
		t->err = "sections nested too deep";
		return false;
	}
	for (;;) {
		const char *name;
		size_t nlen;
		uint32_t id;

		skip_space(t);
		if (t->pos >= t->len) {
			if (depth) {
				t->err = "a section without its '}'";
				return false;
			}
			return true;
		}
		if (t->text[t->pos] == '}') {
			if (!depth) {
				t->err = "a '}' too many";
				return false;
			}
			t->pos++;
			return true;
		}
		name = t->text + t->pos;
		while (t->pos < t->len && name_char(t->text[t->pos]))
			t->pos++;
		nlen = (size_t)(t->text + t->pos - name);
		if (!nlen) {
			t->err = "a name was expected";
			return false;
		}
		skip_space(t);
		if (t->pos < t->len && t->text[t->pos] == '{') {
			t->pos++;
			if (!(id = new_node(t, N_SECTION)) || !parse_entries(t, id, depth + 1))
				return false;
			/* where the section's text is: its name to its '}' */
			t->nodes[id].pos = (uint32_t)(name - t->text);
			t->nodes[id].len = (uint32_t)(t->pos - (size_t)(name - t->text));
		} else if (t->pos < t->len && t->text[t->pos] == '=') {
			t->pos++;
			if (!(id = parse_value(t)))
				return false;
		} else {
			t->err = "'=' or '{' was expected";
			return false;
		}
		t->nodes[id].name = name;
		t->nodes[id].name_len = nlen;
		if (last)
			t->nodes[last].next = id;
		else
			t->nodes[sec].first = id;
		last = id;
	}
}

static const struct node *child(const struct tree *t, const struct node *sec, const char *name)
{
	size_t len = strlen(name);

	if (!sec || sec->kind != N_SECTION)
		return NULL;
	for (uint32_t i = sec->first; i; i = t->nodes[i].next)
		if (t->nodes[i].name_len == len && !memcmp(t->nodes[i].name, name, len))
			return &t->nodes[i];
	return NULL;
}

static bool get_int(const struct tree *t, const struct node *sec, const char *name, int64_t *v)
{
	const struct node *n = child(t, sec, name);

	if (!n || n->kind != N_INT)
		return false;
	*v = n->num;
	return true;
}

static const char *get_str(const struct tree *t, const struct node *sec, const char *name)
{
	const struct node *n = child(t, sec, name);

	return n && n->kind == N_STRING ? n->str : NULL;
}

/* ---- the plugin ---- */

struct lvm_priv {
	uint64_t dev_size;
	uint64_t label_off;
	char uuid[33];                   /* the PV's, from its label */
	struct { uint64_t off, size; } mdas[MAX_LISTS];
	unsigned nmdas;
	struct tree tree;
	const struct node *vg;
	char vg_name[64];
	char pv_name[64];                /* "pv0": this PV in the VG's text */
	uint64_t extent_bytes, pe_start, pe_count;
	uint32_t bs;                     /* the block unit declared */
};

/* The sector of b (LABEL_SCAN sectors) holding the label, its own CRC
 * right; -1 when none does. */
static int label_in(const unsigned char *b)
{
	for (unsigned s = 0; s < LABEL_SCAN; s++) {
		const unsigned char *l = b + s * SECTOR;

		if (memcmp(l, "LABELONE", 8) || memcmp(l + 24, "LVM2 001", 8))
			continue;
		if (le64(l + 8) != s || le32(l + 16) != lvm_crc(LVM_CRC_SEED, l + 20, SECTOR - 20))
			continue;
		return (int)s;
	}
	return -1;
}

/* The label: in sectors 0..3, its own CRC right. */
static int find_label(struct fs_ctx *ctx, uint64_t *where)
{
	int err = 0;
	const unsigned char *b = fs_map(ctx, 0, LABEL_SCAN * SECTOR, &err);

	if (!b)
		return err ? err : -EIO;
	int s = label_in(b);

	if (s < 0)
		return 1;
	*where = (uint64_t)s * SECTOR;
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
	const unsigned char *l = fs_map(ctx, p->label_off, SECTOR, &err);
	uint32_t off;
	size_t at, end = SECTOR;
	unsigned list = 0, count = 0;

	if (!l)
		return fs_error(ctx, err, "reading the label");
	off = le32(l + 20);
	if (off < 32 || off > SECTOR - 32 - 16)
		return fs_error(ctx, -EINVAL, "label: contents at %u, outside the sector", off);
	memcpy(p->uuid, l + off, 32);
	p->uuid[32] = '\0';
	for (int i = 0; i < 32; i++)
		if (!name_char(p->uuid[i]))
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
			if (s < MDA_HEADER || a > fs_device_size(ctx) || s > fs_device_size(ctx) - a)
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

/* A metadata area's header h (at mda, of mda_size bytes) checked, and where
 * its committed text is; NULL, "ignored" for an ignored copy, or what is
 * wrong. */
static const char *mda_check(const unsigned char *h, uint64_t mda, uint64_t mda_size,
			     uint64_t *roff, uint64_t *rsize, uint32_t *crc)
{
	if (memcmp(h + 4, MDA_MAGIC, 16) || le32(h + 20) != 1)
		return "not an LVM2 text area";
	if (le32(h) != lvm_crc(LVM_CRC_SEED, h + 4, MDA_HEADER - 4))
		return "header checksum wrong";
	if (le64(h + 24) != mda || le64(h + 32) != mda_size)
		return "header names another place";
	*roff = le64(h + 40);
	*rsize = le64(h + 48);
	*crc = le32(h + 56);
	if (!*roff && !*rsize)
		return "it holds no metadata";
	if (le32(h + 60) & 1u)
		return "ignored";
	if (*roff < MDA_HEADER || *roff >= mda_size || !*rsize || *rsize > mda_size - MDA_HEADER ||
	    *rsize > TEXT_MAX)
		return "text out of bounds";
	return NULL;
}

/* The committed text of one metadata area, checked; malloc'ed. */
static int read_text(struct fs_ctx *ctx, uint64_t mda, uint64_t mda_size, char **text,
		     size_t *len)
{
	int err = 0;
	const unsigned char *h = fs_map(ctx, mda, MDA_HEADER, &err);
	uint64_t roff, rsize, first;
	uint32_t crc;
	char *buf;
	int r;

	const char *bad;

	if (!h)
		return fs_error(ctx, err, "reading the metadata area at %llu", (unsigned long long)mda);
	bad = mda_check(h, mda, mda_size, &roff, &rsize, &crc);
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
		r = fs_read(ctx, mda + MDA_HEADER, buf + first, rsize - first);
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
	struct tree *t = &p->tree;
	const struct node *pvs;

	for (uint32_t i = t->nodes[1].first; i; i = t->nodes[i].next) {
		const struct node *n = &t->nodes[i];

		if (n->kind == N_SECTION && child(t, n, "physical_volumes")) {
			p->vg = n;
			snprintf(p->vg_name, sizeof(p->vg_name), "%.*s", (int)n->name_len, n->name);
			break;
		}
	}
	if (!p->vg)
		return fs_error(ctx, -EINVAL, "the metadata text holds no volume group");
	pvs = child(t, p->vg, "physical_volumes");
	for (uint32_t i = pvs->first; i; i = t->nodes[i].next) {
		const struct node *pv = &t->nodes[i];
		const char *id = get_str(t, pv, "id");
		char plain[40];
		size_t k = 0;
		int64_t start, count;

		if (!id || pv->kind != N_SECTION)
			continue;
		for (const char *c = id; *c && k < sizeof(plain) - 1; c++)
			if (*c != '-')
				plain[k++] = *c;
		plain[k] = '\0';
		if (strcmp(plain, p->uuid))
			continue;
		if (!get_int(t, pv, "pe_start", &start) || !get_int(t, pv, "pe_count", &count) ||
		    start < 0 || count < 0 || (uint64_t)start > fs_device_size(ctx) / SECTOR)
			return fs_error(ctx, -EINVAL, "VG %s: PV %.*s has no sane pe_start/pe_count",
					p->vg_name, (int)pv->name_len, pv->name);
		snprintf(p->pv_name, sizeof(p->pv_name), "%.*s", (int)pv->name_len, pv->name);
		p->pe_start = (uint64_t)start * SECTOR;
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
	FORWARD_ERR_PLUGIN(parse_label(ctx, p));
	r = 1;
	for (unsigned i = 0; i < p->nmdas && r == 1; i++)
		r = read_text(ctx, p->mdas[i].off, p->mdas[i].size, &text, &len);
	if (r == 1)
		return fs_error(ctx, -EINVAL, "every metadata area is marked ignored");
	if (r < 0)
		return r;
	p->tree.text = text;
	p->tree.len = len;
	/* (node 0 stands for "none": the root section is node 1) */
	(void)new_node(&p->tree, N_SECTION);
	if (!new_node(&p->tree, N_SECTION) || !parse_entries(&p->tree, 1, 0))
		return fs_error(ctx, p->tree.err && !strcmp(p->tree.err, "out of memory") ? -ENOMEM : -EINVAL,
				"metadata text: %s (at byte %zu)", p->tree.err ? p->tree.err : "?",
				p->tree.pos);
	FORWARD_ERR_PLUGIN(find_vg(ctx, p));
	if (!get_int(&p->tree, p->vg, "extent_size", &ext) || ext <= 0 ||
	    (uint64_t)ext > (UINT64_C(1) << 35))
		return fs_error(ctx, -EINVAL, "VG %s: no sane extent_size", p->vg_name);
	p->extent_bytes = (uint64_t)ext * SECTOR;
	if (p->pe_start > size || p->pe_count > (size - p->pe_start) / p->extent_bytes)
		return fs_error(ctx, -EINVAL, "VG %s: %llu extents from %llu do not fit the %llu-byte PV",
				p->vg_name, (unsigned long long)p->pe_count,
				(unsigned long long)p->pe_start, (unsigned long long)size);
	/* 4 KiB blocks when everything falls on them, else sectors. */
	bs = 4096;
	if (p->pe_start % bs || p->extent_bytes % bs || size % bs)
		bs = SECTOR;
	for (unsigned i = 0; i < p->nmdas; i++)
		if (p->mdas[i].off % bs || p->mdas[i].size % bs)
			bs = SECTOR;
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

/* The pieces of one LV's segments (at most MAX_SEGMENTS). */
static int lv_pieces(struct fs_ctx *ctx, struct lvm_priv *p, const struct node *lv,
		     struct piece *out, size_t *n, char *why, size_t whylen)
{
	const struct tree *t = &p->tree;
	unsigned others = 0;

	*n = 0;
	why[0] = '\0';
	for (uint32_t i = lv->first; i; i = t->nodes[i].next) {
		const struct node *seg = &t->nodes[i], *stripes;
		int64_t start, count, sc = 1;
		const char *type;
		unsigned k = 0;

		if (seg->kind != N_SECTION || seg->name_len < 8 || memcmp(seg->name, "segment", 7))
			continue;
		type = get_str(t, seg, "type");
		if (!get_int(t, seg, "start_extent", &start) || !get_int(t, seg, "extent_count", &count) ||
		    start < 0 || count <= 0 || !type)
			return fs_error(ctx, -EINVAL, "VG %s, LV %.*s: a segment without start, count or type",
					p->vg_name, (int)lv->name_len, lv->name);
		stripes = child(t, seg, "stripes");
		get_int(t, seg, "stripe_count", &sc);
		/* stripes = [ "pv0", 0, "pv1", 0 ... ]: name and first PE pairs */
		for (uint32_t j = stripes && stripes->kind == N_ARRAY ? stripes->first : 0; j;
		     j = t->nodes[j].next) {
			const struct node *nm = &t->nodes[j], *pe = nm->next ? &t->nodes[nm->next] : NULL;
			uint64_t len = sc > 1 ? (uint64_t)count / (uint64_t)sc : (uint64_t)count;

			if (nm->kind != N_STRING || !pe || pe->kind != N_INT || pe->num < 0)
				return fs_error(ctx, -EINVAL, "VG %s, LV %.*s: a bad stripes list",
						p->vg_name, (int)lv->name_len, lv->name);
			if (!strcmp(nm->str, p->pv_name)) {
				if (*n >= MAX_SEGMENTS)
					return fs_error(ctx, -ENOTSUP, "an LV with more than %u segments",
							MAX_SEGMENTS);
				out[*n] = (struct piece){ (uint64_t)start, len, (uint64_t)pe->num, NULL };
				if (strcmp(type, "striped") || sc != 1)
					out[*n].kind = sc > 1 ? "striped" : type;
				(*n)++;
			} else {
				others++;
			}
			j = nm->next;
			if (++k > 64)
				return fs_error(ctx, -EINVAL, "a segment with too many stripes");
		}
		if (!stripes && strcmp(type, "striped"))
			snprintf(why, whylen, "%s", type);   /* thin, cache, raid: built from other LVs */
	}
	for (size_t i = 0; i < *n && !why[0]; i++)
		if (out[i].kind)
			snprintf(why, whylen, "%s segments", out[i].kind);
	if (others && !why[0])
		snprintf(why, whylen, "it spans other PVs too");
	qsort(out, *n, sizeof(*out), cmp_piece);
	for (size_t i = 0; i < *n; i++)
		if (out[i].pe > p->pe_count || out[i].count > p->pe_count - out[i].pe)
			return fs_error(ctx, -EINVAL, "VG %s, LV %.*s: extents %llu+%llu past this PV's %llu",
					p->vg_name, (int)lv->name_len, lv->name,
					(unsigned long long)out[i].pe, (unsigned long long)out[i].count,
					(unsigned long long)p->pe_count);
	/* A linear LV read here must be whole and in order: no hole in its extents. */
	for (size_t i = 0, le = 0; i < *n && !why[0]; le += out[i].count, i++)
		if (out[i].le != le)
			snprintf(why, whylen, "its extents are not all on this PV");
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
	const struct tree *t = &p->tree;
	const struct node *lvs = child(t, p->vg, "logical_volumes");
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
		const struct node *lv = &t->nodes[i];
		char name[160], why[64];
		size_t n = 0;

		if (lv->kind != N_SECTION)
			continue;
		r = lv_pieces(ctx, p, lv, pieces, &n, why, sizeof(why));
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
		r = fs_mark_volume(ctx, name, ext, n, why[0] ? why : NULL);
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
	free(p->tree.nodes);
	free(p->tree.text);
}

/* ---- shrinking a PV (include/imager/lvmfmt.h) ---- */

struct pvw {
	int fd;
	uint64_t off, size;
	unsigned char label[SECTOR];
	uint64_t label_off;          /* from the PV's start */
	uint32_t pvh;                /* the pv_header's place in the label sector */
	uint64_t mda, mda_size, roff, rsize;
	unsigned char mdah[MDA_HEADER];
	char *orig;                  /* the committed text as it is */
	struct tree tree;            /* parsed from a copy */
	const struct node *vg, *pv;
	char pv_name[64];
	uint64_t extent_bytes, pe_start, pe_count;
};

#define WHY(...) (void)snprintf(why, whylen, __VA_ARGS__)

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}

static void pvw_free(struct pvw *w)
{
	free(w->orig);
	free(w->tree.text);
	free(w->tree.nodes);
}

/* The PV read and checked, as far as shrinking it needs. */
static int pvw_load(struct pvw *w, int fd, uint64_t off, uint64_t size, char *why, size_t whylen)
{
	unsigned char b[LABEL_SCAN * SECTOR];
	uint64_t a, sz, dev_size;
	uint32_t crc;
	unsigned list = 0, nmda = 0;
	char uuid[33];
	const char *bad;
	int s, r;

	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->off = off;
	w->size = size;
	if (size < (1u << 20) || (r = pread_all(fd, b, sizeof(b), off)) < 0)
		return WHY("the PV cannot be read"), -EIO;
	s = label_in(b);
	if (s < 0)
		return WHY("no LVM2 label with a right checksum"), -EINVAL;
	w->label_off = (uint64_t)s * SECTOR;
	memcpy(w->label, b + w->label_off, SECTOR);
	w->pvh = le32(w->label + 20);
	if (w->pvh < 32 || w->pvh > SECTOR - 32 - 16)
		return WHY("the label's contents lie outside its sector"), -EINVAL;
	memcpy(uuid, w->label + w->pvh, 32);
	uuid[32] = '\0';
	dev_size = le64(w->label + w->pvh + 32);
	if (dev_size > size)
		return WHY("the PV says it is larger than its partition"), -EINVAL;
	for (uint32_t at = w->pvh + 40; list < 2; at += 16) {
		if (at + 16 > SECTOR)
			return WHY("the label's area lists run past its sector"), -EINVAL;
		a = le64(w->label + at);
		sz = le64(w->label + at + 8);
		if (!a && !sz) {
			list++;
			continue;
		}
		if (list == 1) {
			if (nmda++)
				return WHY("the PV has two metadata areas"), -ENOTSUP;
			w->mda = a;
			w->mda_size = sz;
		}
	}
	if (!nmda || w->mda < w->label_off + SECTOR || w->mda_size < 2 * MDA_HEADER ||
	    w->mda > size || w->mda_size > size - w->mda)
		return WHY("the PV has no usable metadata area at its start"), -ENOTSUP;
	if ((r = pread_all(fd, w->mdah, MDA_HEADER, off + w->mda)) < 0)
		return WHY("the metadata area cannot be read"), -EIO;
	bad = mda_check(w->mdah, w->mda, w->mda_size, &w->roff, &w->rsize, &crc);
	if (bad)
		return WHY("metadata area: %s", bad), -EINVAL;
	w->orig = malloc(w->rsize + 1);
	w->tree.text = malloc(w->rsize + 1);
	if (!w->orig || !w->tree.text)
		return WHY("out of memory"), -ENOMEM;
	{
		uint64_t first = w->roff + w->rsize > w->mda_size ? w->mda_size - w->roff : w->rsize;
		r = pread_all(fd, w->orig, first, off + w->mda + w->roff);
		if (r == 0 && first < w->rsize)
			r = pread_all(fd, w->orig + first, w->rsize - first, off + w->mda + MDA_HEADER);
		if (r < 0)
			return WHY("the metadata text cannot be read"), -EIO;
	}
	if (lvm_crc(LVM_CRC_SEED, (unsigned char *)w->orig, w->rsize) != crc)
		return WHY("the metadata text's checksum is wrong"), -EINVAL;
	w->orig[w->rsize] = '\0';
	memcpy(w->tree.text, w->orig, w->rsize + 1);
	w->tree.len = w->rsize;
	(void)new_node(&w->tree, N_SECTION);
	if (!new_node(&w->tree, N_SECTION) || !parse_entries(&w->tree, 1, 0))
		return WHY("metadata text: %s", w->tree.err ? w->tree.err : "?"), -EINVAL;
	for (uint32_t i = w->tree.nodes[1].first; i; i = w->tree.nodes[i].next)
		if (w->tree.nodes[i].kind == N_SECTION &&
		    child(&w->tree, &w->tree.nodes[i], "physical_volumes")) {
			w->vg = &w->tree.nodes[i];
			break;
		}
	if (!w->vg)
		return WHY("the metadata text holds no volume group"), -EINVAL;
	{
		const struct node *pvs = child(&w->tree, w->vg, "physical_volumes");
		unsigned npv = 0;
		int64_t v;

		for (uint32_t i = pvs->first; i; i = w->tree.nodes[i].next)
			if (w->tree.nodes[i].kind == N_SECTION && npv++ == 0)
				w->pv = &w->tree.nodes[i];
		if (npv != 1)
			return WHY("the VG has %u PVs (one is shrunk)", npv), -ENOTSUP;
		{
			const char *id = get_str(&w->tree, w->pv, "id");
			char plain[40];
			size_t k = 0;
			for (const char *c = id ? id : ""; *c && k < sizeof(plain) - 1; c++)
				if (*c != '-')
					plain[k++] = *c;
			plain[k] = '\0';
			if (strcmp(plain, uuid))
				return WHY("the VG's PV is not this one"), -EINVAL;
		}
		snprintf(w->pv_name, sizeof(w->pv_name), "%.*s", (int)w->pv->name_len, w->pv->name);
		if (!get_int(&w->tree, w->vg, "extent_size", &v) || v <= 0 || v > (INT64_C(1) << 35))
			return WHY("no sane extent_size"), -EINVAL;
		w->extent_bytes = (uint64_t)v * SECTOR;
		if (!get_int(&w->tree, w->pv, "pe_start", &v) || v < 0 || (uint64_t)v > size / SECTOR)
			return WHY("no sane pe_start"), -EINVAL;
		w->pe_start = (uint64_t)v * SECTOR;
		if (!get_int(&w->tree, w->pv, "pe_count", &v) || v < 0 ||
		    (uint64_t)v > (size - w->pe_start) / w->extent_bytes)
			return WHY("no sane pe_count"), -EINVAL;
		w->pe_count = (uint64_t)v;
		if (w->mda + w->mda_size > w->pe_start)
			return WHY("the metadata area overlaps the extents"), -EINVAL;
	}
	return 0;
}

/* Each segment of each LV: linear on this PV, or refused.  fn sees the
 * LV's section, the segment's extent_count node and its first PE node. */
static int pvw_segments(struct pvw *w, int (*fn)(void *, const struct node *lv,
						  const struct node *count, const struct node *pe),
			void *arg, char *why, size_t whylen)
{
	const struct tree *t = &w->tree;
	const struct node *lvs = child(t, w->vg, "logical_volumes");

	for (uint32_t i = lvs ? lvs->first : 0; i; i = t->nodes[i].next) {
		const struct node *lv = &t->nodes[i];
		if (lv->kind != N_SECTION)
			continue;
		for (uint32_t k = lv->first; k; k = t->nodes[k].next) {
			const struct node *seg = &t->nodes[k], *count, *stripes, *nm, *pe;
			const char *type;
			int64_t sc = 0;
			int r;

			if (seg->kind != N_SECTION || seg->name_len < 8 || memcmp(seg->name, "segment", 7))
				continue;
			type = get_str(t, seg, "type");
			count = child(t, seg, "extent_count");
			stripes = child(t, seg, "stripes");
			get_int(t, seg, "stripe_count", &sc);
			if (!type || strcmp(type, "striped") || sc != 1 || !stripes ||
			    stripes->kind != N_ARRAY || !stripes->first)
				return WHY("LV %.*s has %s segments (only linear LVs are moved)",
					   (int)lv->name_len, lv->name, type ? type : "untyped"), -ENOTSUP;
			nm = &t->nodes[stripes->first];
			pe = nm->next ? &t->nodes[nm->next] : NULL;
			if (nm->kind != N_STRING || strcmp(nm->str, w->pv_name) || !pe || pe->kind != N_INT ||
			    pe->next || !count || count->kind != N_INT || count->num <= 0 || pe->num < 0 ||
			    (uint64_t)pe->num > w->pe_count ||
			    (uint64_t)count->num > w->pe_count - (uint64_t)pe->num)
				return WHY("LV %.*s: a segment that is not on this PV's extents",
					   (int)lv->name_len, lv->name), -EINVAL;
			r = fn(arg, lv, count, pe);
			if (r)
				return r;
		}
	}
	return 0;
}

struct pick {
	const char *lv;          /* the LV's name in the VG */
	const struct node *count, *pe;
	unsigned nsegs;
	uint64_t used_end;       /* past the last used extent */
};

static int pick_lv(void *arg, const struct node *lv, const struct node *count,
		   const struct node *pe)
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
		    uint64_t *delta, char *why, size_t whylen)
{
	size_t vl = strlen(name);
	const char *slash = strchr(name, '/');
	uint64_t keep;
	int r;

	memset(k, 0, sizeof(*k));
	if (!slash || (size_t)(slash - name) != w->vg->name_len ||
	    memcmp(name, w->vg->name, w->vg->name_len) || vl - (size_t)(slash - name) < 2)
		return WHY("no LV %s in VG %.*s", name, (int)w->vg->name_len, w->vg->name), -EINVAL;
	k->lv = slash + 1;
	r = pvw_segments(w, pick_lv, k, why, whylen);
	if (r)
		return r;
	if (k->nsegs != 1)
		return WHY("LV %s has %u segments (one is shrunk)", name, k->nsegs),
		       k->nsegs ? -ENOTSUP : -EINVAL;
	if (!new_size || new_size >= w->size) {
		*delta = 0;
		return 0;
	}
	if (new_size < w->pe_start + w->extent_bytes)
		return WHY("%llu bytes cannot hold the PV", (unsigned long long)new_size), -ENOSPC;
	keep = (new_size - w->pe_start) / w->extent_bytes;
	*delta = keep < w->pe_count ? w->pe_count - keep : 0;
	if (*delta >= (uint64_t)k->count->num)
		return WHY("LV %s cannot give up %llu of its %lld extents", name,
			   (unsigned long long)*delta, (long long)k->count->num), -ENOSPC;
	return 0;
}

int lvm_pv_find_lv(int fd, uint64_t off, uint64_t size, const char *name, uint64_t new_size,
		   struct lvm_pv_lv *out, char *why, size_t whylen)
{
	struct pvw w;
	struct pick k;
	uint64_t delta = 0;
	int r = pvw_load(&w, fd, off, size, why, whylen);

	if (r == 0)
		r = pvw_plan(&w, name, new_size, &k, &delta, why, whylen);
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
				r = pwrite_all(fd, buf, n, dst + done);
			}
		} else {
			r = pread_all(fd, buf, n, src + done);
			if (r == 0)
				r = pwrite_all(fd, buf, n, dst + done);
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

static int add_edit(struct mover *m, const struct node *n, int64_t value)
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

static int move_segment(void *arg, const struct node *lv, const struct node *count,
			const struct node *pe)
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

int lvm_pv_shrink(int fd, uint64_t off, uint64_t size, const char *name, uint64_t new_size,
		  char *why, size_t whylen)
{
	struct pvw w;
	struct pick k;
	struct mover m = { 0 };
	uint64_t delta = 0;
	char *text = NULL;
	size_t len = 0;
	int64_t seqno;
	const struct node *n;
	int r = pvw_load(&w, fd, off, size, why, whylen);

	if (r == 0)
		r = pvw_plan(&w, name, new_size, &k, &delta, why, whylen);
	if (r)
		goto out;
	/* Every segment checked before a byte moves (pvw_plan walked them). */
	m.w = &w;
	m.after = (uint64_t)(k.pe->num + k.count->num);
	m.delta = delta;
	if (delta) {
		r = pvw_segments(&w, move_segment, &m, why, whylen);
		if (r) {
			if (m.err)
				snprintf(why, whylen, "moving extents: %s", strerror(-m.err));
			goto out;
		}
	}
	r = add_edit(&m, k.count, k.count->num - (int64_t)delta);
	if (r == 0 && (n = child(&w.tree, w.pv, "pe_count")) && n->kind == N_INT)
		r = add_edit(&m, n, (int64_t)(w.pe_count - delta));
	if (r == 0 && (n = child(&w.tree, w.pv, "dev_size")) && n->kind == N_INT)
		r = add_edit(&m, n, (int64_t)(new_size / SECTOR));
	if (r == 0 && get_int(&w.tree, w.vg, "seqno", &seqno) &&
	    (n = child(&w.tree, w.vg, "seqno")))
		r = add_edit(&m, n, seqno + 1);
	if (r) {
		WHY("out of memory");
		r = -ENOMEM;
		goto out;
	}
	/* The text with the numbers replaced. */
	qsort(m.edits, m.n, sizeof(*m.edits), cmp_edit);
	text = malloc(w.rsize + 32 * m.n + 1);
	if (!text) {
		WHY("out of memory");
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0, at = 0; i <= m.n; i++) {
		size_t to = i < m.n ? m.edits[i].pos : w.rsize;
		memcpy(text + len, w.orig + at, to - at);
		len += to - at;
		if (i < m.n) {
			len += (size_t)sprintf(text + len, "%lld", (long long)m.edits[i].value);
			at = to + m.edits[i].len;
		}
	}
	if (len > w.mda_size - MDA_HEADER) {
		WHY("the new metadata does not fit its area");
		r = -ENOSPC;
		goto out;
	}
	/* Written after the header, then the header pointing at it, then the
	 * label with the new device size. */
	r = pwrite_all(fd, text, len, off + w.mda + MDA_HEADER);
	put_le64(w.mdah + 40, MDA_HEADER);
	put_le64(w.mdah + 48, len);
	put_le32(w.mdah + 56, lvm_crc(LVM_CRC_SEED, (unsigned char *)text, len));
	put_le32(w.mdah + 60, 0);
	memset(w.mdah + 64, 0, 24);   /* no second (precommitted) location */
	put_le32(w.mdah, lvm_crc(LVM_CRC_SEED, w.mdah + 4, MDA_HEADER - 4));
	if (r == 0)
		r = pwrite_all(fd, w.mdah, MDA_HEADER, off + w.mda);
	put_le64(w.label + w.pvh + 32, new_size);
	if (le64(w.label + w.pvh + 48))   /* a data area with a size: it ends at the new end */
		put_le64(w.label + w.pvh + 48, new_size - le64(w.label + w.pvh + 40));
	put_le32(w.label + 16, lvm_crc(LVM_CRC_SEED, w.label + 20, SECTOR - 20));
	if (r == 0)
		r = pwrite_all(fd, w.label, SECTOR, off + w.label_off);
	if (r < 0)
		WHY("writing the PV: %s", strerror(-r));
out:
	free(text);
	free(m.edits);
	pvw_free(&w);
	return r;
}

/* ---- a VG's text mapped, and a PV's head made from it ---- */

void lvm_vg_map_free(struct lvm_vg_map *m)
{
	free(m->lvs);
	m->lvs = NULL;
	m->nlvs = 0;
}

static void strip_dashes(const char *id, char out[33])
{
	size_t k = 0;
	for (const char *c = id; *c && k < 32; c++)
		if (*c != '-')
			out[k++] = *c;
	out[k] = '\0';
}

int lvm_text_map(const char *text, size_t len, struct lvm_vg_map *m, char *why, size_t whylen)
{
	struct tree t = { 0 };
	const struct node *vg = NULL, *pvs, *lvs;
	int64_t ext;
	int r = -EINVAL;

	memset(m, 0, sizeof(*m));
	if (len > TEXT_MAX)
		return WHY("the VG's text is larger than %u bytes", TEXT_MAX), -EINVAL;
	t.text = malloc(len + 1);
	if (!t.text)
		return WHY("out of memory"), -ENOMEM;
	memcpy(t.text, text, len);
	t.text[len] = '\0';
	t.len = len;
	(void)new_node(&t, N_SECTION);
	if (!new_node(&t, N_SECTION) || !parse_entries(&t, 1, 0)) {
		WHY("the VG's text: %s (at byte %zu)", t.err ? t.err : "?", t.pos);
		goto out;
	}
	for (uint32_t i = t.nodes[1].first; i && !vg; i = t.nodes[i].next)
		if (t.nodes[i].kind == N_SECTION && child(&t, &t.nodes[i], "physical_volumes"))
			vg = &t.nodes[i];
	if (!vg) {
		WHY("the text holds no volume group");
		goto out;
	}
	snprintf(m->vg, sizeof(m->vg), "%.*s", (int)(vg->name_len < 127 ? vg->name_len : 127), vg->name);
	m->vg_start = vg->pos;
	m->vg_end = vg->pos + vg->len;
	if (!get_int(&t, vg, "extent_size", &ext) || ext <= 0 || ext > (INT64_C(1) << 35)) {
		WHY("VG %s: no sane extent_size", m->vg);
		goto out;
	}
	m->extent_bytes = (uint64_t)ext * SECTOR;
	pvs = child(&t, vg, "physical_volumes");
	for (uint32_t i = pvs->first; i; i = t.nodes[i].next) {
		const struct node *pv = &t.nodes[i];
		const char *id = get_str(&t, pv, "id");
		int64_t start, count, dev = 0;

		if (pv->kind != N_SECTION)
			continue;
		if (m->npvs == LVM_MAP_PVS) {
			WHY("VG %s has more than %u PVs", m->vg, LVM_MAP_PVS);
			r = -ENOTSUP;
			goto out;
		}
		if (!id || !get_int(&t, pv, "pe_start", &start) || !get_int(&t, pv, "pe_count", &count) ||
		    start <= 0 || count < 0 || start > (INT64_C(1) << 40) ||
		    (uint64_t)count > (UINT64_C(1) << 50) / m->extent_bytes) {
			WHY("VG %s: PV %.*s has no sane id, pe_start or pe_count", m->vg,
			    (int)pv->name_len, pv->name);
			goto out;
		}
		get_int(&t, pv, "dev_size", &dev);
		strip_dashes(id, m->pvs[m->npvs].uuid);
		if (strlen(m->pvs[m->npvs].uuid) != 32) {
			WHY("VG %s: a PV id that is not 32 characters", m->vg);
			goto out;
		}
		m->pvs[m->npvs].pe_start = (uint64_t)start * SECTOR;
		m->pvs[m->npvs].dev_size = dev > 0 && dev < (INT64_C(1) << 50) ? (uint64_t)dev * SECTOR : 0;
		m->npvs++;
	}
	lvs = child(&t, vg, "logical_volumes");
	for (uint32_t i = lvs ? lvs->first : 0; i; i = t.nodes[i].next)
		if (t.nodes[i].kind == N_SECTION)
			m->nlvs++;
	if (m->nlvs > 4096) {
		WHY("VG %s has too many LVs", m->vg);
		goto out;
	}
	m->lvs = calloc(m->nlvs ? m->nlvs : 1, sizeof(*m->lvs));
	if (!m->lvs) {
		WHY("out of memory");
		r = -ENOMEM;
		goto out;
	}
	m->nlvs = 0;
	for (uint32_t i = lvs ? lvs->first : 0; i; i = t.nodes[i].next) {
		const struct node *lv = &t.nodes[i];
		struct lvm_map_lv *l;

		if (lv->kind != N_SECTION)
			continue;
		l = &m->lvs[m->nlvs++];
		snprintf(l->name, sizeof(l->name), "%.*s", (int)(lv->name_len < 127 ? lv->name_len : 127),
			 lv->name);
		l->linear = true;
		for (uint32_t k = lv->first; k; k = t.nodes[k].next) {
			const struct node *seg = &t.nodes[k], *stripes, *nm, *pe;
			const char *type;
			int64_t start, count, sc = 0;
			unsigned pvi = 0;

			if (seg->kind != N_SECTION || seg->name_len < 8 || memcmp(seg->name, "segment", 7))
				continue;
			type = get_str(&t, seg, "type");
			stripes = child(&t, seg, "stripes");
			get_int(&t, seg, "stripe_count", &sc);
			if (!get_int(&t, seg, "start_extent", &start) ||
			    !get_int(&t, seg, "extent_count", &count) || start < 0 || count <= 0 ||
			    (uint64_t)start > (UINT64_C(1) << 50) / m->extent_bytes ||
			    (uint64_t)count > (UINT64_C(1) << 50) / m->extent_bytes) {
				WHY("VG %s, LV %s: a segment without a sane start or count", m->vg, l->name);
				goto out;
			}
			if (l->size < (uint64_t)(start + count) * m->extent_bytes)
				l->size = (uint64_t)(start + count) * m->extent_bytes;
			if (!type || strcmp(type, "striped") || sc != 1 || !stripes ||
			    stripes->kind != N_ARRAY || !stripes->first) {
				l->linear = false;
				continue;
			}
			nm = &t.nodes[stripes->first];
			pe = nm->next ? &t.nodes[nm->next] : NULL;
			if (nm->kind != N_STRING || !pe || pe->kind != N_INT || pe->num < 0 ||
			    (uint64_t)pe->num > (UINT64_C(1) << 50) / m->extent_bytes) {
				WHY("VG %s, LV %s: a bad stripes list", m->vg, l->name);
				goto out;
			}
			/* the PV by its name in physical_volumes */
			{
				unsigned n = 0;
				bool found = false;
				for (uint32_t j = pvs->first; j && !found; j = t.nodes[j].next) {
					const struct node *pv = &t.nodes[j];
					if (pv->kind != N_SECTION)
						continue;
					if (strlen(nm->str) == pv->name_len &&
					    !memcmp(nm->str, pv->name, pv->name_len)) {
						pvi = n;
						found = true;
					}
					n++;
				}
				if (!found) {
					WHY("VG %s, LV %s: a segment on an unknown PV", m->vg, l->name);
					goto out;
				}
			}
			if (l->nsegs == LVM_MAP_SEGS) {
				WHY("VG %s, LV %s has more than %u segments", m->vg, l->name, LVM_MAP_SEGS);
				r = -ENOTSUP;
				goto out;
			}
			l->segs[l->nsegs++] = (struct lvm_seg){
				(uint64_t)start * m->extent_bytes, (uint64_t)count * m->extent_bytes, pvi,
				m->pvs[pvi].pe_start + (uint64_t)pe->num * m->extent_bytes };
		}
		/* A linear LV is whole: its segments cover it without a hole. */
		for (size_t a = 0; a < l->nsegs && l->linear; a++)
			for (size_t b = a + 1; b < l->nsegs; b++)
				if (l->segs[a].lv_off < l->segs[b].lv_off + l->segs[b].len &&
				    l->segs[b].lv_off < l->segs[a].lv_off + l->segs[a].len) {
					WHY("VG %s, LV %s: two segments overlap", m->vg, l->name);
					goto out;
				}
		if (l->linear) {
			uint64_t covered = 0;
			for (size_t a = 0; a < l->nsegs; a++)
				covered += l->segs[a].len;
			if (covered != l->size)
				l->linear = false;
		}
	}
	r = 0;
out:
	free(t.nodes);
	free(t.text);
	if (r)
		lvm_vg_map_free(m);
	return r;
}

int lvm_pv_head(const struct lvm_vg_map *m, unsigned pv, const char *text, size_t len,
		uint64_t size, unsigned char **head, char *why, size_t whylen)
{
	uint64_t pe_start, mda = 4096, mda_size;
	unsigned char *h, *l, *a;

	*head = NULL;
	if (pv >= m->npvs)
		return WHY("no PV %u", pv), -EINVAL;
	pe_start = m->pvs[pv].pe_start;
	if (pe_start > (64u << 20) || pe_start > size || pe_start % SECTOR)
		return WHY("PV %s: pe_start %llu does not fit", m->pvs[pv].uuid,
			   (unsigned long long)pe_start), -EINVAL;
	if (m->vg_end > len || m->vg_start >= m->vg_end)
		return WHY("the VG's section is not in this text"), -EINVAL;
	if (pe_start < mda + MDA_HEADER + len + 2)
		return WHY("PV %s: the VG's text does not fit before pe_start", m->pvs[pv].uuid),
		       -ENOSPC;
	mda_size = pe_start - mda;
	h = calloc(1, pe_start);
	if (!h)
		return WHY("out of memory"), -ENOMEM;
	l = h + SECTOR;
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
	put_le32(l + 16, lvm_crc(LVM_CRC_SEED, l + 20, SECTOR - 20));
	a = h + mda;
	memcpy(a + 4, MDA_MAGIC, 16);
	put_le32(a + 20, 1);
	put_le64(a + 24, mda);
	put_le64(a + 32, mda_size);
	put_le64(a + 40, MDA_HEADER);
	/* The VG's section first (lvm2 looks for the VG's name at the text's
	 * start), then what came before and after it, then a NUL as lvm2
	 * writes it. */
	{
		unsigned char *o = a + MDA_HEADER;
		memcpy(o, text + m->vg_start, m->vg_end - m->vg_start);
		o += m->vg_end - m->vg_start;
		*o++ = '\n';
		memcpy(o, text, m->vg_start);
		o += m->vg_start;
		memcpy(o, text + m->vg_end, len - m->vg_end);
	}
	put_le64(a + 48, len + 2);
	put_le32(a + 56, lvm_crc(LVM_CRC_SEED, a + MDA_HEADER, len + 2));
	put_le32(a, lvm_crc(LVM_CRC_SEED, a + 4, MDA_HEADER - 4));
	*head = h;
	return 0;
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
