/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: after save --rescue, the files of an ext2/3/4 that its
 * unreadable ranges hit, asked of e2fsprogs' debugfs (icheck: the inode of
 * each block; ncheck: the paths of each inode), run read-only on the
 * source.  Cheap and best-effort: a bounded number of blocks, a time limit,
 * and a save that goes on without names when debugfs fails. */
#ifndef IMAGER_EXTFILES_H
#define IMAGER_EXTFILES_H

#include <stddef.h>
#include <stdint.h>

#include "imager/image.h"

#define EXTF_MAX_BLOCKS 256   /* blocks asked in all (each listed range's first one first) */
#define EXTF_SECONDS    120   /* every debugfs run together, at most */
#define EXTF_NO_FILE    UINT32_MAX   /* icheck: "<block not found>" */

/* Fill the listed ranges (m->unreadable.list) that lie in an ext2/3/4
 * partition (its plugin "ext") with the files their blocks belong to;
 * device is the source as a local path (a disk, a partition or a raw image
 * file) that debugfs opens at each partition's offset.  When debugfs
 * fails, cannot be run or takes too long, the ranges concerned stay
 * without names and warning gets one line saying so ("" otherwise).
 * Returns 0, or -ENOMEM. */
int extfiles_lookup(const char *device, struct img_manifest *m, char *warning, size_t wlen);

/* debugfs's output, parsed as hostile text (exposed for the unit test).
 *
 * icheck ("Block<TAB>Inode number", then "BLOCK<TAB>INODE" or
 * "BLOCK<TAB><block not found>" lines): ino[i] gets the inode of blocks[i]
 * (n blocks asked), EXTF_NO_FILE when it belongs to none, and stays 0 when
 * no line answered it.  Only whole lines after the header count.  Returns
 * the number of blocks answered, or -EBADMSG without the header. */
int extfiles_parse_icheck(const char *text, const uint64_t *blocks, size_t n, uint32_t *ino);

/* ncheck ("Inode<TAB>Pathname", then "INODE<TAB>PATH" lines, a line per
 * name): fn(opaque, i, path, len) for each path of inos[i] (n inodes
 * asked); a path is absolute ("/dir/file"; "//file" in the root is given
 * as "/file"), or starts with "<" when debugfs could not name a folder on
 * the way ("<12>/file").  Returns the number of paths given, or -EBADMSG
 * without the header. */
int extfiles_parse_ncheck(const char *text, const uint32_t *inos, size_t n,
			  void (*fn)(void *opaque, size_t i, const char *path, size_t len),
			  void *opaque);

#endif
