/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Clonezilla image folders' private header: what their files share (the
 * public contract is include/imager/clonezilla.h).
 *   clonezilla.c          reading the folder: cz_read, the
 *                         partition table, the streams' names, LVM
 *   clonezilla-stream.c   reading the streams: split parts joined and
 *                         decompressed (libarchive), partclone, dd and
 *                         ntfsclone readers, cz_read_stream, used bytes
 *   ../jobs/clonezilla-restore.c  restoring (a copy job source): the boot
 *                         areas, cz_put, the PVs,
 *                         the folder as the copy job's source, cz_restore
 */
#ifndef IMAGER_CLONEZILLA_INT_H
#define IMAGER_CLONEZILLA_INT_H

#include <stddef.h>
#include <stdint.h>

#include "imager/clonezilla.h"
#include "imager/lvmfmt.h"
#include "source.h"

/* A restore's state while streams are written (jobs/clonezilla-restore.c
 * fills it): the stream readers hand each run of bytes to put(), which
 * hands them to part_put() at partition offsets: the restore's writer, or
 * the index that `imager serve` builds (jobs/czindex.c). */
struct cz_job {
	/* A write of [off, off+len) of partition i, or, for an LV (lv), of
	 * the LV's bytes, split over its segments. */
	int (*put)(struct cz_job *j, size_t i, uint64_t off, uint64_t len, const void *buf,
		   struct im_err *err);
	/* Where put() and the PVs' heads go: [off, off+len) of partition i. */
	int (*part_put)(void *sink, size_t i, uint64_t off, uint64_t len, const void *buf,
			struct im_err *err);
	void *sink;                /* part_put's (the restore's: its writer) */
	uint64_t done, total;
	const struct im_progress *progress;
	const struct cz_lv *lv;    /* the LV being written, or NULL */
};

/* ---- clonezilla.c ---- */

/* A file of the folder of at most max bytes, malloc'ed and NUL-terminated;
 * -ENOENT (err untouched) when absent. */
int cz_read_file(const char *dir, const char *name, uint64_t max, unsigned char **buf,
		 size_t *len, struct im_err *err);
/* VG's text from lvm_VG.conf, mapped (lvmfmt.h); *text malloc'ed. */
int cz_load_vg(const char *dir, const char *vg, struct lvm_vg_map *map, char **text,
	       size_t *len, struct im_err *err);

/* ---- clonezilla-stream.c ---- */

/* Partition i's partclone stream written through j. */
int cz_restore_ptcl(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
		    struct im_err *err);
/* partclone.dd's and ntfsclone's streams: with j, written to partition i;
 * without, only read (verify), with progress. */
int cz_read_dd(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
	       const struct im_progress *progress, uint64_t *done, uint64_t total,
	       struct im_err *err);
int cz_read_ntfsclone(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
		      const struct im_progress *progress, uint64_t *done, uint64_t total,
		      struct im_err *err);
/* The bytes to write, for progress and for --shrink's plan: each
 * partition's (a PV's with its LVs'). */
int cz_count_used(const char *dir, const struct cz_image *cz, uint64_t *total,
		  uint64_t *used, uint64_t *lv_used, struct im_err *err);

#endif
