/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Direct writes beside the page cache (imager/engine/core/util.h, struct dio):
 * whatever the offset, the length and the buffer's alignment, the file
 * must end up holding exactly what was written, on the disk's file system
 * (the big aligned middle goes direct), on tmpfs, and with no direct
 * descriptor (everything buffered), also when buffered and direct writes
 * cover the same bytes one after the other.  The file is checked through
 * a fresh descriptor against a model in memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "unit-fs.h"
#include "util.h"

#define FILE_LEN (8u << 20)

static unsigned char *model, *src;

static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

/* The file's bytes equal the model's. */
static bool same(const char *path)
{
	unsigned char *got = malloc(FILE_LEN);
	int fd = open(path, O_RDONLY);
	bool ok = got && fd >= 0 && util_pread_full(fd, got, FILE_LEN, 0) == 0 &&
		  memcmp(got, model, FILE_LEN) == 0;

	if (fd >= 0)
		close(fd);
	free(got);
	return ok;
}

/* Writes of every shape into path, through a struct dio opened or not;
 * expect_direct: the file system takes O_DIRECT, and it must still be in
 * use after them (no EINVAL fallback). */
static void writes(const char *path, bool open_it, bool expect_direct)
{
	struct dio d = { 0 };
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	const struct {
		size_t off, len, skew;   /* skew: the buffer's distance from alignment */
	} cases[] = {
		{ 0, 4u << 20, 0 },                 /* aligned everything: direct */
		{ 4096 * 3 + 17, (1u << 20) + 100, 5 },  /* unaligned all three: bounce */
		{ 100, 70000, 0 },                  /* just above the direct minimum */
		{ 8192, 4096, 0 },                  /* small: buffered */
		{ 8000, 8000, 3 },                  /* small, over the last two */
		{ 65536, 3u << 20, 4096 },          /* a page-aligned but offset buffer */
		{ FILE_LEN - 70000, 70000, 1 },     /* the end of the file */
		{ 1000, (2u << 20) + 4095, 0 },     /* over earlier buffered bytes */
	};

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(ftruncate(fd, FILE_LEN) == 0);
	memset(model, 0, FILE_LEN);
	if (open_it)
		dio_open(&d, path);
	CHECK_EQ_U(d.on, expect_direct);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned char *buf = src + cases[i].skew;
		for (size_t k = 0; k < cases[i].len; k++)
			buf[k] = (unsigned char)rnd();
		CHECK(dio_pwrite(&d, fd, buf, cases[i].len, cases[i].off) == 0);
		memcpy(model + cases[i].off, buf, cases[i].len);
		if (!same(path))
			fprintf(stderr, "  %s: case %zu differs\n", path, i);
		CHECK(same(path));
	}
	/* Many random shapes. */
	for (int i = 0; i < 200; i++) {
		size_t len = rnd() % (600u << 10), off = rnd() % (FILE_LEN - len), skew = rnd() % 64;
		unsigned char *buf = src + skew;
		for (size_t k = 0; k < len; k++)
			buf[k] = (unsigned char)(k * 7 + (size_t)i);
		CHECK(dio_pwrite(&d, fd, buf, len, off) == 0);
		memcpy(model + off, buf, len);
	}
	CHECK(same(path));
	CHECK_EQ_U(d.on, expect_direct);
	dio_close(&d);
	CHECK(!d.on);
	dio_close(&d);  /* (twice is harmless) */
	close(fd);
	unlink(path);
}

/* Does the folder's file system take O_DIRECT? */
static bool takes_direct(const char *dir)
{
	char tf[340];
	int t;

	snprintf(tf, sizeof(tf), "%s/probe", dir);
	t = open(tf, O_WRONLY | O_CREAT | O_DIRECT, 0644);
	if (t < 0)
		return false;
	close(t);
	unlink(tf);
	return true;
}

/* In a folder of tmpl's file system (skipped when it is not there). */
static void writes_in(const char *tmpl, bool opened)
{
	char dir[300], path[320];

	if (!make_tmpdir(dir, sizeof(dir), tmpl))
		return;
	snprintf(path, sizeof(path), "%s/f", dir);
	if (!opened) {
		writes(path, false, false);
	} else {
		bool direct = takes_direct(dir);
		fprintf(stderr, "# %s: O_DIRECT %s\n", tmpl, direct ? "taken" : "refused: buffered");
		writes(path, true, direct);
	}
	remove_tree(dir);
}

/* The disk's file system (ext4 here: the direct path). */
static void test_direct(void)
{
	writes_in("/var/tmp/imager-dio.XXXXXX", true);
}

/* tmpfs (O_DIRECT taken by newer kernels, refused by older ones). */
static void test_tmpfs(void)
{
	if (access("/dev/shm", W_OK) != 0) {
		fprintf(stderr, "# SKIP: no writable /dev/shm (tmpfs)\n");
		return;
	}
	writes_in("/dev/shm/imager-dio.XXXXXX", true);
}

/* A struct dio never opened (zeroed): everything buffered. */
static void test_closed(void)
{
	writes_in("/var/tmp/imager-dio.XXXXXX", false);
}

static void setup(void)
{
	model = malloc(FILE_LEN);
	src = dio_alloc((6u << 20) + 8192);
	CHECK(model && src);
}

/* dio_alloc's buffers: 4 KiB aligned; from 2 MiB on, 2 MiB aligned (a
 * transparent huge page each); every byte writable, and free()d. */
static void test_alloc(void)
{
	static const size_t lens[] = { 0, 1, 4096, (2u << 20) - 1, 2u << 20, (4u << 20) + 131072 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		unsigned char *p = dio_alloc(lens[i]);
		uintptr_t align = lens[i] >= (2u << 20) ? 2u << 20 : 4096;

		CHECK(p != NULL);
		CHECK(((uintptr_t)p & (align - 1)) == 0);
		memset(p, 0xa5, lens[i]);
		CHECK(lens[i] == 0 || p[lens[i] - 1] == 0xa5);
		free(p);
	}
}

static void cleanup(void)
{
	free(model);
	free(src);
}

UNIT_MAIN(UNIT(setup), UNIT(test_direct), UNIT(test_tmpfs), UNIT(test_closed), UNIT(test_alloc),
	  UNIT(cleanup))
