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
#include "extfiles.h"
#include "sjournal.h"
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
	if (str_copy(c->names[c->n], sizeof(c->names[0]), name) < 0)
		return -ENAMETOOLONG;   /* (our names are short: a bug) */
	c->n++;
	return 0;
}

/* The journals, once the manifest makes the folder an image. */
static void remove_journals(struct created *c)
{
	char path[4200];
	size_t len;

	for (size_t i = 0; i < c->n; i++)
		if ((len = strlen(c->names[i])) > 4 && !strcmp(c->names[i] + len - 4, ".jnl") &&
		    path_join(path, sizeof(path), c->dir, c->names[i]) == 0)
			unlink(path);
}

static void created_undo(struct created *c)
{
	char path[4200];
	/* (c->dir fits with every name: each file was made through a
	 * checked join) */
	for (size_t i = 0; i < c->n; i++) {
		if (path_join(path, sizeof(path), c->dir, c->names[i]) == 0)
			unlink(path);
		if (str_printf(path, sizeof(path), "%s/%s.tmp", c->dir, c->names[i]) == 0)
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
	int jnl_fd;               /* partN.jnl: a record per frame written */
	uint64_t out_off;
	uint64_t out_started;      /* write-behind: write-out started below (util.h) */
	XXH3_state_t *stream_hash;
	struct img_index *ix;
	struct img_part *ip;
	uint64_t *bytes_done, bytes_total;
	const struct im_progress *progress;
};

/* partN.jnl for the stream partN.zst */
static void sjournal_name(const char *stream, char *out, size_t n)
{
	size_t len = strlen(stream);
	snprintf(out, n, "%.*s.jnl", (int)(len > 4 ? len - 4 : len), stream);
}

static uint64_t bitmap_hash(const struct bitmap *b)
{
	return XXH3_64bits(b->words, (size_t)((b->nbits + 63) / 64) * 8);
}

void sjournal_header(unsigned char *h, const struct fs_info *fs)
{
	memset(h, 0, SJOURNAL_HEADER);
	memcpy(h, SJOURNAL_MAGIC, 8);
	put_le32(h + 8, fs->block_size);
	put_le64(h + 16, fs->block_count);
	put_le64(h + 24, fs->used_blocks);
	put_le64(h + 32, bitmap_hash(&fs->used));
	put_le64(h + 40, XXH3_64bits(h, 40));
}

static int sjournal_append(int fd, const struct img_frame *f, const struct img_extent *ext,
			   uint32_t n)
{
	size_t len = SJOURNAL_RECORD + (size_t)n * IMG_INDEX_EXTENT + 8;
	unsigned char *rec = malloc(len), *p;
	int r;

	if (!rec)
		return -ENOMEM;
	put_le64(rec, f->comp_offset);
	put_le32(rec + 8, f->comp_size);
	put_le32(rec + 12, f->raw_size);
	put_le32(rec + 16, n);
	put_le32(rec + 20, 0);
	put_le64(rec + 24, f->raw_xxh3);
	put_le64(rec + 32, f->comp_xxh3);
	p = rec + SJOURNAL_RECORD;
	for (uint32_t i = 0; i < n; i++, p += IMG_INDEX_EXTENT) {
		put_le64(p, ext[i].start);
		put_le32(p + 8, ext[i].count);
		put_le32(p + 12, ext[i].flags);
	}
	put_le64(p, XXH3_64bits(rec, len - 8));
	r = util_write_full(fd, rec, len);
	free(rec);
	return r;
}

int sjournal_replay(int jfd, int sfd, const struct fs_info *fs, struct img_index *ix,
		    XXH3_state_t *stream_hash, struct sjournal_kept *k)
{
	const uint64_t max_ext = 2 * (IMG_FRAME_BLOCKS_BYTES / fs->block_size + 1);
	unsigned char want[SJOURNAL_HEADER], h[SJOURNAL_HEADER], *rec = NULL, *ext, *comp = NULL;
	uint64_t joff = SJOURNAL_HEADER, next_block = 0;
	struct img_extent *e = NULL;
	int r = 0;

	memset(k, 0, sizeof(*k));
	sjournal_header(want, fs);
	if (util_pread_full(jfd, h, SJOURNAL_HEADER, 0) < 0 || memcmp(h, want, SJOURNAL_HEADER))
		return 0;
	k->jnl_len = SJOURNAL_HEADER;
	comp = malloc(ZSTD_compressBound(IMG_FRAME_BLOCKS_BYTES));
	rec = malloc(SJOURNAL_RECORD + max_ext * IMG_INDEX_EXTENT + 8);
	e = malloc(max_ext * sizeof(*e));
	if (!comp || !rec || !e) {
		r = -ENOMEM;
		goto out;
	}
	for (;;) {
		struct img_frame f = { 0 };
		uint64_t data = 0, zero = 0;
		uint32_t n;
		size_t elen;

		if (util_pread_full(jfd, rec, SJOURNAL_RECORD, joff) < 0)
			break;
		f.comp_offset = le64(rec);
		f.comp_size = le32(rec + 8);
		f.raw_size = le32(rec + 12);
		n = le32(rec + 16);
		f.raw_xxh3 = le64(rec + 24);
		f.comp_xxh3 = le64(rec + 32);
		/* every field as hostile: this frame follows the last, fits
		 * the buffers, and its extents walk forwards inside the
		 * filesystem over used blocks only */
		if (f.comp_offset != k->stream_len || !f.comp_size ||
		    f.comp_size > ZSTD_compressBound(IMG_FRAME_BLOCKS_BYTES) ||
		    f.raw_size > IMG_FRAME_BLOCKS_BYTES || n == 0 || n > max_ext)
			break;
		elen = (size_t)n * IMG_INDEX_EXTENT + 8;
		ext = rec + SJOURNAL_RECORD;
		if (util_pread_full(jfd, ext, elen, joff + SJOURNAL_RECORD) < 0 ||
		    XXH3_64bits(rec, SJOURNAL_RECORD + elen - 8) != le64(ext + elen - 8))
			break;
		bool ok = true;
		for (uint32_t i = 0; i < n && ok; i++) {
			e[i].start = le64(ext + (size_t)i * IMG_INDEX_EXTENT);
			e[i].count = le32(ext + (size_t)i * IMG_INDEX_EXTENT + 8);
			e[i].flags = le32(ext + (size_t)i * IMG_INDEX_EXTENT + 12);
			ok = e[i].count && e[i].start >= next_block && e[i].start < fs->block_count &&
			     e[i].count <= fs->block_count - e[i].start && !(e[i].flags & ~IMG_EXT_ZERO);
			for (uint64_t b = e[i].start; ok && b < e[i].start + e[i].count; b++)
				ok = bitmap_test(&fs->used, b);
			if (ok) {
				next_block = e[i].start + e[i].count;
				if (e[i].flags & IMG_EXT_ZERO)
					zero += e[i].count;
				else
					data += e[i].count;
			}
		}
		if (!ok || data * fs->block_size != f.raw_size)
			break;
		/* the frame's bytes are in the stream, as the record says */
		if (util_pread_full(sfd, comp, f.comp_size, f.comp_offset) < 0 ||
		    XXH3_64bits(comp, f.comp_size) != f.comp_xxh3)
			break;
		r = img_index_add(ix, &f, e, n);
		if (r < 0)
			goto out;
		XXH3_64bits_update(stream_hash, comp, f.comp_size);
		k->stream_len += f.comp_size;
		k->bytes += (data + zero) * fs->block_size;
		k->next_block = next_block;
		joff += SJOURNAL_RECORD + elen;
		k->jnl_len = joff;
	}
	r = ix->nframes ? 1 : 0;
out:
	free(comp);
	free(rec);
	free(e);
	return r;
}

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
	/* No zstd content checksum (an XXH64 pass over the data at save and
	 * again at restore): the index's XXH3-64 of the raw bytes checks the
	 * same thing, and images with one still read. */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, j->level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0))) {
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
	r = util_write_full(j->out_fd, s->b, s->b_len);
	if (r == -ENOSPC || r == -EDQUOT) {
		struct statvfs vf;
		char f[32] = "?", w[32];
		if (fstatvfs(j->out_fd, &vf) == 0)
			util_human_size((uint64_t)vf.f_bavail * vf.f_frsize, f, sizeof(f));
		util_human_size(j->out_off, w, sizeof(w));
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
	util_write_behind(j->out_fd, &j->out_started, j->out_off);
	r = img_index_add(j->ix, &m->frame, m->ext + m->nin, m->nout);
	if (r < 0)
		return im_errf(err, IM_EXIT_INTERNAL, r, "out of memory");
	r = sjournal_append(j->jnl_fd, &m->frame, m->ext + m->nin, m->nout);
	if (r < 0)
		return im_errf(err, r == -ENOMEM ? IM_EXIT_INTERNAL : IM_EXIT_IO, r,
			       "writing the journal: %s", strerror(-r));
	for (uint32_t i = 0; i < m->nin; i++)
		*j->bytes_done += (uint64_t)m->ext[i].count * j->bs;
	if (j->progress->fn)
		j->progress->fn(j->progress->opaque, "save", *j->bytes_done, j->bytes_total);
	return 0;
}

/* The manifest's entry for a partition's stream and index (ix read or
 * built), stats counted. */
static int describe_stream(const char *dir, const struct img_index *ix, const struct fs_info *fs,
			   struct img_part *ip, struct save_stats *stats, struct im_err *err)
{
	char path[4200];
	int r;

	if ((r = path_join_err(path, sizeof(path), dir, ip->index, err)) < 0)
		return r;
	r = img_hash_file(path, &ip->index_size, &ip->index_xxh3);
	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "%s: %s", path, strerror(-r));
	ip->stream_size = ix->stream_size;
	ip->frames = ix->nframes;
	ip->zero_blocks = ix->zero_blocks;
	ip->data_bytes = ix->data_blocks * fs->block_size;
	stats->image_bytes += ip->stream_size + ip->index_size;
	return 0;
}

/* --resume: is this partition done (its index written, the journal's
 * header matching the source, the stream complete)?  Then its entry is
 * filled from the files: returns 1.  0 when it is not. */
static int resumed_complete(const char *dir, const struct fs_info *fs, struct img_part *ip,
			    struct save_stats *stats, struct im_err *err)
{
	unsigned char want[SJOURNAL_HEADER], h[SJOURNAL_HEADER];
	char path[4200];
	struct img_index ix;
	struct im_err e = { 0 };
	uint64_t size;
	int fd, r;

	char jname[64];
	sjournal_name(ip->stream, jname, sizeof(jname));
	if ((r = path_join_err(path, sizeof(path), dir, jname, err)) < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	sjournal_header(want, fs);
	r = fd >= 0 && util_pread_full(fd, h, SJOURNAL_HEADER, 0) == 0 &&
	    !memcmp(h, want, SJOURNAL_HEADER);
	if (fd >= 0)
		close(fd);
	if (!r || path_join(path, sizeof(path), dir, ip->index) < 0 ||
	    img_index_read(&ix, path, fs->block_count, &e) < 0)
		return 0;
	if (path_join(path, sizeof(path), dir, ip->stream) < 0) {
		img_index_free(&ix);
		return 0;
	}
	r = ix.block_size == fs->block_size && ix.data_blocks + ix.zero_blocks == fs->used_blocks &&
	    img_hash_file(path, &size, &ip->stream_xxh3) == 0 && size == ix.stream_size;
	if (r)
		r = describe_stream(dir, &ix, fs, ip, stats, err) < 0 ? -EIO : 1;
	img_index_free(&ix);
	return r < 0 ? err->code : r;
}

/* Open the stream and its journal: carried on from what a resume keeps,
 * else new.  Returns 0 or negative errno. */
static int open_stream(const char *dir, const struct fs_info *fs, bool resume, struct part_job *j,
		       struct im_err *err)
{
	char spath[4200], jpath[4200], ipath[4200], jname[64];
	unsigned char h[SJOURNAL_HEADER];
	struct sjournal_kept k;
	int r = 0;

	sjournal_name(j->ip->stream, jname, sizeof(jname));
	if ((r = path_join_err(spath, sizeof(spath), dir, j->ip->stream, err)) < 0 ||
	    (r = path_join_err(jpath, sizeof(jpath), dir, jname, err)) < 0 ||
	    (r = path_join_err(ipath, sizeof(ipath), dir, j->ip->index, err)) < 0)
		return r;
	if (resume) {
		int sfd = open(spath, O_RDWR | O_CLOEXEC), jfd = open(jpath, O_RDWR | O_CLOEXEC);
		if (sfd >= 0 && jfd >= 0)
			r = sjournal_replay(jfd, sfd, fs, j->ix, j->stream_hash, &k);
		if (r > 0) {
			/* the reader goes on from the block after the last frame's */
			j->out_off = k.stream_len;
			j->rd.run_pos = j->rd.ahead_pos = k.next_block;
			j->rd.run_left = 0;
			*j->bytes_done += k.bytes;
		}
		if (r > 0 && (ftruncate(sfd, (off_t)k.stream_len) < 0 ||
			      ftruncate(jfd, (off_t)k.jnl_len) < 0 ||
			      lseek(sfd, (off_t)k.stream_len, SEEK_SET) < 0 ||
			      lseek(jfd, (off_t)k.jnl_len, SEEK_SET) < 0))
			r = -errno;
		if (r > 0) {
			j->out_fd = sfd;
			j->jnl_fd = jfd;
			return 0;
		}
		if (sfd >= 0)
			close(sfd);
		if (jfd >= 0)
			close(jfd);
		if (r < 0)
			return im_errf(err, r == -ENOMEM ? IM_EXIT_INTERNAL : IM_EXIT_IO, r,
				       "resuming %s: %s", spath, strerror(-r));
		/* nothing to keep: afresh */
		img_index_free(j->ix);
		img_index_init(j->ix, fs->block_size);
		XXH3_64bits_reset(j->stream_hash);
		j->out_off = 0;
		j->rd.run_pos = j->rd.run_left = j->rd.ahead_pos = 0;
		unlink(spath);
		unlink(jpath);
		unlink(ipath);
	}
	j->out_fd = open(spath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (j->out_fd < 0)
		return im_errf(err, IM_EXIT_TARGET, -errno, "%s: %s", spath, strerror(errno));
	j->jnl_fd = open(jpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	sjournal_header(h, fs);
	if (j->jnl_fd < 0 || util_write_full(j->jnl_fd, h, SJOURNAL_HEADER) < 0) {
		r = im_errf(err, IM_EXIT_TARGET, -errno, "%s: %s", jpath, strerror(errno));
		close(j->out_fd);
		if (j->jnl_fd >= 0)
			close(j->jnl_fd);
		return r;
	}
	return 0;
}

static int save_partition(struct bk *src, const struct pt_part *pp, const struct fs_info *fs,
			  const struct save_opts *opts, struct created *cr, struct img_part *ip,
			  uint64_t *bytes_done, uint64_t bytes_total, struct save_stats *stats,
			  struct im_err *err)
{
	struct img_index ix;
	struct part_job j = {
		.rd = { .bk = src, .base = pp->start, .used = &fs->used,
			.blank = fs->blank.nbits ? &fs->blank : NULL, .bs = fs->block_size,
			.bytes_read = &stats->bytes_read, .drop_behind = true },
		.bs = fs->block_size, .level = opts->level, .bytes_done = bytes_done,
		.bytes_total = bytes_total, .progress = &opts->progress, .ix = &ix, .ip = ip,
		.out_fd = -1, .jnl_fd = -1,
	};
	const struct pipe_ops ops = {
		.produce = save_produce, .work = save_work, .consume = save_consume,
		.worker_init = save_worker_init, .worker_fini = save_worker_fini,
		.cancel = opts->progress.cancel,
	};
	char path[4200], jname[64];
	uint64_t blocks_per_frame = IMG_FRAME_BLOCKS_BYTES / fs->block_size, before = *bytes_done;
	int r;

	if (blocks_per_frame == 0)   /* blocks larger than a frame: one per frame */
		blocks_per_frame = 1;
	snprintf(ip->stream, sizeof(ip->stream), "part%u.zst", pp->number);
	snprintf(ip->index, sizeof(ip->index), "part%u.idx", pp->number);
	sjournal_name(ip->stream, jname, sizeof(jname));
	if (created_add(cr, ip->stream) < 0 || created_add(cr, ip->index) < 0 ||
	    created_add(cr, jname) < 0)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	if (opts->resume && (r = resumed_complete(cr->dir, fs, ip, stats, err)) != 0) {
		if (r > 0) {
			*bytes_done += fs->used_blocks * fs->block_size;
			stats->resumed_bytes += fs->used_blocks * fs->block_size;
		}
		return r < 0 ? r : 0;
	}
	j.stream_hash = XXH3_createState();
	if (!j.stream_hash)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	XXH3_64bits_reset(j.stream_hash);
	img_index_init(&ix, fs->block_size);
	r = open_stream(cr->dir, fs, opts->resume, &j, err);
	if (r == 0) {
		stats->resumed_bytes += *bytes_done - before;
		r = pipeline_run(&ops, &j, opts->threads ? opts->threads : pipeline_default_threads(),
				 blocks_per_frame * fs->block_size,
				 ZSTD_compressBound(blocks_per_frame * fs->block_size),
				 used_meta_size((uint32_t)blocks_per_frame), err);
		if (r == 0)
			r = path_join_err(path, sizeof(path), cr->dir, ip->stream, err);
		if (r == 0 && fsync(j.out_fd) < 0)
			r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
		if (close(j.out_fd) < 0 && r == 0)
			r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
		close(j.jnl_fd);
	}
	if (r == 0) {
		ip->stream_xxh3 = XXH3_64bits_digest(j.stream_hash);
		ix.stream_size = j.out_off;
		r = path_join_err(path, sizeof(path), cr->dir, ip->index, err);
		if (r == 0)
			r = img_index_write(&ix, path, &ip->index_size, &ip->index_xxh3, err);
	}
	if (r == 0)
		r = describe_stream(cr->dir, &ix, fs, ip, stats, err);
	XXH3_freeState(j.stream_hash);
	img_index_free(&ix);
	return r;
}

/* ---- the whole disk ---- */

/* A file an interrupted save may have left: boot-*.bin, part*.zst,
 * part*.idx, part*.jnl, rescue.map, and their .tmp forms, and
 * manifest.json.tmp (killed while writing its manifest).  Never
 * manifest.json. */
static int prepare_dir(struct created *cr, const char *dir, bool resume, struct im_err *err)
{
	DIR *dh;
	struct dirent *de;

	pid_t holder;
	int r;

	if (str_copy(cr->dir, sizeof(cr->dir), dir) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG,
			       "%s: path too long (imager takes up to %zu bytes)", dir,
			       sizeof(cr->dir) - 1);
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
		if (!img_own_file(n)) {
			closedir(dh);
			if (resume && !strcmp(n, IMG_MANIFEST))
				return im_errf(err, IM_EXIT_TARGET, -EEXIST,
					       "%s holds a complete image: nothing to resume", dir);
			return im_errf(err, IM_EXIT_TARGET, -EEXIST,
				       "%s exists and is not empty%s; give a new folder", dir,
				       strcmp(n, IMG_MANIFEST) ? "" : " (it holds an image)");
		}
	}
	if (resume) {   /* kept: each partition checks what it can keep */
		closedir(dh);
		return 0;
	}
	rewinddir(dh);
	while ((de = readdir(dh)))
		if (img_own_file(de->d_name)) {
			char path[4400];
			if (path_join(path, sizeof(path), dir, de->d_name) == 0)
				unlink(path);   /* (dir fits: cr->dir holds it; our names are short) */
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
	r = path_join_err(path, sizeof(path), cr->dir, ia->file, err);
	if (r < 0) {
		free(buf);
		return r;
	}
	r = created_add(cr, ia->file);
	if (r == 0)
		r = util_write_file_atomic(path, buf, a->length);
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
		char attr[sizeof(roots->sysfs) + sizeof(src->ref.name) + 40], buf[32];
		FILE *f;
		snprintf(attr, sizeof(attr), "%s/block/%s/queue/physical_block_size", roots->sysfs,
			 src->ref.name);   /* (it fits: sized for both) */
		if ((f = fopen(attr, "re"))) {
			if (fgets(buf, sizeof(buf), f) && atoi(buf) >= 512)
				m->physical_sector_size = (unsigned)atoi(buf);
			fclose(f);
		}
	}
	snprintf(m->table, sizeof(m->table), "%s", pt->type);
}

/* After a rescue: the map into the folder, and in the manifest what was
 * unreadable in all, in each partition, and the first ranges, with the
 * files they hit in an ext2/3/4. */
static int record_unreadable(struct source *src, const struct save_opts *opts, struct created *cr,
			     struct img_manifest *m, struct save_stats *stats, struct im_err *err)
{
	struct img_unreadable *u = &m->unreadable;
	const struct bk_range *bad;
	char path[4200];
	size_t n;
	int r;

	if ((r = path_join_err(path, sizeof(path), cr->dir, IMG_RESCUE_MAP, err)) < 0)
		return r;
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
	/* The files those ranges hit in an ext2/3/4, asked of debugfs: it
	 * opens local paths only (raw_path is "" for qcow2 and NBD). */
	if (!bk_is_uri(src->ref.path) && src->bk->raw_path[0]) {
		char warning[sizeof(stats->warnings[0])];
		r = extfiles_lookup(src->bk->raw_path, m, warning, sizeof(warning));
		if (r < 0)
			return im_errf(err, IM_EXIT_INTERNAL, r, "out of memory");
		if (warning[0] && stats->nwarnings < IM_MAX_WARNINGS)
			memcpy(stats->warnings[stats->nwarnings++], warning, sizeof(warning));
	}
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
	r = source_open(roots, source, opts->format, opts->force, &opts->rescue, &opts->net, &src, err);
	if (r < 0)
		return r;
	pt = src.pt;
	/* (the source's, one per partition, fit: IM_MAX_WARNINGS has room) */
	for (size_t i = 0; i < src.nwarnings && stats->nwarnings < IM_MAX_WARNINGS; i++)
		memcpy(stats->warnings[stats->nwarnings++], src.warnings[i], sizeof(src.warnings[i]));
	m->parts = calloc(pt->nparts + 1, sizeof(*m->parts));
	m->areas = calloc(pt->nareas + 1, sizeof(*m->areas));
	if (!m->parts || !m->areas) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto out;
	}
	r = prepare_dir(&cr, dir, opts->resume, err);
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
	if (r == 0)
		remove_journals(&cr);
out:
	if (r < 0 && err->exit_class == IM_EXIT_INTERRUPTED) {
		/* Kept for --resume: without a manifest it is an unfinished
		 * image, which nothing takes for a complete one. */
		snprintf(err->msg, sizeof(err->msg),
			 "interrupted: %s is left unfinished (no manifest); imager save --resume "
			 "with the same source carries on from its last frame", dir);
		img_manifest_free(m);
	} else if (r < 0) {
		created_undo(&cr);
		img_manifest_free(m);
	}
	path_unlock(&cr.lock);
	free(cr.names);
	source_close(&src);
	return r;
}
