/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fixtures the unit tests share, on top of unit.h: the filesystem plugin
 * tests (images made by the real mkfs, read back through the plugin and
 * compared with the real tools) and the others that run commands or touch
 * files.  Everything is static inline: a test takes what it uses.  Helpers
 * that say "checked" make a CHECK() of their own, so a failure counts in the
 * test that called them.
 *
 * Commands
 *   sh(fmt, ...)                 run a shell command: its exit status (-1 when
 *                                it did not exit)
 *   sh_out(out, n, fmt, ...)     the same, keeping what it printed (stdout and
 *                                stderr) in out
 *   have_tools("a b")            every program named is on PATH
 *   need_tools("a b", what)      the same, else "  needs WHAT" on stderr: for
 *                                tools `make deps` installs, whose absence
 *                                must fail, not skip
 *   have_or_skip(&c, "a b", msg) have_tools, asked once (c starts at -1); msg
 *                                (a "SKIP: ..." line) printed at every call
 *                                while they are missing
 *   root_and(&c, cmd, msg)       running as root and cmd succeeds, asked once;
 *                                msg printed that once when not
 *   lines_open/_next/_close      a command's output, line by line (checked)
 *   tool_fields(fmt, path, f, n) numbers a tool prints ("Block count: %llu");
 *                                checked that all were found
 *
 * Files
 *   make_tmpdir, remove_tree     a temporary folder; rm -rf
 *   setup_tmpdir, remove_tmpdir  the tools a test needs and a temporary
 *                                folder (checked); the folder removed
 *   temp_fd, temp_file           mkstemp (checked); and sized, sparse
 *   mkfs_on, mkfs_image          run "MKFS ARGS PATH" (checked), on a new
 *                                temporary file for mkfs_image
 *   copy_file(from, to)          cp --sparse=always
 *   copy_patched                 a copy with one number changed (checked)
 *   say_case                     which case it was, when its checks failed
 *   read_at, write_at            pread/pwrite of a whole buffer (checked)
 *   read_le/_be, patch_le/_be    a number of 1 to 8 bytes in a file
 *   get_le/_be, put_le/_be       the same in memory
 *   crc32c(crc, p, n)            CRC-32C (Castagnoli), without the final xor
 *   file_size(path)              its size, 0 when it has none
 *   write_random_file            pseudo-random bytes (xorshift32 of seed)
 *   write_pattern_file/_in       bytes of a multiplicative pattern of seed
 *   make_sample_tree             a folder of three such files, one in sub/
 *
 * Plugins
 *   examine_path(p, path, ...)   fs_examine_with(p) over the whole file, or
 *                                the registry's fs_examine() when p is NULL
 *   examine_path_size            the same over the first size bytes
 *   examine_ok                   unforced, checked to succeed (else the result
 *                                and message are printed after `what`)
 *   check_count                  the plugin's map against a tool's count
 *                                (struct tool_count) and its list of free
 *                                blocks (struct free_list), with no warning
 *   check_mkfs_kind, _cases      images made with given options and checked
 *                                (struct mkfs_kind: the tools, mkfs, check)
 *   check_filled                 the same, filled, and holding enough
 *   examine_timed                examined, timed, and said on stdout
 *   fuzz_rounds, fuzz_byte       $TEST_X_FUZZ rounds; a byte to damage with
 *   count_fuzzed, examine_fuzzed a fuzzed image's result checked and counted
 *   expect_plugin(path, p, type) the registry picks plugin p (and type)
 *   expect_registry(path, r, p)  the registry's result is r (and p's map)
 *   struct field_case            a field to damage and the result it must get
 *   examine_patched              one field of a metadata block (struct
 *                                block_at: where, how long, byte order, its
 *                                checksum) changed, examined, put back
 *   expect_unclean               a changed field refused as unclean, and
 *                                taken with a warning when forced
 *   expect_result                a case's result checked, said when wrong
 *   copy_used                    a copy holding only the blocks the map marks
 */
#ifndef IMAGER_UNIT_FS_H
#define IMAGER_UNIT_FS_H

#include "unit.h"
#include "imager/fs.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- commands ---- */

static inline int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static inline int sh_out(char *out, size_t outlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline int sh_out(char *out, size_t outlen, const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	FILE *f;
	size_t n;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(out, 1, outlen - 1, f);
	out[n] = '\0';
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static inline bool have_tools(const char *tools)
{
	for (const char *p = tools + strspn(tools, " "); *p; p += strspn(p, " ")) {
		size_t n = strcspn(p, " ");

		if (sh("command -v %.*s >/dev/null 2>&1", (int)n, p) != 0)
			return false;
		p += n;
	}
	return true;
}

static inline bool need_tools(const char *tools, const char *what)
{
	if (have_tools(tools))
		return true;
	fprintf(stderr, "  needs %s\n", what);
	return false;
}

static inline bool have_or_skip(int *have, const char *tools, const char *skip)
{
	if (*have < 0)
		*have = have_tools(tools);
	if (!*have)
		unit_skip(skip);
	return *have;
}

static inline bool root_and(int *can, const char *cmd, const char *skip)
{
	if (*can < 0) {
		*can = geteuid() == 0 && sh("%s", cmd) == 0;
		if (!*can)
			unit_skip(skip);
	}
	return *can;
}

/* A command's output: while (lines_next(&l)) ... l.line ...; lines_close(&l). */
struct cmd_lines {
	FILE *f;
	char *line;
	size_t cap;
};

static inline bool lines_open(struct cmd_lines *l, const char *fmt, const char *path)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), fmt, path);
	l->line = NULL;
	l->cap = 0;
	l->f = popen(cmd, "r");
	CHECK(l->f != NULL);
	return l->f != NULL;
}

static inline bool lines_next(struct cmd_lines *l)
{
	return l->f && getline(&l->line, &l->cap, l->f) > 0;
}

static inline void lines_close(struct cmd_lines *l)
{
	free(l->line);
	l->line = NULL;
	if (l->f)
		pclose(l->f);
	l->f = NULL;
}

/* A number a tool prints: a sscanf format with one %llu, and where it goes. */
struct tool_field {
	const char *format;
	uint64_t *value;
};

/* The command fmt (with path for its %s), and from each line it prints the
 * first field of f[] whose format matches (a later line overwrites an
 * earlier one).  Checked that every field was found. */
static inline bool tool_fields(const char *fmt, const char *path, const struct tool_field *f,
			       size_t n)
{
	struct cmd_lines l;
	unsigned long long all = (1ull << n) - 1, found = 0;

	if (lines_open(&l, fmt, path))
		while (lines_next(&l))
			for (size_t i = 0; i < n; i++) {
				unsigned long long v;

				if (sscanf(l.line, f[i].format, &v) == 1) {
					*f[i].value = v;
					found |= 1ull << i;
					break;
				}
			}
	lines_close(&l);
	CHECK_EQ_U(found, all);
	return found == all;
}

/* ---- files ---- */

/* A new folder from the mkdtemp template tmpl (dir: len bytes); on failure
 * dir is "". */
static inline bool make_tmpdir(char *dir, size_t len, const char *tmpl)
{
	snprintf(dir, len, "%s", tmpl);
	if (!mkdtemp(dir)) {
		dir[0] = '\0';
		return false;
	}
	return true;
}

static inline bool remove_tree(const char *dir)
{
	return sh("rm -rf '%s'", dir) == 0;
}

/* need_tools(tools, what), then make_tmpdir(dir, len, tmpl); checked. */
static inline bool setup_tmpdir(char *dir, size_t len, const char *tools, const char *what,
				const char *tmpl)
{
	bool ok = need_tools(tools, what) && make_tmpdir(dir, len, tmpl);

	if (!ok)
		CHECK(!"setup: tools and a temporary directory");
	return ok;
}

/* The folder of setup_tmpdir() removed, if there is one; dir is "" after. */
static inline void remove_tmpdir(char *dir)
{
	if (dir[0])
		remove_tree(dir);
	dir[0] = '\0';
}

/* mkstemp on a copy of tmpl in path (checked): the open file, or -1. */
static inline int temp_fd(char *path, const char *tmpl)
{
	int fd;

	strcpy(path, tmpl);
	fd = mkstemp(path);
	CHECK(fd >= 0);
	return fd;
}

/* A new temporary file of size bytes, sparse (checked). */
static inline bool temp_file(char *path, const char *tmpl, uint64_t size)
{
	int fd = temp_fd(path, tmpl);

	if (fd < 0)
		return false;
	CHECK(ftruncate(fd, (off_t)size) == 0);
	close(fd);
	return true;
}

/* `MKFS ARGS PATH`, quiet.  When it fails: the command on stderr, a failed
 * check, and the image removed. */
static inline bool mkfs_on(const char *mkfs, const char *args, const char *path)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "%s %s %s >/dev/null 2>&1", mkfs, args, path);
	if (system(cmd) != 0) {
		fprintf(stderr, "  failed: %s\n", cmd);
		CHECK(!"mkfs failed");
		unlink(path);
		return false;
	}
	return true;
}

/* A temporary file (tmpl) of size bytes holding `MKFS ARGS`. */
static inline bool mkfs_image(char *path, const char *tmpl, uint64_t size, const char *mkfs,
			      const char *args)
{
	return temp_file(path, tmpl, size) && mkfs_on(mkfs, args, path);
}

static inline bool copy_file(const char *from, const char *to)
{
	return sh("cp --sparse=always %s %s", from, to) == 0;
}

static inline bool patch_le(const char *path, uint64_t off, size_t len, uint64_t v);

/* A copy of base in img with len little-endian bytes of v at off; checked. */
static inline void copy_patched(const char *base, const char *img, uint64_t off, size_t len,
				uint64_t v)
{
	CHECK(copy_file(base, img));
	CHECK(patch_le(img, off, len, v));
}

/* After a case's checks (begun when unit_failures was before): when one
 * failed, which case it was and its message. */
static inline void say_case(int before, const char *what, const struct im_err *err)
{
	if (unit_failures != before)
		fprintf(stderr, "  ^ case: %s (%s)\n", what, err->msg);
}

static inline bool read_at(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	bool ok = fd >= 0 && pread(fd, buf, len, (off_t)off) == (ssize_t)len;

	CHECK(ok);
	if (fd >= 0)
		close(fd);
	return ok;
}

static inline bool write_at(const char *path, uint64_t off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY);
	bool ok = fd >= 0 && pwrite(fd, buf, len, (off_t)off) == (ssize_t)len;

	if (fd >= 0 && close(fd) != 0)
		ok = false;
	CHECK(ok);
	return ok;
}

static inline uint64_t get_le(const unsigned char *p, unsigned width)
{
	uint64_t v = 0;

	for (unsigned i = width; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

static inline void put_le(unsigned char *p, uint64_t v, unsigned width)
{
	for (unsigned i = 0; i < width; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline uint64_t get_be(const unsigned char *p, unsigned width)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < width; i++)
		v = v << 8 | p[i];
	return v;
}

static inline void put_be(unsigned char *p, uint64_t v, unsigned width)
{
	for (unsigned i = width; i-- > 0; v >>= 8)
		p[i] = (unsigned char)v;
}

/* A number of len (1 to 8) bytes at off; UINT64_MAX when it cannot be read. */
static inline uint64_t read_le(const char *path, uint64_t off, size_t len)
{
	unsigned char b[8] = { 0 };

	return read_at(path, off, b, len) ? get_le(b, (unsigned)len) : UINT64_MAX;
}

static inline uint64_t read_be(const char *path, uint64_t off, size_t len)
{
	unsigned char b[8] = { 0 };

	return read_at(path, off, b, len) ? get_be(b, (unsigned)len) : UINT64_MAX;
}

static inline bool patch_le(const char *path, uint64_t off, size_t len, uint64_t v)
{
	unsigned char b[8];

	put_le(b, v, (unsigned)len);
	return write_at(path, off, b, len);
}

static inline bool patch_be(const char *path, uint64_t off, size_t len, uint64_t v)
{
	unsigned char b[8];

	put_be(b, v, (unsigned)len);
	return write_at(path, off, b, len);
}

/* CRC-32C, reflected; start with ~0 and invert the result for the usual one. */
static inline uint32_t crc32c(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
	}
	return crc;
}

static inline uint64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* len pseudo-random bytes (xorshift32 from seed), so old data never reads as
 * zeros and no sector passes a comparison by accident. */
static inline bool write_random_file(const char *path, size_t len, uint32_t seed)
{
	FILE *f = fopen(path, "wb");
	uint32_t x = seed | 1;
	unsigned char buf[4096];

	if (!f)
		return false;
	while (len) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);

		for (size_t i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			buf[i] = (unsigned char)x;
		}
		if (fwrite(buf, 1, n, f) != n)
			break;
		len -= n;
	}
	return fclose(f) == 0 && len == 0;
}

/* len bytes of ((i * 2654435761 + seed) >> 7), the same for the same seed. */
static inline bool write_pattern_file(const char *path, size_t len, unsigned seed)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return false;
	for (size_t i = 0; i < len; i++)
		fputc((int)((i * 2654435761u + seed) >> 7) & 0xFF, f);
	return fclose(f) == 0;
}

static inline bool write_pattern_in(const char *dir, const char *name, size_t len, unsigned seed)
{
	char path[4200];

	return path_join(path, sizeof(path), dir, name) == 0 && write_pattern_file(path, len, seed);
}

/* A new folder from the mkdtemp template tmpl (copied into dir) holding big
 * (5 MiB + 123 bytes), small (10) and sub/medium (300000) of
 * write_pattern_file(), checked; sub's path in sub (sublen bytes). */
static inline void make_sample_tree(char *dir, const char *tmpl, char *sub, size_t sublen)
{
	strcpy(dir, tmpl);
	CHECK(mkdtemp(dir) != NULL);
	CHECK(path_join(sub, sublen, dir, "sub") == 0);
	CHECK(mkdir(sub, 0755) == 0);
	CHECK(write_pattern_in(dir, "big", 5 * (1ull << 20) + 123, 1));
	CHECK(write_pattern_in(dir, "small", 10, 2));
	CHECK(write_pattern_in(sub, "medium", 300000, 3));
}

/* ---- plugins ---- */

/* The plugin's (or, plugin NULL, the registry's) view of the first size
 * bytes of path.  info and err are cleared first; the file must open. */
static inline int examine_path_size(const struct fs_plugin *plugin, const char *path,
				    uint64_t size, bool force, struct fs_info *info,
				    struct im_err *err)
{
	int fd = open(path, O_RDONLY), r;

	memset(info, 0, sizeof(*info));
	memset(err, 0, sizeof(*err));
	CHECK(fd >= 0);
	if (fd < 0)
		return -errno;
	if (plugin)
		r = fs_examine_with(plugin, fd, 0, size, force, info, err);
	else
		r = fs_examine(fd, 0, size, force, info, err);
	close(fd);
	return r;
}

static inline int examine_path(const struct fs_plugin *plugin, const char *path, bool force,
			       struct fs_info *info, struct im_err *err)
{
	return examine_path_size(plugin, path, file_size(path), force, info, err);
}

/* Unforced, and it must succeed: else `what`, the result and the message
 * on stderr. */
static inline bool examine_ok(const struct fs_plugin *plugin, const char *path, const char *what,
			      struct fs_info *info, struct im_err *err)
{
	int r = examine_path(plugin, path, false, info, err);

	if (r != 0)
		fprintf(stderr, "  %s: %d %s\n", what, r, err->msg);
	CHECK(r == 0);
	return r == 0;
}

/* What a filesystem's own tool counts: its block size, blocks, free ones. */
struct tool_count {
	uint64_t block_size, blocks, free;
};

/* A tool's list of free blocks: the command (its %s the image's path), and
 * a reader of one line of what it prints, which calls range() for every
 * free range the line names (acc is range's, ctx check_count()'s). */
typedef void (*free_range_fn)(void *acc, uint64_t first, uint64_t count);
struct free_list {
	const char *cmd;
	void (*line)(const char *line, const void *ctx, free_range_fn range, void *acc);
};

struct free_acc {
	const struct bitmap *used;
	uint64_t total, wrong;
};

static inline void free_acc_add(void *acc, uint64_t first, uint64_t count)
{
	struct free_acc *a = acc;

	for (uint64_t n = first; n < first + count; n++)
		a->wrong += bitmap_test(a->used, n);
	a->total += count;
}

/* Every range of the tool's list clear in used, and as many free blocks
 * listed as it counts (with the used count equal to blocks - free, the two
 * then agree block for block). */
static inline void check_free_list(const char *path, const struct free_list *list,
				   const void *ctx, const struct bitmap *used, uint64_t free)
{
	struct free_acc acc = { used, 0, 0 };
	struct cmd_lines l;

	if (lines_open(&l, list->cmd, path))
		while (lines_next(&l))
			list->line(l.line, ctx, free_acc_add, &acc);
	lines_close(&l);
	CHECK_EQ_U(acc.wrong, 0);
	CHECK_EQ_U(acc.total, free);
}

/* The plugin's map of path against the tool's count: the same geometry,
 * blocks - free used, every block of the tool's free list (when given)
 * clear, and no warning. */
static inline void check_count(const struct fs_plugin *plugin, const char *path, const char *what,
			       const struct tool_count *c, const struct free_list *list,
			       const void *ctx)
{
	struct fs_info info;
	struct im_err err;

	if (examine_ok(plugin, path, what, &info, &err)) {
		CHECK_EQ_U(info.block_size, c->block_size);
		CHECK_EQ_U(info.block_count, c->blocks);
		CHECK_EQ_U(info.used_blocks, c->blocks - c->free);
		if (list)
			check_free_list(path, list, ctx, &info.used, c->free);
		CHECK_STR(info.warning, "");
		if (info.used_blocks != c->blocks - c->free)
			fprintf(stderr, "  (%s)\n", what);
	}
	fs_info_free(&info);
}

/* How a test file makes and checks its filesystem: whether the tools are
 * there (saying SKIP when not), `mkfs ARGS` on a new image of size bytes
 * (path: 64 bytes), and the image checked against the tools. */
struct mkfs_kind {
	bool (*have)(void);
	bool (*make)(char *path, const char *args, uint64_t size);
	void (*check)(const char *path, const char *what);
};

/* One filesystem made with args, checked, removed. */
static inline void check_mkfs_kind(const struct mkfs_kind *k, const char *args, uint64_t size)
{
	char path[64];

	if (!k->have() || !k->make(path, args, size))
		return;
	k->check(path, args);
	unlink(path);
}

/* mkfs options and an image size. */
struct mkfs_case {
	const char *args;
	uint64_t size;
};

static inline void check_mkfs_cases(const struct mkfs_kind *k, const struct mkfs_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		check_mkfs_kind(k, c[i].args, c[i].size);
}

/* Every case of a table of struct mkfs_case. */
#define CHECK_MKFS_ALL(kind, cases) \
	check_mkfs_cases(kind, cases, sizeof(cases) / sizeof((cases)[0]))

/* Images made with each of kinds (mkfs options) followed by `with` (the
 * options that fill them), checked, and with more than min_bytes in use as
 * used_bytes() counts them (when it can say). */
static inline void check_filled(const struct mkfs_kind *k, const char *const *kinds, size_t n,
				const char *with, uint64_t size,
				bool (*used_bytes)(const char *path, uint64_t *bytes),
				uint64_t min_bytes)
{
	for (size_t i = 0; i < n; i++) {
		char args[512], path[64];
		uint64_t bytes;

		snprintf(args, sizeof(args), "%s %s", kinds[i], with);
		if (!k->make(path, args, size))
			continue;
		k->check(path, args);
		if (used_bytes(path, &bytes))
			CHECK(bytes > min_bytes);
		unlink(path);
	}
}

/* Examined unforced, timed: the result, and in *seconds how long it took;
 * on success "# WHAT: N blocks, M used, examined in S s" on stdout. */
static inline int examine_timed(const struct fs_plugin *plugin, const char *path, const char *what,
				struct fs_info *info, struct im_err *err, double *seconds)
{
	struct timespec t0, t1;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = examine_path(plugin, path, false, info, err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (r == 0)
		printf("# %s: %llu blocks, %llu used, examined in %.3f s\n", what,
		       (unsigned long long)info->block_count, (unsigned long long)info->used_blocks,
		       *seconds);
	return r;
}

/* How many fuzzing rounds: $VAR (for long runs), else dflt. */
static inline int fuzz_rounds(const char *var, int dflt)
{
	const char *env = getenv(var);

	return env ? atoi(env) : dflt;
}

/* A random byte to write over metadata: 0xFF one time in three. */
static inline unsigned char fuzz_byte(unsigned *seed)
{
	return (unsigned char)(rand_r(seed) % 3 == 0 ? 0xFF : rand_r(seed));
}

/* One result of a fuzzed image: a map no larger than the device (freed),
 * or a refusal with a message; counted in *ok or *failed. */
static inline void count_fuzzed(int r, struct fs_info *info, const struct im_err *err, int *ok,
				int *failed)
{
	if (r == 0) {
		(*ok)++;
		CHECK(info->used_blocks <= info->block_count);
		fs_info_free(info);
	} else {
		(*failed)++;
		CHECK(err->msg[0] != '\0');
	}
}

/* A fuzzed image examined by the plugin (forced or not, at random) and its
 * result counted as by count_fuzzed(). */
static inline void examine_fuzzed(const struct fs_plugin *plugin, const char *path, unsigned *seed,
				  int *ok, int *failed)
{
	struct fs_info info;
	struct im_err err;
	int r = examine_path(plugin, path, rand_r(seed) % 2, &info, &err);

	count_fuzzed(r, &info, &err, ok, failed);
}

/* Through the registry, unforced: it succeeds and the map is plugin's
 * (and of that type, when type is given). */
static inline void expect_plugin(const char *path, const struct fs_plugin *plugin, const char *type)
{
	struct fs_info info;
	struct im_err err;
	int r = examine_path(NULL, path, false, &info, &err);

	CHECK(r == 0);
	CHECK(r == 0 && info.plugin == plugin);
	if (type)
		CHECK_STR(info.type, type);
	if (r == 0)
		fs_info_free(&info);
}

/* Through the registry, unforced: the result want, and when that is 0 and
 * plugin is given, plugin's map. */
static inline void expect_registry(const char *path, int want, const struct fs_plugin *plugin)
{
	struct fs_info info;
	struct im_err err;
	int r = examine_path(NULL, path, false, &info, &err);

	CHECK_EQ_U(r, want);
	if (want == 0 && plugin)
		CHECK(info.plugin == plugin);
	fs_info_free(&info);
}

/* A field to damage: width bytes of val at off; and the result wanted. */
struct field_case {
	const char *what;
	unsigned off, width;
	uint64_t val;
	int want;
};

/* A metadata block of an image, for a plugin: len bytes at `at`, its
 * numbers big-endian or not, and the function that makes its checksum right
 * again (NULL: it has none; arg is passed to it). */
struct block_at {
	const struct fs_plugin *plugin;
	uint64_t at;
	size_t len;
	bool big_endian;
	void (*sign)(unsigned char *block, size_t len, unsigned arg);
	unsigned arg;
};

/* Change one field of the block (re-signed when resign), examine with the
 * plugin, and put the block back as it was.  Returns examine's result. */
static inline int examine_patched(const char *path, const struct block_at *b, unsigned off,
				  uint64_t val, unsigned width, bool resign, bool force,
				  struct fs_info *info, struct im_err *err)
{
	unsigned char *orig = malloc(b->len), *blk = malloc(b->len);
	int r = -ENOMEM;

	CHECK(orig && blk);
	if (orig && blk) {
		read_at(path, b->at, orig, b->len);
		memcpy(blk, orig, b->len);
		if (b->big_endian)
			put_be(blk + off, val, width);
		else
			put_le(blk + off, val, width);
		if (resign && b->sign)
			b->sign(blk, b->len, b->arg);
		write_at(path, b->at, blk, b->len);
		r = examine_path(b->plugin, path, force, info, err);
		write_at(path, b->at, orig, b->len);
	}
	free(orig);
	free(blk);
	return r;
}

/* A field changed (re-signed when resign): refused unforced as unclean,
 * with msg_word in the message; forced, examined with a warning (naming
 * warn_word, when given). */
static inline void expect_unclean(const char *path, const struct block_at *b, unsigned off,
				  uint64_t val, unsigned width, bool resign, const char *msg_word,
				  const char *warn_word)
{
	struct fs_info info;
	struct im_err err;
	int r = examine_patched(path, b, off, val, width, resign, false, &info, &err);

	CHECK(r == -EUCLEAN);
	CHECK(strstr(err.msg, msg_word) != NULL);
	r = examine_patched(path, b, off, val, width, resign, true, &info, &err);
	CHECK(r == 0);
	if (r == 0) {
		CHECK(info.warning[0] != '\0');
		if (warn_word)
			CHECK(strstr(info.warning, warn_word) != NULL);
		fs_info_free(&info);
	}
}

/* A case's result: r must be want, with a message; said when not.  A map
 * that came with a success is freed. */
static inline void expect_result(const char *what, int r, int want, const struct im_err *err,
				 struct fs_info *info)
{
	if (r != want)
		fprintf(stderr, "  %s: got %d (%s), expected %d\n", what, r, err->msg, want);
	CHECK(r == want);
	CHECK(err->msg[0] != '\0');
	if (r == 0)
		fs_info_free(info);
}

/* A zero-filled file of img's size holding only the blocks info marks; with
 * drop_last_run, all but the last run of them. */
static inline bool copy_used(const char *img, const struct fs_info *info, const char *out,
			     bool drop_last_run)
{
	struct stat st;
	int in = open(img, O_RDONLY), o = -1;
	bool ok = false;
	unsigned char *buf = NULL;
	uint64_t pos = 0, len, last = 0;

	while ((len = bitmap_next_run(&info->used, &pos)) > 0) {
		last = pos;
		pos += len;
	}
	pos = 0;
	if (in < 0 || fstat(in, &st) < 0)
		goto done;
	o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (o < 0 || ftruncate(o, st.st_size) < 0)
		goto done;
	buf = malloc(info->block_size);
	if (!buf)
		goto done;
	while ((len = bitmap_next_run(&info->used, &pos)) > 0) {
		if (drop_last_run && pos == last)
			break;
		for (uint64_t b = pos; b < pos + len; b++) {
			off_t off = (off_t)(b * info->block_size);
			if (pread(in, buf, info->block_size, off) != (ssize_t)info->block_size ||
			    pwrite(o, buf, info->block_size, off) != (ssize_t)info->block_size)
				goto done;
		}
		pos += len;
	}
	ok = true;
done:
	free(buf);
	if (o >= 0)
		close(o);
	if (in >= 0)
		close(in);
	return ok;
}

#endif
