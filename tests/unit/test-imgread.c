/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The image reader (include/imager/imgread.h) against a restore of the same
 * image: a GPT disk (an ext4 with files of random and of repeated bytes
 * over several frames, a partition of random bytes) saved, restored into a
 * raw file, then read at random through the reader; every range the
 * extents call zeros reads as zeros on the restored disk; one partition
 * alone; a small cache (evictions); 6 threads at once through a cache
 * of 2 frames; a flipped byte in one frame of the
 * stream fails the reads touching that frame (-EIO, the partition and
 * frame named) and no other.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imager/disk.h"
#include "imager/image.h"
#include "imager/imgread.h"
#include "imager/job.h"
#include "unit.h"

static char dir[64], disk[128], image[128], restored[128];
static unsigned char *want;       /* the restored disk */
static uint64_t want_size;
static bool ready;

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	return unit_xorshift(&rnd_state);
}

static int sh(const char *fmt, const char *a)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), fmt, a, a, a, a, a, a);
	return system(cmd);
}

static void setup(void)
{
	struct disk_roots roots;
	struct save_opts so = { .level = 3, .threads = 2 };
	struct restore_opts ro = { .threads = 2 };
	struct img_manifest m = { 0 };
	struct save_stats ss;
	struct restore_stats rs;
	struct im_err err = { 0 };
	int fd;

	if (system("command -v sfdisk >/dev/null 2>&1 && command -v mke2fs >/dev/null 2>&1") != 0) {
		unit_skip("SKIP: sfdisk or mke2fs not installed (make deps installs them)");
		return;
	}
	snprintf(dir, sizeof(dir), "/tmp/imgread-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(disk, sizeof(disk), "%s/disk.img", dir);
	snprintf(image, sizeof(image), "%s/image", dir);
	snprintf(restored, sizeof(restored), "%s/restored.img", dir);
	/* ext4 of 40 MiB: 14 MiB of random bytes, 6 MiB of a repeated line,
	 * small files; then 3 MiB of random bytes in a partition of no
	 * filesystem (saved whole). */
	CHECK(sh("set -e; cd %s; mkdir tree; head -c 14000000 /dev/urandom >tree/random; "
		 "yes 'imager imgread unit test line' | head -c 6000000 >tree/text; "
		 "for i in 1 2 3 4 5 6 7 8; do head -c $((i * 3000)) /dev/urandom >tree/small$i; done; "
		 "mke2fs -q -F -t ext4 -d tree fs.img 40M; "
		 "truncate -s 64M disk.img; "
		 "printf 'label: gpt\\nstart=2048, size=40MiB\\nsize=3MiB\\n' | sfdisk -q disk.img; "
		 "dd if=fs.img of=disk.img bs=1M seek=1 conv=notrunc status=none; "
		 "head -c 3145728 /dev/urandom | dd of=disk.img bs=1M seek=41 conv=notrunc status=none; "
		 "rm -rf tree fs.img", dir) == 0);
	disk_roots_default(&roots);
	if (im_save(&roots, disk, image, &so, &m, &ss, &err) < 0) {
		fprintf(stderr, "  save: %s\n", err.msg);
		CHECK(0);
		return;
	}
	img_manifest_free(&m);
	if (im_restore(&roots, image, restored, &ro, &rs, &err) < 0) {
		fprintf(stderr, "  restore: %s\n", err.msg);
		CHECK(0);
		return;
	}
	fd = open(restored, O_RDONLY);
	CHECK(fd >= 0);
	want_size = (uint64_t)lseek(fd, 0, SEEK_END);
	CHECK_EQ_U(want_size, 64u << 20);
	want = malloc(want_size);
	CHECK(want && pread(fd, want, want_size, 0) == (ssize_t)want_size);
	close(fd);
	ready = want != NULL;
}

/* Random reads of the whole disk (every size, aligned or not) and the
 * whole disk in one read, all equal to the restore. */
static void random_reads(void)
{
	struct img_reader *r;
	struct img_reader_opts o = { 0 };
	struct img_reader_stats st;
	struct im_err err = { 0 };
	unsigned char *buf = malloc(8u << 20);

	if (!ready || !buf) {
		free(buf);
		return;
	}
	CHECK(img_reader_open(image, &o, &r, &err) == 0);
	if (!r) {
		fprintf(stderr, "  %s\n", err.msg);
		free(buf);
		return;
	}
	CHECK_EQ_U(img_reader_size(r), want_size);
	for (int i = 0; i < 400; i++) {
		uint64_t len = 1 + rnd() % ((i % 4 == 0) ? (8u << 20) : 70000);
		uint64_t off = rnd() % (want_size - len + 1);
		if (i % 3 == 0)
			off &= ~4095ull;
		int rc = img_reader_read(r, buf, len, off, &err);
		CHECK(rc == 0);
		if (rc == 0 && memcmp(buf, want + off, len)) {
			fprintf(stderr, "  read %llu at %llu differs from the restore\n",
				(unsigned long long)len, (unsigned long long)off);
			CHECK(0);
			break;
		}
	}
	for (uint64_t off = 0; off < want_size; off += 8u << 20) {
		CHECK(img_reader_read(r, buf, 8u << 20, off, &err) == 0);
		CHECK(memcmp(buf, want + off, 8u << 20) == 0);
	}
	/* past the end */
	CHECK(img_reader_read(r, buf, 2, want_size - 1, &err) == -EINVAL);
	img_reader_stats(r, &st);
	CHECK(st.misses > 0 && st.hits > 0);
	CHECK(st.cached_bytes <= IMG_READER_CACHE_DEFAULT);
	CHECK_EQ_U(st.damaged, 0);
	img_reader_close(r);
	free(buf);
}

struct ext_walk {
	uint64_t next, zero_bytes, data_bytes;
	bool ok;
};

static int walk(void *opaque, uint64_t off, uint64_t len, bool zero)
{
	struct ext_walk *w = opaque;

	if (off != w->next || !len)
		w->ok = false;
	w->next = off + len;
	if (zero) {
		w->zero_bytes += len;
		for (uint64_t i = 0; i < len; i++)
			if (want[off + i]) {
				fprintf(stderr, "  byte %llu is not zero in a zero extent\n",
					(unsigned long long)(off + i));
				w->ok = false;
				break;
			}
	} else {
		w->data_bytes += len;
	}
	return 0;
}

/* The extents tile the disk, say zeros only where the restore has zeros,
 * and find most of the free space. */
static void extents(void)
{
	struct img_reader *r;
	struct img_reader_opts o = { 0 };
	struct im_err err = { 0 };
	struct ext_walk w = { .ok = true };

	if (!ready)
		return;
	CHECK(img_reader_open(image, &o, &r, &err) == 0);
	if (!r)
		return;
	CHECK(img_reader_extents(r, 0, want_size, walk, &w) == 0);
	CHECK(w.ok);
	CHECK_EQ_U(w.next, want_size);
	CHECK(w.zero_bytes > 20u << 20);   /* (the ext4's free space, the disk's tail) */
	CHECK(w.data_bytes >= 17u << 20);  /* (the random bytes at least) */
	/* a window inside: starts where asked */
	struct ext_walk w2 = { .next = 12345, .ok = true };
	CHECK(img_reader_extents(r, 12345, 10u << 20, walk, &w2) == 0);
	CHECK(w2.ok);
	CHECK_EQ_U(w2.next, 12345 + (10u << 20));
	img_reader_close(r);
}

/* Partition 2 alone: its bytes from the restore; no partition 3. */
static void one_partition(void)
{
	struct img_reader *r;
	struct img_reader_opts o = { .partition = 2 };
	struct im_err err = { 0 };
	unsigned char *buf = malloc(3u << 20);

	if (!ready || !buf) {
		free(buf);
		return;
	}
	CHECK(img_reader_open(image, &o, &r, &err) == 0);
	if (r) {
		CHECK_EQ_U(img_reader_size(r), 3u << 20);
		CHECK(img_reader_read(r, buf, 3u << 20, 0, &err) == 0);
		CHECK(memcmp(buf, want + (41u << 20), 3u << 20) == 0);
		img_reader_close(r);
	}
	o.partition = 3;
	err = (struct im_err){ 0 };
	CHECK(img_reader_open(image, &o, &r, &err) == -ENOENT);
	CHECK_EQ_U(err.exit_class, IM_EXIT_USAGE);
	CHECK(strstr(err.msg, "no partition 3") != NULL);
	free(buf);
}

/* A cache of 1 MiB (less than a frame): reads still right, frames evicted. */
static void small_cache(void)
{
	struct img_reader *r;
	struct img_reader_opts o = { .cache_bytes = 1u << 20 };
	struct img_reader_stats st;
	struct im_err err = { 0 };
	unsigned char buf[65536];

	if (!ready)
		return;
	CHECK(img_reader_open(image, &o, &r, &err) == 0);
	if (!r)
		return;
	for (int i = 0; i < 200; i++) {
		uint64_t off = rnd() % (want_size - sizeof(buf));
		CHECK(img_reader_read(r, buf, sizeof(buf), off, &err) == 0);
		CHECK(memcmp(buf, want + off, sizeof(buf)) == 0);
	}
	img_reader_stats(r, &st);
	CHECK(st.evictions > 0);
	CHECK(st.cached_frames <= 1);
	img_reader_close(r);
}

/* 6 threads reading at random through one reader with a cache of 2
 * frames: frames pinned while copied out, evicted, decoded twice at once. */
struct par_arg {
	struct img_reader *r;
	uint64_t seed;
	int bad;
};

static void *par_reader(void *p)
{
	struct par_arg *a = p;
	unsigned char *buf = malloc(1u << 20);
	uint64_t s = a->seed;

	for (int i = 0; buf && i < 150; i++) {
		struct im_err err = { 0 };
		unit_xorshift(&s);
		uint64_t len = 1 + s % (1u << 20), off = (s >> 20) % (want_size - len + 1);
		if (img_reader_read(a->r, buf, len, off, &err) != 0 || memcmp(buf, want + off, len))
			a->bad++;
	}
	free(buf);
	return NULL;
}

static void parallel_reads(void)
{
	struct img_reader *r;
	struct img_reader_opts o = { .cache_bytes = 8u << 20 };
	struct img_reader_stats st;
	struct im_err err = { 0 };
	pthread_t t[6];
	struct par_arg a[6];

	if (!ready)
		return;
	CHECK(img_reader_open(image, &o, &r, &err) == 0);
	if (!r)
		return;
	for (int i = 0; i < 6; i++) {
		a[i] = (struct par_arg){ .r = r, .seed = 0x12345678ull * (uint64_t)(i + 1) };
		CHECK(pthread_create(&t[i], NULL, par_reader, &a[i]) == 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ_U(a[i].bad, 0);
	}
	img_reader_stats(r, &st);
	CHECK(st.evictions > 0);
	CHECK(st.cached_bytes <= 8u << 20);
	img_reader_close(r);
}

/* A byte flipped in one frame of partition 1: reads touching that frame
 * fail with -EIO naming it; the other frames and partitions read right. */
static void damaged_frame(void)
{
	struct img_index ix;
	struct img_reader *r;
	struct img_reader_opts o = { 0 };
	struct im_err err = { 0 };
	char path[200];
	unsigned char *buf = malloc(4u << 20), b;
	uint64_t bad = 1, part_start = 1u << 20;
	int fd;

	if (!ready || !buf) {
		free(buf);
		return;
	}
	struct img_manifest m = { 0 };
	CHECK(img_manifest_read(&m, image, &err) == 0);
	uint64_t blocks = m.nparts ? m.parts[0].block_count : 0;
	img_manifest_free(&m);
	snprintf(path, sizeof(path), "%s/part1.idx", image);
	CHECK(img_index_read(&ix, path, blocks, &err) == 0);
	CHECK(ix.nframes >= 3);
	if (ix.nframes < 3) {
		free(buf);
		return;
	}
	const struct img_frame *f = &ix.frames[bad];
	const struct img_extent *e = &ix.extents[f->first_extent];
	uint64_t bad_off = part_start + e->start * ix.block_size;   /* its first data block */
	while (e->flags & IMG_EXT_ZERO)
		bad_off = part_start + (++e)->start * ix.block_size;
	const struct img_extent *g = &ix.extents[ix.frames[bad + 1].first_extent];
	uint64_t good_off = part_start + g->start * ix.block_size;
	snprintf(path, sizeof(path), "%s/part1.zst", image);
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	uint64_t at = f->comp_offset + f->comp_size / 2;
	CHECK(pread(fd, &b, 1, at) == 1);
	b ^= 0x40;
	CHECK(pwrite(fd, &b, 1, at) == 1);

	CHECK(img_reader_open(image, &o, &r, &err) == 0);
	if (r) {
		for (int round = 0; round < 2; round++) {   /* (failures are not cached) */
			err = (struct im_err){ 0 };
			CHECK(img_reader_read(r, buf, 4096, bad_off, &err) == -EIO);
			CHECK_EQ_U(err.exit_class, IM_EXIT_DAMAGED);
			CHECK(strstr(err.msg, "partition 1") && strstr(err.msg, "frame 1 ") &&
			      strstr(err.msg, "part1.zst"));
		}
		fprintf(stderr, "  (as expected: %s)\n", err.msg);
		err = (struct im_err){ 0 };
		CHECK(img_reader_read(r, buf, 4096, good_off, &err) == 0);
		CHECK(memcmp(buf, want + good_off, 4096) == 0);
		CHECK(img_reader_read(r, buf, 1u << 20, 41u << 20, &err) == 0);
		CHECK(memcmp(buf, want + (41u << 20), 1u << 20) == 0);
		CHECK(img_reader_read(r, buf, 4096, 0, &err) == 0);   /* the table */
		CHECK(memcmp(buf, want, 4096) == 0);
		img_reader_close(r);
	}
	b ^= 0x40;
	CHECK(pwrite(fd, &b, 1, at) == 1);
	close(fd);
	img_index_free(&ix);
	free(buf);
}

/* Not an image: the folder's own refusal; Clonezilla's: refused here
 * (im_reader_open, job.h, reads it through its index); a
 * damaged index: refused (last: the image stays damaged). */
static void refused(void)
{
	struct img_reader *r;
	struct im_err err = { 0 };
	char path[200];

	if (!ready)
		return;
	CHECK(img_reader_open(dir, NULL, &r, &err) < 0);   /* a folder holding an image */
	CHECK_EQ_U(err.exit_class, IM_EXIT_SOURCE);
	CHECK(r == NULL);
	snprintf(path, sizeof(path), "%s/cz", dir);
	CHECK(sh("mkdir -p %s/cz && echo sda >%s/cz/disk && echo sda1 >%s/cz/parts", dir) == 0);
	err = (struct im_err){ 0 };
	CHECK(img_reader_open(path, NULL, &r, &err) == -ENOTSUP);
	CHECK_EQ_U(err.exit_class, IM_EXIT_UNSUPP);
	/* a damaged index (of the second partition: the first one's is open
	 * by then, and let go again) */
	snprintf(path, sizeof(path), "%s/part2.idx", image);
	CHECK(sh("printf 'X' | dd of=%s bs=1 seek=20 conv=notrunc status=none", path) == 0);
	err = (struct im_err){ 0 };
	CHECK(img_reader_open(image, NULL, &r, &err) < 0);
	CHECK_EQ_U(err.exit_class, IM_EXIT_DAMAGED);
	CHECK(strstr(err.msg, "partition 2") != NULL);
	CHECK(r == NULL);
}

static void teardown(void)
{
	if (dir[0])
		sh("rm -rf %s", dir);
	free(want);
}

UNIT_MAIN(UNIT(setup), UNIT(random_reads), UNIT(extents), UNIT(one_partition), UNIT(small_cache),
	  UNIT(parallel_reads), UNIT(damaged_frame), UNIT(refused), UNIT(teardown))
