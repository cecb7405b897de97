/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Linux swap space (version 1, "SWAPSPACE2").
 *
 * Nothing in a swap area outlives a reboot except its first page: boot bits,
 * then the header (version, last_page, bad page list, UUID, label), and the
 * magic in the last ten bytes of the page.  Only that page is kept; the
 * restored swap is as good as a fresh `mkswap` with the same UUID and label.
 *
 * The page size is not recorded anywhere but in where the magic sits, so
 * the header is looked for at the end of each page size Linux uses.  A
 * hibernation image replaces the magic with its own, is not "swap" to
 * libblkid, and so is copied whole by the raw fallback, as it must be.
 */
#include "imager/fsplugin.h"
#include "imager/bytes.h"
#include "imager/swapfmt.h"

#include <errno.h>
#include <string.h>

struct swap_priv {
	uint32_t page_size;
};

static const uint32_t swap_page_sizes[] = { 4096, 8192, 16384, 65536 };

static uint32_t swab32(uint32_t v)
{
	return (v >> 24) | ((v >> 8) & 0xFF00u) | ((v << 8) & 0xFF0000u) | (v << 24);
}

/*
 * Find the header page and validate it.  Returns 0 with *page_size set, or a
 * negative errno with the reason recorded (-EINVAL when there is no magic
 * at all).
 */
static int swap_parse(struct fs_ctx *ctx, uint32_t *page_size)
{
	uint64_t size = fs_device_size(ctx);
	const unsigned char *hdr;
	uint32_t ps = 0, version, last_page, nr_bad, max_bad;
	uint64_t pages;
	bool swapped;
	int err = 0;

	for (size_t i = 0; i < sizeof(swap_page_sizes) / sizeof(swap_page_sizes[0]); i++) {
		char magic[SWAP_MAGIC_LEN];
		int r;

		if (swap_page_sizes[i] > size)
			break;
		r = fs_read(ctx, swap_page_sizes[i] - SWAP_MAGIC_LEN, magic, sizeof(magic));
		if (r < 0)
			return fs_error(ctx, r, "cannot read the swap header");
		if (memcmp(magic, SWAP_MAGIC_V0, SWAP_MAGIC_LEN) == 0)
			return fs_error(ctx, -ENOTSUP,
					"version 0 swap space (\"SWAP-SPACE\"), unsupported since Linux 2.5");
		if (memcmp(magic, SWAP_MAGIC_V1, SWAP_MAGIC_LEN) == 0) {
			ps = swap_page_sizes[i];
			break;
		}
	}
	if (!ps)
		return fs_error(ctx, -EINVAL, "no swap signature");

	hdr = fs_map(ctx, 0, ps, &err);
	if (!hdr)
		return fs_error(ctx, err, "cannot read the swap header");

	/* The header is in the byte order of the machine that made it. */
	version = le32(hdr + SWAP_VERSION_OFF);
	swapped = version != SWAP_VERSION && swab32(version) == SWAP_VERSION;
	if (version != SWAP_VERSION && !swapped)
		return fs_error(ctx, -EINVAL, "swap header version %u", version);
	last_page = le32(hdr + SWAP_LAST_PAGE_OFF);
	nr_bad = le32(hdr + SWAP_NR_BADPAGES_OFF);
	if (swapped) {
		last_page = swab32(last_page);
		nr_bad = swab32(nr_bad);
	}

	/* last_page is the index of the last page of the area: it must lie
	 * on the device.  A smaller area than the device is fine (mkswap
	 * with an explicit size). */
	pages = size / ps;
	if (last_page == 0 || last_page >= pages)
		return fs_error(ctx, -EINVAL,
				"swap area of %llu pages of %u bytes does not fit the %llu-page device",
				(unsigned long long)last_page + 1, ps,
				(unsigned long long)pages);
	max_bad = (ps - SWAP_BADPAGES_OFF - SWAP_MAGIC_LEN) / 4;
	if (nr_bad > max_bad)
		return fs_error(ctx, -EINVAL, "%u bad pages listed, at most %u fit",
				nr_bad, max_bad);
	*page_size = ps;
	return 0;
}

static int swap_probe(struct fs_ctx *ctx)
{
	uint32_t ps;
	int r = swap_parse(ctx, &ps);

	/* -ENOTSUP: ours, but open() will refuse it and say why. */
	if (r == -EIO || r == -ENOMEM)
		return r;
	return r < 0 && r != -ENOTSUP ? 1 : 0;
}

static int swap_open(struct fs_ctx *ctx, void *priv)
{
	struct swap_priv *sp = priv;
	int r;

	r = swap_parse(ctx, &sp->page_size);
	if (r < 0)
		return r;
	r = fs_set_geometry(ctx, sp->page_size, fs_device_size(ctx) / sp->page_size);
	if (r < 0)
		return fs_error(ctx, r, "cannot declare pages of %u bytes", sp->page_size);
	return 0;
}

static int swap_used_blocks(struct fs_ctx *ctx, void *priv)
{
	(void)priv;
	return fs_mark_used(ctx, 0, 1);
}

static const char *const swap_blkid_types[] = { "swap", NULL };

static const struct fs_magic swap_magics[] = {
	{ SWAP_MAGIC_V1, SWAP_MAGIC_LEN, 4096 - SWAP_MAGIC_LEN },
	{ SWAP_MAGIC_V1, SWAP_MAGIC_LEN, 8192 - SWAP_MAGIC_LEN },
	{ SWAP_MAGIC_V1, SWAP_MAGIC_LEN, 16384 - SWAP_MAGIC_LEN },
	{ SWAP_MAGIC_V1, SWAP_MAGIC_LEN, 65536 - SWAP_MAGIC_LEN },
	/* Matched so open() can say why it is refused. */
	{ SWAP_MAGIC_V0, SWAP_MAGIC_LEN, 4096 - SWAP_MAGIC_LEN },
	{ SWAP_MAGIC_V0, SWAP_MAGIC_LEN, 8192 - SWAP_MAGIC_LEN },
	{ SWAP_MAGIC_V0, SWAP_MAGIC_LEN, 16384 - SWAP_MAGIC_LEN },
	{ SWAP_MAGIC_V0, SWAP_MAGIC_LEN, 65536 - SWAP_MAGIC_LEN },
	{ NULL, 0, 0 },
};

const struct fs_plugin fs_plugin_swap = {
	.name = "swap",
	.blkid_types = swap_blkid_types,
	/* The header page and one page of swap. */
	.min_size = 2 * 4096,
	.magics = swap_magics,
	.priv_size = sizeof(struct swap_priv),
	.probe = swap_probe,
	.open = swap_open,
	.used_blocks = swap_used_blocks,
	.close = NULL,
};
