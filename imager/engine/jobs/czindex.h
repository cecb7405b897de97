/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: a Clonezilla folder's random-access index (czindex.c
 * builds it, czcache.c keeps it; the contract is im_czindex() in
 * include/imager/job.h). */
#ifndef IMAGER_CZINDEX_H
#define IMAGER_CZINDEX_H

#include "imager/error.h"
#include "imager/pipeline.h"

/* The restore's pass over the Clonezilla folder DIR written as an imager
 * image folder into OUT (an empty folder): per partition a stream of
 * independent zstd frames of LEVEL holding what a restore writes there
 * (all-zero 4 KiB chunks left out), with its index, in 512-byte blocks;
 * the boot areas as the writer leaves them (on GPT, the backup made from
 * the primary: "gpt-backup"); manifest.json last.  Damage in the folder
 * fails as the restore fails (IM_EXIT_DAMAGED, the file named).  OUT is
 * left as it is on failure (the caller removes it).  0 or negative errno. */
int czx_build(const char *dir, const char *out, int level, const struct im_progress *progress,
	      struct im_err *err);

#endif
