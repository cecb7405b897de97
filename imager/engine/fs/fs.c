/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The engine side of the plugin contract (include/imager/fsplugin.h):
 * bounds-checked reads for plugins, the used-block bitmap they fill, and
 * choosing the plugin for a partition.
 */
#include "imager/fs.h"

#include <blkid.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util.h"

struct fs_map_entry {
	struct fs_map_entry *next;
	uint64_t offset;
	size_t len;
	unsigned char data[];
};

struct fs_ctx {
	const struct fs_source *src;
	uint64_t base;           /* filesystem start within fd */
	uint64_t size;           /* bytes available to the filesystem */
	bool forced;
	bool geometry_set;
	uint32_t block_size;
	uint64_t block_count;
	struct bitmap used;
	struct bitmap blank;     /* allocated by the first fs_mark_blank() */
	struct fs_map_entry *maps;
	size_t mapped_total;
	int err_code;
	char err_msg[512];
	char warning[512];
	unsigned depth;          /* 0: a partition; 1: a volume inside one */
	char container[128];
	size_t nvolumes;
	struct fs_volume *volumes;
};

uint64_t fs_device_size(const struct fs_ctx *ctx) { return ctx->size; }
bool fs_forced(const struct fs_ctx *ctx) { return ctx->forced; }

static bool in_bounds(const struct fs_ctx *ctx, uint64_t offset, uint64_t len)
{
	return offset <= ctx->size && len <= ctx->size - offset;
}

static int fd_pread(void *opaque, void *buf, size_t len, uint64_t off)
{
	int r = util_pread_full(*(const int *)opaque, buf, len, off);
	return r < 0 ? -EIO : 0;   /* a short read: shorter than it claims to be */
}

static int read_fully(const struct fs_source *src, void *buf, size_t len, uint64_t off)
{
	int r = src->pread(src->opaque, buf, len, off);
	return r < 0 ? -EIO : 0;
}

int fs_read(struct fs_ctx *ctx, uint64_t offset, void *buf, size_t len)
{
	if (!in_bounds(ctx, offset, len))
		return -EINVAL;
	return read_fully(ctx->src, buf, len, ctx->base + offset);
}

const void *fs_map(struct fs_ctx *ctx, uint64_t offset, size_t len, int *err)
{
	struct fs_map_entry *m;
	int r;

	for (m = ctx->maps; m; m = m->next)
		if (m->offset <= offset && offset - m->offset <= m->len &&
		    len <= m->len - (offset - m->offset))
			return m->data + (offset - m->offset);
	if (len > FS_MAP_MAX || !in_bounds(ctx, offset, len) ||
	    len > FS_MAP_TOTAL_MAX - ctx->mapped_total) {
		*err = -EINVAL;
		return NULL;
	}
	m = malloc(sizeof(*m) + len);
	if (!m) {
		*err = -ENOMEM;
		return NULL;
	}
	r = read_fully(ctx->src, m->data, len, ctx->base + offset);
	if (r < 0) {
		free(m);
		*err = r;
		return NULL;
	}
	m->offset = offset;
	m->len = len;
	m->next = ctx->maps;
	ctx->maps = m;
	ctx->mapped_total += len;
	return m->data;
}

int fs_set_geometry(struct fs_ctx *ctx, uint32_t block_size, uint64_t block_count)
{
	int r;

	if (ctx->geometry_set || block_size < 512 || block_size > (1u << 20) ||
	    (block_size & (block_size - 1)) || block_count == 0 ||
	    block_count > ctx->size / block_size)
		return -EINVAL;
	r = bitmap_init(&ctx->used, block_count);
	if (r < 0)
		return r;
	ctx->block_size = block_size;
	ctx->block_count = block_count;
	ctx->geometry_set = true;
	return 0;
}

int fs_mark_used(struct fs_ctx *ctx, uint64_t first, uint64_t count)
{
	if (!ctx->geometry_set)
		return -EINVAL;
	return bitmap_set_range(&ctx->used, first, count);
}

int fs_mark_blank(struct fs_ctx *ctx, uint64_t first, uint64_t count)
{
	int r;

	if (!ctx->geometry_set)
		return -EINVAL;
	if (!ctx->blank.words && (r = bitmap_init(&ctx->blank, ctx->block_count)) < 0)
		return r;
	return bitmap_set_range(&ctx->blank, first, count);
}

bool fs_is_used(const struct fs_ctx *ctx, uint64_t n)
{
	return ctx->geometry_set && bitmap_test(&ctx->used, n);
}

int fs_error(struct fs_ctx *ctx, int err, const char *fmt, ...)
{
	va_list ap;

	if (ctx->err_msg[0])
		return err;
	va_start(ap, fmt);
	vsnprintf(ctx->err_msg, sizeof(ctx->err_msg), fmt, ap);
	va_end(ap);
	ctx->err_code = err;
	return err;
}

void fs_warn(struct fs_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	if (ctx->warning[0])
		return;
	va_start(ap, fmt);
	vsnprintf(ctx->warning, sizeof(ctx->warning), fmt, ap);
	va_end(ap);
}

static void ctx_release(struct fs_ctx *ctx)
{
	while (ctx->maps) {
		struct fs_map_entry *next = ctx->maps->next;
		free(ctx->maps);
		ctx->maps = next;
	}
	bitmap_free(&ctx->used);
	bitmap_free(&ctx->blank);
	free(ctx->volumes);
	ctx->volumes = NULL;
	ctx->nvolumes = 0;
}

static bool magics_match(struct fs_ctx *ctx, const struct fs_plugin *p)
{
	const struct fs_magic *m;

	if (!p->magics || !p->magics[0].magic)
		return true;
	for (m = p->magics; m->magic; m++) {
		unsigned char buf[64];
		if (m->len > sizeof(buf) || !in_bounds(ctx, m->offset, m->len))
			continue;
		if (fs_read(ctx, m->offset, buf, m->len) == 0 &&
		    memcmp(buf, m->magic, m->len) == 0)
			return true;
	}
	return false;
}

static bool handles_type(const struct fs_plugin *p, const char *type)
{
	if (!p->blkid_types || !type[0])
		return false;
	for (const char *const *t = p->blkid_types; *t; t++)
		if (strcmp(*t, type) == 0)
			return true;
	return false;
}

const struct fs_plugin *fs_plugin_by_name(const char *name)
{
	for (const struct fs_plugin *const *p = fs_plugins; *p; p++)
		if (strcmp((*p)->name, name) == 0)
			return *p;
	return NULL;
}

int fs_identify(int fd, uint64_t offset, uint64_t size, struct fs_info *out)
{
	blkid_probe pr = blkid_new_probe();
	const char *v;

	out->type[0] = out->uuid[0] = out->label[0] = '\0';
	if (!pr)
		return -ENOMEM;
	if (blkid_probe_set_device(pr, fd, (blkid_loff_t)offset, (blkid_loff_t)size) != 0) {
		blkid_free_probe(pr);
		return -EIO;
	}
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_UUID |
					  BLKID_SUBLKS_LABEL);
	/* libblkid 2.38's prober of OCFS version 1 (Oracle's cluster
	 * filesystem of 2002; OCFS2 has its own) reads far outside its buffer
	 * on a hostile superblock (found by tests/fuzz/fuzz-fs; `blkid -p`
	 * under valgrind shows it too): it is left out. */
	blkid_probe_filter_superblocks_type(pr, BLKID_FLTR_NOTIN, (char *[]){ "ocfs", NULL });
	blkid_probe_enable_partitions(pr, 0);
	if (blkid_do_safeprobe(pr) == 0) {
		if (blkid_probe_lookup_value(pr, "TYPE", &v, NULL) == 0)
			snprintf(out->type, sizeof(out->type), "%s", v);
		if (blkid_probe_lookup_value(pr, "UUID", &v, NULL) == 0)
			snprintf(out->uuid, sizeof(out->uuid), "%s", v);
		if (blkid_probe_lookup_value(pr, "LABEL", &v, NULL) == 0)
			snprintf(out->label, sizeof(out->label), "%s", v);
	}
	blkid_free_probe(pr);
	return 0;
}

static int run_plugin(const struct fs_plugin *p, struct fs_ctx *ctx,
		      struct fs_info *out, struct im_err *err)
{
	void *priv = NULL;
	int r;

	if (p->priv_size) {
		priv = calloc(1, p->priv_size);
		if (!priv)
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	r = p->open(ctx, priv);
	if (r >= 0 && !ctx->geometry_set)
		r = fs_error(ctx, -EINVAL, "plugin %s declared no geometry", p->name);
	if (r >= 0)
		r = p->used_blocks(ctx, priv);
	if (p->close)
		p->close(ctx, priv);
	free(priv);
	if (r < 0) {
		const char *why = ctx->err_msg[0] ? ctx->err_msg : strerror(-r);
		int cls = r == -EUCLEAN ? IM_EXIT_FSCK :
			  r == -ENOMEM ? IM_EXIT_INTERNAL :
			  r == -ENOTSUP ? IM_EXIT_UNSUPP :
			  r == -EIO ? IM_EXIT_IO : IM_EXIT_SOURCE;
		/* (a volume's plugin: the container's plugin adds the advice) */
		/* A plugin that names its own fix ("run xfs_repair") gets only --force added. */
		if (r == -EUCLEAN && ctx->depth == 0)
			return im_errf(err, cls, r, "%s: %s; %suse --force to copy it as it is", p->name,
				       why, strstr(why, "run ") ? "or " : "run fsck, or ");
		return im_errf(err, cls, r, "%s: %s", p->name, why);
	}
	out->plugin = p;
	out->block_size = ctx->block_size;
	out->block_count = ctx->block_count;
	out->used = ctx->used;                /* hand the bitmaps over */
	ctx->used.words = NULL;
	ctx->used.nbits = 0;
	out->blank = ctx->blank;
	ctx->blank.words = NULL;
	ctx->blank.nbits = 0;
	out->used_blocks = bitmap_count(&out->used);
	snprintf(out->warning, sizeof(out->warning), "%s", ctx->warning);
	snprintf(out->container, sizeof(out->container), "%s", ctx->container);
	out->volumes = ctx->volumes;          /* and the volumes */
	out->nvolumes = ctx->nvolumes;
	ctx->volumes = NULL;
	ctx->nvolumes = 0;
	return 0;
}

static void ctx_init(struct fs_ctx *ctx, const struct fs_source *src, uint64_t offset,
		     uint64_t size, bool force)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->src = src;
	ctx->base = offset;
	ctx->size = size;
	ctx->forced = force;
}

int fs_examine_src_with(const struct fs_plugin *plugin, const struct fs_source *src,
			uint64_t offset, uint64_t size, bool force, struct fs_info *out,
			struct im_err *err)
{
	struct fs_ctx ctx;
	int r;

	memset(out, 0, sizeof(*out));
	ctx_init(&ctx, src, offset, size, force);
	if (size < plugin->min_size) {
		r = im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			    "%s: %llu bytes is smaller than the smallest filesystem",
			    plugin->name, (unsigned long long)size);
	} else {
		r = run_plugin(plugin, &ctx, out, err);
	}
	ctx_release(&ctx);
	return r;
}

int fs_examine_with(const struct fs_plugin *plugin, int fd, uint64_t offset,
		    uint64_t size, bool force, struct fs_info *out,
		    struct im_err *err)
{
	struct fs_source src = { .pread = fd_pread, .opaque = &fd, .fd = fd };
	return fs_examine_src_with(plugin, &src, offset, size, force, out, err);
}

int fs_examine(int fd, uint64_t offset, uint64_t size, bool force,
	       struct fs_info *out, struct im_err *err)
{
	struct fs_source src = { .pread = fd_pread, .opaque = &fd, .fd = fd };
	return fs_examine_src(&src, offset, size, force, out, err);
}

/* libblkid wants a descriptor.  For a source without one, a sparse
 * in-memory file of the partition's size holding its first MiB and last
 * 256 KiB, where every signature libblkid knows lives. */
static int identify_src(const struct fs_source *src, uint64_t offset, uint64_t size,
			struct fs_info *out)
{
	const uint64_t head = 1u << 20, tail = 256u << 10;
	unsigned char *buf;
	int fd, r = 0;

	if (src->fd >= 0)
		return fs_identify(src->fd, offset, size, out);
	fd = memfd_create("imager-probe", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(head);
	if (!buf || ftruncate(fd, (off_t)size) < 0) {
		r = -ENOMEM;
		goto out;
	}
	{
		uint64_t n = size < head ? size : head;
		if (read_fully(src, buf, n, offset) == 0)
			util_pwrite_full(fd, buf, n, 0);
		if (size > head) {
			uint64_t t = size - head < tail ? size - head : tail;
			if (read_fully(src, buf, t, offset + size - t) == 0)
				util_pwrite_full(fd, buf, t, size - t);
		}
	}
	r = fs_identify(fd, 0, size, out);
out:
	free(buf);
	close(fd);
	return r;
}

static int examine(const struct fs_source *src, uint64_t offset, uint64_t size, bool force,
		   unsigned depth, struct fs_info *out, struct im_err *err);

int fs_examine_src(const struct fs_source *src, uint64_t offset, uint64_t size, bool force,
		   struct fs_info *out, struct im_err *err)
{
	return examine(src, offset, size, force, 0, out, err);
}

/* ---- volumes (fs_mark_volume) ---- */

struct volume_src {
	const struct fs_source *parent;
	uint64_t base;                    /* the container's start in parent */
	const struct fs_extent *ext;
	size_t n;
};

/* Volume bytes [off, off+len) through its extents. */
static int volume_pread(void *opaque, void *buf, size_t len, uint64_t off)
{
	const struct volume_src *v = opaque;
	unsigned char *out = buf;
	uint64_t at = 0;

	for (size_t i = 0; i < v->n && len; i++) {
		const struct fs_extent *e = &v->ext[i];

		if (off < at + e->length) {
			uint64_t delta = off - at, piece = e->length - delta;
			int r;

			if (piece > len)
				piece = len;
			r = v->parent->pread(v->parent->opaque, out, piece, v->base + e->offset + delta);
			if (r < 0)
				return r;
			out += piece;
			off += piece;
			len -= piece;
		}
		at += e->length;
	}
	return len ? -EIO : 0;   /* past the volume's end */
}

/* Mark the device's blocks holding bytes [off, off+len) of this device. */
static int mark_bytes(struct fs_ctx *ctx, uint64_t off, uint64_t len)
{
	uint64_t first, last;

	if (!len)
		return 0;
	first = off / ctx->block_size;
	last = (off + len - 1) / ctx->block_size;
	if (last >= ctx->block_count)
		return -EINVAL;
	return fs_mark_used(ctx, first, last - first + 1);
}

/* Volume bytes [off, off+len), wherever its extents put them. */
static int mark_volume_bytes(struct fs_ctx *ctx, const struct fs_extent *ext, size_t n,
			     uint64_t off, uint64_t len)
{
	uint64_t at = 0;

	for (size_t i = 0; i < n && len; i++) {
		if (off < at + ext[i].length) {
			uint64_t delta = off - at, piece = ext[i].length - delta;

			if (piece > len)
				piece = len;
			FORWARD_ERR(mark_bytes(ctx, ext[i].offset + delta, piece));
			off += piece;
			len -= piece;
		}
		at += ext[i].length;
	}
	return 0;
}

void fs_set_container(struct fs_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctx->container, sizeof(ctx->container), fmt, ap);
	va_end(ap);
}

static struct fs_volume *new_volume(struct fs_ctx *ctx, const char *name)
{
	struct fs_volume *v;

	if (ctx->nvolumes >= FS_MAX_VOLUMES)
		return NULL;
	v = realloc(ctx->volumes, (ctx->nvolumes + 1) * sizeof(*v));
	if (!v)
		return NULL;
	ctx->volumes = v;
	v = &ctx->volumes[ctx->nvolumes++];
	memset(v, 0, sizeof(*v));
	snprintf(v->name, sizeof(v->name), "%s", name);
	return v;
}

int fs_mark_volume(struct fs_ctx *ctx, const char *name, const struct fs_extent *ext,
		   size_t n, const char *whole_reason)
{
	struct volume_src vs = { ctx->src, ctx->base, ext, n };
	struct fs_source src = { .pread = volume_pread, .opaque = &vs, .fd = -1 };
	struct fs_info info;
	struct im_err e = { 0 };
	struct fs_volume *v;
	uint64_t total = 0, pos = 0, len;
	int r;

	if (!ctx->geometry_set || !n || !ext)
		return fs_error(ctx, -EINVAL, "%s: no extents, or no geometry yet", name);
	for (size_t i = 0; i < n; i++) {
		if (!ext[i].length || !in_bounds(ctx, ext[i].offset, ext[i].length) ||
		    ext[i].offset + ext[i].length > (uint64_t)ctx->block_size * ctx->block_count)
			return fs_error(ctx, -EINVAL, "%s: extent %zu (%llu bytes at %llu) is outside the device",
					name, i, (unsigned long long)ext[i].length,
					(unsigned long long)ext[i].offset);
		total += ext[i].length;
	}
	v = new_volume(ctx, name);
	if (!v && ctx->nvolumes < FS_MAX_VOLUMES)
		return fs_error(ctx, -ENOMEM, "out of memory");
	if (v) {
		v->size = total;
		for (size_t i = 0; i < n; i++)
			if (ext[i].offset + ext[i].length > v->end)
				v->end = ext[i].offset + ext[i].length;
	}
	if (!whole_reason && ctx->depth > 0)
		whole_reason = "a container inside a volume";
	if (!whole_reason && !v)
		whole_reason = "too many volumes";
	if (whole_reason) {
		for (size_t i = 0; i < n; i++)
			FORWARD_ERR(mark_bytes(ctx, ext[i].offset, ext[i].length));
		if (v) {
			snprintf(v->plugin, sizeof(v->plugin), "whole");
			snprintf(v->note, sizeof(v->note), "%s", whole_reason);
			v->used_bytes = total;
		}
		return 0;
	}
	r = examine(&src, 0, total, ctx->forced, ctx->depth + 1, &info, &e);
	if (r < 0) {
		fs_info_free(&info);
		return fs_error(ctx, r, "%s: %s", name, e.msg[0] ? e.msg : strerror(-r));
	}
	v = &ctx->volumes[ctx->nvolumes - 1];   /* (the array may not move, but be safe) */
	snprintf(v->type, sizeof(v->type), "%s", info.type);
	snprintf(v->uuid, sizeof(v->uuid), "%s", info.uuid);
	snprintf(v->label, sizeof(v->label), "%s", info.label);
	snprintf(v->plugin, sizeof(v->plugin), "%s", info.plugin->name);
	snprintf(v->note, sizeof(v->note), "%s", info.warning);
	v->used_bytes = info.used_blocks * info.block_size;
	r = 0;
	while (r == 0 && (len = bitmap_next_run(&info.used, &pos)) > 0) {
		uint64_t off = pos * info.block_size, bytes = len * info.block_size;

		if (off + bytes > total)
			bytes = total - off;
		r = mark_volume_bytes(ctx, ext, n, off, bytes);
		pos += len;
	}
	fs_info_free(&info);
	return r < 0 ? fs_error(ctx, r, "%s: marking its blocks", name) : 0;
}

static int examine(const struct fs_source *src, uint64_t offset, uint64_t size, bool force,
		   unsigned depth, struct fs_info *out, struct im_err *err)
{
	const struct fs_plugin *chosen = NULL;
	struct fs_ctx ctx;
	int r;

	memset(out, 0, sizeof(*out));
	identify_src(src, offset, size, out);
	ctx_init(&ctx, src, offset, size, force);
	ctx.depth = depth;

	/* libblkid's answer first; it knows far more formats than we do. */
	for (const struct fs_plugin *const *p = fs_plugins; *p && !chosen; p++)
		if (handles_type(*p, out->type) && size >= (*p)->min_size &&
		    magics_match(&ctx, *p))
			chosen = *p;
	/* Unknown to libblkid: the descriptors' magics, in registry order
	 * (the raw fallback has none and so is never chosen here). */
	if (!chosen && !out->type[0])
		for (const struct fs_plugin *const *p = fs_plugins; *p && !chosen; p++)
			if ((*p)->magics && (*p)->magics[0].magic &&
			    size >= (*p)->min_size && magics_match(&ctx, *p))
				chosen = *p;
	if (chosen && chosen->probe) {
		r = chosen->probe(&ctx);
		if (r < 0) {
			ctx_release(&ctx);
			return im_errf(err, IM_EXIT_IO, r, "%s: reading the superblock: %s",
				       chosen->name, strerror(-r));
		}
		if (r == 1) {
			snprintf(out->warning, sizeof(out->warning),
				 "%s superblock failed its checks; copied as raw data",
				 chosen->name);
			chosen = NULL;
		}
	}
	ctx_release(&ctx);
	if (!chosen)
		chosen = &fs_plugin_raw;
	ctx_init(&ctx, src, offset, size, force);
	ctx.depth = depth;
	{
		char warning[sizeof(out->warning)];
		memcpy(warning, out->warning, sizeof(warning));
		r = run_plugin(chosen, &ctx, out, err);
		if (r == 0 && !out->warning[0])
			memcpy(out->warning, warning, sizeof(warning));
	}
	ctx_release(&ctx);
	return r;
}

void fs_info_free(struct fs_info *info)
{
	bitmap_free(&info->used);
	bitmap_free(&info->blank);
	free(info->volumes);
	info->volumes = NULL;
	info->nvolumes = 0;
}
