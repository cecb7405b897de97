/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The raw fallback: for anything no other plugin understands (an unknown
 * filesystem, a BIOS boot partition).  Every block is "used"; the engine
 * does not store blocks that are all zeros, so empty space costs nothing in
 * the image.
 *
 * Its named twin, "crypt", takes encrypted volumes (LUKS1, LUKS2,
 * BitLocker, as libblkid names them): without the key, used and free space
 * look alike, so they are kept whole too; the name in the manifest and the
 * warning say so.
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

static int crypt_open(struct fs_ctx *ctx, void *priv)
{
	fs_warn(ctx, "encrypted: imaged whole (without its key, data and free space look alike)");
	return raw_open(ctx, priv);
}

static const char *const crypt_blkid_types[] = { "crypto_LUKS", "BitLocker", NULL };

const struct fs_plugin fs_plugin_crypt = {
	.name = "crypt",
	.blkid_types = crypt_blkid_types,
	.min_size = 4096,
	.magics = NULL,      /* chosen on libblkid's word only: those headers are its job */
	.priv_size = sizeof(struct raw_priv),
	.probe = NULL,
	.open = crypt_open,
	.used_blocks = raw_used_blocks,
	.close = NULL,
};
