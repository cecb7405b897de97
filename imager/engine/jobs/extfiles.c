/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The files save --rescue's unreadable ranges hit in ext2/3/4 partitions
 * (extfiles.h).  debugfs runs on the source itself at the partition's
 * offset ("DEVICE?offset=BYTES", an option of e2fsprogs' unix io manager),
 * read-only and in catastrophic mode (-c: the bitmaps are not read, so a
 * bad sector in one does not stop it, and a large filesystem opens fast):
 * "icheck BLOCK..." names each block's inode, "ncheck INODE..." each
 * inode's paths.  Its output is hostile (the filesystem is, and so are the
 * names in it): whole lines of the expected forms only, bounded numbers,
 * bounded names.
 */
#include "extfiles.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

#define OUT_LEN (1u << 20)   /* debugfs's stdout: 256 inodes with long paths fit */
#define ERR_LEN 4096

/* ---- parsing ---- */

/* The next whole line at *p ([*line, *line + *len), without its '\n').
 * A last line without '\n' is none: the tool was cut short there. */
static bool next_line(const char **p, const char **line, size_t *len)
{
	const char *nl = strchr(*p, '\n');

	if (!nl)
		return false;
	*line = *p;
	*len = (size_t)(nl - *p);
	*p = nl + 1;
	return true;
}

/* [s, s+len) is a decimal number of 1 to 20 digits, at most max. */
static bool parse_num(const char *s, size_t len, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;

	if (!len || len > 20)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';
		if (d > 9 || d > max || x > (max - d) / 10)
			return false;
		x = x * 10 + d;
	}
	*v = x;
	return true;
}

int extfiles_parse_icheck(const char *text, const uint64_t *blocks, size_t n, uint32_t *ino)
{
	static const char head[] = "Block\tInode number", none[] = "<block not found>";
	const char *p = text, *line;
	bool header = false;
	size_t len;
	int answered = 0;

	memset(ino, 0, n * sizeof(*ino));
	while (next_line(&p, &line, &len)) {
		const char *tab, *rest;
		size_t rlen;
		uint64_t blk, v;
		uint32_t val;

		if (!header) {
			header = len == sizeof(head) - 1 && !memcmp(line, head, len);
			continue;
		}
		if (!(tab = memchr(line, '\t', len)) ||
		    !parse_num(line, (size_t)(tab - line), UINT64_MAX, &blk))
			continue;
		rest = tab + 1;
		rlen = len - (size_t)(rest - line);
		if (rlen == sizeof(none) - 1 && !memcmp(rest, none, rlen))
			val = EXTF_NO_FILE;
		else if (parse_num(rest, rlen, UINT32_MAX - 1, &v) && v)
			val = (uint32_t)v;
		else
			continue;
		/* (the first answer for a block stands) */
		for (size_t i = 0; i < n; i++)
			if (blocks[i] == blk && !ino[i]) {
				ino[i] = val;
				answered++;
			}
	}
	return header ? answered : -EBADMSG;
}

int extfiles_parse_ncheck(const char *text, const uint32_t *inos, size_t n,
			  void (*fn)(void *opaque, size_t i, const char *path, size_t len),
			  void *opaque)
{
	static const char head[] = "Inode\tPathname";
	const char *p = text, *line;
	bool header = false;
	size_t len;
	int given = 0;

	while (next_line(&p, &line, &len)) {
		const char *tab, *path;
		size_t plen;
		uint64_t v;

		if (!header) {
			header = len == sizeof(head) - 1 && !memcmp(line, head, len);
			continue;
		}
		if (!(tab = memchr(line, '\t', len)) ||
		    !parse_num(line, (size_t)(tab - line), UINT32_MAX - 1, &v) || !v)
			continue;
		path = tab + 1;
		plen = len - (size_t)(path - line);
		/* A name holding a newline splits its line in two; the part
		 * after it holds no '/' (a name cannot), so it is dropped here.
		 * (A folder's name with a newline can still make a wrong path
		 * appear: names are information, nothing acts on them.) */
		if (!plen || (path[0] != '/' && path[0] != '<') || !memchr(path, '/', plen))
			continue;
		while (plen > 1 && path[0] == '/' && path[1] == '/') {   /* "//file": in the root */
			path++;
			plen--;
		}
		for (size_t i = 0; i < n; i++)
			if (inos[i] == v) {
				fn(opaque, i, path, plen);
				given++;
			}
	}
	return header ? given : -EBADMSG;
}

/* ---- running debugfs ---- */

/* One listed range inside an ext partition: its blocks (inside the
 * filesystem) and how many of them, from the first, are asked about. */
struct want {
	size_t range, part;
	uint64_t first, last, asked;
};

/* An inode icheck named, and its paths from ncheck. */
struct inode_names {
	uint32_t ino;
	unsigned n;
	bool more;                /* more paths than are kept */
	char *names[IMG_UNREADABLE_FILES];
};

struct lookup {
	const char *device;
	struct img_manifest *m;
	long long deadline;       /* CLOCK_MONOTONIC seconds */
	char *warning;
	size_t wlen;
	char *out, *errs;
	struct inode_names *inodes;
	size_t ninodes;
	int failed;               /* -ENOMEM in a callback */
};

static long long now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec;
}

/* One warning is enough: the first reason names are missing. */
static void warn(struct lookup *lk, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void warn(struct lookup *lk, const char *fmt, ...)
{
	va_list ap;

	if (!lk->wlen || lk->warning[0])
		return;
	va_start(ap, fmt);
	vsnprintf(lk->warning, lk->wlen, fmt, ap);
	va_end(ap);
}

/* debugfs's reason, printable: its first line past the version banner
 * ("debugfs: Bad magic number in super-block while trying to open ..."). */
static void reason(const char *errs, char *out, size_t len)
{
	const char *p = errs, *line;
	size_t n, k = 0;

	snprintf(out, len, "no reason given");
	while (next_line(&p, &line, &n)) {
		if (!n || (n >= 10 && !memcmp(line, "debugfs 1.", 10)))
			continue;
		for (size_t i = 0; i < n && k + 1 < len && k < 200; i++)
			out[k++] = line[i] >= 0x20 && line[i] < 0x7f ? line[i] : '?';
		out[k] = '\0';
		return;
	}
}

/* debugfs -c -R REQUEST on the partition.  Returns its status, or a
 * negative errno (-ENOENT: not installed, -ETIMEDOUT). */
static int debugfs(struct lookup *lk, const struct img_part *p, const char *request)
{
	char spec[700];
	long long left = lk->deadline - now_s();
	const char *argv[] = { "debugfs", "-c", "-R", request, "--", spec, NULL };

	if (left <= 0)
		return -ETIMEDOUT;
	if (p->start)
		snprintf(spec, sizeof(spec), "%s?offset=%llu", lk->device, (unsigned long long)p->start);
	else
		snprintf(spec, sizeof(spec), "%s", lk->device);
	return tool_run_timed(argv, lk->out, OUT_LEN, lk->errs, ERR_LEN, (unsigned)left);
}

/* "WORD N N N..." */
static char *request(const char *word, const uint64_t *v, size_t n)
{
	size_t len = strlen(word) + n * 21 + 1, at;
	char *s = malloc(len);

	if (!s)
		return NULL;
	at = (size_t)snprintf(s, len, "%s", word);
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(s + at, len - at, " %llu", (unsigned long long)v[i]);
	return s;
}

/* A path kept: at most IMG_UNREADABLE_NAME - 1 bytes, a longer one cut
 * (not inside a UTF-8 character) and ended with "...". */
static void on_path(void *opaque, size_t i, const char *path, size_t len)
{
	struct lookup *lk = opaque;
	struct inode_names *in = &lk->inodes[i];
	size_t keep = len;
	char *s;

	if (in->n == IMG_UNREADABLE_FILES) {
		in->more = true;
		return;
	}
	if (len > IMG_UNREADABLE_NAME - 1) {
		keep = IMG_UNREADABLE_NAME - 4;
		while (keep && ((unsigned char)path[keep] & 0xc0) == 0x80)
			keep--;
	}
	if (!(s = malloc(keep + 4))) {
		lk->failed = -ENOMEM;
		return;
	}
	memcpy(s, path, keep);
	strcpy(s + keep, keep < len ? "..." : "");
	in->names[in->n++] = s;
}

static int range_add(struct img_unreadable_range *r, const char *name)
{
	for (uint32_t k = 0; k < r->nfiles; k++)
		if (!strcmp(r->files[k], name))
			return 0;
	if (r->nfiles == IMG_UNREADABLE_FILES) {
		r->files_partial = true;
		return 0;
	}
	if (!r->files && !(r->files = calloc(IMG_UNREADABLE_FILES, sizeof(*r->files))))
		return -ENOMEM;
	snprintf(r->files[r->nfiles++], IMG_UNREADABLE_NAME, "%s", name);
	return 0;
}

/* What a block holds, into its range. */
static int block_into(struct lookup *lk, struct img_unreadable_range *r, uint32_t ino)
{
	char name[64];
	size_t k;
	int rc = 0;

	if (!ino) {                       /* icheck did not answer for it */
		r->files_partial = true;
		return 0;
	}
	if (ino == EXTF_NO_FILE) {
		r->no_file_blocks++;
		return 0;
	}
	for (k = 0; k < lk->ninodes && lk->inodes[k].ino != ino; k++)
		;
	if (k < lk->ninodes && lk->inodes[k].n) {
		for (unsigned j = 0; j < lk->inodes[k].n && rc == 0; j++)
			rc = range_add(r, lk->inodes[k].names[j]);
		if (lk->inodes[k].more)
			r->files_partial = true;
		return rc;
	}
	/* The root has no entry naming it; the reserved inodes and an
	 * orphan (deleted, still open when the disk was last used) none at
	 * all. */
	if (ino == 2)
		snprintf(name, sizeof(name), "/");
	else if (ino == 7)
		snprintf(name, sizeof(name), "<inode 7: reserved for resizing>");
	else if (ino == 8)
		snprintf(name, sizeof(name), "<inode 8: the journal>");
	else
		snprintf(name, sizeof(name), "<inode %u>", ino);
	return range_add(r, name);
}

/* The asked blocks of partition pi's ranges: icheck, then ncheck, then
 * each range's files.  Returns 0 or -ENOMEM (debugfs's failures are a
 * warning). */
static int lookup_part(struct lookup *lk, size_t pi, const struct want *w, size_t nw)
{
	const struct img_part *p = &lk->m->parts[pi];
	uint64_t *blocks = NULL, *inos = NULL;
	uint32_t *ino = NULL;
	size_t nb = 0, j;
	char *req = NULL, why[256];
	int r = 0, st;

	blocks = malloc(EXTF_MAX_BLOCKS * sizeof(*blocks));
	inos = malloc(EXTF_MAX_BLOCKS * sizeof(*inos));
	ino = malloc(EXTF_MAX_BLOCKS * sizeof(*ino));
	lk->inodes = calloc(EXTF_MAX_BLOCKS, sizeof(*lk->inodes));
	lk->ninodes = 0;
	if (!blocks || !inos || !ino || !lk->inodes) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < nw; k++) {
		if (w[k].part != pi)
			continue;
		for (uint64_t b = w[k].first; b < w[k].first + w[k].asked && nb < EXTF_MAX_BLOCKS; b++) {
			for (j = 0; j < nb && blocks[j] != b; j++)
				;
			if (j == nb)
				blocks[nb++] = b;
		}
	}
	if (!nb || !(req = request("icheck", blocks, nb))) {
		r = nb ? -ENOMEM : 0;
		goto out;
	}
	st = debugfs(lk, p, req);
	if (st == -ENOENT) {
		warn(lk, "debugfs (e2fsprogs) is not installed: the files hit by the unreadable "
		     "sectors are not named");
		goto out;
	}
	if (st == -ETIMEDOUT) {
		warn(lk, "partition %u: debugfs took longer than %u s: the files hit by its "
		     "unreadable sectors are not named", p->number, EXTF_SECONDS);
		goto out;
	}
	if (st < 0 || extfiles_parse_icheck(lk->out, blocks, nb, ino) < 0) {
		reason(lk->errs, why, sizeof(why));
		warn(lk, "partition %u: debugfs could not read its filesystem (%s): the files hit "
		     "by its unreadable sectors are not named", p->number, why);
		goto out;
	}
	/* the inodes named, once each */
	for (size_t i = 0; i < nb; i++) {
		if (!ino[i] || ino[i] == EXTF_NO_FILE)
			continue;
		for (j = 0; j < lk->ninodes && lk->inodes[j].ino != ino[i]; j++)
			;
		if (j == lk->ninodes) {
			lk->inodes[lk->ninodes].ino = ino[i];
			inos[lk->ninodes++] = ino[i];
		}
	}
	if (lk->ninodes) {
		uint32_t asked[EXTF_MAX_BLOCKS];

		free(req);
		if (!(req = request("ncheck", inos, lk->ninodes))) {
			r = -ENOMEM;
			goto out;
		}
		for (j = 0; j < lk->ninodes; j++)
			asked[j] = lk->inodes[j].ino;
		st = debugfs(lk, p, req);
		/* Without paths, the inodes are still told ("<inode N>"). */
		if (st < 0 || extfiles_parse_ncheck(lk->out, asked, lk->ninodes, on_path, lk) < 0) {
			if (st == -ETIMEDOUT)
				snprintf(why, sizeof(why), "it took longer than %u s", EXTF_SECONDS);
			else
				reason(lk->errs, why, sizeof(why));
			warn(lk, "partition %u: debugfs could not find the paths of the files hit by "
			     "its unreadable sectors (%s): they are given by inode number", p->number,
			     why);
		}
		if (lk->failed) {
			r = lk->failed;
			goto out;
		}
	}
	for (size_t k = 0; k < nw && r == 0; k++) {
		struct img_unreadable_range *ur = &lk->m->unreadable.list[w[k].range];

		if (w[k].part != pi)
			continue;
		ur->looked_up = true;
		ur->files_partial = w[k].asked < w[k].last - w[k].first + 1;
		for (uint64_t b = w[k].first; b < w[k].first + w[k].asked && r == 0; b++) {
			for (j = 0; j < nb && blocks[j] != b; j++)
				;
			r = block_into(lk, ur, j < nb ? ino[j] : 0);
		}
	}
out:
	for (size_t k = 0; lk->inodes && k < lk->ninodes; k++)
		for (unsigned i = 0; i < lk->inodes[k].n; i++)
			free(lk->inodes[k].names[i]);
	free(lk->inodes);
	lk->inodes = NULL;
	free(blocks);
	free(inos);
	free(ino);
	free(req);
	return r;
}

static bool is_ext(const struct img_part *p)
{
	return !strcmp(p->plugin, "ext") && (!strcmp(p->filesystem, "ext2") ||
					     !strcmp(p->filesystem, "ext3") ||
					     !strcmp(p->filesystem, "ext4"));
}

int extfiles_lookup(const char *device, struct img_manifest *m, char *warning, size_t wlen)
{
	struct img_unreadable *u = &m->unreadable;
	struct want w[IMG_UNREADABLE_LIST];
	struct lookup lk = { .device = device, .m = m, .warning = warning, .wlen = wlen };
	uint64_t budget = EXTF_MAX_BLOCKS;
	size_t nw = 0;
	int r = 0;

	if (wlen)
		warning[0] = '\0';
	/* Which ranges: those starting inside an ext partition's filesystem;
	 * each gets its first block asked about, then the rest of its
	 * blocks, in order, while the budget lasts. */
	for (size_t i = 0; i < u->nlist && i < IMG_UNREADABLE_LIST; i++) {
		uint64_t off = u->list[i].offset, len = u->list[i].length, end;

		for (size_t pi = 0; pi < m->nparts; pi++) {
			const struct img_part *p = &m->parts[pi];

			if (!is_ext(p) || !p->block_size || !p->block_count || !len ||
			    off < p->start || off - p->start >= p->size ||
			    (off - p->start) / p->block_size >= p->block_count)
				continue;
			end = off - p->start + len - 1;   /* its last byte in the partition */
			if (end >= p->size || end < off - p->start)
				end = p->size - 1;
			w[nw] = (struct want){ .range = i, .part = pi,
					       .first = (off - p->start) / p->block_size,
					       .last = end / p->block_size, .asked = 1 };
			if (w[nw].last >= p->block_count)
				w[nw].last = p->block_count - 1;
			nw++;
			budget--;
			break;
		}
	}
	for (size_t k = 0; k < nw && budget; k++) {
		uint64_t more = w[k].last - w[k].first;
		if (more > budget)
			more = budget;
		w[k].asked += more;
		budget -= more;
	}
	if (!nw)
		return 0;
	if (strchr(device, '?')) {   /* debugfs would take what follows for options */
		warn(&lk, "debugfs cannot open a path that holds '?': the files hit by the "
		     "unreadable sectors are not named");
		return 0;
	}
	lk.out = malloc(OUT_LEN);
	lk.errs = malloc(ERR_LEN);
	if (!lk.out || !lk.errs) {
		r = -ENOMEM;
		goto out;
	}
	lk.deadline = now_s() + EXTF_SECONDS;
	for (size_t pi = 0; pi < m->nparts && r == 0; pi++) {
		bool any = false;
		for (size_t k = 0; k < nw; k++)
			any |= w[k].part == pi;
		if (any)
			r = lookup_part(&lk, pi, w, nw);
	}
out:
	free(lk.out);
	free(lk.errs);
	return r;
}
