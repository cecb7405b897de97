/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Growing filesystems into partitions that were laid out larger. */
#include "source.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "imager/guest.h"
#include "tool.h"

static bool is_ext(const char *t)
{
	return t && (!strcmp(t, "ext2") || !strcmp(t, "ext3") || !strcmp(t, "ext4"));
}

/* e2fsck -f then resize2fs on a partition device the kernel made. */
static int grow_on_device(const char *dev, struct im_err *err)
{
	/* -p: repair only what is safe to repair unattended. */
	const char *fsck[] = { "e2fsck", "-f", "-p", dev, NULL };
	const char *resize[] = { "resize2fs", dev, NULL };
	char out[2048];
	int st = tool_run(fsck, out, sizeof(out));

	/* e2fsck: 0 clean, 1 errors corrected; anything else is a failure. */
	if (st < 0 || st > 1)
		return im_errf(err, IM_EXIT_FSCK, -EUCLEAN, "e2fsck %s failed (status %d): %s", dev, st, out);
	st = tool_run(resize, out, sizeof(out));
	if (st != 0)
		return im_errf(err, IM_EXIT_IO, -EIO, "resize2fs %s failed (status %d): %s", dev, st, out);
	return 0;
}

static int grow_all(const struct disk_roots *roots, const char *target, const char *format,
		    struct grow_report *rep, const char *const *fstypes, struct im_err *err);

int grow_filesystems(const struct disk_roots *roots, const char *target, const char *format,
		     struct grow_report *rep, const char *const *fstypes, struct im_err *err)
{
	int r = grow_all(roots, target, format, rep, fstypes, err);
	if (r < 0)
		im_err_prefix(err, "the disk is complete and its partitions laid out anew, but its filesystems were not grown: ");
	return r;
}

static int grow_all(const struct disk_roots *roots, const char *target, const char *format,
		    struct grow_report *rep, const char *const *fstypes, struct im_err *err)
{
	unsigned numbers[PT_MAX_PARTS];
	size_t n = 0;
	struct disk_ref ref;
	int r;

	for (size_t i = 0; i < rep->nparts; i++)
		if (rep->parts[i].new_size > rep->parts[i].old_size && is_ext(fstypes[i]))
			numbers[n++] = rep->parts[i].number;
	if (!n)
		return 0;
	if (bk_is_uri(target))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "the partitions were laid out again, but growing filesystems on an NBD target is not supported; run resize2fs inside the guest");
	r = disk_resolve(roots, target, &ref, err);
	if (r < 0)
		return r;
	if (ref.kind == DISK_KIND_BLOCK) {
		/* The kernel re-read the table when the target was closed. */
		bool all = true;
		for (size_t k = 0; k < n && all; k++) {
			char name[64], path[700];
			struct stat st;
			disk_partition_name(ref.name, numbers[k], name, sizeof(name));
			snprintf(path, sizeof(path), "%s/%s", roots->dev, name);
			all = stat(path, &st) == 0 && S_ISBLK(st.st_mode);
		}
		if (all) {
			for (size_t k = 0; k < n; k++) {
				char name[64], path[700];
				disk_partition_name(ref.name, numbers[k], name, sizeof(name));
				snprintf(path, sizeof(path), "%s/%s", roots->dev, name);
				r = grow_on_device(path, err);
				if (r < 0)
					return r;
			}
			goto done;
		}
	}
	/* An image file (or a device without partition nodes): libguestfs. */
	if (!format) {
		struct bk *bk;
		r = bk_open(ref.path, NULL, 0, &bk, err);
		if (r < 0)
			return r;
		format = bk->drv->name;
		bk_close(bk, NULL);
	}
	{
		struct guest_grow_result res[PT_MAX_PARTS];
		r = guest_grow_partitions(ref.path, format, numbers, n, res, err);
		if (r < 0)
			return r;
		for (size_t k = 0; k < n; k++)
			if (!res[k].grown)
				numbers[k] = 0;   /* not an ext filesystem after all */
	}
done:
	for (size_t i = 0; i < rep->nparts; i++)
		for (size_t k = 0; k < n; k++)
			if (rep->parts[i].number == numbers[k])
				snprintf(rep->grown_fs[i], sizeof(rep->grown_fs[i]), "%s", fstypes[i]);
	return 0;
}
