/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Save's journal (sjournal_*, in jobs/save.c; the target journal of
 * restore and clone is tjournal.h's tjournal_*), declared here for its
 * fuzzing harness (tests/fuzz/fuzz-journals.c).
 *
 * partN.jnl, beside the stream while the save runs (removed once the
 * manifest is written), all integers little-endian:
 *   header (48 bytes): magic "IMGJNL\0\1", u32 block_size, u32 0,
 *     u64 block_count, u64 used_blocks, u64 XXH3-64 of the used bitmap,
 *     u64 XXH3-64 of the 40 bytes before it
 *   a record per frame, after the frame's bytes are in the stream:
 *     u64 comp_offset, u32 comp_size, u32 raw_size, u32 nextents, u32 0,
 *     u64 raw_xxh3, u64 comp_xxh3, nextents extents (u64 start, u32 count,
 *     u32 flags), u64 XXH3-64 of the record before it.
 * A resumed save keeps the frames whose records and stream bytes check
 * out, in order, and reads on from the block after the last one; a header
 * that does not match the source's filesystem (another disk, or one that
 * changed) starts the partition afresh. */

#ifndef IMAGER_ENGINE_SJOURNAL_H
#define IMAGER_ENGINE_SJOURNAL_H

#include <stdint.h>
#include <xxhash.h>

#include "imager/fs.h"
#include "imager/image.h"

#define SJOURNAL_MAGIC  "IMGJNL\0\1"
#define SJOURNAL_HEADER 48
#define SJOURNAL_RECORD 40

/* The header a journal of the partition holding FS starts with. */
void sjournal_header(unsigned char *h, const struct fs_info *fs);

/* What a resumed partition keeps. */
struct sjournal_kept {
	uint64_t stream_len;   /* the stream's good bytes (where the next frame goes) */
	uint64_t jnl_len;      /* the journal's good bytes */
	uint64_t next_block;   /* the block after the last kept frame's */
	uint64_t bytes;        /* used bytes (data and zeros) kept */
};

/* Replay the journal JFD of the stream SFD of the partition holding FS:
 * each frame kept goes into IX (initialised for fs->block_size) and its
 * bytes into STREAM_HASH (reset).  Every field is hostile: the replay
 * stops at the first record that does not check out.  Returns 1 when a
 * frame is kept, 0 when the partition starts afresh (the header is not
 * this filesystem's), or a negative errno (no memory). */
int sjournal_replay(int jfd, int sfd, const struct fs_info *fs, struct img_index *ix,
		    XXH3_state_t *stream_hash, struct sjournal_kept *k);

#endif
