/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager restore: frames read in order, decompressed in parallel, written to
 * their blocks.  The partition table and the first bytes of every partition
 * (where superblocks live) are written last, so that an interrupted restore
 * leaves a target that does not look like a complete disk.
 */
#include "imager/job.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "frames.h"
#include "imager/pipeline.h"
#include "util.h"

/* Bytes at the start of each partition held back until the end. */
#define HEAD_ZONE (64u << 10)

struct restore_meta {
	uint64_t frame;
	bool read_failed;
	char what[160];
};

struct rpart_job {
	const struct img_part *p;
	const struct img_index *ix;
	int stream_fd, target_fd;
	bool target_fresh, target_is_blk;
	unsigned char *head_zone;       /* HEAD_ZONE bytes, written last */
	uint64_t head_len;
	uint64_t next_frame;
	uint64_t *bytes_done, bytes_total, *bytes_written;
	const struct im_progress *progress;
};

static int restore_produce(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct rpart_job *j = ctx;
	struct restore_meta *m = s->meta;
	const struct img_frame *f;
	int r;

	(void)err;
	if (j->next_frame >= j->ix->nframes)
		return 0;
	f = &j->ix->frames[j->next_frame];
	m->frame = j->next_frame++;
	m->read_failed = false;
	r = pread_full(j->stream_fd, s->a, f->comp_size, f->comp_offset);
	if (r < 0) {
		m->read_failed = true;
		snprintf(m->what, sizeof(m->what), "cannot read it from the stream: %s",
			 r == -EIO ? "the stream ends early (truncated)" : strerror(-r));
	}
	s->a_len = f->comp_size;
	return 1;
}

static void *dctx_init(void *ctx) { (void)ctx; return ZSTD_createDCtx(); }
static void dctx_fini(void *ctx, void *ws) { (void)ctx; ZSTD_freeDCtx(ws); }

static int restore_work(void *ctx, void *ws, struct pipe_slot *s)
{
	struct rpart_job *j = ctx;
	struct restore_meta *m = s->meta;

	if (m->read_failed)
		return -EBADMSG;
	return frame_decode(ws, &j->ix->frames[m->frame], s->a, s->b, s->b_cap, m->what,
			    sizeof(m->what));
}

/* Zeros on a target that may hold old data (a fresh file already reads as
 * zeros).  Ask the device or filesystem to do it, else write them. */
static int write_zeros(int fd, bool is_blk, uint64_t off, uint64_t len)
{
	static const unsigned char zeros[65536];

	if (is_blk) {
		uint64_t range[2] = { off, len };
		if (ioctl(fd, BLKZEROOUT, range) == 0)
			return 0;
	} else if (fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			     (off_t)len) == 0) {
		return 0;
	}
	while (len) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
		int r = pwrite_full(fd, zeros, n, off);
		if (r < 0)
			return r;
		off += n;
		len -= n;
	}
	return 0;
}

/* Write [off, off+len) of the partition; bytes in the head zone go to the
 * held-back buffer instead.  data == NULL means zeros. */
static int put_range(struct rpart_job *j, uint64_t off, uint64_t len, const unsigned char *data)
{
	if (off < j->head_len) {
		uint64_t n = j->head_len - off < len ? j->head_len - off : len;
		if (data)
			memcpy(j->head_zone + off, data, n);
		else
			memset(j->head_zone + off, 0, n);
		off += n;
		len -= n;
		if (data)
			data += n;
	}
	if (!len)
		return 0;
	if (data)
		return pwrite_full(j->target_fd, data, len, j->p->start + off);
	if (j->target_fresh)
		return 0;
	return write_zeros(j->target_fd, j->target_is_blk, j->p->start + off, len);
}

static int restore_consume(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct rpart_job *j = ctx;
	struct restore_meta *m = s->meta;
	const struct img_frame *f = &j->ix->frames[m->frame];
	const unsigned char *data = s->b;
	uint32_t bs = j->ix->block_size;

	if (s->status < 0) {
		uint64_t off, len;
		frame_span(j->ix, f, j->p->start, &off, &len);
		return im_errf(err, IM_EXIT_DAMAGED, s->status,
			       "partition %u: frame %llu of %s is damaged (%s); it holds disk bytes %llu-%llu; nothing was restored past it",
			       j->p->number, (unsigned long long)m->frame, j->p->stream, m->what,
			       (unsigned long long)off, (unsigned long long)(off + len));
	}
	for (uint32_t i = 0; i < f->nextents; i++) {
		const struct img_extent *e = &j->ix->extents[f->first_extent + i];
		uint64_t len = (uint64_t)e->count * bs;
		bool zero = e->flags & IMG_EXT_ZERO;
		int r = put_range(j, e->start * bs, len, zero ? NULL : data);
		if (r < 0)
			return im_errf(err, IM_EXIT_IO, r, "writing %llu bytes at offset %llu: %s",
				       (unsigned long long)len,
				       (unsigned long long)(j->p->start + e->start * bs), strerror(-r));
		if (!zero)
			data += len;
		*j->bytes_done += len;
		*j->bytes_written += len;
	}
	if (j->progress->fn)
		j->progress->fn(j->progress->opaque, "restore", *j->bytes_done, j->bytes_total);
	return 0;
}

static int parse_target(const struct disk_roots *roots, const char *target, struct disk_ref *ref,
			struct im_err *err)
{
	int r = disk_resolve(roots, target, ref, err);
	if (r < 0)
		return r;
	if (!ref->exists && ref->under_dev)
		return im_errf(err, IM_EXIT_TARGET, -ENODEV, "%s: no such device", ref->path);
	return 0;
}

int im_restore(const struct disk_roots *roots, const char *dir, const char *target,
	       const struct restore_opts *opts, struct restore_stats *stats, struct im_err *err)
{
	struct img_manifest m;
	struct img_index *ix = NULL;
	unsigned char **areas = NULL, **heads = NULL;
	struct disk_ref ref;
	uint64_t need, total = 0, done = 0;
	int tfd = -1, r;
	bool created = false;
	char what[400];

	memset(stats, 0, sizeof(*stats));
	r = img_manifest_read(&m, dir, err);
	if (r < 0)
		return r;
	/* Everything checkable before a byte is written. */
	ix = calloc(m.nparts ? m.nparts : 1, sizeof(*ix));
	areas = calloc(m.nareas ? m.nareas : 1, sizeof(*areas));
	heads = calloc(m.nparts ? m.nparts : 1, sizeof(*heads));
	if (!ix || !areas || !heads) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < m.nparts; i++) {
		r = image_check_part_files(dir, &m.parts[i], &ix[i], err);
		if (r < 0)
			goto out;
		total += (m.parts[i].used_blocks) * m.parts[i].block_size;
	}
	for (size_t i = 0; i < m.nareas; i++) {
		r = image_read_area(dir, &m.areas[i], &areas[i], err);
		if (r < 0)
			goto out;
	}
	r = parse_target(roots, target, &ref, err);
	if (r < 0)
		goto out;
	need = m.disk_size;
	if (opts->size) {
		if (opts->size < m.disk_size) {
			r = im_errf(err, IM_EXIT_TARGET, -ENOSPC,
				    "--size %llu is smaller than the source disk (%llu bytes)",
				    (unsigned long long)opts->size, (unsigned long long)m.disk_size);
			goto out;
		}
		if (ref.exists && ref.kind != DISK_KIND_FILE) {
			r = im_errf(err, IM_EXIT_USAGE, -EINVAL, "--size applies to image files, not to %s",
				    ref.path);
			goto out;
		}
		need = opts->size;
	}
	if (ref.exists && ref.size < m.disk_size) {
		if (!(opts->size && ref.kind == DISK_KIND_FILE)) {
			r = im_errf(err, IM_EXIT_TARGET, -ENOSPC,
				    "%s is too small: %llu bytes, the image needs %llu",
				    ref.path, (unsigned long long)ref.size,
				    (unsigned long long)m.disk_size);
			goto out;
		}
	}
	if (ref.exists && ref.kind != DISK_KIND_FILE) {
		r = disk_in_use(roots, ref.path, what, sizeof(what));
		if (r > 0 && !opts->force) {
			r = im_errf(err, IM_EXIT_TARGET, -EBUSY,
				    "%s is in use (%s); unmount it first, or --force", ref.path, what);
			goto out;
		}
	}
	if (ref.exists && ref.kind == DISK_KIND_PARTITION && strcmp(m.table, "none")) {
		r = im_errf(err, IM_EXIT_TARGET, -EINVAL,
			    "%s is a partition, but the image is a whole disk with a %s table",
			    ref.path, m.table);
		goto out;
	}
	if (ref.exists) {
		tfd = open(ref.path, O_RDWR | O_CLOEXEC);
		if (tfd < 0) {
			r = im_errf(err, IM_EXIT_TARGET, -errno, "%s: %s", ref.path, strerror(errno));
			goto out;
		}
		if (ref.kind == DISK_KIND_FILE && ref.size < need && ftruncate(tfd, (off_t)need) < 0) {
			r = im_errf(err, IM_EXIT_TARGET, -errno, "%s: cannot grow it: %s", ref.path,
				    strerror(errno));
			goto out;
		}
		stats->target_size = ref.size > need ? ref.size : need;
	} else {
		tfd = open(ref.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (tfd < 0) {
			r = im_errf(err, IM_EXIT_TARGET, -errno, "cannot create %s: %s", ref.path,
				    strerror(errno));
			goto out;
		}
		created = true;
		if (ftruncate(tfd, (off_t)need) < 0) {
			r = im_errf(err, IM_EXIT_TARGET, -errno, "%s: cannot make it %llu bytes: %s",
				    ref.path, (unsigned long long)need, strerror(errno));
			goto out;
		}
		stats->target_size = need;
	}
	stats->created = created;

	/* Hide the old table and superblocks while the data goes in. */
	if (!created) {
		for (size_t i = 0; i < m.nareas && r >= 0; i++)
			r = write_zeros(tfd, ref.kind != DISK_KIND_FILE, m.areas[i].offset, m.areas[i].length);
		for (size_t i = 0; i < m.nparts && r >= 0; i++) {
			uint64_t len = m.parts[i].size < HEAD_ZONE ? m.parts[i].size : HEAD_ZONE;
			r = write_zeros(tfd, ref.kind != DISK_KIND_FILE, m.parts[i].start, len);
		}
		if (r < 0) {
			r = im_errf(err, IM_EXIT_IO, r, "%s: %s", ref.path, strerror(-r));
			goto out;
		}
	}

	for (size_t i = 0; i < m.nparts; i++) {
		const struct img_part *p = &m.parts[i];
		size_t raw_cap = IMG_FRAME_BLOCKS_BYTES > p->block_size ? IMG_FRAME_BLOCKS_BYTES : p->block_size;
		struct rpart_job j = {
			.p = p, .ix = &ix[i], .target_fd = tfd, .target_fresh = created,
			.target_is_blk = ref.kind != DISK_KIND_FILE,
			.head_len = p->size < HEAD_ZONE ? p->size : HEAD_ZONE,
			.bytes_done = &done, .bytes_total = total,
			.bytes_written = &stats->bytes_written, .progress = &opts->progress,
		};
		const struct pipe_ops ops = {
			.produce = restore_produce, .work = restore_work, .consume = restore_consume,
			.worker_init = dctx_init, .worker_fini = dctx_fini,
		};
		char path[4200];

		heads[i] = calloc(1, HEAD_ZONE);
		if (!heads[i]) {
			r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
			goto out;
		}
		j.head_zone = heads[i];
		snprintf(path, sizeof(path), "%s/%s", dir, p->stream);
		j.stream_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (j.stream_fd < 0) {
			r = im_errf(err, IM_EXIT_DAMAGED, -errno, "%s: %s", path, strerror(errno));
			goto out;
		}
		posix_fadvise(j.stream_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		r = pipeline_run(&ops, &j, opts->threads ? opts->threads : pipeline_default_threads(),
				 ZSTD_compressBound(raw_cap), raw_cap, sizeof(struct restore_meta), err);
		close(j.stream_fd);
		if (r < 0)
			goto out;
	}

	/* The held-back starts of the partitions, then the table, then make
	 * it durable: from here on the target is a complete disk. */
	for (size_t i = 0; i < m.nparts && r >= 0; i++) {
		uint64_t len = m.parts[i].size < HEAD_ZONE ? m.parts[i].size : HEAD_ZONE;
		r = pwrite_full(tfd, heads[i], len, m.parts[i].start);
	}
	for (size_t i = 0; i < m.nareas && r >= 0; i++) {
		/* On a larger disk the GPT backup belongs at the new end. */
		if (!strcmp(m.areas[i].name, "gpt-backup") && stats->target_size > m.disk_size)
			continue;
		r = pwrite_full(tfd, areas[i], m.areas[i].length, m.areas[i].offset);
	}
	if (r < 0) {
		r = im_errf(err, IM_EXIT_IO, r, "%s: writing the partition table: %s", ref.path,
			    strerror(-r));
		goto out;
	}
	if (!strcmp(m.table, "gpt") && stats->target_size > m.disk_size) {
		r = ptable_gpt_relocate_backup(tfd, stats->target_size, m.logical_sector_size, err);
		if (r < 0)
			goto out;
	}
	if (fsync(tfd) < 0) {
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", ref.path, strerror(errno));
		goto out;
	}
	if (ref.kind == DISK_KIND_BLOCK)
		ioctl(tfd, BLKRRPART);   /* best effort: the kernel may refuse (loop without partscan) */
	r = 0;
out:
	if (tfd >= 0 && close(tfd) < 0 && r == 0)
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", ref.path, strerror(errno));
	if (r < 0 && created)
		unlink(ref.path);
	for (size_t i = 0; ix && i < m.nparts; i++)
		img_index_free(&ix[i]);
	for (size_t i = 0; areas && i < m.nareas; i++)
		free(areas[i]);
	for (size_t i = 0; heads && i < m.nparts; i++)
		free(heads[i]);
	free(ix);
	free(areas);
	free(heads);
	img_manifest_free(&m);
	return r;
}
