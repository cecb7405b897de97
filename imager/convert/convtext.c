/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Pure text and byte work for guest conversion: see convtext.h. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convtext.h"

/* ---- byte buffer ---- */

static bool sbuf_room(struct sbuf *b, size_t more)
{
	if (b->oom)
		return false;
	if (more > SIZE_MAX / 2 - b->len) {
		b->oom = true;
		return false;
	}
	if (b->len + more + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + more + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return false;
		}
		b->p = p;
		b->cap = cap;
	}
	return true;
}

void sbuf_add(struct sbuf *b, const void *data, size_t len)
{
	if (!sbuf_room(b, len))
		return;
	if (len)
		memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
}

void sbuf_adds(struct sbuf *b, const char *s) { sbuf_add(b, s, strlen(s)); }

void sbuf_addf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	char small[256];
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		return;
	}
	if ((size_t)n < sizeof(small)) {
		sbuf_add(b, small, (size_t)n);
		return;
	}
	if (!sbuf_room(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sbuf_free(struct sbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- disk names ---- */

static bool name_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '-'; }

/* Digits at s[*i..len) as a number (at most 6 digits). */
static bool take_num(const char *s, size_t len, size_t *i, unsigned *out)
{
	size_t j = *i;
	unsigned v = 0;
	while (j < len && isdigit((unsigned char)s[j]) && j - *i < 6)
		v = v * 10 + (unsigned)(s[j++] - '0');
	if (j == *i || (j < len && isdigit((unsigned char)s[j])))
		return false;
	*i = j;
	*out = v;
	return true;
}

/* Letters a..z, aa..zz as a 0-based disk number (sda 0, sdz 25, sdaa 26). */
static bool take_letters(const char *s, size_t len, size_t *i, unsigned *out)
{
	size_t j = *i;
	unsigned v = 0;
	while (j < len && s[j] >= 'a' && s[j] <= 'z' && j - *i < 2)
		v = v * 26 + (unsigned)(s[j++] - 'a' + 1);
	if (j == *i || (j < len && s[j] >= 'a' && s[j] <= 'z'))
		return false;
	*i = j;
	*out = v - 1;
	return true;
}

/* An optional "pN" (N >= 1) after nvme0n1, cciss/c0d0, mmcblk0. */
static bool take_part_suffix(const char *s, size_t len, size_t *j, unsigned *part)
{
	if (*j >= len || s[*j] != 'p')
		return true;
	(*j)++;
	return take_num(s, len, j, part) && *part != 0;
}

/* "N<sep>M" as in nvme0n1 and cciss/c0d1. */
static bool take_pair(const char *s, size_t len, size_t *j, char sep, unsigned *a, unsigned *b)
{
	if (!take_num(s, len, j, a) || *j >= len || s[*j] != sep)
		return false;
	(*j)++;
	return take_num(s, len, j, b);
}

bool devname_parse(const char *s, size_t len, struct devref *out)
{
	static const struct { const char *prefix; enum devkind kind; } letters[] = {
		{ "sd", DEV_SD }, { "hd", DEV_HD }, { "xvd", DEV_XVD }, { "vd", DEV_VD },
	};
	struct devref r = { 0 };
	size_t i = 5;
	unsigned a, b;

	if (len < 7 || memcmp(s, "/dev/", 5) != 0)
		return false;
	for (size_t k = 0; k < sizeof(letters) / sizeof(letters[0]); k++) {
		size_t pl = strlen(letters[k].prefix);
		if (len - i > pl && !memcmp(s + i, letters[k].prefix, pl)) {
			size_t j = i + pl;
			if (!take_letters(s, len, &j, &r.disk))
				return false;
			r.kind = letters[k].kind;
			if (j < len && isdigit((unsigned char)s[j]) && !take_num(s, len, &j, &r.part))
				return false;
			i = j;
			goto done;
		}
	}
	if (len - i > 4 && !memcmp(s + i, "nvme", 4)) {
		size_t j = i + 4;
		if (!take_pair(s, len, &j, 'n', &a, &b) || b == 0)
			return false;
		r.kind = DEV_NVME;
		/* nvme0n1 is disk 0; more namespaces on one controller follow it.
		 * Several controllers with one namespace each is the usual case. */
		r.disk = a + (b - 1);
		if (!take_part_suffix(s, len, &j, &r.part))
			return false;
		i = j;
		goto done;
	}
	if (len - i > 6 && !memcmp(s + i, "cciss/c", 7)) {
		size_t j = i + 7;
		if (!take_pair(s, len, &j, 'd', &a, &b))
			return false;
		r.kind = DEV_CCISS;
		r.disk = a * 16 + b;
		if (!take_part_suffix(s, len, &j, &r.part))
			return false;
		i = j;
		goto done;
	}
	if (len - i > 6 && !memcmp(s + i, "mmcblk", 6)) {
		size_t j = i + 6;
		if (!take_num(s, len, &j, &r.disk))
			return false;
		r.kind = DEV_MMC;
		if (!take_part_suffix(s, len, &j, &r.part))
			return false;
		i = j;
		goto done;
	}
	return false;
done:
	if (i < len && name_char(s[i]))
		return false;
	if (r.disk > 26 * 27 - 1)
		return false;
	r.len = i;
	*out = r;
	return true;
}

int devname_virtio(unsigned disk, unsigned part, enum conv_bus bus, char *out, size_t outlen)
{
	char letters[3];
	size_t n = 0;

	if (disk >= 26 * 27)
		return -ERANGE;
	if (disk >= 26)
		letters[n++] = (char)('a' + disk / 26 - 1);
	letters[n++] = (char)('a' + disk % 26);
	letters[n] = '\0';
	if (part)
		snprintf(out, outlen, "/dev/%s%s%u", bus == CONV_BUS_VIRTIO_SCSI ? "sd" : "vd", letters,
			 part);
	else
		snprintf(out, outlen, "/dev/%s%s", bus == CONV_BUS_VIRTIO_SCSI ? "sd" : "vd", letters);
	return 0;
}

/* The end of a remap: the text after the last replacement, then the
 * results handed over (or everything freed when memory ran out). */
static int finish_remap(const char *text, size_t len, size_t from, struct sbuf *out,
			struct remap_change *ch, size_t nch, struct remap_change **changes,
			size_t *nchanges)
{
	sbuf_add(out, text + from, len - from);
	if (out->oom) {
		free(ch);
		sbuf_free(out);
		return -ENOMEM;
	}
	if (changes)
		*changes = ch;
	if (nchanges)
		*nchanges = nch;
	return 0;
}

/* Record replacement number n (line, the text replaced, what replaced it)
 * in *ch, grown as needed; on failure *ch is freed.  0 or -ENOMEM. */
static int push_change(struct remap_change **ch, size_t n, size_t *cap, unsigned line,
		       const char *from, size_t flen, const char *to)
{
	if (n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		struct remap_change *p = realloc(*ch, nc * sizeof(*p));
		if (!p) {
			free(*ch);
			*ch = NULL;
			return -ENOMEM;
		}
		*ch = p;
		*cap = nc;
	}
	(*ch)[n].line = line;
	snprintf((*ch)[n].from, sizeof((*ch)[n].from), "%.*s", (int)(flen < 63 ? flen : 63), from);
	snprintf((*ch)[n].to, sizeof((*ch)[n].to), "%s", to);
	return 0;
}

int remap_text(const char *text, size_t len, enum conv_bus bus, uuid_lookup_fn lookup,
	       void *opaque, struct sbuf *out, struct remap_change **changes, size_t *nchanges)
{
	struct remap_change *ch = NULL;
	size_t nch = 0, cap = 0, i = 0, from = 0;
	unsigned line = 1;
	bool comment = false;    /* the line so far is a comment: names only */
	bool blank = true;       /* the line so far is blanks */

	memset(out, 0, sizeof(*out));
	sbuf_add(out, "", 0);
	while (i < len) {
		struct devref d;
		char to[96], uuid[64];
		char prev = i ? text[i - 1] : '\n';

		if (text[i] == '\n') {
			line++;
			i++;
			comment = false;
			blank = true;
			continue;
		}
		if (blank && text[i] == '#')
			comment = true;
		if (text[i] != ' ' && text[i] != '\t')
			blank = false;
		if (text[i] != '/' || (i && (name_char(prev) || prev == '/' || prev == '.')) ||
		    !devname_parse(text + i, len - i, &d) || d.kind == DEV_VD ||
		    (bus == CONV_BUS_VIRTIO_SCSI && d.kind == DEV_SD)) {
			i++;
			continue;
		}
		bool alone = prev == '\n' || prev == ' ' || prev == '\t' || prev == '=' ||
			     prev == '"' || prev == '\'';
		if (d.part && alone && !comment && lookup && lookup(opaque, d.disk, d.part, uuid, sizeof(uuid)))
			snprintf(to, sizeof(to), "UUID=%s", uuid);
		else if (devname_virtio(d.disk, d.part, bus, to, sizeof(to)) < 0) {
			i += d.len;
			continue;
		}
		sbuf_add(out, text + from, i - from);
		sbuf_adds(out, to);
		if (changes && push_change(&ch, nch, &cap, line, text + i, d.len, to) < 0) {
			sbuf_free(out);
			return -ENOMEM;
		}
		nch++;
		i += d.len;
		from = i;
	}
	return finish_remap(text, len, from, out, ch, nch, changes, nchanges);
}

int console_remap(const char *text, size_t len, struct sbuf *out, struct remap_change **changes,
		  size_t *nchanges)
{
	static const char key[] = "console=";
	const size_t kl = sizeof(key) - 1;
	struct remap_change *ch = NULL;
	size_t nch = 0, cap = 0, from = 0;
	unsigned line = 1;

	memset(out, 0, sizeof(*out));
	sbuf_add(out, "", 0);
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '\n') {
			line++;
			continue;
		}
		char prev = i ? text[i - 1] : '\n';
		if (len - i < kl + 4 || memcmp(text + i, key, kl) ||
		    !(prev == '\n' || prev == ' ' || prev == '\t' || prev == '"' || prev == '\''))
			continue;
		size_t v = i + kl, d = v + 3;
		if (memcmp(text + v, "hvc", 3) && memcmp(text + v, "xvc", 3))
			continue;
		while (d < len && d - v < 8 && text[d] >= '0' && text[d] <= '9')
			d++;
		if (d == v + 3 || (d < len && name_char(text[d])))
			continue;
		char to[32];
		snprintf(to, sizeof(to), "console=ttyS%.*s", (int)(d - v - 3), text + v + 3);
		sbuf_add(out, text + from, i - from);
		sbuf_adds(out, to);
		if (changes && push_change(&ch, nch, &cap, line, text + i, d - i, to) < 0) {
			sbuf_free(out);
			return -ENOMEM;
		}
		nch++;
		from = d;
		i = d - 1;
	}
	return finish_remap(text, len, from, out, ch, nch, changes, nchanges);
}

int grubenv_refit(struct sbuf *b, size_t size)
{
	size_t pad = 0;

	if (b->oom)
		return -ENOMEM;
	while (pad < b->len && b->p[b->len - 1 - pad] == '#')
		pad++;
	if (b->len - pad == 0 || b->p[b->len - 1 - pad] != '\n')
		return -EINVAL;
	if (b->len > size) {
		if (b->len - size > pad)
			return -ENOSPC;
		b->len = size;
		b->p[size] = 0;
		return 0;
	}
	while (b->len < size && !b->oom)
		sbuf_add(b, "#", 1);
	return b->oom ? -ENOMEM : 0;
}

/* ---- kernel modules ---- */

/* name[0..len) is want ('-' and '_' alike) */
static bool module_name_is(const char *name, size_t len, const char *want)
{
	if (strlen(want) != len)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((name[i] == '-' ? '_' : name[i]) != (want[i] == '-' ? '_' : want[i]))
			return false;
	return true;
}

bool module_path_is(const char *path, size_t len, const char *name)
{
	static const char *const exts[] = { ".ko", ".ko.xz", ".ko.zst", ".ko.gz" };
	size_t b = len, nl = strlen(name);

	while (b && path[b - 1] != '/')
		b--;
	for (size_t k = 0; k < sizeof(exts) / sizeof(exts[0]); k++) {
		size_t el = strlen(exts[k]);
		if (len - b == nl + el && !memcmp(path + len - el, exts[k], el))
			return module_name_is(path + b, nl, name);
	}
	return false;
}

/* The line of modules.dep whose module (before ':') is name. */
static bool dep_find(const char *dep, size_t len, const char *name, size_t *ls, size_t *colon,
		     size_t *le)
{
	size_t i = 0;
	while (i < len) {
		size_t e = i, c;
		while (e < len && dep[e] != '\n')
			e++;
		for (c = i; c < e && dep[c] != ':'; c++)
			;
		if (c < e && module_path_is(dep + i, c - i, name)) {
			*ls = i;
			*colon = c;
			*le = e;
			return true;
		}
		i = e + 1;
	}
	return false;
}

static bool builtin_has(const char *b, size_t len, const char *name)
{
	size_t i = 0;
	while (b && i < len) {
		size_t e = i;
		while (e < len && b[e] != '\n')
			e++;
		if (module_path_is(b + i, e - i, name))
			return true;
		i = e + 1;
	}
	return false;
}

static int strv_push(char ***v, size_t *n, const char *s, size_t len)
{
	for (size_t i = 0; i < *n; i++)
		if (strlen((*v)[i]) == len && !memcmp((*v)[i], s, len))
			return 0;
	char **p = realloc(*v, (*n + 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	*v = p;
	if (!(p[*n] = strndup(s, len)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

void strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

int modules_closure(const char *dep, size_t deplen, const char *builtin, size_t builtinlen,
		    const char *const *names, size_t n, char ***paths, size_t *npaths,
		    size_t *nbuiltin, const char **missing)
{
	char **v = NULL;
	size_t nv = 0, nb = 0;

	*missing = NULL;
	for (size_t k = 0; k < n; k++) {
		size_t ls, colon, le;
		if (!dep_find(dep, deplen, names[k], &ls, &colon, &le)) {
			if (builtin_has(builtin, builtinlen, names[k]))
				nb++;
			else if (!*missing)
				*missing = names[k];
			continue;
		}
		/* modules.dep lists every dependency, direct or not, the ones
		 * loaded last first: load them in reverse, then the module. */
		size_t e = le;
		while (e > colon + 1) {
			while (e > colon + 1 && dep[e - 1] == ' ')
				e--;
			size_t s = e;
			while (s > colon + 1 && dep[s - 1] != ' ')
				s--;
			if (s < e && strv_push(&v, &nv, dep + s, e - s) < 0)
				goto oom;
			e = s;
		}
		if (strv_push(&v, &nv, dep + ls, colon - ls) < 0)
			goto oom;
	}
	*paths = v;
	*npaths = nv;
	*nbuiltin = nb;
	return 0;
oom:
	strv_free(v, nv);
	return -ENOMEM;
}

/* ---- GRUB 2 ---- */

/* The next word of a grub.cfg line at *i (quotes removed), into w. */
static bool grub_word(const char *s, size_t e, size_t *i, char *w, size_t wl)
{
	size_t o = 0;
	while (*i < e && (s[*i] == ' ' || s[*i] == '\t'))
		(*i)++;
	if (*i >= e)
		return false;
	while (*i < e && s[*i] != ' ' && s[*i] != '\t') {
		char q = s[*i];
		if (q == '\'' || q == '"') {
			(*i)++;
			while (*i < e && s[*i] != q) {
				if (q == '"' && s[*i] == '\\' && *i + 1 < e)
					(*i)++;
				if (o + 1 < wl)
					w[o++] = s[*i];
				(*i)++;
			}
			if (*i < e)
				(*i)++;
		} else {
			if (o + 1 < wl)
				w[o++] = q;
			(*i)++;
		}
	}
	w[o] = '\0';
	return true;
}

/* Where grub_entries is in grub.cfg: braces open, the open submenu and
 * menuentry (the depth at which their bodies start; -1 none), the entries'
 * numbers at the top and inside the submenu, and the entries found. */
struct grub_scan {
	int depth, sub_depth, entry_depth;
	unsigned top, inner;
	char subid[128];
	bool have_default;
	struct grub_entry *cur, *out;
	size_t n, max;
};

/* The words after a menuentry or submenu keyword: its title, and the word
 * after $menuentry_id_option (its id). */
static void grub_title_id(const char *text, size_t e, size_t *j, char *title, size_t tlen,
			  char *id, size_t idlen)
{
	char word[256];

	grub_word(text, e, j, title, tlen);
	while (grub_word(text, e, j, word, sizeof(word)))
		if (!strcmp(word, "$menuentry_id_option") && grub_word(text, e, j, word, sizeof(word)) &&
		    strlen(word) < idlen)   /* (an id that does not fit is not taken, never cut) */
			memcpy(id, word, strlen(word) + 1);
}

/* A menuentry: a new entry numbered where it stands (N, or N>M inside a
 * submenu); beyond max it is only counted. */
static void grub_menuentry(struct grub_scan *g, const char *text, size_t e, size_t *j)
{
	char title[128] = "", id[128] = "";

	grub_title_id(text, e, j, title, sizeof(title), id, sizeof(id));
	g->cur = NULL;
	if (g->n < g->max) {
		struct grub_entry *cur = g->cur = &g->out[g->n];
		memset(cur, 0, sizeof(*cur));
		snprintf(cur->title, sizeof(cur->title), "%s", title);
		if (g->sub_depth >= 0) {
			snprintf(cur->index, sizeof(cur->index), "%u>%u", g->top, g->inner);
			if (g->subid[0] && id[0])
				snprintf(cur->id, sizeof(cur->id), "%s>%s", g->subid, id);
		} else {
			snprintf(cur->index, sizeof(cur->index), "%u", g->top);
			snprintf(cur->id, sizeof(cur->id), "%s", id);
		}
	}
	g->n++;
	g->entry_depth = g->depth + 1;
}

/* The kernel of the open entry, from its first linux line: the version
 * after "vmlinuz-" (or "vmlinux-") in the file name. */
static void grub_kernel(struct grub_scan *g, const char *text, size_t e, size_t *j)
{
	char k[256];
	const char *b;

	if (!grub_word(text, e, j, k, sizeof(k)))
		return;
	b = strrchr(k, '/');
	b = b ? b + 1 : k;
	if (!strncmp(b, "vmlinuz-", 8) || !strncmp(b, "vmlinux-", 8))
		snprintf(g->cur->kernel, sizeof(g->cur->kernel), "%s", b + 8);
}

/* The first word of the line [*j, e) and what it starts.  -EINVAL for a
 * submenu inside a submenu or an entry. */
static int grub_line_words(struct grub_scan *g, const char *text, size_t e, size_t j,
			   char *default_value, size_t dvlen)
{
	char w[256];

	if (!grub_word(text, e, &j, w, sizeof(w)))
		return 0;
	if (!strcmp(w, "set") && !g->have_default && g->depth == 0) {
		char a[256];
		if (grub_word(text, e, &j, a, sizeof(a)) && !strncmp(a, "default=", 8)) {
			snprintf(default_value, dvlen, "%s", a + 8);
			g->have_default = true;
		}
	} else if (!strcmp(w, "submenu")) {
		char title[128] = "";
		if (g->sub_depth >= 0 || g->entry_depth >= 0)
			return -EINVAL;
		g->subid[0] = '\0';
		grub_title_id(text, e, &j, title, sizeof(title), g->subid, sizeof(g->subid));
		g->sub_depth = g->depth + 1;
		g->inner = 0;
	} else if (!strcmp(w, "menuentry") && g->entry_depth < 0) {
		grub_menuentry(g, text, e, &j);
	} else if ((!strcmp(w, "linux") || !strcmp(w, "linux16") || !strcmp(w, "linuxefi")) &&
		   g->entry_depth >= 0 && g->cur && !g->cur->kernel[0]) {
		grub_kernel(g, text, e, &j);
	}
	return 0;
}

/* Braces outside quotes and comments change the depth; a closing one may
 * end the open entry (the next is numbered one on) or the submenu. */
static void grub_line_braces(struct grub_scan *g, const char *text, size_t i, size_t e)
{
	bool sq = false, dq = false;

	for (size_t k = i; k < e; k++) {
		char c = text[k];
		if (c == '#' && !sq && !dq && (k == i || text[k - 1] == ' ' || text[k - 1] == '\t'))
			break;
		if (c == '\'' && !dq)
			sq = !sq;
		else if (c == '"' && !sq)
			dq = !dq;
		else if (c == '{' && !sq && !dq)
			g->depth++;
		else if (c == '}' && !sq && !dq) {
			if (g->depth > 0)
				g->depth--;
			if (g->entry_depth >= 0 && g->depth < g->entry_depth) {
				g->entry_depth = -1;
				g->cur = NULL;
				if (g->sub_depth >= 0)
					g->inner++;
				else
					g->top++;
			} else if (g->sub_depth >= 0 && g->depth < g->sub_depth) {
				g->sub_depth = -1;
				g->top++;
			}
		}
	}
}

int grub_entries(const char *text, size_t len, struct grub_entry *out, size_t max,
		 char *default_value, size_t dvlen)
{
	struct grub_scan g = { .sub_depth = -1, .entry_depth = -1, .out = out, .max = max };
	size_t i = 0;

	snprintf(default_value, dvlen, "0");
	while (i < len) {
		size_t e = i;
		while (e < len && text[e] != '\n')
			e++;
		if (grub_line_words(&g, text, e, i, default_value, dvlen) < 0)
			return -EINVAL;
		grub_line_braces(&g, text, i, e);
		i = e + 1;
	}
	return g.n > (size_t)0x7fffffff ? 0x7fffffff : (int)g.n;
}

int grub_default_entry(const struct grub_entry *e, size_t n, const char *dv)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(e[i].index, dv))
			return (int)i;
	for (size_t i = 0; i < n; i++)
		if ((e[i].id[0] && !strcmp(e[i].id, dv)) || !strcmp(e[i].title, dv))
			return (int)i;
	/* "submenu-id>N" and "N>entry-id" mixes are rare: not resolved. */
	return -1;
}

int set_assignment(const char *text, size_t len, const char *key, const char *value,
		   bool grub_cfg, struct sbuf *out)
{
	size_t i = 0, kl = strlen(key);
	bool done = false;

	memset(out, 0, sizeof(*out));
	sbuf_add(out, "", 0);
	while (i < len) {
		size_t e = i, s = i;
		while (e < len && text[e] != '\n')
			e++;
		while (s < e && (text[s] == ' ' || text[s] == '\t'))
			s++;
		bool hit = false;
		if (!done && grub_cfg && e - s > 4 + kl + 1 && !memcmp(text + s, "set ", 4) &&
		    !memcmp(text + s + 4, key, kl) && text[s + 4 + kl] == '=')
			hit = true;
		if (!done && !grub_cfg && e - s > kl && !memcmp(text + s, key, kl) && text[s + kl] == '=')
			hit = true;
		if (hit) {
			sbuf_add(out, text + i, s - i);
			sbuf_addf(out, "%s%s=\"%s\"", grub_cfg ? "set " : "", key, value);
			done = true;
		} else {
			sbuf_add(out, text + i, e - i);
		}
		if (e < len)
			sbuf_add(out, "\n", 1);
		i = e + 1;
	}
	if (!done && !grub_cfg) {
		if (out->len && out->p[out->len - 1] != '\n')
			sbuf_add(out, "\n", 1);
		sbuf_addf(out, "%s=\"%s\"\n", key, value);
	}
	return out->oom ? -ENOMEM : 0;
}

/* ---- newc cpio ---- */

static void cpio_pad(struct sbuf *b, size_t to)
{
	static const char zeros[512];
	size_t r = b->len % to;
	if (r)
		sbuf_add(b, zeros, to - r);
}

void cpio_add(struct sbuf *b, const char *name, unsigned mode, uint32_t ino, uint32_t mtime,
	      const void *data, size_t len)
{
	char hdr[111];
	size_t nl = strlen(name) + 1;

	/* magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	 * devminor, rdevmajor, rdevminor, namesize, check */
	snprintf(hdr, sizeof(hdr), "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		 ino, mode, 0u, 0u, (mode & 0170000) == 0040000 ? 2u : 1u, mtime, (unsigned)len, 0u,
		 0u, 0u, 0u, (unsigned)nl, 0u);
	sbuf_add(b, hdr, 110);
	sbuf_add(b, name, nl);
	cpio_pad(b, 4);
	if (len) {
		sbuf_add(b, data, len);
		cpio_pad(b, 4);
	}
}

void cpio_finish(struct sbuf *b, uint32_t ino)
{
	cpio_add(b, "TRAILER!!!", 0, ino, 0, NULL, 0);
	cpio_pad(b, 512);
}

/* ---- the quick inspection's files ---- */

/* The value of an os-release line after '=': quotes removed, backslash
 * escapes of the quoted form kept literal but for the escaped character. */
static void osrel_value(const char *v, size_t n, char *dst, size_t dlen)
{
	size_t o = 0, i = 0;
	char q = 0;

	if (n && (v[0] == '"' || v[0] == '\'')) {
		q = v[0];
		i = 1;
	}
	for (; i < n && o + 1 < dlen; i++) {
		if (q && v[i] == q)
			break;
		if (q == '"' && v[i] == '\\' && i + 1 < n)
			i++;
		dst[o++] = v[i] >= ' ' && v[i] != 0x7f ? v[i] : '?';
	}
	dst[o] = 0;
}

void osrel_parse(const char *text, size_t len, struct osrel *out)
{
	size_t pos = 0;

	memset(out, 0, sizeof(*out));
	while (pos < len) {
		const char *l = text + pos, *nl = memchr(l, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - l) : len - pos;
		pos += n + 1;
		while (n && (l[n - 1] == '\r' || l[n - 1] == ' ' || l[n - 1] == '\t'))
			n--;
		const char *eq = memchr(l, '=', n);
		if (!eq || l[0] == '#')
			continue;
		size_t kl = (size_t)(eq - l), vl = n - kl - 1;
		if (kl == 2 && !memcmp(l, "ID", 2))
			osrel_value(eq + 1, vl, out->id, sizeof(out->id));
		else if (kl == 10 && !memcmp(l, "VERSION_ID", 10))
			osrel_value(eq + 1, vl, out->version_id, sizeof(out->version_id));
		else if (kl == 11 && !memcmp(l, "PRETTY_NAME", 11))
			osrel_value(eq + 1, vl, out->pretty, sizeof(out->pretty));
	}
}

bool version_parse(const char *text, size_t len, int *major, int *minor)
{
	size_t i = 0;
	long a = 0, b = 0;

	if (!len || text[0] < '0' || text[0] > '9')
		return false;
	for (; i < len && text[i] >= '0' && text[i] <= '9'; i++)
		if ((a = a * 10 + (text[i] - '0')) > 100000)
			return false;
	if (i + 1 < len && text[i] == '.' && text[i + 1] >= '0' && text[i + 1] <= '9')
		for (i++; i < len && text[i] >= '0' && text[i] <= '9'; i++)
			if ((b = b * 10 + (text[i] - '0')) > 100000)
				return false;
	*major = (int)a;
	*minor = (int)b;
	return true;
}

/* One whitespace-separated fstab field, \NNN octal escapes decoded; false
 * when it does not fit (or decodes to a NUL). */
static bool fstab_field(const char *l, size_t n, size_t *i, char *dst, size_t dlen)
{
	size_t o = 0;

	while (*i < n && (l[*i] == ' ' || l[*i] == '\t'))
		(*i)++;
	if (*i >= n)
		return false;
	while (*i < n && l[*i] != ' ' && l[*i] != '\t') {
		char ch = l[*i];
		if (ch == '\\' && *i + 3 < n && l[*i + 1] >= '0' && l[*i + 1] <= '3' &&
		    l[*i + 2] >= '0' && l[*i + 2] <= '7' && l[*i + 3] >= '0' && l[*i + 3] <= '7') {
			ch = (char)((l[*i + 1] - '0') * 64 + (l[*i + 2] - '0') * 8 + (l[*i + 3] - '0'));
			*i += 3;
			if (!ch)
				return false;
		}
		if (o + 1 >= dlen)
			return false;
		dst[o++] = ch;
		(*i)++;
	}
	dst[o] = 0;
	return true;
}

size_t fstab_parse(const char *text, size_t len, struct fstab_ent *out, size_t max)
{
	size_t pos = 0, count = 0;
	unsigned line = 0;

	while (pos < len) {
		const char *l = text + pos, *nl = memchr(l, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - l) : len - pos, i = 0;
		struct fstab_ent e;
		pos += n + 1;
		line++;
		while (i < n && (l[i] == ' ' || l[i] == '\t'))
			i++;
		if (i >= n || l[i] == '#')
			continue;
		if (!fstab_field(l, n, &i, e.spec, sizeof(e.spec)) ||
		    !fstab_field(l, n, &i, e.file, sizeof(e.file)) ||
		    !fstab_field(l, n, &i, e.type, sizeof(e.type)))
			continue;
		size_t j = i;
		while (j < n && (l[j] == ' ' || l[j] == '\t' || l[j] == '\r'))
			j++;
		e.opts[0] = 0;
		if (j < n && !fstab_field(l, n, &i, e.opts, sizeof(e.opts)))
			continue;
		e.line = line;
		if (count < max)
			out[count] = e;
		count++;
	}
	return count;
}

bool fstab_opt(const char *opts, const char *key, char *val, size_t vlen)
{
	size_t kl = strlen(key);

	for (const char *o = opts; *o;) {
		const char *end = strchr(o, ',');
		size_t ol = end ? (size_t)(end - o) : strlen(o);
		if (ol >= kl && !memcmp(o, key, kl) && (ol == kl || o[kl] == '=')) {
			size_t v = ol > kl ? ol - kl - 1 : 0;
			if (vlen) {
				if (v >= vlen)
					v = vlen - 1;
				memcpy(val, o + kl + (ol > kl), v);
				val[v] = 0;
			}
			return true;
		}
		o += ol + (end != NULL);
	}
	return false;
}

const char *elf_arch(const unsigned char *h, size_t len)
{
	if (len < 20 || memcmp(h, "\177ELF", 4) || (h[4] != 1 && h[4] != 2) || (h[5] != 1 && h[5] != 2))
		return NULL;
	unsigned m = h[5] == 1 ? (unsigned)h[18] | (unsigned)h[19] << 8
			       : (unsigned)h[18] << 8 | (unsigned)h[19];
	bool wide = h[4] == 2, little = h[5] == 1;
	switch (m) {
	case 3:   return wide ? NULL : "i386";
	case 62:  return wide ? "x86_64" : NULL;
	case 183: return wide ? "aarch64" : NULL;
	case 40:  return wide ? NULL : "arm";
	case 21:  return !wide ? NULL : little ? "ppc64le" : "ppc64";
	case 22:  return wide ? "s390x" : NULL;
	case 243: return wide ? "riscv64" : NULL;
	}
	return NULL;
}

/* ---- the platform a machine leaves ---- */

/* Unit and init script names of the guest agents, as the packages ship
 * them: Debian's and Ubuntu's open-vm-tools (open-vm-tools, its alias
 * vmtoolsd, vgauth; run-vmblock\x2dfuse.mount from open-vm-tools-desktop),
 * RHEL's and SUSE's (vmtoolsd, vgauthd, vmblock-fuse), VMware Tools' own
 * installer (vmware-tools, vmware-tools-thinprint); VirtualBox's Guest
 * Additions (vboxadd, vboxadd-service, vboxadd-x11), Debian's
 * virtualbox-guest-utils and Fedora's vboxservice; Citrix's Xen agent;
 * Debian's hyperv-daemons (hv-kvp-daemon..., and the older
 * hyperv-daemons.hv-kvp-daemon...), RHEL's (hypervkvpd...) and SUSE's
 * (hv_kvp_daemon...). */
static const struct {
	const char *platform;
	const char *names[13];   /* up to the first NULL */
} old_services[] = {
	{ "VMware", { "open-vm-tools", "vmtoolsd", "vgauth", "vgauthd", "VGAuthService",
		      "vmware-tools", "vmware-tools-thinprint", "vmware-vmblock-fuse",
		      "vmblock-fuse", "run-vmblock\\x2dfuse" } },
	{ "VirtualBox", { "vboxadd", "vboxadd-service", "vboxadd-x11", "vboxservice",
			  "virtualbox-guest-utils" } },
	{ "Xen", { "xe-linux-distribution", "xe-daemon" } },
	{ "Hyper-V", { "hv-kvp-daemon", "hv-vss-daemon", "hv-fcopy-daemon",
		       "hyperv-daemons.hv-kvp-daemon", "hyperv-daemons.hv-vss-daemon",
		       "hyperv-daemons.hv-fcopy-daemon", "hypervkvpd", "hypervvssd", "hypervfcopyd",
		       "hv_kvp_daemon", "hv_vss_daemon", "hv_fcopy_daemon" } },
};

/* The modules of the platforms' virtual hardware (Xen's: every xen-*). */
static const struct { const char *name, *what; } old_modules[] = {
	{ "vmw_pvscsi", "VMware paravirtual SCSI controller" },
	{ "pvscsi", "VMware paravirtual SCSI controller (VMware Tools' build)" },
	{ "vmxnet3", "VMware paravirtual NIC" }, { "vmxnet", "VMware paravirtual NIC" },
	{ "vmw_balloon", "VMware memory balloon" }, { "vmmemctl", "VMware memory balloon" },
	{ "vmw_vmci", "VMware VMCI device" },
	{ "vmw_vsock_vmci_transport", "VMware VMCI sockets" },
	{ "vmhgfs", "VMware shared folders" },
	{ "hv_vmbus", "Hyper-V VMBus" }, { "hv_storvsc", "Hyper-V storage controller" },
	{ "hv_netvsc", "Hyper-V NIC" }, { "hv_utils", "Hyper-V integration services" },
	{ "hv_balloon", "Hyper-V memory balloon" }, { "hv_sock", "Hyper-V sockets" },
	{ "hyperv_keyboard", "Hyper-V keyboard" }, { "hid_hyperv", "Hyper-V mouse" },
	{ "hyperv_fb", "Hyper-V framebuffer" }, { "hyperv_drm", "Hyper-V display" },
	{ "pci_hyperv", "Hyper-V PCI passthrough" },
	{ "vboxguest", "VirtualBox guest device" }, { "vboxsf", "VirtualBox shared folders" },
	{ "vboxvideo", "VirtualBox display" },
};

const char *old_platform_service(const char *name, size_t len)
{
	static const char *const suffixes[] = { ".service", ".mount", ".path", ".socket" };

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t sl = strlen(suffixes[i]);
		if (len > sl && !memcmp(name + len - sl, suffixes[i], sl)) {
			len -= sl;
			break;
		}
	}
	/* SysV links: S20vmware-tools, K01open-vm-tools */
	if (len > 3 && (name[0] == 'S' || name[0] == 'K') && isdigit((unsigned char)name[1]) &&
	    isdigit((unsigned char)name[2])) {
		name += 3;
		len -= 3;
	}
	for (size_t p = 0; p < sizeof(old_services) / sizeof(old_services[0]); p++)
		for (size_t i = 0; i < 13 && old_services[p].names[i]; i++)
			if (strlen(old_services[p].names[i]) == len &&
			    !memcmp(name, old_services[p].names[i], len))
				return old_services[p].platform;
	return NULL;
}

const char *old_platform_module(const char *name, size_t len)
{
	if (len > 3 && !memcmp(name, "xen", 3) && (name[3] == '-' || name[3] == '_'))
		return "Xen PV driver";
	for (size_t i = 0; i < sizeof(old_modules) / sizeof(old_modules[0]); i++)
		if (module_name_is(name, len, old_modules[i].name))
			return old_modules[i].what;
	return NULL;
}

/* ---- Debian's package database ---- */

/* value of "Field:" at line[0..n), blanks trimmed, or NULL */
static const char *field_value(const char *line, size_t n, const char *field, size_t *vl)
{
	size_t fl = strlen(field);
	if (n <= fl || memcmp(line, field, fl) || line[fl] != ':')
		return NULL;
	const char *v = line + fl + 1, *e = line + n;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	while (e > v && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		e--;
	*vl = (size_t)(e - v);
	return v;
}

bool dpkg_installed(const char *text, size_t len, const char *name)
{
	static const char installed[] = "install ok installed";
	size_t nl = strlen(name), i = 0;
	bool is_pkg = false, is_inst = false;

	while (text && i <= len) {
		size_t e = i;
		while (e < len && text[e] != '\n')
			e++;
		size_t n = e - i, vl;
		const char *v;
		if (n == 0 || (n == 1 && text[i] == '\r')) {   /* end of a stanza */
			if (is_pkg && is_inst)
				return true;
			is_pkg = is_inst = false;
		} else if ((v = field_value(text + i, n, "Package", &vl))) {
			is_pkg = vl == nl && !memcmp(v, name, nl);
		} else if ((v = field_value(text + i, n, "Status", &vl))) {
			is_inst = vl == sizeof(installed) - 1 && !memcmp(v, installed, vl);
		}
		if (e >= len)
			break;
		i = e + 1;
	}
	return is_pkg && is_inst;
}
