/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The filesystem plugin contract.
 *
 * A plugin tells the engine which blocks of one filesystem hold data, so that
 * saving reads and stores only those.  It is one file in fsplugins/, with
 * everything static except one exported, const `struct fs_plugin`
 * descriptor named fs_plugin_NAME (raw.c holds two: raw and its named twin
 * crypt), listed in the ordered registry (fsplugins/registry.c).  A plugin
 * exports nothing else: what the engine needs beyond the descriptor (LVM's
 * PV rewriter and VG text mapper, a fresh swap header) lives in the engine
 * beside the format's header (lvmfmt.h, swapfmt.h), and a plugin may call
 * such engine helpers (fsplugins/lvm.c parses its metadata with lvmfmt.h's
 * parser).  Decoders of a format's structures that do no I/O (bytes in,
 * checked fields out) live in the engine too, declared in a format header
 * (include/imager/ntfsfmt.h, xfsfmt.h, btrfsfmt.h; their code in
 * imager/engine: ntfsfmt.c, xfsfmt.c, btrfsfmt.c).  `make layers`
 * (tests/lib/layers.sh) checks with nm that each plugin object defines no
 * other global symbol.
 *
 * The descriptor is data first: the engine checks `min_size` and the magics
 * before it runs any plugin code.  A plugin
 *   - never does I/O of its own: it asks the engine for bounds-checked bytes
 *     with fs_map() or fs_read();
 *   - hands results back through the setters fs_set_geometry() and
 *     fs_mark_used();
 *   - never prints, never exits, never drives progress; it explains a failure
 *     with fs_error(), which also returns the error code it was given;
 *   - treats every field it reads as hostile: sizes, counts and offsets are
 *     validated before they are used, so a crafted superblock gives an
 *     error, never a crash or a huge allocation.
 *
 * Return convention for every callback: >= 0 success, a negative errno on
 * failure.  The errno values with a meaning of their own:
 *   -EUCLEAN    the filesystem is inconsistent or was not cleanly unmounted
 *               ("run fsck"); the plugin checks fs_forced() first and, when
 *               forced, carries on instead of failing;
 *   -EINVAL     a field is out of range (a hostile or corrupt superblock);
 *   -ENOTSUP    a feature the plugin cannot handle safely;
 *   -EIO        the device could not be read;
 *   -ENOMEM     out of memory.
 */
#ifndef IMAGER_FSPLUGIN_H
#define IMAGER_FSPLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* Engine-owned state of one filesystem being examined.  Opaque to plugins. */
struct fs_ctx;

/* A magic string at a byte offset from the start of the filesystem. */
struct fs_magic {
	const char *magic;   /* bytes to compare (not necessarily text) */
	size_t len;          /* number of bytes in magic */
	uint64_t offset;     /* byte offset from the filesystem start */
};

struct fs_plugin {
	/* Short plugin name, recorded in the image manifest ("ext", "fat"). */
	const char *name;
	/* libblkid TYPE values this plugin handles, NULL terminated.  An empty
	 * list means the plugin is chosen only by its magics (or as fallback). */
	const char *const *blkid_types;
	/* Smallest filesystem, in bytes, this plugin can be asked about. */
	uint64_t min_size;
	/* Magics, terminated by an entry with magic == NULL.  When the list is
	 * not empty, at least one must match before probe() is called.  NULL
	 * means "no magic" (the raw fallback). */
	const struct fs_magic *magics;
	/* Bytes of private state; the engine allocates it zeroed, passes it to
	 * every callback and frees it after close(). */
	size_t priv_size;

	/* Is this filesystem ours?  Verify geometry invariants (and checksums
	 * where the format has them), not only the magic.
	 * Returns 0 = mine, 1 = not mine, negative errno = could not tell (I/O).
	 * May be NULL when the magics alone decide. */
	int (*probe)(struct fs_ctx *ctx);

	/* Read and validate the superblock and declare the geometry with
	 * fs_set_geometry() exactly once.  Refuse an unclean filesystem with
	 * -EUCLEAN unless fs_forced(ctx).  Returns 0 or a negative errno. */
	int (*open)(struct fs_ctx *ctx, void *priv);

	/* Mark every block that holds data (metadata included) with
	 * fs_mark_used().  Cross-check the allocation counts the format keeps
	 * (free counts in the superblock and group descriptors against the
	 * bitmaps) and fail with -EUCLEAN on disagreement unless forced.
	 * Called once, after a successful open().  Returns 0 or negative errno. */
	int (*used_blocks)(struct fs_ctx *ctx, void *priv);

	/* Release what open() acquired (memory only: the engine owns all I/O
	 * and mapped buffers).  May be NULL.  Called whenever open() was. */
	void (*close)(struct fs_ctx *ctx, void *priv);
};

/* ---- services the engine offers to plugins ---- */

/* Size in bytes of the device or partition holding the filesystem. */
uint64_t fs_device_size(const struct fs_ctx *ctx);

/* True when the user asked to go on despite an unclean or inconsistent
 * filesystem (--force). */
bool fs_forced(const struct fs_ctx *ctx);

/* Bytes [offset, offset+len) of the filesystem, cached by the engine and
 * valid until the context is destroyed.  Bounds-checked against the device
 * size; len is limited to FS_MAP_MAX, and the total mapped per context to
 * FS_MAP_TOTAL_MAX.  Returns NULL and sets *err to -EINVAL (out of bounds,
 * too large), -EIO or -ENOMEM on failure.  Use it for superblocks and
 * descriptor tables, which are read once and kept. */
#define FS_MAP_MAX        (64u << 20)
#define FS_MAP_TOTAL_MAX  (256u << 20)
const void *fs_map(struct fs_ctx *ctx, uint64_t offset, size_t len, int *err);

/* Copy bytes [offset, offset+len) into buf (the plugin's own buffer, for
 * data read once in a loop, such as per-group bitmaps).  Bounds-checked.
 * Returns 0, -EINVAL (out of bounds) or -EIO. */
int fs_read(struct fs_ctx *ctx, uint64_t offset, void *buf, size_t len);

/* Declare the unit of the used-block bitmap and how many such blocks the
 * filesystem spans from its start.  block_size must be a power of two in
 * [512, 1 MiB]; block_size * block_count must not exceed the device size.
 * The engine allocates the bitmap (one bit per block, all clear).
 * Returns 0, -EINVAL or -ENOMEM.  Call once, from open(). */
int fs_set_geometry(struct fs_ctx *ctx, uint32_t block_size, uint64_t block_count);

/* Mark blocks [first, first+count) as used.  Returns 0, or -EINVAL when the
 * range is outside the declared geometry (nothing is marked then). */
int fs_mark_used(struct fs_ctx *ctx, uint64_t first, uint64_t count);

/* Mark blocks [first, first+count), used ones, as blank: their content does
 * not matter to the filesystem (an ext4 group's inode table past its last
 * used inode, which the kernel and e2fsck never read), so save stores them
 * as zeros without reading them (clone still copies them).  Only for
 * what a consistent filesystem says: never when forced.  Returns 0,
 * -EINVAL outside the geometry or -ENOMEM. */
int fs_mark_blank(struct fs_ctx *ctx, uint64_t first, uint64_t count);

/* Is block n marked used?  (false outside the geometry) */
bool fs_is_used(const struct fs_ctx *ctx, uint64_t n);

/* Record a human-readable explanation of a failure, and return err so a
 * plugin can write `return fs_error(ctx, -EINVAL, "bad block size %u", x);`.
 * The first message recorded wins. */
int fs_error(struct fs_ctx *ctx, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Record a warning (the filesystem is usable, but something is worth
 * telling, e.g. "FSInfo free count stale").  Never fails. */
void fs_warn(struct fs_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- volumes inside a container (LVM physical volumes) ---- */

/* One stretch of a volume: bytes [offset, offset+length) of this device. */
struct fs_extent {
	uint64_t offset, length;
};

/* The most volumes one container may report; more are kept whole. */
#define FS_MAX_VOLUMES 256

/*
 * A volume held by this device (an LVM logical volume: its segments on this
 * physical volume, in the volume's own order) whose bytes are a filesystem
 * of their own.  The engine examines the concatenated extents as it
 * examines a partition (libblkid, then the plugins' magics, else the raw
 * fallback; --force applies), and marks the blocks that filesystem uses as
 * blocks of this device in this context's map (a block of this device is
 * used when any byte of it is).  With whole_reason non-NULL the extents are
 * marked used whole, without looking inside, and the reason is recorded
 * ("thin pool", "striped across 2 PVs").  Volumes are not examined more
 * than one level deep (a container inside a volume is kept whole).
 * name names the volume in messages and in the report ("vg0/root").
 * Extents must lie inside the device and inside the declared geometry.
 * Returns 0; -EINVAL (bad extents, no geometry yet); the nested plugin's
 * own failure (-EUCLEAN unclean, ...) with its message prefixed by name.
 */
int fs_mark_volume(struct fs_ctx *ctx, const char *name, const struct fs_extent *ext,
		   size_t n, const char *whole_reason);

/* Describe the container for the report ("LVM2 VG vg0, 2 LVs"). */
void fs_set_container(struct fs_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- the registry (fsplugins/registry.c) ---- */

/* NULL-terminated, ordered list of plugins; the last is the raw fallback. */
extern const struct fs_plugin *const fs_plugins[];
/* The raw fallback: every block, all-zero blocks are not stored. */
extern const struct fs_plugin fs_plugin_raw;

#endif
