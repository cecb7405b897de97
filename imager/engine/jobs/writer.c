/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The target side of restore and clone.  The partition table and the first
 * HEAD_ZONE bytes of every partition (where superblocks live) are held back
 * and written last, so that an interrupted job never leaves a target that
 * looks like a complete disk.
 */
#include "writer.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define HEAD_ZONE (64u << 10)

/* The job's hold on the target (lock.c): a second job writing it is
 * refused with this one's PID. */
static int lock_target(struct writer *w, const char *path, bool force, struct im_err *err)
{
	struct path_lock l;
	pid_t holder;
	int r = path_lock(&l, path, !force, &holder);

	if (r < 0)
		return path_lock_err(err, path, r, holder);
	w->locked = true;
	w->lock_fd = l.fd;
	struct stat st;
	if (fstat(l.fd, &st) == 0) {
		w->dev = st.st_dev;
		w->ino = st.st_ino;
	}
	return 0;
}

/* Is path still the target the job locked (not deleted, moved away or
 * replaced by another file meanwhile)?  true when it cannot be told (no
 * lock). */
static bool same_target(const struct writer *w, const char *path)
{
	struct stat st;

	if (!w->locked || !w->ino)
		return true;
	return stat(path, &st) == 0 && st.st_dev == w->dev && st.st_ino == w->ino;
}

/* Before the table goes on: a target deleted, moved or replaced while the
 * job ran would take the result with it, or get someone else's file a
 * table.  Refused, and nothing more is written. */
static int target_still_there(const struct writer *w, struct im_err *err)
{
	struct stat st;

	if (same_target(w, w->tgt->name))
		return 0;
	if (fstat(w->lock_fd, &st) == 0 && st.st_nlink == 0 && !S_ISBLK(st.st_mode))
		return im_errf(err, IM_EXIT_IO, -ENOENT,
			       "%s was deleted while the job ran: the copy is lost, and no table "
			       "was written", w->tgt->name);
	return im_errf(err, IM_EXIT_IO, -ESTALE,
		       "%s vanished or was replaced while the job ran (moved, renamed, or the "
		       "device removed): the job stops before writing the table, and leaves "
		       "what is at that path alone", w->tgt->name);
}

/* Free bytes (for unprivileged users) on the filesystem of the folder
 * holding path; false when unknown. */
static bool free_of_dir(const char *path, uint64_t *free_b)
{
	char dir[600];
	struct statvfs vf;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	if (statvfs(dir, &vf) < 0)
		return false;
	*free_b = (uint64_t)vf.f_bavail * vf.f_frsize;
	return true;
}

/* A new file's preallocation did not fit (the backend removed it). */
static int no_room_to_create(const char *path, const struct bk_create_opts *co, struct im_err *err)
{
	char n[32], f[32] = "?";
	uint64_t free_b;

	if (free_of_dir(path, &free_b))
		util_human_size(free_b, f, sizeof(f));
	util_human_size(co->size, n, sizeof(n));
	if (err)
		err->exit_class = 0;   /* (this says more than the backend's) */
	return im_errf(err, IM_EXIT_IO, -ENOSPC,
		       "%s: not enough room on its filesystem: --preallocation %s takes %s, %s is free; "
		       "nothing was kept", path, bk_prealloc_name(co->prealloc), n, f);
}

static int open_target(struct writer *w, const struct disk_roots *roots, const char *target,
		       const struct target_opts *o, struct im_err *err)
{
	struct bk_create_opts co = { .size = w->source_size, .prealloc = o->prealloc,
				     .cluster_size = o->cluster_size, .net = o->net };
	struct disk_ref ref;
	char what[400];
	int r;

	if (o->size) {
		if (o->size < w->source_size)
			return im_errf(err, IM_EXIT_TARGET, -ENOSPC,
				       "--size %llu is smaller than the source disk (%llu bytes)",
				       (unsigned long long)o->size, (unsigned long long)w->source_size);
		co.size = (o->size + 511) / 512 * 512;
	}
	if (bk_is_uri(target)) {
		if (str_copy(w->info.path, sizeof(w->info.path), target) < 0)
			return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG,
				       "%s: URI too long (imager takes up to %zu bytes)", target,
				       sizeof(w->info.path) - 1);
		return bk_create(target, "nbd", &co, &w->tgt, err);
	}
	r = disk_resolve(roots, target, &ref, err);
	if (r < 0)
		return r;
	snprintf(w->info.path, sizeof(w->info.path), "%s", ref.path);
	w->info.block_device = ref.kind == DISK_KIND_BLOCK;
	snprintf(w->info.disk_name, sizeof(w->info.disk_name), "%s", ref.name);
	if (!ref.exists && ref.under_dev)
		return im_errf(err, IM_EXIT_TARGET, -ENODEV, "%s: no such device", ref.path);
	if (!ref.exists) {
		/* (O_CREAT | O_EXCL: a second job cannot create it too) */
		r = bk_create(ref.path, o->format, &co, &w->tgt, err);
		w->created = r == 0;
		if (r == -ENOSPC)
			return no_room_to_create(ref.path, &co, err);
		return r == 0 ? lock_target(w, ref.path, o->force, err) : r;
	}
	if (o->size)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "--size applies to new image files; %s exists", ref.path);
	if (ref.kind != DISK_KIND_FILE) {
		if (o->format && strcmp(o->format, "raw"))
			return im_errf(err, IM_EXIT_USAGE, -EINVAL,
				       "%s is a block device: it holds raw data, not %s", ref.path,
				       o->format);
		if (ref.size < w->source_size)
			return im_errf(err, IM_EXIT_TARGET, -ENOSPC,
				       "%s is too small: %llu bytes, the source disk has %llu", ref.path,
				       (unsigned long long)ref.size, (unsigned long long)w->source_size);
		if (ref.kind == DISK_KIND_PARTITION && strcmp(w->table, "none"))
			return im_errf(err, IM_EXIT_TARGET, -EINVAL,
				       "%s is a partition, but the source is a whole disk with a %s table",
				       ref.path, w->table);
		pid_t job = path_lock_holder(ref.path);
		if (job > 0)   /* (--force or not) */
			return path_lock_err(err, ref.path, -EBUSY, job);
		r = disk_in_use(roots, ref.path, what, sizeof(what));
		if (r > 0 && !o->force)
			return im_errf(err, IM_EXIT_TARGET, -EBUSY,
				       "%s is in use (%s); unmount it first, or --force", ref.path, what);
		if ((r = lock_target(w, ref.path, o->force, err)) < 0)
			return r;
		return bk_create(ref.path, "raw", &co, &w->tgt, err);
	}
	/* An existing image file is written in place. */
	if ((r = lock_target(w, ref.path, o->force, err)) < 0)
		return r;
	r = bk_open(ref.path, o->format, BK_OPEN_WRITE, &o->net, &w->tgt, err);
	if (r < 0)
		return r;
	if (w->tgt->size < w->source_size) {
		r = im_errf(err, IM_EXIT_TARGET, -ENOSPC,
			    "%s is too small: %llu bytes, the source disk has %llu", ref.path,
			    (unsigned long long)w->tgt->size, (unsigned long long)w->source_size);
		bk_close(w->tgt, err);
		w->tgt = NULL;
	}
	return r;
}

int writer_target_size(const struct disk_roots *roots, const char *target,
		       const struct target_opts *o, uint64_t source_size, uint64_t *size,
		       struct im_err *err)
{
	struct disk_ref ref;
	struct bk *b;
	int r;

	*size = source_size;
	if (o->size) {
		*size = (o->size + 511) / 512 * 512;
		return 0;
	}
	if (bk_is_uri(target))
		return 0;   /* the export's size is checked when it is opened */
	r = disk_resolve(roots, target, &ref, err);
	if (r < 0 || !ref.exists)
		return r;
	if (ref.kind != DISK_KIND_FILE) {
		*size = ref.size;
		return 0;
	}
	r = bk_open(ref.path, o->format, 0, &o->net, &b, err);
	if (r < 0)
		return r;
	*size = b->size;
	return bk_close(b, err);
}


static int writer_open(struct writer *w, const struct disk_roots *roots, const char *target,
		       const struct disk_plan *pl, const struct target_opts *o, struct im_err *err)
{
	int r;

	memset(w, 0, sizeof(*w));
	/* (An explicit layout: the target is checked against its disk.) */
	w->source_size = o->layout ? o->layout_disk : pl->disk_size;
	w->lss = pl->lss;
	w->nparts = pl->nparts;
	snprintf(w->table, sizeof(w->table), "%s", pl->table);
	w->part_start = calloc(pl->nparts + 1, sizeof(uint64_t));
	w->part_head = calloc(pl->nparts + 1, sizeof(uint64_t));
	w->heads = calloc(pl->nparts + 1, sizeof(*w->heads));
	if (!w->part_start || !w->part_head || !w->heads)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	for (size_t i = 0; i < pl->nparts; i++) {
		uint64_t size = pl->parts[i].old_size;
		w->part_start[i] = pl->parts[i].old_start;
		for (size_t k = 0; k < o->nlayout; k++)
			if (o->layout[k].number == pl->parts[i].number)
				w->part_start[i] = o->layout[k].new_start;
		w->part_head[i] = size < HEAD_ZONE ? size : HEAD_ZONE;
		if (!(w->heads[i] = calloc(1, HEAD_ZONE)))
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	w->roots = roots;
	r = open_target(w, roots, target, o, err);
	if (r < 0)
		return r;
	snprintf(w->info.format, sizeof(w->info.format), "%s", w->tgt->drv->name);
	w->info.created = w->created;
	w->info.size = w->tgt->size;
	w->fresh = w->tgt->zero_init;
	/* Hide the old table and superblocks while the data goes in. */
	if (!w->fresh) {
		for (size_t i = 0; i < pl->nareas && r == 0; i++)
			if (pl->area_offs[i] + pl->area_lens[i] <= w->tgt->size)
				r = bk_zero(w->tgt, pl->area_offs[i], pl->area_lens[i], err);
		for (size_t i = 0; i < pl->nparts && r == 0; i++)
			r = bk_zero(w->tgt, w->part_start[i], w->part_head[i], err);
	}
	return r;
}

/* parts[] (one per partition, in the writer's order) gets the new starts
 * and sizes. */
static int writer_set_layout(struct writer *w, const struct target_opts *o,
			     struct layout_part *parts, struct im_err *err)
{
	enum grow_mode mode = o->grow;
	int r;

	if (o->layout) {
		for (size_t i = 0; i < w->nparts; i++) {
			size_t k = 0;
			while (k < o->nlayout && o->layout[k].number != parts[i].number)
				k++;
			if (k == o->nlayout)
				return im_errf(err, IM_EXIT_INTERNAL, -EINVAL,
					       "partition %u is not in the new layout", parts[i].number);
			parts[i].new_start = o->layout[k].new_start;
			parts[i].new_size = o->layout[k].new_size;
		}
		w->layout = parts;
		w->shrunk = true;
		return 0;
	}
	if (mode == GROW_NONE)
		return 0;
	r = layout_plan(mode, w->table, w->lss, w->source_size, w->tgt->size, parts, w->nparts, err);
	if (r < 0)
		return r;
	w->layout = parts;
	w->grow = mode;
	for (size_t i = 0; i < w->nparts; i++)
		w->part_start[i] = parts[i].new_start;
	return 0;
}

int writer_start(struct writer *w, const struct disk_roots *roots, const char *target,
		 const struct disk_plan *pl, const struct target_opts *o, struct grow_report *rep,
		 struct im_err *err)
{
	int r = writer_open(w, roots, target, pl, o, err);

	if (r < 0)
		return r;
	rep->nparts = pl->nparts;
	for (size_t i = 0; i < pl->nparts && i < PT_MAX_PARTS; i++)
		rep->parts[i] = pl->parts[i];
	/* (An image's manifest may list more than a table holds.) */
	if (pl->nparts > PT_MAX_PARTS)
		return im_errf(err, IM_EXIT_UNSUPP, -E2BIG, "too many partitions");
	return writer_set_layout(w, o, rep->parts, err);
}

/* The bytes path already takes, and free_of_dir()'s; false when unknown
 * or not a regular file. */
static bool room_of(const char *path, uint64_t *free_b, uint64_t *taken)
{
	struct stat st;

	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || !free_of_dir(path, free_b))
		return false;
	*taken = (uint64_t)st.st_blocks * 512;
	return true;
}

int writer_check_room(struct writer *w, uint64_t bytes, struct im_err *err)
{
	uint64_t free_b, taken, need;
	char n[32], f[32];

	if (!w->created || !w->tgt || w->info.block_device || bk_is_uri(w->info.path) ||
	    !room_of(w->info.path, &free_b, &taken))
		return 0;
	/* qcow2's L2 tables and refcounts: 8 + 2 bytes per 64 KiB cluster,
	 * a fraction of a percent; and a MiB of slack. */
	need = bytes + bytes / 256 + (1u << 20);
	if (taken >= need || need - taken <= free_b)
		return 0;
	util_human_size(need - taken, n, sizeof(n));
	util_human_size(free_b, f, sizeof(f));
	return im_errf(err, IM_EXIT_IO, -ENOSPC,
		       "%s: not enough room on its filesystem: the job writes %s, %s is free; "
		       "nothing was written (free some space or choose another place)",
		       w->info.path, n, f);
}

/* A full filesystem, named with what the job wrote and what is free. */
static int full(struct writer *w, int r, struct im_err *err)
{
	uint64_t free_b, taken;
	char a[32], f[32];

	if (r != -ENOSPC || w->info.block_device || !room_of(w->info.path, &free_b, &taken))
		return r;
	util_human_size(w->written, a, sizeof(a));
	util_human_size(free_b, f, sizeof(f));
	if (err)
		err->exit_class = 0;   /* (this says more than the backend's) */
	return im_errf(err, IM_EXIT_IO, r,
		       "%s: its filesystem is full after %s of data (%s free): %s",
		       w->info.path, a, f,
		       w->created ? "the new file is removed"
				  : "the file is left without a partition table (written last), so it "
				    "does not pass for a restored disk");
}

static int put(struct writer *w, size_t i, uint64_t off, uint64_t len, const void *data,
	       bool head_only, struct im_err *err)
{
	const unsigned char *d = data;

	if (w->shrunk && off + len > w->layout[i].new_size) {
		if (!d)
			len = off < w->layout[i].new_size ? w->layout[i].new_size - off : 0;
		else
			return im_errf(err, IM_EXIT_INTERNAL, -ENOSPC,
				       "partition %u holds data at bytes %llu-%llu, past its new size %llu",
				       w->layout[i].number, (unsigned long long)off,
				       (unsigned long long)(off + len),
				       (unsigned long long)w->layout[i].new_size);
	}
	if (off < w->part_head[i]) {
		uint64_t n = w->part_head[i] - off < len ? w->part_head[i] - off : len;
		if (d)
			memcpy(w->heads[i] + off, d, n);
		else
			memset(w->heads[i] + off, 0, n);
		off += n;
		len -= n;
		if (d)
			d += n;
	}
	if (!len || head_only)
		return 0;
	if (d) {
		int r = bk_pwrite(w->tgt, d, len, w->part_start[i] + off, err);
		w->written += len;
		return r < 0 ? full(w, r, err) : 0;
	}
	return w->fresh ? 0 : bk_zero(w->tgt, w->part_start[i] + off, len, err);
}

int writer_put(struct writer *w, size_t i, uint64_t off, uint64_t len, const void *data,
	       struct im_err *err)
{
	return put(w, i, off, len, data, false, err);
}

int writer_put_head(struct writer *w, size_t i, uint64_t off, uint64_t len, const void *data,
		    struct im_err *err)
{
	return put(w, i, off, len, data, true, err);
}

int writer_finish(struct writer *w, const struct disk_plan *pl, struct im_err *err)
{
	bool larger = w->tgt->size > w->source_size, backup = false;
	int r = 0;

	for (size_t i = 0; i < pl->nareas; i++)
		backup |= !strcmp(pl->area_names[i], "gpt-backup");

	r = target_still_there(w, err);
	for (size_t i = 0; i < w->nparts && r == 0; i++)
		r = bk_pwrite(w->tgt, w->heads[i], w->part_head[i], w->part_start[i], err);
	bool moved = w->layout && layout_changed(w->layout, w->nparts);

	for (size_t i = 0; i < pl->nareas && r == 0; i++) {
		/* On a larger disk the GPT backup belongs at the new end; EBRs of
		 * partitions that moved are rebuilt at their new places. */
		if ((larger || w->shrunk) && !strcmp(pl->area_names[i], "gpt-backup"))
			continue;
		if (moved && (w->grow == GROW_PROPORTIONAL || w->shrunk) &&
		    !strncmp(pl->area_names[i], "ebr", 3))
			continue;
		r = bk_pwrite(w->tgt, pl->area_data[i], pl->area_lens[i], pl->area_offs[i], err);
	}
	/* The new table before the GPT backup is made from the primary. */
	if (r == 0 && moved)
		r = layout_write_table(w->tgt, w->table, w->lss, w->layout, w->nparts, pl->nareas,
				       pl->area_offs, pl->area_lens, pl->area_data, err);
	/* A plan without a backup area (a Clonezilla image) gets one made
	 * from the primary. */
	if (r == 0 && (larger || !backup || w->shrunk) && !strcmp(w->table, "gpt"))
		r = ptable_gpt_relocate_backup(w->tgt, w->tgt->size, w->lss, err);
	if (r == 0)
		r = bk_flush(w->tgt, err);
	return r;
}

int writer_end(struct writer *w, int r, const struct target_opts *o, const struct grow_fs *fs,
	       struct grow_report *rep, struct target_info *info, struct im_err *err)
{
	if (w->tgt || w->heads || w->locked) {
		int c = writer_close(w, r == 0, err);
		if (r == 0 && c < 0)
			r = c;
	}
	*info = w->info;
	if (r == 0 && o->grow != GROW_NONE)
		r = grow_filesystems(w->roots, &w->info, &o->grow_hook, rep, fs, err);
	return r;
}

int writer_close(struct writer *w, bool ok, struct im_err *err)
{
	char path[sizeof(w->tgt->name)] = "";
	int r = 0;

	/* A device's O_EXCL hold would make the kernel refuse the table's
	 * re-read on close (BLKRRPART claims the disk): let go of it first. */
	if (w->locked && w->tgt && w->tgt->is_block_device) {
		close(w->lock_fd);
		w->locked = false;
	}
	if (w->tgt) {
		snprintf(path, sizeof(path), "%s", w->tgt->name);
		/* Closing writes a container's last metadata: it can fail too. */
		r = bk_close(w->tgt, ok ? err : NULL);
		w->tgt = NULL;
	}
	/* (only our file: another one put at the path meanwhile stays) */
	if ((!ok || r < 0) && w->created && !w->keep && same_target(w, path))
		unlink(path);
	if (w->locked)
		close(w->lock_fd);
	w->locked = false;
	for (size_t i = 0; w->heads && i < w->nparts; i++)
		free(w->heads[i]);
	free(w->heads);
	free(w->part_start);
	free(w->part_head);
	w->heads = NULL;
	w->part_start = w->part_head = NULL;
	return r;
}
