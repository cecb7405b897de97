/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nbdkit-imager-plugin: an imager image folder, or a Clonezilla one, as a
 * read-only NBD export (`imager serve`, or nbdkit itself):
 *
 *   nbdkit [--readonly] build/nbdkit-imager-plugin.so dir=DIR [partition=N] [cache=SIZE]
 *          [czcache=DIR]
 *
 * A Clonezilla folder is read through its index (include/imager/job.h,
 * im_czindex), kept under czcache=DIR (default: $IMAGER_CZINDEX_DIR, else
 * /var/cache/imager/czindex) and built at the first open when missing.
 *
 * The export is the disk a restore onto a fresh raw disk of the image's
 * size writes (or one partition of it), read through the engine's
 * img_reader (include/imager/imgread.h): only the frames a read touches
 * are decompressed, each one checked, into an LRU cache of cache=SIZE
 * (64M by default).  Block status (extents) says which ranges hold data
 * and which are zeros.  Thread model: parallel (the reader's cache has a
 * mutex; decompression runs outside it).  A damaged frame fails the reads
 * touching it with EIO, and nbdkit's log names the partition and frame.
 */
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "imager/imgread.h"
#include "imager/job.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static char *dir, *czcache;
static struct img_reader_opts opts;
static struct img_reader *reader;

static void imager_unload(void)
{
	img_reader_close(reader);
	reader = NULL;
	free(dir);
	free(czcache);
}

static int imager_config(const char *key, const char *value)
{
	if (!strcmp(key, "dir")) {
		free(dir);
		dir = nbdkit_absolute_path(value);
		return dir ? 0 : -1;
	}
	if (!strcmp(key, "czcache")) {
		free(czcache);
		czcache = nbdkit_absolute_path(value);
		return czcache ? 0 : -1;
	}
	if (!strcmp(key, "partition")) {
		if (nbdkit_parse_unsigned("partition", value, &opts.partition) < 0)
			return -1;
		if (!opts.partition) {
			nbdkit_error("partition: partitions are numbered from 1");
			return -1;
		}
		return 0;
	}
	if (!strcmp(key, "cache")) {
		int64_t n = nbdkit_parse_size(value);
		if (n < 0)
			return -1;
		if (n < (1 << 20)) {
			nbdkit_error("cache: at least 1M");
			return -1;
		}
		opts.cache_bytes = (uint64_t)n;
		return 0;
	}
	nbdkit_error("unknown parameter '%s' (dir=, partition=, cache=, czcache=)", key);
	return -1;
}

static int imager_config_complete(void)
{
	if (!dir) {
		nbdkit_error("dir=DIR is required: an imager or Clonezilla image folder");
		return -1;
	}
	return 0;
}

#define imager_config_help \
	"dir=<DIR>        (required) The imager or Clonezilla image folder to export.\n" \
	"partition=<N>    Export partition N alone (default: the whole disk).\n" \
	"cache=<SIZE>     Decompressed frames kept (default 64M).\n" \
	"czcache=<DIR>    Where a Clonezilla folder's index is kept\n" \
	"                 (default $IMAGER_CZINDEX_DIR, else " IM_CZINDEX_DIR_DEFAULT ")."

/* Opened once, before the first connection: a folder that is not a sound
 * image stops nbdkit at start (a Clonezilla folder's index is built here
 * when it is missing). */
static int imager_get_ready(void)
{
	struct im_err err = { 0 };
	struct im_czindex_opts co = { .cache_dir = czcache ? czcache : getenv("IMAGER_CZINDEX_DIR") };

	if (im_reader_open(dir, &opts, &co, &reader, NULL, &err) < 0) {
		nbdkit_error("%s", err.msg);
		return -1;
	}
	return 0;
}

static void *imager_open(int readonly)
{
	(void)readonly;
	return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t imager_get_size(void *handle)
{
	(void)handle;
	return (int64_t)img_reader_size(reader);
}

static int imager_can_write(void *handle)
{
	(void)handle;
	return 0;
}

static int imager_can_multi_conn(void *handle)
{
	(void)handle;
	return 1;   /* read-only: every connection sees the same bytes */
}

static int imager_can_extents(void *handle)
{
	(void)handle;
	return 1;
}

static int imager_pread(void *handle, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
	struct im_err err = { 0 };
	int r;

	(void)handle;
	(void)flags;
	r = img_reader_read(reader, buf, count, offset, &err);
	if (r < 0) {
		nbdkit_error("%s", err.msg);
		nbdkit_set_error(r == -ENOMEM ? ENOMEM : r == -EINVAL ? EINVAL : EIO);
		return -1;
	}
	return 0;
}

static int add_extent(void *opaque, uint64_t off, uint64_t len, bool zero)
{
	struct nbdkit_extents *ext = opaque;

	return nbdkit_add_extent(ext, off, len, zero ? NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO : 0) < 0
		? -EIO : 0;
}

static int stop_after_one(void *opaque, uint64_t off, uint64_t len, bool zero)
{
	int r = add_extent(opaque, off, len, zero);
	return r < 0 ? r : -ECANCELED;   /* (the first extent is enough) */
}

static int imager_extents(void *handle, uint32_t count, uint64_t offset, uint32_t flags,
			  struct nbdkit_extents *ext)
{
	int r;

	(void)handle;
	r = img_reader_extents(reader, offset, count,
			       (flags & NBDKIT_FLAG_REQ_ONE) ? stop_after_one : add_extent, ext);
	if (r < 0 && r != -ECANCELED) {
		nbdkit_set_error(EIO);
		return -1;
	}
	return 0;
}

static struct nbdkit_plugin plugin = {
	.name = "imager",
	.longname = "imager image folder (read-only)",
	.version = IMAGER_VERSION,
	.description = "Serve the disk an imager image folder holds, without restoring it.",
	.unload = imager_unload,
	.config = imager_config,
	.config_complete = imager_config_complete,
	.config_help = imager_config_help,
	.magic_config_key = "dir",
	.get_ready = imager_get_ready,
	.open = imager_open,
	.get_size = imager_get_size,
	.can_write = imager_can_write,
	.can_multi_conn = imager_can_multi_conn,
	.can_extents = imager_can_extents,
	.pread = imager_pread,
	.extents = imager_extents,
};

NBDKIT_REGISTER_PLUGIN(plugin)
