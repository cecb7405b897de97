/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager save: the used blocks of every partition, read in large runs,
 * compressed in parallel into independent zstd frames.
 */
#include "imager/job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "imager/backend.h"
#include "imager/fs.h"
#include "imager/pipeline.h"
#include "source.h"
#include "util.h"

/* Files this save created, so a failed save leaves nothing behind that
 * could pass for an image. */
struct created {
	char dir[4096];
	bool made_dir;
	struct path_lock lock;     /* the folder, held while the save runs */
	char (*names)[64];
	size_t n;
};

static int created_add(struct created *c, const char *name)
{
	char (*p)[64] = realloc(c->names, (c->n + 1) * sizeof(*c->names));
	if (!p)
		return -ENOMEM;
	c->names = p;
	snprintf(c->names[c->n++], 64, "%s", name);
	return 0;
}

static void created_undo(struct created *c)
{
	char path[4200];
	for (size_t i = 0; i < c->n; i++) {
		snprintf(path, sizeof(path), "%s/%s", c->dir, c->names[i]);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s.tmp", c->dir, c->names[i]);
		unlink(path);
	}
	if (c->made_dir)
		rmdir(c->dir);
}

/* ---- one partition through the pipeline ---- */

struct part_job {
	struct used_reader rd;
	uint32_t bs;
	int level;
	/* consumer */
	int out_fd;
	uint64_t out_off;
	XXH3_state_t *stream_hash;
	struct img_index *ix;
	uint64_t *bytes_done, bytes_total;
	const struct im_progress *progress;
};

static int save_produce(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct part_job *j = ctx;
	return used_read(&j->rd, s, err);
}

static void *save_worker_init(void *ctx)
{
	struct part_job *j = ctx;
	ZSTD_CCtx *c = ZSTD_createCCtx();

	if (!c)
		return NULL;
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, j->level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1))) {
		ZSTD_freeCCtx(c);
		return NULL;
	}
	return c;
}

static void save_worker_fini(void *ctx, void *ws)
{
	(void)ctx;
	ZSTD_freeCCtx(ws);
}

/* Zero blocks out, then compress and hash the data. */
static int save_work(void *ctx, void *ws, struct pipe_slot *s)
{
	struct part_job *j = ctx;
	struct used_meta *m = s->meta;
	size_t dst = used_split_zeros(s, j->bs), r;

	r = ZSTD_compress2(ws, s->b, s->b_cap, s->a, dst);
	if (ZSTD_isError(r))
		return im_errf(&s->err, IM_EXIT_INTERNAL, -EIO, "compression failed: %s",
			       ZSTD_getErrorName(r));
	s->b_len = r;
	memset(&m->frame, 0, sizeof(m->frame));
	m->frame.raw_size = (uint32_t)dst;
	m->frame.comp_size = (uint32_t)r;
	m->frame.raw_xxh3 = XXH3_64bits(s->a, dst);
	m->frame.comp_xxh3 = XXH3_64bits(s->b, r);
	return 0;
}

static int save_consume(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct part_job *j = ctx;
	struct used_meta *m = s->meta;
	int r;

	if (s->status < 0) {
		*err = s->err;
		return s->status;
	}
	r = write_full(j->out_fd, s->b, s->b_len);
	if (r == -ENOSPC || r == -EDQUOT) {
		struct statvfs vf;
		char f[32] = "?", w[32];
		if (fstatvfs(j->out_fd, &vf) == 0)
			human_size((uint64_t)vf.f_bavail * vf.f_frsize, f, sizeof(f));
		human_size(j->out_off, w, sizeof(w));
		return im_errf(err, IM_EXIT_IO, r,
			       "the filesystem holding the image is full (%s free, %s) after %s of this "
			       "partition's stream, %llu%% of the used data read: the unfinished image "
			       "is removed",
			       f, r == -EDQUOT ? "quota exceeded" : "no space left", w,
			       j->bytes_total ? (unsigned long long)(*j->bytes_done * 100 / j->bytes_total) : 0ULL);
	}
	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "writing the image: %s", strerror(-r));
	XXH3_64bits_update(j->stream_hash, s->b, s->b_len);
	m->frame.comp_offset = j->out_off;
	j->out_off += s->b_len;
	r = img_index_add(j->ix, &m->frame, m->ext + m->nin, m->nout);
	if (r < 0)
		return im_errf(err, IM_EXIT_INTERNAL, r, "out of memory");
	for (uint32_t i = 0; i < m->nin; i++)
		*j->bytes_done += (uint64_t)m->ext[i].count * j->bs;
	if (j->progress->fn)
		j->progress->fn(j->progress->opaque, "save", *j->bytes_done, j->bytes_total);
	return 0;
}

static int save_partition(struct bk *src, const struct pt_part *pp, const struct fs_info *fs,
			  const struct save_opts *opts, struct created *cr, struct img_part *ip,
			  uint64_t *bytes_done, uint64_t bytes_total, struct save_stats *stats,
			  struct im_err *err)
{
	struct img_index ix;
	struct part_job j = {
		.rd = { .bk = src, .base = pp->start, .used = &fs->used, .bs = fs->block_size,
			.bytes_read = &stats->bytes_read },
		.bs = fs->block_size, .level = opts->level, .bytes_done = bytes_done,
		.bytes_total = bytes_total, .progress = &opts->progress, .ix = &ix,
	};
	const struct pipe_ops ops = {
		.produce = save_produce, .work = save_work, .consume = save_consume,
		.worker_init = save_worker_init, .worker_fini = save_worker_fini,
		.cancel = opts->progress.cancel,
	};
	char path[4200];
	uint64_t blocks_per_frame = IMG_FRAME_BLOCKS_BYTES / fs->block_size;
	int r;

	if (blocks_per_frame == 0)   /* blocks larger than a frame: one per frame */
		blocks_per_frame = 1;
	snprintf(ip->stream, sizeof(ip->stream), "part%u.zst", pp->number);
	snprintf(ip->index, sizeof(ip->index), "part%u.idx", pp->number);
	if (created_add(cr, ip->stream) < 0 || created_add(cr, ip->index) < 0)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "%s/%s", cr->dir, ip->stream);
	j.out_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (j.out_fd < 0)
		return im_errf(err, IM_EXIT_TARGET, -errno, "%s: %s", path, strerror(errno));
	j.stream_hash = XXH3_createState();
	if (!j.stream_hash) {
		close(j.out_fd);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	XXH3_64bits_reset(j.stream_hash);
	img_index_init(&ix, fs->block_size);
	r = pipeline_run(&ops, &j, opts->threads ? opts->threads : pipeline_default_threads(),
			 blocks_per_frame * fs->block_size,
			 ZSTD_compressBound(blocks_per_frame * fs->block_size),
			 used_meta_size((uint32_t)blocks_per_frame),
			 err);
	if (r == 0 && fsync(j.out_fd) < 0)
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
	if (close(j.out_fd) < 0 && r == 0)
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
	if (r == 0) {
		ip->stream_size = j.out_off;
		ip->stream_xxh3 = XXH3_64bits_digest(j.stream_hash);
		ix.stream_size = j.out_off;
		snprintf(path, sizeof(path), "%s/%s", cr->dir, ip->index);
		r = img_index_write(&ix, path, &ip->index_size, &ip->index_xxh3, err);
	}
	if (r == 0) {
		ip->frames = ix.nframes;
		ip->zero_blocks = ix.zero_blocks;
		ip->data_bytes = ix.data_blocks * fs->block_size;
		stats->image_bytes += ip->stream_size + ip->index_size;
	}
	XXH3_freeState(j.stream_hash);
	img_index_free(&ix);
	return r;
}

/* ---- the whole disk ---- */

/* A file an interrupted save may have left: boot-*.bin, part*.zst,
 * part*.idx, rescue.map, and their .tmp forms.  Never manifest.json. */
static bool is_our_file(const char *n)
{
	size_t len = strlen(n);
	char base[256];

	if (len >= sizeof(base))
		return false;
	strcpy(base, n);
	if (len > 4 && !strcmp(base + len - 4, ".tmp"))
		base[len -= 4] = '\0';
	if (!strncmp(base, "boot-", 5) && len > 4 && !strcmp(base + len - 4, ".bin"))
		return true;
	if (!strncmp(base, "part", 4) && len > 4 &&
	    (!strcmp(base + len - 4, ".zst") || !strcmp(base + len - 4, ".idx")))
		return true;
	return !strcmp(base, IMG_RESCUE_MAP);
}

static int prepare_dir(struct created *cr, const char *dir, struct im_err *err)
{
	DIR *dh;
	struct dirent *de;

	pid_t holder;
	int r;

	snprintf(cr->dir, sizeof(cr->dir), "%s", dir);
	if (mkdir(dir, 0755) == 0) {
		r = path_lock(&cr->lock, dir, false, &holder);
		/* (refused: another save took it in between; its folder now) */
		cr->made_dir = r == 0;
		return r < 0 ? path_lock_err(err, dir, r, holder) : 0;
	}
	if (errno != EEXIST)
		return im_errf(err, IM_EXIT_TARGET, -errno, "cannot create %s: %s", dir, strerror(errno));
	/* Another save writing it would lose its files to the clearing below:
	 * the folder is held first. */
	r = path_lock(&cr->lock, dir, false, &holder);
	if (r < 0 && r != -ENOTDIR)
		return path_lock_err(err, dir, r, holder);
	dh = opendir(dir);
	if (!dh)
		return im_errf(err, IM_EXIT_TARGET, -errno, "%s: %s", dir, strerror(errno));
	/* An empty folder, or an unfinished image (our files and no manifest,
	 * left by an interrupted save): the latter is cleared and replaced. */
	while ((de = readdir(dh))) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		if (!is_our_file(n)) {
			closedir(dh);
			return im_errf(err, IM_EXIT_TARGET, -EEXIST,
				       "%s exists and is not empty%s; give a new folder", dir,
				       strcmp(n, IMG_MANIFEST) ? "" : " (it holds an image)");
		}
	}
	rewinddir(dh);
	while ((de = readdir(dh)))
		if (is_our_file(de->d_name)) {
			char path[4400];
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			unlink(path);
		}
	closedir(dh);
	return 0;
}

static int save_area(struct source *src, const struct pt_area *a, size_t i, struct created *cr,
		     struct img_area *ia, struct im_err *err)
{
	unsigned char *buf;
	char path[4200];
	int r = source_read_area(src, a, &buf, err);

	if (r < 0)
		return r;
	snprintf(ia->name, sizeof(ia->name), "%s", a->name);
	snprintf(ia->file, sizeof(ia->file), "boot-%02zu-%s.bin", i, a->name);
	ia->offset = a->offset;
	ia->length = a->length;
	ia->xxh3 = XXH3_64bits(buf, a->length);
	snprintf(path, sizeof(path), "%s/%s", cr->dir, ia->file);
	r = created_add(cr, ia->file);
	if (r == 0)
		r = write_file_atomic(path, buf, a->length);
	free(buf);
	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "writing %s: %s", path, strerror(-r));
	return 0;
}

/* The manifest's entry for a partition: where it lies and what its
 * plugin found (the volumes copied: the source's list is freed with it). */
static int describe_partition(const struct pt_part *pp, const struct fs_info *fs,
			      struct img_part *ip, struct im_err *err)
{
	ip->number = pp->number;
	ip->start = pp->start;
	ip->size = pp->size;
	snprintf(ip->kind, sizeof(ip->kind), "%s", pp->kind);
	snprintf(ip->gpt_name, sizeof(ip->gpt_name), "%s", pp->name);
	snprintf(ip->filesystem, sizeof(ip->filesystem), "%s", fs->type);
	snprintf(ip->plugin, sizeof(ip->plugin), "%s", fs->plugin->name);
	snprintf(ip->uuid, sizeof(ip->uuid), "%s", fs->uuid);
	snprintf(ip->label, sizeof(ip->label), "%s", fs->label);
	ip->block_size = fs->block_size;
	ip->block_count = fs->block_count;
	ip->used_blocks = fs->used_blocks;
	snprintf(ip->container, sizeof(ip->container), "%s", fs->container);
	if (fs->nvolumes) {
		ip->volumes = calloc(fs->nvolumes, sizeof(*ip->volumes));
		if (!ip->volumes)
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		memcpy(ip->volumes, fs->volumes, fs->nvolumes * sizeof(*ip->volumes));
		ip->nvolumes = fs->nvolumes;
	}
	return 0;
}

/* The manifest's description of the disk: the tool, the time, the source,
 * its size and sectors (the physical size from sysfs for a block device),
 * the table. */
static void describe_disk(const struct disk_roots *roots, const struct source *src,
			  struct img_manifest *m)
{
	const struct ptable *pt = src->pt;
	time_t now = time(NULL);
	struct tm tm;

	snprintf(m->tool_version, sizeof(m->tool_version), "%s", IMAGER_VERSION);
	gmtime_r(&now, &tm);
	strftime(m->created, sizeof(m->created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(m->source, sizeof(m->source), "%s", src->ref.path);
	m->disk_size = pt->disk_size;
	m->logical_sector_size = pt->sector_size;
	m->physical_sector_size = pt->sector_size;
	if (src->ref.kind == DISK_KIND_BLOCK) {
		char attr[700], buf[32];
		FILE *f;
		snprintf(attr, sizeof(attr), "%s/block/%s/queue/physical_block_size", roots->sysfs,
			 src->ref.name);
		if ((f = fopen(attr, "re"))) {
			if (fgets(buf, sizeof(buf), f) && atoi(buf) >= 512)
				m->physical_sector_size = (unsigned)atoi(buf);
			fclose(f);
		}
	}
	snprintf(m->table, sizeof(m->table), "%s", pt->type);
}

/* After a rescue: the map into the folder, and in the manifest what was
 * unreadable in all, in each partition, and the first ranges. */
static int record_unreadable(struct source *src, const struct save_opts *opts, struct created *cr,
			     struct img_manifest *m, struct save_stats *stats, struct im_err *err)
{
	struct img_unreadable *u = &m->unreadable;
	const struct bk_range *bad;
	char path[4200];
	size_t n;
	int r;

	snprintf(path, sizeof(path), "%s/%s", cr->dir, IMG_RESCUE_MAP);
	if (created_add(cr, IMG_RESCUE_MAP) < 0)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = source_rescue_finish(src, path, &opts->rescue, &stats->rescue, err);
	if (r < 0 || !stats->rescue.bytes)
		return r;
	u->bytes = stats->rescue.bytes;
	u->ranges = stats->rescue.ranges;
	snprintf(u->map, sizeof(u->map), "%s", IMG_RESCUE_MAP);
	r = img_hash_file(path, &u->map_size, &u->map_xxh3);
	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "%s: %s", path, strerror(-r));
	bad = bk_rescue_bad(src->bk, &n);
	for (size_t i = 0; i < n && u->nlist < IMG_UNREADABLE_LIST; i++) {
		u->list[u->nlist].offset = bad[i].off;
		u->list[u->nlist++].length = bad[i].len;
	}
	for (size_t i = 0; i < m->nparts; i++)
		m->parts[i].unreadable_bytes =
			bk_rescue_bad_bytes(src->bk, m->parts[i].start, m->parts[i].size);
	return 0;
}

int im_save(const struct disk_roots *roots, const char *source, const char *dir,
	    const struct save_opts *opts, struct img_manifest *m, struct save_stats *stats,
	    struct im_err *err)
{
	struct source src;
	struct ptable *pt;
	struct created cr = { 0 };
	uint64_t done = 0;
	int r;

	memset(m, 0, sizeof(*m));
	memset(stats, 0, sizeof(*stats));
	/* Every filesystem is examined before anything is written: an unclean
	 * one stops the save while nothing has been spent. */
	r = source_open(roots, source, opts->format, opts->force, &opts->rescue, &src, err);
	if (r < 0)
		return r;
	pt = src.pt;
	for (size_t i = 0; i < src.nwarnings; i++)
		snprintf(stats->warnings[stats->nwarnings++], sizeof(stats->warnings[0]), "%s",
			 src.warnings[i]);
	m->parts = calloc(pt->nparts + 1, sizeof(*m->parts));
	m->areas = calloc(pt->nareas + 1, sizeof(*m->areas));
	if (!m->parts || !m->areas) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto out;
	}
	r = prepare_dir(&cr, dir, err);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < pt->nareas; i++) {
		r = save_area(&src, &pt->areas[i], i, &cr, &m->areas[i], err);
		if (r < 0)
			goto out;
		m->nareas++;
		stats->bytes_read += pt->areas[i].length;
		stats->image_bytes += pt->areas[i].length;
	}
	for (size_t i = 0; i < pt->nparts; i++) {
		const struct pt_part *pp = &pt->parts[i];
		struct img_part *ip = &m->parts[i];

		r = describe_partition(pp, &src.fs[i], ip, err);
		if (r == 0)
			r = save_partition(src.bk, pp, &src.fs[i], opts, &cr, ip, &done, src.used_bytes,
					   stats, err);
		if (r < 0) {
			free(ip->volumes);   /* (not counted in m->nparts yet) */
			ip->volumes = NULL;
			im_err_prefix(err, "partition %u: ", pp->number);
			goto out;
		}
		m->nparts++;
	}
	describe_disk(roots, &src, m);
	if (opts->rescue.on && (r = record_unreadable(&src, opts, &cr, m, stats, err)) < 0)
		goto out;
	/* Last, atomically: from here on the folder is an image. */
	r = img_manifest_write(m, dir, err);
out:
	if (r < 0) {
		created_undo(&cr);
		img_manifest_free(m);
	}
	path_unlock(&cr.lock);
	free(cr.names);
	source_close(&src);
	return r;
}
