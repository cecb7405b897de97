/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A Clonezilla folder's index (include/imager/job.h: im_czindex,
 * im_reader_open) on a folder made here: an MBR disk whose one partition
 * starts at sector 63 (not on a 4 KiB boundary of the disk) and is saved
 * as partclone.dd's stream, gzip-compressed, holding pseudo-random bytes
 * at its first sectors, across a 4 KiB chunk's edge, across the edge of
 * the first 4 MiB frame, in a 700000-byte run and in its last sector, and
 * zeros elsewhere.  Read through img_reader: the partition's bytes are
 * the stream's, the MBR's boot code is the folder's with its signature,
 * everything else zeros; block status calls data exactly the 4 KiB chunks
 * of the partition that hold some (and the MBR's sector); the index is
 * cut into frames of at most 4 MiB.  Then the cache: the second open
 * reuses the entry; a changed folder gets a new one and the old one goes;
 * a bound of one byte keeps only the newest entry; a truncated stream
 * fails as damage (IM_EXIT_DAMAGED, the stream named) and leaves nothing
 * in the cache; a cache under a file is IM_EXIT_IO; the folder is never
 * written.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imager/image.h"
#include "imager/imgread.h"
#include "imager/job.h"
#include "unit.h"
#include "unit-fs.h"

#define SECTORS 20417u
#define START (63u * 512)
#define PSIZE ((uint64_t)SECTORS * 512)

static char tmp[] = "/tmp/imager-czindex-XXXXXX";
static char folder[300], cache[300];
static unsigned char *part;   /* the partition's bytes */
static bool ready;

static const struct { uint64_t off, len; } runs[] = {
	{ 0, 1536 }, { 4096 - 512, 1024 }, { (4u << 20) - 4096, 12288 }, { 5u << 20, 700000 },
	{ PSIZE - 512, 512 },
};

static int write_file(const char *name, const void *buf, size_t len)
{
	char path[400];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", folder, name);
	f = fopen(path, "wb");
	if (!f)
		return -1;
	ok = fwrite(buf, 1, len, f) == len;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static void setup(void)
{
	static const char pt[] = "label: dos\nlabel-id: 0x12345678\ndevice: /dev/sda\nunit: sectors\n"
				 "sector-size: 512\n\n/dev/sda1 : start=          63, size=       20417, type=83\n";
	unsigned char mbr[512] = { 0xEB, 0x63, 0x90, 0x10 };
	uint64_t s = 0x9E3779B97F4A7C15ull;

	if (!mkdtemp(tmp) || sh("command -v gzip >/dev/null") != 0) {
		unit_skip("SKIP: needs a temporary folder and gzip");
		return;
	}
	snprintf(folder, sizeof(folder), "%s/cz", tmp);
	snprintf(cache, sizeof(cache), "%s/cache", tmp);
	mkdir(folder, 0755);
	part = calloc(1, PSIZE);
	CHECK(part != NULL);
	for (size_t r = 0; part && r < sizeof(runs) / sizeof(runs[0]); r++)
		for (uint64_t k = 0; k < runs[r].len; k++)
			part[runs[r].off + k] = (unsigned char)(unit_xorshift(&s) | 1);
	mbr[510] = 0x55;
	mbr[511] = 0xAA;
	CHECK(write_file("disk", "sda\n", 4) == 0);
	CHECK(write_file("parts", "sda1\n", 5) == 0);
	CHECK(write_file("sda-pt.sf", pt, sizeof(pt) - 1) == 0);
	CHECK(write_file("sda-mbr", mbr, sizeof(mbr)) == 0);
	CHECK(write_file("sda1.raw", part, PSIZE) == 0);
	CHECK(sh("gzip -1 -n '%s/sda1.raw' && mv '%s/sda1.raw.gz' '%s/sda1.dd-ptcl-img.gz'", folder,
		 folder, folder) == 0);
	ready = unit_failures == 0;
}

struct ext { uint64_t off, len; bool zero; };
struct exts { struct ext e[64]; size_t n; };

static int collect(void *opaque, uint64_t off, uint64_t len, bool zero)
{
	struct exts *x = opaque;
	if (x->n < 64)
		x->e[x->n++] = (struct ext){ off, len, zero };
	return 0;
}

/* Is byte b of the disk in a 4 KiB chunk of the partition that holds data
 * (or in the MBR)? */
static bool data_at(uint64_t b)
{
	uint64_t c;

	if (b < 512)
		return true;
	if (b < START || b >= START + PSIZE)
		return false;
	c = (b - START) / 4096 * 4096;
	for (uint64_t k = c; k < c + 4096 && k < PSIZE; k++)
		if (part[k])
			return true;
	return false;
}

static void reads_the_restore(void)
{
	struct im_czindex_opts co = { .cache_dir = cache };
	struct im_czindex_report rep;
	struct img_reader *r = NULL;
	struct im_err err = { 0 };
	struct img_index ix;
	struct exts x = { .n = 0 };
	unsigned char *disk;
	char path[4300];
	uint64_t size;

	if (!ready)
		return;
	CHECK(im_reader_open(folder, NULL, &co, &r, &rep, &err) == 0);
	if (!r) {
		fprintf(stderr, "  %s\n", err.msg);
		return;
	}
	CHECK(rep.built);
	CHECK(!strncmp(rep.path, cache, strlen(cache)));
	size = img_reader_size(r);
	CHECK_EQ_U(size, 20480ull * 512);
	disk = malloc(size);
	CHECK(disk && img_reader_read(r, disk, size, 0, &err) == 0);
	CHECK(disk && !memcmp(disk, "\xEB\x63\x90\x10", 4) && disk[510] == 0x55 && disk[511] == 0xAA);
	CHECK(disk && disk[446 + 4] == 0x83);   /* the entry made from the table file */
	CHECK(disk && !memcmp(disk + START, part, PSIZE));
	for (uint64_t b = 512; disk && b < START; b++)
		CHECK(disk[b] == 0 || (b >= 446 && b < 512));
	free(disk);
	/* block status: exactly the chunks with data */
	CHECK(img_reader_extents(r, 0, size, collect, &x) == 0);
	for (size_t i = 0; i < x.n; i++) {
		CHECK(data_at(x.e[i].off) == !x.e[i].zero);
		CHECK(data_at(x.e[i].off + x.e[i].len - 1) == !x.e[i].zero);
		CHECK(i == 0 || x.e[i].zero != x.e[i - 1].zero);
	}
	CHECK_EQ_U(x.e[x.n - 1].off + x.e[x.n - 1].len, size);
	img_reader_close(r);
	/* frames of at most 4 MiB, in 512-byte blocks */
	snprintf(path, sizeof(path), "%s/part1.idx", rep.path);
	CHECK(img_index_read(&ix, path, SECTORS, &err) == 0);
	CHECK_EQ_U(ix.block_size, 512);
	CHECK(ix.nframes >= 1);
	for (uint64_t f = 0; f < ix.nframes; f++)
		CHECK(ix.frames[f].raw_size <= IMG_FRAME_BLOCKS_BYTES);
	img_index_free(&ix);
}

/* Complete entries in the cache (folders with a manifest), and nothing
 * half-made. */
static int entries(void)
{
	char out[64] = "";
	CHECK(sh("ls -d '%s'/.build-* >/dev/null 2>&1", cache) != 0);
	if (sh_out(out, sizeof(out), "ls '%s'/*/manifest.json 2>/dev/null | wc -l", cache) != 0)
		return -1;
	return atoi(out);
}

static void the_cache(void)
{
	struct im_czindex_opts co = { .cache_dir = cache };
	struct im_czindex_report rep, again;
	struct im_err err = { 0 };
	char first[4200], copy[400], sums[64] = "", sums2[64] = "";

	if (!ready)
		return;
	CHECK(sh_out(sums, sizeof(sums), "cd '%s' && ls -l --time-style=+%%s.%%N | md5sum", folder) == 0);
	CHECK(im_czindex(folder, &co, &rep, &err) == 0);
	CHECK(!rep.built);                  /* reads_the_restore built it */
	snprintf(first, sizeof(first), "%s", rep.path);
	CHECK_EQ_U(entries(), 1);
	/* a copy as it is shares the entry; a changed one gets its own */
	snprintf(copy, sizeof(copy), "%s/copy", tmp);
	CHECK(sh("cp -a '%s' '%s'", folder, copy) == 0);
	CHECK(im_czindex(copy, &co, &again, &err) == 0);
	CHECK(!again.built && !strcmp(again.path, first));
	CHECK(sh("touch -d '2001-01-01' '%s/parts'", copy) == 0);
	CHECK(im_czindex(copy, &co, &again, &err) == 0);
	CHECK(again.built && strcmp(again.path, first));
	CHECK_EQ_U(entries(), 2);
	snprintf(first, sizeof(first), "%s", again.path);
	CHECK(sh("touch -d '2002-02-02' '%s/parts'", copy) == 0);
	CHECK(im_czindex(copy, &co, &again, &err) == 0);
	CHECK(again.built && strcmp(again.path, first));
	CHECK(access(first, F_OK) != 0);   /* the copy's old entry went */
	CHECK_EQ_U(entries(), 2);
	/* a bound of one byte: only the newest stays */
	co.max_bytes = 1;
	CHECK(sh("touch -d '2003-03-03' '%s/parts'", copy) == 0);
	CHECK(im_czindex(copy, &co, &again, &err) == 0);
	CHECK_EQ_U(entries(), 1);
	CHECK(access(again.path, F_OK) == 0);
	/* damage: nothing left behind */
	CHECK(sh("f='%s/sda1.dd-ptcl-img.gz'; truncate -s $(($(stat -c %%s \"$f\") / 2)) \"$f\"",
		 copy) == 0);
	err = (struct im_err){ 0 };
	CHECK(im_czindex(copy, &co, &again, &err) < 0);
	CHECK_EQ_U(err.exit_class, IM_EXIT_DAMAGED);
	if (!strstr(err.msg, "sda1.dd-ptcl-img.gz"))
		fprintf(stderr, "  %s\n", err.msg);
	CHECK(strstr(err.msg, "sda1.dd-ptcl-img.gz") != NULL);
	CHECK_EQ_U(entries(), 1);
	/* a cache that cannot be made */
	snprintf(copy, sizeof(copy), "%s/parts/cache", folder);
	co.cache_dir = copy;
	err = (struct im_err){ 0 };
	CHECK(im_czindex(folder, &co, &again, &err) < 0);
	CHECK_EQ_U(err.exit_class, IM_EXIT_IO);
	CHECK(strstr(err.msg, "cannot write the index cache") != NULL);
	/* the folder as it was */
	CHECK(sh_out(sums2, sizeof(sums2), "cd '%s' && ls -l --time-style=+%%s.%%N | md5sum", folder) == 0);
	CHECK_STR(sums2, sums);
}

static void teardown(void)
{
	if (tmp[sizeof(tmp) - 7] != 'X')
		sh("rm -rf '%s'", tmp);
	free(part);
}

UNIT_MAIN(UNIT(setup), UNIT(reads_the_restore), UNIT(the_cache), UNIT(teardown))
