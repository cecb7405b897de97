/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Browsing an image folder's filesystems through one libguestfs appliance
 * over its NBD export.  Contract in include/imager/browse.h.
 */
#include "imager/browse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert-int.h"
#include "imager/guest.h"

struct browse {
	guestfs_h *g;
	struct browse_fs *fs;
	size_t n;
};

static int gerr(struct browse *b)
{
	int e = guestfs_last_errno(b->g);

	return e > 0 ? -e : -EIO;
}

static bool mountable(const char *type)
{
	static const char *const no[] = { "", "swap", "LVM2_member", "crypto_LUKS", "unknown",
					   "linux_raid_member", "BitLocker" };

	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (!strcmp(type, no[i]))
			return false;
	return true;
}

/* One filesystem of the appliance's device dev, named name. */
static int add_fs(struct browse *b, const char *dev, const char *name, struct im_err *err)
{
	struct browse_fs *f, *grown = realloc(b->fs, (b->n + 1) * sizeof(*b->fs));
	int64_t size;

	if (!grown)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	b->fs = grown;
	f = &b->fs[b->n++];
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	snprintf(f->device, sizeof(f->device), "%s", dev);
	conv_copy_str(f->type, sizeof(f->type), guestfs_vfs_type(b->g, dev));
	if (f->type[0] && strcmp(f->type, "swap") && strcmp(f->type, "LVM2_member"))
		conv_copy_str(f->label, sizeof(f->label), guestfs_vfs_label(b->g, dev));
	size = guestfs_blockdev_getsize64(b->g, dev);
	f->size = size > 0 ? (uint64_t)size : 0;
	f->mountable = mountable(f->type);
	return 0;
}

static int list_all(struct browse *b, struct im_err *err)
{
	char **parts = guestfs_list_partitions(b->g), **lvs = NULL;
	char name[160];
	int r = 0;

	if (!parts)
		return im_errf(err, IM_EXIT_IO, gerr(b), "listing the partitions: %s", gx_error(b->g));
	for (size_t i = 0; r == 0 && parts[i]; i++) {
		int num = guestfs_part_to_partnum(b->g, parts[i]);
		if (num <= 0)
			continue;
		snprintf(name, sizeof(name), "%d", num);
		r = add_fs(b, parts[i], name, err);
	}
	if (r == 0 && b->n == 0)
		r = add_fs(b, "/dev/sda", "0", err);   /* no table: the disk is one filesystem */
	gx_strings_free(parts);
	if (r == 0 && guestfs_feature_available(b->g, (char *[]){ "lvm2", NULL }) == 1)
		lvs = guestfs_lvs(b->g);
	for (size_t i = 0; r == 0 && lvs && lvs[i]; i++) {
		/* /dev/VG/LV */
		if (strncmp(lvs[i], "/dev/", 5) || !strchr(lvs[i] + 5, '/'))
			continue;
		r = add_fs(b, lvs[i], lvs[i] + 5, err);
	}
	gx_strings_free(lvs);
	return r;
}

int browse_open(const char *socket, struct browse **out, struct im_err *err)
{
	struct browse *b = calloc(1, sizeof(*b));
	int r;

	*out = NULL;
	if (!b)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = guest_open_nbd(socket, &b->g, err);
	if (r == 0)
		r = list_all(b, err);
	if (r < 0) {
		browse_close(b);
		return r;
	}
	*out = b;
	return 0;
}

void browse_close(struct browse *b)
{
	if (!b)
		return;
	if (b->g)
		(void)guestfs_umount_all(b->g);
	guest_close(b->g);
	free(b->fs);
	free(b);
}

size_t browse_count(const struct browse *b)
{
	return b->n;
}

const struct browse_fs *browse_at(const struct browse *b, size_t i)
{
	return i < b->n ? &b->fs[i] : NULL;
}

const struct browse_fs *browse_find(const struct browse *b, const char *name, struct im_err *err)
{
	char names[300] = "";
	size_t used = 0;

	for (size_t i = 0; i < b->n; i++)
		if (!strcmp(b->fs[i].name, name))
			return &b->fs[i];
	for (size_t i = 0; i < b->n && used < sizeof(names) - 1; i++)
		used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
					 b->fs[i].name);
	im_errf(err, IM_EXIT_USAGE, -ENOENT, "the image has no partition or logical volume %s "
		"(there are: %s)", name, names[0] ? names : "none");
	return NULL;
}

int browse_mount(struct browse *b, const char *name, const char *at, struct im_err *err)
{
	const struct browse_fs *f = browse_find(b, name, err);

	if (!f)
		return err->code ? err->code : -ENOENT;
	if (!f->mountable)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "%s holds %s, no filesystem to browse%s",
			       name, f->type[0] ? f->type : "no filesystem known",
			       !strcmp(f->type, "LVM2_member") ?
			       " (an LVM physical volume: name its logical volumes, VG/LV)" : "");
	if (guestfs_mount_options(b->g, !strcmp(f->type, "btrfs") ? "ro,subvolid=5" : "ro",
				  f->device, at) == -1)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "%s (%s): the appliance cannot mount "
			       "it: %s", name, f->type, gx_error(b->g));
	return 0;
}

int browse_mount_points(struct browse *b, struct im_err *err)
{
	char path[200];

	for (size_t i = 0; i < b->n; i++) {
		const char *slash = strchr(b->fs[i].name, '/');
		if (!b->fs[i].mountable)
			continue;
		if (slash) {   /* VG/LV: /VG first (once) */
			snprintf(path, sizeof(path), "/%.*s", (int)(slash - b->fs[i].name),
				 b->fs[i].name);
			if (guestfs_is_dir(b->g, path) != 1 && guestfs_mkmountpoint(b->g, path) == -1)
				return im_errf(err, IM_EXIT_IO, gerr(b), "%s: %s", path, gx_error(b->g));
		}
		snprintf(path, sizeof(path), "/%s", b->fs[i].name);
		if (guestfs_mkmountpoint(b->g, path) == -1)
			return im_errf(err, IM_EXIT_IO, gerr(b), "%s: %s", path, gx_error(b->g));
	}
	return 0;
}

/* ---- files ---- */

static char type_of(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return '-';
	case S_IFDIR: return 'd';
	case S_IFLNK: return 'l';
	case S_IFCHR: return 'c';
	case S_IFBLK: return 'b';
	case S_IFIFO: return 'p';
	case S_IFSOCK: return 's';
	default: return '?';
	}
}

static void fill(struct browse_entry *e, const char *name, const struct guestfs_statns *st)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->mode = (uint32_t)st->st_mode;
	e->type = type_of(e->mode);
	e->size = (uint64_t)st->st_size;
	e->nlink = (uint64_t)st->st_nlink;
	e->uid = (uint64_t)st->st_uid;
	e->gid = (uint64_t)st->st_gid;
	e->mtime = st->st_mtime_sec;
}

/* path's lstat; -ENOENT (IM_EXIT_SOURCE) when it is not there. */
static int stat_path(struct browse *b, const char *path, struct guestfs_statns **st,
		     struct im_err *err)
{
	*st = guestfs_lstatns(b->g, path);
	if (*st)
		return 0;
	int e = gerr(b);
	if (e == -ENOENT || e == -ENOTDIR)
		return im_errf(err, IM_EXIT_SOURCE, -ENOENT, "%s: no such file or folder", path);
	return im_errf(err, IM_EXIT_IO, e, "%s: %s", path, gx_error(b->g));
}

int browse_list(struct browse *b, const char *path, bool *is_dir, browse_entry_fn cb,
		void *opaque, struct im_err *err)
{
	struct guestfs_statns *st;
	struct guestfs_statns_list *sts = NULL;
	struct browse_entry e;
	char **names = NULL, **links = NULL;
	int r;

	FORWARD_ERR(stat_path(b, path, &st, err));
	bool dir = S_ISDIR(st->st_mode);
	if (is_dir)
		*is_dir = dir;
	if (!dir) {
		const char *base = strrchr(path, '/');
		fill(&e, base && base[1] ? base + 1 : path, st);
		if (e.type == 'l')
			conv_copy_str(e.target, sizeof(e.target), guestfs_readlink(b->g, path));
		guestfs_free_statns(st);
		return cb(opaque, &e);
	}
	guestfs_free_statns(st);
	names = guestfs_ls(b->g, path);
	if (!names)
		return im_errf(err, IM_EXIT_IO, gerr(b), "%s: %s", path, gx_error(b->g));
	r = 0;
	if (names[0]) {
		sts = guestfs_lstatnslist(b->g, path, names);
		links = guestfs_readlinklist(b->g, path, names);
		if (!sts || !links)
			r = im_errf(err, IM_EXIT_IO, gerr(b), "%s: %s", path, gx_error(b->g));
	}
	for (size_t i = 0; r == 0 && names[i]; i++) {
		if (i >= sts->len)
			break;
		fill(&e, names[i], &sts->val[i]);
		if (e.type == 'l' && links[i])
			snprintf(e.target, sizeof(e.target), "%s", links[i]);
		r = cb(opaque, &e);
	}
	if (sts)
		guestfs_free_statns_list(sts);
	gx_strings_free(links);
	gx_strings_free(names);
	return r;
}

/* The file path (not a folder) onto fd. */
static int download(struct browse *b, const char *path, int fd, struct im_err *err)
{
	char to[40];

	snprintf(to, sizeof(to), "/dev/fd/%d", fd);
	if (guestfs_download(b->g, path, to) == -1)
		return im_errf(err, IM_EXIT_IO, gerr(b), "%s: %s", path, gx_error(b->g));
	return 0;
}

int browse_cat(struct browse *b, const char *path, int fd, struct im_err *err)
{
	struct guestfs_statns *st;

	FORWARD_ERR(stat_path(b, path, &st, err));
	bool dir = S_ISDIR(st->st_mode);
	guestfs_free_statns(st);
	/* (a symlink to a folder: is_dir follows it) */
	if (dir || guestfs_is_dir(b->g, path) == 1)
		return im_errf(err, IM_EXIT_USAGE, -EISDIR, "%s is a folder: ls lists it, get "
			       "copies it out", path);
	return download(b, path, fd, err);
}

int browse_get(struct browse *b, const char *path, const char *dest, struct im_err *err)
{
	struct guestfs_statns *st;
	struct stat ds;
	char target[4200];
	const char *base = strrchr(path, '/');
	int fd, r;

	FORWARD_ERR(stat_path(b, path, &st, err));
	bool dir = S_ISDIR(st->st_mode) || guestfs_is_dir(b->g, path) == 1;
	guestfs_free_statns(st);
	base = base && base[1] ? base + 1 : NULL;
	bool dest_dir = stat(dest, &ds) == 0 && S_ISDIR(ds.st_mode);
	if (dir) {
		RETURN_IF(!dest_dir, err, IM_EXIT_TARGET, -ENOTDIR,
			  "%s: a folder is copied into an existing folder, and %s is none", path, dest);
		snprintf(target, sizeof(target), "%s/%s", dest, base ? base : "");
		RETURN_IF(base && lstat(target, &ds) == 0, err, IM_EXIT_TARGET, -EEXIST,
			  "%s already exists: not replaced", target);
		if (guestfs_copy_out(b->g, path, dest) == -1)
			return im_errf(err, IM_EXIT_IO, gerr(b), "%s: %s", path, gx_error(b->g));
		return 0;
	}
	if (dest_dir)
		snprintf(target, sizeof(target), "%s/%s", dest, base ? base : "file");
	else
		snprintf(target, sizeof(target), "%s", dest);
	fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return im_errf(err, IM_EXIT_TARGET, -errno, "%s: %s%s", target, strerror(errno),
			       errno == EEXIST ? " (not replaced)" : "");
	r = download(b, path, fd, err);
	if (close(fd) < 0 && r == 0)
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", target, strerror(errno));
	if (r < 0)
		unlink(target);
	return r;
}

int browse_fuse(struct browse *b, const char *mountpoint, void (*ready)(void *), void *opaque,
		struct im_err *err)
{
	if (guestfs_mount_local(b->g, mountpoint, GUESTFS_MOUNT_LOCAL_READONLY, 1, -1) == -1)
		return im_errf(err, IM_EXIT_TARGET, gerr(b), "%s: cannot mount it (FUSE): %s",
			       mountpoint, gx_error(b->g));
	ready(opaque);
	if (guestfs_mount_local_run(b->g) == -1)
		return im_errf(err, IM_EXIT_IO, gerr(b), "%s: %s", mountpoint, gx_error(b->g));
	return 0;
}
