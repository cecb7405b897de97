/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The target host's storage pools: what libvirt says about them, what the
 * filesystem under them is, how many fsyncs a second they sustain, and which
 * one suits a new disk best.  See include/imager/pools.h for the rules.
 *
 * libvirt's pool XML is read as untrusted text (a remote daemon writes it):
 * every value is copied bounded, with control characters replaced.
 */
#include "imager/pools.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>

#include "tool.h"

#define MiB (1024ull * 1024)

/* ---- small helpers ---- */

/* Bounded copy of untrusted text; control characters become '?'. */
static void copy_clean(char *dst, size_t len, const char *src)
{
	size_t i;

	if (!len)
		return;
	for (i = 0; src && src[i] && i + 1 < len; i++)
		dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? '?' : src[i];
	dst[i] = '\0';
}

static void add_warning(struct im_pool *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void add_warning(struct im_pool *p, const char *fmt, ...)
{
	va_list ap;

	/* Full: the warnings are added most important first. */
	va_start(ap, fmt);
	util_slot_vprintf(p->warnings[0], sizeof(p->warnings) / sizeof(p->warnings[0]),
			  sizeof(p->warnings[0]), fmt, ap);
	va_end(ap);
}

static bool is_type(const struct im_pool *p, const char *t) { return !strcmp(p->type, t); }

bool pools_has_files(const struct im_pool *p)
{
	return is_type(p, "dir") || is_type(p, "fs") || is_type(p, "netfs");
}

static double now_monotonic(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the filesystem under a path ---- */

/* mountinfo writes space, tab, newline and backslash as \ooo. */
static void unescape_mount(char *s)
{
	char *w = s;

	for (char *r = s; *r; ) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

/* Is mount point mnt the path itself or one of its parent folders? */
static bool mount_covers(const char *mnt, const char *path)
{
	size_t n = strlen(mnt);

	if (!strcmp(mnt, "/"))
		return true;
	return !strncmp(mnt, path, n) && (path[n] == '\0' || path[n] == '/');
}

/*
 * The filesystem type and source of the mount holding path, from
 * /proc/self/mountinfo: the longest mount point covering the path, the last
 * one listed when several are stacked on the same point.  0 or -errno.
 */
static int mount_of(const char *path, char *fstype, size_t flen, char *source, size_t slen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0, best = 0;
	bool found = false;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *tok, *mnt = NULL, *type = NULL, *src = NULL;
		bool dash = false;
		int field = 0;

		for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save), field++) {
			if (field == 4)
				mnt = tok;
			else if (!dash && field > 5 && !strcmp(tok, "-"))
				dash = true;
			else if (dash && !type)
				type = tok;
			else if (dash && !src) {
				src = tok;
				break;
			}
		}
		if (!mnt || !type || !src)
			continue;
		unescape_mount(mnt);
		if (!mount_covers(mnt, path) || strlen(mnt) < best)
			continue;
		best = strlen(mnt);
		found = true;
		unescape_mount(src);
		copy_clean(fstype, flen, type);
		copy_clean(source, slen, src);
	}
	free(line);
	fclose(f);
	return found ? 0 : -ENOENT;
}

/* When mountinfo cannot be read: the filesystem's magic number. */
static const char *fstype_from_magic(const char *path)
{
	static const struct { unsigned long magic; const char *name; } magics[] = {
		{ 0xEF53, "ext4" },            /* ext2, ext3 and ext4 share it */
		{ 0x58465342, "xfs" },
		{ 0x9123683E, "btrfs" },
		{ 0x2FC12FC1, "zfs" },
		{ 0x01021994, "tmpfs" },
		{ 0x794C7630, "overlay" },
		{ 0x6969, "nfs" },
		{ 0xFE534D42, "smb3" },
		{ 0xF2F52010, "f2fs" },
	};
	struct statfs sf;

	if (statfs(path, &sf) < 0)
		return "";
	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++)
		if ((unsigned long)sf.f_type == magics[i].magic)
			return magics[i].name;
	return "";
}

/*
 * Whether files in dir can be opened with O_DIRECT (what cache='none'
 * needs): 1 yes, 0 no, -errno when it could not be tried.  A nameless
 * O_TMPFILE reopened through /proc leaves nothing behind; where O_TMPFILE is
 * not supported a named file is created and removed.
 */
static int odirect_works(const char *dir)
{
	char name[1100];
	int fd, fd2, r;

	fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd >= 0) {
		snprintf(name, sizeof(name), "/proc/self/fd/%d", fd);
		fd2 = open(name, O_RDONLY | O_DIRECT | O_CLOEXEC);
		r = fd2 >= 0 ? 1 : errno == EINVAL ? 0 : -errno;
		if (fd2 >= 0)
			close(fd2);
		close(fd);
		if (r >= 0)
			return r;
	}
	snprintf(name, sizeof(name), "%s/.imager-odirect-probe.%ld", dir, (long)getpid());
	fd = open(name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	close(fd);
	fd2 = open(name, O_RDONLY | O_DIRECT | O_CLOEXEC);
	r = fd2 >= 0 ? 1 : errno == EINVAL ? 0 : -errno;
	if (fd2 >= 0)
		close(fd2);
	unlink(name);
	return r;
}

/* ---- ZFS ---- */

/* Skip spaces and tabs; the column reached (tabs every 8). */
static const char *skip_blank(const char *s, const char *end, size_t *col)
{
	for (; s < end && (*s == ' ' || *s == '\t' || *s == '\r'); s++)
		*col = *s == '\t' ? (*col / 8 + 1) * 8 : *col + 1;
	return s;
}

static bool token_is(const char *tok, size_t len, const char *word)
{
	return len == strlen(word) && !memcmp(tok, word, len);
}

int pools_zfs_has_log(const char *text)
{
	bool seen_pool = false, in_config = false, table = false, in_logs = false;
	size_t logs_col = 0;
	const char *s = text;

	if (!text)
		return -1;
	while (*s) {
		const char *end = strchr(s, '\n'), *tok, *t;
		size_t col = 0, len, ntok = 0;

		if (!end)
			end = s + strlen(s);
		tok = skip_blank(s, end, &col);
		for (t = tok; t < end && *t != ' ' && *t != '\t' && *t != '\r'; t++)
			;
		len = (size_t)(t - tok);
		/* Count the tokens: a section heading stands alone on its line. */
		for (const char *u = tok; u < end; ) {
			size_t c2 = 0;
			while (u < end && *u != ' ' && *u != '\t' && *u != '\r')
				u++;
			ntok++;
			u = skip_blank(u, end, &c2);
		}
		s = *end ? end + 1 : end;
		if (!len)
			continue;
		if (token_is(tok, len, "pool:")) {
			if (seen_pool)
				break;        /* the next pool's status */
			seen_pool = true;
		} else if (!seen_pool) {
			continue;
		} else if (token_is(tok, len, "config:")) {
			in_config = true;
		} else if (!in_config) {
			continue;
		} else if (token_is(tok, len, "errors:")) {
			break;
		} else if (!table) {
			table = token_is(tok, len, "NAME");
		} else if (ntok == 1) {
			/* "logs", "cache", "spares", "special", "dedup": the
			 * vdev classes after the pool's own vdevs.  A vdev
			 * line always has a state column after its name. */
			in_logs = token_is(tok, len, "logs");
			logs_col = col;
		} else if (in_logs && col > logs_col) {
			return 1;
		} else {
			in_logs = false;
		}
	}
	if (!seen_pool || !in_config || !table)
		return -1;
	return 0;
}

/* The zpool holding a dataset: "tank/vm/disks" -> "tank".  Pool names start
 * with a letter, which also keeps a hostile name from passing for an
 * option of zpool. */
static void zpool_of(const char *dataset, char *out, size_t len)
{
	size_t n = strcspn(dataset, "/@");

	out[0] = '\0';
	if (!((dataset[0] >= 'a' && dataset[0] <= 'z') || (dataset[0] >= 'A' && dataset[0] <= 'Z')))
		return;
	if (n >= len)
		return;
	memcpy(out, dataset, n);
	out[n] = '\0';
}

static void zfs_facts(struct im_pool *p, bool host_local)
{
	p->zfs_log = -1;
	p->arc_max = 0;
	if (!host_local || !p->zpool[0])
		return;
	{
		const char *argv[] = { "zpool", "status", "-P", p->zpool, NULL };
		char *out = malloc(64 * 1024);
		if (out) {
			if (tool_run(argv, out, 64 * 1024) == 0)
				p->zfs_log = pools_zfs_has_log(out);
			free(out);
		}
	}
	{
		FILE *f = fopen("/sys/module/zfs/parameters/zfs_arc_max", "re");
		unsigned long long v;
		if (f) {
			if (fscanf(f, "%llu", &v) == 1) {
				p->arc_max = v;
				p->arc_known = true;
			}
			fclose(f);
		}
	}
}

/* ---- the pool XML ---- */

static void xpath_string(xmlXPathContextPtr ctx, const char *expr, char *out, size_t len)
{
	xmlXPathObjectPtr o = xmlXPathEvalExpression(BAD_CAST expr, ctx);

	out[0] = '\0';
	if (o && o->type == XPATH_STRING && o->stringval)
		copy_clean(out, len, (const char *)o->stringval);
	xmlXPathFreeObject(o);
}

static int parse_pool_xml(const char *xml, struct im_pool *p)
{
	xmlDocPtr doc;
	xmlXPathContextPtr ctx;
	char host[256], dir[512];

	if (strlen(xml) > 4 * MiB)
		return -EFBIG;
	doc = xmlReadMemory(xml, (int)strlen(xml), "pool.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc)
		return -EINVAL;
	ctx = xmlXPathNewContext(doc);
	if (!ctx) {
		xmlFreeDoc(doc);
		return -ENOMEM;
	}
	xpath_string(ctx, "string(/pool/@type)", p->type, sizeof(p->type));
	xpath_string(ctx, "string(/pool/target/path)", p->path, sizeof(p->path));
	xpath_string(ctx, "string(/pool/source/name)", p->source, sizeof(p->source));
	if (!p->source[0])
		xpath_string(ctx, "string(/pool/source/device/@path)", p->source, sizeof(p->source));
	if (!p->source[0]) {
		xpath_string(ctx, "string(/pool/source/host/@name)", host, sizeof(host));
		xpath_string(ctx, "string(/pool/source/dir/@path)", dir, sizeof(dir));
		if (host[0] || dir[0])
			snprintf(p->source, sizeof(p->source), "%s%s%s", host, host[0] ? ":" : "", dir);
	}
	xmlXPathFreeContext(ctx);
	xmlFreeDoc(doc);
	return 0;
}

/* ---- recommendation and warnings ---- */

static void recommend(struct im_pool *p)
{
	const char *fmt = "qcow2", *pre = "metadata", *why;
	char buf[sizeof(p->reason)];

	if (p->zfs || !strcmp(p->fstype, "btrfs")) {
		fmt = "raw";
		pre = "off";
		snprintf(buf, sizeof(buf),
			 "copy-on-write storage (%s): it allocates on write anyway, and a second "
			 "copy-on-write layer (qcow2) only costs", p->zfs ? "zfs" : "btrfs");
		why = buf;
	} else if (!pools_has_files(p)) {
		fmt = "raw";
		pre = "off";
		why = "block storage: the volume is the space, there is no preallocation to choose";
	} else {
		why = "files: qcow2 keeps snapshots possible and its cluster tables are written once; "
		      "raw with falloc is the fastest when you prefer raw";
	}
	snprintf(p->format, sizeof(p->format), "%s", fmt);
	snprintf(p->preallocation, sizeof(p->preallocation), "%s", pre);
	snprintf(p->reason, sizeof(p->reason), "%s", why);
}


/* In order of importance: add_warning() drops what does not fit. */
static void warn(struct im_pool *p)
{
	if (p->zfs && p->zfs_log == 0)
		add_warning(p, "ZFS pool %s has no log vdev (SLOG): synchronous writes go to the main "
			    "vdevs; fsync-heavy guests will be slow - add a fast SSD as log vdev "
			    "(zpool add %s log DEVICE)", p->zpool, p->zpool);
	if (p->capacity && p->available < p->capacity / 10) {
		char a[32], c[32];
		util_human_size(p->available, a, sizeof(a));
		util_human_size(p->capacity, c, sizeof(c));
		add_warning(p, "pool nearly full: %s free of %s (less than 10%%)", a, c);
	}
	if (p->local && (!strcmp(p->fstype, "tmpfs") || !strcmp(p->fstype, "ramfs")))
		add_warning(p, "%s is on %s: its disks live in memory and are lost at reboot",
			    p->path, p->fstype);
	if (p->local && pools_has_files(p) && odirect_works(p->path) == 0)
		add_warning(p, "%s (%s) does not support O_DIRECT: disks with cache='none' cannot "
			    "run there; use cache='writeback' or another pool", p->path,
			    p->fstype[0] ? p->fstype : "this filesystem");
	if (p->zfs && p->arc_known && p->arc_max == 0)
		add_warning(p, "ZFS ARC has no limit (zfs_arc_max 0): it may take a large share of "
			    "the host's memory from the guests; set zfs_arc_max (modprobe option)");
}

/* ---- listing ---- */

static int describe(virStoragePoolPtr vp, bool host_local, struct im_pool *p, struct im_err *err)
{
	virStoragePoolInfo info;
	const char *name = virStoragePoolGetName(vp);
	char *xml;
	int r;

	memset(p, 0, sizeof(*p));
	p->fsyncs = -1;
	p->zfs_log = -1;
	copy_clean(p->name, sizeof(p->name), name ? name : "");
	/* A pool that cannot be refreshed (its folder went away) is still
	 * listed, with what libvirt last knew. */
	virStoragePoolRefresh(vp, 0);
	if (virStoragePoolGetInfo(vp, &info) < 0)
		return im_errf(err, IM_EXIT_TARGET, -EIO, "pool %s: %s", p->name, host_last_error());
	p->capacity = info.capacity;
	p->allocation = info.allocation;
	p->available = info.available;
	xml = virStoragePoolGetXMLDesc(vp, 0);
	if (!xml)
		return im_errf(err, IM_EXIT_TARGET, -EIO, "pool %s: %s", p->name, host_last_error());
	r = parse_pool_xml(xml, p);
	free(xml);
	if (r < 0)
		return im_errf(err, IM_EXIT_TARGET, r, "pool %s: libvirt's XML description cannot be read",
			       p->name);
	p->local = host_local && p->path[0] && access(p->path, F_OK) == 0;
	if (!host_local)
		snprintf(p->probe_note, sizeof(p->probe_note), "not measured (remote host)");
	else if (!p->local)
		snprintf(p->probe_note, sizeof(p->probe_note), "not measured (%s)",
			 p->path[0] ? "the path is not on this machine" : "no path");
	if (p->local && pools_has_files(p)) {
		char real[4096], source[256] = "";
		const char *at = realpath(p->path, real) ? real : p->path;
		if (mount_of(at, p->fstype, sizeof(p->fstype), source, sizeof(source)) < 0)
			copy_clean(p->fstype, sizeof(p->fstype), fstype_from_magic(at));
		if (!strcmp(p->fstype, "zfs")) {
			p->zfs = true;
			zpool_of(source, p->zpool, sizeof(p->zpool));
		}
	}
	if (is_type(p, "zfs")) {
		p->zfs = true;
		zpool_of(p->source, p->zpool, sizeof(p->zpool));
	}
	if (p->zfs)
		zfs_facts(p, host_local);
	recommend(p);
	warn(p);
	return 0;
}

int pools_list(virConnectPtr conn, struct im_pool **out, size_t *n, struct im_err *err)
{
	virStoragePoolPtr *vps = NULL;
	struct im_pool *pools = NULL;
	bool local = host_is_local(conn);
	int count, r = 0;

	*out = NULL;
	*n = 0;
	xmlInitParser();
	count = virConnectListAllStoragePools(conn, &vps, VIR_CONNECT_LIST_STORAGE_POOLS_ACTIVE);
	if (count < 0) {
		virErrorPtr e = virGetLastError();
		return im_errf(err, IM_EXIT_TARGET, -EIO, "listing storage pools: %s",
			       e && e->message ? e->message : "libvirt gave no reason");
	}
	if (count > 0 && !(pools = calloc((size_t)count, sizeof(*pools))))
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	for (int i = 0; i < count; i++) {
		if (r == 0)
			r = describe(vps[i], local, &pools[i], err);
		virStoragePoolFree(vps[i]);
	}
	free(vps);
	if (r < 0) {
		free(pools);
		return r;
	}
	*out = pools;
	*n = (size_t)count;
	return 0;
}

/* ---- measuring ---- */

static int probe_pool(struct im_pool *p, double seconds, struct im_err *err)
{
	static const char fill[4001] = { [0 ... 4000] = 'x' };
	char file[1100];
	double start, elapsed = 0;
	unsigned long count = 0;
	int fd, r = 0;

	p->fsyncs = -1;
	p->probe_seconds = 0;
	if (!p->local) {
		if (!p->probe_note[0])    /* pools_list() said why */
			snprintf(p->probe_note, sizeof(p->probe_note), "not measured (not local)");
		return 0;
	}
	p->probe_note[0] = '\0';
	if (!pools_has_files(p)) {
		snprintf(p->probe_note, sizeof(p->probe_note), "not measured (%s pool: not files)",
			 p->type);
		return 0;
	}
	if (!(seconds > 0))
		seconds = 3;
	if (snprintf(file, sizeof(file), "%s/.imager-fsync-probe.%ld", p->path, (long)getpid()) >=
	    (int)sizeof(file))
		return im_errf(err, IM_EXIT_TARGET, -ENAMETOOLONG, "%s: path too long", p->path);
	start = now_monotonic();
	do {
		fd = open(file, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
		if (fd < 0) {
			r = -errno;
			break;
		}
		if (write(fd, fill, sizeof(fill)) != (ssize_t)sizeof(fill)) {
			r = errno ? -errno : -EIO;
			close(fd);
			break;
		}
		if (fsync(fd) < 0) {
			r = -errno;
			close(fd);
			break;
		}
		if (close(fd) < 0) {
			r = -errno;
			break;
		}
		count++;
		elapsed = now_monotonic() - start;
	} while (elapsed < seconds);
	unlink(file);
	if (r < 0) {
		snprintf(p->probe_note, sizeof(p->probe_note), "not measured (%s)", strerror(-r));
		return im_errf(err, IM_EXIT_TARGET, r, "measuring fsyncs in %s: %s", p->path,
			       strerror(-r));
	}
	p->probe_seconds = elapsed;
	p->fsyncs = elapsed > 0 ? (double)count / elapsed : 0;
	return 0;
}

int pools_probe(struct im_pool *p, double seconds, struct im_err *err)
{
	int r = probe_pool(p, seconds, err);

	p->probe_error[0] = '\0';
	if (r < 0)
		snprintf(p->probe_error, sizeof(p->probe_error), "%s", err->msg);
	return r;
}

/* ---- ranking ---- */

/* Room for a disk of need bytes, with a margin: 2% of the pool, at least
 * 256 MiB (metadata, the guest's growth, the filesystem's own reserve). */
static bool has_room(const struct im_pool *p, uint64_t need)
{
	uint64_t margin = p->capacity / 50;

	if (margin < 256 * MiB)
		margin = 256 * MiB;
	if (need > UINT64_MAX - margin)
		return false;
	return p->available >= need + margin;
}

/* 0: measured; 1: unmeasured; 2: a ZFS pool known to have no log vdev,
 * whatever it measured (its fsyncs go to the main vdevs). */
static int fsync_tier(const struct im_pool *p)
{
	if (p->zfs && p->zfs_log == 0)
		return 2;
	return p->fsyncs >= 0 ? 0 : 1;
}

static int type_order(const struct im_pool *p)
{
	static const char *const order[] = { "logical", "zfs", "fs", "dir", "netfs" };

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (is_type(p, order[i]))
			return (int)i;
	return (int)(sizeof(order) / sizeof(order[0]));
}

/* Available space within 1% of the larger is the same room: pools on one
 * filesystem report the same space, give or take what was written between
 * libvirt's two reads, and that must not decide between them (the name
 * does, the same on every run). */
static bool same_room(uint64_t a, uint64_t b)
{
	uint64_t hi = a > b ? a : b, lo = a > b ? b : a;

	return hi - lo <= hi / 100;
}

static int rank_cmp(const void *a, const void *b)
{
	const struct im_pool *x = a, *y = b;
	int tx = fsync_tier(x), ty = fsync_tier(y);

	if (x->fits != y->fits)
		return x->fits ? -1 : 1;
	if (tx != ty)
		return tx < ty ? -1 : 1;
	if (tx == 0 && x->fsyncs != y->fsyncs)
		return x->fsyncs > y->fsyncs ? -1 : 1;
	if (type_order(x) != type_order(y))
		return type_order(x) < type_order(y) ? -1 : 1;
	if (!same_room(x->available, y->available))
		return x->available > y->available ? -1 : 1;
	return strcmp(x->name, y->name);
}

void pools_rank(struct im_pool *p, size_t n, uint64_t need)
{
	for (size_t i = 0; i < n; i++)
		p[i].fits = has_room(&p[i], need);
	if (n > 1)
		qsort(p, n, sizeof(*p), rank_cmp);
	for (size_t i = 0; i < n; i++)
		p[i].rank = (int)i + 1;
}

struct im_pool *pools_find(struct im_pool *p, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(p[i].name, name))
			return &p[i];
	return NULL;
}

int pools_survey(const struct pools_survey_opts *o, struct pools_survey *out, struct im_err *err)
{
	virConnectPtr conn = NULL;
	char *uri;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = host_open(o->uri, NULL, &conn, err)) < 0)
		return r;
	out->local = host_is_local(conn);
	uri = virConnectGetURI(conn);
	snprintf(out->uri, sizeof(out->uri), "%s", uri ? uri : o->uri ? o->uri : "(default)");
	free(uri);
	r = pools_list(conn, &out->pools, &out->n, err);
	virConnectClose(conn);
	if (r < 0)
		return r;
	for (size_t i = 0; o->probe && i < out->n; i++) {
		struct im_err perr = { 0 };

		if (o->interrupted && *o->interrupted)
			return im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
		if (o->on_probe)
			o->on_probe(o->opaque, out->pools[i].name);
		pools_probe(&out->pools[i], o->seconds, &perr);   /* its error stays in probe_error */
	}
	if (o->interrupted && *o->interrupted)
		return im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
	pools_rank(out->pools, out->n, o->need);
	return 0;
}

void pools_survey_free(struct pools_survey *s)
{
	free(s->pools);
	s->pools = NULL;
	s->n = 0;
}
