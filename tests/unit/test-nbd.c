/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The nbd container driver against a real nbdkit serving a file on a Unix
 * socket: reads, writes, extents, limits, refusals, and a server killed in
 * the middle of a job. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "imager/backend.h"
#include "unit.h"
#include "util.h"

#define MiB (1024u * 1024u)
/* A hang (the one failure CHECK cannot catch) ends the process instead. */
#define TEST_SECONDS 120

struct server {
	char dir[64];
	char sock[128];
	char file[128];
	char log[128];
	char uri[256];
	pid_t pid;
};

/* The jobs' --retries 1 and 0 (the timeout as by default). */
static const struct bk_net one_retry = { .given = true, .timeout_s = 60, .retries = 1 };
static const struct bk_net no_retry = { .given = true, .timeout_s = 60, .retries = 0 };

static bool have_nbdkit(void)
{
	static int have = -1;

	if (have < 0)
		have = system("command -v nbdkit >/dev/null 2>&1 && "
			      "nbdkit file --version >/dev/null 2>&1") == 0;
	if (!have)
		unit_skip("SKIP: nbdkit not installed");
	return have;
}

static void fill_random(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)(x >> 24);
	}
}

static bool write_at(const char *path, const void *buf, size_t len, uint64_t off)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && pwrite(fd, buf, len, (off_t)off) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok;
}

static bool read_at(const char *path, void *buf, size_t len, uint64_t off)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && pread(fd, buf, len, (off_t)off) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* A temporary folder holding the served file, size bytes, sparse. */
static bool server_init(struct server *sv, uint64_t size)
{
	const char *tmp = getenv("TMPDIR");
	int fd;

	memset(sv, 0, sizeof(*sv));
	snprintf(sv->dir, sizeof(sv->dir), "%s/test-nbd-XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	if (!mkdtemp(sv->dir)) {
		CHECK(!"mkdtemp failed");
		return false;
	}
	snprintf(sv->sock, sizeof(sv->sock), "%s/sock", sv->dir);
	snprintf(sv->file, sizeof(sv->file), "%s/disk", sv->dir);
	snprintf(sv->log, sizeof(sv->log), "%s/log", sv->dir);
	snprintf(sv->uri, sizeof(sv->uri), "nbd+unix:///?socket=%s", sv->sock);
	fd = open(sv->file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	if (fd < 0)
		return false;
	CHECK(ftruncate(fd, (off_t)size) == 0);
	close(fd);
	return true;
}

/* Does the server accept connections?  (Its process may linger as a
 * zombie, so the socket is what tells.) */
static bool server_alive(const struct server *sv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	if (str_copy(sa.sun_path, sizeof(sa.sun_path), sv->sock) < 0) {
		close(fd);
		return false;
	}
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static void show_log(const struct server *sv)
{
	char line[512];
	FILE *f = fopen(sv->log, "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "  nbdkit: %s", line);
	fclose(f);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Run `nbdkit -f --unix SOCK ARGS...` (options, then the plugin and its
 * parameters; NULL-terminated) as our child, and wait until it answers. */
static bool server_start(struct server *sv, ...)
{
	const char *argv[32] = { "nbdkit", "-f", "--exit-with-parent", "--unix", sv->sock };
	size_t argc = 5;
	va_list ap;

	va_start(ap, sv);
	while (argc < sizeof(argv) / sizeof(*argv) - 1 && (argv[argc] = va_arg(ap, const char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;

	sv->pid = fork();
	if (sv->pid < 0) {
		CHECK(!"fork failed");
		return false;
	}
	if (sv->pid == 0) {
		int fd = open(sv->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp("nbdkit", (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		int status;
		if (server_alive(sv))
			return true;
		if (waitpid(sv->pid, &status, WNOHANG) == sv->pid) {
			sv->pid = 0;
			break;
		}
		sleep_ms(10);
	}
	fprintf(stderr, "  nbdkit did not start\n");
	show_log(sv);
	CHECK(!"nbdkit started");
	return false;
}

/* Kill the server and reap it, without waiting forever for a process that
 * the machine leaves as a zombie. */
static void server_kill(struct server *sv, int sig)
{
	if (sv->pid <= 0)
		return;
	kill(sv->pid, sig);
	for (int i = 0; i < 500; i++) {
		if (waitpid(sv->pid, NULL, WNOHANG) != 0)
			break;
		if (i == 300)
			kill(sv->pid, SIGKILL);
		sleep_ms(10);
	}
	sv->pid = 0;
}

static void server_cleanup(struct server *sv)
{
	server_kill(sv, SIGTERM);
	unlink(sv->sock);
	unlink(sv->file);
	unlink(sv->log);
	rmdir(sv->dir);
}

static bool setup(struct server *sv, uint64_t size)
{
	alarm(TEST_SECONDS);
	return have_nbdkit() && server_init(sv, size);
}

static void teardown(struct server *sv)
{
	server_cleanup(sv);
	alarm(0);
}

/* ---- tests ---- */

static void test_read_matches_file(void)
{
	const size_t size = 6 * MiB + 1536;   /* not a whole number of MiB */
	unsigned char *want = malloc(size), *got = calloc(1, size);
	struct im_err err = { 0 };
	struct server sv;
	struct bk *bk = NULL;

	if (!want || !got || !setup(&sv, size))
		goto out;
	fill_random(want, size, 1);
	CHECK(write_at(sv.file, want, size, 0));
	if (!server_start(&sv, "file", sv.file, NULL))
		goto stop;
	CHECK(bk_open(sv.uri, NULL, 0, NULL, &bk, &err) == 0);
	if (!bk) {
		fprintf(stderr, "  %s\n", err.msg);
		goto stop;
	}
	CHECK_STR(bk->drv->name, "nbd");
	CHECK_EQ_U(bk->size, size);
	CHECK_EQ_U(bk->sector_size, 512);
	CHECK(!bk->writable);
	CHECK(!bk->is_block_device);
	CHECK_STR(bk->raw_path, "");
	CHECK(bk_pread(bk, got, size, 0, &err) == 0);
	CHECK(memcmp(got, want, size) == 0);
	/* Odd pieces read the same bytes. */
	memset(got, 0, size);
	for (size_t off = 0; off < size;) {
		size_t n = size - off < 777777 ? size - off : 777777;
		CHECK(bk_pread(bk, got + off, n, off, &err) == 0);
		off += n;
	}
	CHECK(memcmp(got, want, size) == 0);
	/* The format named explicitly reaches the same driver. */
	CHECK(bk_close(bk, &err) == 0);
	bk = NULL;
	CHECK(bk_open(sv.uri, "nbd", 0, NULL, &bk, &err) == 0);
	CHECK(bk && bk->drv == &bk_nbd);
	CHECK(bk_close(bk, &err) == 0);
	CHECK_EQ_U(err.exit_class, 0);
stop:
	teardown(&sv);
out:
	free(want);
	free(got);
}

static void test_block_status(void)
{
	const uint64_t size = 4 * MiB;
	unsigned char *data = malloc(MiB);
	struct im_err err = { 0 };
	struct server sv;
	struct bk *bk = NULL;
	uint64_t pnum = 0, off, zero_bytes = 0;
	int st;

	if (!data || !setup(&sv, size))
		goto out;
	/* data [0, 1M), a hole [1M, 3M), data [3M, 4M) */
	fill_random(data, MiB, 2);
	CHECK(write_at(sv.file, data, MiB, 0));
	CHECK(write_at(sv.file, data, MiB, 3 * MiB));
	if (!server_start(&sv, "file", sv.file, NULL))
		goto stop;
	CHECK(bk_open(sv.uri, NULL, BK_OPEN_WRITE, NULL, &bk, &err) == 0);
	if (!bk) {
		fprintf(stderr, "  %s\n", err.msg);
		goto stop;
	}
	CHECK_EQ_U(bk_block_status(bk, 0, size, &pnum, &err), BK_STATUS_DATA);
	CHECK_EQ_U(pnum, MiB);
	CHECK_EQ_U(bk_block_status(bk, MiB, size - MiB, &pnum, &err), BK_STATUS_ZERO);
	CHECK_EQ_U(pnum, 2 * MiB);
	/* Inside an extent, and shorter than it. */
	CHECK_EQ_U(bk_block_status(bk, MiB + 4096, 8192, &pnum, &err), BK_STATUS_ZERO);
	CHECK_EQ_U(pnum, 8192);
	CHECK_EQ_U(bk_block_status(bk, 3 * MiB, MiB, &pnum, &err), BK_STATUS_DATA);
	CHECK_EQ_U(pnum, MiB);
	/* A walk covers the disk exactly and finds the 2 MiB of hole. */
	for (off = 0; off < size; off += pnum) {
		st = bk_block_status(bk, off, size - off, &pnum, &err);
		CHECK(st >= 0);
		if (st < 0)
			break;
		if (st & BK_STATUS_ZERO)
			zero_bytes += pnum;
	}
	CHECK_EQ_U(off, size);
	CHECK_EQ_U(zero_bytes, 2 * MiB);
	/* Writing into the hole shows at once (nothing stale is kept). */
	CHECK(bk_pwrite(bk, data, 65536, 2 * MiB, &err) == 0);
	CHECK_EQ_U(bk_block_status(bk, 2 * MiB, 65536, &pnum, &err), BK_STATUS_DATA);
	CHECK_EQ_U(pnum, 65536);
	CHECK_EQ_U(bk_block_status(bk, MiB, MiB, &pnum, &err), BK_STATUS_ZERO);
	CHECK_EQ_U(pnum, MiB);
	CHECK(bk_close(bk, &err) == 0);
	CHECK_EQ_U(err.exit_class, 0);
	if (err.exit_class)
		fprintf(stderr, "  %s\n", err.msg);
stop:
	teardown(&sv);
out:
	free(data);
}

/* Without structured replies there is no base:allocation: all is data. */
static void test_block_status_unsupported(void)
{
	struct im_err err = { 0 };
	struct server sv;
	struct bk *bk = NULL;
	uint64_t pnum = 0;

	if (!setup(&sv, 2 * MiB))
		return;
	if (!server_start(&sv, "--no-sr", "file", sv.file, NULL))
		goto stop;
	CHECK(bk_open(sv.uri, NULL, 0, NULL, &bk, &err) == 0);
	if (bk) {
		CHECK_EQ_U(bk_block_status(bk, 4096, 2 * MiB - 4096, &pnum, &err), BK_STATUS_DATA);
		CHECK_EQ_U(pnum, 2 * MiB - 4096);
		CHECK(bk_close(bk, &err) == 0);
	}
stop:
	teardown(&sv);
}

static void test_write_changes_file(void)
{
	const size_t size = 8 * MiB;
	unsigned char *want = malloc(size), *got = malloc(size);
	struct bk_create_opts o = { .size = 4 * MiB };
	struct im_err err = { 0 };
	struct server sv;
	struct bk *bk = NULL;

	if (!want || !got || !setup(&sv, size))
		goto out;
	fill_random(want, size, 3);
	CHECK(write_at(sv.file, want, size, 0));
	if (!server_start(&sv, "file", sv.file, NULL))
		goto stop;

	/* "Creating" on an export uses it as it is. */
	CHECK(bk_create(sv.uri, NULL, &o, &bk, &err) == 0);
	if (!bk) {
		fprintf(stderr, "  %s\n", err.msg);
		goto stop;
	}
	CHECK_STR(bk->drv->name, "nbd");
	CHECK(bk->writable);
	CHECK(!bk->zero_init);
	CHECK_EQ_U(bk->size, size);
	fill_random(want + MiB + 512, 3 * MiB, 4);
	CHECK(bk_pwrite(bk, want + MiB + 512, 3 * MiB, MiB + 512, &err) == 0);
	memset(want + 5 * MiB, 0, MiB);
	CHECK(bk_zero(bk, 5 * MiB, MiB, &err) == 0);
	CHECK(bk_flush(bk, &err) == 0);
	CHECK(bk_close(bk, &err) == 0);
	bk = NULL;
	CHECK(read_at(sv.file, got, size, 0));
	CHECK(memcmp(got, want, size) == 0);

	/* And opened for writing. */
	CHECK(bk_open(sv.uri, NULL, BK_OPEN_WRITE, NULL, &bk, &err) == 0);
	if (bk) {
		CHECK(bk->writable);
		fill_random(want + 7 * MiB, MiB, 5);
		CHECK(bk_pwrite(bk, want + 7 * MiB, MiB, 7 * MiB, &err) == 0);
		CHECK(bk_close(bk, &err) == 0);
	}
	CHECK(read_at(sv.file, got, size, 0));
	CHECK(memcmp(got, want, size) == 0);
	CHECK_EQ_U(err.exit_class, 0);
	if (err.exit_class)
		fprintf(stderr, "  %s\n", err.msg);
stop:
	teardown(&sv);
out:
	free(want);
	free(got);
}

static void test_export_too_small(void)
{
	struct bk_create_opts o = { .size = 2 * MiB };
	struct im_err err = { 0 };
	struct server sv;
	struct bk *bk = NULL;

	if (!setup(&sv, MiB))
		return;
	if (!server_start(&sv, "file", sv.file, NULL))
		goto stop;
	CHECK_EQ_U(-bk_create(sv.uri, NULL, &o, &bk, &err), ENOSPC);
	CHECK(bk == NULL);
	CHECK_EQ_U(err.exit_class, IM_EXIT_TARGET);
	CHECK(strstr(err.msg, "too small") != NULL);
	CHECK(strstr(err.msg, sv.uri) != NULL);
	fprintf(stderr, "  (expected) %s\n", err.msg);
	/* Exactly the size needed is enough. */
	memset(&err, 0, sizeof(err));
	o.size = MiB;
	CHECK(bk_create(sv.uri, NULL, &o, &bk, &err) == 0);
	CHECK(bk_close(bk, &err) == 0);
	/* The refused connection was closed: the server still serves. */
	CHECK(server_alive(&sv));
stop:
	teardown(&sv);
}

static void test_read_only_export(void)
{
	struct bk_create_opts o = { .size = MiB };
	struct im_err err = { 0 };
	struct server sv;
	struct bk *bk = NULL;
	unsigned char buf[512];

	if (!setup(&sv, MiB))
		return;
	if (!server_start(&sv, "-r", "file", sv.file, NULL))
		goto stop;
	CHECK_EQ_U(-bk_open(sv.uri, NULL, BK_OPEN_WRITE, NULL, &bk, &err), EROFS);
	CHECK(bk == NULL);
	CHECK_EQ_U(err.exit_class, IM_EXIT_TARGET);
	CHECK(strstr(err.msg, "read-only") != NULL);
	fprintf(stderr, "  (expected) %s\n", err.msg);
	memset(&err, 0, sizeof(err));
	CHECK_EQ_U(-bk_create(sv.uri, NULL, &o, &bk, &err), EROFS);
	CHECK(bk == NULL);
	CHECK(strstr(err.msg, "read-only") != NULL);
	/* Reading is fine. */
	memset(&err, 0, sizeof(err));
	CHECK(bk_open(sv.uri, NULL, 0, NULL, &bk, &err) == 0);
	if (bk) {
		CHECK(bk_pread(bk, buf, sizeof(buf), 0, &err) == 0);
		CHECK(bk_close(bk, &err) == 0);
	}
stop:
	teardown(&sv);
}

/* A server that allows 4 KiB to 64 KiB requests and refuses anything else
 * (blocksize-error-policy=error): large calls are split, its minimum is
 * the sector size, and reads that are not whole sectors are cut from whole
 * sectors. */
static void test_server_limits(void)
{
	const size_t size = 2 * MiB;
	unsigned char *want = malloc(size), *got = calloc(1, size);
	struct im_err err = { 0 };
	struct server sv;
	struct bk *bk = NULL;

	if (!want || !got || !setup(&sv, size))
		goto out;
	fill_random(want, size, 6);
	CHECK(write_at(sv.file, want, size, 0));
	if (!server_start(&sv, "--filter=blocksize-policy", "file", sv.file,
			  "blocksize-minimum=4096", "blocksize-maximum=65536",
			  "blocksize-error-policy=error", NULL))
		goto stop;
	CHECK(bk_open(sv.uri, NULL, BK_OPEN_WRITE, NULL, &bk, &err) == 0);
	if (!bk) {
		fprintf(stderr, "  %s\n", err.msg);
		goto stop;
	}
	CHECK_EQ_U(bk->sector_size, 4096);
	CHECK(bk_pread(bk, got, size, 0, &err) == 0);
	CHECK(memcmp(got, want, size) == 0);
	/* Reads that start and end inside sectors (a filesystem's 2-byte
	 * magic, a superblock at 1024) are cut from whole sectors. */
	memset(got, 0, size);
	CHECK(bk_pread(bk, got, 2, 1080, &err) == 0);
	CHECK(memcmp(got, want + 1080, 2) == 0);
	CHECK(bk_pread(bk, got, 3 * 4096 + 100, 4000, &err) == 0);
	CHECK(memcmp(got, want + 4000, 3 * 4096 + 100) == 0);
	CHECK(bk_pread(bk, got, 10, size - 10, &err) == 0);
	CHECK(memcmp(got, want + size - 10, 10) == 0);
	fill_random(want + 8192, MiB, 7);
	CHECK(bk_pwrite(bk, want + 8192, MiB, 8192, &err) == 0);
	CHECK(bk_pread(bk, got, size, 0, &err) == 0);
	CHECK(memcmp(got, want, size) == 0);
	CHECK(bk_close(bk, &err) == 0);
	CHECK_EQ_U(err.exit_class, 0);
	if (err.exit_class)
		fprintf(stderr, "  %s\n", err.msg);
stop:
	teardown(&sv);
out:
	free(want);
	free(got);
}

/* The server dies (SIGKILL) in the middle of reading: one reconnection
 * tried (a pause of 1 s), then a clean error, the same at once for every
 * later call, no hang and no crash. */
static void test_server_killed_reading(void)
{
	const uint64_t size = 32 * MiB;
	unsigned char *buf = malloc(MiB);
	struct im_err err = { 0 };
	struct server sv;
	struct bk *bk = NULL;
	uint64_t pnum;
	int r = 0, failed_at = -1;

	if (!buf || !setup(&sv, size))
		goto out;
	if (!server_start(&sv, "file", sv.file, NULL))
		goto stop;
	CHECK(bk_open(sv.uri, NULL, 0, &one_retry, &bk, &err) == 0);
	if (!bk)
		goto stop;
	time_t t0 = time(NULL);
	for (int i = 0; i < 32; i++) {
		if (i == 3) {
			server_kill(&sv, SIGKILL);
			CHECK(!server_alive(&sv));
		}
		r = bk_pread(bk, buf, MiB, (uint64_t)i * MiB, &err);
		if (r < 0) {
			failed_at = i;
			break;
		}
	}
	CHECK_EQ_U(failed_at, 3);
	CHECK(r < 0);
	CHECK_EQ_U(err.exit_class, IM_EXIT_IO);
	CHECK(strstr(err.msg, sv.uri) != NULL);
	fprintf(stderr, "  (expected) %s\n", err.msg);
	CHECK(bk_pread(bk, buf, 4096, 0, NULL) < 0);
	CHECK(bk_block_status(bk, 0, size, &pnum, NULL) < 0);
	/* one pause of 1 s, not one per call */
	CHECK(time(NULL) - t0 <= 2);
	/* Nothing was written: closing a dead reader is not a failure. */
	CHECK(bk_close(bk, NULL) == 0);
stop:
	teardown(&sv);
out:
	free(buf);
}

/* The same while writing, where a send to a closed socket would raise
 * SIGPIPE (libnbd sends with MSG_NOSIGNAL); closing reports that the
 * target is incomplete. */
static void test_server_killed_writing(void)
{
	const uint64_t size = 16 * MiB;
	unsigned char *buf = malloc(MiB);
	struct im_err err = { 0 };
	struct server sv;
	struct bk *bk = NULL;
	int r = 0, failed_at = -1;

	if (!buf || !setup(&sv, size))
		goto out;
	fill_random(buf, MiB, 8);
	if (!server_start(&sv, "file", sv.file, NULL))
		goto stop;
	/* no reconnection (sources/nbd-stall has them) */
	CHECK(bk_open(sv.uri, NULL, BK_OPEN_WRITE, &no_retry, &bk, &err) == 0);
	if (!bk)
		goto stop;
	for (int i = 0; i < 16; i++) {
		if (i == 3)
			server_kill(&sv, SIGKILL);
		r = bk_pwrite(bk, buf, MiB, (uint64_t)i * MiB, &err);
		if (r < 0) {
			failed_at = i;
			break;
		}
	}
	CHECK_EQ_U(failed_at, 3);
	CHECK(r < 0);
	CHECK_EQ_U(err.exit_class, IM_EXIT_IO);
	fprintf(stderr, "  (expected) %s\n", err.msg);
	CHECK(bk_zero(bk, 0, MiB, NULL) < 0);
	CHECK(bk_flush(bk, NULL) < 0);
	CHECK(bk_close(bk, NULL) < 0);
stop:
	teardown(&sv);
out:
	free(buf);
}

/* No server behind the URI, or no usable URI: a clear error naming it. */
static void test_no_server(void)
{
	static const char *const uris[] = {
		"nbd+unix:///?socket=/nonexistent/imager-test.sock",
		"nbd+unix:///",              /* no socket= */
		"nbd://127.0.0.1:1/",        /* nothing listens on port 1 */
		"nbd://[bad/",
	};
	struct bk_create_opts o = { .size = MiB };
	struct bk *bk = NULL;

	alarm(TEST_SECONDS);
	for (size_t i = 0; i < sizeof(uris) / sizeof(*uris); i++) {
		struct im_err err = { 0 };

		CHECK(bk_open(uris[i], NULL, 0, NULL, &bk, &err) < 0);
		CHECK(bk == NULL);
		CHECK(err.code < 0);
		CHECK_EQ_U(err.exit_class, IM_EXIT_SOURCE);
		CHECK(strncmp(err.msg, uris[i], strlen(uris[i])) == 0);
		fprintf(stderr, "  (expected) %s\n", err.msg);

		memset(&err, 0, sizeof(err));
		CHECK(bk_create(uris[i], NULL, &o, &bk, &err) < 0);
		CHECK(bk == NULL);
		CHECK_EQ_U(err.exit_class, IM_EXIT_TARGET);
	}
	alarm(0);
}

UNIT_MAIN(UNIT(test_read_matches_file), UNIT(test_block_status), UNIT(test_block_status_unsupported),
	  UNIT(test_write_changes_file), UNIT(test_export_too_small), UNIT(test_read_only_export),
	  UNIT(test_server_limits), UNIT(test_server_killed_reading), UNIT(test_server_killed_writing),
	  UNIT(test_no_server))
