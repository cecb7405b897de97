/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What is on a disk, an image file (raw or qcow2) or an NBD export. */
#include "imager/job.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imager/fs.h"
#include "util.h"

static int bk_src_pread(void *opaque, void *buf, size_t len, uint64_t off)
{
	struct im_err ignored = { 0 };
	return bk_pread(opaque, buf, len, off, &ignored);
}

int im_disk_info(const struct disk_roots *roots, const char *name, struct disk_info *info,
		 struct im_err *err)
{
	struct disk_ref ref = { .kind = DISK_KIND_FILE };
	struct ptable *pt;
	struct bk *bk;
	int fd = -1, r;

	memset(info, 0, sizeof(*info));
	if (!bk_is_uri(name)) {
		r = disk_resolve(roots, name, &ref, err);
		if (r < 0)
			return r;
		if (!ref.exists)
			return im_errf(err, IM_EXIT_SOURCE, -ENOENT,
				       "%s: no such disk, file or image folder", name);
	} else if (str_copy(ref.path, sizeof(ref.path), name) < 0) {
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG,
			       "%s: URI too long (imager takes up to %zu bytes)", name,
			       sizeof(ref.path) - 1);
	}
	r = bk_open(ref.path, NULL, 0, NULL, &bk, err);
	if (r < 0)
		return r;
	pt = calloc(1, sizeof(*pt));
	if (!pt) {
		bk_close(bk, NULL);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	if (ref.kind == DISK_KIND_PARTITION) {
		snprintf(pt->type, sizeof(pt->type), "none");
		pt->nparts = 1;
		pt->parts[0].size = bk->size;
		snprintf(pt->parts[0].kind, sizeof(pt->parts[0].kind), "whole-disk");
	} else if ((r = ptable_read_bk(bk, pt, err)) < 0) {
		free(pt);
		bk_close(bk, NULL);
		return r;
	}
	if (bk->raw_path[0])
		fd = open(bk->raw_path, O_RDONLY | O_CLOEXEC);
	snprintf(info->path, sizeof(info->path), "%s", ref.path);
	snprintf(info->format, sizeof(info->format), "%s", bk->drv->name);
	snprintf(info->format_detail, sizeof(info->format_detail), "%s", bk->detail);
	info->size = bk->size;
	info->lss = bk->sector_size;
	snprintf(info->table, sizeof(info->table), "%s", pt->type);
	info->nparts = pt->nparts;
	for (size_t i = 0; i < pt->nparts; i++) {
		struct disk_part_info *dp = &info->parts[i];
		struct fs_source src = { .pread = bk_src_pread, .opaque = bk, .fd = fd };
		struct fs_info fs;
		struct im_err e = { 0 };

		dp->part = pt->parts[i];
		if (fs_examine_src(&src, dp->part.start, dp->part.size, false, &fs, &e) == 0) {
			snprintf(dp->plugin, sizeof(dp->plugin), "%s", fs.plugin->name);
			dp->block_size = fs.block_size;
			dp->used_blocks = fs.used_blocks;
		} else {
			snprintf(dp->error, sizeof(dp->error), "%s", e.msg);
		}
		snprintf(dp->fstype, sizeof(dp->fstype), "%s", fs.type);
		snprintf(dp->uuid, sizeof(dp->uuid), "%s", fs.uuid);
		snprintf(dp->label, sizeof(dp->label), "%s", fs.label);
		snprintf(dp->container, sizeof(dp->container), "%s", fs.container);
		dp->volumes = fs.volumes;          /* handed over */
		dp->nvolumes = fs.nvolumes;
		fs.volumes = NULL;
		fs.nvolumes = 0;
		fs_info_free(&fs);
	}
	if (fd >= 0)
		close(fd);
	free(pt);
	bk_close(bk, NULL);
	return 0;
}

void im_disk_info_free(struct disk_info *info)
{
	for (size_t i = 0; info && i < info->nparts; i++) {
		free(info->parts[i].volumes);
		info->parts[i].volumes = NULL;
		info->parts[i].nvolumes = 0;
	}
}
