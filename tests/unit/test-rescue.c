/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Rescue reads (imager/engine/io/rescue.c), against a model: a fake container
 * whose chosen sectors fail with EIO (or with a lost connection), read in
 * random order and random sizes.  Every read must succeed with the data
 * outside the bad sectors and zeros inside; the recorded bad ranges must be
 * exactly the bad sectors read; the map must cover the disk once, in
 * order, with "-" for them, "+" for what else was read and "?" for the rest;
 * an unreadable sector is tried 1 + retries times; a failure that is not a
 * media error is not papered over.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "rescue.h"
#include "imager/backend.h"

#define SECTORS 4096u
#define SIZE ((uint64_t)SECTORS * 512)

static bool bad[SECTORS];          /* the model: failing sectors */
static unsigned flaky_left[SECTORS]; /* single-sector reads that still fail */
static bool read_model[SECTORS];   /* sectors the test asked for */
static int fail_errno = EIO;
static unsigned single_reads;   /* single-sector reads of sector 5 */

static uint32_t rnd_state = 777;
static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

static unsigned char pattern(uint64_t off)
{
	return (unsigned char)((off * 7 + off / 512) | 1);   /* never 0 */
}

static int fake_pread(struct bk *bk, void *buf, size_t len, uint64_t off)
{
	unsigned char *p = buf;
	(void)bk;
	if (len == 512 && off == 5 * 512)
		single_reads++;
	for (uint64_t s = off / 512; s < (off + len + 511) / 512; s++) {
		if (bad[s])
			return -fail_errno;
		if (flaky_left[s] && len == 512) {
			flaky_left[s]--;
			return -EIO;
		}
		if (flaky_left[s])
			return -EIO;
	}
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(off + i);
	return 0;
}

static const struct bk_driver fake = { .name = "fake", .pread = fake_pread };

static void reset(struct bk *b, unsigned retries)
{
	memset(b, 0, sizeof(*b));
	b->drv = &fake;
	b->size = SIZE;
	b->sector_size = 512;
	snprintf(b->name, sizeof(b->name), "fake");
	memset(bad, 0, sizeof(bad));
	memset(flaky_left, 0, sizeof(flaky_left));
	memset(read_model, 0, sizeof(read_model));
	fail_errno = EIO;
	single_reads = 0;
	CHECK(bk_rescue_start(b, retries, NULL) == 0);
}

/* The map file: lines after the header cover [0, SIZE) in order, and each
 * sector's status is the model's. */
static void check_map(struct bk *b)
{
	char path[] = "/tmp/test-rescue-XXXXXX", line[256];
	int fd = mkstemp(path);
	uint64_t pos = 0;
	unsigned header = 0;
	FILE *f;

	CHECK(fd >= 0);
	close(fd);
	CHECK(bk_rescue_write_map(b, path, "test", NULL) == 0);
	f = fopen(path, "r");
	CHECK(f != NULL);
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long o, l;
		char st;
		if (line[0] == '#')
			continue;
		if (header++ == 0)   /* current_pos line */
			continue;
		CHECK(sscanf(line, "0x%llx 0x%llx %c", &o, &l, &st) == 3);
		CHECK_EQ_U(o, pos);
		CHECK(l > 0 && l % 512 == 0);
		for (uint64_t s = o / 512; s < (o + l) / 512 && s < SECTORS; s++) {
			char want = !read_model[s] ? '?' : bad[s] ? '-' : '+';
			if (st != want) {
				CHECK(st == want);
				break;
			}
		}
		pos = o + l;
	}
	CHECK_EQ_U(pos, SIZE);
	if (f)
		fclose(f);
	unlink(path);
}

static void test_random_reads(void)
{
	static unsigned char buf[64 * 1024];
	struct bk b;
	uint64_t want_bad = 0;

	for (int round = 0; round < 20; round++) {
		reset(&b, (unsigned)round % 3);
		for (int i = 0; i < 30; i++)
			bad[rnd() % SECTORS] = true;
		unsigned run = rnd() % (SECTORS - 64);
		for (unsigned s = run; s < run + 40; s++)   /* a bad run */
			bad[s] = true;
		/* reads of 1..128 sectors at random places, some overlapping */
		for (int i = 0; i < 120; i++) {
			unsigned n = 1 + rnd() % 128, s = rnd() % (SECTORS - n);
			CHECK(bk_pread(&b, buf, (size_t)n * 512, (uint64_t)s * 512, NULL) == 0);
			for (unsigned k = 0; k < n; k++) {
				read_model[s + k] = true;
				for (unsigned j = 0; j < 512; j += 97) {
					unsigned char want = bad[s + k] ? 0 : pattern((uint64_t)(s + k) * 512 + j);
					if (buf[k * 512 + j] != want) {
						CHECK_EQ_U(buf[k * 512 + j], want);
						k = n;
						break;
					}
				}
			}
		}
		/* the recorded bad ranges: exactly the bad sectors read */
		size_t n;
		const struct bk_range *r = bk_rescue_bad(&b, &n);
		want_bad = 0;
		for (unsigned s = 0; s < SECTORS; s++)
			want_bad += bad[s] && read_model[s] ? 512 : 0;
		CHECK_EQ_U(bk_rescue_bad_bytes(&b, 0, SIZE), want_bad);
		CHECK_EQ_U(bk_rescue_bad_total(&b), want_bad);
		for (size_t i = 0; i < n; i++) {
			CHECK(i == 0 || r[i].off > r[i - 1].off + r[i - 1].len);   /* merged, sorted */
			for (uint64_t s = r[i].off / 512; s < (r[i].off + r[i].len) / 512; s++)
				CHECK(bad[s] && read_model[s]);
		}
		check_map(&b);
		rescue_free(b.rescue);
	}
}

/* A sector that fails its first 2 single-sector reads: unreadable with 1
 * retry (2 tries), read with 2 (the third try). */
static void test_retries(void)
{
	unsigned char buf[8192];
	struct bk b;

	for (unsigned retries = 0; retries <= 3; retries++) {
		reset(&b, retries);
		flaky_left[5] = 2;
		CHECK(bk_pread(&b, buf, sizeof(buf), 0, NULL) == 0);
		CHECK_EQ_U(single_reads, retries < 2 ? retries + 1 : 3);
		CHECK_EQ_U(bk_rescue_bad_total(&b), retries < 2 ? 512 : 0);
		CHECK_EQ_U(buf[5 * 512 + 1], retries < 2 ? 0 : pattern(5 * 512 + 1));
		rescue_free(b.rescue);
	}
}

/* A lost connection in the middle is not a bad sector: the read fails. */
static void test_not_media(void)
{
	unsigned char buf[8192];
	struct im_err err = { 0 };
	struct bk b;

	reset(&b, 3);
	bad[3] = true;
	fail_errno = ENOTCONN;
	CHECK(bk_pread(&b, buf, sizeof(buf), 0, &err) == -ENOTCONN);
	CHECK_EQ_U(err.exit_class, IM_EXIT_IO);
	CHECK_EQ_U(bk_rescue_bad_total(&b), 0);
	rescue_free(b.rescue);
	/* and without rescue, a media error names --rescue */
	b.rescue = NULL;
	fail_errno = EIO;
	memset(&err, 0, sizeof(err));
	CHECK(bk_pread(&b, buf, sizeof(buf), 0, &err) == -EIO);
	CHECK(strstr(err.msg, "--rescue") != NULL);
	CHECK(strstr(err.msg, "at 0") != NULL);
}

UNIT_MAIN(UNIT(test_random_reads), UNIT(test_retries), UNIT(test_not_media))
