/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Reading image folders back (engine-internal): restore and verify. */
#ifndef IMAGER_FRAMES_H
#define IMAGER_FRAMES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <zstd.h>

#include "imager/image.h"
#include "imager/pipeline.h"

/* Check a frame's compressed hash, decompress it into raw, check its size
 * and data hash.  Returns 0, or -EBADMSG with `what` saying why. */
int frame_decode(ZSTD_DCtx *dctx, const struct img_frame *f, const void *comp,
		 void *raw, size_t raw_cap, char *what, size_t whatlen);
/* The disk byte range a frame covers. */
int frame_span(const struct img_index *ix, const struct img_frame *f, uint64_t part_start,
	       uint64_t *off, uint64_t *len);
/* Index of a partition, checked against the manifest (size, hash, counts),
 * and, with check_stream, the stream's size (without: the stream comes
 * through a frame reader's `ar`, checked as it is read).  Returns 0 (ix
 * filled) or negative errno. */
int image_check_part_files(const char *dir, const struct img_part *p, struct img_index *ix,
			   bool check_stream, struct im_err *err);
/* A boot area file, checked against its size and hash. */
int image_read_area(const char *dir, const struct img_area *a, unsigned char **buf,
		    struct im_err *err);

/* Pipeline steps shared by restore and verify.  A frame that cannot be
 * read or decoded is marked damaged in its meta (with why), not failed:
 * restore turns that into an error, verify into a finding. */
struct frame_meta {
	uint64_t frame;
	bool damaged;
	bool skipped;               /* restore --resume: on the target already */
	char what[160];
};
struct archive;
struct frame_reader {
	const struct img_index *ix;
	int fd;                     /* the stream, read at each frame's offset */
	/* Or the stream as a tar entry being read (libarchive; restore from a
	 * multicast): read in order, the gaps between frames skipped, pos
	 * bytes of the entry read so far. */
	struct archive *ar;
	uint64_t pos;
	uint64_t next;
};
/* produce(): the next frame's compressed bytes into slot->a; 1, or 0 at the
 * end.  A frame that cannot be read is marked damaged. */
int frame_produce(struct frame_reader *fr, struct pipe_slot *s);
/* work(): decode slot->a into slot->b unless already damaged. */
void frame_work(const struct img_index *ix, void *dctx, struct pipe_slot *s);
void *frame_dctx_new(void *ctx);
void frame_dctx_free(void *ctx, void *dctx);

#endif
