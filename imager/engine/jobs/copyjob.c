/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The copy job restore, clone and the Clonezilla restore share: plan ->
 * shrink -> journal -> writer -> each partition -> finish (copyjob.h).
 */
#include "copyjob.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imager/job.h"
#include "util.h"

#define MIB (1ull << 20)

static int refuse_no_journal(const char *target, struct im_err *err)
{
	return im_errf(err, IM_EXIT_TARGET, -ENOTSUP,
		       "%s: only a file or a device can be resumed (an NBD export cannot)", target);
}

int cj_refuse(const char *target, const struct target_opts *t, bool resume, bool rescue,
	      struct im_err *err)
{
	char path[sizeof(((struct tjournal *)0)->path)];
	const char *fmt;

	if (!resume)
		return 0;
	if (rescue)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "--resume does not combine with --rescue (the map would miss what the first run met)");
	if (t->shrink)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL, "--resume does not shrink");
	if (!tjournal_path(target, path, sizeof(path)))
		return refuse_no_journal(target, err);
	fmt = t->format ? t->format : bk_format_from_name(target);
	if (fmt && strcmp(fmt, "raw"))
		return im_errf(err, IM_EXIT_TARGET, -ENOTSUP,
			       "%s: a %s target cannot be resumed, only a raw one (a qcow2's "
			       "tables are written when it closes)", target, fmt);
	return 0;
}

int cj_checkpoint(struct copyjob *j, size_t part, uint64_t pos, struct im_err *err)
{
	int r;

	if (!j->jn.on)
		return 0;
	r = bk_flush(j->w.tgt, err);
	if (r == 0 && tjournal_write(&j->jn, (uint32_t)part, pos, j->done) < 0) {
		j->jn.on = false;
		unlink(j->jn.path);
	}
	return r;
}

int cj_tick(struct copyjob *j, size_t part, uint64_t pos, struct im_err *err)
{
	if (!j->jn.on || util_mono_ms() - j->jn.written_ms < j->o->checkpoint_ms)
		return 0;
	return cj_checkpoint(j, part, pos, err);
}

void cj_progress(struct copyjob *j)
{
	if (j->o->progress->fn)
		j->o->progress->fn(j->o->progress->opaque, j->src->what, j->done, j->total);
}

/* The journal: kept (or read, for --resume) when asked for and the source
 * and target allow it. */
static int journal_open(struct copyjob *j, size_t nparts, struct im_err *err)
{
	const struct cj_opts *o = j->o;

	j->jn.kind = j->src->kind;
	j->jn.on = (o->journal || o->resume) && !o->rescue && !o->t->shrink && j->src->identity &&
		   j->src->identity(j->src->ctx, o->t, &j->jn.identity) == 0 &&
		   tjournal_path(o->target, j->jn.path, sizeof(j->jn.path));
	if (o->resume && !j->jn.on)
		return refuse_no_journal(o->target, err);
	return o->resume ? tjournal_read(&j->jn, (uint32_t)nparts, err) : 0;
}

/* Each partition onto the writer, the journal's done ones passed over
 * (their heads written all the same). */
static int copy_parts(struct copyjob *j, size_t nparts, struct im_err *err)
{
	const bool resume = j->o->resume;
	int r = 0;

	for (size_t i = 0; i < nparts && r == 0; i++) {
		uint64_t from = !resume || i > j->jn.part ? 0 : i < j->jn.part ? UINT64_MAX : j->jn.pos;

		r = j->src->copy(j->src->ctx, j, i, from, err);
		if (r == 0 && from != UINT64_MAX)
			r = cj_checkpoint(j, i + 1, 0, err);
	}
	return r;
}

/* Journal -> writer -> each partition -> finish, on the plan pl (total:
 * the used bytes to copy). */
static int cj_copy(const struct cj_source *src, const struct cj_opts *o, const struct disk_plan *pl,
		   uint64_t total, struct cj_stats *st, struct im_err *err)
{
	struct copyjob j = { .src = src, .o = o, .st = st, .total = total,
			     .threads = o->threads ? o->threads : pipeline_default_threads() };
	int r = journal_open(&j, pl->nparts, err);

	if (r == 0)
		r = writer_start(&j.w, o->roots, o->target, pl, o->t, st->grow, err);
	if (r == 0)
		r = tjournal_start(&j.jn, o->resume, o->target, j.w.info.format, j.w.tgt->size, err);
	if (r == 0)
		r = writer_check_room(&j.w, total, err);
	if (r == 0 && o->resume) {   /* (every check passed: the journal is this run's) */
		*st->resumed_bytes = j.jn.bytes;
		if (src->resume_skips)
			j.done = j.jn.bytes;
		j.jn.mine = true;
	}
	if (r == 0)
		r = copy_parts(&j, pl->nparts, err);
	*st->bytes_written += j.written;
	if (r == 0)
		r = writer_finish(&j.w, pl, err);
	if (r < 0 && j.jn.on && err->exit_class == IM_EXIT_INTERRUPTED) {
		/* Kept for --resume: the target has no table yet, so it does not
		 * look complete. */
		j.w.keep = true;
		snprintf(err->msg, sizeof(err->msg),
			 "interrupted: %s is left without its partition table; imager %s "
			 "--resume %s %s carries on", o->target, src->what, src->name, o->target);
	}
	/* Once everything is in place (the heads were held back until now). */
	if (r == 0 && o->verify && src->verify)
		r = src->verify(src->ctx, &j, err);
	r = writer_end(&j.w, r, o->t, pl->fs, st->grow, st->target, err);
	if (j.jn.on && j.jn.mine && !j.w.keep)
		unlink(j.jn.path);
	return r;
}

/* The shrink's last leg: the temporary copy TMP, its filesystems shrunk,
 * copied onto the target with the new layout lp (n partitions on a disk
 * of new_disk bytes). */
static int shrunk_onto(const struct cj_opts *o, const char *tmp, const struct layout_part *lp,
		       size_t n, uint64_t new_disk, struct cj_stats *st, struct im_err *err)
{
	struct target_opts t = *o->t;
	/* (The source's filesystems were checked by the copy; ntfsresize marks
	 * the volume dirty on purpose, so that Windows runs chkdsk once at its
	 * next boot, and that is kept.) */
	struct cj_opts co = { .roots = o->roots, .target = o->target, .t = &t,
			      .threads = o->threads, .progress = o->progress };
	struct disksrc d;
	uint64_t read = 0, verified = 0;
	int r;

	t.layout = lp;
	t.nlayout = n;
	t.layout_disk = new_disk;
	t.shrink = false;
	r = disksrc_open(&d, o->roots, tmp, NULL, true, NULL, NULL, &read, &verified, err);
	if (r < 0)
		return r;
	*st->bytes_written = 0;
	r = cj_run(&d.cj, &co, st, err);
	disksrc_close(&d);
	return r;
}

/* What the report says of each partition that shrank or moved. */
static void shrink_notes(const struct shrink_part *sp, const struct layout_part *lp, size_t n,
			 struct grow_report *rep)
{
	for (size_t i = 0; i < n && i < PT_MAX_PARTS; i++) {
		char u[32];
		util_human_size(sp[i].used, u, sizeof(u));
		rep->grown_fs[i][0] = '\0';
		if (lp[i].new_size < lp[i].old_size)
			snprintf(rep->note[i], sizeof(rep->note[i]), "%s shrunk (%s used)%s",
				 sp[i].fs, u,
				 strcmp(sp[i].fs, "ntfs") ? ""
				 : "; Windows runs chkdsk once at its next boot");
		else if (lp[i].new_start != lp[i].old_start)
			snprintf(rep->note[i], sizeof(rep->note[i]), "moved");
	}
}

/* --shrink: the source as it is into a sparse raw file under a temporary
 * folder, its filesystems shrunk there (shrink.c), then that file onto the
 * target with the new layout, and the copy removed. */
static int shrink_run(const struct cj_source *src, const struct cj_opts *o,
		      const struct disk_plan *pl, uint64_t total, const struct shrink_part *sp,
		      uint64_t new_disk, struct cj_stats *st, struct im_err *err)
{
	const size_t n = pl->nparts;
	struct layout_part lp[PT_MAX_PARTS];
	char note[PT_MAX_PARTS][SHRINK_NOTE], tmpdir[4096], tmp[4200];
	uint64_t used = 0;
	int r = shrink_plan(pl->table, pl->lss, new_disk, sp, n, lp, note, err);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n && o->progress->note; i++)
		if (note[i][0])
			o->progress->note(o->progress->opaque, note[i]);
	for (size_t i = 0; i < n; i++)
		used += sp[i].used;
	r = shrink_tmpdir(tmpdir, sizeof(tmpdir), used + used / 10 + 64 * MIB, err);
	if (r < 0)
		return r;
	snprintf(tmp, sizeof(tmp), "%s/disk.raw", tmpdir);
	{
		/* 1. The source as it is, into the sparse copy (its report
		 * dropped). */
		struct target_opts t = { .format = "raw" };
		struct cj_opts co = { .roots = o->roots, .target = tmp, .t = &t,
				      .threads = o->threads, .progress = o->progress };
		uint64_t written = 0, resumed = 0;
		struct grow_report *grow = calloc(1, sizeof(*grow));
		struct target_info info;
		struct cj_stats cs = { .bytes_written = &written, .resumed_bytes = &resumed,
				       .grow = grow, .target = &info };

		r = grow ? cj_copy(src, &co, pl, total, &cs, err)
			 : im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		free(grow);
	}
	/* 2. Its filesystems shrunk. */
	if (r == 0)
		r = shrink_filesystems(tmp, tmpdir, sp, lp, n, pl->lss, o->progress, err);
	/* 3. The copy onto the target, laid out anew. */
	if (r == 0)
		r = shrunk_onto(o, tmp, lp, n, new_disk, st, err);
	if (r == 0)
		shrink_notes(sp, lp, n, st->grow);
	unlink(tmp);
	rmdir(tmpdir);
	return r;
}

/* A target smaller than the source's disk: refused without --shrink
 * (saying whether --shrink would fit it), else shrunk onto.  1 when the
 * target is not smaller (the copy goes on as usual), 0 when the shrink was
 * done, or negative errno. */
static int shrink_step(const struct cj_source *src, const struct cj_opts *o,
		       const struct disk_plan *pl, uint64_t total, struct cj_stats *st,
		       struct im_err *err)
{
	struct shrink_part sp[PT_MAX_PARTS];
	uint64_t new_disk;
	int r;

	if (o->t->layout || pl->nparts > PT_MAX_PARTS)
		return 1;
	memset(sp, 0, sizeof(sp));
	for (size_t i = 0; i < pl->nparts; i++) {
		sp[i].lp = pl->parts[i];
		src->shrink_part(src->ctx, i, &sp[i]);
	}
	r = writer_target_size(o->roots, o->target, o->t, pl->disk_size, &new_disk, err);
	if (r < 0)
		return r;
	if (new_disk >= pl->disk_size)
		return 1;
	if (!o->t->shrink)
		return shrink_refuse(o->target, new_disk, pl->disk_size, pl->table, pl->lss, sp,
				     pl->nparts, err);
	r = shrink_run(src, o, pl, total, sp, new_disk, st, err);
	return r < 0 ? r : 0;
}

int cj_run(const struct cj_source *src, const struct cj_opts *o, struct cj_stats *st,
	   struct im_err *err)
{
	struct disk_plan pl = { 0 };
	uint64_t total = 0;
	int r = src->plan(src->ctx, &pl, &total, err);

	if (r == 0)
		r = shrink_step(src, o, &pl, total, st, err);
	if (r == 1)
		r = cj_copy(src, o, &pl, total, st, err);
	disk_plan_free(&pl);
	return r;
}
