/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The manifest: written, read back, and lies refused. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imager/image.h"
#include "unit.h"

static char dir[PATH_MAX];

static void sample(struct img_manifest *m, struct img_part *p, struct img_area *a)
{
	memset(m, 0, sizeof(*m));
	memset(p, 0, sizeof(*p));
	memset(a, 0, sizeof(*a));
	snprintf(m->tool_version, sizeof(m->tool_version), "0.1.0");
	snprintf(m->created, sizeof(m->created), "2026-11-30T10:00:00Z");
	snprintf(m->source, sizeof(m->source), "/dev/vda");
	m->disk_size = 64ull << 20;
	m->logical_sector_size = m->physical_sector_size = 512;
	snprintf(m->table, sizeof(m->table), "gpt");
	snprintf(a->name, sizeof(a->name), "head");
	snprintf(a->file, sizeof(a->file), "boot-00-head.bin");
	a->length = 1 << 20;
	a->xxh3 = 0x0123456789abcdefull;
	m->areas = a;
	m->nareas = 1;
	p->number = 1;
	p->start = 1 << 20;
	p->size = 32 << 20;
	snprintf(p->kind, sizeof(p->kind), "gpt");
	snprintf(p->filesystem, sizeof(p->filesystem), "ext4");
	snprintf(p->plugin, sizeof(p->plugin), "ext");
	snprintf(p->uuid, sizeof(p->uuid), "0b6a1a0e-0000-4000-8000-000000000001");
	snprintf(p->label, sizeof(p->label), "root \"quoted\" é");
	p->block_size = 4096;
	p->block_count = 8192;
	p->used_blocks = 1000;
	p->zero_blocks = 10;
	p->data_bytes = 990 * 4096;
	snprintf(p->stream, sizeof(p->stream), "part1.zst");
	snprintf(p->index, sizeof(p->index), "part1.idx");
	p->stream_size = 12345;
	p->stream_xxh3 = 0xffffffffffffffffull;
	p->frames = 2;
	m->parts = p;
	m->nparts = 1;
	/* save --rescue: two ranges, the files of the first looked up */
	static char files[2][IMG_UNREADABLE_NAME] = { "/home/a b.txt", "<inode 8: the journal>" };
	m->unreadable.bytes = 1024;
	m->unreadable.ranges = 2;
	snprintf(m->unreadable.map, sizeof(m->unreadable.map), "rescue.map");
	m->unreadable.map_size = 100;
	m->unreadable.map_xxh3 = 1;
	m->unreadable.nlist = 2;
	m->unreadable.list[0] = (struct img_unreadable_range){
		.offset = (1 << 20) + 4096 * 100, .length = 512, .looked_up = true, .nfiles = 2,
		.files = files, .no_file_blocks = 1, .files_partial = true };
	m->unreadable.list[1] = (struct img_unreadable_range){ .offset = 2 << 20, .length = 512 };
}

static void test_round_trip(void)
{
	struct img_manifest m, back;
	struct img_part p;
	struct img_area a;
	struct im_err err = { 0 };

	sample(&m, &p, &a);
	CHECK(img_manifest_write(&m, dir, &err) == 0);
	CHECK(img_manifest_read(&back, dir, &err) == 0);
	if (err.msg[0])
		fprintf(stderr, "  %s\n", err.msg);
	CHECK_EQ_U(back.disk_size, m.disk_size);
	CHECK_STR(back.table, "gpt");
	CHECK_EQ_U(back.nparts, 1);
	CHECK_EQ_U(back.nareas, 1);
	if (back.nparts == 1 && back.nareas == 1) {
		CHECK_STR(back.parts[0].label, p.label);
		CHECK_EQ_U(back.parts[0].stream_xxh3, p.stream_xxh3);
		CHECK_EQ_U(back.parts[0].data_bytes, p.data_bytes);
		CHECK_EQ_U(back.areas[0].xxh3, a.xxh3);
	}
	CHECK_EQ_U(back.unreadable.nlist, 2);
	CHECK(back.unreadable.list[0].looked_up);
	CHECK_EQ_U(back.unreadable.list[0].nfiles, 2);
	if (back.unreadable.list[0].nfiles == 2) {
		CHECK_STR(back.unreadable.list[0].files[0], "/home/a b.txt");
		CHECK_STR(back.unreadable.list[0].files[1], "<inode 8: the journal>");
	}
	CHECK_EQ_U(back.unreadable.list[0].no_file_blocks, 1);
	CHECK(back.unreadable.list[0].files_partial);
	CHECK(!back.unreadable.list[1].looked_up && !back.unreadable.list[1].files);
	img_manifest_free(&back);
}

/* The files of a range are optional (images saved before them, or from an
 * NBD source): a manifest without them reads as not looked up. */
static void test_files_optional(void)
{
	struct img_manifest m, back;
	struct img_part p;
	struct img_area a;
	struct im_err err = { 0 };
	char cmd[PATH_MAX + 256];

	sample(&m, &p, &a);
	CHECK(img_manifest_write(&m, dir, &err) == 0);
	snprintf(cmd, sizeof(cmd), "sed -i 's/\"files\"/\"old\"/; s/\"no_file_blocks\"/\"old2\"/; "
		 "s/\"files_partial\"/\"old3\"/' "
		 "'%s/manifest.json'", dir);
	CHECK(system(cmd) == 0);
	CHECK(img_manifest_read(&back, dir, &err) == 0);
	if (err.msg[0])
		fprintf(stderr, "  %s\n", err.msg);
	CHECK_EQ_U(back.unreadable.nlist, 2);
	CHECK(!back.unreadable.list[0].looked_up && !back.unreadable.list[0].nfiles);
	CHECK_EQ_U(back.unreadable.list[0].no_file_blocks, 0);
	img_manifest_free(&back);
}

/* Write the sample with one edit made by sed on the JSON text, read it,
 * and expect a refusal of the given class. */
static void expect_refused(const char *sed, int exit_class)
{
	struct img_manifest m, back;
	struct img_part p;
	struct img_area a;
	struct im_err err = { 0 };
	char cmd[PATH_MAX + 256];
	int r;

	sample(&m, &p, &a);
	CHECK(img_manifest_write(&m, dir, &err) == 0);
	snprintf(cmd, sizeof(cmd), "sed -i '%s' '%s/manifest.json'", sed, dir);
	CHECK(system(cmd) == 0);
	memset(&err, 0, sizeof(err));
	r = img_manifest_read(&back, dir, &err);
	if (r == 0) {
		fprintf(stderr, "  accepted a manifest edited with %s\n", sed);
		img_manifest_free(&back);
	}
	CHECK(r < 0);
	CHECK_EQ_U(err.exit_class, exit_class);
}

static void test_lies_refused(void)
{
	expect_refused("s/\"size\": 33554432/\"size\": 133554432/", IM_EXIT_DAMAGED);     /* past the disk */
	expect_refused("s/\"block_count\": 8192/\"block_count\": 99999999/", IM_EXIT_DAMAGED);
	expect_refused("s/\"block_count\": 8192/\"block_count\": -5/", IM_EXIT_DAMAGED);
	expect_refused("s/\"used_blocks\": 1000/\"used_blocks\": 9000/", IM_EXIT_DAMAGED);
	expect_refused("s/\"stream\": \"part1.zst\"/\"stream\": \"..\\/..\\/etc\\/passwd\"/", IM_EXIT_DAMAGED);
	expect_refused("s/\"block_size\": 4096/\"block_size\": 4095/", IM_EXIT_DAMAGED);
	expect_refused("s/\"format\": \"imager-image\"/\"format\": \"other\"/", IM_EXIT_DAMAGED);
	expect_refused("s/\"format_version\": 1/\"format_version\": 2/", IM_EXIT_UNSUPP);
	expect_refused("s/\"xxh3\": \"0123456789abcdef\"/\"xxh3\": \"zz\"/", IM_EXIT_DAMAGED);
	expect_refused("s/\"partitions\"/\"partitionz\"/", IM_EXIT_DAMAGED);
	expect_refused("$d", IM_EXIT_DAMAGED);                                          /* cut short */
	expect_refused("s/\"size\": 67108864/\"size\": 18446744073709551615/", IM_EXIT_DAMAGED);
	/* the files of an unreadable range */
	expect_refused("s|\"/home/a b.txt\"|17|", IM_EXIT_DAMAGED);
	expect_refused("s|\"/home/a b.txt\"|\"home\"|", IM_EXIT_DAMAGED);
	expect_refused("s|\"/home/a b.txt\"|\"\"|", IM_EXIT_DAMAGED);
	expect_refused("s|\"/home/a b.txt\"|\"/a\\\\u0000b\"|", IM_EXIT_DAMAGED);   /* a NUL inside */
	expect_refused("s|\"files\": \\[|\"files\": \"/a\", \"other\": [|", IM_EXIT_DAMAGED);
	expect_refused("s|\"files_partial\": true|\"files_partial\": 1|", IM_EXIT_DAMAGED);
	expect_refused("s|\"no_file_blocks\": 1|\"no_file_blocks\": -1|", IM_EXIT_DAMAGED);
	expect_refused("s|\"no_file_blocks\": 1|\"no_file_blocks\": 99999999|", IM_EXIT_DAMAGED);
	/* 17 names, and a name of IMG_UNREADABLE_NAME bytes */
	char sed[IMG_UNREADABLE_NAME + 64];
	size_t at = (size_t)snprintf(sed, sizeof(sed), "s|\"/home/a b.txt\"|");
	for (int i = 0; i < 16; i++)
		at += (size_t)snprintf(sed + at, sizeof(sed) - at, "\"/f%d\", ", i);
	snprintf(sed + at, sizeof(sed) - at, "&|");
	expect_refused(sed, IM_EXIT_DAMAGED);
	at = (size_t)snprintf(sed, sizeof(sed), "s|\"/home/a b.txt\"|\"/");
	memset(sed + at, 'x', IMG_UNREADABLE_NAME - 1);
	snprintf(sed + at + IMG_UNREADABLE_NAME - 1, sizeof(sed) - at - IMG_UNREADABLE_NAME + 1, "\"|");
	expect_refused(sed, IM_EXIT_DAMAGED);
}

static void test_missing_is_unfinished(void)
{
	struct img_manifest m;
	struct im_err err = { 0 };
	char path[PATH_MAX + 32];

	int fd;

	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	unlink(path);
	/* Nothing of a save's: not an image folder. */
	CHECK(img_manifest_read(&m, dir, &err) < 0);
	CHECK_EQ_U(err.exit_class, IM_EXIT_SOURCE);
	CHECK(strstr(err.msg, "not an image folder") != NULL);
	/* A save's own file and no manifest: unfinished. */
	snprintf(path, sizeof(path), "%s/part1.zst", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	close(fd);
	memset(&err, 0, sizeof(err));
	CHECK(img_manifest_read(&m, dir, &err) == -ENOENT);
	CHECK_EQ_U(err.exit_class, IM_EXIT_DAMAGED);
	CHECK(strstr(err.msg, "unfinished") != NULL);
	CHECK(strstr(err.msg, "part1.zst") != NULL);
	unlink(path);
}

static void test_index_round_trip_and_lies(void)
{
	struct img_index ix, back;
	struct img_frame f = { 0 };
	struct img_extent e[2] = { { 10, 3, 0 }, { 13, 2, IMG_EXT_ZERO } };
	struct im_err err = { 0 };
	char path[PATH_MAX + 32], cmd[PATH_MAX + 128];
	uint64_t size, h;

	snprintf(path, sizeof(path), "%s/part1.idx", dir);
	img_index_init(&ix, 4096);
	f.comp_size = 100;
	f.raw_size = 3 * 4096;
	CHECK(img_index_add(&ix, &f, e, 2) == 0);
	ix.stream_size = 100;
	CHECK(img_index_write(&ix, path, &size, &h, &err) == 0);
	CHECK(img_index_read(&back, path, 100, &err) == 0);
	CHECK_EQ_U(back.nframes, 1);
	CHECK_EQ_U(back.nextents, 2);
	CHECK_EQ_U(back.zero_blocks, 2);
	img_index_free(&back);
	/* Extents beyond the filesystem. */
	memset(&err, 0, sizeof(err));
	CHECK(img_index_read(&back, path, 12, &err) < 0);
	CHECK_EQ_U(err.exit_class, IM_EXIT_DAMAGED);
	/* One flipped byte: the trailer checksum catches it. */
	snprintf(cmd, sizeof(cmd), "printf '\\377' | dd of='%s' bs=1 seek=70 conv=notrunc status=none", path);
	CHECK(system(cmd) == 0);
	memset(&err, 0, sizeof(err));
	CHECK(img_index_read(&back, path, 100, &err) < 0);
	CHECK(strstr(err.msg, "checksum") != NULL);
	/* Truncated. */
	CHECK(truncate(path, 30) == 0);
	memset(&err, 0, sizeof(err));
	CHECK(img_index_read(&back, path, 100, &err) < 0);
	img_index_free(&ix);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/imager-unit-manifest-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

UNIT_MAIN(UNIT(setup), UNIT(test_round_trip), UNIT(test_files_optional), UNIT(test_lies_refused),
	  UNIT(test_missing_is_unfinished), UNIT(test_index_round_trip_and_lies), UNIT(teardown))
