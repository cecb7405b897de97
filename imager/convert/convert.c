/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest conversion: open, inspect, plan, apply (see include/imager/convert.h).
 * The operating-system parts only plan; everything is written here, after
 * the whole plan was made, so that a refused guest is left untouched.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert-int.h"
#include "imager/guest.h"
#include "imager/virtiowin.h"

#define WRITE_CHUNK (1u << 20)   /* libguestfs messages are limited to a few MiB */

const char *conv_block_name(enum conv_block b)
{
	return b == CONV_BLOCK_VIRTIO_SCSI ? "virtio-scsi" : "virtio-blk";
}

enum conv_block conv_block_parse(const char *s)
{
	if (!strcmp(s, "virtio-blk") || !strcmp(s, "blk"))
		return CONV_BLOCK_VIRTIO_BLK;
	if (!strcmp(s, "virtio-scsi") || !strcmp(s, "scsi"))
		return CONV_BLOCK_VIRTIO_SCSI;
	return 0;
}

/* ---- guestfs helpers ---- */

bool gx_is_file(guestfs_h *g, const char *path) { return guestfs_is_file(g, path) == 1; }
bool gx_is_dir(guestfs_h *g, const char *path)
{
	return guestfs_is_dir_opts(g, path, GUESTFS_IS_DIR_OPTS_FOLLOWSYMLINKS, 1, -1) == 1;
}
bool gx_is_link(guestfs_h *g, const char *path) { return guestfs_is_symlink(g, path) == 1; }
bool gx_exists(guestfs_h *g, const char *path) { return guestfs_exists(g, path) == 1; }
const char *gx_error(guestfs_h *g)
{
	const char *m = guestfs_last_error(g);
	return m && *m ? m : "unknown error";
}

static void free_strings(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
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
			char *d = guestfs_read_file(c->g, path, &f->len);
			if (!d)
				return im_errf(c->err, IM_EXIT_IO, -EIO, "reading %s in the guest: %s",
					       path, gx_error(c->g));
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

/* ---- applying ---- */

static int append_chunks(guestfs_h *g, const char *path, const char *data, size_t len)
{
	for (size_t off = 0; off < len; off += WRITE_CHUNK) {
		size_t n = len - off < WRITE_CHUNK ? len - off : WRITE_CHUNK;
		if (guestfs_write_append(g, path, data + off, n) == -1)
			return -1;
	}
	return 0;
}

/* Keep path's current content as path.imager-orig unless one is there. */
static int keep_original(guestfs_h *g, const char *path, char *orig, size_t olen)
{
	snprintf(orig, olen, "%s.imager-orig", path);
	if (gx_exists(g, orig))
		return 0;
	return guestfs_cp_a(g, path, orig);
}

static int apply_one(struct conv_ctx *c, const struct conv_action *a)
{
	guestfs_h *g = c->g;
	char orig[4200], tmp[4200];

	switch (a->kind) {
	case ACT_WRITE:
		if (a->len <= WRITE_CHUNK)
			return guestfs_write(g, a->path, a->data, a->len);
		snprintf(tmp, sizeof(tmp), "%s.imager-new", a->path);
		if (guestfs_write(g, tmp, "", 0) == -1 || append_chunks(g, tmp, a->data, a->len) == -1)
			return -1;
		return guestfs_mv(g, tmp, a->path);
	case ACT_REMOVE:
		return guestfs_rm_f(g, a->path);
	case ACT_MKDIR:
		return guestfs_mkdir_p(g, a->path);
	case ACT_APPEND_INITRD: {
		static const char zeros[4];
		int64_t size;
		if (keep_original(g, a->path, orig, sizeof(orig)) == -1)
			return -1;
		snprintf(tmp, sizeof(tmp), "%s.imager-new", a->path);
		if ((size = guestfs_filesize(g, orig)) == -1 || guestfs_cp_a(g, orig, tmp) == -1)
			return -1;
		/* Each archive starts on a multiple of 4 bytes; the kernel skips
		 * the zeros between archives. */
		if ((size & 3) && guestfs_write_append(g, tmp, zeros, (size_t)(4 - (size & 3))) == -1)
			return -1;
		if (append_chunks(g, tmp, a->data, a->len) == -1)
			return -1;
		return guestfs_mv(g, tmp, a->path);
	}
	case ACT_UPLOAD:
		snprintf(tmp, sizeof(tmp), "%s.imager-new", a->path);
		if (guestfs_upload(g, a->data, tmp) == -1)
			return -1;
		return guestfs_mv(g, tmp, a->path);
	case ACT_REBUILD: {
		char *out;
		if (keep_original(g, a->path, orig, sizeof(orig)) == -1)
			return -1;
		if (!(out = guestfs_command(g, a->argv)))
			return -1;
		free(out);
		snprintf(tmp, sizeof(tmp), "%s.imager-new", a->path);
		return guestfs_mv(g, tmp, a->path);
	}
	}
	return -1;
}

static int apply_plan(struct conv_ctx *c)
{
	for (size_t i = 0; i < c->nacts; i++) {
		const struct conv_action *a = &c->acts[i];
		if (apply_one(c, a) == -1) {
			/* The report keeps what was done, and names what failed. */
			struct conv_report *r = c->rep;
			int rc = im_errf(c->err, IM_EXIT_IO, -EIO, "%s %s: %s",
					 r->changes[a->change].action, a->path, gx_error(c->g));
			for (size_t k = a->change; k < r->nchanges; k++) {
				free(r->changes[k].path);
				free(r->changes[k].action);
				free(r->changes[k].detail);
			}
			r->nchanges = a->change;
			return rc;
		}
	}
	if (guestfs_sync(c->g) == -1)
		return im_errf(c->err, IM_EXIT_IO, -EIO, "sync: %s", gx_error(c->g));
	return 0;
}

/* ---- inspection ---- */

static int cmp_mountpoint(const void *a, const void *b)
{
	const char *const *x = a, *const *y = b;
	size_t lx = strlen(x[0]), ly = strlen(y[0]);
	return lx < ly ? -1 : lx > ly ? 1 : strcmp(x[0], y[0]);
}

/* Mount the guest's filesystems as its fstab does, shortest mount point
 * first.  The root must mount; others that fail are left out (reported).
 * Read-only while inspecting and planning: even mounting an ext4 read-write
 * writes its superblock, and a refused guest must keep every byte. */
static int mount_guest(struct conv_ctx *c, const char *root, bool ro)
{
	char **mp = guestfs_inspect_get_mountpoints(c->g, root);
	size_t n = 0;
	int rc = 0;

	if (!mp)
		return im_errf(c->err, IM_EXIT_IO, -EIO, "inspection: %s", gx_error(c->g));
	while (mp[n])
		n++;
	qsort(mp, n / 2, 2 * sizeof(char *), cmp_mountpoint);
	for (size_t i = 0; i + 1 < n; i += 2) {
		bool is_root = !strcmp(mp[i], "/");
		int m = ro ? guestfs_mount_ro(c->g, mp[i + 1], mp[i]) : guestfs_mount(c->g, mp[i + 1], mp[i]);
		if (m == -1) {
			if (is_root) {
				rc = im_errf(c->err, IM_EXIT_IO, -EIO, "mounting the root %s: %s",
					     mp[i + 1], gx_error(c->g));
				break;
			}
			if (ro)
				conv_change(c, mp[i], "note", "%s could not be mounted (%s): left as it is",
					    mp[i + 1], gx_error(c->g));
		}
	}
	free_strings(mp);
	return rc;
}

void copy_str(char *dst, size_t len, char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
	free(src);
}

int im_convert(const char *const *disks, const char *const *formats, size_t n,
	       const struct conv_opts *o, struct conv_report *rep, struct im_err *err)
{
	struct conv_ctx c = { .o = o, .rep = rep, .err = err };
	struct timespec t0, t1;
	char **roots = NULL;
	char *settings;
	int r;

	memset(rep, 0, sizeof(*rep));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rep->dry_run = o->dry_run;
	snprintf(rep->block, sizeof(rep->block), "%s", conv_block_name(o->block));
	snprintf(rep->method, sizeof(rep->method), "%s", o->rebuild_initramfs ? "rebuild" : "append");
	/* A virtio-win named by the user that is none is refused before the
	 * appliance costs its launch (a Linux guest would ignore it; a typo
	 * still deserves the message). */
	if (o->virtio_win && *o->virtio_win)
		FORWARD_ERR(vw_check(o->virtio_win, err));
	if (o->phase)
		o->phase(o->opaque, "launching the appliance");
	FORWARD_ERR(guest_open(disks, formats, n, o->dry_run, &c.g, err));
	settings = guestfs_get_backend_setting(c.g, "force_tcg");
	snprintf(rep->accel, sizeof(rep->accel), "%s", settings ? "tcg" : "kvm");
	free(settings);

	if (o->phase)
		o->phase(o->opaque, "inspecting");
	c.devices = guestfs_list_devices(c.g);
	roots = guestfs_inspect_os(c.g);
	if (!c.devices || !roots) {
		/* libguestfs reads Windows' hives while inspecting; a damaged hive
		 * ends inspection with hivex's exception. */
		if (!roots && strstr(gx_error(c.g), "Hivex"))
			r = im_errf(err, IM_EXIT_DAMAGED, -EUCLEAN,
				    "a Windows registry hive on the disk is damaged (inspection: %s); "
				    "nothing changed", gx_error(c.g));
		else
			r = im_errf(err, IM_EXIT_IO, -EIO, "inspection: %s", gx_error(c.g));
		goto out;
	}
	while (c.devices[c.ndevices])
		c.ndevices++;
	if (!roots[0]) {
		r = im_errf(err, IM_EXIT_UNSUPP, -ENOENT,
			    "no operating system found on the disk%s: nothing converted",
			    n > 1 ? "s" : "");
		goto out;
	}
	if (roots[1]) {
		r = im_errf(err, IM_EXIT_UNSUPP, -EOPNOTSUPP,
			    "several operating systems (%s and %s): multi-boot guests are not "
			    "converted; nothing changed", roots[0], roots[1]);
		goto out;
	}
	snprintf(rep->root, sizeof(rep->root), "%s", roots[0]);
	copy_str(rep->os_type, sizeof(rep->os_type), guestfs_inspect_get_type(c.g, roots[0]));
	copy_str(rep->distro, sizeof(rep->distro), guestfs_inspect_get_distro(c.g, roots[0]));
	copy_str(rep->product, sizeof(rep->product), guestfs_inspect_get_product_name(c.g, roots[0]));
	copy_str(rep->arch, sizeof(rep->arch), guestfs_inspect_get_arch(c.g, roots[0]));
	rep->major = guestfs_inspect_get_major_version(c.g, roots[0]);
	rep->minor = guestfs_inspect_get_minor_version(c.g, roots[0]);
	if (strcmp(rep->os_type, "linux") && strcmp(rep->os_type, "windows")) {
		r = im_errf(err, IM_EXIT_UNSUPP, -EOPNOTSUPP,
			    "the guest is %s (%s): only Linux and Windows guests are converted; "
			    "nothing changed", rep->os_type, rep->product);
		goto out;
	}
	if ((r = mount_guest(&c, roots[0], true)) < 0)
		goto out;
	if (!strcmp(rep->os_type, "windows"))
		r = conv_windows_plan(&c, roots[0]);
	else
		r = conv_linux_plan(&c, roots[0]);
	if (r < 0)
		goto out;
	if (!o->dry_run && c.nacts) {
		if (o->phase)
			o->phase(o->opaque, "applying");
		if (guestfs_umount_all(c.g) == -1) {
			r = im_errf(err, IM_EXIT_IO, -EIO, "unmounting: %s", gx_error(c.g));
			goto out;
		}
		if ((r = mount_guest(&c, roots[0], false)) < 0 || (r = apply_plan(&c)) < 0)
			goto out;
	}
	if (guestfs_umount_all(c.g) == -1 || (!o->dry_run && guestfs_shutdown(c.g) == -1)) {
		r = im_errf(err, IM_EXIT_IO, -EIO, "closing the guest's disks: %s", gx_error(c.g));
		goto out;
	}
	r = 0;
out:
	if (c.g)
		guest_close(c.g);
	conv_windows_free(&c);
	free_strings(roots);
	free_strings(c.devices);
	for (size_t i = 0; i < c.nacts; i++) {
		free(c.acts[i].path);
		free(c.acts[i].data);
		strv_free(c.acts[i].argv, c.acts[i].argc);
	}
	free(c.acts);
	for (size_t i = 0; i < c.nfiles; i++) {
		free(c.files[i].path);
		free(c.files[i].data);
	}
	free(c.files);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	rep->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	return r;
}

void conv_report_free(struct conv_report *rep)
{
	for (size_t i = 0; i < rep->nchanges; i++) {
		free(rep->changes[i].path);
		free(rep->changes[i].action);
		free(rep->changes[i].detail);
	}
	free(rep->changes);
	free(rep->kernels);
	rep->changes = NULL;
	rep->kernels = NULL;
	rep->nchanges = rep->nkernels = 0;
}
