/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager clone: disk or image to disk or image in one pass, through the
 * copy job (copyjob.h) with the source as disksrc.c describes it; no
 * intermediate folder.
 */
#include "imager/job.h"

#include <stdio.h>
#include <string.h>

#include "copyjob.h"

/* After a rescue: the map written, and each partition's unreadable bytes. */
static int clone_rescue_finish(struct source *src, const struct clone_opts *opts,
			       struct clone_stats *stats, struct im_err *err)
{
	int r = source_rescue_finish(src, opts->rescue.map, &opts->rescue, &stats->rescue, err);

	for (size_t i = 0; r == 0 && i < src->pt->nparts && stats->nrescued < PT_MAX_PARTS; i++) {
		const struct pt_part *pp = &src->pt->parts[i];
		uint64_t bad = bk_rescue_bad_bytes(src->bk, pp->start, pp->size);
		if (!bad)
			continue;
		stats->rescued[stats->nrescued].number = pp->number;
		snprintf(stats->rescued[stats->nrescued].filesystem,
			 sizeof(stats->rescued[0].filesystem), "%s", src->fs[i].type);
		stats->rescued[stats->nrescued++].bytes = bad;
	}
	return r;
}

int im_clone(const struct disk_roots *roots, const char *source, const char *target,
	     const struct clone_opts *opts, struct clone_stats *stats, struct im_err *err)
{
	struct disksrc d;
	const struct cj_opts o = {
		.roots = roots, .target = target, .t = &opts->target, .journal = opts->journal,
		.resume = opts->resume, .rescue = opts->rescue.on, .verify = opts->verify,
		.threads = opts->threads, .checkpoint_ms = opts->checkpoint_ms,
		.progress = &opts->progress,
	};
	struct cj_stats st = CJ_STATS(stats);
	int r;

	memset(stats, 0, sizeof(*stats));
	r = cj_refuse(target, &opts->target, opts->resume, opts->rescue.on, err);
	if (r < 0)
		return r;
	r = disksrc_open(&d, roots, source, opts->source_format, opts->force_fs, &opts->rescue,
			 &opts->net, &stats->bytes_read, &stats->verified_bytes, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < d.s.nwarnings && stats->nwarnings < IM_MAX_WARNINGS; i++)
		snprintf(stats->warnings[stats->nwarnings++], sizeof(stats->warnings[0]), "%s",
			 d.s.warnings[i]);
	r = cj_run(&d.cj, &o, &st, err);
	if (r == 0 && opts->rescue.on)
		r = clone_rescue_finish(&d.s, opts, stats, err);
	disksrc_close(&d);
	return r;
}
