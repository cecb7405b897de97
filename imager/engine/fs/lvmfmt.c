/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LVM2's on-disk facts (include/imager/lvmfmt.h): lvm2's CRC, the label,
 * the metadata area header, and the metadata text parsed as hostile input
 * (bounded size, depth and node count).  Shared by the plugin
 * (fsplugins/lvm.c), the PV rewriter (lvm-pv.c) and the VG text mapper
 * (lvm-text.c).
 */
#include "imager/lvmfmt.h"
#include "imager/bytes.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES       200000u
#define MAX_DEPTH       16u

int lvm_errf(struct im_err *err, int code, const char *fmt, ...)
{
	char msg[sizeof(err->msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return im_errf(err, code == -ENOTSUP ? IM_EXIT_UNSUPP : code == -EIO ? IM_EXIT_IO :
		       code == -ENOMEM ? IM_EXIT_INTERNAL : code == -ENOSPC ? IM_EXIT_TARGET :
		       IM_EXIT_DAMAGED, code, "%s", msg);
}

uint32_t lvm_crc(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc >> 1 ^ (0xEDB88320u & -(crc & 1u));
	}
	return crc;
}

int lvm_label_in(const unsigned char *b)
{
	for (unsigned s = 0; s < LVM_LABEL_SCAN; s++) {
		const unsigned char *l = b + s * LVM_SECTOR;

		if (memcmp(l, "LABELONE", 8) || memcmp(l + 24, "LVM2 001", 8))
			continue;
		if (le64(l + 8) != s || le32(l + 16) != lvm_crc(LVM_CRC_SEED, l + 20, LVM_SECTOR - 20))
			continue;
		return (int)s;
	}
	return -1;
}

const char *lvm_mda_check(const unsigned char *h, uint64_t mda, uint64_t mda_size,
			  uint64_t *roff, uint64_t *rsize, uint32_t *crc)
{
	if (memcmp(h + 4, LVM_MDA_MAGIC, 16) || le32(h + 20) != 1)
		return "not an LVM2 text area";
	if (le32(h) != lvm_crc(LVM_CRC_SEED, h + 4, LVM_MDA_HEADER - 4))
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
	if (*roff < LVM_MDA_HEADER || *roff >= mda_size || !*rsize ||
	    *rsize > mda_size - LVM_MDA_HEADER || *rsize > LVM_TEXT_MAX)
		return "text out of bounds";
	return NULL;
}

/* ---- the text: a tree of sections, values and arrays ---- */

static uint32_t new_node(struct lvm_tree *t, enum lvm_node_kind k)
{
	if (t->n >= MAX_NODES) {
		t->err = "too many entries";
		return 0;
	}
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;
		struct lvm_node *nn = realloc(t->nodes, (size_t)cap * sizeof(*nn));
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

static void skip_space(struct lvm_tree *t)
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

bool lvm_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '+' || c == '.';
}

/* A quoted string, unescaped in place; returns its start or NULL. */
static const char *parse_string(struct lvm_tree *t)
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

static uint32_t parse_value(struct lvm_tree *t)
{
	uint32_t id;

	skip_space(t);
	if (t->pos >= t->len) {
		t->err = "a value is missing";
		return 0;
	}
	if (t->text[t->pos] == '"') {
		const char *s = parse_string(t);
		if (!s || !(id = new_node(t, LVM_N_STRING)))
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
		if (!(id = new_node(t, LVM_N_INT)))
			return 0;
		t->nodes[id].num = neg ? -(int64_t)v : (int64_t)v;
		t->nodes[id].pos = (uint32_t)at;
		t->nodes[id].len = (uint32_t)(t->pos - at);
		return id;
	}
	if (t->text[t->pos] == '[') {
		uint32_t last = 0;

		t->pos++;
		if (!(id = new_node(t, LVM_N_ARRAY)))
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
			if (t->nodes[v].kind == LVM_N_ARRAY) {
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
static bool parse_entries(struct lvm_tree *t, uint32_t sec, unsigned depth)
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
		while (t->pos < t->len && lvm_name_char(t->text[t->pos]))
			t->pos++;
		nlen = (size_t)(t->text + t->pos - name);
		if (!nlen) {
			t->err = "a name was expected";
			return false;
		}
		skip_space(t);
		if (t->pos < t->len && t->text[t->pos] == '{') {
			t->pos++;
			if (!(id = new_node(t, LVM_N_SECTION)) || !parse_entries(t, id, depth + 1))
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

const struct lvm_node *lvm_child(const struct lvm_tree *t, const struct lvm_node *sec,
				 const char *name)
{
	size_t len = strlen(name);

	if (!sec || sec->kind != LVM_N_SECTION)
		return NULL;
	for (uint32_t i = sec->first; i; i = t->nodes[i].next)
		if (t->nodes[i].name_len == len && !memcmp(t->nodes[i].name, name, len))
			return &t->nodes[i];
	return NULL;
}

bool lvm_get_int(const struct lvm_tree *t, const struct lvm_node *sec, const char *name,
		 int64_t *v)
{
	const struct lvm_node *n = lvm_child(t, sec, name);

	if (!n || n->kind != LVM_N_INT)
		return false;
	*v = n->num;
	return true;
}

const char *lvm_get_str(const struct lvm_tree *t, const struct lvm_node *sec, const char *name)
{
	const struct lvm_node *n = lvm_child(t, sec, name);

	return n && n->kind == LVM_N_STRING ? n->str : NULL;
}

void lvm_tree_free(struct lvm_tree *t)
{
	free(t->nodes);
	free(t->text);
	t->nodes = NULL;
	t->text = NULL;
	t->n = t->cap = 0;
}

int lvm_tree_parse(struct lvm_tree *t, char *text, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->text = text;
	t->len = len;
	/* (node 0 stands for "none": the root section is node 1) */
	(void)new_node(t, LVM_N_SECTION);
	if (new_node(t, LVM_N_SECTION) && parse_entries(t, 1, 0))
		return 0;
	if (!t->err)
		t->err = "?";
	return !strcmp(t->err, "out of memory") ? -ENOMEM : -EINVAL;
}

const struct lvm_node *lvm_tree_vg(const struct lvm_tree *t)
{
	for (uint32_t i = t->n > 1 ? t->nodes[1].first : 0; i; i = t->nodes[i].next)
		if (t->nodes[i].kind == LVM_N_SECTION && lvm_child(t, &t->nodes[i], "physical_volumes"))
			return &t->nodes[i];
	return NULL;
}

bool lvm_is_segment(const struct lvm_node *seg)
{
	return seg->kind == LVM_N_SECTION && seg->name_len >= 8 && !memcmp(seg->name, "segment", 7);
}

size_t lvm_uuid_plain(const char *id, char out[33])
{
	size_t n = 0;

	for (const char *c = id; *c; c++)
		if (*c != '-') {
			if (n < 32)
				out[n] = *c;
			n++;
		}
	out[n < 32 ? n : 32] = '\0';
	return n;
}
