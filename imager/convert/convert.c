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

/* cp -a, or a plain cp where the filesystem keeps no owner or mode (an
 * ESP's FAT refuses cp -a's chmod). */
static int copy_file(guestfs_h *g, const char *from, const char *to)
{
	if (guestfs_cp_a(g, from, to) == 0)
		return 0;
	return guestfs_cp(g, from, to);
}

/* Keep path's current content as path.imager-orig unless one is there. */
static int keep_original(guestfs_h *g, const char *path, char *orig, size_t olen)
{
	snprintf(orig, olen, "%s.imager-orig", path);
	if (gx_exists(g, orig))
		return 0;
	return copy_file(g, path, orig);
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
		if ((size = guestfs_filesize(g, orig)) == -1 || copy_file(g, orig, tmp) == -1)
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
static int mount_guest(struct conv_ctx *c, char **mp, bool ro)
{
	size_t n = 0;
	int rc = 0;

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
	return rc;
}


/* The mount points in the report (mps sorted by mount_guest). */
static int report_mounts(struct conv_ctx *c, char **mps)
{
	size_t n = 0;

	while (mps[2 * n] && mps[2 * n + 1])
		n++;
	if (n && !(c->rep->mounts = calloc(n, sizeof(*c->rep->mounts))))
		return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		snprintf(c->rep->mounts[i].path, sizeof(c->rep->mounts[i].path), "%s", mps[2 * i]);
		snprintf(c->rep->mounts[i].device, sizeof(c->rep->mounts[i].device), "%s",
			 mps[2 * i + 1]);
	}
	c->rep->nmounts = n;
	return 0;
}

/* The converters, in the order they are asked (each matches one kind of
 * guest, so the order only matters to a reader: Windows, then Linux). */
static const struct converter *const converters[] = { &conv_windows, &conv_linux };

static const struct converter *converter_for(const struct conv_report *rep)
{
	for (size_t i = 0; i < sizeof(converters) / sizeof(converters[0]); i++)
		if (converters[i]->matches(rep))
			return converters[i];
	return NULL;
}

/* Launch the appliance over the disks (after what can be refused first). */
static int open_guest(struct conv_ctx *c, const char *const *disks, const char *const *formats,
		      size_t n)
{
	const struct conv_opts *o = c->o;
	char *settings;

	/* A virtio-win named by the user that is none is refused before the
	 * appliance costs its launch (a Linux guest would ignore it; a typo
	 * still deserves the message). */
	if (o->virtio_win && *o->virtio_win)
		FORWARD_ERR(vw_check(o->virtio_win, c->err));
	if (o->phase)
		o->phase(o->opaque, "launching the appliance");
	/* LUKS2 volumes made on a large machine ask for up to 1 GiB of memory
	 * (argon2id) to open: the appliance gets room for that and itself. */
	FORWARD_ERR(guest_open(disks, formats, n, o->dry_run, o->nkeys ? CONV_KEY_MEMSIZE_MB : 0, &c->g,
			       c->err));
	settings = guestfs_get_backend_setting(c->g, "force_tcg");
	snprintf(c->rep->accel, sizeof(c->rep->accel), "%s", settings ? "tcg" : "kvm");
	free(settings);
	return 0;
}

/* Inspection: one operating system (*roots, a malloc'ed list of one), its
 * mount points (*mps: mount point, device, ..., NULL) and the facts of the
 * report.  The quick inspection first; libguestfs's own when it cannot
 * tell. */
static int inspect_guest(struct conv_ctx *c, size_t ndisks, char ***roots, char ***mps)
{
	struct conv_report *rep = c->rep;
	char **r, *root;
	int q;

	if (c->o->phase)
		c->o->phase(c->o->opaque, "inspecting");
	if (!(c->devices = guestfs_list_devices(c->g)))
		return im_errf(c->err, IM_EXIT_IO, -EIO, "inspection: %s", gx_error(c->g));
	while (c->devices[c->ndevices])
		c->ndevices++;
	FORWARD_ERR(conv_unlock(c));
	if ((q = conv_quick_inspect(c, &root, mps)) < 0)
		return q;
	if (q == 1) {
		if (!(*roots = calloc(2, sizeof(char *)))) {
			free(root);
			return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		}
		(*roots)[0] = root;
		snprintf(rep->root, sizeof(rep->root), "%s", root);
		snprintf(rep->inspection, sizeof(rep->inspection), "quick");
		return 0;
	}
	snprintf(rep->inspection, sizeof(rep->inspection), "libguestfs");
	r = *roots = guestfs_inspect_os(c->g);
	if (!r) {
		/* libguestfs reads Windows' hives while inspecting; a damaged hive
		 * ends inspection with hivex's exception. */
		if (strstr(gx_error(c->g), "Hivex"))
			return im_errf(c->err, IM_EXIT_DAMAGED, -EUCLEAN,
				       "a Windows registry hive on the disk is damaged (inspection: %s); "
				       "nothing changed", gx_error(c->g));
		return im_errf(c->err, IM_EXIT_IO, -EIO, "inspection: %s", gx_error(c->g));
	}
	if (!r[0])
		FORWARD_ERR(conv_locked_refusal(c));
	if (!r[0])
		return im_errf(c->err, IM_EXIT_UNSUPP, -ENOENT,
			       "no operating system found on the disk%s: nothing converted",
			       ndisks > 1 ? "s" : "");
	if (r[1])
		return im_errf(c->err, IM_EXIT_UNSUPP, -EOPNOTSUPP,
			       "several operating systems (%s and %s): multi-boot guests are not "
			       "converted; nothing changed", r[0], r[1]);
	snprintf(rep->root, sizeof(rep->root), "%s", r[0]);
	conv_copy_str(rep->os_type, sizeof(rep->os_type), guestfs_inspect_get_type(c->g, r[0]));
	conv_copy_str(rep->distro, sizeof(rep->distro), guestfs_inspect_get_distro(c->g, r[0]));
	conv_copy_str(rep->product, sizeof(rep->product), guestfs_inspect_get_product_name(c->g, r[0]));
	conv_copy_str(rep->arch, sizeof(rep->arch), guestfs_inspect_get_arch(c->g, r[0]));
	rep->major = guestfs_inspect_get_major_version(c->g, r[0]);
	rep->minor = guestfs_inspect_get_minor_version(c->g, r[0]);
	if (!(*mps = guestfs_inspect_get_mountpoints(c->g, r[0])))
		return im_errf(c->err, IM_EXIT_IO, -EIO, "inspection: %s", gx_error(c->g));
	return 0;
}

/* The plan, applied on a read-write mount (not for a dry run), then the
 * disks closed so that the writes are on them. */
static int apply_and_close(struct conv_ctx *c, const struct converter *cv, char **mps)
{
	const struct conv_opts *o = c->o;

	if (!o->dry_run && c->nacts) {
		if (o->phase)
			o->phase(o->opaque, "applying");
		if (guestfs_umount_all(c->g) == -1)
			return im_errf(c->err, IM_EXIT_IO, -EIO, "unmounting: %s", gx_error(c->g));
		FORWARD_ERR(mount_guest(c, mps, false));
		FORWARD_ERR(cv->apply ? cv->apply(c) : apply_plan(c));
	}
	if (guestfs_umount_all(c->g) == -1 || (!o->dry_run && guestfs_shutdown(c->g) == -1))
		return im_errf(c->err, IM_EXIT_IO, -EIO, "closing the guest's disks: %s",
			       gx_error(c->g));
	return 0;
}

static void ctx_free(struct conv_ctx *c, const struct converter *cv)
{
	if (c->g)
		guest_close(c->g);
	if (cv && cv->free)
		cv->free(c);
	gx_strings_free(c->devices);
	for (size_t i = 0; i < c->nacts; i++) {
		free(c->acts[i].path);
		free(c->acts[i].data);
		strv_free(c->acts[i].argv, c->acts[i].argc);
	}
	free(c->acts);
	for (size_t i = 0; i < c->nfiles; i++) {
		free(c->files[i].path);
		free(c->files[i].data);
	}
	free(c->files);
}

int im_convert(const char *const *disks, const char *const *formats, size_t n,
	       const struct conv_opts *o, struct conv_report *rep, struct im_err *err)
{
	struct conv_ctx c = { .o = o, .rep = rep, .err = err };
	const struct converter *cv = NULL;
	struct timespec t0, t1;
	char **roots = NULL, **mps = NULL;
	int r;

	memset(rep, 0, sizeof(*rep));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rep->dry_run = o->dry_run;
	snprintf(rep->block, sizeof(rep->block), "%s", conv_block_name(o->block));
	snprintf(rep->method, sizeof(rep->method), "%s", o->rebuild_initramfs ? "rebuild" : "append");
	FORWARD_ERR(open_guest(&c, disks, formats, n));
	if ((r = inspect_guest(&c, n, &roots, &mps)) < 0)
		goto out;
	if (!(cv = converter_for(rep))) {
		r = im_errf(err, IM_EXIT_UNSUPP, -EOPNOTSUPP,
			    "the guest is %s (%s): only Linux and Windows guests are converted; "
			    "nothing changed", rep->os_type, rep->product);
		goto out;
	}
	if ((r = mount_guest(&c, mps, true)) < 0 || (r = report_mounts(&c, mps)) < 0)
		goto out;
	if (!rep->arch[0])
		conv_guess_arch(&c);
	if ((r = cv->plan(&c, roots[0])) < 0)
		goto out;
	r = apply_and_close(&c, cv, mps);
out:
	ctx_free(&c, cv);
	gx_strings_free(roots);
	gx_strings_free(mps);
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
	free(rep->mounts);
	rep->changes = NULL;
	rep->kernels = NULL;
	rep->mounts = NULL;
	rep->nchanges = rep->nkernels = rep->nmounts = 0;
}
