/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Reading image folders back (engine-internal): restore and verify. */
#ifndef IMAGER_FRAMES_H
#define IMAGER_FRAMES_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <zstd.h>

#include "imager/image.h"

/* Check a frame's compressed hash, decompress it into raw, check its size
 * and data hash.  Returns 0, or -EBADMSG with `what` saying why. */
int frame_decode(ZSTD_DCtx *dctx, const struct img_frame *f, const void *comp,
		 void *raw, size_t raw_cap, char *what, size_t whatlen);
/* The disk byte range a frame covers. */
int frame_span(const struct img_index *ix, const struct img_frame *f, uint64_t part_start,
	       uint64_t *off, uint64_t *len);
/* Index of a partition, checked against the manifest (size, hash, counts),
 * and the stream's size.  Returns 0 (ix filled) or negative errno. */
int image_check_part_files(const char *dir, const struct img_part *p, struct img_index *ix,
			   struct im_err *err);
/* A boot area file, checked against its size and hash. */
int image_read_area(const char *dir, const struct img_area *a, unsigned char **buf,
		    struct im_err *err);

#endif
