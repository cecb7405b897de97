/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The cache of Clonezilla folders' indexes (include/imager/job.h,
 * im_czindex): found by the folder's identity, built by czindex.c into a
 * temporary name and renamed into place, pruned by size; and
 * im_reader_open(), which reads a Clonezilla folder through it.
 */
#include "czindex.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "imager/image.h"
#include "imager/imgread.h"
#include "imager/job.h"
#include "util.h"

#define ID_FILE "czindex.id"
#define ID_VERSION "imager czindex 1"
#define HEAD_BYTES (64u << 10)

/* ---- the folder's identity ---- */

static int regular_only(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* XXH3-64 of ID_VERSION and of each regular file's name, size,
 * modification time and first HEAD_BYTES, in name order. */
static int identity(const char *dir, uint64_t *id, struct im_err *err)
{
	struct dirent **names = NULL;
	XXH3_state_t *h = XXH3_createState();
	unsigned char *head = malloc(HEAD_BYTES);
	int n = scandir(dir, &names, regular_only, alphasort), r = 0;

	if (n < 0)
		r = im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", dir, strerror(errno));
	else if (!h || !head)
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	if (r == 0) {
		XXH3_64bits_reset(h);
		XXH3_64bits_update(h, ID_VERSION, sizeof(ID_VERSION));
	}
	for (int i = 0; r == 0 && i < n; i++) {
		char path[4400];
		struct stat st;
		uint64_t rec[3];
		int fd;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			r = im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", path, strerror(errno));
			break;
		}
		ssize_t got = pread(fd, head, HEAD_BYTES, 0);
		close(fd);
		rec[0] = (uint64_t)st.st_size;
		rec[1] = (uint64_t)st.st_mtim.tv_sec;
		rec[2] = (uint64_t)st.st_mtim.tv_nsec;
		XXH3_64bits_update(h, names[i]->d_name, strlen(names[i]->d_name) + 1);
		XXH3_64bits_update(h, rec, sizeof(rec));
		XXH3_64bits_update(h, head, got > 0 ? (size_t)got : 0);
	}
	if (r == 0)
		*id = XXH3_64bits_digest(h);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(head);
	XXH3_freeState(h);
	return r;
}

/* ---- cache entries: folders of plain files ---- */

/* Its files removed, then itself. */
static void remove_entry(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char p[4400];

	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

/* Bytes its files take on disk. */
static uint64_t entry_bytes(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	struct stat st;
	char p[4400];
	uint64_t n = 0;

	while (d && (e = readdir(d))) {
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (e->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode))
			n += (uint64_t)st.st_blocks * 512;
	}
	if (d)
		closedir(d);
	return n;
}

/* The folder path an entry was made from (its ID_FILE's "source" line). */
static bool entry_source(const char *path, char *out, size_t len)
{
	char p[4500];
	unsigned char *buf = NULL;
	size_t n;
	const char *s;
	bool ok = false;

	snprintf(p, sizeof(p), "%s/" ID_FILE, path);
	if (util_read_whole_file(p, &buf, &n, 1 << 16) < 0)
		return false;
	if ((s = strstr((const char *)buf, "\nsource ")) != NULL) {
		s += 8;
		size_t k = strcspn(s, "\n");
		ok = k < len;
		if (ok)
			snprintf(out, len, "%.*s", (int)k, s);
	}
	free(buf);
	return ok;
}

struct entry {
	char name[256];
	time_t mtime;
	uint64_t bytes;
};

static int by_age(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* After KEEP (an entry of ROOT made from SOURCE) was built: leftovers of
 * builds whose process is gone removed, entries made from SOURCE before
 * removed, then the least recently used while ROOT holds more than max. */
static void prune(const char *root, const char *keep, const char *source, uint64_t max)
{
	DIR *d = opendir(root);
	struct dirent *e;
	struct entry *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = entry_bytes(keep);
	char p[4400], src[4200];

	while (d && (e = readdir(d))) {
		struct stat st;
		int pid;

		snprintf(p, sizeof(p), "%s/%s", root, e->d_name);
		if (!strcmp(p, keep) || lstat(p, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (sscanf(e->d_name, ".build-%*16[0-9a-f]-%d", &pid) == 1) {
			if (kill(pid, 0) < 0 && errno == ESRCH)
				remove_entry(p);
			continue;
		}
		if (strlen(e->d_name) != 16 || e->d_name[0] == '.')
			continue;
		if (entry_source(p, src, sizeof(src)) && !strcmp(src, source)) {
			remove_entry(p);
			continue;
		}
		if (n == cap) {
			struct entry *nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		snprintf(v[n].name, sizeof(v[n].name), "%s", e->d_name);
		v[n].mtime = st.st_mtime;
		v[n].bytes = entry_bytes(p);
		total += v[n++].bytes;
	}
	if (d)
		closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), by_age);
	for (size_t i = 0; i < n && total > max; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, v[i].name);
		remove_entry(p);
		total -= v[i].bytes;
	}
	free(v);
}

static int cache_unwritable(const char *root, int r, struct im_err *err)
{
	return im_errf(err, IM_EXIT_IO, r,
		       "cannot write the index cache %s: %s (a Clonezilla folder is served through "
		       "an index kept there; choose another place with --cache-dir or "
		       "IMAGER_CZINDEX_DIR)", root, strerror(-r));
}

/* Build the entry for SOURCE (identity hex) as ROOT/.build-HEX-PID, then
 * rename it to FINAL. */
static int build(const char *root, const char *source, const char *hex, const char *final,
		 const struct im_czindex_opts *o, struct im_err *err)
{
	char tmp[4200], idf[4400], text[4400];
	int r, n;

	snprintf(tmp, sizeof(tmp), "%s/.build-%s-%d", root, hex, (int)getpid());
	remove_entry(tmp);
	if (mkdir(tmp, 0755) < 0)
		return cache_unwritable(root, -errno, err);
	r = czx_build(source, tmp, IM_CZINDEX_LEVEL, &o->progress, err);
	if (r == 0) {
		n = snprintf(text, sizeof(text), ID_VERSION "\nsource %s\nidentity %s\n", source, hex);
		snprintf(idf, sizeof(idf), "%s/" ID_FILE, tmp);
		r = util_write_file_atomic(idf, text, (size_t)n);
		if (r < 0)
			r = cache_unwritable(root, r, err);
	}
	if (r == 0 && rename(tmp, final) < 0) {
		/* (another build of the same folder finished first: its entry is kept) */
		if (errno != EEXIST && errno != ENOTEMPTY)
			r = cache_unwritable(root, -errno, err);
	}
	remove_entry(tmp);
	if (r == 0)
		util_fsync_dir(root);
	return r;
}

int im_czindex(const char *dir, const struct im_czindex_opts *o, struct im_czindex_report *rep,
	       struct im_err *err)
{
	static const struct im_czindex_opts defaults;
	const char *root;
	char hex[17], mf[4400], *abs;
	uint64_t id = 0, t0 = (uint64_t)util_mono_ms();
	struct stat st;
	int r;

	o = o ? o : &defaults;
	root = o->cache_dir && o->cache_dir[0] ? o->cache_dir : IM_CZINDEX_DIR_DEFAULT;
	memset(rep, 0, sizeof(*rep));
	abs = realpath(dir, NULL);
	if (!abs)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", dir, strerror(errno));
	r = identity(abs, &id, err);
	img_hash_hex(id, hex);
	if (r == 0 && snprintf(rep->path, sizeof(rep->path), "%s/%s", root, hex) >=
			      (int)sizeof(rep->path))
		r = im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: path too long", root);
	snprintf(mf, sizeof(mf), "%s/" ID_FILE, rep->path);
	if (r == 0 && stat(mf, &st) == 0) {
		utimensat(AT_FDCWD, rep->path, NULL, 0);   /* (recently used) */
	} else if (r == 0) {
		r = util_mkdir_p(root);
		if (r < 0)
			r = cache_unwritable(root, r, err);
		if (r == 0)
			r = build(root, abs, hex, rep->path, o, err);
		if (r == 0)
			prune(root, rep->path, abs, o->max_bytes ? o->max_bytes : IM_CZINDEX_MAX_DEFAULT);
		rep->built = r == 0;
	}
	rep->ms = (uint64_t)util_mono_ms() - t0;
	rep->bytes = r == 0 ? entry_bytes(rep->path) : 0;
	free(abs);
	return r;
}

int im_reader_open(const char *dir, const struct img_reader_opts *ro,
		   const struct im_czindex_opts *co, struct img_reader **out,
		   struct im_czindex_report *rep, struct im_err *err)
{
	struct im_czindex_report mine;
	int r;

	rep = rep ? rep : &mine;
	memset(rep, 0, sizeof(*rep));
	if (!img_is_clonezilla(dir))
		return img_reader_open(dir, ro, out, err);
	r = im_czindex(dir, co, rep, err);
	if (r < 0)
		return r;
	r = img_reader_open(rep->path, ro, out, err);
	if (r < 0 && !rep->built && err->exit_class == IM_EXIT_DAMAGED) {
		/* A damaged entry: made again once. */
		remove_entry(rep->path);
		memset(err, 0, sizeof(*err));
		r = im_czindex(dir, co, rep, err);
		if (r == 0)
			r = img_reader_open(rep->path, ro, out, err);
	}
	return r;
}

int im_serve_folder(const char *dir, const struct im_czindex_opts *co, char *out, size_t len,
		    struct im_err *err)
{
	struct im_czindex_opts dflt = { .cache_dir = getenv("IMAGER_CZINDEX_DIR") };
	struct im_czindex_report rep;

	if (!img_is_clonezilla(dir)) {
		RETURN_IF(str_copy(out, len, dir) < 0, err, IM_EXIT_USAGE, -ENAMETOOLONG,
			  "%s: the path is too long", dir);
		return 0;
	}
	if (!co) {
		if (dflt.cache_dir && !*dflt.cache_dir)
			dflt.cache_dir = NULL;
		co = &dflt;
	}
	FORWARD_ERR(im_czindex(dir, co, &rep, err));
	RETURN_IF(str_copy(out, len, rep.path) < 0, err, IM_EXIT_USAGE, -ENAMETOOLONG,
		  "%s: the path is too long", rep.path);
	return 0;
}
