/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: the framework's calls into rescue reads (rescue.c),
 * made by bk_pread() when bk->rescue is set (backend.h). */
#ifndef IMAGER_RESCUE_H
#define IMAGER_RESCUE_H

#include "imager/backend.h"

/* Is r a media error (a bad sector), the only failure rescue reads around? */
bool rescue_media_error(int r);
/* The read of [off, off+len) failed with a media error: read it again in
 * pieces, zeros where a sector stays unreadable.  Returns 0, or a failure
 * that is not a media error (a lost connection, no memory). */
int rescue_read(struct bk *bk, void *buf, size_t len, uint64_t off);
/* [off, off+len) was read (wholly or with rescued pieces). */
void rescue_note_read(struct bk *bk, uint64_t off, uint64_t len);
void rescue_free(struct bk_rescue *r);

#endif
