/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The files hit by unreadable ranges (imager/engine/jobs/extfiles.c): debugfs's
 * icheck and ncheck output parsed as hostile text (garbage, overflowing
 * numbers, unasked blocks, a forged line from a name holding a newline, a
 * cut last line); the lookup against a fake debugfs (names capped in
 * number and length, a missing or failing debugfs a warning and no
 * names), against the real one on an ext4 made by mke2fs at an offset
 * inside an image file, and the time limit of tool_run_timed().
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "extfiles.h"
#include "tool.h"
#include "util.h"

static char dir[PATH_MAX];
static char old_path[8192];

static void test_icheck(void)
{
	const uint64_t blocks[] = { 100, 200, 300, 400, 500, 600 };
	uint32_t ino[6];

	CHECK(extfiles_parse_icheck("", blocks, 6, ino) == -EBADMSG);
	CHECK(extfiles_parse_icheck("100\t12\n", blocks, 6, ino) == -EBADMSG);   /* no header */
	CHECK_EQ_U(extfiles_parse_icheck("debugfs 1.47.0\nBlock\tInode number\n"
					 "100\t12\n"
					 "200\t<block not found>\n"
					 "300\t99999999999999999999999\n"   /* overflows */
					 "300\t4294967295\n"                /* past the last inode */
					 "300\t0\n"
					 "300\t-5\n"
					 "300\t 7\n"
					 "x\ty\n\n\t\t\n"
					 "999\t13\n"                        /* not asked */
					 "100\t14\n"                        /* a second answer */
					 "18446744073709551616\t15\n"
					 "400\t<block not found> \n"
					 "500\t4294967294\n"
					 "600\t16",                         /* cut short */
					 blocks, 6, ino), 3);
	CHECK_EQ_U(ino[0], 12);
	CHECK_EQ_U(ino[1], EXTF_NO_FILE);
	CHECK_EQ_U(ino[2], 0);
	CHECK_EQ_U(ino[3], 0);
	CHECK_EQ_U(ino[4], 4294967294u);
	CHECK_EQ_U(ino[5], 0);
}

struct got {
	size_t n;
	size_t idx[16];
	char path[16][64];
};

static void collect(void *opaque, size_t i, const char *path, size_t len)
{
	struct got *g = opaque;

	if (g->n < 16) {
		g->idx[g->n] = i;
		snprintf(g->path[g->n++], 64, "%.*s", (int)len, path);
	}
}

static void test_ncheck(void)
{
	const uint32_t inos[] = { 12, 13 };
	struct got g = { 0 };

	CHECK(extfiles_parse_ncheck("12\t/a\n", inos, 2, collect, &g) == -EBADMSG);
	CHECK_EQ_U(extfiles_parse_ncheck("Inode\tPathname\n"
					 "12\t//a b\n"            /* in the root */
					 "13\t/dir/we\n"          /* a name with a newline: */
					 "12\tfake\n"             /* ... its second half */
					 "13\t/dir/t\tab\n"
					 "14\t/not/asked\n"
					 "0\t/zero\n"
					 "13\t<12>/lost\n"
					 "13\t<no slash>\n"
					 "12\t\n"
					 "99999999999\t/big\n"
					 "12\t/cut",
					 inos, 2, collect, &g), 4);
	CHECK_EQ_U(g.n, 4);
	CHECK_STR(g.path[0], "/a b");
	CHECK_EQ_U(g.idx[0], 0);
	CHECK_STR(g.path[1], "/dir/we");
	CHECK_EQ_U(g.idx[1], 1);
	CHECK_STR(g.path[2], "/dir/t\tab");
	CHECK_STR(g.path[3], "<12>/lost");
}

/* ---- the lookup, against a fake debugfs ---- */

/* A manifest of one ext4 partition (1 MiB in, 4 KiB blocks) and the
 * listed ranges at these blocks, each len bytes. */
static void manifest(struct img_manifest *m, struct img_part *p, const uint64_t *blocks,
		     const uint64_t *lens, size_t n)
{
	memset(m, 0, sizeof(*m));
	memset(p, 0, sizeof(*p));
	m->disk_size = 64ull << 20;
	p->number = 1;
	p->start = 1 << 20;
	p->size = 63ull << 20;
	snprintf(p->filesystem, sizeof(p->filesystem), "ext4");
	snprintf(p->plugin, sizeof(p->plugin), "ext");
	p->block_size = 4096;
	p->block_count = p->size / 4096;
	m->parts = p;
	m->nparts = 1;
	m->unreadable.bytes = 512;
	m->unreadable.ranges = n;
	m->unreadable.nlist = n;
	for (size_t i = 0; i < n; i++) {
		m->unreadable.list[i].offset = p->start + blocks[i] * 4096;
		m->unreadable.list[i].length = lens[i];
	}
}

static void free_files(struct img_manifest *m)
{
	for (size_t i = 0; i < IMG_UNREADABLE_LIST; i++)
		free(m->unreadable.list[i].files);
}

/* A fake debugfs in dir, first on PATH: body is its shell script. */
static void fake_debugfs(const char *body)
{
	char path[PATH_MAX + 16];
	FILE *f;

	snprintf(path, sizeof(path), "%s/debugfs", dir);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fprintf(f, "#!/bin/sh\n%s", body);
	fclose(f);
	CHECK(chmod(path, 0755) == 0);
}

static void test_lookup_fake(void)
{
	static const uint64_t blocks[] = { 100, 200, 1000 }, lens[] = { 512, 4096 * 400, 512 };
	struct img_manifest m;
	struct img_part p;
	char warning[600], script[8192], path[PATH_MAX + 64];
	size_t at;
	FILE *f;

	/* icheck: 100 in inode 12, 200 in none, 201.. in 13, 1000 unanswered;
	 * ncheck: 20 names for 12 (one of them 2000 bytes long), garbage,
	 * nothing for 13; the arguments recorded. */
	at = (size_t)snprintf(script, sizeof(script),
			      "echo \"$*\" >>'%s/args'\n"
			      "case \"$3\" in\n"
			      "icheck*) printf 'Block\\tInode number\\n100\\t12\\n200\\t<block not found>\\n'\n"
			      "\tfor b in $(seq 201 599); do printf '%%s\\t13\\n' $b; done ;;\n"
			      "ncheck*) printf 'Inode\\tPathname\\n'\n"
			      "\tfor i in $(seq 1 19); do printf '12\\t/f%%s\\n' $i; done\n"
			      "\tprintf '12\\t/%%02000d\\n' 0\n"
			      "\tprintf '\\033[31m garbage\\n12\\tno-slash\\n' ;;\n"
			      "esac\n", dir);
	CHECK(at < sizeof(script));
	fake_debugfs(script);
	manifest(&m, &p, blocks, lens, 3);
	CHECK(extfiles_lookup("/some/disk", &m, warning, sizeof(warning)) == 0);
	CHECK_STR(warning, "");
	/* range 0: block 100, /f1../f16 kept of 20 names */
	CHECK(m.unreadable.list[0].looked_up);
	CHECK_EQ_U(m.unreadable.list[0].nfiles, IMG_UNREADABLE_FILES);
	if (m.unreadable.list[0].nfiles == IMG_UNREADABLE_FILES) {
		CHECK_STR(m.unreadable.list[0].files[0], "/f1");
		CHECK_STR(m.unreadable.list[0].files[15], "/f16");
	}
	CHECK(m.unreadable.list[0].files_partial);
	CHECK_EQ_U(m.unreadable.list[0].no_file_blocks, 0);
	/* range 1: 400 blocks, 254 of them asked (256 in all, each range's
	 * first block first): the first in no file, the rest in 13 */
	CHECK(m.unreadable.list[1].looked_up);
	CHECK(m.unreadable.list[1].files_partial);
	CHECK_EQ_U(m.unreadable.list[1].no_file_blocks, 1);
	CHECK_EQ_U(m.unreadable.list[1].nfiles, 1);
	if (m.unreadable.list[1].nfiles == 1)
		CHECK_STR(m.unreadable.list[1].files[0], "<inode 13>");
	/* range 2: unanswered */
	CHECK(m.unreadable.list[2].looked_up);
	CHECK(m.unreadable.list[2].files_partial);
	CHECK_EQ_U(m.unreadable.list[2].nfiles, 0);
	free_files(&m);
	/* what was asked: 256 blocks, at the partition's offset, read-only */
	snprintf(path, sizeof(path), "%s/args", dir);
	f = fopen(path, "r");
	CHECK(f != NULL);
	if (f) {
		static char line[16384];
		unsigned n = 0;
		CHECK(fgets(line, sizeof(line), f) != NULL);
		CHECK(!strncmp(line, "-c -R icheck 100 200 201 202 ", 29));
		CHECK(strstr(line, " 452 453 1000 -- /some/disk?offset=1048576\n") != NULL);
		for (char *s = strstr(line, "icheck"); s && (s = strchr(s, ' ')); s++)
			n++;
		CHECK_EQ_U(n, 256 + 2);   /* (and "--", the device) */
		CHECK(fgets(line, sizeof(line), f) != NULL);
		CHECK_STR(line, "-c -R ncheck 12 13 -- /some/disk?offset=1048576\n");
		fclose(f);
	}

	/* A long name is cut, not inside a UTF-8 character, and ends with "..." */
	snprintf(script, sizeof(script),
		 "case \"$3\" in\n"
		 "icheck*) printf 'Block\\tInode number\\n100\\t12\\n' ;;\n"
		 "ncheck*) printf 'Inode\\tPathname\\n12\\t/%%01018d\\303\\251tail\\n' 0 ;;\n"
		 "esac\n");
	fake_debugfs(script);
	manifest(&m, &p, blocks, lens, 1);
	CHECK(extfiles_lookup("/some/disk", &m, warning, sizeof(warning)) == 0);
	CHECK_EQ_U(m.unreadable.list[0].nfiles, 1);
	if (m.unreadable.list[0].nfiles == 1) {   /* (the "é" at 1019-1020 left out) */
		const char *s = m.unreadable.list[0].files[0];
		CHECK_EQ_U(strlen(s), 1019 + 3);
		CHECK(s[1018] == '0' && !strcmp(s + 1019, "..."));
	}
	free_files(&m);

	/* Failing: its reason in the warning, no names. */
	fake_debugfs("echo 'debugfs 1.47.0 (5-Feb-2023)' >&2\n"
		     "printf 'debugfs: Bad magic number in super-block\\033[2J\\n' >&2\nexit 1\n");
	manifest(&m, &p, blocks, lens, 3);
	CHECK(extfiles_lookup("/some/disk", &m, warning, sizeof(warning)) == 0);
	CHECK(strstr(warning, "partition 1: debugfs could not read its filesystem (debugfs: Bad "
			      "magic number in super-block?[2J)") != NULL);
	CHECK(!m.unreadable.list[0].looked_up && !m.unreadable.list[0].files);
	free_files(&m);

	/* icheck answers, ncheck fails: the inodes by number. */
	fake_debugfs("case \"$3\" in\n"
		     "icheck*) printf 'Block\\tInode number\\n100\\t8\\n200\\t2\\n1000\\t7\\n' ;;\n"
		     "*) echo 'ncheck: Can'\"'\"'t read next inode' >&2 ;;\n"
		     "esac\n");
	manifest(&m, &p, blocks, (const uint64_t[]){ 512, 512, 512 }, 3);
	CHECK(extfiles_lookup("/some/disk", &m, warning, sizeof(warning)) == 0);
	CHECK(strstr(warning, "given by inode number") != NULL);
	CHECK_EQ_U(m.unreadable.list[0].nfiles, 1);
	if (m.unreadable.list[0].nfiles && m.unreadable.list[1].nfiles && m.unreadable.list[2].nfiles) {
		CHECK_STR(m.unreadable.list[0].files[0], "<inode 8: the journal>");
		CHECK_STR(m.unreadable.list[1].files[0], "/");
		CHECK_STR(m.unreadable.list[2].files[0], "<inode 7: reserved for resizing>");
	}
	CHECK(!m.unreadable.list[0].files_partial);
	free_files(&m);

	/* A range outside any ext partition, and a path debugfs cannot take. */
	manifest(&m, &p, blocks, lens, 1);
	snprintf(p.plugin, sizeof(p.plugin), "raw");
	CHECK(extfiles_lookup("/some/disk", &m, warning, sizeof(warning)) == 0);
	CHECK_STR(warning, "");
	CHECK(!m.unreadable.list[0].looked_up);
	manifest(&m, &p, blocks, lens, 1);
	CHECK(extfiles_lookup("/some/di?sk", &m, warning, sizeof(warning)) == 0);
	CHECK(strstr(warning, "'?'") != NULL);
	CHECK(!m.unreadable.list[0].looked_up);

	/* No debugfs at all. */
	setenv("PATH", "/nonexistent", 1);
	manifest(&m, &p, blocks, lens, 1);
	CHECK(extfiles_lookup("/some/disk", &m, warning, sizeof(warning)) == 0);
	CHECK(strstr(warning, "debugfs (e2fsprogs) is not installed") != NULL);
	CHECK(!m.unreadable.list[0].looked_up);
	CHECK(str_printf(path, sizeof(path), "%s:%s", dir, old_path) == 0);
	setenv("PATH", path, 1);
}

static void test_timeout(void)
{
	const char *argv[] = { "sleep", "10", NULL };
	char out[64], errs[64];
	time_t t0 = time(NULL);

	CHECK(tool_run_timed(argv, out, sizeof(out), errs, sizeof(errs), 1) == -ETIMEDOUT);
	CHECK(time(NULL) - t0 < 5);
}

/* ---- the real debugfs ---- */

static uint64_t bmap(const char *img, const char *file, unsigned blk)
{
	char cmd[PATH_MAX + 256], line[64] = "";
	FILE *f;

	snprintf(cmd, sizeof(cmd), "debugfs -R 'bmap %s %u' '%s?offset=1048576' 2>/dev/null", file, blk,
		 img);
	f = popen(cmd, "r");
	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	pclose(f);
	return strtoull(line, NULL, 10);
}

static void test_lookup_real(void)
{
	char cmd[3 * PATH_MAX], img[PATH_MAX + 16], warning[600];
	uint64_t blocks[3], lens[3] = { 512, 8192, 512 };
	struct img_manifest m;
	struct img_part p;

	setenv("PATH", old_path, 1);
	if (system("command -v mke2fs >/dev/null 2>&1 && command -v debugfs >/dev/null 2>&1") != 0) {
		unit_skip("SKIP: mke2fs or debugfs not installed (the real debugfs case)");
		return;
	}
	snprintf(img, sizeof(img), "%s/disk.img", dir);
	CHECK(str_printf(cmd, sizeof(cmd),
		 "mkdir -p '%s/src/d' && head -c 200000 /dev/urandom >'%s/src/d/file one' && "
		 "ln '%s/src/d/file one' '%s/src/link' && head -c 50000 /dev/urandom >'%s/src/other' && "
		 "truncate -s 64M '%s' && mke2fs -q -F -t ext4 -b 4096 -d '%s/src' -E offset=1048576 '%s' 60M "
		 ">/dev/null 2>&1", dir, dir, dir, dir, dir, img, dir, img) == 0);
	CHECK(system(cmd) == 0);
	blocks[0] = bmap(img, "\"/d/file one\"", 10);
	blocks[1] = bmap(img, "/other", 5);        /* with the next: two blocks of it */
	blocks[2] = 14000;                         /* free space */
	CHECK(blocks[0] && blocks[1]);
	manifest(&m, &p, blocks, lens, 3);
	CHECK(extfiles_lookup(img, &m, warning, sizeof(warning)) == 0);
	CHECK_STR(warning, "");
	CHECK_EQ_U(m.unreadable.list[0].nfiles, 2);
	if (m.unreadable.list[0].nfiles == 2) {
		/* (ncheck's order: the root's entries first) */
		CHECK_STR(m.unreadable.list[0].files[0], "/link");
		CHECK_STR(m.unreadable.list[0].files[1], "/d/file one");
	}
	CHECK(m.unreadable.list[1].nfiles >= 1);
	if (m.unreadable.list[1].nfiles)
		CHECK_STR(m.unreadable.list[1].files[0], "/other");
	CHECK(!m.unreadable.list[1].files_partial);
	CHECK(m.unreadable.list[2].looked_up);
	CHECK_EQ_U(m.unreadable.list[2].nfiles, 0);
	CHECK_EQ_U(m.unreadable.list[2].no_file_blocks, 1);
	free_files(&m);
	setenv("PATH", old_path, 1);
}

static void setup(void)
{
	char path[PATH_MAX + 8300];

	snprintf(old_path, sizeof(old_path), "%s", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	snprintf(dir, sizeof(dir), "/tmp/imager-unit-extfiles-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	CHECK(str_printf(path, sizeof(path), "%s:%s", dir, old_path) == 0);
	setenv("PATH", path, 1);
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];

	setenv("PATH", old_path, 1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

UNIT_MAIN(UNIT(setup), UNIT(test_icheck), UNIT(test_ncheck), UNIT(test_lookup_fake),
	  UNIT(test_timeout), UNIT(test_lookup_real), UNIT(teardown))
