/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The libguestfs layer: the KVM-or-TCG decision (modes, the cached verdict,
 * a probe that hangs and is killed) without booting anything, then two real
 * appliance launches that grow an ext4 filesystem to fill its enlarged
 * partition, on a raw image and on a qcow2 image, checked afterwards with
 * dumpe2fs, e2fsck and debugfs on the extracted partition. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "imager/guest.h"
#include "unit.h"

#define MiB (1024ull * 1024ull)
/* A hang (the one failure CHECK cannot catch) ends the process instead. */
#define TEST_SECONDS 900
#define SLEEP_TAG "987654"   /* the fake hypervisor's `sleep` argument */

static char dir[64];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	r = system(cmd);
	if (r != 0)
		fprintf(stderr, "  command failed (%d): %s\n", r, cmd);
	return r;
}

/* First line of a command's output, "" on failure. */
static void sh_out(char *buf, size_t len, const char *cmd)
{
	FILE *p = popen(cmd, "r");

	buf[0] = '\0';
	if (!p)
		return;
	if (!fgets(buf, (int)len, p))
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	pclose(p);
}

static bool file_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static const char *setup(void)
{
	if (!dir[0]) {
		strcpy(dir, "/tmp/test-guest-XXXXXX");
		if (!mkdtemp(dir))
			dir[0] = '\0';
	}
	return dir;
}

static bool have_tools(void)
{
	static int have = -1;

	if (have < 0) {
		have = system("for t in parted mke2fs dumpe2fs debugfs e2fsck mkswap partx "
			      "qemu-img qemu-system-x86_64 supermin; do "
			      "command -v $t >/dev/null 2>&1 || { echo \"SKIP: $t not installed\"; "
			      "exit 1; }; done; "
			      "ls -d /usr/lib/*/guestfs/supermin.d >/dev/null 2>&1 || "
			      "{ echo 'SKIP: no libguestfs appliance (supermin.d)'; exit 1; }") == 0;
	}
	if (!have)
		unit_skips++;  /* (the reason was printed above) */
	return have && setup()[0];
}

/* A live process whose command line holds tag, or a zombie child of ours
 * (the probe makes us the subreaper of its process group, so its orphans
 * would end up here unreaped). */
static bool process_left(const char *tag)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	bool found = false;

	while (d && !found && (e = readdir(d))) {
		char path[300], buf[512], state;
		const char *p;
		ssize_t n;
		int fd, ppid;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		for (ssize_t i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[n > 0 ? n : 0] = '\0';
		if (strstr(buf, tag) && !strstr(buf, "test-guest"))
			found = true;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		p = strrchr(buf, ')');
		if (p && sscanf(p + 1, " %c %d", &state, &ppid) == 2 && state == 'Z' &&
		    ppid == getpid())
			found = true;
	}
	if (d)
		closedir(d);
	return found;
}

/* Temporary folders the probe's libguestfs left in /tmp since `since`:
 * recognised by the probe's 1 MiB scratch drive. */
static int probe_leftovers(time_t since)
{
	DIR *d = opendir("/tmp");
	struct dirent *e;
	int found = 0;

	while (d && (e = readdir(d))) {
		char path[300];
		struct stat st;

		if (strncmp(e->d_name, "libguestfs", 10))
			continue;
		snprintf(path, sizeof(path), "/tmp/%s/scratch1.img", e->d_name);
		if (stat(path, &st) == 0 && st.st_size == (off_t)MiB && st.st_mtime >= since) {
			fprintf(stderr, "  left behind: /tmp/%s\n", e->d_name);
			found++;
		}
	}
	if (d)
		closedir(d);
	return found;
}

/* ---- acceleration, no appliance booted ---- */

static void test_accel_modes(void)
{
	struct guest_accel_choice c;
	struct im_err err = { 0 };

	CHECK_EQ_U(guest_accel_choose(&(struct guest_accel_cfg){ .mode = "tcg" }, &c, &err), 0);
	CHECK_EQ_U(c.accel, GUEST_ACCEL_TCG);
	CHECK_EQ_U(c.why, GUEST_WHY_ASKED);
	CHECK_EQ_U(guest_accel_choose(&(struct guest_accel_cfg){ .mode = "kvm" }, &c, &err), 0);
	CHECK_EQ_U(c.accel, GUEST_ACCEL_KVM);
	CHECK(guest_accel_choose(&(struct guest_accel_cfg){ .mode = "fast" }, &c, &err) == -EINVAL);
	CHECK_EQ_U(err.exit_class, IM_EXIT_USAGE);
	CHECK(strstr(err.msg, "fast") != NULL);

	/* No KVM device: TCG at once, no probe, whatever the cache says. */
	err = (struct im_err){ 0 };
	CHECK_EQ_U(guest_accel_choose(&(struct guest_accel_cfg){
		.mode = "auto", .kvm_device = "/nonexistent/kvm",
		.cache_file = "/nonexistent/cache" }, &c, &err), 0);
	CHECK_EQ_U(c.accel, GUEST_ACCEL_TCG);
	CHECK_EQ_U(c.why, GUEST_WHY_NO_KVM);
	CHECK(c.probe_seconds == 0);

	/* What this machine has (nothing is probed here). */
	{
		int fd = open("/dev/kvm", O_RDWR);

		printf("  this machine: /dev/kvm %s\n", fd >= 0 ? "openable" :
		       file_exists("/dev/kvm") ? "present, not openable" : "absent");
		if (fd >= 0)
			close(fd);
	}
}

/*
 * The probe without KVM: /dev/null stands for an openable KVM device and
 * LIBGUESTFS_HV for a hypervisor that answers libguestfs's feature tests
 * (the real qemu) but never boots (`sleep`), as a stock kernel under this
 * host's KVM.  It leaves a marker when asked to boot, so "no probe ran" is
 * checked by the marker's absence, not by timing alone.
 */
static void test_accel_cache_and_probe(void)
{
	char hv[128], marker[128], cache[128], line[128];
	struct guest_accel_cfg cfg = { .mode = "auto", .kvm_device = "/dev/null",
				       .probe_seconds = 10 };
	struct guest_accel_choice c;
	struct im_err err = { 0 };
	struct utsname u;
	time_t started;
	double t;

	if (!have_tools())
		return;
	uname(&u);
	snprintf(hv, sizeof(hv), "%s/fake-qemu", dir);
	snprintf(marker, sizeof(marker), "%s/fake-qemu-booted", dir);
	snprintf(cache, sizeof(cache), "%s/accel", dir);
	cfg.cache_file = cache;
	{
		char script[1024];

		snprintf(script, sizeof(script),
			 "#!/bin/sh\n"
			 "for a in \"$@\"; do\n"
			 "  if [ \"$a\" = -kernel ]; then\n"
			 "    echo booted >> %s\n"
			 "    [ -z \"$FAKE_QEMU_IGNORE_TERM\" ] || trap '' TERM\n"
			 "    exec sleep " SLEEP_TAG "\n"
			 "  fi\n"
			 "done\n"
			 "exec qemu-system-x86_64 \"$@\"\n", marker);
		write_file(hv, script);
		chmod(hv, 0755);
	}
	setenv("LIBGUESTFS_HV", hv, 1);

	/* A verdict recorded for this kernel: used, nothing launched. */
	snprintf(line, sizeof(line), "%s tcg\n", u.release);
	write_file(cache, line);
	t = now();
	CHECK_EQ_U(guest_accel_choose(&cfg, &c, &err), 0);
	t = now() - t;
	CHECK_EQ_U(c.accel, GUEST_ACCEL_TCG);
	CHECK_EQ_U(c.why, GUEST_WHY_CACHED);
	CHECK(!file_exists(marker));
	CHECK(t < 0.5);
	snprintf(line, sizeof(line), "%s kvm\n", u.release);
	write_file(cache, line);
	CHECK_EQ_U(guest_accel_choose(&cfg, &c, &err), 0);
	CHECK_EQ_U(c.accel, GUEST_ACCEL_KVM);
	CHECK_EQ_U(c.why, GUEST_WHY_CACHED);
	CHECK(!file_exists(marker));

	/* Recorded under another kernel: probe.  The fake boot hangs, so the
	 * probe is killed 10 s after the appliance build (plus the SIGTERM
	 * grace if needed) and records tcg for this kernel.  10 s, not less:
	 * libguestfs first asks the new fake-qemu file what it supports (the
	 * real qemu answers, several seconds on a loaded machine), and only
	 * then boots, which leaves the marker. */
	write_file(cache, "0.0.0-other-kernel kvm\n");
	started = time(NULL);
	t = now();
	CHECK_EQ_U(guest_accel_choose(&cfg, &c, &err), 0);
	t = now() - t;
	CHECK_EQ_U(c.accel, GUEST_ACCEL_TCG);
	CHECK_EQ_U(c.why, GUEST_WHY_PROBE_HUNG);
	CHECK(file_exists(marker));
	CHECK(c.probe_seconds >= 10 && c.probe_seconds < 60);
	printf("  hung probe: %.1f s (limit 10 s after the appliance build)\n", c.probe_seconds);
	CHECK(!process_left(SLEEP_TAG));  /* the group was killed and reaped */
	CHECK_EQ_U(probe_leftovers(started), 0);
	{
		char want[128];
		FILE *f = fopen(cache, "r");

		line[0] = '\0';
		if (f) {
			if (!fgets(line, sizeof(line), f))
				line[0] = '\0';
			fclose(f);
		}
		snprintf(want, sizeof(want), "%s tcg\n", u.release);
		CHECK_STR(line, want);
	}
	/* A symlink is not trusted (the file may live in /tmp).  This time
	 * the hanging "qemu" ignores SIGTERM: the group gets SIGKILL after the
	 * grace period, and the orphan is reaped all the same. */
	unlink(marker);
	{
		char target[160];

		snprintf(target, sizeof(target), "%s/accel-target", dir);
		snprintf(line, sizeof(line), "%s kvm\n", u.release);
		write_file(target, line);
		unlink(cache);
		CHECK(symlink(target, cache) == 0);
		cfg.probe_seconds = 4;
		setenv("FAKE_QEMU_IGNORE_TERM", "1", 1);
		CHECK_EQ_U(guest_accel_choose(&cfg, &c, &err), 0);
		unsetenv("FAKE_QEMU_IGNORE_TERM");
		CHECK_EQ_U(c.why, GUEST_WHY_PROBE_HUNG);
		CHECK(c.probe_seconds >= 9 && c.probe_seconds < 60);
		printf("  hung probe ignoring SIGTERM: %.1f s (4 s + 5 s grace)\n",
		       c.probe_seconds);
		CHECK_EQ_U(probe_leftovers(started), 0);
		CHECK(file_exists(marker));
		CHECK(!process_left(SLEEP_TAG));
	}
	unsetenv("LIBGUESTFS_HV");
	CHECK_EQ_U(err.exit_class, 0);
	(void)t;
}

/* ---- real launches ---- */

static void test_open_refusals(void)
{
	const char *disk = "/nonexistent.img", *fmt = "raw", *nofmt = NULL;
	struct im_err err = { 0 };
	guestfs_h *g = (guestfs_h *)1;
	unsigned nr = 1;

	CHECK(guest_open(&disk, &nofmt, 1, true, 0, &g, &err) == -EINVAL);
	CHECK(g == NULL);
	CHECK_EQ_U(err.exit_class, IM_EXIT_USAGE);
	err = (struct im_err){ 0 };
	setenv("IMAGER_ACCEL", "tcg", 1);
	CHECK(guest_open(&disk, &fmt, 1, true, 0, &g, &err) == -ENOENT);
	CHECK_EQ_U(err.exit_class, IM_EXIT_TARGET);
	CHECK(strstr(err.msg, disk) != NULL);
	err = (struct im_err){ 0 };
	CHECK_EQ_U(guest_grow_partitions(disk, fmt, &nr, NULL, 0, NULL, &err), 0);  /* no launch */
	err = (struct im_err){ 0 };
	setenv("IMAGER_ACCEL", "warp", 1);  /* refused before any launch */
	CHECK(guest_grow_partitions("/dev/null", fmt, &nr, NULL, 1, NULL, &err) == -EINVAL);
	CHECK_EQ_U(err.exit_class, IM_EXIT_USAGE);
	unsetenv("IMAGER_ACCEL");
}

/* disk.raw, 300 MiB, msdos: p1 swap 1-9 MiB, p2 ext4 made 100 MiB from a
 * folder, then the table entry of p2 enlarged to the end of the disk. */
static bool make_disk(const char *raw, uint64_t *p2_bytes)
{
	char out[64], cmd[512];

	if (sh("set -e; cd %s; rm -rf src; mkdir -p src/sub; echo 'hello guest' > src/hello.txt; "
	       "head -c 300000 /dev/urandom > src/sub/blob; "
	       "truncate -s 300M %s; parted -s %s mklabel msdos mkpart primary linux-swap 1MiB 9MiB "
	       "mkpart primary ext4 9MiB 109MiB; "
	       "truncate -s 8M swap.img; mkswap -q swap.img; "
	       "dd if=swap.img of=%s bs=1M seek=1 conv=notrunc status=none; "
	       "mke2fs -q -F -t ext4 -b 4096 -d src -L growme p2.img 100M >/dev/null; "
	       "dd if=p2.img of=%s bs=1M seek=9 conv=notrunc status=none; "
	       "parted -s %s resizepart 2 100%%", dir, raw, raw, raw, raw, raw))
		return false;
	snprintf(cmd, sizeof(cmd), "partx -g -b -o SIZE -n 2 %s", raw);
	sh_out(out, sizeof(out), cmd);
	*p2_bytes = strtoull(out, NULL, 10);
	return *p2_bytes > 250 * MiB;
}

/* The filesystem of p2 as a file, taken from a raw disk image. */
static void check_grown(const char *raw, uint64_t p2_bytes)
{
	char out[256], cmd[512];

	CHECK(sh("dd if=%s of=%s/p2-after.img bs=1M skip=9 status=none", raw, dir) == 0);
	snprintf(cmd, sizeof(cmd), "dumpe2fs -h %s/p2-after.img 2>/dev/null | "
		 "sed -n 's/^Block count: *//p'", dir);
	sh_out(out, sizeof(out), cmd);
	CHECK_EQ_U(strtoull(out, NULL, 10), p2_bytes / 4096);
	CHECK(sh("e2fsck -fn %s/p2-after.img >/dev/null 2>&1", dir) == 0);
	snprintf(cmd, sizeof(cmd), "debugfs -R 'cat /hello.txt' %s/p2-after.img 2>/dev/null", dir);
	sh_out(out, sizeof(out), cmd);
	CHECK_STR(out, "hello guest");
	CHECK(sh("debugfs -R 'dump /sub/blob %s/blob.out' %s/p2-after.img >/dev/null 2>&1 && "
		 "cmp -s %s/blob.out %s/src/sub/blob", dir, dir, dir, dir) == 0);
	/* The swap partition was left alone. */
	CHECK(sh("dd if=%s bs=1M skip=1 count=8 status=none | cmp -s - %s/swap.img", raw, dir) == 0);
}

/* Runs guest_grow_partitions with stdout and stderr captured: the engine
 * must not print, libguestfs included. */
static int grow_quietly(const char *disk, const char *fmt, struct guest_grow_result *res,
			struct im_err *err, double *seconds)
{
	static const unsigned parts[] = { 1, 2 };
	char cap[128];
	int fd, o1, o2, r;
	struct stat st;

	snprintf(cap, sizeof(cap), "%s/captured", dir);
	fflush(stdout);
	fflush(stderr);
	fd = open(cap, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	o1 = dup(1);
	o2 = dup(2);
	dup2(fd, 1);
	dup2(fd, 2);
	*seconds = now();
	r = guest_grow_partitions(disk, fmt, parts, NULL, 2, res, err);
	*seconds = now() - *seconds;
	fflush(stdout);
	fflush(stderr);
	dup2(o1, 1);
	dup2(o2, 2);
	close(o1);
	close(o2);
	close(fd);
	CHECK(stat(cap, &st) == 0 && st.st_size == 0);
	if (st.st_size)
		sh("sed 's/^/  printed: /' %s >&2", cap);
	return r;
}

static void check_results(const struct guest_grow_result *res, uint64_t p2_bytes)
{
	CHECK_EQ_U(res[0].number, 1);
	CHECK_STR(res[0].fstype, "swap");
	CHECK(!res[0].grown);
	CHECK_EQ_U(res[1].number, 2);
	CHECK_STR(res[1].fstype, "ext4");
	CHECK(res[1].grown);
	CHECK_EQ_U(res[1].bytes_before, 100 * MiB);
	CHECK_EQ_U(res[1].bytes_after, p2_bytes / 4096 * 4096);
}

static void test_grow_raw_tcg(void)
{
	struct guest_grow_result res[2];
	struct im_err err = { 0 };
	char raw[128];
	uint64_t p2_bytes = 0;
	double s;
	int r;

	if (!have_tools())
		return;
	snprintf(raw, sizeof(raw), "%s/disk.raw", dir);
	if (!make_disk(raw, &p2_bytes)) {
		CHECK(!"making the test disk");
		return;
	}
	setenv("IMAGER_ACCEL", "tcg", 1);
	r = grow_quietly(raw, "raw", res, &err, &s);
	unsetenv("IMAGER_ACCEL");
	if (r)
		fprintf(stderr, "  %s\n", err.msg);
	CHECK_EQ_U(r, 0);
	printf("  raw, IMAGER_ACCEL=tcg: launch + grow + shutdown %.1f s\n", s);
	if (r)
		return;
	check_results(res, p2_bytes);
	check_grown(raw, p2_bytes);
}

/* qcow2, auto mode with a verdict file saying tcg: on a host with /dev/kvm
 * the cache decides, on one without the missing device does; neither
 * probes (the choice is timed, and its reason printed). */
static void test_grow_qcow2_auto(void)
{
	struct guest_grow_result res[2];
	struct guest_accel_choice c;
	struct im_err err = { 0 };
	char raw[128], qcow[128], cache[128], line[160];
	uint64_t p2_bytes = 0;
	struct utsname u;
	double s;
	int r;

	if (!have_tools())
		return;
	uname(&u);
	snprintf(raw, sizeof(raw), "%s/disk.raw", dir);
	snprintf(qcow, sizeof(qcow), "%s/disk.qcow2", dir);
	snprintf(cache, sizeof(cache), "%s/accel-auto", dir);
	if (!make_disk(raw, &p2_bytes) ||
	    sh("qemu-img convert -f raw -O qcow2 %s %s && rm %s", raw, qcow, raw)) {
		CHECK(!"making the test disk");
		return;
	}
	snprintf(line, sizeof(line), "%s tcg\n", u.release);
	write_file(cache, line);
	setenv("IMAGER_ACCEL", "auto", 1);
	setenv("IMAGER_ACCEL_CACHE", cache, 1);
	s = now();
	CHECK_EQ_U(guest_accel_choose(NULL, &c, &err), 0);
	s = now() - s;
	CHECK(c.why == GUEST_WHY_CACHED || c.why == GUEST_WHY_NO_KVM);
	CHECK_EQ_U(c.accel, GUEST_ACCEL_TCG);
	CHECK(s < 0.5);
	printf("  auto: %s (%s), decided in %.3f s\n", guest_accel_name(c.accel),
	       guest_accel_why_name(c.why), s);

	r = grow_quietly(qcow, "qcow2", res, &err, &s);
	unsetenv("IMAGER_ACCEL");
	unsetenv("IMAGER_ACCEL_CACHE");
	if (r)
		fprintf(stderr, "  %s\n", err.msg);
	CHECK_EQ_U(r, 0);
	printf("  qcow2, IMAGER_ACCEL=auto: launch + grow + shutdown %.1f s\n", s);
	if (r)
		return;
	check_results(res, p2_bytes);
	CHECK(sh("qemu-img check -q %s", qcow) == 0);
	CHECK(sh("qemu-img convert -f qcow2 -O raw %s %s", qcow, raw) == 0);
	check_grown(raw, p2_bytes);
}

static void test_cleanup(void)
{
	if (dir[0])
		sh("rm -rf %s", dir);
}

static void start_alarm(void)
{
	alarm(TEST_SECONDS);
}

UNIT_MAIN(UNIT(start_alarm), UNIT(test_accel_modes), UNIT(test_accel_cache_and_probe),
	  UNIT(test_open_refusals), UNIT(test_grow_raw_tcg), UNIT(test_grow_qcow2_auto),
	  UNIT(test_cleanup))
