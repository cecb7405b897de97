/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A Clonezilla folder's random-access index (include/imager/job.h,
 * im_czindex): the restore's own pass over the folder (cz_plan and
 * cz_copy_part, jobs/clonezilla-restore.c) into a sink that cuts what
 * each partition receives into independent zstd frames, with the boot
 * areas as the writer would finish them.  What comes out is an imager
 * image folder (image.h) of the restored disk, which img_reader (imgread.h)
 * reads as any other.  The cache of these folders lives in czcache.c.
 */
#include "czindex.h"

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

#include "imager/backend.h"
#include "imager/bytes.h"
#include "imager/clonezilla.h"
#include "clonezilla-int.h"
#include "copyjob.h"
#include "util.h"

#define SECTOR 512u
#define CHUNK 4096u          /* all-zero chunks of this size are not stored */
#define FRAME_EXTENTS (IMG_FRAME_BLOCKS_BYTES / SECTOR)

/* One partition's stream being cut into frames. */
struct czx_part {
	int fd;
	struct img_index ix;
	unsigned char *raw;        /* the frame being filled */
	size_t raw_len;
	struct img_extent *ext;    /* its extents */
	uint32_t next;
	uint64_t pos;              /* partition bytes before this were put */
	XXH3_state_t *hash;        /* of the stream */
};

struct czx {
	const char *dir, *out;     /* the Clonezilla folder, the folder being built */
	const struct cz_image *cz;
	struct czx_part *parts;
	ZSTD_CCtx *cctx;
	unsigned char *comp;
	size_t comp_cap;
	int level;
};

static int oom(struct im_err *err)
{
	return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
}

/* The frame being filled, compressed and appended to the stream. */
static int flush_frame(struct czx *x, size_t i, struct im_err *err)
{
	struct czx_part *p = &x->parts[i];
	struct img_frame f = { 0 };
	size_t n;
	int r;

	if (!p->next)
		return 0;
	n = ZSTD_compress2(x->cctx, x->comp, x->comp_cap, p->raw, p->raw_len);
	if (ZSTD_isError(n))
		return im_errf(err, IM_EXIT_INTERNAL, -EIO, "zstd: %s", ZSTD_getErrorName(n));
	f.comp_offset = p->ix.stream_size;
	f.comp_size = (uint32_t)n;
	f.raw_size = (uint32_t)p->raw_len;
	f.raw_xxh3 = XXH3_64bits(p->raw, p->raw_len);
	f.comp_xxh3 = XXH3_64bits(x->comp, n);
	r = util_pwrite_full(p->fd, x->comp, n, f.comp_offset);
	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "%s/part%u.zst: %s", x->out,
			       x->cz->parts[i].number, strerror(-r));
	XXH3_64bits_update(p->hash, x->comp, n);
	if (img_index_add(&p->ix, &f, p->ext, p->next) < 0)
		return oom(err);
	p->raw_len = 0;
	p->next = 0;
	return 0;
}

/* (struct cz_job's part_put) What a restore writes at [off, off + len)
 * of partition i, taken in order; all-zero chunks are left out (a fresh
 * disk reads as zeros there). */
static int czx_put(void *sink, size_t i, uint64_t off, uint64_t len, const void *buf,
		   struct im_err *err)
{
	struct czx *x = sink;
	struct czx_part *p = &x->parts[i];
	const unsigned char *b = buf;
	unsigned number = x->cz->parts[i].number;
	int r;

	if (off % SECTOR || len % SECTOR)
		return im_errf(err, IM_EXIT_INTERNAL, -EINVAL,
			       "partition %u: a write of %llu bytes at %llu is not in whole sectors",
			       number, (unsigned long long)len, (unsigned long long)off);
	if (off < p->pos)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "partition %u: its bytes come out of order (%llu after %llu): this "
			       "layout cannot be served yet; restore the folder instead",
			       number, (unsigned long long)off, (unsigned long long)p->pos);
	if (!b)   /* (zeros: a fresh disk has them) */
		return 0;
	p->pos = off + len;
	for (uint64_t at = off, n; at < off + len; at += n) {
		struct img_extent *last = p->next ? &p->ext[p->next - 1] : NULL;

		n = CHUNK - at % CHUNK < off + len - at ? CHUNK - at % CHUNK : off + len - at;
		if (util_buf_is_zero(b + (at - off), n))
			continue;
		if (last && last->start + last->count == at / SECTOR)
			last->count += (uint32_t)(n / SECTOR);
		else
			p->ext[p->next++] = (struct img_extent){ .start = at / SECTOR,
								 .count = (uint32_t)(n / SECTOR) };
		memcpy(p->raw + p->raw_len, b + (at - off), n);
		p->raw_len += n;
		if (p->raw_len == IMG_FRAME_BLOCKS_BYTES && (r = flush_frame(x, i, err)) < 0)
			return r;
	}
	return 0;
}

static int open_parts(struct czx *x, struct im_err *err)
{
	char path[4200];

	x->parts = calloc(x->cz->nparts + 1, sizeof(*x->parts));
	if (!x->parts)
		return oom(err);
	for (size_t i = 0; i < x->cz->nparts; i++)
		x->parts[i].fd = -1;
	for (size_t i = 0; i < x->cz->nparts; i++) {
		struct czx_part *p = &x->parts[i];

		img_index_init(&p->ix, SECTOR);
		p->raw = malloc(IMG_FRAME_BLOCKS_BYTES);
		p->ext = calloc(FRAME_EXTENTS, sizeof(*p->ext));
		p->hash = XXH3_createState();
		if (!p->raw || !p->ext || !p->hash)
			return oom(err);
		XXH3_64bits_reset(p->hash);
		snprintf(path, sizeof(path), "%s/part%u.zst", x->out, x->cz->parts[i].number);
		p->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (p->fd < 0)
			return im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
	}
	x->comp_cap = ZSTD_compressBound(IMG_FRAME_BLOCKS_BYTES);
	x->comp = malloc(x->comp_cap);
	x->cctx = ZSTD_createCCtx();
	if (!x->comp || !x->cctx)
		return oom(err);
	if (ZSTD_isError(ZSTD_CCtx_setParameter(x->cctx, ZSTD_c_compressionLevel, x->level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(x->cctx, ZSTD_c_checksumFlag, 0)))
		return im_errf(err, IM_EXIT_INTERNAL, -EINVAL, "zstd: cannot set the level");
	return 0;
}

static void close_parts(struct czx *x)
{
	for (size_t i = 0; x->parts && i < x->cz->nparts; i++) {
		struct czx_part *p = &x->parts[i];
		if (p->fd >= 0)
			close(p->fd);
		img_index_free(&p->ix);
		free(p->raw);
		free(p->ext);
		XXH3_freeState(p->hash);
	}
	free(x->parts);
	free(x->comp);
	ZSTD_freeCCtx(x->cctx);
}

/* Partition i's last frame, its stream synced, its index written, and
 * its manifest entry (kind from the plan). */
static int finish_part(struct czx *x, size_t i, const struct layout_part *lp, struct img_part *ip,
		       struct im_err *err)
{
	const struct cz_part *c = &x->cz->parts[i];
	struct czx_part *p = &x->parts[i];
	char path[4200];
	int r = flush_frame(x, i, err);

	if (r == 0 && fsync(p->fd) < 0)
		r = im_errf(err, IM_EXIT_IO, -errno, "%s/part%u.zst: %s", x->out, c->number,
			    strerror(errno));
	if (r < 0)
		return r;
	ip->number = c->number;
	ip->start = c->start;
	ip->size = c->size;
	snprintf(ip->kind, sizeof(ip->kind), "%s", lp->kind);
	snprintf(ip->filesystem, sizeof(ip->filesystem), "%s", c->fs);
	snprintf(ip->plugin, sizeof(ip->plugin), "clonezilla");
	ip->block_size = SECTOR;
	ip->block_count = c->size / SECTOR;
	ip->used_blocks = p->ix.data_blocks;
	snprintf(ip->stream, sizeof(ip->stream), "part%u.zst", c->number);
	snprintf(ip->index, sizeof(ip->index), "part%u.idx", c->number);
	ip->stream_size = p->ix.stream_size;
	ip->stream_xxh3 = XXH3_64bits_digest(p->hash);
	ip->frames = p->ix.nframes;
	ip->data_bytes = p->ix.data_blocks * SECTOR;
	snprintf(path, sizeof(path), "%s/%s", x->out, ip->index);
	return img_index_write(&p->ix, path, &ip->index_size, &ip->index_xxh3, err);
}

/* ---- the boot areas, as the writer finishes them ---- */

/* Area a's bytes from bk into OUT/boot-NAME.bin, a->file and a->xxh3 set. */
static int write_area(struct bk *bk, const char *out, struct img_area *a, struct im_err *err)
{
	unsigned char *buf = malloc(a->length);
	char path[4200];
	int r;

	if (!buf)
		return oom(err);
	snprintf(a->file, sizeof(a->file), "boot-%s.bin", a->name);
	snprintf(path, sizeof(path), "%s/%s", out, a->file);
	r = bk_pread(bk, buf, a->length, a->offset, err);
	if (r == 0 && (r = util_write_file_atomic(path, buf, a->length)) < 0)
		r = im_errf(err, IM_EXIT_IO, r, "%s: %s", path, strerror(-r));
	a->xxh3 = XXH3_64bits(buf, a->length);
	free(buf);
	return r;
}

/* The plan's areas written into a sparse file of the disk's size, then,
 * on a GPT disk, the backup made from the primary (the writer's own
 * ptable_gpt_relocate_backup); each area read back, and the backup's
 * range added ("gpt-backup"). */
static int finish_areas(struct czx *x, const struct disk_plan *pl, struct img_manifest *m,
			struct im_err *err)
{
	char path[4200];
	struct bk *bk = NULL;
	bool gpt = !strcmp(pl->table, "gpt");
	size_t ebrs = 0;
	int fd, r;

	snprintf(path, sizeof(path), "%s/areas.raw", x->out);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)pl->disk_size) < 0) {
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(path);
		return r;
	}
	close(fd);
	m->areas = calloc(pl->nareas + 1, sizeof(*m->areas));
	r = m->areas ? bk_open(path, "raw", BK_OPEN_WRITE, NULL, &bk, err) : oom(err);
	for (size_t i = 0; r == 0 && i < pl->nareas; i++)
		r = bk_pwrite(bk, pl->area_data[i], pl->area_lens[i], pl->area_offs[i], err);
	if (r == 0 && gpt)
		r = ptable_gpt_relocate_backup(bk, pl->disk_size, pl->lss, err);
	for (size_t i = 0; r == 0 && i <= pl->nareas; i++) {
		struct img_area *a = &m->areas[m->nareas];
		unsigned char hdr[4096];
		if (i < pl->nareas) {
			if (!strcmp(pl->area_names[i], "ebr"))   /* (one per logical partition) */
				snprintf(a->name, sizeof(a->name), "ebr-%zu", ebrs++);
			else
				snprintf(a->name, sizeof(a->name), "%s", pl->area_names[i]);
			a->offset = pl->area_offs[i];
			a->length = pl->area_lens[i];
		} else if (gpt) {
			/* the backup header (last sector) says where its entries lie */
			uint64_t last = pl->disk_size / pl->lss - 1;
			r = bk_pread(bk, hdr, pl->lss, last * pl->lss, err);
			snprintf(a->name, sizeof(a->name), "gpt-backup");
			a->offset = le64(hdr + 72) * pl->lss;
			a->length = a->offset < last * pl->lss ? (last + 1) * pl->lss - a->offset : 0;
		} else {
			break;
		}
		if (r < 0 || !a->length)
			continue;
		r = write_area(bk, x->out, a, err);
		m->nareas++;
	}
	if (bk) {
		int c = bk_close(bk, r == 0 ? err : NULL);
		if (r == 0)
			r = c;
	}
	unlink(path);
	return r;
}

/* ---- the whole pass ---- */

static void describe(struct czx *x, const struct disk_plan *pl, struct img_manifest *m)
{
	time_t now = time(NULL);
	struct tm tm;

	snprintf(m->tool_version, sizeof(m->tool_version), "%s", IMAGER_VERSION);
	gmtime_r(&now, &tm);
	strftime(m->created, sizeof(m->created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(m->source, sizeof(m->source), "clonezilla:%s", x->dir);
	m->disk_size = pl->disk_size;
	m->logical_sector_size = m->physical_sector_size = pl->lss;
	snprintf(m->table, sizeof(m->table), "%s", pl->table);
}

/* The restore's progress told as the index's. */
static void index_progress(void *opaque, const char *phase, uint64_t done, uint64_t total)
{
	const struct im_progress *p = opaque;

	(void)phase;
	p->fn(p->opaque, "index", done, total);
}

int czx_build(const char *dir, const char *out, int level, const struct im_progress *progress,
	      struct im_err *err)
{
	const struct im_progress told = {
		.fn = progress && progress->fn ? index_progress : NULL, .opaque = (void *)progress,
		.cancel = progress ? progress->cancel : NULL,
	};
	struct czx x = { .dir = dir, .out = out, .level = level };
	struct cz_image *cz = calloc(1, sizeof(*cz));
	uint64_t *used = calloc(CZ_MAX_PARTS + CZ_MAX_LVS, sizeof(*used));
	struct disk_plan pl = { 0 };
	struct img_manifest m = { 0 };
	struct cz_job j = { .part_put = czx_put, .sink = &x, .progress = &told };
	int r = cz && used ? cz_read(dir, cz, err) : oom(err);

	x.cz = cz;
	if (r == 0)
		r = cz_plan(dir, cz, &pl, &j.total, used, used + CZ_MAX_PARTS, err);
	if (r == 0)
		r = open_parts(&x, err);
	for (size_t i = 0; r == 0 && i < cz->nparts; i++)
		r = cz_copy_part(dir, cz, i, &j, err);
	if (r == 0)
		m.parts = calloc(cz->nparts + 1, sizeof(*m.parts));
	if (r == 0 && !m.parts)
		r = oom(err);
	for (size_t i = 0; r == 0 && i < cz->nparts; i++) {
		r = finish_part(&x, i, &pl.parts[i], &m.parts[i], err);
		m.nparts = i + 1;
	}
	if (r == 0)
		r = finish_areas(&x, &pl, &m, err);
	if (r == 0) {
		describe(&x, &pl, &m);
		r = img_manifest_write(&m, out, err);
	}
	if (x.parts)
		close_parts(&x);
	img_manifest_free(&m);
	disk_plan_free(&pl);
	free(used);
	free(cz);
	return r;
}
