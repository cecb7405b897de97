/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The raw fallback: for anything no other plugin understands (an unknown
 * filesystem, LVM, an encrypted volume, a BIOS boot partition).  Every block
 * is "used"; the engine does not store blocks that are all zeros, so empty
 * space costs nothing in the image.
 */
#include "imager/fsplugin.h"

#include <errno.h>

struct raw_priv {
	uint64_t blocks;
};

static int raw_open(struct fs_ctx *ctx, void *priv)
{
	struct raw_priv *rp = priv;
	uint64_t size = fs_device_size(ctx);
	uint32_t bs = 4096;

	/* The largest power of two up to 4 KiB that divides the size, so the
	 * whole device is covered. */
	while (bs > 512 && size % bs)
		bs /= 2;
	if (size < bs)
		return fs_error(ctx, -EINVAL, "device of %llu bytes is too small",
				(unsigned long long)size);
	rp->blocks = size / bs;
	return fs_set_geometry(ctx, bs, rp->blocks);
}

static int raw_used_blocks(struct fs_ctx *ctx, void *priv)
{
	const struct raw_priv *rp = priv;

	return fs_mark_used(ctx, 0, rp->blocks);
}

const struct fs_plugin fs_plugin_raw = {
	.name = "raw",
	.blkid_types = NULL,
	.min_size = 512,
	.magics = NULL,
	.priv_size = sizeof(struct raw_priv),
	.probe = NULL,
	.open = raw_open,
	.used_blocks = raw_used_blocks,
	.close = NULL,
};
