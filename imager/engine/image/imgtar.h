/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Engine-internal: an image folder as one tar stream (POSIX pax, through
 * libarchive), what `imager multicast` sends: manifest.json first, then the
 * boot areas, the indexes, and last each partition's stream, in the
 * manifest's order.  A receiver can so check everything but the streams
 * before a byte of a disk is written, and restore each stream as it
 * arrives (frames.h: a frame reader's `ar`).
 */
#ifndef IMAGER_IMGTAR_H
#define IMAGER_IMGTAR_H
#include <stdint.h>

#include "imager/image.h"
#include "imager/pipeline.h"

struct archive;

/* Write the folder DIR (its manifest m, already read and its files checked)
 * as that stream onto fd.  progress (may be NULL) sees the bytes of the
 * streams written.  Returns 0 or negative errno with err (a write that
 * fails: IM_EXIT_IO, "the receiving end closed" when fd is a pipe whose
 * reader went away).  *sent: the bytes written onto fd. */
int img_tar_send(const char *dir, const struct img_manifest *m, int fd,
		 const struct im_progress *progress, uint64_t *sent, struct im_err *err);

/* The receiving side, on a tar stream open in ar: the manifest, the boot
 * areas and the indexes written into the folder dir (which must exist), the
 * manifest read into m.  Every name and size is checked against what the
 * manifest says comes next (any other entry: IM_EXIT_DAMAGED, named).
 * After it, img_tar_stream() for each partition, in order. */
int img_tar_receive_head(struct archive *ar, const char *dir, struct img_manifest *m,
			 struct im_err *err);
/* The next entry must be NAME of SIZE bytes: 0, its data is next. */
int img_tar_expect(struct archive *ar, const char *name, uint64_t size, struct im_err *err);
/* The stream must end here (after the last partition's stream). */
int img_tar_expect_end(struct archive *ar, struct im_err *err);

#endif
