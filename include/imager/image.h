/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The image folder.
 *
 *   manifest.json   written last, atomically (rename); without it the folder
 *                   is an unfinished image
 *   boot-NAME.bin   byte-exact copies of the boot areas (ptable.h)
 *   partN.zst       per partition: a stream of independent zstd frames,
 *                   written without zstd's content checksum (the index's
 *                   XXH3-64 of the raw bytes checks them; frames with one
 *                   are read too)
 *   partN.idx       per partition: the frame index (format below)
 *
 * A frame holds up to IMG_FRAME_BLOCKS_BYTES of used blocks, read in disk
 * order.  Its extents say where each run of blocks goes; a run of used
 * blocks that are all zeros is an extent flagged IMG_EXT_ZERO and stores no
 * data.  Frames are independent, so saving and restoring use every core, a
 * damaged frame is named precisely, and one region can be read alone.
 *
 * Index file, all integers little-endian:
 *   header (64 bytes): magic "IMGIDX\0\1", u32 version (1), u32 block_size,
 *     u64 nframes, u64 nextents, u64 stream_size, u64 data_blocks,
 *     u64 zero_blocks, u64 reserved (0)
 *   nframes frame records (48 bytes): u64 comp_offset, u32 comp_size,
 *     u32 raw_size, u64 first_extent, u32 nextents, u32 reserved,
 *     u64 raw_xxh3, u64 comp_xxh3
 *   nextents extent records (16 bytes): u64 start_block, u32 count, u32 flags
 *   trailer: u64 XXH3-64 of every byte before it
 */
#ifndef IMAGER_IMAGE_H
#define IMAGER_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/error.h"
#include "imager/fs.h"

#define IMG_FORMAT_NAME        "imager-image"
#define IMG_FORMAT_VERSION     1
#define IMG_MANIFEST           "manifest.json"
#define IMG_FRAME_BLOCKS_BYTES (4u << 20)   /* bytes of used blocks per frame */
#define IMG_INDEX_MAGIC        "IMGIDX\0\1"
#define IMG_INDEX_HEADER       64
#define IMG_INDEX_FRAME        48
#define IMG_INDEX_EXTENT       16

#define IMG_EXT_ZERO 1u   /* the blocks are all zeros; no data stored */

struct img_extent {
	uint64_t start;     /* first block, in the partition's block_size units */
	uint32_t count;
	uint32_t flags;
};

struct img_frame {
	uint64_t comp_offset;
	uint32_t comp_size;
	uint32_t raw_size;     /* bytes of data (zero extents excluded) */
	uint64_t first_extent;
	uint32_t nextents;
	uint64_t raw_xxh3, comp_xxh3;
};

struct img_index {
	uint32_t block_size;
	uint64_t nframes, nextents;
	uint64_t stream_size;
	uint64_t data_blocks, zero_blocks;
	struct img_frame *frames;
	struct img_extent *extents;
	size_t frames_cap, extents_cap;   /* while building */
};

void img_index_init(struct img_index *ix, uint32_t block_size);
void img_index_free(struct img_index *ix);
/* Append one frame and its extents (copied).  Returns 0 or -ENOMEM. */
int img_index_add(struct img_index *ix, const struct img_frame *f,
		  const struct img_extent *ext, uint32_t next);
/* Serialise to path (written to path.tmp, fsynced, renamed).  Sets *size and
 * *xxh3 of the file.  Returns 0 or negative errno. */
int img_index_write(const struct img_index *ix, const char *path, uint64_t *size,
		    uint64_t *xxh3, struct im_err *err);
/* Read and validate an index: trailer checksum, record counts that match
 * the file size, frames contiguous in the stream, extents in order, inside
 * block_count blocks, with counts that add up to each frame's raw_size.
 * Hostile files give IM_EXIT_DAMAGED errors, never big allocations beyond
 * the file's own size.  Returns 0 or negative errno. */
int img_index_read(struct img_index *ix, const char *path, uint64_t block_count,
		   struct im_err *err);

/* ---- the manifest ---- */

struct img_area {
	char name[32];
	uint64_t offset, length;
	char file[64];
	uint64_t xxh3;
};

struct img_part {
	unsigned number;
	uint64_t start, size;
	char kind[16];
	char gpt_name[80];
	char filesystem[32], plugin[16], uuid[64], label[256];
	uint32_t block_size;
	uint64_t block_count, used_blocks, zero_blocks;
	char stream[32], index[32];
	uint64_t stream_size, stream_xxh3, index_size, index_xxh3;
	uint64_t frames, data_bytes;
	/* A container (an LVM PV): what it is, and the volumes inside, as the
	 * plugin found them (optional in the manifest: "container", "volumes"). */
	char container[128];
	size_t nvolumes;
	struct fs_volume *volumes;   /* owned by the manifest */
	/* save --rescue: bytes of it that could not be read (zeros in the
	 * image); optional "unreadable_bytes", 0 when absent */
	uint64_t unreadable_bytes;
};

/* What save --rescue could not read (optional "unreadable" object; bytes
 * 0 when absent): bytes and ranges in all, the map (GNU ddrescue's format)
 * in the folder with its size and XXH3, and the first ranges. */
#define IMG_RESCUE_MAP   "rescue.map"
#define IMG_UNREADABLE_LIST 64
#define IMG_UNREADABLE_FILES 16     /* names kept for one range */
#define IMG_UNREADABLE_NAME  1024   /* bytes of a name, its NUL included */
struct img_unreadable_range {
	uint64_t offset, length;
	/* A range in an ext2/3/4 saved from a local source: what its blocks
	 * hold, as debugfs found it (optional "files", "no_file_blocks",
	 * "files_partial"; looked_up false when absent).  files: paths ("/"
	 * and "<" first: "<inode 8>" for an inode without a name), owned by
	 * the manifest; no_file_blocks: blocks of it in no file (free space
	 * or filesystem metadata); files_partial: not every block of the
	 * range was looked up, or it hit more files than are kept. */
	bool looked_up, files_partial;
	uint32_t nfiles;
	char (*files)[IMG_UNREADABLE_NAME];
	uint64_t no_file_blocks;
};
struct img_unreadable {
	uint64_t bytes, ranges;
	char map[32];
	uint64_t map_size, map_xxh3;
	size_t nlist;
	struct img_unreadable_range list[IMG_UNREADABLE_LIST];
};

struct img_manifest {
	char tool_version[32];
	char created[32];
	char source[600];
	uint64_t disk_size;
	unsigned logical_sector_size, physical_sector_size;
	char table[16];
	size_t nareas;
	struct img_area *areas;
	size_t nparts;
	struct img_part *parts;
	struct img_unreadable unreadable;
};

void img_manifest_free(struct img_manifest *m);
/* Write DIR/manifest.json atomically (tmp file, fsync, rename, fsync dir). */
int img_manifest_write(const struct img_manifest *m, const char *dir, struct im_err *err);
/* Read and validate DIR/manifest.json: format and version, sizes and
 * offsets inside the disk, partitions not overlapping, file names plain
 * (no '/', no ".."), block geometry consistent.  A missing manifest is an
 * unfinished image (-ENOENT, IM_EXIT_DAMAGED).  Returns 0 or negative errno. */
int img_manifest_read(struct img_manifest *m, const char *dir, struct im_err *err);
/* What a folder is.  An image has manifest.json (written last); an
 * unfinished one has a save's own files (img_own_file: partN.zst, .idx,
 * .jnl, boot-*.bin, manifest.json.tmp, rescue.map) and no manifest;
 * Clonezilla's has its "disk" or "parts" file (img_is_clonezilla); a repository
 * (Clonezilla's /home/partimag, or a folder of saves) holds no image
 * itself but subfolders that are images, listed in entries by name. */
enum img_folder_kind {
	IMG_FOLDER_IMAGE, IMG_FOLDER_UNFINISHED, IMG_FOLDER_CLONEZILLA,
	IMG_FOLDER_REPOSITORY, IMG_FOLDER_MISSING, IMG_FOLDER_OTHER,
};
struct img_folder_entry {
	char name[256];
	enum img_folder_kind kind;     /* IMG_FOLDER_IMAGE or _CLONEZILLA */
};
struct img_folder {
	enum img_folder_kind kind;
	bool empty;                    /* nothing in it but dot files */
	size_t own_files;              /* a save's files in it */
	char own_example[64];          /* the first of them by name */
	size_t nentries;               /* subfolders that are images, by name */
	struct img_folder_entry *entries;
};
bool img_own_file(const char *name);
/* Fill f (img_folder_free frees it).  Returns 0 or negative errno (an
 * unreadable folder). */
int img_folder_probe(const char *dir, struct img_folder *f, struct im_err *err);
void img_folder_free(struct img_folder *f);
/* A folder that looks like Clonezilla's (a "disk" or "parts" file, no
 * manifest.json). */
bool img_is_clonezilla(const char *dir);
/* For a folder that is not an image to read: the error that says what it
 * is (missing or not an image: IM_EXIT_SOURCE; unfinished: IM_EXIT_DAMAGED,
 * -ENOENT; a repository: IM_EXIT_SOURCE, -EISDIR, naming its images;
 * Clonezilla's: IM_EXIT_SOURCE, -ENOENT, for a reader of imager's
 * manifest).  Returns the negative errno, or 0 for an image. */
int img_folder_refuse(const struct img_folder *f, const char *dir, struct im_err *err);

/* The manifest as a json-c object (for `info --json`); caller puts it. */
struct json_object;
struct json_object *img_manifest_to_json(const struct img_manifest *m);

/* Volumes (fs.h) as the JSON array the manifest keeps them in. */
struct json_object *img_volumes_to_json(const struct fs_volume *v, size_t n);

/* XXH3-64 as 16 lowercase hex digits, and back.  Returns 0 or -EINVAL. */
void img_hash_hex(uint64_t h, char out[17]);
int img_hash_parse(const char *s, uint64_t *h);

/* XXH3-64 of a whole file, and its size.  Returns 0 or negative errno. */
int img_hash_file(const char *path, uint64_t *size, uint64_t *xxh3);

#endif
