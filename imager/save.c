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
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "imager/fs.h"
#include "imager/pipeline.h"
#include "util.h"

/* Files this save created, so a failed save leaves nothing behind that
 * could pass for an image. */
struct created {
	char dir[4096];
	bool made_dir;
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

struct save_meta {
	uint32_t nin, nout;
	struct img_frame frame;
	struct img_extent ext[];   /* nin read runs, then nout output extents */
};

struct part_job {
	int fd;
	uint64_t base;             /* partition start */
	const struct fs_info *fs;
	uint32_t bs;
	uint32_t max_ext;          /* blocks per frame: bound on extents */
	int level;
	/* producer cursor */
	uint64_t run_pos, run_left;
	/* consumer */
	int out_fd;
	uint64_t out_off;
	XXH3_state_t *stream_hash;
	struct img_index *ix;
	uint64_t *bytes_done, bytes_total;
	uint64_t *bytes_read;
	const struct im_progress *progress;
};

static int save_produce(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct part_job *j = ctx;
	struct save_meta *m = s->meta;
	size_t room = s->a_cap / j->bs;     /* blocks that fit */

	m->nin = 0;
	s->a_len = 0;
	while (room) {
		uint64_t n;
		int r;
		if (!j->run_left) {
			j->run_left = bitmap_next_run(&j->fs->used, &j->run_pos);
			if (!j->run_left)
				break;
		}
		n = j->run_left < room ? j->run_left : room;
		r = pread_full(j->fd, s->a + s->a_len, (size_t)(n * j->bs), j->base + j->run_pos * j->bs);
		if (r < 0)
			return im_errf(err, IM_EXIT_IO, r, "reading %llu bytes at offset %llu: %s",
				       (unsigned long long)(n * j->bs),
				       (unsigned long long)(j->base + j->run_pos * j->bs), strerror(-r));
		m->ext[m->nin].start = j->run_pos;
		m->ext[m->nin].count = (uint32_t)n;
		m->ext[m->nin].flags = 0;
		m->nin++;
		s->a_len += (size_t)(n * j->bs);
		*j->bytes_read += n * j->bs;
		j->run_pos += n;
		j->run_left -= n;
		room -= n;
	}
	return s->a_len ? 1 : 0;
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

/* Split the read runs into data and all-zero extents, packing the data
 * together, then compress and hash it. */
static int save_work(void *ctx, void *ws, struct pipe_slot *s)
{
	struct part_job *j = ctx;
	struct save_meta *m = s->meta;
	struct img_extent *out = m->ext + m->nin;
	size_t src = 0, dst = 0, r;

	m->nout = 0;
	for (uint32_t i = 0; i < m->nin; i++) {
		for (uint32_t b = 0; b < m->ext[i].count; b++, src += j->bs) {
			uint32_t flag = buf_is_zero(s->a + src, j->bs) ? IMG_EXT_ZERO : 0;
			uint64_t blk = m->ext[i].start + b;
			if (m->nout && out[m->nout - 1].flags == flag &&
			    out[m->nout - 1].start + out[m->nout - 1].count == blk) {
				out[m->nout - 1].count++;
			} else {
				out[m->nout].start = blk;
				out[m->nout].count = 1;
				out[m->nout].flags = flag;
				m->nout++;
			}
			if (!flag) {
				if (dst != src)
					memmove(s->a + dst, s->a + src, j->bs);
				dst += j->bs;
			}
		}
	}
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
	struct save_meta *m = s->meta;
	int r;

	if (s->status < 0) {
		*err = s->err;
		return s->status;
	}
	r = write_full(j->out_fd, s->b, s->b_len);
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

static int save_partition(int fd, const struct pt_part *pp, const struct fs_info *fs,
			  const struct save_opts *opts, struct created *cr, struct img_part *ip,
			  uint64_t *bytes_done, uint64_t bytes_total, struct save_stats *stats,
			  struct im_err *err)
{
	struct img_index ix;
	struct part_job j = {
		.fd = fd, .base = pp->start, .fs = fs, .bs = fs->block_size,
		.level = opts->level, .bytes_done = bytes_done, .bytes_total = bytes_total,
		.bytes_read = &stats->bytes_read, .progress = &opts->progress, .ix = &ix,
	};
	const struct pipe_ops ops = {
		.produce = save_produce, .work = save_work, .consume = save_consume,
		.worker_init = save_worker_init, .worker_fini = save_worker_fini,
	};
	char path[4200];
	uint64_t blocks_per_frame = IMG_FRAME_BLOCKS_BYTES / fs->block_size;
	int r;

	if (blocks_per_frame == 0)   /* blocks larger than a frame: one per frame */
		blocks_per_frame = 1;
	j.max_ext = (uint32_t)blocks_per_frame;
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
			 sizeof(struct save_meta) + 2 * blocks_per_frame * sizeof(struct img_extent),
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

static int prepare_dir(struct created *cr, const char *dir, struct im_err *err)
{
	DIR *dh;
	struct dirent *de;

	snprintf(cr->dir, sizeof(cr->dir), "%s", dir);
	if (mkdir(dir, 0755) == 0) {
		cr->made_dir = true;
		return 0;
	}
	if (errno != EEXIST)
		return im_errf(err, IM_EXIT_TARGET, -errno, "cannot create %s: %s", dir, strerror(errno));
	dh = opendir(dir);
	if (!dh)
		return im_errf(err, IM_EXIT_TARGET, -errno, "%s: %s", dir, strerror(errno));
	while ((de = readdir(dh)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			closedir(dh);
			return im_errf(err, IM_EXIT_TARGET, -EEXIST,
				       "%s exists and is not empty; give a new folder", dir);
		}
	closedir(dh);
	return 0;
}

static int save_area(int fd, const struct pt_area *a, size_t i, struct created *cr,
		     struct img_area *ia, struct im_err *err)
{
	unsigned char *buf = malloc(a->length ? a->length : 1);
	char path[4200];
	int r;

	if (!buf)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = pread_full(fd, buf, a->length, a->offset);
	if (r < 0) {
		free(buf);
		return im_errf(err, IM_EXIT_IO, r, "reading boot area %s: %s", a->name, strerror(-r));
	}
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

int im_save(const struct disk_roots *roots, const char *source, const char *dir,
	    const struct save_opts *opts, struct img_manifest *m, struct save_stats *stats,
	    struct im_err *err)
{
	struct disk_ref ref;
	struct ptable *pt = NULL;
	struct fs_info *fs = NULL;
	struct created cr = { 0 };
	uint64_t total = 0, done = 0;
	int fd = -1, r;

	memset(m, 0, sizeof(*m));
	memset(stats, 0, sizeof(*stats));
	r = disk_resolve(roots, source, &ref, err);
	if (r < 0)
		return r;
	if (!ref.exists)
		return im_errf(err, IM_EXIT_SOURCE, -ENOENT, "%s: no such disk or file", source);
	fd = open(ref.path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", ref.path, strerror(errno));
	pt = calloc(1, sizeof(*pt));
	if (!pt) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto out;
	}
	if (ref.size < 512) {
		r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: %llu bytes is too small to be a disk",
			    ref.path, (unsigned long long)ref.size);
		goto out;
	}
	if (ref.kind == DISK_KIND_PARTITION) {
		/* One filesystem: saved like a disk without a table. */
		snprintf(pt->type, sizeof(pt->type), "none");
		pt->disk_size = ref.size;
		pt->sector_size = ref.logical_sector_size;
		pt->nparts = 1;
		pt->parts[0].size = ref.size;
		snprintf(pt->parts[0].kind, sizeof(pt->parts[0].kind), "whole-disk");
	} else {
		r = ptable_read(ref.path, ref.size, ref.logical_sector_size, pt, err);
		if (r < 0)
			goto out;
	}

	/* Examine every filesystem before writing anything: an unclean one
	 * stops the save while nothing has been spent. */
	fs = calloc(pt->nparts ? pt->nparts : 1, sizeof(*fs));
	m->parts = calloc(pt->nparts ? pt->nparts : 1, sizeof(*m->parts));
	m->areas = calloc(pt->nareas ? pt->nareas : 1, sizeof(*m->areas));
	if (!fs || !m->parts || !m->areas) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < pt->nparts; i++) {
		const struct pt_part *pp = &pt->parts[i];
		r = fs_examine(fd, pp->start, pp->size, opts->force, &fs[i], err);
		if (r < 0) {
			im_err_prefix(err, "partition %u: ", pp->number);
			goto out;
		}
		if (fs[i].warning[0] && stats->nwarnings < 4)
			snprintf(stats->warnings[stats->nwarnings++], sizeof(stats->warnings[0]),
				 "partition %u: %s", pp->number, fs[i].warning);
		total += fs[i].used_blocks * fs[i].block_size;
	}

	r = prepare_dir(&cr, dir, err);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < pt->nareas; i++) {
		r = save_area(fd, &pt->areas[i], i, &cr, &m->areas[i], err);
		if (r < 0)
			goto out;
		m->nareas++;
		stats->bytes_read += pt->areas[i].length;
		stats->image_bytes += pt->areas[i].length;
	}
	for (size_t i = 0; i < pt->nparts; i++) {
		const struct pt_part *pp = &pt->parts[i];
		struct img_part *ip = &m->parts[i];
		ip->number = pp->number;
		ip->start = pp->start;
		ip->size = pp->size;
		snprintf(ip->kind, sizeof(ip->kind), "%s", pp->kind);
		snprintf(ip->gpt_name, sizeof(ip->gpt_name), "%s", pp->name);
		snprintf(ip->filesystem, sizeof(ip->filesystem), "%s", fs[i].type);
		snprintf(ip->plugin, sizeof(ip->plugin), "%s", fs[i].plugin->name);
		snprintf(ip->uuid, sizeof(ip->uuid), "%s", fs[i].uuid);
		snprintf(ip->label, sizeof(ip->label), "%s", fs[i].label);
		ip->block_size = fs[i].block_size;
		ip->block_count = fs[i].block_count;
		ip->used_blocks = fs[i].used_blocks;
		r = save_partition(fd, pp, &fs[i], opts, &cr, ip, &done, total, stats, err);
		if (r < 0) {
			im_err_prefix(err, "partition %u: ", pp->number);
			goto out;
		}
		m->nparts++;
	}
	snprintf(m->tool_version, sizeof(m->tool_version), "%s", IMAGER_VERSION);
	{
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(m->created, sizeof(m->created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	snprintf(m->source, sizeof(m->source), "%s", ref.path);
	m->disk_size = pt->disk_size;
	m->logical_sector_size = pt->sector_size;
	m->physical_sector_size = pt->sector_size;
	{
		struct disk_desc *disks = NULL;
		struct im_err ignored = { 0 };
		int n = ref.kind == DISK_KIND_BLOCK ? disk_list(roots, &disks, &ignored) : 0;
		for (int i = 0; i < n; i++)
			if (!strcmp(disks[i].name, ref.name))
				m->physical_sector_size = disks[i].physical_sector_size;
		if (n > 0)
			disk_list_free(disks, (size_t)n);
	}
	snprintf(m->table, sizeof(m->table), "%s", pt->type);
	/* Last, atomically: from here on the folder is an image. */
	r = img_manifest_write(m, dir, err);
out:
	if (r < 0) {
		created_undo(&cr);
		img_manifest_free(m);
	}
	if (fs)
		for (size_t i = 0; i < pt->nparts; i++)
			fs_info_free(&fs[i]);
	free(fs);
	free(pt);
	free(cr.names);
	if (fd >= 0)
		close(fd);
	return r;
}
