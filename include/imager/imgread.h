/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Reading an image folder as the disk it holds, without restoring it
 * (imager/engine/image/imgread.c; `imager serve` and its nbdkit plugin).
 *
 * The virtual disk is exactly what a restore onto a fresh raw disk of the
 * image's size writes: zeros, then each partition's used blocks from its
 * frames (runs the index marks all-zero stay zeros), then the boot areas
 * (MBR or GPT with its backup, EBRs, gaps) over them, as the writer puts
 * them last.  With a partition chosen (opts.partition), the disk is that
 * partition's bytes alone, from its start.
 *
 * A read decompresses only the frames it touches, found through the frame
 * index, into a bounded LRU cache of decompressed frames (cache_bytes;
 * IMG_READER_CACHE_DEFAULT, 64 MiB: 16 frames of 4 MiB).  Each
 * decompression checks the frame's compressed and uncompressed XXH3-64
 * (frames.c's frame_decode); a damaged frame fails the reads that touch
 * it (-EIO, and the error names partition, stream, frame and disk range),
 * never the others, and is tried again on the next read (never cached).
 *
 * Thread safety: one reader may be used by many threads at once
 * (img_reader_read and img_reader_extents).  The cache is guarded by a
 * mutex; decompression runs outside it, so parallel readers of different
 * frames use every core.  Two threads missing the same frame at once may
 * both decompress it (the second copy is dropped).  Frames being copied
 * out are pinned, so the cache may exceed its budget by at most one frame
 * per reading thread.
 *
 * Clonezilla folders: their streams are compressed as a whole, so they
 * are read through an index, an imager image folder of the restored disk
 * that the restore's own pass over the folder writes once into a cache
 * outside it (im_czindex in include/imager/job.h, which says what it
 * costs).  im_reader_open() (job.h) opens either kind of folder: it hands
 * img_reader_open() that index.  img_reader_open() itself refuses a
 * Clonezilla folder (-ENOTSUP, IM_EXIT_UNSUPP, naming im_reader_open): the
 * index is made above this room (jobs/czindex.c).
 */
#ifndef IMAGER_IMGREAD_H
#define IMAGER_IMGREAD_H

#include <stdbool.h>
#include <stdint.h>

#include "imager/error.h"

#define IMG_READER_CACHE_DEFAULT (64ull << 20)

struct img_reader_opts {
	uint64_t cache_bytes;   /* 0: IMG_READER_CACHE_DEFAULT */
	unsigned partition;     /* 0: the whole disk; else that partition's number */
};

struct img_reader_stats {
	uint64_t hits, misses;          /* frame lookups */
	uint64_t decoded_bytes;         /* uncompressed bytes produced */
	uint64_t cached_bytes, cached_frames, evictions;
	uint64_t damaged;               /* failed decompressions */
};

struct img_reader;

/* Open DIR read-only: manifest, each partition's index (checked against
 * the manifest, as restore does), the boot areas (read and checked).  A
 * folder that is not an imager image is refused as img_folder_refuse()
 * says.  Returns 0 (*out set) or negative errno. */
int img_reader_open(const char *dir, const struct img_reader_opts *o, struct img_reader **out,
		    struct im_err *err);
void img_reader_close(struct img_reader *r);
/* The virtual disk's size in bytes. */
uint64_t img_reader_size(const struct img_reader *r);
/* len bytes at off into buf (off + len within the size).  Returns 0 or
 * negative errno (-EIO: a damaged or unreadable frame; -EINVAL: out of
 * range; -ENOMEM). */
int img_reader_read(struct img_reader *r, void *buf, uint64_t len, uint64_t off,
		    struct im_err *err);
/* The ranges of [off, off + len) in order, each data (zero false: bytes a
 * restore writes from the image) or zeros (zero true: free space, unused
 * blocks, all-zero runs), adjacent ranges of one kind merged.  cb returns
 * 0 to go on, or negative to stop (returned).  Returns 0 or negative errno. */
typedef int (*img_extent_fn)(void *opaque, uint64_t off, uint64_t len, bool zero);
int img_reader_extents(struct img_reader *r, uint64_t off, uint64_t len, img_extent_fn cb,
		       void *opaque);
void img_reader_stats(struct img_reader *r, struct img_reader_stats *st);

#endif
