/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The image folder as one tar stream (image/imgtar.h), what `imager
 * multicast` sends, restored as it is read (im_restore_stream): a GPT disk
 * (ext4 with files, a partition of random bytes) saved, sent into a file,
 * restored from it: the same bytes as im_restore of the folder.  Then
 * streams that are not what imager sends: cut in a partition's stream, a
 * flipped byte in a frame, entries in another order, a tar of something
 * else, random bytes: each refused as damaged with the place named, and
 * the target left without a partition table.  And the receivers'
 * multicast:[PORTBASE][:IF] spec, good and bad.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imager/disk.h"
#include "imager/fleet.h"
#include "imager/image.h"
#include "imager/job.h"
#include "imgtar.h"
#include "unit.h"

static char dir[64], disk[128], image[128], want_path[128], tarp[128];
static struct disk_roots roots;
static bool ready;

static int sh(const char *fmt, const char *a)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), fmt, a, a, a, a, a, a, a, a);
	return system(cmd);
}

static void setup(void)
{
	struct save_opts so = { .level = 3, .threads = 2 };
	struct restore_opts ro = { .threads = 2 };
	struct img_manifest m = { 0 };
	struct save_stats ss;
	struct restore_stats rs;
	struct im_err err = { 0 };

	if (system("command -v sfdisk >/dev/null 2>&1 && command -v mke2fs >/dev/null 2>&1 && "
		   "command -v tar >/dev/null 2>&1") != 0) {
		unit_skip("SKIP: sfdisk, mke2fs or tar not installed (make deps installs them)");
		return;
	}
	snprintf(dir, sizeof(dir), "/tmp/stream-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(disk, sizeof(disk), "%s/disk.img", dir);
	snprintf(image, sizeof(image), "%s/image", dir);
	snprintf(want_path, sizeof(want_path), "%s/want.img", dir);
	snprintf(tarp, sizeof(tarp), "%s/image.tar", dir);
	/* ext4 of 24 MiB with 9 MiB of random bytes (three frames or more) and
	 * small files; 2 MiB of random bytes in a partition of no filesystem */
	CHECK(sh("set -e; cd %s; mkdir tree; head -c 9000000 /dev/urandom >tree/random; "
		 "for i in 1 2 3 4 5; do head -c $((i * 5000)) /dev/urandom >tree/small$i; done; "
		 "mke2fs -q -F -t ext4 -d tree fs.img 24M; "
		 "truncate -s 32M disk.img; "
		 "printf 'label: gpt\\nstart=2048, size=24MiB\\nsize=2MiB\\n' | sfdisk -q disk.img; "
		 "dd if=fs.img of=disk.img bs=1M seek=1 conv=notrunc status=none; "
		 "head -c 2097152 /dev/urandom | dd of=disk.img bs=1M seek=25 conv=notrunc status=none; "
		 "rm -rf tree fs.img", dir) == 0);
	disk_roots_default(&roots);
	if (im_save(&roots, disk, image, &so, &m, &ss, &err) < 0) {
		fprintf(stderr, "  save: %s\n", err.msg);
		CHECK(0);
		return;
	}
	CHECK(m.nparts == 2 && m.parts[0].frames >= 3);
	img_manifest_free(&m);
	if (im_restore(&roots, image, want_path, &ro, &rs, &err) < 0) {
		fprintf(stderr, "  restore: %s\n", err.msg);
		CHECK(0);
		return;
	}
	ready = true;
}

/* restore_from(TAR, TARGET): im_restore_stream of the file TAR. */
static int restore_from(const char *tar, const char *target, struct im_err *err)
{
	struct restore_opts ro = { .threads = 2 };
	struct restore_stats rs;
	int fd = open(tar, O_RDONLY), r;

	CHECK(fd >= 0);
	r = im_restore_stream(&roots, fd, "the test stream", target, &ro, &rs, err);
	close(fd);
	return r;
}

static void round_trip(void)
{
	struct img_manifest m = { 0 };
	struct im_err err = { 0 };
	char target[160], cmd[400];
	uint64_t sent = 0;
	int fd;

	if (!ready)
		return;
	CHECK(img_manifest_read(&m, image, &err) == 0);
	fd = open(tarp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(img_tar_send(image, &m, fd, NULL, &sent, &err) == 0);
	close(fd);
	img_manifest_free(&m);
	/* the stream's size, as the sender counts it */
	snprintf(cmd, sizeof(cmd), "test $(stat -c %%s %s) = %llu", tarp, (unsigned long long)sent);
	CHECK(system(cmd) == 0);
	/* what GNU tar reads of it: the manifest first, the streams last */
	CHECK(sh("tar -tf %s | head -n 1 | grep -qx manifest.json && "
		 "tar -tf %s | tail -n 2 | tr '\\n' ' ' | grep -qx 'part1.zst part2.zst '", tarp) == 0);
	snprintf(target, sizeof(target), "%s/streamed.img", dir);
	if (restore_from(tarp, target, &err) < 0) {
		fprintf(stderr, "  restore from the stream: %s\n", err.msg);
		CHECK(0);
		return;
	}
	snprintf(cmd, sizeof(cmd), "cmp -s %s %s", want_path, target);
	CHECK(system(cmd) == 0);
	unlink(target);
}

/* A refused stream: exit class, a word of the message, no table written. */
static void refused_one(const char *tar, int exit_class, const char *word)
{
	struct im_err err = { 0 };
	char target[160], cmd[400];

	snprintf(target, sizeof(target), "%s/refused.img", dir);
	unlink(target);
	CHECK(sh("truncate -s 32M %s/refused.img", dir) == 0);
	CHECK(restore_from(tar, target, &err) < 0);
	if (err.exit_class != exit_class || !strstr(err.msg, word)) {
		fprintf(stderr, "  %s: exit class %d, \"%s\" (expected %d, \"%s\")\n", tar,
			err.exit_class, err.msg, exit_class, word);
		CHECK(0);
	}
	/* no GPT: nothing that looks complete */
	snprintf(cmd, sizeof(cmd), "test \"$(dd if=%s bs=1 skip=512 count=8 status=none 2>/dev/null)\" != 'EFI PART'",
		 target);
	CHECK(system(cmd) == 0);
	unlink(target);
}

static void refused(void)
{
	char path[160], cmd[800];

	if (!ready)
		return;
	/* cut in partition 1's stream */
	snprintf(path, sizeof(path), "%s/cut.tar", dir);
	snprintf(cmd, sizeof(cmd), "head -c $(( $(stat -c %%s %s) / 3 )) %s >%s", tarp, tarp, path);
	CHECK(system(cmd) == 0);
	refused_one(path, IM_EXIT_DAMAGED, "partition 1");
	/* a flipped byte in the last frame of partition 1: found by its
	 * checksum (the byte 600 KiB before part2.idx... : the end of part1.zst
	 * is right before part2.zst's header; flip 4 KiB before that) */
	snprintf(path, sizeof(path), "%s/flipped.tar", dir);
	snprintf(cmd, sizeof(cmd),
		 "cp %s %s && off=$(( $(grep -abo 'part2.zst' %s | tail -n 1 | cut -d: -f1) - 4096 )) && "
		 "printf '\\377' | dd of=%s bs=1 seek=$off conv=notrunc status=none",
		 tarp, path, tarp, path);
	CHECK(system(cmd) == 0);
	refused_one(path, IM_EXIT_DAMAGED, "damaged");
	/* the indexes after the streams: not in the order imager sends */
	snprintf(path, sizeof(path), "%s/order.tar", dir);
	CHECK(sh("cd %s/image && tar --format=pax -cf ../order.tar manifest.json boot-* part1.zst part1.idx part2.idx part2.zst",
		 dir) == 0);
	refused_one(path, IM_EXIT_DAMAGED, "where part1.idx should come");
	/* a tar of something else */
	snprintf(path, sizeof(path), "%s/other.tar", dir);
	CHECK(sh("cd %s && tar -cf other.tar disk.img", dir) == 0);
	refused_one(path, IM_EXIT_DAMAGED, "does not begin with manifest.json");
	/* random bytes */
	snprintf(path, sizeof(path), "%s/random.bin", dir);
	CHECK(sh("head -c 100000 /dev/urandom >%s/random.bin", dir) == 0);
	refused_one(path, IM_EXIT_DAMAGED, "the test stream");
	/* nothing at all */
	snprintf(path, sizeof(path), "%s/empty.tar", dir);
	CHECK(sh(": >%s/empty.tar", dir) == 0);
	refused_one(path, IM_EXIT_DAMAGED, "");
}

static void spec(void)
{
	unsigned port;
	char iface[32];
	bool bad;

	CHECK(im_multicast_spec("multicast:", &port, iface, sizeof(iface), &bad) && !bad);
	CHECK_EQ_U(port, 0);
	CHECK_STR(iface, "");
	CHECK(im_multicast_spec("multicast:9000", &port, iface, sizeof(iface), &bad) && !bad);
	CHECK_EQ_U(port, 9000);
	CHECK(im_multicast_spec("multicast:9100:eth0", &port, iface, sizeof(iface), &bad) && !bad);
	CHECK_EQ_U(port, 9100);
	CHECK_STR(iface, "eth0");
	CHECK(im_multicast_spec("multicast::enp1s0", &port, iface, sizeof(iface), &bad) && !bad);
	CHECK_EQ_U(port, 0);
	CHECK_STR(iface, "enp1s0");
	CHECK(!im_multicast_spec("/images/x", &port, iface, sizeof(iface), &bad) && !bad);
	CHECK(!im_multicast_spec("multicast", &port, iface, sizeof(iface), &bad));
	static const char *const bads[] = {
		"multicast:80", "multicast:65534", "multicast:99999999999", "multicast:-1",
		"multicast:+9000", "multicast:9000x", "multicast:9000:", "multicast:9000:eth0/x",
		"multicast:9000:a b", "multicast:9000:averyveryverylongname", "multicast: 9000",
	};
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		bool b = false;
		CHECK(im_multicast_spec(bads[i], &port, iface, sizeof(iface), &b));
		if (!b)
			fprintf(stderr, "  %s was taken\n", bads[i]);
		CHECK(b);
	}
}

static void teardown(void)
{
	if (dir[0])
		sh("rm -rf %s", dir);
}

UNIT_MAIN(UNIT(setup), UNIT(round_trip), UNIT(refused), UNIT(spec), UNIT(teardown))
