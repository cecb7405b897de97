/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Building a conversion's plan (convert-int.h): the report's change lines,
 * the planned actions, the files as the plan leaves them, and the small
 * libguestfs helpers the converters share.  Nothing here writes to the
 * guest: convert.c applies the plan once a converter has made all of it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert-int.h"

/* ---- guestfs helpers ---- */

bool gx_is_file(guestfs_h *g, const char *path) { return guestfs_is_file(g, path) == 1; }
bool gx_is_dir(guestfs_h *g, const char *path)
{
	return guestfs_is_dir_opts(g, path, GUESTFS_IS_DIR_OPTS_FOLLOWSYMLINKS, 1, -1) == 1;
}
bool gx_is_link(guestfs_h *g, const char *path) { return guestfs_is_symlink(g, path) == 1; }
bool gx_exists(guestfs_h *g, const char *path) { return guestfs_exists(g, path) == 1; }
/* guestfs_read_file() downloads through a temporary file: about 0.2 s a
 * call under TCG whatever the size, where pread's answer comes back in its
 * reply (0.02 s).  The size first, then chunks well under the protocol's
 * 4 MiB message; a file that shrinks meanwhile ends early, one that grows
 * is read up to its size then. */
#define GX_CHUNK (2u << 20)
#define GX_MAX ((int64_t)256 << 20)
char *gx_read(guestfs_h *g, const char *path, size_t *len, const char **why)
{
	int64_t size = guestfs_filesize(g, path);
	char *buf;
	size_t have = 0;

	*len = 0;
	if (why)
		*why = NULL;
	if (size < 0 || size > GX_MAX) {
		if (why)
			*why = size < 0 ? gx_error(g) : "the file is larger than 256 MiB";
		return NULL;
	}
	if (!(buf = malloc((size_t)size + 1)))
		return NULL;
	while (have < (size_t)size) {
		size_t want = (size_t)size - have, n = 0;
		char *d;
		if (want > GX_CHUNK)
			want = GX_CHUNK;
		if (!(d = guestfs_pread(g, path, (int)want, (int64_t)have, &n))) {
			if (why)
				*why = gx_error(g);
			free(buf);
			return NULL;
		}
		if (n > want)
			n = want;
		memcpy(buf + have, d, n);
		free(d);
		if (!n)
			break;
		have += n;
	}
	buf[have] = 0;
	*len = have;
	return buf;
}

void gx_strings_free(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

const char *gx_error(guestfs_h *g)
{
	const char *m = guestfs_last_error(g);

	return m && *m ? m : "unknown error";
}

/* ---- the plan ---- */

int conv_change(struct conv_ctx *c, const char *path, const char *action, const char *fmt, ...)
{
	struct conv_report *r = c->rep;
	struct conv_change *p = realloc(r->changes, (r->nchanges + 1) * sizeof(*p));
	char detail[1024];
	va_list ap;

	if (!p)
		return -ENOMEM;
	r->changes = p;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	p[r->nchanges].path = strdup(path ? path : "");
	p[r->nchanges].action = strdup(action);
	p[r->nchanges].detail = strdup(detail);
	if (!p[r->nchanges].path || !p[r->nchanges].action || !p[r->nchanges].detail) {
		free(p[r->nchanges].path);
		free(p[r->nchanges].action);
		free(p[r->nchanges].detail);
		return -ENOMEM;
	}
	return (int)r->nchanges++;
}

int conv_act(struct conv_ctx *c, enum act_kind kind, const char *path, char *data, size_t len,
	     char **argv, size_t argc, const char *action, const char *detail)
{
	struct conv_action *p = realloc(c->acts, (c->nacts + 1) * sizeof(*p));
	int ch;

	if (!p)
		goto oom;
	c->acts = p;
	if ((ch = conv_change(c, path, action, "%s", detail)) < 0)
		goto oom;
	p[c->nacts] = (struct conv_action){ .kind = kind, .path = strdup(path), .data = data,
					    .len = len, .argv = argv, .argc = argc,
					    .change = (size_t)ch };
	if (!p[c->nacts].path)
		goto oom;
	c->nacts++;
	return 0;
oom:
	free(data);
	strv_free(argv, argc);
	return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
}

static struct conv_file *file_find(struct conv_ctx *c, const char *path)
{
	for (size_t i = 0; i < c->nfiles; i++)
		if (!strcmp(c->files[i].path, path))
			return &c->files[i];
	return NULL;
}

int conv_read(struct conv_ctx *c, const char *path, const char **data, size_t *len)
{
	struct conv_file *f = file_find(c, path);

	if (!f) {
		struct conv_file *p = realloc(c->files, (c->nfiles + 1) * sizeof(*p));
		if (!p)
			return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		c->files = p;
		f = &p[c->nfiles];
		memset(f, 0, sizeof(*f));
		if (!(f->path = strdup(path)))
			return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		c->nfiles++;
		if (gx_is_file(c->g, path)) {
			const char *why;
			char *d = gx_read(c->g, path, &f->len, &why);
			if (!d)
				return im_errf(c->err, IM_EXIT_IO, -EIO, "reading %s in the guest: %s",
					       path, why);
			/* read_file's buffer has a NUL after the content */
			f->data = d;
		}
	}
	*data = f->data;
	*len = f->len;
	return 0;
}

int conv_edit(struct conv_ctx *c, const char *path, struct sbuf *new, const char *detail)
{
	const char *old;
	size_t oldlen;
	struct conv_file *f;
	int r;

	if (new->oom) {
		sbuf_free(new);
		return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	if ((r = conv_read(c, path, &old, &oldlen)) < 0) {
		sbuf_free(new);
		return r;
	}
	f = file_find(c, path);
	if (old && oldlen == new->len && !memcmp(old, new->p, oldlen)) {
		sbuf_free(new);
		return 0;
	}
	if (!new->p)
		sbuf_add(new, "", 0);
	free(f->data);
	f->data = new->p;
	f->len = new->len;
	memset(new, 0, sizeof(*new));
	if (f->action) {
		/* The same file again: one write of the last content, one change
		 * line saying everything. */
		struct conv_action *a = &c->acts[f->action - 1];
		struct conv_change *ch = &c->rep->changes[a->change];
		char *d = NULL;
		free(a->data);
		if (!(a->data = malloc(f->len + 1)))
			return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		memcpy(a->data, f->data, f->len + 1);
		a->len = f->len;
		if (asprintf(&d, "%s; %s", ch->detail, detail) < 0)
			return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		free(ch->detail);
		ch->detail = d;
		return 0;
	}
	char *copy = malloc(f->len + 1);
	if (!copy)
		return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	memcpy(copy, f->data, f->len + 1);
	bool existed = old != NULL;
	FORWARD_ERR(conv_act(c, ACT_WRITE, path, copy, f->len, NULL, 0, existed ? "edit" : "create",
			     detail));
	f->action = c->nacts;
	return 0;
}

/* ---- facts shared by Linux and Windows ---- */

/* UEFI when a GPT disk has an EFI system partition and no BIOS boot
 * partition (GRUB's core image for BIOS on GPT); else BIOS. */
void conv_find_firmware(struct conv_ctx *c)
{
	guestfs_h *g = c->g;
	bool esp = false, biosboot = false;

	for (size_t d = 0; d < c->ndevices; d++) {
		char *type = guestfs_part_get_parttype(g, c->devices[d]);
		struct guestfs_partition_list *pl;
		if (!type || strcmp(type, "gpt")) {
			free(type);
			continue;
		}
		free(type);
		if (!(pl = guestfs_part_list(g, c->devices[d])))
			continue;
		for (size_t i = 0; i < pl->len; i++) {
			char *guid = guestfs_part_get_gpt_type(g, c->devices[d], pl->val[i].part_num);
			if (guid && !strcasecmp(guid, "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"))
				esp = true;
			if (guid && !strcasecmp(guid, "21686148-6449-6E6F-744E-656564454649"))
				biosboot = true;
			free(guid);
		}
		guestfs_free_partition_list(pl);
	}
	snprintf(c->rep->firmware, sizeof(c->rep->firmware), "%s",
		 esp && !biosboot ? "uefi" : "bios");
}

/* ---- strings ---- */

void conv_copy_str(char *dst, size_t len, char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
	free(src);
}
