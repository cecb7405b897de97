/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Conversion as a step of a restore or clone, and the grow hook the engine
 * takes from this layer (the engine links no libguestfs).  Contracts in
 * include/imager/convert.h.
 */
#include "imager/convert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imager/fleet.h"
#include "imager/guest.h"
#include "util.h"

static int grow_in_image(void *opaque, const char *path, const char *format,
			 const unsigned *numbers, const char *const *last_lvs, size_t n,
			 bool *grown, struct im_err *err)
{
	struct guest_grow_result res[PT_MAX_PARTS];
	int r;

	(void)opaque;
	if (n > PT_MAX_PARTS)
		return im_errf(err, IM_EXIT_INTERNAL, -E2BIG, "too many partitions to grow");
	r = guest_grow_partitions(path, format, numbers, last_lvs, n, res, err);
	for (size_t k = 0; r == 0 && k < n; k++)
		grown[k] = res[k].grown;
	return r;
}

struct im_grow_hook conv_grow_hook(void)
{
	return (struct im_grow_hook){ .grow_in_image = grow_in_image };
}

static void convert_target(const struct target_info *t, struct conv_step *step)
{
	const char *disk = t->path, *format = t->format;

	step->ran = true;
	step->r = im_convert(&disk, &format, 1, step->opts, &step->rep, &step->err);
}

int conv_restore(const struct disk_roots *roots, const char *dir, const char *target,
		 const struct restore_opts *opts, struct restore_stats *stats,
		 struct conv_step *step, struct im_err *err)
{
	struct restore_opts o = *opts;
	int r;

	if (!o.target.grow_hook.grow_in_image)
		o.target.grow_hook = conv_grow_hook();
	if (!strncmp(dir, "multicast:", 10))
		r = im_multicast_restore(roots, dir, target, &o, stats, err);
	else
		r = im_restore(roots, dir, target, &o, stats, err);
	if (r == 0 && step && step->opts)
		convert_target(&stats->target, step);
	return r;
}

int conv_folder(const struct disk_roots *roots, const char *dir, const char *output,
		const struct restore_opts *opts, struct restore_stats *stats,
		struct conv_step *step, char *target, size_t tlen, struct im_err *err)
{
	struct restore_opts o = *opts;
	char tmp[4096] = "";
	int r;

	if (!output && !(step && step->opts && step->opts->dry_run))
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "an image folder needs --output DISK (or --dry-run)");
	if (!output) {
		if ((r = tmp_file_name("convert", tmp, sizeof(tmp), err)) < 0)
			return r;   /* (the restore creates it, as qcow2) */
		o.target.format = "qcow2";
	}
	snprintf(target, tlen, "%s", output ? output : tmp);
	r = conv_restore(roots, dir, output ? output : tmp, &o, stats, step, err);
	if (tmp[0])
		unlink(tmp);
	return r;
}

int conv_clone(const struct disk_roots *roots, const char *source, const char *target,
	       const struct clone_opts *opts, struct clone_stats *stats, struct conv_step *step,
	       struct im_err *err)
{
	struct clone_opts o = *opts;
	int r;

	if (!o.target.grow_hook.grow_in_image)
		o.target.grow_hook = conv_grow_hook();
	r = im_clone(roots, source, target, &o, stats, err);
	if (r == 0 && step && step->opts)
		convert_target(&stats->target, step);
	return r;
}
