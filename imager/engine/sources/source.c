/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The source side of save and clone: open, read the table, examine every
 * filesystem, then read used blocks in large runs. */
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imager/fsplugin.h"
#include "util.h"

/* Plugins see only an errno; the container's own words are kept here so a
 * failure can be told as it happened ("connection lost", "corrupt image"). */
struct src_reader {
	struct bk *bk;
	struct im_err first;
};

static int src_pread(void *opaque, void *buf, size_t len, uint64_t off)
{
	struct src_reader *rd = opaque;
	return bk_pread(rd->bk, buf, len, off, &rd->first);
}

/* Partition i met unreadable sectors while its plugin read the metadata:
 * the bitmap may say blocks are free that are not, so the whole partition
 * is copied by the raw plugin; what libblkid told of it is kept. */
static int examine_rescued(struct source *s, size_t i, const struct fs_source *fsrc, bool force,
			   struct im_err *err)
{
	const struct pt_part *pp = &s->pt->parts[i];
	struct fs_info *fs = &s->fs[i];
	char type[32], uuid[64], label[256], bad[32];
	int r;

	memcpy(type, fs->type, sizeof(type));
	memcpy(uuid, fs->uuid, sizeof(uuid));
	memcpy(label, fs->label, sizeof(label));
	fs_info_free(fs);
	r = fs_examine_src_with(&fs_plugin_raw, fsrc, pp->start, pp->size, force, fs, err);
	if (r < 0)
		return r;
	memcpy(fs->type, type, sizeof(type));
	memcpy(fs->uuid, uuid, sizeof(uuid));
	memcpy(fs->label, label, sizeof(label));
	util_human_size(bk_rescue_bad_bytes(s->bk, pp->start, pp->size), bad, sizeof(bad));
	snprintf(fs->warning, sizeof(fs->warning),
		 "unreadable sectors (%s) in its %s metadata: copied whole, as raw data", bad,
		 type[0] ? type : "filesystem");
	return 0;
}

int source_open(const struct disk_roots *roots, const char *spec, const char *format,
		bool force, const struct rescue_opts *rescue, const struct bk_net *net,
		struct source *s, struct im_err *err)
{
	struct ptable *pt;
	int r;

	memset(s, 0, sizeof(*s));
	s->blkid_fd = -1;
	s->ref.kind = DISK_KIND_FILE;
	if (!bk_is_uri(spec)) {
		r = disk_resolve(roots, spec, &s->ref, err);
		if (r < 0)
			return r;
		if (!s->ref.exists)
			return im_errf(err, IM_EXIT_SOURCE, -ENOENT, "%s: no such disk or file", spec);
		/* A filesystem that changes while it is read is copied torn. */
		char what[400];
		if (!force && disk_mounted_rw(roots, s->ref.path, what, sizeof(what)) > 0)
			return im_errf(err, IM_EXIT_SOURCE, -EBUSY,
				       "%s is in use (%s read-write): a copy would not be consistent. "
				       "Save a snapshot instead (LVM: lvcreate --snapshot, then save the "
				       "snapshot's LV; btrfs: btrfs subvolume snapshot), boot the live "
				       "medium, or remount it read-only; --force copies it as it is",
				       s->ref.path, what);
	} else {
		snprintf(s->ref.path, sizeof(s->ref.path), "%s", spec);
	}
	r = bk_open(s->ref.path, format, 0, net, &s->bk, err);
	if (r < 0)
		return r;
	if (rescue && rescue->on && (r = bk_rescue_start(s->bk, rescue->retries, err)) < 0)
		goto fail;
	if (s->bk->raw_path[0])
		s->blkid_fd = open(s->bk->raw_path, O_RDONLY | O_CLOEXEC);
	s->pt = pt = calloc(1, sizeof(*pt));
	if (!pt) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto fail;
	}
	if (s->bk->size < 512) {
		r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: %llu bytes is too small to be a disk",
			    spec, (unsigned long long)s->bk->size);
		goto fail;
	}
	if (s->ref.kind == DISK_KIND_PARTITION) {
		/* One filesystem: handled like a disk without a table. */
		snprintf(pt->type, sizeof(pt->type), "none");
		pt->disk_size = s->bk->size;
		pt->sector_size = s->bk->sector_size;
		pt->nparts = 1;
		pt->parts[0].size = s->bk->size;
		snprintf(pt->parts[0].kind, sizeof(pt->parts[0].kind), "whole-disk");
	} else if ((r = ptable_read_bk(s->bk, pt, err)) < 0) {
		goto fail;
	}
	s->fs = calloc(pt->nparts ? pt->nparts : 1, sizeof(*s->fs));
	if (!s->fs) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < pt->nparts; i++) {
		const struct pt_part *pp = &pt->parts[i];
		struct src_reader rd = { .bk = s->bk };
		struct fs_source fsrc = { .pread = src_pread, .opaque = &rd, .fd = s->blkid_fd };
		uint64_t bad = bk_rescue_bad_total(s->bk);
		r = fs_examine_src(&fsrc, pp->start, pp->size, force, &s->fs[i], err);
		if (bk_rescue_bad_total(s->bk) != bad && !rd.first.exit_class) {
			memset(err, 0, sizeof(*err));
			r = examine_rescued(s, i, &fsrc, force, err);
		}
		if (r < 0 && rd.first.exit_class) {
			*err = rd.first;   /* the source failed, not the filesystem */
			r = rd.first.code;
		}
		if (r < 0) {
			im_err_prefix(err, "partition %u: ", pp->number);
			goto fail;
		}
		/* (one per partition: room for each; it fits, warning has 512 bytes) */
		if (s->fs[i].warning[0] && s->nwarnings < sizeof(s->warnings) / sizeof(s->warnings[0]))
			snprintf(s->warnings[s->nwarnings++], sizeof(s->warnings[0]),
				 "partition %u: %s", pp->number, s->fs[i].warning);
		s->used_bytes += s->fs[i].used_blocks * s->fs[i].block_size;
	}
	return 0;
fail:
	source_close(s);
	return r;
}

int source_rescue_finish(struct source *s, const char *path, const struct rescue_opts *o,
			 struct rescue_report *rep, struct im_err *err)
{
	int r;

	size_t n;

	memset(rep, 0, sizeof(*rep));
	bk_rescue_bad(s->bk, &n);
	rep->ranges = n;
	rep->bytes = bk_rescue_bad_total(s->bk) ? bk_rescue_bad_bytes(s->bk, 0, s->bk->size) : 0;
	if (!rep->bytes)
		return 0;
	r = bk_rescue_write_map(s->bk, path, o->cmdline ? o->cmdline : "imager", err);
	if (r == 0)
		snprintf(rep->map, sizeof(rep->map), "%s", path);
	return r;
}

void source_close(struct source *s)
{
	if (s->fs && s->pt)
		for (size_t i = 0; i < s->pt->nparts; i++)
			fs_info_free(&s->fs[i]);
	free(s->fs);
	free(s->pt);
	if (s->blkid_fd >= 0)
		close(s->blkid_fd);
	bk_close(s->bk, NULL);
	memset(s, 0, sizeof(*s));
	s->blkid_fd = -1;
}

int source_read_area(struct source *s, const struct pt_area *a, unsigned char **buf,
		     struct im_err *err)
{
	int r;

	*buf = malloc(a->length ? a->length : 1);
	if (!*buf)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = bk_pread(s->bk, *buf, a->length, a->offset, err);
	if (r < 0) {
		free(*buf);
		*buf = NULL;
	}
	return r;
}

size_t used_meta_size(uint32_t blocks_per_slot)
{
	return sizeof(struct used_meta) + 2 * (size_t)blocks_per_slot * sizeof(struct img_extent);
}

/* Keep the container reading this many bytes of used blocks ahead of us:
 * our own readahead, over exactly the blocks we will ask for. */
#define PREFETCH_BYTES (32u << 20)

static bool is_blank(const struct used_reader *u, uint64_t b)
{
	return u->blank && b < u->blank->nbits && bitmap_test(u->blank, b);
}

/* How many of the n blocks from b are all blank, or all not (as b is). */
static uint64_t same_blank(const struct used_reader *u, uint64_t b, uint64_t n)
{
	bool first = is_blank(u, b);
	uint64_t i = 1;

	if (!u->blank)
		return n;
	while (i < n && is_blank(u, b + i) == first)
		i++;
	return i;
}

/* Announce [p, p+len) to the container, blank blocks left out. */
static void prefetch_run(struct used_reader *u, uint64_t p, uint64_t len)
{
	while (len) {
		uint64_t k = same_blank(u, p, len);
		if (!is_blank(u, p))
			bk_prefetch(u->bk, u->base + p * u->bs, k * u->bs);
		p += k;
		len -= k;
	}
}

static void prefetch_ahead(struct used_reader *u)
{
	uint64_t want = u->run_pos + PREFETCH_BYTES / u->bs, budget = PREFETCH_BYTES / u->bs;
	uint64_t pos = u->ahead_pos > u->run_pos ? u->ahead_pos : u->run_pos;

	/* Announce in steps of a quarter of the window, not at every read. */
	if (u->ahead_pos > u->run_pos + budget / 4 * 3)
		return;
	while (pos < want && budget) {
		uint64_t p = pos, len = bitmap_next_run(u->used, &p);
		if (!len)
			break;
		if (len > budget)
			len = budget;
		prefetch_run(u, p, len);
		budget -= len;
		pos = p + len;
	}
	u->ahead_pos = pos;
}

int used_read(struct used_reader *u, struct pipe_slot *s, struct im_err *err)
{
	struct used_meta *m = s->meta;
	size_t room = s->a_cap / u->bs;     /* blocks that fit */
	uint64_t first = UINT64_MAX, end = 0;   /* the span read, in bytes */

	prefetch_ahead(u);

	m->nin = 0;
	s->a_len = 0;
	while (room) {
		uint64_t n;
		int r;
		if (!u->run_left) {
			u->run_left = bitmap_next_run(u->used, &u->run_pos);
			if (!u->run_left)
				break;
		}
		n = u->run_left < room ? u->run_left : room;
		/* Blank blocks are not read, and take no room in the buffer: a
		 * run of them is an input extent flagged zero. */
		bool blank = is_blank(u, u->run_pos);
		n = same_blank(u, u->run_pos, n);
		if (!blank && (r = bk_pread(u->bk, s->a + s->a_len, (size_t)(n * u->bs),
					    u->base + u->run_pos * u->bs, err)) < 0)
			return r;
		m->ext[m->nin].start = u->run_pos;
		m->ext[m->nin].count = (uint32_t)n;
		m->ext[m->nin].flags = blank ? IMG_EXT_ZERO : 0;
		m->nin++;
		if (!blank) {
			if (first == UINT64_MAX)
				first = u->base + u->run_pos * u->bs;
			end = u->base + (u->run_pos + n) * u->bs;
			s->a_len += (size_t)(n * u->bs);
			if (u->bytes_read)
				*u->bytes_read += n * u->bs;
		}
		u->run_pos += n;
		u->run_left -= n;
		room -= n;
	}
	/* Every page of the span is in the slot now (or was never read):
	 * dropping them as we go spares the host's cache a full copy of the
	 * source, and the kernel the work of dropping it all at the last
	 * close of a block device. */
	if (u->drop_behind && end > first)
		bk_drop(u->bk, first, end - first);
	return m->nin ? 1 : 0;
}

/* Append [start, start+count) to the extents, merged with the last one
 * when it continues it with the same flag. */
static void out_add(struct img_extent *out, uint32_t *n, uint64_t start, uint32_t count,
		    uint32_t flag)
{
	struct img_extent *last = *n ? &out[*n - 1] : NULL;

	if (last && last->flags == flag && last->start + last->count == start) {
		last->count += count;
		return;
	}
	out[*n].start = start;
	out[*n].count = count;
	out[*n].flags = flag;
	(*n)++;
}

size_t used_split_zeros(struct pipe_slot *s, uint32_t bs)
{
	struct used_meta *m = s->meta;
	struct img_extent *out = m->ext + m->nin;
	size_t src = 0, dst = 0;

	m->nout = 0;
	for (uint32_t i = 0; i < m->nin; i++) {
		if (m->ext[i].flags & IMG_EXT_ZERO) {   /* blank: nothing in the buffer */
			out_add(out, &m->nout, m->ext[i].start, m->ext[i].count, IMG_EXT_ZERO);
			continue;
		}
		for (uint32_t b = 0; b < m->ext[i].count; b++, src += bs) {
			uint32_t flag = util_buf_is_zero(s->a + src, bs) ? IMG_EXT_ZERO : 0;
			out_add(out, &m->nout, m->ext[i].start + b, 1, flag);
			if (!flag) {
				if (dst != src)
					memmove(s->a + dst, s->a + src, bs);
				dst += bs;
			}
		}
	}
	return dst;
}
