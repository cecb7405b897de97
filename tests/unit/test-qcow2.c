/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The qcow2 container against QEMU's own tools: what we write must pass
 * `qemu-img check` and compare equal to a raw file written the same way;
 * what qemu-img writes (plain, compressed, v2, zero clusters, subclusters)
 * must read back byte for byte; what we must refuse is refused; damaged
 * and mutated files fail cleanly. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "imager/backend.h"
#include "unit.h"

#define MiB (1024ull * 1024)

#ifdef __SANITIZE_ADDRESS__
/* A damaged image must never make the driver ask for a huge buffer: under
 * the address sanitizer, any allocation beyond 512 MiB aborts the test.
 * (Without it, test_mutations watches the peak memory instead; the
 * sanitizer's quarantine makes that figure meaningless.) */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "max_allocation_size_mb=512"; }
#endif

static char tmpdir[512];

static void setup(void)
{
	const char *t = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/test-qcow2.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		exit(1);
	}
}

static void cleanup(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "  cannot remove %s\n", tmpdir);
}

static void tpath(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmpdir, name);
}

/* Run a shell command; its output (stdout and stderr) in out.  Returns the
 * exit status, or -1. */
static int run(char *out, size_t outlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char *out, size_t outlen, const char *fmt, ...)
{
	char cmd[2048], tmp[4096];
	va_list ap;
	size_t used = 0;
	FILE *f;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd) - 8, fmt, ap);
	va_end(ap);
	strcat(cmd, " 2>&1");
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (!out) {
		out = tmp;
		outlen = sizeof(tmp);
	}
	out[0] = 0;
	for (;;) {
		size_t n;
		if (used + 1 < outlen) {
			n = fread(out + used, 1, outlen - 1 - used, f);
			used += n;
			out[used] = 0;
		} else {
			char sink[4096];
			n = fread(sink, 1, sizeof(sink), f);
		}
		if (n == 0)
			break;
	}
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Every test needs QEMU's tools: without them the whole binary skips. */
static bool have_qemu(void)
{
	static int have = -1;
	if (have < 0) {
		have = run(NULL, 0, "qemu-img --version") == 0;
		if (!have) {
			printf("skip: qemu-img is not installed (Debian package qemu-utils)\n");
			exit(77);
		}
	}
	return have;
}

/* ---- a deterministic pattern ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	return unit_xorshift(&rng);
}

static void fill(unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(rnd() >> 24);
}

/* The same writes to a container and to a raw file; counts the clusters
 * touched (for the allocation checks). */
struct pattern {
	struct bk *bk;
	int raw;
	uint64_t size;
	uint32_t cs;
	unsigned char *touched;   /* one byte per cluster */
	int failures;
};

static void pat_write(struct pattern *p, const unsigned char *buf, size_t len, uint64_t off)
{
	struct im_err err = { 0 };
	int r = bk_pwrite(p->bk, buf, len, off, &err);

	if (r < 0) {
		fprintf(stderr, "  bk_pwrite %zu at %llu: %d %s\n", len, (unsigned long long)off, r, err.msg);
		p->failures++;
	}
	if (pwrite(p->raw, buf, len, (off_t)off) != (ssize_t)len)
		p->failures++;
	if (p->touched && len)
		for (uint64_t c = off / p->cs; c <= (off + len - 1) / p->cs; c++)
			p->touched[c] = 1;
}

static void pat_zero(struct pattern *p, uint64_t off, uint64_t len)
{
	static const unsigned char zeros[1 << 20];
	struct im_err err = { 0 };
	int r = bk_zero(p->bk, off, len, &err);

	if (r < 0) {
		fprintf(stderr, "  bk_zero %llu at %llu: %d %s\n", (unsigned long long)len,
			(unsigned long long)off, r, err.msg);
		p->failures++;
	}
	for (uint64_t o = off; o < off + len;) {
		size_t n = off + len - o < sizeof(zeros) ? (size_t)(off + len - o) : sizeof(zeros);
		if (pwrite(p->raw, zeros, n, (off_t)o) != (ssize_t)n)
			p->failures++;
		o += n;
	}
}

/* Random data at scattered, unaligned offsets (some spanning clusters),
 * overwrites, a run of whole clusters, zero ranges, zeros written over
 * nothing, and the last bytes of the disk. */
static void apply_pattern(struct pattern *p)
{
	size_t max = 3 * MiB, bufsz = 2ull * p->cs + 17 > max ? 2ull * p->cs + 17 : max;
	unsigned char *buf, *zeros = calloc(1, 256 * 1024);
	uint64_t size = p->size;

	buf = malloc(bufsz);
	for (int i = 0; i < 30; i++) {
		size_t len = 1 + rnd() % (200 * 1024);
		uint64_t off = rnd() % (size - len);
		fill(buf, len);
		pat_write(p, buf, len, off);
	}
	/* Across cluster boundaries. */
	fill(buf, 300);
	pat_write(p, buf, 300, 5ull * p->cs - 100);
	fill(buf, 2ull * p->cs + 17);
	pat_write(p, buf, 2ull * p->cs + 17, 9ull * p->cs - 5);
	/* A sequential run of a few MiB, then overwrites inside it. */
	fill(buf, max);
	pat_write(p, buf, max, 100 * MiB + 7);
	for (int i = 0; i < 10; i++) {
		size_t len = 1 + rnd() % 70000;
		fill(buf, len);
		pat_write(p, buf, len, 100 * MiB + rnd() % (max - len));
	}
	/* Zero ranges: inside written data, and over untouched space. */
	pat_zero(p, 100 * MiB + 1000, MiB + 333);
	pat_zero(p, 200 * MiB + 12345, 5 * MiB);
	/* Zeros written as data over an unallocated area. */
	pat_write(p, zeros, 256 * 1024, 150 * MiB + 3);
	/* The tail of the disk. */
	fill(buf, 1000);
	pat_write(p, buf, 1000, size - 1000);
	free(buf);
	free(zeros);
}

static int compare_bk_raw(struct bk *bk, const char *raw)
{
	unsigned char *a = malloc(MiB), *b = malloc(MiB);
	int fd = open(raw, O_RDONLY), bad = 0;
	struct im_err err = { 0 };

	for (uint64_t off = 0; fd >= 0 && off < bk->size && bad < 5; off += MiB) {
		size_t n = bk->size - off < MiB ? (size_t)(bk->size - off) : MiB;
		int r = bk_pread(bk, a, n, off, &err);
		if (r < 0) {
			fprintf(stderr, "  read at %llu: %d %s\n", (unsigned long long)off, r, err.msg);
			bad++;
			continue;
		}
		memset(b, 0, n);
		if (pread(fd, b, n, (off_t)off) < 0)
			bad++;
		if (memcmp(a, b, n)) {
			size_t i = 0;
			while (a[i] == b[i])
				i++;
			fprintf(stderr, "  differs at %llu\n", (unsigned long long)(off + i));
			bad++;
		}
	}
	if (fd < 0)
		bad++;
	else
		close(fd);
	free(a);
	free(b);
	return bad;
}

/* A number after "key": in JSON text, or -1. */
static long long json_num(const char *text, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(text, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static void check_qemu_clean(const char *path)
{
	char out[8192];
	int st = run(out, sizeof(out), "qemu-img check %s", path);

	CHECK_EQ_U(st, 0);
	CHECK(strstr(out, "No errors were found") != NULL);
	CHECK(strstr(out, "leaked") == NULL);
	if (st || !strstr(out, "No errors were found"))
		fprintf(stderr, "  qemu-img check %s:\n%s\n", path, out);
}

static void check_identical(const char *path, const char *raw)
{
	char out[4096];
	int st = run(out, sizeof(out), "qemu-img compare -f qcow2 -F raw %s %s", path, raw);

	CHECK_EQ_U(st, 0);
	if (st)
		fprintf(stderr, "  qemu-img compare: %s\n", out);
}

/* metadata: every guest range is allocated, at data_start + guest offset. */
static void check_map_linear(const char *path)
{
	static char out[1 << 20];
	long long delta = -1;
	int entries = 0;
	const char *p = out;

	CHECK_EQ_U(run(out, sizeof(out), "qemu-img map --output=json %s", path), 0);
	while ((p = strstr(p, "{"))) {
		const char *end = strchr(p, '}');
		char entry[512];
		size_t n = end ? (size_t)(end - p) : strlen(p);
		long long start, off;

		if (n >= sizeof(entry))
			n = sizeof(entry) - 1;
		memcpy(entry, p, n);
		entry[n] = 0;
		start = json_num(entry, "start");
		off = json_num(entry, "offset");
		CHECK(strstr(entry, "\"data\": true") != NULL);
		CHECK(off >= 0);
		if (delta < 0)
			delta = off - start;
		CHECK(off - start == delta);
		entries++;
		p += n;
	}
	CHECK(entries > 0);
}

static void create_case(enum bk_prealloc pa, uint32_t cs)
{
	char q[600], raw[600], out[8192], name[64];
	struct bk_create_opts o = { .size = 256 * MiB, .prealloc = pa, .cluster_size = cs };
	struct im_err err = { 0 };
	struct pattern p = { .size = o.size, .cs = cs };
	struct bk *bk = NULL;
	long long actual;
	uint64_t touched = 0;
	int r;

	snprintf(name, sizeof(name), "c-%s-%u.qcow2", bk_prealloc_name(pa), cs);
	tpath(q, sizeof(q), name);
	tpath(raw, sizeof(raw), "expect.raw");
	unlink(raw);
	r = bk_create(q, "qcow2", &o, &bk, &err);
	CHECK_EQ_U(r, 0);
	if (r < 0) {
		fprintf(stderr, "  create %s: %s\n", name, err.msg);
		return;
	}
	CHECK(bk->zero_init);
	CHECK_EQ_U(bk->size, o.size);
	p.bk = bk;
	p.raw = open(raw, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(p.raw >= 0 && ftruncate(p.raw, (off_t)o.size) == 0);
	p.touched = calloc(o.size / cs, 1);
	apply_pattern(&p);
	CHECK_EQ_U(p.failures, 0);
	CHECK_EQ_U(bk_close(bk, &err), 0);
	close(p.raw);
	for (uint64_t i = 0; i < o.size / cs; i++)
		touched += p.touched[i];
	free(p.touched);

	check_qemu_clean(q);
	CHECK_EQ_U(run(out, sizeof(out), "qemu-img info --output=json %s", q), 0);
	CHECK_EQ_U(json_num(out, "virtual-size"), o.size);
	CHECK_EQ_U(json_num(out, "cluster-size"), cs);
	CHECK(strstr(out, "\"format\": \"qcow2\"") != NULL);
	CHECK(strstr(out, "\"compat\": \"1.1\"") != NULL);
	CHECK(strstr(out, "\"corrupt\": false") != NULL);
	actual = json_num(out, "actual-size");
	check_identical(q, raw);

	switch (pa) {
	case BK_PREALLOC_OFF:
	case BK_PREALLOC_METADATA: {
		/* Data clusters touched, tables, and slack for the filesystem. */
		uint64_t bound = touched * cs + (o.size / cs * 8 + 64ull * cs) + 2 * MiB;
		if (pa == BK_PREALLOC_METADATA)
			bound += 2 * (o.size / cs) * 8;
		CHECK(actual > 0 && (uint64_t)actual <= bound);
		if (!(actual > 0 && (uint64_t)actual <= bound))
			fprintf(stderr, "  %s: actual size %lld, expected at most %llu\n", name, actual,
				(unsigned long long)bound);
		if (pa == BK_PREALLOC_METADATA)
			check_map_linear(q);
		break;
	}
	case BK_PREALLOC_FALLOC:
	case BK_PREALLOC_FULL:
		CHECK(actual >= (long long)o.size);
		if (actual < (long long)o.size)
			fprintf(stderr, "  %s: actual size %lld\n", name, actual);
		break;
	}

	/* And our own reader agrees. */
	r = bk_open(q, NULL, 0, NULL, &bk, &err);
	CHECK_EQ_U(r, 0);
	if (r == 0) {
		CHECK(bk->drv == &bk_qcow2);
		CHECK_EQ_U(compare_bk_raw(bk, raw), 0);
		bk_close(bk, &err);
	}
	unlink(q);
}

static void test_create_preallocations(void)
{
	static const enum bk_prealloc modes[] = { BK_PREALLOC_OFF, BK_PREALLOC_METADATA,
						  BK_PREALLOC_FALLOC, BK_PREALLOC_FULL };
	if (!have_qemu())
		return;
	setup();
	for (size_t m = 0; m < 4; m++) {
		create_case(modes[m], 65536);
		create_case(modes[m], 4096);
	}
	create_case(BK_PREALLOC_OFF, 2u << 20);
	create_case(BK_PREALLOC_METADATA, 2u << 20);
	create_case(BK_PREALLOC_OFF, 512);
	cleanup();
}

static void test_create_options(void)
{
	struct bk_create_opts o = { .size = 64 * MiB, .cluster_size = 3000 };
	struct im_err err = { 0 };
	struct bk *bk = NULL;
	char q[600];

	have_qemu();
	setup();
	tpath(q, sizeof(q), "opt.qcow2");
	CHECK(bk_create(q, "qcow2", &o, &bk, &err) == -EINVAL);
	CHECK_EQ_U(err.exit_class, IM_EXIT_USAGE);
	o.cluster_size = 512;
	o.size = 1ull << 40;
	memset(&err, 0, sizeof(err));
	CHECK(bk_create(q, "qcow2", &o, &bk, &err) == -EINVAL);
	CHECK(strstr(err.msg, "too small") != NULL);
	CHECK(access(q, F_OK) != 0);
	/* The format comes from the name; the file must not exist. */
	o.cluster_size = 0;
	o.size = 64 * MiB;
	memset(&err, 0, sizeof(err));
	CHECK_EQ_U(bk_create(q, NULL, &o, &bk, &err), 0);
	CHECK(bk && bk->drv == &bk_qcow2);
	CHECK_EQ_U(bk_close(bk, &err), 0);
	memset(&err, 0, sizeof(err));
	CHECK(bk_create(q, NULL, &o, &bk, &err) == -EEXIST);
	check_qemu_clean(q);

	/* A size that is no multiple of the cluster size, written at its end. */
	for (int pa = BK_PREALLOC_OFF; pa <= BK_PREALLOC_METADATA; pa++) {
		unsigned char tail[1536];
		char out[4096];
		struct bk_create_opts odd = { .size = 10 * MiB + 1536, .prealloc = (enum bk_prealloc)pa };
		unlink(q);
		memset(&err, 0, sizeof(err));
		CHECK_EQ_U(bk_create(q, "qcow2", &odd, &bk, &err), 0);
		if (!bk)
			continue;
		memset(tail, 0xa5, sizeof(tail));
		CHECK_EQ_U(bk_pwrite(bk, tail, sizeof(tail), odd.size - sizeof(tail), &err), 0);
		CHECK_EQ_U(bk_close(bk, &err), 0);
		check_qemu_clean(q);
		CHECK_EQ_U(run(out, sizeof(out), "qemu-io -r -f qcow2 -c 'read -P 0xa5 %llu 1536' "
			       "-c 'read -P 0 0 %llu' %s", (unsigned long long)(odd.size - 1536),
			       (unsigned long long)(odd.size - 1536), q), 0);
		CHECK(strstr(out, "read 1536/1536") && !strstr(out, "failed"));
	}
	cleanup();
}

/* A 64 GiB disk with every table laid out, and a 1 TiB sparse one:
 * cheap in memory and time, written at both ends. */
static void test_create_large(void)
{
	static const struct { uint64_t size; enum bk_prealloc pa; } cases[] = {
		{ 64ull << 30, BK_PREALLOC_METADATA }, { 1ull << 40, BK_PREALLOC_OFF } };
	unsigned char buf[70000];
	struct rusage ru0, ru1;

	if (!have_qemu())
		return;
	setup();
	for (size_t i = 0; i < 2; i++) {
		struct bk_create_opts o = { .size = cases[i].size, .prealloc = cases[i].pa };
		struct im_err err = { 0 };
		struct bk *bk = NULL;
		char q[600], out[4096];

		tpath(q, sizeof(q), "large.qcow2");
		getrusage(RUSAGE_SELF, &ru0);
		CHECK_EQ_U(bk_create(q, "qcow2", &o, &bk, &err), 0);
		if (!bk)
			continue;
		fill(buf, sizeof(buf));
		CHECK_EQ_U(bk_pwrite(bk, buf, sizeof(buf), 12345, &err), 0);
		CHECK_EQ_U(bk_pwrite(bk, buf, sizeof(buf), o.size - sizeof(buf) - 99, &err), 0);
		CHECK_EQ_U(bk_pwrite(bk, buf, sizeof(buf), o.size / 2 + 1, &err), 0);
		CHECK_EQ_U(bk_close(bk, &err), 0);
		getrusage(RUSAGE_SELF, &ru1);
#ifndef __SANITIZE_ADDRESS__
		/* The tables are not kept in memory. */
		CHECK(ru1.ru_maxrss - ru0.ru_maxrss < 100 * 1024);
#endif
		check_qemu_clean(q);
		CHECK_EQ_U(run(out, sizeof(out), "qemu-img info --output=json %s", q), 0);
		CHECK_EQ_U(json_num(out, "virtual-size"), o.size);
		CHECK(json_num(out, "actual-size") < 64 * (long long)MiB);
		CHECK_EQ_U(run(out, sizeof(out), "qemu-io -r -f qcow2 -c 'read -P 0 0 12345' "
			       "-c 'read -P 0 %llu 65536' %s", (unsigned long long)(o.size / 4), q), 0);
		CHECK(strstr(out, "read 65536/65536") && !strstr(out, "failed"));
		unlink(q);
	}
	cleanup();
}

/* Create, write, close; open for writing, write more, close. */
static void test_reopen_write(void)
{
	char q[600], raw[600];
	struct bk_create_opts o = { .size = 256 * MiB, .cluster_size = 65536 };
	struct im_err err = { 0 };
	struct pattern p = { .size = o.size, .cs = 65536 };
	struct bk *bk = NULL;

	if (!have_qemu())
		return;
	setup();
	tpath(q, sizeof(q), "re.qcow2");
	tpath(raw, sizeof(raw), "re.raw");
	p.raw = open(raw, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(p.raw >= 0 && ftruncate(p.raw, (off_t)o.size) == 0);
	CHECK_EQ_U(bk_create(q, "qcow2", &o, &bk, &err), 0);
	p.bk = bk;
	apply_pattern(&p);
	CHECK_EQ_U(bk_close(bk, &err), 0);
	CHECK_EQ_U(bk_open(q, NULL, BK_OPEN_WRITE, NULL, &bk, &err), 0);
	if (bk) {
		p.bk = bk;
		apply_pattern(&p);
		CHECK_EQ_U(bk_flush(bk, &err), 0);
		CHECK_EQ_U(compare_bk_raw(bk, raw), 0);
		CHECK_EQ_U(bk_close(bk, &err), 0);
	}
	CHECK_EQ_U(p.failures, 0);
	close(p.raw);
	check_qemu_clean(q);
	check_identical(q, raw);
	cleanup();
}

/* ---- reading what qemu-img wrote ---- */

/* 64 MiB: random data, zeros written as data, holes, partial clusters. */
static void make_source(const char *raw)
{
	unsigned char *buf = malloc(4 * MiB);
	int fd = open(raw, O_RDWR | O_CREAT | O_TRUNC, 0644);

	CHECK(fd >= 0 && ftruncate(fd, 64 * MiB) == 0);
	fill(buf, 4 * MiB);
	CHECK(pwrite(fd, buf, 4 * MiB, 0) == (ssize_t)(4 * MiB));
	for (int i = 0; i < 40; i++) {
		size_t len = 1 + rnd() % 300000;
		uint64_t off = rnd() % (64 * MiB - len);
		fill(buf, len);
		if (i % 7 == 0)
			memset(buf, 0, len);   /* zeros written as data */
		if (i % 5 == 0)
			memset(buf, 0x5a, len);   /* compresses well */
		CHECK(pwrite(fd, buf, len, (off_t)off) == (ssize_t)len);
	}
	/* Something that is certainly a hole: 40..48 MiB. */
	CHECK(fallocate(fd, 0x02 | 0x01, 40 * (off_t)MiB, 8 * (off_t)MiB) == 0);
	fill(buf, 777);
	CHECK(pwrite(fd, buf, 777, 64 * (off_t)MiB - 777) == 777);
	close(fd);
	free(buf);
}

/* Open by probing, compare every byte, and check that zero status is true
 * and (holes: the image maps no host cluster there) that the known hole
 * is reported as zeros. */
static void check_read(const char *q, const char *raw, const char *what, bool holes)
{
	struct im_err err = { 0 };
	struct bk *bk = NULL;
	unsigned char *buf = malloc(MiB);
	int r = bk_open(q, NULL, 0, NULL, &bk, &err), fd = open(raw, O_RDONLY);
	uint64_t off = 0, zero_bytes = 0, steps = 0;
	bool hole_zero = false;

	CHECK_EQ_U(r, 0);
	if (r < 0) {
		fprintf(stderr, "  %s: %s\n", what, err.msg);
		free(buf);
		close(fd);
		return;
	}
	CHECK(bk->drv == &bk_qcow2);
	CHECK_EQ_U(bk->size, 64 * MiB);
	if (compare_bk_raw(bk, raw)) {
		fprintf(stderr, "  %s: contents differ\n", what);
		CHECK(0);
	}
	while (off < bk->size && steps++ < 100000) {
		uint64_t pnum = 0;
		int st = bk_block_status(bk, off, bk->size - off, &pnum, &err);
		CHECK(st == BK_STATUS_DATA || st == BK_STATUS_ZERO);
		if (st < 0 || pnum == 0)
			break;
		if (st == BK_STATUS_ZERO) {
			/* It must really read as zeros in the source. */
			for (uint64_t o = off; o < off + pnum;) {
				size_t n = off + pnum - o < MiB ? (size_t)(off + pnum - o) : MiB;
				CHECK(pread(fd, buf, n, (off_t)o) == (ssize_t)n);
				for (size_t i = 0; i < n; i++)
					if (buf[i]) {
						fprintf(stderr, "  %s: status zero at %llu is not\n", what,
							(unsigned long long)(o + i));
						CHECK(0);
						break;
					}
				o += n;
			}
			zero_bytes += pnum;
			if (off <= 41 * MiB && off + pnum >= 47 * MiB)
				hole_zero = true;
		}
		off += pnum;
	}
	CHECK_EQ_U(off, bk->size);
	CHECK(hole_zero == holes);
	CHECK(holes ? zero_bytes >= 8 * MiB : zero_bytes == 0);
	if (hole_zero != holes)
		fprintf(stderr, "  %s: the hole is not reported as zeros\n", what);
	CHECK_EQ_U(bk_close(bk, &err), 0);
	close(fd);
	free(buf);
}

static void test_read_qemu_images(void)
{
	static const struct { const char *name, *opts; bool holes; } cases[] = {
		{ "plain", "", true },
		{ "zlib", "-c", true },
		{ "zstd", "-c -o compression_type=zstd", true },
		{ "v2", "-o compat=0.10", true },
		{ "v2-zlib", "-c -o compat=0.10", true },
		{ "c512", "-o cluster_size=512", true },
		{ "c512-zlib", "-c -o cluster_size=512", true },
		{ "c2m", "-o cluster_size=2M", true },
		{ "c2m-zstd", "-c -o cluster_size=2M,compression_type=zstd", true },
		{ "subclusters", "-o extended_l2=on", true },
		{ "subclusters-zlib", "-c -o extended_l2=on,cluster_size=128k", true },
		{ "refcount1", "-o refcount_bits=1", true },
		/* Every cluster mapped: all of it is data. */
		{ "prealloc", "-o preallocation=metadata", false },
	};
	char raw[600], q[600], out[4096];

	if (!have_qemu())
		return;
	setup();
	tpath(raw, sizeof(raw), "src.raw");
	make_source(raw);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		tpath(q, sizeof(q), cases[i].name);
		int st = run(out, sizeof(out), "qemu-img convert -f raw -O qcow2 %s %s %s", cases[i].opts,
			     raw, q);
		CHECK_EQ_U(st, 0);
		if (st) {
			fprintf(stderr, "  %s: %s\n", cases[i].name, out);
			continue;
		}
		check_read(q, raw, cases[i].name, cases[i].holes);
		unlink(q);
	}
	cleanup();
}

/* Zero clusters (v3 zero flag, with and without a host cluster) and
 * subclusters written partially, made with qemu-io. */
static void test_read_zero_clusters(void)
{
	static const char *const cmds[] = {
		"-c 'write -z 65536 131072'",            /* allocated -> zero flag kept allocated */
		"-c 'write -z -u 262144 196608'",        /* may unmap */
		"-c 'write -z 41943040 65536'",          /* over the hole */
		"-c 'write -z 1000 5000'",               /* partial: zeros written */
	};
	char raw[600], q[600], out[4096], sub[600];

	if (!have_qemu() || run(NULL, 0, "qemu-io --version") != 0)
		return;
	setup();
	tpath(raw, sizeof(raw), "src.raw");
	tpath(q, sizeof(q), "z.qcow2");
	tpath(sub, sizeof(sub), "sub.qcow2");
	make_source(raw);
	CHECK_EQ_U(run(out, sizeof(out), "qemu-img convert -f raw -O qcow2 %s %s", raw, q), 0);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(*cmds); i++)
		CHECK_EQ_U(run(out, sizeof(out), "qemu-io -f qcow2 %s %s", cmds[i], q), 0);
	/* The same zeros in the raw expectation. */
	for (size_t i = 0; i < sizeof(cmds) / sizeof(*cmds); i++)
		CHECK_EQ_U(run(out, sizeof(out), "qemu-io -f raw %s %s", cmds[i], raw), 0);
	CHECK_EQ_U(run(out, sizeof(out), "qemu-img map --output=json %s | grep -c '\"zero\": true, \"data\": false, \"offset\"'", q), 0);
	check_read(q, raw, "zero clusters", true);

	/* Subclusters: partial writes into empty clusters of a 64 KiB-cluster image. */
	CHECK_EQ_U(run(out, sizeof(out), "qemu-img convert -f raw -O qcow2 -o extended_l2=on %s %s",
		       raw, sub), 0);
	CHECK_EQ_U(run(out, sizeof(out), "qemu-io -f qcow2 -c 'write -P 0x11 42991616 2048' "
		       "-c 'write -P 0x22 43057152 4096' -c 'write -z 0 2048' %s", sub), 0);
	CHECK_EQ_U(run(out, sizeof(out), "qemu-io -f raw -c 'write -P 0x11 42991616 2048' "
		       "-c 'write -P 0x22 43057152 4096' -c 'write -z 0 2048' %s", raw), 0);
	CHECK_EQ_U(run(out, sizeof(out), "qemu-img compare %s %s", sub, raw), 0);
	/* 41..48 MiB is still a hole except the two writes: check_read wants
	 * 41..47 zero, so compare only. */
	{
		struct im_err err = { 0 };
		struct bk *bk = NULL;
		uint64_t pnum = 0;
		CHECK_EQ_U(bk_open(sub, NULL, 0, NULL, &bk, &err), 0);
		if (bk) {
			CHECK_EQ_U(compare_bk_raw(bk, raw), 0);
			/* The cluster at 41 MiB: subcluster 0 data, the rest zeros. */
			CHECK_EQ_U(bk_block_status(bk, 42991616, 65536, &pnum, &err), BK_STATUS_DATA);
			CHECK_EQ_U(pnum, 2048);
			CHECK_EQ_U(bk_block_status(bk, 42991616 + 2048, 65536 - 2048, &pnum, &err),
				   BK_STATUS_ZERO);
			CHECK_EQ_U(pnum, 65536 - 2048);
			bk_close(bk, &err);
		}
	}
	cleanup();
}

/* ---- writing into images qemu-img made ---- */

static void test_write_qemu_images(void)
{
	static const char *const opts[] = { "-c", "-o compat=0.10", "-o refcount_bits=1",
					    "-c -o refcount_bits=64,cluster_size=4096",
					    "-c -o compression_type=zstd" };
	char src[600], raw[600], q[600], out[4096];

	if (!have_qemu())
		return;
	setup();
	tpath(src, sizeof(src), "src.raw");
	tpath(raw, sizeof(raw), "expect.raw");
	tpath(q, sizeof(q), "w.qcow2");
	for (size_t i = 0; i < sizeof(opts) / sizeof(*opts); i++) {
		struct im_err err = { 0 };
		struct pattern p = { .size = 64 * MiB, .cs = 4096 };
		struct bk *bk = NULL;
		unsigned char buf[5000];

		make_source(src);
		CHECK_EQ_U(run(out, sizeof(out), "qemu-img convert -f raw -O qcow2 %s %s %s", opts[i],
			       src, q), 0);
		CHECK_EQ_U(run(out, sizeof(out), "cp --sparse=always %s %s", src, raw), 0);
		CHECK_EQ_U(bk_open(q, NULL, BK_OPEN_WRITE, NULL, &bk, &err), 0);
		if (!bk) {
			fprintf(stderr, "  %s: %s\n", opts[i], err.msg);
			continue;
		}
		p.bk = bk;
		p.raw = open(raw, O_RDWR);
		/* Into the first 4 MiB of data (compressed in -c): partial,
		 * whole, zeroed partially and wholly. */
		fill(buf, sizeof(buf));
		pat_write(&p, buf, sizeof(buf), 70000);
		pat_write(&p, buf, 4096, 65536 * 3);
		{
			unsigned char *big = malloc(65536);
			fill(big, 65536);
			pat_write(&p, big, 65536, 65536 * 12);
			free(big);
		}
		pat_zero(&p, 65536 * 5 + 3, 1000);
		pat_zero(&p, 65536 * 7, 65536 * 3);
		for (int k = 0; k < 40; k++) {
			size_t len = 1 + rnd() % sizeof(buf);
			fill(buf, len);
			pat_write(&p, buf, len, rnd() % (64 * MiB - len));
		}
		pat_zero(&p, 10 * MiB + 17, 2 * MiB);
		CHECK_EQ_U(p.failures, 0);
		CHECK_EQ_U(compare_bk_raw(bk, raw), 0);
		CHECK_EQ_U(bk_close(bk, &err), 0);
		close(p.raw);
		check_qemu_clean(q);
		check_identical(q, raw);
	}
	cleanup();
}

/* ---- refusals ---- */

static void patch(const char *path, uint64_t off, const void *bytes, size_t n)
{
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0 && pwrite(fd, bytes, n, (off_t)off) == (ssize_t)n);
	if (fd >= 0)
		close(fd);
}

static int open_err(const char *path, const char *fmt, unsigned flags, struct im_err *err)
{
	struct bk *bk = NULL;
	int r;

	memset(err, 0, sizeof(*err));
	r = bk_open(path, fmt, flags, NULL, &bk, err);
	if (r == 0)
		bk_close(bk, err);
	return r;
}

static void test_refusals(void)
{
	char base[600], top[600], enc[600], q[600], out[4096];
	struct im_err err;
	unsigned char b;

	if (!have_qemu())
		return;
	setup();
	tpath(base, sizeof(base), "base.qcow2");
	tpath(top, sizeof(top), "top.qcow2");
	tpath(enc, sizeof(enc), "enc.qcow2");
	tpath(q, sizeof(q), "q.qcow2");

	CHECK_EQ_U(run(out, sizeof(out), "qemu-img create -f qcow2 %s 16M", base), 0);
	CHECK_EQ_U(run(out, sizeof(out), "qemu-img create -f qcow2 -b %s -F qcow2 %s", base, top), 0);
	CHECK(open_err(top, NULL, 0, &err) == -ENOTSUP);
	CHECK_EQ_U(err.exit_class, IM_EXIT_UNSUPP);
	CHECK(strstr(err.msg, "backing") != NULL);
	CHECK(strstr(err.msg, "qemu-img convert") != NULL);

	if (run(out, sizeof(out), "qemu-img create -f qcow2 --object secret,id=s0,data=abc "
		"-o encrypt.format=luks,encrypt.key-secret=s0,encrypt.iter-time=10 %s 16M", enc) != 0) {
		/* No LUKS support: mark a plain image AES-encrypted. */
		unsigned char one[4] = { 0, 0, 0, 1 };
		CHECK_EQ_U(run(out, sizeof(out), "qemu-img create -f qcow2 %s 16M", enc), 0);
		patch(enc, 32, one, 4);
	}
	CHECK(open_err(enc, NULL, 0, &err) == -ENOTSUP);
	CHECK_EQ_U(err.exit_class, IM_EXIT_UNSUPP);
	CHECK(strstr(err.msg, "encrypt") != NULL);

	/* The corrupt bit. */
	CHECK_EQ_U(run(out, sizeof(out), "qemu-img create -f qcow2 %s 16M", q), 0);
	CHECK_EQ_U(open_err(q, NULL, 0, &err), 0);
	b = 2;
	patch(q, 79, &b, 1);
	CHECK(open_err(q, NULL, 0, &err) == -EBADMSG);
	CHECK(strstr(err.msg, "marked corrupt") != NULL);
	/* An unknown incompatible feature; a dirty image opens read-only only. */
	b = 0x80;
	patch(q, 79, &b, 1);
	CHECK(open_err(q, NULL, 0, &err) == -ENOTSUP);
	CHECK(strstr(err.msg, "bit 7") != NULL);
	b = 1;
	patch(q, 79, &b, 1);
	CHECK_EQ_U(open_err(q, NULL, 0, &err), 0);
	CHECK(open_err(q, NULL, BK_OPEN_WRITE, &err) == -ENOTSUP);
	CHECK(strstr(err.msg, "dirty") != NULL);
	/* Extended L2 (bit 4) opens for reading; compression type 7 does not. */
	b = 0;
	patch(q, 79, &b, 1);
	b = 8;
	patch(q, 79, &b, 1);
	b = 7;
	patch(q, 104, &b, 1);
	CHECK(open_err(q, NULL, 0, &err) == -ENOTSUP);
	CHECK(strstr(err.msg, "compression type 7") != NULL);
	b = 0;
	patch(q, 79, &b, 1);
	CHECK(open_err(q, NULL, 0, &err) == -EBADMSG);   /* type without its bit */
	patch(q, 104, &b, 1);
	CHECK_EQ_U(open_err(q, NULL, 0, &err), 0);
	/* Version 4: not ours when probing; refused when asked for. */
	b = 4;
	patch(q, 7, &b, 1);
	{
		unsigned char hdr[512];
		int fd = open(q, O_RDONLY);
		CHECK(fd >= 0 && pread(fd, hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr));
		close(fd);
		CHECK_EQ_U(bk_qcow2.probe(hdr, sizeof(hdr)), 0);
		hdr[7] = 3;
		CHECK_EQ_U(bk_qcow2.probe(hdr, sizeof(hdr)), 100);
		hdr[7] = 2;
		CHECK_EQ_U(bk_qcow2.probe(hdr, sizeof(hdr)), 100);
		CHECK_EQ_U(bk_qcow2.probe(hdr, 7), 0);
		CHECK_EQ_U(bk_raw.probe(hdr, sizeof(hdr)), 1);
	}
	CHECK(open_err(q, "qcow2", 0, &err) == -ENOTSUP);

	/* An external data file. */
	{
		char data[600];
		tpath(data, sizeof(data), "data.raw");
		CHECK_EQ_U(run(out, sizeof(out), "qemu-img create -f qcow2 -o data_file=%s %s 16M", data,
			       top), 0);
		CHECK(open_err(top, NULL, 0, &err) == -ENOTSUP);
		CHECK(strstr(err.msg, "external data file") != NULL);
	}
	/* Internal snapshots: readable, not writable. */
	CHECK_EQ_U(run(out, sizeof(out), "qemu-img create -f qcow2 %s 16M && qemu-img snapshot -c s1 %s",
		       base, base), 0);
	CHECK_EQ_U(open_err(base, NULL, 0, &err), 0);
	CHECK(open_err(base, NULL, BK_OPEN_WRITE, &err) == -ENOTSUP);
	cleanup();
}

/* ---- damage ---- */

static void test_truncated(void)
{
	char raw[600], q[600], out[4096];
	unsigned char *buf = malloc(MiB);
	struct stat st;

	if (!have_qemu())
		return;
	setup();
	tpath(raw, sizeof(raw), "src.raw");
	make_source(raw);
	for (int compressed = 0; compressed < 2; compressed++) {
		struct im_err err = { 0 };
		struct bk *bk = NULL;
		int r, errors = 0;

		tpath(q, sizeof(q), "t.qcow2");
		CHECK_EQ_U(run(out, sizeof(out), "qemu-img convert -f raw -O qcow2 %s %s %s",
			       compressed ? "-c" : "", raw, q), 0);
		CHECK(stat(q, &st) == 0 && truncate(q, st.st_size / 2) == 0);
		r = bk_open(q, NULL, 0, NULL, &bk, &err);
		if (r < 0) {
			CHECK(r == -EBADMSG || r == -EIO);
			continue;
		}
		for (uint64_t off = 0; off < bk->size; off += MiB) {
			memset(&err, 0, sizeof(err));
			r = bk_pread(bk, buf, MiB, off, &err);
			if (r < 0) {
				CHECK(r == -EBADMSG || r == -EIO);
				CHECK(err.exit_class == IM_EXIT_SOURCE || err.exit_class == IM_EXIT_IO);
				errors++;
			}
		}
		CHECK(errors > 0);
		bk_close(bk, &err);
	}
	free(buf);
	cleanup();
}

static uint64_t get_be64(const char *path, uint64_t off)
{
	unsigned char b[8] = { 0 };
	uint64_t v = 0;
	int fd = open(path, O_RDONLY);

	CHECK(fd >= 0 && pread(fd, b, 8, (off_t)off) == 8);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

static void put_be64_at(const char *path, uint64_t off, uint64_t v)
{
	unsigned char b[8];
	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (unsigned char)v;
	patch(path, off, b, 8);
}

static int read_at(const char *path, unsigned flags, uint64_t off, size_t len)
{
	struct im_err err = { 0 };
	struct bk *bk = NULL;
	unsigned char *buf = malloc(len);
	int r = bk_open(path, "qcow2", flags, NULL, &bk, &err);

	if (r == 0) {
		r = bk_pread(bk, buf, len, off, &err);
		bk_close(bk, &err);
	}
	free(buf);
	return r;
}

/* Single, chosen faults in the tables. */
static void test_targeted_damage(void)
{
	char raw[600], c[600], q[600], out[4096];
	unsigned char *buf = malloc(MiB), *l1a = malloc(512), *l1b = malloc(512);
	uint64_t l1, l2, e;
	int fd;

	if (!have_qemu())
		return;
	setup();
	tpath(raw, sizeof(raw), "src.raw");
	tpath(c, sizeof(c), "c.qcow2");
	tpath(q, sizeof(q), "q.qcow2");
	/* Clusters half random, half zeros: compressed to many sectors. */
	fd = open(raw, O_RDWR | O_CREAT | O_TRUNC, 0644);
	memset(buf, 0, MiB);
	for (int i = 0; i < 16; i++)
		fill(buf + i * 65536, 32768);
	CHECK(fd >= 0 && pwrite(fd, buf, MiB, 0) == (ssize_t)MiB);
	close(fd);
	CHECK_EQ_U(run(out, sizeof(out), "qemu-img convert -f raw -O qcow2 -c %s %s", raw, c), 0);
	CHECK_EQ_U(run(out, sizeof(out), "qemu-img convert -f raw -O qcow2 %s %s", raw, q), 0);

	/* Compressed: x = 62 - (16 - 8) = 54; sector count in bits 54-61. */
	l1 = get_be64(c, 40);
	l2 = get_be64(c, l1) & 0x00fffffffffffe00ull;
	e = get_be64(c, l2 + 15 * 8);
	CHECK(e >> 62 == 1);
	CHECK_EQ_U(read_at(c, 0, 15 * 65536, 65536), 0);
	/* Too few sectors: the data stops before a whole cluster. */
	put_be64_at(c, l2 + 15 * 8, e & ~(0xffull << 54));
	CHECK(read_at(c, 0, 15 * 65536, 65536) == -EBADMSG);
	/* Too many (the last cluster): reading stops at the end of the file. */
	put_be64_at(c, l2 + 15 * 8, e | (0xffull << 54));
	CHECK_EQ_U(read_at(c, 0, 15 * 65536, 65536), 0);
	/* Flagged "refcount one": not valid for a compressed cluster. */
	put_be64_at(c, l2 + 15 * 8, e | 1ull << 63);
	CHECK(read_at(c, 0, 15 * 65536, 65536) == -EBADMSG);
	/* Past the end of the file. */
	put_be64_at(c, l2 + 15 * 8, (e & ~((1ull << 54) - 1)) | (1ull << 40));
	CHECK(read_at(c, 0, 15 * 65536, 65536) == -EBADMSG);
	put_be64_at(c, l2 + 15 * 8, e);
	CHECK_EQ_U(read_at(c, 0, 15 * 65536, 65536), 0);
	/* Open for writing, the file ends inside its last cluster: the last
	 * compressed cluster still reads. */
	CHECK_EQ_U(read_at(c, BK_OPEN_WRITE, 15 * 65536, 65536), 0);

	/* Standard clusters. */
	l1 = get_be64(q, 40);
	l2 = get_be64(q, l1) & 0x00fffffffffffe00ull;
	e = get_be64(q, l2);
	CHECK(e >> 63 == 1 && (e & 0x00fffffffffffe00ull));
	put_be64_at(q, l2, e + 512);   /* misaligned */
	CHECK(read_at(q, 0, 0, 4096) == -EBADMSG);
	put_be64_at(q, l2, e | 0x100);   /* a reserved bit */
	CHECK(read_at(q, 0, 0, 4096) == -EBADMSG);
	put_be64_at(q, l2, 1ull << 63 | 1ull << 50);   /* past the end of the file */
	CHECK(read_at(q, 0, 0, 4096) == -EBADMSG);
	/* Pointing at the L1 table: readable, but never written over. */
	put_be64_at(q, l2, 1ull << 63 | (l1 & ~65535ull));
	fd = open(q, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, l1a, 512, (off_t)l1) == 512);
	close(fd);
	memset(buf, 0xee, 4096);
	{
		struct im_err err = { 0 };
		struct bk *bk = NULL;
		CHECK_EQ_U(bk_open(q, NULL, BK_OPEN_WRITE, NULL, &bk, &err), 0);
		if (bk) {
			CHECK(bk_pwrite(bk, buf, 4096, 0, &err) == -EBADMSG);
			CHECK(bk_zero(bk, 0, 4096, &err) == -EBADMSG);
			bk_close(bk, &err);
		}
	}
	fd = open(q, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, l1b, 512, (off_t)l1) == 512);
	close(fd);
	CHECK(memcmp(l1a, l1b, 512) == 0);
	put_be64_at(q, l2, e);
	/* An L1 entry past the end, or misaligned. */
	put_be64_at(q, l1, 1ull << 63 | 1ull << 45);
	CHECK(read_at(q, 0, 0, 4096) == -EBADMSG);
	put_be64_at(q, l1, (l2 + 4096) | 1ull << 63);
	CHECK(read_at(q, 0, 0, 4096) == -EBADMSG);
	put_be64_at(q, l1, l2 | 1ull << 63);
	CHECK_EQ_U(read_at(q, 0, 0, 4096), 0);
	/* The header: L1 too small for the size, tables outside the file. */
	put_be64_at(q, 24, 1ull << 40);
	CHECK(read_at(q, 0, 0, 4096) == -EBADMSG);
	put_be64_at(q, 24, MiB);
	put_be64_at(q, 40, 1ull << 40);
	CHECK(read_at(q, 0, 0, 4096) == -EBADMSG);
	put_be64_at(q, 40, l1 + 8);
	CHECK(read_at(q, 0, 0, 4096) == -EBADMSG);
	put_be64_at(q, 40, l1);
	CHECK_EQ_U(read_at(q, 0, 0, 4096), 0);
	free(buf);
	free(l1a);
	free(l1b);
	cleanup();
}

/* Small images to mutate. */
static void test_mutations(void)
{
	static const char *const opts[] = { "", "-c", "-o extended_l2=on", "-o compat=0.10 -c",
					    "-o cluster_size=4096" };
	enum { N_BASE = sizeof(opts) / sizeof(*opts) };
	unsigned char *img[N_BASE] = { 0 }, *buf = malloc(MiB), *wbuf = malloc(70000);
	size_t img_len[N_BASE] = { 0 };
	char raw[600], q[600], out[4096];
	struct rusage ru0, ru1;
	int opened = 0, failed_reads = 0;

	if (!have_qemu())
		return;
	setup();
	tpath(raw, sizeof(raw), "src.raw");
	tpath(q, sizeof(q), "m.qcow2");
	{
		/* 4 MiB: data, zeros, a hole. */
		int fd = open(raw, O_RDWR | O_CREAT | O_TRUNC, 0644);
		CHECK(fd >= 0 && ftruncate(fd, 4 * MiB) == 0);
		fill(buf, MiB);
		CHECK(pwrite(fd, buf, MiB, 0) == (ssize_t)MiB);
		memset(buf, 0x33, MiB);
		CHECK(pwrite(fd, buf, MiB, 2 * MiB + 5) == (ssize_t)MiB);
		close(fd);
	}
	for (int i = 0; i < N_BASE; i++) {
		struct stat st;
		int fd;
		CHECK_EQ_U(run(out, sizeof(out), "qemu-img convert -f raw -O qcow2 %s %s %s", opts[i], raw,
			       q), 0);
		fd = open(q, O_RDONLY);
		CHECK(fd >= 0 && fstat(fd, &st) == 0);
		img_len[i] = (size_t)st.st_size;
		img[i] = malloc(img_len[i]);
		CHECK(pread(fd, img[i], img_len[i], 0) == (ssize_t)img_len[i]);
		close(fd);
	}
	getrusage(RUSAGE_SELF, &ru0);
	for (int iter = 0; iter < 400; iter++) {
		int bi = (int)(rnd() % N_BASE), fd, nmut = 1 + (int)(rnd() % 4);
		size_t len = img_len[bi];
		unsigned char *m = malloc(len);
		uint32_t cb;
		uint64_t l1off, l2off = 0, rtoff;
		unsigned flags = rnd() % 4 == 0 ? BK_OPEN_WRITE : 0;
		struct im_err err = { 0 };
		struct bk *bk = NULL;
		int r;

		memcpy(m, img[bi], len);
		cb = (uint32_t)m[23];
		l1off = (uint64_t)m[44] << 24 | (uint64_t)m[45] << 16 | (uint64_t)m[46] << 8 | m[47];
		rtoff = (uint64_t)m[52] << 24 | (uint64_t)m[53] << 16 | (uint64_t)m[54] << 8 | m[55];
		if (l1off + 8 <= len)
			for (int k = 0; k < 8; k++)
				l2off = l2off << 8 | m[l1off + k];
		l2off &= 0x00fffffffffffe00ull;
		for (int k = 0; k < nmut; k++) {
			uint64_t where;
			switch (rnd() % 5) {
			case 0: where = rnd() % 112; break;
			case 1: where = l1off + rnd() % 64; break;
			case 2: where = l2off + rnd() % (1ull << (cb < 21 ? cb : 12)); break;
			case 3: where = rtoff + rnd() % 64; break;
			default: where = rnd() % len; break;
			}
			if (where >= len)
				continue;
			switch (rnd() % 4) {
			case 0: m[where] ^= (unsigned char)(1u << (rnd() % 8)); break;
			case 1: m[where] = (unsigned char)rnd(); break;
			case 2: m[where] = 0xff; break;
			default: {
				/* An entire big-endian field or entry. */
				uint64_t v = rnd() % 3 == 0 ? rnd() : rnd() % 2 ? len + rnd() % 100000 :
									 (rnd() & 0xffff) << 9;
				where &= ~7ull;
				for (int k2 = 7; k2 >= 0 && where + 7 < len; k2--, v >>= 8)
					m[where + (size_t)k2] = (unsigned char)v;
			}
			}
		}
		fd = open(q, O_RDWR | O_CREAT | O_TRUNC, 0644);
		CHECK(fd >= 0 && write(fd, m, len) == (ssize_t)len);
		close(fd);
		free(m);

		r = bk_open(q, "qcow2", flags, NULL, &bk, &err);
		if (r < 0) {
			CHECK(r == -EBADMSG || r == -ENOTSUP || r == -EIO || r == -ENOMEM);
			CHECK(err.exit_class != 0 && err.msg[0]);
			continue;
		}
		opened++;
		for (int k = 0; k < 12; k++) {
			uint64_t n = bk->size < MiB ? bk->size : MiB, off;
			if (!n)
				break;
			if (k >= 4)
				n = n < 65536 ? n : 65536;
			off = k < 4 ? (uint64_t)k * MiB : rnd() % (bk->size - n + 1);
			if (off + n > bk->size)
				continue;
			memset(&err, 0, sizeof(err));
			r = bk_pread(bk, buf, (size_t)n, off, &err);
			CHECK(r == 0 || r == -EBADMSG || r == -EIO);
			if (r < 0)
				failed_reads++;
			if (flags && k % 3 == 0 && bk->size > 70000) {
				fill(wbuf, 70000);
				r = bk_pwrite(bk, wbuf, 70000, rnd() % (bk->size - 70000), &err);
				CHECK(r == 0 || r == -EBADMSG || r == -EIO || r == -ENOSPC || r == -ENOTSUP);
				r = bk_zero(bk, rnd() % (bk->size - 70000), 70000, &err);
				CHECK(r == 0 || r == -EBADMSG || r == -EIO || r == -ENOSPC || r == -ENOTSUP);
			}
		}
		for (uint64_t off = 0, steps = 0; off < bk->size && steps < 2000; steps++) {
			uint64_t pnum = 0;
			memset(&err, 0, sizeof(err));
			r = bk_block_status(bk, off, bk->size - off, &pnum, &err);
			CHECK(r == BK_STATUS_DATA || r == BK_STATUS_ZERO || r == -EBADMSG || r == -EIO);
			if (r < 0)
				break;
			off += pnum;
		}
		r = bk_close(bk, &err);
		CHECK(r == 0 || r == -EBADMSG || r == -EIO || r == -ENOSPC);
	}
	getrusage(RUSAGE_SELF, &ru1);
#ifndef __SANITIZE_ADDRESS__
	CHECK(ru1.ru_maxrss - ru0.ru_maxrss < 256 * 1024);
#endif
	CHECK(opened > 20);
	CHECK(failed_reads > 0);
	fprintf(stderr, "  mutations: %d of 400 opened, %d reads refused\n", opened, failed_reads);
	for (int i = 0; i < N_BASE; i++)
		free(img[i]);
	free(buf);
	free(wbuf);
	cleanup();
}

UNIT_MAIN(UNIT(test_create_options), UNIT(test_create_preallocations), UNIT(test_create_large),
	  UNIT(test_reopen_write), UNIT(test_read_qemu_images), UNIT(test_read_zero_clusters),
	  UNIT(test_write_qemu_images), UNIT(test_refusals), UNIT(test_truncated), UNIT(test_targeted_damage),
	  UNIT(test_mutations))
