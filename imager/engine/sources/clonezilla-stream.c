/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Clonezilla image folders (clonezilla.c): reading the partitions' streams.
 * The split parts joined and decompressed through libarchive, then read
 * as partclone, partclone.dd or ntfsclone images; written through the
 * job's put() (jobs/clonezilla-restore.c) or only read (verify).
 */
#include "imager/clonezilla.h"

#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "imager/partclone.h"
#include "imager/pipeline.h"
#include "clonezilla-int.h"
#include "util.h"

/* ---- one stream: split parts joined, decompressed by libarchive ---- */

struct czs {
	const char *dir;
	char first[256];
	unsigned nfiles, cur;
	int fd;
	struct archive *a;
	unsigned char buf[1 << 17];
	uint64_t consumed;  /* bytes read from the files */
	uint64_t at;        /* bytes read from the current file */
	char why[4600];     /* what went wrong below the partclone layer (a part's path in it) */
};

/* The name of split part i: the first's name with its last two letters
 * counted up (aa, ab, ... zz), or the file itself when it is not split. */
static void part_name(const struct czs *s, unsigned i, char *out, size_t len)
{
	size_t n = strlen(s->first);
	snprintf(out, len, "%s/%s", s->dir, s->first);
	if (s->nfiles > 1 && n >= 3) {
		size_t o = strlen(out);
		out[o - 2] = (char)('a' + i / 26);
		out[o - 1] = (char)('a' + i % 26);
	}
}

static la_ssize_t czs_read_cb(struct archive *a, void *ctx, const void **data)
{
	struct czs *s = ctx;
	char p[4400];
	(void)a;
	for (;;) {
		ssize_t n;
		if (s->fd < 0) {
			if (s->cur >= s->nfiles)
				return 0;
			part_name(s, s->cur, p, sizeof(p));
			s->fd = open(p, O_RDONLY | O_CLOEXEC);
			if (s->fd < 0) {
				snprintf(s->why, sizeof(s->why), "%s: %s (a missing part)", p,
					 strerror(errno));
				archive_set_error(a, errno, "%s", s->why);
				return -1;
			}
			posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
			s->at = 0;
		}
		n = read(s->fd, s->buf, sizeof(s->buf));
		if (n < 0) {
			snprintf(s->why, sizeof(s->why), "reading part %u: %s", s->cur + 1,
				 strerror(errno));
			archive_set_error(a, errno, "%s", s->why);
			return -1;
		}
		if (n > 0) {
			*data = s->buf;
			s->consumed += (uint64_t)n;
			s->at += (uint64_t)n;
			return n;
		}
		close(s->fd);
		s->fd = -1;
		s->cur++;
	}
}

static ssize_t czs_read(void *opaque, void *buf, size_t len)
{
	struct czs *s = opaque;
	la_ssize_t n = archive_read_data(s->a, buf, len);
	if (n < 0) {
		if (!s->why[0]) {
			char name[4400];
			const char *base;
			/* (the decompressor reads ahead: it failed in the last block read) */
			part_name(s, s->cur < s->nfiles ? s->cur : s->nfiles - 1, name, sizeof(name));
			base = strrchr(name, '/');
			snprintf(s->why, sizeof(s->why), "%s (in %s, within bytes %llu-%llu of it)",
				 archive_error_string(s->a), base ? base + 1 : name,
				 (unsigned long long)(s->at > sizeof(s->buf) ? s->at - sizeof(s->buf) : 0),
				 (unsigned long long)s->at);
		}
		return -EBADMSG;
	}
	return n;
}

static int czs_open(struct czs *s, const char *dir, const struct cz_part *p, struct im_err *err)
{
	struct archive_entry *e;
	char path[4400];
	struct stat st;

	memset(s, 0, sizeof(*s));
	s->dir = dir;
	s->fd = -1;
	snprintf(s->first, sizeof(s->first), "%s", p->stream);
	s->nfiles = p->nfiles;
	/* Every part present before a byte is read: a missing one is named. */
	for (unsigned i = 0; i < s->nfiles; i++) {
		part_name(s, i, path, sizeof(path));
		if (stat(path, &st) < 0)
			return im_errf(err, IM_EXIT_DAMAGED, -ENOENT,
				       "partition %s: %s is missing (part %u of %u)", p->name, path, i + 1,
				       s->nfiles);
	}
	s->a = archive_read_new();
	if (!s->a)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	archive_read_support_filter_all(s->a);
	archive_read_support_format_raw(s->a);
	if (archive_read_open(s->a, s, NULL, czs_read_cb, NULL) != ARCHIVE_OK ||
	    archive_read_next_header(s->a, &e) != ARCHIVE_OK)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "partition %s: %s: %s", p->name,
			       p->stream, s->why[0] ? s->why : archive_error_string(s->a));
	return 0;
}

static void czs_close(struct czs *s)
{
	if (s->a)
		archive_read_free(s->a);
	if (s->fd >= 0)
		close(s->fd);
	s->a = NULL;
	s->fd = -1;
}

/* A failure below the partclone layer (a missing part, a corrupt compressed
 * stream) replaces the partclone reader's "Bad message". */
static int stream_failed(struct czs *s, const struct cz_part *p, int r, struct im_err *err)
{
	if (!s->why[0])
		return r;
	memset(err, 0, sizeof(*err));
	return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "partition %s: %s: %s", p->name, p->stream,
		       s->why);
}

/* A partition's stream opened and its partclone header and bitmap read;
 * on failure nothing stays open. */
static int ptcl_open(struct czs *s, struct pcl_reader *r, const char *dir, const struct cz_part *p,
		     struct im_err *err)
{
	int rc = czs_open(s, dir, p, err);

	if (rc == 0) {
		rc = pcl_open(r, czs_read, s, p->stream, err);
		if (rc < 0)
			rc = stream_failed(s, p, rc, err);
	}
	if (rc < 0)
		czs_close(s);
	return rc;
}

/* cz_restore_ptcl's pipeline (pipeline.h): the producer decompresses runs
 * into the slots, one worker compares their checksums in order (the
 * running checksum is the stream's), and the caller's thread writes them;
 * the three overlap (decompression is the longest: the checksums took a
 * fifth of the time inside it, and direct writes wait on the disk).  The
 * run of 0 blocks at the end is a slot too (its check closes the stream);
 * a read that fails is a slot that carries the failure, so that the runs
 * before it are written first. */
struct ptcl_meta {
	uint64_t first;
	ssize_t n;                /* blocks; < 0: the read's failure */
	struct pcl_marks marks;   /* its checksums, for the check */
	struct pcl_mark m[];
};

struct ptcl_job {
	struct pcl_reader *r;
	size_t max;               /* blocks a slot holds */
	const struct cz_part *p;
	size_t i;
	struct cz_job *j;
	unsigned char boot[512];
	bool ended;
	bool read_failed;         /* the failure came from the stream */
	struct im_err rerr;
};

static int ptcl_produce(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct ptcl_job *q = ctx;
	struct ptcl_meta *m = s->meta;

	(void)err;
	if (q->ended)
		return 0;
	m->marks.m = m->m;
	m->marks.cap = q->max + 1;
	m->n = pcl_read_run_marked(q->r, &m->first, s->a, q->max, &m->marks, &q->rerr);
	q->ended = m->n <= 0;
	return 1;
}

static int ptcl_work(void *ctx, void *ws, struct pipe_slot *s)
{
	struct ptcl_job *q = ctx;
	struct ptcl_meta *m = s->meta;

	(void)ws;
	return m->n >= 0 ? pcl_check_run(q->r, s->a, (size_t)m->n, &m->marks, &s->err) : 0;
}

static int ptcl_consume(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct ptcl_job *q = ctx;
	struct ptcl_meta *m = s->meta;
	struct cz_job *j = q->j;
	uint64_t off, len;
	int rc;

	if (s->status < 0) {
		*err = s->err;
		return s->status;
	}
	if (m->n < 0) {
		q->read_failed = true;
		*err = q->rerr;
		return (int)m->n;
	}
	if (m->n == 0)
		return 0;
	off = m->first * q->r->h.block_size;
	len = (uint64_t)m->n * q->r->h.block_size;
	if (off + len > q->p->size)  /* a partial last block */
		len = q->p->size - off;
	if (m->first == 0 && len >= 512)
		memcpy(q->boot, s->a, 512);
	rc = j->put(j, q->i, off, len, s->a, err);
	if (rc == 0 && j->progress->cancel && *j->progress->cancel)
		rc = im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
	j->done += len;
	if (j->progress->fn)
		j->progress->fn(j->progress->opaque, "restore", j->done, j->total);
	return rc;
}

/* NTFS keeps a copy of its boot sector in the volume's last sector, past
 * the last cluster, which partclone.ntfs does not save: written from the
 * primary, as ntfsfix would. */
static int ntfs_backup_boot(struct ptcl_job *q, struct im_err *err)
{
	const unsigned char *boot = q->boot;
	uint64_t bps = le16(boot + 11), sectors = le64(boot + 0x28);

	if (strcmp(q->p->fs, "ntfs") || memcmp(boot + 3, "NTFS    ", 8) || boot[510] != 0x55 ||
	    boot[511] != 0xAA)
		return 0;
	if ((bps == 512 || bps == 1024 || bps == 2048 || bps == 4096) &&
	    sectors < q->p->size / bps &&
	    sectors * bps >= q->r->h.total_blocks * q->r->h.block_size)
		return q->j->put(q->j, q->i, sectors * bps, 512, boot, err);
	return 0;
}

int cz_restore_ptcl(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
		    struct im_err *err)
{
	const struct pipe_ops ops = { .produce = ptcl_produce, .work = ptcl_work,
				      .consume = ptcl_consume };
	struct czs s;
	struct pcl_reader r;
	struct ptcl_job q = { .r = &r, .p = p, .i = i, .j = j };
	int rc;

	rc = ptcl_open(&s, &r, dir, p, err);
	if (rc < 0)
		return rc;
	if (r.h.total_blocks * r.h.block_size > p->size + r.h.block_size - 1) {
		rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
			     "partition %s: its image holds %llu bytes, more than the partition's %llu",
			     p->name, (unsigned long long)(r.h.total_blocks * r.h.block_size),
			     (unsigned long long)p->size);
		goto out;
	}
	q.max = (4u << 20) / r.h.block_size;
	if (q.max == 0)
		q.max = 1;
	/* (one worker: the checksums run in the stream's order) */
	rc = pipeline_run(&ops, &q, 1, q.max * r.h.block_size, 0,
			  sizeof(struct ptcl_meta) + (q.max + 1) * sizeof(struct pcl_mark), err);
	if (rc < 0 && q.read_failed) {
		rc = stream_failed(&s, p, rc, err);
		if (!strstr(err->msg, p->name))
			im_err_prefix(err, "partition %s: ", p->name);
	}
	if (rc == 0)
		rc = ntfs_backup_boot(&q, err);
out:
	pcl_close(&r);
	czs_close(&s);
	return rc;
}

/* partclone.dd's stream: the partition's bytes, exactly its size.  With
 * j, written to partition i; without, only read (verify). */
int cz_read_dd(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
	       const struct im_progress *progress, uint64_t *done, uint64_t total,
	       struct im_err *err)
{
	struct czs s;
	unsigned char *buf = malloc(4u << 20);
	uint64_t off = 0;
	int rc = buf ? czs_open(&s, dir, p, err)
		     : im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");

	if (rc < 0) {
		free(buf);
		return rc;
	}
	for (;;) {
		size_t want = 4u << 20, got = 0;
		ssize_t n = 0;
		while (got < want && (n = czs_read(&s, buf + got, want - got)) > 0)
			got += (size_t)n;
		if (n < 0) {
			rc = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "partition %s: %s: %s", p->name,
				     p->stream, s.why);
			break;
		}
		if (got > p->size - off) {
			rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				     "partition %s: %s holds more than the partition's %llu bytes",
				     p->name, p->stream, (unsigned long long)p->size);
			break;
		}
		if (got && j)
			rc = j->put(j, i, off, got, buf, err);
		off += got;
		if (rc == 0 && j && j->progress->cancel && *j->progress->cancel)
			rc = im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
		if (j) {
			j->done += got;
			if (j->progress->fn)
				j->progress->fn(j->progress->opaque, "restore", j->done,
						     j->total);
		} else if (progress && progress->fn && done) {
			progress->fn(progress->opaque, "verify", *done + s.consumed, total);
		}
		if (rc < 0 || got < want)
			break;
	}
	if (rc == 0 && off != p->size)
		rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
			     "partition %s: %s ends at byte %llu of the partition's %llu (truncated)",
			     p->name, p->stream, (unsigned long long)off, (unsigned long long)p->size);
	czs_close(&s);
	free(buf);
	return rc;
}

/* ---- ntfsclone --save-image streams (Clonezilla before partclone) ----
 * Facts (ntfs-3g's ntfsclone, checked on images ntfsclone 2022.10.3
 * writes): a 50-byte header, "\0ntfsclone-image", u8 major 10, u8 minor
 * 0 or 1, le32 cluster size, le64 device size, le64 number of clusters,
 * le64 clusters in use, le32 offset of the data from the header's start;
 * then commands until the cluster count is reached: 0x00 and a le64 count
 * (a gap of that many clusters, not stored), 0x01 and one cluster's bytes;
 * then, when the device is longer than its clusters (NTFS keeps its backup
 * boot sector there), one more 0x01 and the remaining bytes; then the end. */
#define NTC_HEADER 50

struct ntc {
	struct czs s;
	unsigned char *buf;       /* read-ahead */
	size_t pos, len;
	uint32_t cs;
	uint64_t device_size, clusters, inuse, off;
	unsigned major, minor;
	bool eof;                 /* the stream ended cleanly */
};

/* Exactly n bytes from the stream; -EBADMSG at its end or on damage. */
static int ntc_get(struct ntc *t, void *out, size_t n)
{
	unsigned char *o = out;
	while (n) {
		if (t->pos == t->len) {
			ssize_t r = czs_read(&t->s, t->buf, 1 << 20);
			if (r <= 0) {
				t->eof = r == 0 && !t->s.why[0];
				if (t->eof)
					snprintf(t->s.why, sizeof(t->s.why),
						 "the stream ends early (truncated)");
				return -EBADMSG;
			}
			t->pos = 0;
			t->len = (size_t)r;
		}
		size_t k = t->len - t->pos < n ? t->len - t->pos : n;
		memcpy(o, t->buf + t->pos, k);
		t->pos += k;
		o += k;
		n -= k;
	}
	return 0;
}

static int ntc_fail(struct ntc *t, const struct cz_part *p, struct im_err *err)
{
	return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "partition %s: %s: %s", p->name, p->stream,
		       t->s.why);
}

static void ntc_close(struct ntc *t)
{
	czs_close(&t->s);
	free(t->buf);
	t->buf = NULL;
}

/* The stream opened and its header read and checked against the
 * partition; nothing stays open on failure. */
static int ntc_open(struct ntc *t, const char *dir, const struct cz_part *p, struct im_err *err)
{
	unsigned char h[NTC_HEADER], skip[64];
	int r;

	memset(t, 0, sizeof(*t));
	t->buf = malloc(1 << 20);
	if (!t->buf)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = czs_open(&t->s, dir, p, err);
	if (r < 0) {
		free(t->buf);
		return r;
	}
	if (ntc_get(t, h, sizeof(h)) < 0) {
		r = ntc_fail(t, p, err);
		goto fail;
	}
	if (memcmp(h, "\0ntfsclone-image", 16)) {
		r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "partition %s: %s is not an ntfsclone image",
			    p->name, p->stream);
		goto fail;
	}
	t->major = h[16];
	t->minor = h[17];
	t->cs = le32(h + 18);
	t->device_size = le64(h + 22);
	t->clusters = le64(h + 30);
	t->inuse = le64(h + 38);
	t->off = le32(h + 46);
	if (t->major != 10 || t->minor > 1) {
		r = im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			    "partition %s: %s: ntfsclone image version %u.%u (10.0 and 10.1 are read)",
			    p->name, p->stream, t->major, t->minor);
		goto fail;
	}
	if (t->cs < 256 || t->cs > (2u << 20) || (t->cs & (t->cs - 1)) ||
	    t->device_size > p->size || t->clusters > t->device_size / t->cs ||
	    t->device_size - t->clusters * t->cs > t->cs || t->inuse > t->clusters ||
	    t->off < NTC_HEADER || t->off > NTC_HEADER + sizeof(skip)) {
		r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
			    "partition %s: %s: the ntfsclone header lies (cluster %u, %llu clusters, %llu in use, device %llu bytes, data at %llu; the partition has %llu bytes)",
			    p->name, p->stream, t->cs, (unsigned long long)t->clusters,
			    (unsigned long long)t->inuse, (unsigned long long)t->device_size,
			    (unsigned long long)t->off, (unsigned long long)p->size);
		goto fail;
	}
	if (ntc_get(t, skip, t->off - NTC_HEADER) < 0) {
		r = ntc_fail(t, p, err);
		goto fail;
	}
	return 0;
fail:
	ntc_close(t);
	return r;
}

/* The stream read to its end, every count checked; with j, the used
 * clusters written to partition i (runs of them at once). */
int cz_read_ntfsclone(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
		      const struct im_progress *progress, uint64_t *done, uint64_t total,
		      struct im_err *err)
{
	struct ntc t;
	unsigned char *run = NULL;
	size_t run_max, run_n = 0;
	uint64_t idx = 0, run_first = 0, used = 0;
	int rc = ntc_open(&t, dir, p, err);

	if (rc < 0)
		return rc;
	run_max = (4u << 20) / t.cs ? (4u << 20) / t.cs : 1;
	run = malloc(run_max * t.cs);
	if (!run) {
		ntc_close(&t);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	while (rc == 0 && idx < t.clusters) {
		unsigned char cmd, c[8];
		bool flush = false;

		if (ntc_get(&t, &cmd, 1) < 0) {
			rc = ntc_fail(&t, p, err);
			break;
		}
		if (cmd == 0) {
			uint64_t count;
			if (ntc_get(&t, c, 8) < 0) {
				rc = ntc_fail(&t, p, err);
				break;
			}
			count = le64(c);
			if (count == 0 || count > t.clusters - idx) {
				rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					     "partition %s: %s: a gap of %llu clusters at cluster %llu of %llu",
					     p->name, p->stream, (unsigned long long)count,
					     (unsigned long long)idx, (unsigned long long)t.clusters);
				break;
			}
			flush = true;
			idx += count;
		} else if (cmd == 1) {
			if (++used > t.inuse) {
				rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					     "partition %s: %s: more clusters than the %llu the header says are in use",
					     p->name, p->stream, (unsigned long long)t.inuse);
				break;
			}
			if (run_n == 0)
				run_first = idx;
			if (ntc_get(&t, run + run_n * t.cs, t.cs) < 0) {
				rc = ntc_fail(&t, p, err);
				break;
			}
			run_n++;
			idx++;
			flush = run_n == run_max || idx == t.clusters;
		} else {
			rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				     "partition %s: %s: an unknown command 0x%02x at cluster %llu",
				     p->name, p->stream, cmd, (unsigned long long)idx);
			break;
		}
		if (flush && run_n) {
			if (j) {
				rc = j->put(j, i, run_first * t.cs, (uint64_t)run_n * t.cs, run, err);
				j->done += (uint64_t)run_n * t.cs;
			}
			run_n = 0;
			if (rc == 0 && j && j->progress->cancel && *j->progress->cancel)
				rc = im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
			if (j && j->progress->fn)
				j->progress->fn(j->progress->opaque, "restore", j->done,
						     j->total);
			else if (!j && progress && progress->fn && done)
				progress->fn(progress->opaque, "verify", *done + t.s.consumed, total);
		}
	}
	/* The bytes past the last cluster (the backup boot sector). */
	if (rc == 0 && t.device_size > t.clusters * t.cs) {
		size_t n = (size_t)(t.device_size - t.clusters * t.cs);
		unsigned char cmd;
		if (ntc_get(&t, &cmd, 1) < 0 || (cmd == 1 && ntc_get(&t, run, n) < 0))
			rc = ntc_fail(&t, p, err);
		else if (cmd != 1)
			rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				     "partition %s: %s: no bytes past the last cluster (command 0x%02x)",
				     p->name, p->stream, cmd);
		else if (j)
			rc = j->put(j, i, t.clusters * t.cs, n, run, err);
		if (rc == 0 && j)
			j->done += n;
	}
	if (rc == 0 && used != t.inuse)
		rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
			     "partition %s: %s: %llu clusters stored, the header says %llu",
			     p->name, p->stream, (unsigned long long)used, (unsigned long long)t.inuse);
	if (rc == 0) {
		unsigned char extra;
		if (ntc_get(&t, &extra, 1) == 0)
			rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				     "partition %s: %s: bytes after the image's end", p->name, p->stream);
		else if (!t.eof)
			rc = ntc_fail(&t, p, err);  /* a damaged end, not a clean one */
	}
	free(run);
	ntc_close(&t);
	return rc;
}

int cz_read_stream(const char *dir, const struct cz_part *p, bool read_all,
		   const struct im_progress *progress, uint64_t *done, uint64_t total,
		   struct pcl_header *h, uint64_t *strips, struct im_err *err)
{
	struct czs s;
	struct pcl_reader r;
	unsigned char *buf = NULL;
	uint64_t first;
	ssize_t n = 0;
	int rc;

	if (p->kind == CZ_DD) {
		memset(h, 0, sizeof(*h));
		rc = read_all ? cz_read_dd(dir, p, 0, NULL, progress, done, total, err) : 0;
		if (done)
			*done += p->bytes;
		return rc;
	}
	if (p->kind == CZ_NTFSCLONE) {
		struct ntc t;
		memset(h, 0, sizeof(*h));
		rc = ntc_open(&t, dir, p, err);
		if (rc < 0)
			return rc;
		snprintf(h->tool_version, sizeof(h->tool_version), "%u.%u", t.major, t.minor);
		snprintf(h->fs, sizeof(h->fs), "NTFS");
		h->device_size = t.device_size;
		h->block_size = t.cs;
		h->total_blocks = t.clusters;
		h->used_blocks = t.inuse;
		ntc_close(&t);
		if (read_all)
			rc = cz_read_ntfsclone(dir, p, 0, NULL, progress, done, total, err);
		if (done)
			*done += p->bytes;
		return rc;
	}
	if (p->kind != CZ_PTCL)
		return im_errf(err, IM_EXIT_INTERNAL, -EINVAL, "partition %s has no stream", p->name);
	rc = ptcl_open(&s, &r, dir, p, err);
	if (rc < 0)
		return rc;
	*h = r.h;
	if (read_all) {
		buf = malloc((size_t)64 * r.h.block_size);
		if (!buf)
			rc = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		while (buf && (n = pcl_read_run(&r, &first, buf, 64, err)) > 0)
			if (progress && progress->fn && done)
				progress->fn(progress->opaque, "verify", *done + s.consumed, total);
		if (n < 0)
			rc = stream_failed(&s, p, (int)n, err);
		if (strips)
			*strips = r.h.checksum_mode ? (r.h.used_blocks + r.h.blocks_per_checksum - 1) /
							      r.h.blocks_per_checksum
						    : 0;
	}
	if (done)
		*done += p->bytes;
	free(buf);
	pcl_close(&r);
	czs_close(&s);
	return rc;
}

/* The bytes to write, for progress: each stream's used blocks.  Only the
 * headers and bitmaps are read here (a bitmap is 1/32768 of its partition);
 * this also finds a damaged header before anything is written. */
/* The bytes a stream writes: its used blocks (headers and bitmaps only
 * are read; this also finds a damaged header before anything is
 * written). */
static int stream_used(const char *dir, const struct cz_part *p, uint64_t *used,
		       struct im_err *err)
{
	struct czs s;
	struct pcl_reader r;
	int rc;

	*used = p->kind == CZ_SWAP ? 4096 : p->kind == CZ_DD ? p->size
		: p->kind == CZ_PV ? p->pe_start : 0;
	if (p->kind == CZ_NTFSCLONE) {
		struct ntc t;
		rc = ntc_open(&t, dir, p, err);
		if (rc < 0)
			return rc;
		*used = t.inuse * t.cs + (t.device_size - t.clusters * t.cs);
		ntc_close(&t);
	} else if (p->kind == CZ_PTCL) {
		rc = ptcl_open(&s, &r, dir, p, err);
		if (rc < 0)
			return rc;
		*used = r.h.used_blocks * r.h.block_size;
		pcl_close(&r);
		czs_close(&s);
	}
	return 0;
}

/* The bytes to write, for progress and for --shrink's plan: each
 * partition's (a PV's with its LVs'). */
int cz_count_used(const char *dir, const struct cz_image *cz, uint64_t *total,
		  uint64_t *used, uint64_t *lv_used, struct im_err *err)
{
	for (size_t i = 0; i < cz->nparts; i++) {
		int rc = stream_used(dir, &cz->parts[i], &used[i], err);
		if (rc < 0)
			return rc;
		*total += used[i];
	}
	for (size_t l = 0; l < cz->nlvs; l++) {
		uint64_t u;
		int rc = stream_used(dir, &cz->lvs[l].part, &u, err);
		if (rc < 0)
			return rc;
		*total += u;
		lv_used[l] = u;
		if (cz->lvs[l].nsegs)
			used[cz->lvs[l].segs[0].part] += u;
	}
	return 0;
}
