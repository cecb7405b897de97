/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: the copy job that restore, clone and the Clonezilla
 * restore share (copyjob.c).
 *
 * A job opens its source and describes it through struct cj_source (the
 * plan of its disk, what each partition holds for the shrink planner, the
 * identity its resume journal carries, and how partition i reaches the
 * writer); cj_run() does the rest, in this order:
 *
 *   plan -> shrink (a target smaller than the source: refused, or with
 *   --shrink the source copied into a temporary raw file, its filesystems
 *   shrunk there by shrink.c, and that file copied onto the target with
 *   the new layout) -> journal -> writer -> each partition -> finish.
 *
 * The refusals of --resume live here once (cj_refuse()). */
#ifndef IMAGER_ENGINE_COPYJOB_H
#define IMAGER_ENGINE_COPYJOB_H

#include "source.h"
#include "shrink.h"
#include "writer.h"
#include "tjournal.h"

struct copyjob;

/* What a job copies from, and how. */
struct cj_source {
	void *ctx;
	const char *what;          /* "restore" or "clone": progress and messages */
	const char *name;          /* the source as the user named it */
	enum tjnl_kind kind;       /* the journal it keeps */
	/* A resumed copy passes over nothing the journal says is on the target:
	 * its count of bytes done starts at the journal's (clone).  Else it
	 * reads everything again and counts it (restore). */
	bool resume_skips;
	/* The plan of the source's disk (allocated here with disk_plan_alloc(),
	 * freed by the job: also after a failure) and *total, the used bytes it
	 * copies. */
	int (*plan)(void *ctx, struct disk_plan *pl, uint64_t *total, struct im_err *err);
	/* What the shrink planner needs of partition i: sp->fs, used, vols and
	 * nvols (sp->lp is the job's). */
	void (*shrink_part)(void *ctx, size_t i, struct shrink_part *sp);
	/* The identity its journal carries (tjournal.h): 0, or negative when
	 * none can be kept.  NULL: the source keeps no journal. */
	int (*identity)(void *ctx, const struct target_opts *t, uint64_t *id);
	/* Partition i onto j->w, from FROM on: 0 the whole of it, UINT64_MAX
	 * nothing but its held-back head (--resume: on the target already),
	 * else the journal's position in it (its head written all the same). */
	int (*copy)(void *ctx, struct copyjob *j, size_t i, uint64_t from, struct im_err *err);
	/* With cj_opts.verify, once everything is in place: the target read
	 * back against the source (NULL: none). */
	int (*verify)(void *ctx, struct copyjob *j, struct im_err *err);
};

struct cj_opts {
	const struct disk_roots *roots;
	const char *target;
	const struct target_opts *t;
	bool journal, resume, rescue, verify;
	unsigned threads, checkpoint_ms;
	const struct im_progress *progress;
};

/* What the job reports (the fields restore_stats and clone_stats share). */
struct cj_stats {
	uint64_t *bytes_written, *resumed_bytes;
	struct grow_report *grow;
	struct target_info *target;
};

/* cj_stats pointing into a restore_stats or clone_stats S. */
#define CJ_STATS(s)                                                                      \
	{ .bytes_written = &(s)->bytes_written, .resumed_bytes = &(s)->resumed_bytes,      \
	  .grow = &(s)->grow, .target = &(s)->target }

/* The options of a restore (an image folder, imager's or Clonezilla's). */
static inline struct cj_opts cj_restore_opts(const struct disk_roots *roots, const char *target,
					     const struct restore_opts *opts)
{
	return (struct cj_opts){
		.roots = roots, .target = target, .t = &opts->target, .journal = opts->journal,
		.resume = opts->resume, .threads = opts->threads,
		.checkpoint_ms = opts->checkpoint_ms, .progress = &opts->progress,
	};
}

/* The job as it runs, for the source's copy. */
struct copyjob {
	const struct cj_source *src;
	const struct cj_opts *o;
	struct cj_stats *st;
	struct writer w;
	struct tjournal jn;
	unsigned threads;          /* resolved: never 0 */
	uint64_t done, total;      /* used bytes, for progress and the journal */
	uint64_t written;          /* bytes written onto the target */
};

/* The refusals of --resume, before anything is opened: with --rescue or
 * --shrink (IM_EXIT_USAGE), onto a target that keeps no journal (an NBD
 * export) or is not raw (IM_EXIT_TARGET). */
int cj_refuse(const char *target, const struct target_opts *t, bool resume, bool rescue,
	      struct im_err *err);

/* The job: src described, o the options, st the report.  0 or negative
 * errno. */
int cj_run(const struct cj_source *src, const struct cj_opts *o, struct cj_stats *st,
	   struct im_err *err);

/* The target flushed, then the journal says that partition PART is done up
 * to POS (nothing when it is off; one that cannot be written costs the
 * resume, not the job). */
int cj_checkpoint(struct copyjob *j, size_t part, uint64_t pos, struct im_err *err);
/* The same, when the last checkpoint is older than cj_opts.checkpoint_ms. */
int cj_tick(struct copyjob *j, size_t part, uint64_t pos, struct im_err *err);
/* Progress: j->done of j->total. */
void cj_progress(struct copyjob *j);

/* ---- a disk or image file as the source (disksrc.c: clone, and the
 * shrink's temporary copy) ---- */

struct disksrc {
	struct source s;
	struct cj_source cj;
	uint64_t *bytes_read;      /* counts what is read of the source */
	uint64_t *verified_bytes;  /* counts what verify compared */
};

/* Open spec as source_open() does (net: an NBD source's --timeout and
 * --retries; NULL: the defaults), and describe it in d->cj (its name:
 * spec; progress "clone").  bytes_read and verified_bytes: counters the
 * source adds to (not NULL). */
int disksrc_open(struct disksrc *d, const struct disk_roots *roots, const char *spec,
		 const char *format, bool force, const struct rescue_opts *rescue,
		 const struct bk_net *net, uint64_t *bytes_read, uint64_t *verified_bytes,
		 struct im_err *err);
void disksrc_close(struct disksrc *d);

/* ---- a Clonezilla folder as the source (clonezilla-restore.c) ---- */

/* The plan of the folder's disk (its partitions and boot areas, as
 * disk_plan_alloc() makes them: disk_plan_free() frees it), and the bytes
 * each stream writes: added to *total, used[] per partition (CZ_MAX_PARTS),
 * lv_used[] per LV (CZ_MAX_LVS). */
struct cz_image;
struct cz_job;
int cz_plan(const char *dir, const struct cz_image *cz, struct disk_plan *pl, uint64_t *total,
	    uint64_t *used, uint64_t *lv_used, struct im_err *err);
/* Partition i's bytes through j->part_put (j->put set here): before the first,
 * every PV's head made afresh; after the last, the LVs' streams (in the
 * order of their first extent).  What a restore writes of the partitions,
 * in that order; the boot areas are the plan's (written last). */
int cz_copy_part(const char *dir, const struct cz_image *cz, size_t i, struct cz_job *j,
		 struct im_err *err);

/* Restore the folder onto target (as im_restore(), which calls it). */
int cz_restore(const struct disk_roots *roots, const char *dir, const char *target,
	       const struct restore_opts *opts, struct restore_stats *stats, struct im_err *err);

#endif
