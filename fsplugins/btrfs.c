/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * btrfs on a single device.
 *
 * Used blocks: the first MiB of the device (btrfs never allocates there: it
 * holds the primary superblock at 64 KiB and is left to boot loaders, see
 * btrfs-progs Documentation/ch-bootloaders.rst and its
 * BTRFS_BLOCK_RESERVED_1M_FOR_SUPER), every superblock copy that fits in the
 * device (64 MiB and 256 GiB), and every extent the extent tree records --
 * data extents (EXTENT_ITEM) and tree blocks (METADATA_ITEM with
 * skinny-metadata, whose length is the node size, or EXTENT_ITEM without),
 * each mapped through the chunk tree to every copy on this device (DUP keeps
 * two).  The chunk, root and extent tree blocks read on the way are marked
 * too; they are also in the extent tree.  Cross-check: the extents add up to
 * the superblock's bytes_used (logical bytes, copies counted once).
 *
 * The path to the extents: the superblock's system chunk array maps the
 * chunk tree, the chunk tree maps every logical address, the root tree
 * holds the extent tree's root item.  Layouts and constants (in
 * include/imager/btrfsfmt.h, with the key and superblock decoders of
 * imager/engine/fs/btrfsfmt.c) are those of
 * the kernel's include/uapi/linux/btrfs_tree.h and btrfs-progs'
 * kernel-shared/ (uapi/btrfs_tree.h, uapi/btrfs.h, ctree.h, disk-io.h,
 * volumes.h); the read-time checks on tree blocks follow the kernel's
 * (checksum, bytenr, fsid, level, generation against the parent pointer,
 * first key against the parent's key, item bounds).
 *
 * Refused (-ENOTSUP, no --force): more than one device (a member cannot be
 * restored on its own), RAID5/6 chunks, chunks whose copies live on other
 * devices (RAID1/RAID1C3/C4/RAID10, striped RAID0), and the incompatible
 * features that change where blocks are or who records them:
 * extent-tree-v2, raid-stripe-tree, zoned, remap-tree, and unknown ones.
 *
 * Unclean (-EUCLEAN unless forced): a log tree waiting for replay
 * (log_root != 0), the superblock's error flag, an interrupted btrfstune,
 * and any inconsistency met on the way (a tree block failing its checks on
 * every copy, extents out of order or outside the chunks, the extents' sum
 * differing from bytes_used).  Forced, every allocated chunk is kept whole:
 * that holds whatever the trees may point to (the log tree and the data it
 * logged are not in the extent tree), so the copy mounts and replays as
 * the original would.  If even the chunk tree cannot be read, the whole
 * device is kept.
 *
 * Checksums: crc32c and xxhash64 are verified, on the superblock and on
 * every tree block; sha256 and blake2b are not (the other checks still
 * apply) and a warning says so.
 */
#include "imager/fsplugin.h"
#include "imager/bytes.h"
#include "imager/btrfsfmt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* At most two copies of a chunk on one device (DUP); more chunks than
 * this would take over 100 MB to hold and no real filesystem has them
 * (a 1 PiB filesystem of 1 GiB data chunks has a million). */
#define MAX_COPIES            2u
#define MAX_CHUNKS            (1u << 21)

struct chunk {
	uint64_t logical, length, type;
	uint64_t phys[MAX_COPIES];
	uint32_t copies;
};

/* What to keep when the trees cannot be trusted (forced only). */
enum fallback { KEEP_EXTENTS, KEEP_CHUNKS, KEEP_DEVICE };

struct btrfs_priv {
	struct btrfs_super s;            /* what the superblock says */
	enum fallback fallback;          /* decided by open(), when forced */

	struct chunk *chunks;            /* sorted by logical, disjoint */
	size_t nchunks, cap;
	unsigned char *level_buf[BTRFS_MAX_LEVEL];   /* one tree block per level */
	uint64_t visits, visit_limit;
	uint32_t dev_items;
	uint64_t extent_root, extent_root_gen;
	uint8_t extent_root_level;
	bool extent_root_found;
	uint64_t extent_sum, extent_end;
	uint32_t crc_table[256];

	char why[320];                   /* the first inconsistency met */
	char notes[400];                 /* warnings, given once at the end */
};

/* ---- little helpers ---- */

/* CRC-32C as btrfs stores it: reflected 0x82F63B78, start ~0, final ~. */
static void crc_init(uint32_t table[256])
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
		table[i] = c;
	}
}

static uint32_t crc32c(const uint32_t table[256], const unsigned char *p, size_t len)
{
	uint32_t c = ~0u;

	while (len--)
		c = table[(c ^ *p++) & 0xFF] ^ (c >> 8);
	return ~c;
}

static uint32_t crc32c_slow(const unsigned char *p, size_t len)
{
	uint32_t c = ~0u;

	while (len--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
	}
	return ~c;
}

/* Does the checksum at the start of buf (covering buf[32..len)) match?
 * Types that are not verified count as matching. */
static bool csum_ok(const struct btrfs_priv *p, uint16_t type, const unsigned char *buf,
		    size_t len)
{
	switch (type) {
	case BTRFS_CSUM_CRC32C:
		return (p ? crc32c(p->crc_table, buf + BTRFS_CSUM_SIZE, len - BTRFS_CSUM_SIZE)
			  : crc32c_slow(buf + BTRFS_CSUM_SIZE, len - BTRFS_CSUM_SIZE)) == le32(buf);
	case BTRFS_CSUM_XXHASH:
		return XXH64(buf + BTRFS_CSUM_SIZE, len - BTRFS_CSUM_SIZE, 0) == le64(buf);
	default:
		return true;
	}
}

static const char *csum_name(uint16_t type)
{
	static const char *const names[] = { "crc32c", "xxhash64", "sha256", "blake2b" };
	return type < 4 ? names[type] : "unknown";
}

/* Record the first inconsistency (judged once, at the top: an error, or
 * when forced a warning and a wider fallback).  Returns -EUCLEAN. */
static int bad(struct btrfs_priv *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int bad(struct btrfs_priv *p, const char *fmt, ...)
{
	va_list ap;

	if (!p->why[0]) {
		va_start(ap, fmt);
		vsnprintf(p->why, sizeof(p->why), fmt, ap);
		va_end(ap);
	}
	return -EUCLEAN;
}

static void note(struct btrfs_priv *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note(struct btrfs_priv *p, const char *fmt, ...)
{
	size_t n = strlen(p->notes);
	va_list ap;

	if (n && n + 2 < sizeof(p->notes)) {
		memcpy(p->notes + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(p->notes + n, sizeof(p->notes) - n, fmt, ap);
	va_end(ap);
}

/* ---- the superblock ---- */

static const unsigned char *map_superblock(struct fs_ctx *ctx, int *err)
{
	const unsigned char *sb;

	*err = 0;
	if (fs_device_size(ctx) < BTRFS_SB_OFFSET + BTRFS_SB_SIZE) {
		*err = -EINVAL;
		return NULL;
	}
	sb = fs_map(ctx, BTRFS_SB_OFFSET, BTRFS_SB_SIZE, err);
	if (sb && memcmp(sb + BTRFS_SB_MAGIC, BTRFS_MAGIC, 8) != 0) {
		*err = -EINVAL;
		return NULL;
	}
	return sb;
}

/* The superblock's fields (btrfs_parse_super), or -EINVAL with the reason
 * given. */
static int parse_super(struct fs_ctx *ctx, const unsigned char *sb, struct btrfs_priv *p)
{
	struct im_err err = { 0 };
	int r = btrfs_parse_super(sb, fs_device_size(ctx), &p->s, &err);

	return r < 0 ? fs_error(ctx, r, "%s", err.msg) : 0;
}

static int btrfs_probe(struct fs_ctx *ctx)
{
	struct btrfs_priv *p;
	const unsigned char *sb;
	int err, r;

	sb = map_superblock(ctx, &err);
	if (!sb)
		return err == -EINVAL ? 1 : err;
	if (le16(sb + BTRFS_SB_CSUM_TYPE) <= BTRFS_CSUM_BLAKE2 &&
	    !csum_ok(NULL, le16(sb + BTRFS_SB_CSUM_TYPE), sb, BTRFS_SB_SIZE))
		return 1;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	r = parse_super(ctx, sb, p) == 0 ? 0 : 1;
	free(p);
	return r;
}

/* ---- the chunk map ---- */

static const struct chunk *find_chunk(const struct btrfs_priv *p, uint64_t logical)
{
	size_t lo = 0, hi = p->nchunks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct chunk *c = &p->chunks[mid];
		if (logical < c->logical)
			hi = mid;
		else if (logical - c->logical >= c->length)
			lo = mid + 1;
		else
			return c;
	}
	return NULL;
}

/* Index of the first chunk starting at or after logical. */
static size_t chunk_slot(const struct btrfs_priv *p, uint64_t logical)
{
	size_t lo = 0, hi = p->nchunks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->chunks[mid].logical < logical)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const char *profile_name(uint64_t type)
{
	switch (type & BTRFS_BG_PROFILE_MASK) {
	case 0: return "single";
	case BTRFS_BG_RAID0: return "RAID0";
	case BTRFS_BG_RAID1: return "RAID1";
	case BTRFS_BG_DUP: return "DUP";
	case BTRFS_BG_RAID10: return "RAID10";
	case BTRFS_BG_RAID5: return "RAID5";
	case BTRFS_BG_RAID6: return "RAID6";
	case BTRFS_BG_RAID1C3: return "RAID1C3";
	case BTRFS_BG_RAID1C4: return "RAID1C4";
	default: return "mixed";
	}
}

/* Add the chunk at logical described by c (item of size bytes, from the
 * chunk tree or the system chunk array).  Returns 0, -EUCLEAN (recorded in
 * p->why), -ENOTSUP or -ENOMEM (recorded with fs_error). */
static int add_chunk(struct fs_ctx *ctx, struct btrfs_priv *p, uint64_t logical,
		     const unsigned char *c, size_t size)
{
	struct chunk n = { .logical = logical };
	uint64_t profile;
	uint16_t stripes;
	size_t at;

	if (size < BTRFS_CHUNK_HEAD_SIZE + BTRFS_STRIPE_SIZE)
		return bad(p, "chunk item at %llu is %zu bytes", (unsigned long long)logical, size);
	stripes = le16(c + BTRFS_CHUNK_NUM_STRIPES);
	if (stripes == 0 || size != BTRFS_CHUNK_HEAD_SIZE + (size_t)stripes * BTRFS_STRIPE_SIZE)
		return bad(p, "chunk item at %llu: %u stripes in %zu bytes",
			   (unsigned long long)logical, stripes, size);
	n.length = le64(c + BTRFS_CHUNK_LENGTH);
	n.type = le64(c + BTRFS_CHUNK_TYPE);
	if (!n.length || n.length % p->s.sectorsize || logical % p->s.sectorsize ||
	    logical + n.length < logical)
		return bad(p, "chunk at %llu of %llu bytes is not sector-aligned",
			   (unsigned long long)logical, (unsigned long long)n.length);
	if (le64(c + BTRFS_CHUNK_STRIPE_LEN) != BTRFS_STRIPE_LEN)
		return bad(p, "chunk at %llu has a stripe length of %llu",
			   (unsigned long long)logical,
			   (unsigned long long)le64(c + BTRFS_CHUNK_STRIPE_LEN));
	profile = n.type & BTRFS_BG_PROFILE_MASK;
	if (!(n.type & BTRFS_BG_TYPE_MASK) || (profile & (profile - 1)))
		return bad(p, "chunk at %llu has type 0x%llx", (unsigned long long)logical,
			   (unsigned long long)n.type);
	if (n.type & ~(BTRFS_BG_TYPE_MASK | BTRFS_BG_PROFILE_MASK))
		return fs_error(ctx, -ENOTSUP, "chunk at %llu has unknown type bits 0x%llx",
				(unsigned long long)logical,
				(unsigned long long)(n.type & ~(BTRFS_BG_TYPE_MASK | BTRFS_BG_PROFILE_MASK)));
	if (profile & (BTRFS_BG_RAID5 | BTRFS_BG_RAID6))
		return fs_error(ctx, -ENOTSUP,
				"a %s chunk at %llu: parity profiles are not supported (and need several devices)",
				profile_name(n.type), (unsigned long long)logical);
	if ((profile & (BTRFS_BG_RAID1 | BTRFS_BG_RAID1C3 | BTRFS_BG_RAID1C4 | BTRFS_BG_RAID10)) ||
	    (profile == BTRFS_BG_RAID0 && stripes != 1))
		return fs_error(ctx, -ENOTSUP,
				"a %s chunk of %u stripes at %llu: its copies belong on other devices (a multi-device or degraded filesystem)",
				profile_name(n.type), stripes, (unsigned long long)logical);
	if (stripes != (profile == BTRFS_BG_DUP ? 2 : 1))
		return bad(p, "%s chunk at %llu has %u stripes", profile_name(n.type),
			   (unsigned long long)logical, stripes);
	for (uint16_t i = 0; i < stripes; i++) {
		const unsigned char *s = c + BTRFS_CHUNK_HEAD_SIZE + (size_t)i * BTRFS_STRIPE_SIZE;
		uint64_t devid = le64(s + BTRFS_STRIPE_DEVID), off = le64(s + BTRFS_STRIPE_OFFSET);

		if (devid != p->s.devid)
			return bad(p, "chunk at %llu has a copy on device %llu; this is device %llu of a one-device filesystem",
				   (unsigned long long)logical, (unsigned long long)devid,
				   (unsigned long long)p->s.devid);
		if (off % p->s.sectorsize || off > p->s.dev_bytes || n.length > p->s.dev_bytes - off)
			return bad(p, "chunk at %llu: copy at %llu of %llu bytes lies outside the %llu-byte device",
				   (unsigned long long)logical, (unsigned long long)off,
				   (unsigned long long)n.length, (unsigned long long)p->s.dev_bytes);
		n.phys[i] = off;
	}
	n.copies = stripes;

	/* Sorted insert (the tree gives chunks in order: at the end, no
	 * moving); the system array's chunks come again from the tree. */
	at = chunk_slot(p, logical);
	if (at < p->nchunks && p->chunks[at].logical == logical) {
		const struct chunk *o = &p->chunks[at];
		if (o->length != n.length || o->type != n.type || o->copies != n.copies ||
		    memcmp(o->phys, n.phys, sizeof(n.phys)) != 0)
			return bad(p, "two different chunks at %llu", (unsigned long long)logical);
		return 0;
	}
	if ((at < p->nchunks && logical + n.length > p->chunks[at].logical) ||
	    (at > 0 && p->chunks[at - 1].logical + p->chunks[at - 1].length > logical))
		return bad(p, "chunk at %llu overlaps another", (unsigned long long)logical);
	if (p->nchunks == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		struct chunk *m;
		if (p->nchunks >= MAX_CHUNKS)
			return fs_error(ctx, -ENOTSUP, "more than %u chunks", MAX_CHUNKS);
		m = realloc(p->chunks, cap * sizeof(*m));
		if (!m)
			return fs_error(ctx, -ENOMEM, "out of memory");
		p->chunks = m;
		p->cap = cap;
	}
	memmove(p->chunks + at + 1, p->chunks + at, (p->nchunks - at) * sizeof(*p->chunks));
	p->chunks[at] = n;
	p->nchunks++;
	return 0;
}

/* The system chunk array: (key, chunk) pairs, enough to read the chunk
 * tree. */
static int parse_sys_array(struct fs_ctx *ctx, struct btrfs_priv *p)
{
	uint32_t at = 0;

	while (at < p->s.sys_array_size) {
		const unsigned char *c;
		struct btrfs_key k;
		size_t len;
		int r;

		if (p->s.sys_array_size - at < BTRFS_KEY_SIZE + BTRFS_CHUNK_HEAD_SIZE)
			return bad(p, "system chunk array: %u bytes left over",
				   p->s.sys_array_size - at);
		btrfs_read_key(p->s.sys_array + at, &k);
		if (k.type != BTRFS_KEY_CHUNK_ITEM || k.objectid != BTRFS_FIRST_CHUNK_TREE_OBJECTID)
			return bad(p, "system chunk array: key type %u at byte %u", k.type, at);
		c = p->s.sys_array + at + BTRFS_KEY_SIZE;
		len = BTRFS_CHUNK_HEAD_SIZE + (size_t)le16(c + BTRFS_CHUNK_NUM_STRIPES) * BTRFS_STRIPE_SIZE;
		if (len > p->s.sys_array_size - at - BTRFS_KEY_SIZE)
			return bad(p, "system chunk array: chunk at %llu runs past its end",
				   (unsigned long long)k.offset);
		if (!(le64(c + BTRFS_CHUNK_TYPE) & BTRFS_BG_SYSTEM))
			return bad(p, "system chunk array: chunk at %llu is not a system chunk",
				   (unsigned long long)k.offset);
		r = add_chunk(ctx, p, k.offset, c, len);
		if (r < 0)
			return r;
		at += (uint32_t)(BTRFS_KEY_SIZE + len);
	}
	return 0;
}

/* Mark every copy of the logical range on this device.  The range must lie
 * inside one chunk. */
static int mark_logical(struct fs_ctx *ctx, struct btrfs_priv *p, uint64_t logical,
			uint64_t len, const char *what)
{
	const struct chunk *c = find_chunk(p, logical);

	if (!c || len > c->length - (logical - c->logical))
		return bad(p, "%s at %llu (%llu bytes) is outside every chunk", what,
			   (unsigned long long)logical, (unsigned long long)len);
	for (uint32_t i = 0; i < c->copies; i++) {
		uint64_t phys = c->phys[i] + (logical - c->logical);
		uint64_t first = phys / p->s.sectorsize;
		uint64_t last = (phys + len - 1) / p->s.sectorsize;
		int r = fs_mark_used(ctx, first, last - first + 1);
		if (r < 0)
			return fs_error(ctx, r, "marking %s at %llu", what,
					(unsigned long long)logical);
	}
	return 0;
}

static int mark_all_chunks(struct fs_ctx *ctx, struct btrfs_priv *p)
{
	for (size_t i = 0; i < p->nchunks; i++) {
		int r = mark_logical(ctx, p, p->chunks[i].logical, p->chunks[i].length, "chunk");
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- tree walks ---- */

struct walk {
	const char *name;              /* "chunk tree", for messages */
	uint64_t owner;
	struct btrfs_key prev;               /* the last leaf key seen */
	bool have_prev;
	int (*item)(struct fs_ctx *ctx, struct btrfs_priv *p, const struct btrfs_key *k,
		    const unsigned char *data, uint32_t size);
};

/* Check a tree block read from logical; returns NULL when it is good, or
 * the reason. */
static const char *check_block(const struct btrfs_priv *p, const struct walk *w,
			       const unsigned char *b, uint64_t logical, uint8_t level,
			       uint64_t gen)
{
	uint32_t n = le32(b + BTRFS_HDR_NRITEMS);
	uint32_t room = p->s.nodesize - BTRFS_HDR_SIZE;

	if (!csum_ok(p, p->s.csum_type, b, p->s.nodesize))
		return "fails its checksum";
	if (le64(b + BTRFS_HDR_BYTENR) != logical)
		return "holds another block (bytenr)";
	if (memcmp(b + BTRFS_HDR_FSID, p->s.meta_fsid, 16) != 0)
		return "belongs to another filesystem (fsid)";
	if (b[BTRFS_HDR_LEVEL] != level)
		return "has the wrong level";
	if (gen && le64(b + BTRFS_HDR_GENERATION) != gen)
		return "has the wrong generation (a lost write?)";
	if (le64(b + BTRFS_HDR_GENERATION) > p->s.generation)
		return "is newer than the superblock";
	if (le64(b + BTRFS_HDR_OWNER) != w->owner)
		return "belongs to another tree (owner)";
	if ((uint64_t)n * (level ? BTRFS_KEY_PTR_SIZE : BTRFS_ITEM_SIZE) > room)
		return "claims more items than fit";
	return NULL;
}

/* Read a tree block into p->level_buf[level], trying each copy.  Returns 0
 * or -EUCLEAN/-EIO. */
static int read_block(struct fs_ctx *ctx, struct btrfs_priv *p, const struct walk *w,
		      uint64_t logical, uint8_t level, uint64_t gen)
{
	const struct chunk *c = find_chunk(p, logical);
	unsigned char *b = p->level_buf[level];
	const char *why = "has no copy";

	if (!c || p->s.nodesize > c->length - (logical - c->logical))
		return bad(p, "%s block at %llu is outside every chunk", w->name,
			   (unsigned long long)logical);
	if (!(c->type & (BTRFS_BG_METADATA | BTRFS_BG_SYSTEM)))
		return bad(p, "%s block at %llu lies in a data chunk", w->name,
			   (unsigned long long)logical);
	if (++p->visits > p->visit_limit)
		return bad(p, "more tree blocks than bytes_used accounts for (a loop in the %s?)",
			   w->name);
	for (uint32_t i = 0; i < c->copies; i++) {
		int r = fs_read(ctx, c->phys[i] + (logical - c->logical), b, p->s.nodesize);
		if (r < 0)
			return fs_error(ctx, r, "reading the %s block at %llu", w->name,
					(unsigned long long)logical);
		why = check_block(p, w, b, logical, level, gen);
		if (!why) {
			if (i > 0)
				note(p, "the first copy of the %s block at %llu is damaged, the copy at %llu is good",
				     w->name, (unsigned long long)logical,
				     (unsigned long long)c->phys[i]);
			return mark_logical(ctx, p, logical, p->s.nodesize, w->name);
		}
	}
	return bad(p, "%s block at %llu %s", w->name, (unsigned long long)logical, why);
}

/* Walk the subtree at logical (level, generation gen; first key must be
 * *first when given), calling w->item on every leaf item in key order. */
static int walk_block(struct fs_ctx *ctx, struct btrfs_priv *p, struct walk *w,
		      uint64_t logical, uint8_t level, uint64_t gen, const struct btrfs_key *first)
{
	const unsigned char *b;
	uint32_t n;
	int r;

	r = read_block(ctx, p, w, logical, level, gen);
	if (r < 0)
		return r;
	b = p->level_buf[level];
	n = le32(b + BTRFS_HDR_NRITEMS);
	if (n == 0 && (first || level))
		return bad(p, "%s block at %llu is empty", w->name, (unsigned long long)logical);
	if (first && n) {
		struct btrfs_key k;
		btrfs_read_key(b + BTRFS_HDR_SIZE, &k);
		if (btrfs_key_cmp(&k, first) != 0)
			return bad(p, "%s block at %llu does not start with its parent's key",
				   w->name, (unsigned long long)logical);
	}
	if (level == 0) {
		uint32_t room = p->s.nodesize - BTRFS_HDR_SIZE;
		for (uint32_t i = 0; i < n; i++) {
			const unsigned char *it = b + BTRFS_HDR_SIZE + (size_t)i * BTRFS_ITEM_SIZE;
			uint32_t off = le32(it + BTRFS_KEY_SIZE), size = le32(it + BTRFS_KEY_SIZE + 4);
			struct btrfs_key k;

			btrfs_read_key(it, &k);
			if (w->have_prev && btrfs_key_cmp(&w->prev, &k) >= 0)
				return bad(p, "%s: keys out of order in the leaf at %llu",
					   w->name, (unsigned long long)logical);
			w->prev = k;
			w->have_prev = true;
			if (off < n * BTRFS_ITEM_SIZE || off > room || size > room - off)
				return bad(p, "%s: item %u of the leaf at %llu lies outside it",
					   w->name, i, (unsigned long long)logical);
			r = w->item(ctx, p, &k, b + BTRFS_HDR_SIZE + off, size);
			if (r < 0)
				return r;
		}
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		/* The parent's buffer is overwritten by nothing below it: each
		 * level has its own. */
		const unsigned char *kp = p->level_buf[level] + BTRFS_HDR_SIZE + (size_t)i * BTRFS_KEY_PTR_SIZE;
		uint64_t child = le64(kp + BTRFS_KEY_SIZE), child_gen = le64(kp + BTRFS_KEY_SIZE + 8);
		struct btrfs_key k;

		btrfs_read_key(kp, &k);
		if (i > 0) {
			struct btrfs_key prev;
			btrfs_read_key(kp - BTRFS_KEY_PTR_SIZE, &prev);
			if (btrfs_key_cmp(&prev, &k) >= 0)
				return bad(p, "%s: keys out of order in the node at %llu",
					   w->name, (unsigned long long)logical);
		}
		if (child % p->s.sectorsize || !child_gen || child_gen > p->s.generation)
			return bad(p, "%s: node at %llu points to block %llu of generation %llu",
				   w->name, (unsigned long long)logical,
				   (unsigned long long)child, (unsigned long long)child_gen);
		r = walk_block(ctx, p, w, child, (uint8_t)(level - 1), child_gen, &k);
		if (r < 0)
			return r;
	}
	return 0;
}

static int chunk_tree_item(struct fs_ctx *ctx, struct btrfs_priv *p, const struct btrfs_key *k,
			   const unsigned char *data, uint32_t size)
{
	if (k->type == BTRFS_KEY_CHUNK_ITEM) {
		if (k->objectid != BTRFS_FIRST_CHUNK_TREE_OBJECTID)
			return bad(p, "chunk item with objectid %llu",
				   (unsigned long long)k->objectid);
		return add_chunk(ctx, p, k->offset, data, size);
	}
	if (k->type == BTRFS_KEY_DEV_ITEM && k->objectid == BTRFS_DEV_ITEMS_OBJECTID) {
		if (++p->dev_items > 1 || k->offset != p->s.devid)
			return bad(p, "the chunk tree lists device %llu; the superblock says device %llu is the only one",
				   (unsigned long long)k->offset, (unsigned long long)p->s.devid);
	}
	return 0;
}

static int root_tree_item(struct fs_ctx *ctx, struct btrfs_priv *p, const struct btrfs_key *k,
			  const unsigned char *data, uint32_t size)
{
	(void)ctx;
	if (k->objectid != BTRFS_EXTENT_TREE_OBJECTID || k->type != BTRFS_KEY_ROOT_ITEM)
		return 0;
	if (size < BTRFS_ROOT_ITEM_MIN_SIZE)
		return bad(p, "the extent tree's root item is %u bytes", size);
	p->extent_root = le64(data + BTRFS_ROOT_ITEM_BYTENR);
	p->extent_root_gen = le64(data + BTRFS_ROOT_ITEM_GENERATION);
	p->extent_root_level = data[BTRFS_ROOT_ITEM_LEVEL];
	if (p->extent_root % p->s.sectorsize || !p->extent_root ||
	    p->extent_root_level >= BTRFS_MAX_LEVEL || !p->extent_root_gen ||
	    p->extent_root_gen > p->s.generation)
		return bad(p, "the extent tree's root item points to %llu, level %u, generation %llu",
			   (unsigned long long)p->extent_root, p->extent_root_level,
			   (unsigned long long)p->extent_root_gen);
	p->extent_root_found = true;
	return 0;
}

static int extent_tree_item(struct fs_ctx *ctx, struct btrfs_priv *p, const struct btrfs_key *k,
			    const unsigned char *data, uint32_t size)
{
	uint64_t start = k->objectid, len;
	int r;

	(void)data;
	(void)size;
	if (k->type == BTRFS_KEY_EXTENT_ITEM) {
		len = k->offset;
	} else if (k->type == BTRFS_KEY_METADATA_ITEM) {
		if (k->offset >= BTRFS_MAX_LEVEL)
			return bad(p, "tree block at %llu has level %llu",
				   (unsigned long long)start, (unsigned long long)k->offset);
		len = p->s.nodesize;
	} else {
		return 0;
	}
	if (!len || start % p->s.sectorsize || len % p->s.sectorsize || start + len < start)
		return bad(p, "extent at %llu of %llu bytes is not sector-aligned",
			   (unsigned long long)start, (unsigned long long)len);
	if (start < p->extent_end)
		return bad(p, "extent at %llu overlaps the one before it",
			   (unsigned long long)start);
	p->extent_end = start + len;
	r = mark_logical(ctx, p, start, len, "extent");
	if (r < 0)
		return r;
	p->extent_sum += len;
	return 0;
}

/* ---- the plugin ---- */

static int btrfs_open(struct fs_ctx *ctx, void *priv)
{
	struct btrfs_priv *p = priv;
	const unsigned char *sb;
	uint64_t unknown;
	int r;

	sb = map_superblock(ctx, &r);
	if (!sb)
		return r == -EINVAL ? fs_error(ctx, r, "no btrfs superblock") : r;
	r = parse_super(ctx, sb, p);
	if (r < 0)
		return r;
	crc_init(p->crc_table);
	if (!csum_ok(p, p->s.csum_type, sb, BTRFS_SB_SIZE)) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN, "superblock %s checksum mismatch",
					csum_name(p->s.csum_type));
		note(p, "superblock checksum mismatch, going on as forced");
	}
	if (p->s.csum_type > BTRFS_CSUM_XXHASH)
		note(p, "%s checksums are not verified; the trees were checked by their structure only",
		     csum_name(p->s.csum_type));

	if (p->s.incompat & BTRFS_INCOMPAT_EXTENT_TREE_V2)
		return fs_error(ctx, -ENOTSUP,
				"the extent-tree-v2 feature (experimental: extents kept in per-block-group trees) is not supported");
	if (p->s.incompat & BTRFS_INCOMPAT_RAID_STRIPE_TREE)
		return fs_error(ctx, -ENOTSUP,
				"the raid-stripe-tree feature (a second map of data addresses) is not supported");
	if (p->s.incompat & BTRFS_INCOMPAT_REMAP_TREE)
		return fs_error(ctx, -ENOTSUP,
				"the remap-tree feature (relocated addresses) is not supported");
	if (p->s.incompat & BTRFS_INCOMPAT_ZONED)
		return fs_error(ctx, -ENOTSUP,
				"a zoned btrfs (superblocks in zones, sequential writes) is not supported");
	unknown = p->s.incompat & ~BTRFS_INCOMPAT_UNDERSTOOD;
	if (unknown)
		return fs_error(ctx, -ENOTSUP, "unknown incompatible features 0x%llx",
				(unsigned long long)unknown);
	if (p->s.num_devices != 1)
		return fs_error(ctx, -ENOTSUP,
				"a btrfs over %llu devices (this is device %llu): a member cannot be saved or restored on its own; make it one device first (btrfs balance start -dconvert=single -mconvert=dup, then btrfs device remove)",
				(unsigned long long)p->s.num_devices, (unsigned long long)p->s.devid);
	if (p->s.compat_ro & ~BTRFS_COMPAT_RO_KNOWN)
		note(p, "unknown read-only-compatible features 0x%llx (they do not move blocks)",
		     (unsigned long long)(p->s.compat_ro & ~BTRFS_COMPAT_RO_KNOWN));

	/* Not clean: said now, or when forced, kept whole. */
	if (p->s.log_root) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"the filesystem was not unmounted cleanly (a log tree at %llu awaits replay): mount it once, or run btrfs rescue zero-log",
					(unsigned long long)p->s.log_root);
		note(p, "a log tree awaits replay");
		p->fallback = KEEP_CHUNKS;
	}
	if (p->s.flags & BTRFS_SUPER_FLAG_ERROR) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN, "the filesystem has errors recorded: run btrfs check");
		note(p, "errors recorded");
		p->fallback = KEEP_CHUNKS;
	}
	if (p->s.flags & BTRFS_SUPER_FLAG_CHANGING) {
		if (!fs_forced(ctx))
			return fs_error(ctx, -EUCLEAN,
					"a btrfstune change was interrupted (flags 0x%llx): run btrfstune again to finish it",
					(unsigned long long)p->s.flags);
		note(p, "an interrupted btrfstune change");
		p->fallback = KEEP_CHUNKS;
	}

	/* Every tree block read is counted in bytes_used (chunk, root and
	 * extent trees all are): more visits than that is a loop. */
	p->visit_limit = p->s.bytes_used / p->s.nodesize + 64;
	for (unsigned l = 0; l < BTRFS_MAX_LEVEL; l++) {
		p->level_buf[l] = malloc(p->s.nodesize);
		if (!p->level_buf[l])
			return fs_error(ctx, -ENOMEM, "out of memory");
	}
	return fs_set_geometry(ctx, p->s.sectorsize, p->s.dev_bytes / p->s.sectorsize);
}

static void btrfs_close(struct fs_ctx *ctx, void *priv)
{
	struct btrfs_priv *p = priv;

	(void)ctx;
	for (unsigned l = 0; l < BTRFS_MAX_LEVEL; l++) {
		free(p->level_buf[l]);
		p->level_buf[l] = NULL;
	}
	free(p->chunks);
	p->chunks = NULL;
	p->nchunks = p->cap = 0;
}

/* The first MiB and every superblock copy inside the device. */
static int mark_reserved(struct fs_ctx *ctx, const struct btrfs_priv *p)
{
	uint64_t blocks = p->s.dev_bytes / p->s.sectorsize;
	uint64_t head = BTRFS_RESERVED_START / p->s.sectorsize;
	int r;

	r = fs_mark_used(ctx, 0, head < blocks ? head : blocks);
	for (int i = 1; r == 0 && i < BTRFS_SB_MIRRORS; i++) {
		uint64_t off = (uint64_t)BTRFS_SB_MIRROR_BASE << (12 * i);
		if (off + BTRFS_SB_SIZE <= blocks * p->s.sectorsize)
			r = fs_mark_used(ctx, off / p->s.sectorsize,
					 (BTRFS_SB_SIZE + p->s.sectorsize - 1) / p->s.sectorsize);
	}
	return r;
}

/* The chunk map: the system array, then the chunk tree. */
static int read_chunks(struct fs_ctx *ctx, struct btrfs_priv *p)
{
	struct walk w = { .name = "chunk tree", .owner = BTRFS_CHUNK_TREE_OBJECTID,
			  .item = chunk_tree_item };
	int r = parse_sys_array(ctx, p);

	if (r < 0)
		return r;
	r = walk_block(ctx, p, &w, p->s.chunk_root, p->s.chunk_root_level, p->s.chunk_root_gen, NULL);
	if (r < 0)
		return r;
	if (p->dev_items != 1)
		return bad(p, "the chunk tree lists no device item for device %llu",
			   (unsigned long long)p->s.devid);
	return 0;
}

static int read_extents(struct fs_ctx *ctx, struct btrfs_priv *p)
{
	struct walk roots = { .name = "root tree", .owner = BTRFS_ROOT_TREE_OBJECTID,
			      .item = root_tree_item };
	struct walk extents = { .name = "extent tree", .owner = BTRFS_EXTENT_TREE_OBJECTID,
				.item = extent_tree_item };
	int r;

	r = walk_block(ctx, p, &roots, p->s.root, p->s.root_level, p->s.generation, NULL);
	if (r < 0)
		return r;
	if (!p->extent_root_found)
		return bad(p, "the root tree has no extent tree");
	r = walk_block(ctx, p, &extents, p->extent_root, p->extent_root_level,
		       p->extent_root_gen, NULL);
	if (r < 0)
		return r;
	if (p->extent_sum != p->s.bytes_used)
		return bad(p, "the extent tree records %llu bytes, the superblock says %llu are used",
			   (unsigned long long)p->extent_sum, (unsigned long long)p->s.bytes_used);
	return 0;
}

static int btrfs_used_blocks(struct fs_ctx *ctx, void *priv)
{
	struct btrfs_priv *p = priv;
	int r;

	r = mark_reserved(ctx, p);
	if (r < 0)
		return fs_error(ctx, r, "marking the superblocks");
	r = read_chunks(ctx, p);
	if (r == -EUCLEAN) {
		if (!fs_forced(ctx))
			return fs_error(ctx, r, "%s: run btrfs check", p->why);
		note(p, "%s", p->why);
		p->fallback = KEEP_DEVICE;
	} else if (r < 0) {
		return r;
	}
	if (p->fallback == KEEP_EXTENTS) {
		r = read_extents(ctx, p);
		if (r == -EUCLEAN) {
			if (!fs_forced(ctx))
				return fs_error(ctx, r, "%s: run btrfs check", p->why);
			note(p, "%s", p->why);
			p->fallback = KEEP_CHUNKS;
		} else if (r < 0) {
			return r;
		}
	}
	if (p->fallback == KEEP_CHUNKS) {
		r = mark_all_chunks(ctx, p);
		if (r < 0)
			return r;
		note(p, "forced: every allocated chunk kept");
	} else if (p->fallback == KEEP_DEVICE) {
		r = fs_mark_used(ctx, 0, p->s.dev_bytes / p->s.sectorsize);
		if (r < 0)
			return r;
		note(p, "forced: the whole device kept");
	}
	if (p->notes[0])
		fs_warn(ctx, "%s", p->notes);
	return 0;
}

static const struct fs_magic btrfs_magics[] = {
	{ .magic = BTRFS_MAGIC, .len = 8, .offset = BTRFS_SB_OFFSET + BTRFS_SB_MAGIC },
	{ .magic = NULL },
};

static const char *const btrfs_blkid_types[] = { "btrfs", NULL };

const struct fs_plugin fs_plugin_btrfs = {
	.name = "btrfs",
	.blkid_types = btrfs_blkid_types,
	.min_size = BTRFS_SB_OFFSET + BTRFS_SB_SIZE,
	.magics = btrfs_magics,
	.priv_size = sizeof(struct btrfs_priv),
	.probe = btrfs_probe,
	.open = btrfs_open,
	.used_blocks = btrfs_used_blocks,
	.close = btrfs_close,
};
