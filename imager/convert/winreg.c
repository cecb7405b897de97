/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Windows registry hives through libhivex (contract in winreg.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "winreg.h"

#define MAX_PATH_DEPTH 32

hive_node_h reg_find(hive_h *h, const char *path)
{
	char buf[1024], *save = NULL, *tok;
	hive_node_h node = hivex_root(h);

	if (!path || !*path)
		return node;
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return 0;
	for (tok = strtok_r(buf, "\\", &save); tok && node; tok = strtok_r(NULL, "\\", &save))
		node = hivex_node_get_child(h, node, tok);
	return node;
}

hive_node_h reg_mkpath(hive_h *h, const char *path)
{
	char buf[1024], *save = NULL, *tok;
	hive_node_h node = hivex_root(h), child;
	int depth = 0;

	if (!path || !*path)
		return node;
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return 0;
	}
	for (tok = strtok_r(buf, "\\", &save); tok && node; tok = strtok_r(NULL, "\\", &save)) {
		if (++depth > MAX_PATH_DEPTH) {
			errno = ENAMETOOLONG;
			return 0;
		}
		errno = 0;
		child = hivex_node_get_child(h, node, tok);
		if (!child && errno)
			return 0;
		node = child ? child : hivex_node_add_child(h, node, tok);
	}
	return node;
}

/* UTF-8 to UTF-16LE; *out malloc'd; adds one NUL code unit when nul. */
static int utf16(const char *s, size_t slen, unsigned char **out, size_t *olen, bool nul)
{
	unsigned char *o = malloc(slen * 4 + 4), *p = o;
	const unsigned char *u = (const unsigned char *)s, *end = u + slen;

	if (!o)
		return -ENOMEM;
	while (u < end) {
		uint32_t cp;
		int more;
		if (*u < 0x80) {
			cp = *u;
			more = 0;
		} else if ((*u & 0xe0) == 0xc0) {
			cp = *u & 0x1f;
			more = 1;
		} else if ((*u & 0xf0) == 0xe0) {
			cp = *u & 0x0f;
			more = 2;
		} else if ((*u & 0xf8) == 0xf0) {
			cp = *u & 0x07;
			more = 3;
		} else {
			cp = 0xfffd;
			more = 0;
		}
		u++;
		for (; more > 0; more--, u++) {
			if (u >= end || (*u & 0xc0) != 0x80) {
				cp = 0xfffd;
				break;
			}
			cp = cp << 6 | (*u & 0x3f);
		}
		if (cp >= 0x10000 && cp <= 0x10ffff) {
			cp -= 0x10000;
			uint16_t hi = (uint16_t)(0xd800 | cp >> 10), lo = (uint16_t)(0xdc00 | (cp & 0x3ff));
			*p++ = hi & 0xff;
			*p++ = hi >> 8;
			*p++ = lo & 0xff;
			*p++ = lo >> 8;
			continue;
		}
		if (cp > 0xffff)
			cp = 0xfffd;
		*p++ = cp & 0xff;
		*p++ = (cp >> 8) & 0xff;
	}
	if (nul) {
		*p++ = 0;
		*p++ = 0;
	}
	*out = o;
	*olen = (size_t)(p - o);
	return 0;
}

static int encode(const struct reg_val *v, unsigned char **data, size_t *len)
{
	switch (v->type) {
	case hive_t_REG_SZ:
	case hive_t_REG_EXPAND_SZ:
		return utf16(v->s, strlen(v->s), data, len, true);
	case hive_t_REG_DWORD:
		if (!(*data = malloc(4)))
			return -ENOMEM;
		for (int i = 0; i < 4; i++)
			(*data)[i] = (unsigned char)(v->dw >> (8 * i));
		*len = 4;
		return 0;
	case hive_t_REG_MULTI_SZ: {
		/* each string NUL-terminated, then one more NUL */
		size_t total = 0, cap = strlen(v->s) * 4 + 8;
		unsigned char *o = malloc(cap);
		const char *p = v->s;
		if (!o)
			return -ENOMEM;
		while (*p) {
			const char *nl = strchr(p, '\n');
			size_t l = nl ? (size_t)(nl - p) : strlen(p);
			unsigned char *u;
			size_t ul;
			if (utf16(p, l, &u, &ul, true) < 0) {
				free(o);
				return -ENOMEM;
			}
			memcpy(o + total, u, ul);
			total += ul;
			free(u);
			p += l + (nl ? 1 : 0);
		}
		o[total++] = 0;
		o[total++] = 0;
		*data = o;
		*len = total;
		return 0;
	}
	case hive_t_REG_BINARY:
		if (!(*data = malloc(v->len ? v->len : 1)))
			return -ENOMEM;
		if (v->len)
			memcpy(*data, v->bin, v->len);
		*len = v->len;
		return 0;
	default:
		return -EINVAL;
	}
}

static void describe(struct sbuf *d, const struct reg_val *v)
{
	if (d->len)
		sbuf_adds(d, ", ");
	sbuf_addf(d, "%s=", v->name[0] ? v->name : "@");
	switch (v->type) {
	case hive_t_REG_DWORD:
		sbuf_addf(d, "%u", v->dw);
		break;
	case hive_t_REG_MULTI_SZ:
		sbuf_addf(d, "[");
		for (const char *p = v->s; *p; p++)
			sbuf_add(d, *p == '\n' ? "," : p, 1);
		sbuf_adds(d, "]");
		break;
	case hive_t_REG_BINARY:
		for (size_t i = 0; i < v->len; i++)
			sbuf_addf(d, "%02x", ((const unsigned char *)v->bin)[i]);
		break;
	default:
		sbuf_addf(d, "\"%s\"", v->s);
	}
}

int reg_set(hive_h *h, const char *path, const struct reg_val *v, size_t n, struct sbuf *desc)
{
	hive_node_h node = reg_mkpath(h, path);

	if (!node)
		return errno ? -errno : -EIO;
	for (size_t i = 0; i < n; i++) {
		hive_set_value sv;
		unsigned char *data;
		size_t len;
		int r = encode(&v[i], &data, &len);
		if (r < 0)
			return r;
		sv.key = (char *)v[i].name;
		sv.t = v[i].type;
		sv.len = len;
		sv.value = (char *)data;
		r = hivex_node_set_value(h, node, &sv, 0);
		free(data);
		if (r == -1)
			return errno ? -errno : -EIO;
		if (desc)
			describe(desc, &v[i]);
	}
	return 0;
}

static hive_value_h get_value(hive_h *h, const char *path, const char *name, hive_type want,
			      hive_type want2)
{
	hive_node_h node = reg_find(h, path);
	hive_value_h val;
	hive_type t;
	size_t len;

	if (!node || !(val = hivex_node_get_value(h, node, name)))
		return 0;
	if (hivex_value_type(h, val, &t, &len) == -1 || (t != want && t != want2))
		return 0;
	return val;
}

char *reg_get_str(hive_h *h, const char *path, const char *name)
{
	hive_value_h val = get_value(h, path, name, hive_t_REG_SZ, hive_t_REG_EXPAND_SZ);
	return val ? hivex_value_string(h, val) : NULL;
}

int reg_get_dword(hive_h *h, const char *path, const char *name, uint32_t *out)
{
	hive_value_h val = get_value(h, path, name, hive_t_REG_DWORD, hive_t_REG_DWORD);
	hive_type t;
	size_t len;

	if (!val || hivex_value_type(h, val, &t, &len) == -1 || len != 4)
		return -ENOENT;
	errno = 0;
	*out = (uint32_t)hivex_value_dword(h, val);
	return errno ? -ENOENT : 0;
}

char **reg_get_multi(hive_h *h, const char *path, const char *name)
{
	hive_value_h val = get_value(h, path, name, hive_t_REG_MULTI_SZ, hive_t_REG_MULTI_SZ);
	char **v = val ? hivex_value_multiple_strings(h, val) : NULL;
	size_t k = 0;

	/* libhivex may end the list with an empty string (the terminator);
	 * empty strings are not list members. */
	for (size_t i = 0; v && v[i]; i++) {
		if (v[i][0])
			v[k++] = v[i];
		else
			free(v[i]);
	}
	if (v)
		v[k] = NULL;
	return v;
}

void reg_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

char **reg_subkeys(hive_h *h, const char *path)
{
	hive_node_h node = reg_find(h, path), *kids;
	char **out;
	size_t n = 0, k = 0;

	if (!node || !(kids = hivex_node_children(h, node)))
		return NULL;
	while (kids[n])
		n++;
	if (!(out = calloc(n + 1, sizeof(*out)))) {
		free(kids);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if ((out[k] = hivex_node_name(h, kids[i])))
			k++;
	free(kids);
	return out;
}
