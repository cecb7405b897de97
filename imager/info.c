/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What is on a disk or image file. */
#include "imager/job.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imager/fs.h"

int im_disk_info(const struct disk_roots *roots, const char *name, struct disk_info *info,
		 struct im_err *err)
{
	struct disk_ref ref;
	struct ptable *pt;
	int fd, r;

	memset(info, 0, sizeof(*info));
	r = disk_resolve(roots, name, &ref, err);
	if (r < 0)
		return r;
	if (!ref.exists)
		return im_errf(err, IM_EXIT_SOURCE, -ENOENT, "%s: no such disk, file or image folder", name);
	fd = open(ref.path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", ref.path, strerror(errno));
	pt = calloc(1, sizeof(*pt));
	if (!pt) {
		close(fd);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	if (ref.kind == DISK_KIND_PARTITION) {
		snprintf(pt->type, sizeof(pt->type), "none");
		pt->nparts = 1;
		pt->parts[0].size = ref.size;
		snprintf(pt->parts[0].kind, sizeof(pt->parts[0].kind), "whole-disk");
	} else if ((r = ptable_read(ref.path, ref.size, ref.logical_sector_size, pt, err)) < 0) {
		free(pt);
		close(fd);
		return r;
	}
	snprintf(info->path, sizeof(info->path), "%s", ref.path);
	info->size = ref.size;
	info->lss = ref.logical_sector_size;
	snprintf(info->table, sizeof(info->table), "%s", pt->type);
	info->nparts = pt->nparts;
	for (size_t i = 0; i < pt->nparts; i++) {
		struct disk_part_info *dp = &info->parts[i];
		struct fs_info fs;
		struct im_err e = { 0 };

		dp->part = pt->parts[i];
		if (fs_examine(fd, dp->part.start, dp->part.size, false, &fs, &e) == 0) {
			snprintf(dp->plugin, sizeof(dp->plugin), "%s", fs.plugin->name);
			dp->block_size = fs.block_size;
			dp->used_blocks = fs.used_blocks;
		} else {
			snprintf(dp->error, sizeof(dp->error), "%s", e.msg);
		}
		snprintf(dp->fstype, sizeof(dp->fstype), "%s", fs.type);
		snprintf(dp->uuid, sizeof(dp->uuid), "%s", fs.uuid);
		snprintf(dp->label, sizeof(dp->label), "%s", fs.label);
		fs_info_free(&fs);
	}
	free(pt);
	close(fd);
	return 0;
}
