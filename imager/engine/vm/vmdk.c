/* SPDX-License-Identifier: GPL-2.0-or-later */
/* VMDK descriptors, text or embedded in a sparse extent, and the check of
 * a VMDK's files (extents, snapshot chain) before qemu reads it.
 * Contract and header layouts: include/imager/vmsource.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imager/vmsource.h"
#include "util.h"
#include "vmsource-int.h"

#define KDMV_MAGIC 0x564d444bu       /* "KDMV" read little-endian */
#define COWD_MAGIC 0x44574f43u       /* "COWD" */
#define SESPARSE_MAGIC 0xcafebabeull

static int hex32(const char *s, size_t len, uint32_t *v)
{
	uint32_t n = 0;

	if (!len || len > 8)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		int c = tolower((unsigned char)s[i]);
		if (c >= '0' && c <= '9')
			n = n << 4 | (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			n = n << 4 | (uint32_t)(c - 'a' + 10);
		else
			return -EINVAL;
	}
	*v = n;
	return 0;
}

/* The value of `key=value` or `key = "value"`: quotes removed. */
static void unquote(const char **s, size_t *len)
{
	if (*len >= 2 && (*s)[0] == '"' && (*s)[*len - 1] == '"') {
		(*s)++;
		*len -= 2;
	}
}

static const char *const access_names[] = { "RW", "RDONLY", "NOACCESS" };
static const char *const type_names[] = { "FLAT", "SPARSE", "ZERO", "VMFS", "VMFSSPARSE",
					   "SESPARSE", "VMFSRDM", "VMFSRAW" };

static bool in_list(const char *s, size_t len, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(list[i]) == len && !strncmp(s, list[i], len))
			return true;
	return false;
}

/* Next blank-separated word of s[*i..len): a quoted one whole. */
static int word(const char *s, size_t len, size_t *i, const char **w, size_t *wl)
{
	while (*i < len && (s[*i] == ' ' || s[*i] == '\t'))
		(*i)++;
	if (*i == len)
		return 0;
	*w = s + *i;
	if (s[*i] == '"') {
		const char *q = memchr(s + *i + 1, '"', len - *i - 1);
		if (!q)
			return -EINVAL;
		*wl = (size_t)(q - *w) + 1;
	} else {
		*wl = 0;
		while (*i + *wl < len && s[*i + *wl] != ' ' && s[*i + *wl] != '\t')
			(*wl)++;
	}
	*i += *wl;
	return 1;
}

static int extent_line(const char *s, size_t len, unsigned line, struct vmdk_desc *d,
		       struct im_err *err)
{
	struct vmdk_extent *e;
	const char *w[5];
	size_t wl[5], i = 0, nw = 0;
	char what[64];
	int r;

	while (nw < 5 && (r = word(s, len, &i, &w[nw], &wl[nw])) > 0)
		nw++;
	if (r < 0 || (nw == 5 && word(s, len, &i, &w[0], &wl[0]) != 0) || nw < 3)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "VMDK descriptor line %u: not an extent", line);
	if (d->next == VMDK_MAX_EXTENTS)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "VMDK descriptor: more than %d extents",
			       VMDK_MAX_EXTENTS);
	e = &d->ext[d->next];
	if (!in_list(w[2], wl[2], type_names, sizeof(type_names) / sizeof(type_names[0])))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "VMDK descriptor line %u: extent type %.*s is not known", line,
			       (int)(wl[2] > 16 ? 16 : wl[2]), w[2]);
	memcpy(e->access, w[0], wl[0]);
	memcpy(e->type, w[2], wl[2]);
	if (vm_parse_u64(w[1], wl[1], &e->sectors) < 0 || e->sectors > (UINT64_MAX >> 9))
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "VMDK descriptor line %u: bad sector count",
			       line);
	if (!strcmp(e->type, "ZERO")) {
		if (nw > 3)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "VMDK descriptor line %u: a ZERO extent with a file", line);
	} else {
		const char *f = w[3];
		size_t fl = nw > 3 ? wl[3] : 0;
		if (fl < 3 || f[0] != '"')
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "VMDK descriptor line %u: the extent's file name is missing", line);
		unquote(&f, &fl);
		snprintf(what, sizeof(what), "VMDK descriptor line %u: the extent's file name", line);
		FORWARD_ERR(vm_str_field(e->file, sizeof(e->file), f, fl, what, err));
		if (nw == 5 && (vm_parse_u64(w[4], wl[4], &e->offset) < 0 ||
				e->offset > (UINT64_MAX >> 9) - e->sectors))
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "VMDK descriptor line %u: bad extent offset", line);
		if (nw == 5 && strcmp(e->type, "FLAT") && strcmp(e->type, "VMFS"))
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "VMDK descriptor line %u: an offset on a %s extent", line, e->type);
	}
	if (d->sectors > (UINT64_MAX >> 9) - e->sectors)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "VMDK descriptor: the extents' size overflows");
	d->sectors += e->sectors;
	d->next++;
	return 0;
}

int vmdk_desc_parse(const char *text, size_t len, struct vmdk_desc *d, struct im_err *err)
{
	unsigned line = 0;
	bool cid = false;
	int r = 0;

	memset(d, 0, sizeof(*d));
	d->parent_cid = VMDK_NO_PARENT;
	if (len > VMDK_MAX_DESC)
		return im_errf(err, IM_EXIT_SOURCE, -EFBIG, "VMDK descriptor: %zu bytes, more than %u",
			       len, VMDK_MAX_DESC);
	if (memchr(text, '\0', len))
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "VMDK descriptor: a NUL byte");
	for (size_t at = 0; at < len && r == 0;) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t l = nl ? (size_t)(nl - text) - at : len - at;
		const char *s = text + at, *eq;
		size_t wl;
		at += l + 1;
		line++;
		while (l && (*s == ' ' || *s == '\t'))
			s++, l--;
		while (l && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\r'))
			l--;
		if (!l || *s == '#')
			continue;
		for (wl = 0; wl < l && s[wl] != ' ' && s[wl] != '\t'; wl++)
			;
		if (in_list(s, wl, access_names, 3)) {
			r = extent_line(s, l, line, d, err);
			continue;
		}
		eq = memchr(s, '=', l);
		if (!eq || eq == s) {
			r = im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				    "VMDK descriptor line %u: neither key=value nor an extent", line);
			break;
		}
		{
			size_t kl = (size_t)(eq - s), vl = l - kl - 1;
			const char *v = eq + 1;
			char what[64];
			while (kl && (s[kl - 1] == ' ' || s[kl - 1] == '\t'))
				kl--;
			while (vl && (*v == ' ' || *v == '\t'))
				v++, vl--;
			unquote(&v, &vl);
			snprintf(what, sizeof(what), "VMDK descriptor line %u", line);
			if (kl == 3 && !strncmp(s, "CID", 3)) {
				if (hex32(v, vl, &d->cid) < 0)
					r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: CID is not 8 hex digits",
						    what);
				cid = true;
			} else if (kl == 9 && !strncmp(s, "parentCID", 9)) {
				if (hex32(v, vl, &d->parent_cid) < 0)
					r = im_errf(err, IM_EXIT_SOURCE, -EINVAL,
						    "%s: parentCID is not 8 hex digits", what);
			} else if (kl == 10 && !strncmp(s, "createType", 10)) {
				r = vm_str_field(d->create_type, sizeof(d->create_type), v, vl, what, err);
			} else if (kl == 18 && !strncmp(s, "parentFileNameHint", 18)) {
				r = vm_str_field(d->parent_hint, sizeof(d->parent_hint), v, vl, what, err);
			}
		}
	}
	if (r == 0 && !d->create_type[0])
		r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "VMDK descriptor: no createType");
	if (r == 0 && !d->next)
		r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "VMDK descriptor: no extent");
	if (r == 0 && d->parent_cid != VMDK_NO_PARENT && !d->parent_hint[0])
		r = im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			    "VMDK descriptor: a parentCID without parentFileNameHint");
	(void)cid;
	if (r < 0) {
		memset(d, 0, sizeof(*d));
		d->parent_cid = VMDK_NO_PARENT;
	}
	return r;
}

/* ---- the files ---- */

struct seen {
	char path[VMDK_MAX_CHAIN * (VMDK_MAX_EXTENTS + 1)][PATH_MAX];
	size_t n;
};

static bool seen_has(const struct seen *s, const char *p)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->path[i], p))
			return true;
	return false;
}

static void seen_add(struct seen *s, const char *p)
{
	if (s->n < sizeof(s->path) / sizeof(s->path[0]))
		snprintf(s->path[s->n++], PATH_MAX, "%s", p);
}

static int read_at(int fd, void *buf, size_t len, uint64_t off, const char *name, struct im_err *err)
{
	int r = util_pread_full(fd, buf, len, off);
	if (r == -EIO)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s is shorter than its header says", name);
	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "reading %s: %s", name, strerror(-r));
	return 0;
}

/* A sparse extent's capacity from its own header; the magic must suit
 * the descriptor's type. */
static int sparse_capacity(int fd, const char *type, const char *name, uint64_t *cap,
			   struct im_err *err)
{
	unsigned char h[512];

	FORWARD_ERR(read_at(fd, h, sizeof(h), 0, name, err));
	if (!strcmp(type, "SPARSE") && le32(h) == KDMV_MAGIC)
		*cap = le64(h + 12);
	else if (!strcmp(type, "VMFSSPARSE") && le32(h) == COWD_MAGIC)
		*cap = le32(h + 12);
	else if (!strcmp(type, "SESPARSE") && le64(h) == SESPARSE_MAGIC)
		*cap = le64(h + 16);
	else
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s is not a %s extent (its magic)", name,
			       type);
	return 0;
}

/* The descriptor of the VMDK at path (real path): text, or embedded in
 * a sparse extent (*embedded true). */
static int load_desc(const char *path, struct vmdk_desc *d, bool *embedded, struct im_err *err)
{
	unsigned char h[512];
	uint64_t fsize;
	char *text = NULL;
	size_t len;
	int fd, r;

	*embedded = false;
	fd = vm_open_file(path, &fsize, err);
	if (fd < 0)
		return fd;
	if (fsize >= 4 && (r = read_at(fd, h, 4, 0, path, err)) < 0) {
		close(fd);
		return r;
	}
	if (fsize >= 4 && le32(h) == KDMV_MAGIC) {
		uint64_t off, size, cap;
		if ((r = read_at(fd, h, sizeof(h), 0, path, err)) < 0) {
			close(fd);
			return r;
		}
		cap = le64(h + 12);
		off = le64(h + 28);
		size = le64(h + 36);
		if (!off || !size) {
			close(fd);
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "%s is a sparse extent without a descriptor (open its descriptor file)",
				       path);
		}
		if (size > VMDK_MAX_DESC / 512 || off > fsize / 512 ||
		    off * 512 + size * 512 > fsize) {
			close(fd);
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				       "%s: the embedded descriptor (sector %llu, %llu sectors) is not inside the file",
				       path, (unsigned long long)off, (unsigned long long)size);
		}
		len = (size_t)size * 512;
		text = malloc(len);
		if (!text) {
			close(fd);
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		}
		r = read_at(fd, text, len, off * 512, path, err);
		close(fd);
		if (r < 0) {
			free(text);
			return r;
		}
		len = strnlen(text, len);
		r = vmdk_desc_parse(text, len, d, err);
		free(text);
		if (r < 0) {
			im_err_prefix(err, "%s: ", path);
			return r;
		}
		if (d->next != 1 || strcmp(d->ext[0].type, "SPARSE"))
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "%s: an embedded descriptor with other extents than the file itself", path);
		if (cap != d->ext[0].sectors)
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				       "%s: its header's capacity (%llu sectors) is not its descriptor's (%llu)",
				       path, (unsigned long long)cap, (unsigned long long)d->ext[0].sectors);
		*embedded = true;
		return 0;
	}
	close(fd);
	if (fsize > VMDK_MAX_DESC)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "%s is neither a sparse VMDK nor a descriptor (%llu bytes of text?)", path,
			       (unsigned long long)fsize);
	r = util_read_whole_file(path, (unsigned char **)&text, &len, VMDK_MAX_DESC);
	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "reading %s: %s", path, strerror(-r));
	/* qemu-img pads its descriptor files with NULs to a whole sector:
	 * the text ends at the first NUL, and only NULs may follow. */
	size_t text_len = strnlen(text, len);
	if (text_len < len && util_buf_is_zero(text + text_len, len - text_len))
		len = text_len;
	r = vmdk_desc_parse(text, len, d, err);
	free(text);
	if (r < 0)
		im_err_prefix(err, "%s: ", path);
	return r;
}

static int check_extents(const char *dir, const char *self, const struct vmdk_desc *d,
			 bool embedded, struct seen *seen, struct im_err *err)
{
	for (size_t i = 0; i < d->next; i++) {
		const struct vmdk_extent *e = &d->ext[i];
		char real[PATH_MAX];
		uint64_t cap = 0, fsize;
		int fd, r;

		if (!strcmp(e->type, "VMFSRDM") || !strcmp(e->type, "VMFSRAW"))
			return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				       "%s: extent %s is a raw device mapping (%s): copy the device itself",
				       self, e->file, e->type);
		if (!strcmp(e->type, "ZERO") || embedded)
			continue;
		r = vm_file_in_dir(dir, e->file, real, sizeof(real), err);
		if (r < 0) {
			im_err_prefix(err, "%s: extent: ", self);
			return r;
		}
		if (!strcmp(real, self))
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: extent %s is the descriptor itself",
				       self, e->file);
		if (seen_has(seen, real))
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: extent %s is named twice", self,
				       e->file);
		seen_add(seen, real);
		fd = vm_open_file(real, &fsize, err);
		if (fd < 0)
			return fd;
		if (!strcmp(e->type, "FLAT") || !strcmp(e->type, "VMFS")) {
			close(fd);
			if (fsize / 512 < e->offset + e->sectors)
				return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
					       "%s: extent %s is %llu bytes, shorter than the %llu the descriptor says",
					       self, e->file, (unsigned long long)fsize,
					       (unsigned long long)((e->offset + e->sectors) * 512));
			continue;
		}
		r = sparse_capacity(fd, e->type, real, &cap, err);
		close(fd);
		if (r < 0)
			return r;
		if (cap != e->sectors)
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				       "%s: extent %s holds %llu sectors, the descriptor says %llu", self,
				       e->file, (unsigned long long)cap, (unsigned long long)e->sectors);
	}
	return 0;
}

int vmdk_check(const char *path, struct vmdk_desc *d, unsigned *depth, struct im_err *err)
{
	struct seen *seen;
	struct vmdk_desc *cur;
	char dir[PATH_MAX], self[PATH_MAX];
	unsigned n = 0;
	int r = 0;

	memset(d, 0, sizeof(*d));
	*depth = 0;
	if (!realpath(path, self))
		return im_errf(err, IM_EXIT_SOURCE, errno == ENOENT ? -ENOENT : -errno, "%s: %s", path,
			       strerror(errno));
	if (vm_dirname(self, dir, sizeof(dir)) < 0)
		return im_errf(err, IM_EXIT_SOURCE, -ENAMETOOLONG, "%s: path too long", path);
	seen = calloc(1, sizeof(*seen));
	cur = malloc(sizeof(*cur));
	if (!seen || !cur) {
		free(seen);
		free(cur);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	for (;;) {
		bool embedded;
		uint32_t want;
		char parent[PATH_MAX];

		seen_add(seen, self);
		n++;
		r = load_desc(self, cur, &embedded, err);
		if (r < 0)
			break;
		if (n == 1)
			*d = *cur;
		r = check_extents(dir, self, cur, embedded, seen, err);
		if (r < 0 || cur->parent_cid == VMDK_NO_PARENT)
			break;
		if (n == VMDK_MAX_CHAIN) {
			r = im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				    "%s: a snapshot chain deeper than %d disks", path, VMDK_MAX_CHAIN);
			break;
		}
		want = cur->parent_cid;
		r = vm_file_in_dir(dir, cur->parent_hint, parent, sizeof(parent), err);
		if (r < 0) {
			im_err_prefix(err, "%s: parent: ", self);
			break;
		}
		if (seen_has(seen, parent)) {
			r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "snapshot chain loop at %s (in %s)",
				    cur->parent_hint, self);
			break;
		}
		snprintf(self, sizeof(self), "%s", parent);
		r = load_desc(self, cur, &embedded, err);
		if (r < 0)
			break;
		if (cur->cid != want) {
			r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				    "snapshot chain broken at %s: its CID is %08x, its child wants %08x", self,
				    cur->cid, want);
			break;
		}
		/* loaded again at the top of the loop (cheap: a descriptor) */
	}
	free(seen);
	free(cur);
	if (r < 0) {
		memset(d, 0, sizeof(*d));
		return r;
	}
	*depth = n;
	return 0;
}
