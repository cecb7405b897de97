/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Which tool made an initramfs (imager/convert/initrd.c), on images made by
 * the real tools: GNU cpio (newc) and the compressors' own commands, one
 * early archive before the main one as Debian's and dracut's images have;
 * then cut short, corrupted and hostile images.  And dpkg_installed() on
 * this machine's own /var/lib/dpkg/status. */
#include "unit.h"

#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convtext.h"

static char dir[] = "/tmp/imager-unit-initrd-XXXXXX";

static int sh(const char *fmt, const char *a, const char *b)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), fmt, dir, a ? a : "", b ? b : "");
	return system(cmd);
}

static unsigned char *slurp(const char *name, size_t *len)
{
	char path[300];
	struct stat st;
	unsigned char *p = NULL;
	FILE *f;

	*len = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "rb")))
		return NULL;
	if (!fstat(fileno(f), &st) && (p = malloc((size_t)st.st_size + 1))) {
		*len = fread(p, 1, (size_t)st.st_size, f);
		p[*len] = 0;
	}
	fclose(f);
	return p;
}

/* A tree holding the marker file, packed by cpio into NAME.cpio. */
static int pack(const char *name, const char *marker)
{
	return sh("set -e; cd %1$s; rm -rf t; mkdir -p t/bin t/lib/modules/6.1.0/kernel t/etc; "
		  "echo hi > t/bin/sh; head -c 70000 /dev/urandom > t/lib/modules/6.1.0/kernel/a.ko; "
		  "if [ -n '%3$s' ]; then mkdir -p \"t/$(dirname '%3$s')\"; echo x > 't/%3$s'; fi; "
		  "(cd t && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > %2$s.cpio",
		  name, marker);
}

static const struct { const char *cmd, *ext; } packers[] = {
	{ "gzip -9 -n -c", "gz" }, { "zstd -q -19 -c", "zst" }, { "xz -c --check=crc32", "xz" },
	{ "lzma -c", "lzma" }, { "lz4 -l -c", "lz4" }, { "bzip2 -c", "bz2" },
};

static bool have(const char *tool)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

static void makers(void)
{
	static const struct { const char *marker; int want; } m[] = {
		{ "conf/initramfs.conf", IRD_INITRAMFS_TOOLS },
		{ "usr/lib/dracut/build-parameter.txt", IRD_DRACUT },
		{ "init_functions", IRD_MKINITCPIO },
		{ "run_all.sh", IRD_SUSE_MKINITRD },
		{ "", IRD_UNKNOWN },
	};
	if (!have("cpio")) {
		unit_skip("SKIP: cpio is not installed (make deps)");
		return;
	}
	/* the early archive: what Debian's and dracut's images start with */
	CHECK(sh("set -e; cd %s; rm -rf e; mkdir -p e/kernel/x86/microcode; "
		 "head -c 3000 /dev/urandom > e/kernel/x86/microcode/GenuineIntel.bin; echo 1 > e/early_cpio; "
		 "(cd e && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > early.cpio", NULL, NULL) == 0);
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		CHECK(pack("main", m[i].marker) == 0);
		size_t len;
		struct initrd_scan s;
		/* uncompressed, alone and after the early archive */
		unsigned char *d = slurp("main.cpio", &len);
		CHECK(d && initrd_maker(d, len, &s) == m[i].want);
		CHECK(!s.compressed);
		free(d);
		CHECK(sh("cd %s && cat early.cpio main.cpio > both.img", NULL, NULL) == 0);
		d = slurp("both.img", &len);
		CHECK(d && initrd_maker(d, len, &s) == m[i].want);
		CHECK_EQ_U(s.archives, 2);
		free(d);
		for (size_t p = 0; p < sizeof(packers) / sizeof(packers[0]); p++) {
			char tool[16];
			sscanf(packers[p].cmd, "%15s", tool);
			if (!have(tool)) {
				char why[64];
				snprintf(why, sizeof(why), "SKIP: %s is not installed (make deps)", tool);
				unit_skip(why);
				continue;
			}
			CHECK(sh("set -e; cd %1$s; %2$s main.cpio > main.%3$s; cat early.cpio main.%3$s > img",
				 packers[p].cmd, packers[p].ext) == 0);
			d = slurp("img", &len);
			int got = d ? initrd_maker(d, len, &s) : -999;
			if (got != m[i].want)
				fprintf(stderr, "  %s, marker '%s': %d, expected %d\n", packers[p].ext,
					m[i].marker, got, m[i].want);
			CHECK(got == m[i].want);
			CHECK(s.compressed && s.archives == 2);
			CHECK(s.names >= 1);
			free(d);
		}
	}
	CHECK_STR(initrd_maker_name(IRD_DRACUT), "dracut");
	CHECK_STR(initrd_maker_name(IRD_INITRAMFS_TOOLS), "initramfs-tools");
	CHECK_STR(initrd_maker_name(IRD_UNKNOWN), "");
	CHECK(initrd_name_says("./usr/lib/dracut/modules.txt", 28) == IRD_DRACUT);
	CHECK(initrd_name_says("/conf/initramfs.conf", 20) == IRD_INITRAMFS_TOOLS);
	CHECK(initrd_name_says("usr/lib/dracutx", 15) == IRD_UNKNOWN);
	CHECK(initrd_name_says("conf/initramfs.conf.d", 21) == IRD_UNKNOWN);
}

/* Every prefix of a real image (cut short anywhere), and bytes changed
 * anywhere: an answer or a refusal, never a crash or a read out of bounds
 * (ASan and UBSan in make check's second build). */
static void hostile(void)
{
	size_t len, early;
	struct initrd_scan s;

	if (!have("cpio") || !have("zstd")) {
		unit_skip("SKIP: cpio or zstd is not installed (make deps)");
		return;
	}
	/* the marker last in the main archive, so that a cut before it counts */
	CHECK(sh("set -e; cd %s; rm -rf t; mkdir -p t/conf t/bin; echo hi > t/bin/sh; echo x > t/conf/initramfs.conf; "
		 "(cd t && printf '%%s\\n' . bin bin/sh conf conf/initramfs.conf | cpio -o -H newc --quiet) > main.cpio; "
		 "zstd -q -c main.cpio > main.zst; cat early.cpio main.zst > img; "
		 "stat -c %%s early.cpio > early.len", NULL, NULL) == 0);
	unsigned char *d = slurp("img", &len), *e = slurp("early.len", &early);
	CHECK(d && e);
	if (!d || !e) {
		free(d);
		free(e);
		return;
	}
	early = strtoul((char *)e, NULL, 10);
	free(e);
	CHECK(initrd_maker(d, len, &s) == IRD_INITRAMFS_TOOLS);
	for (size_t cut = 0; cut < len; cut++) {
		unsigned char *c = malloc(cut ? cut : 1);
		memcpy(c, d, cut);
		int r = initrd_maker(c, cut, &s);
		/* The marker is the last file: a prefix holds it only when the
		 * cut takes no more than zstd's closing checksum (4 bytes); a cut
		 * in the early archive's zero padding reads as an image without
		 * a marker. */
		bool ok = r == -EINVAL || (r == IRD_UNKNOWN && cut <= early && cut > 0) ||
			  (r == IRD_INITRAMFS_TOOLS && cut + 4 >= len);
		if (!ok)
			fprintf(stderr, "  cut at %zu of %zu (early %zu): %d\n", cut, len, early, r);
		CHECK(ok);
		free(c);
	}
	/* the early archive's headers: every byte flipped in turn */
	unsigned char *c = malloc(len);
	for (size_t i = 0; i < early && i < 2048; i++) {
		memcpy(c, d, len);
		c[i] ^= 0x5a;
		int r = initrd_maker(c, len, &s);
		CHECK(r == IRD_INITRAMFS_TOOLS || r == IRD_UNKNOWN || r == -EINVAL);
	}
	free(c);
	free(d);
	/* nothing, zeros, garbage */
	CHECK(initrd_maker("", 0, &s) == -EINVAL);
	static const unsigned char zeros[4096];
	CHECK(initrd_maker(zeros, sizeof(zeros), &s) == -EINVAL);
	CHECK(initrd_maker("not an initramfs at all", 23, &s) == -EINVAL);
	/* a name longer than any path, and a file larger than the image */
	char h[600];
	memset(h, 0, sizeof(h));
	snprintf(h, sizeof(h), "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		 1, 0100644, 0, 0, 1, 0, 16, 0, 0, 0, 0, 0x10000, 0);
	CHECK(initrd_maker(h, sizeof(h), &s) == -EINVAL);
	snprintf(h, sizeof(h), "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		 1, 0100644, 0, 0, 1, 0, 0x7fffffff, 0, 0, 0, 0, 2, 0);
	memcpy(h + 110, "a", 2);
	CHECK(initrd_maker(h, sizeof(h), &s) == -EINVAL);
}

/* Files that claim more than INITRD_MAX_BYTES, compressed: refused by
 * their headers' sizes before anything that large is unpacked. */
static void bomb(void)
{
	if (!have("gzip")) {
		unit_skip("SKIP: gzip is not installed");
		return;
	}
	FILE *f;
	char path[300];
	snprintf(path, sizeof(path), "%s/bomb.cpio", dir);
	CHECK((f = fopen(path, "wb")) != NULL);
	if (!f)
		return;
	for (int i = 0; i < 3; i++) {
		char h[128];
		/* 0xFFFFFFFF bytes each, of which only the header is here */
		int n = snprintf(h, sizeof(h), "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X"
				 "f%d", i + 1, 0100644, 0, 0, 1, 0, 0xFFFFFFFFu, 0, 0, 0, 0, 3, 0, i);
		fwrite(h, 1, (size_t)n + 1, f);
		fwrite("\0\0\0", 1, (4 - ((size_t)n + 1) % 4) % 4, f);
		for (int k = 0; k < 1024; k++)
			fwrite("ABCDEFGHIJKLMNOP", 1, 16, f);
	}
	fclose(f);
	CHECK(sh("cd %s && gzip -c bomb.cpio > bomb.gz", NULL, NULL) == 0);
	size_t len;
	unsigned char *d = slurp("bomb.gz", &len);
	struct initrd_scan s;
	int r = d ? initrd_maker(d, len, &s) : 0;
	CHECK(r == -E2BIG || r == -EINVAL);
	CHECK(s.names <= 2);
	free(d);
}

static void dpkg(void)
{
	static const char st[] =
		"Package: initramfs-tools\nStatus: deinstall ok config-files\nVersion: 0.142\n\n"
		"Package: dracut\nStatus: install ok installed\nDescription: a\n  long text\n"
		" Package: initramfs-tools-core\n\n"
		"Package: initramfs-tools-core\r\nStatus: install ok installed\r\n\r\n"
		"Package: half\nStatus: install ok installed";
	CHECK(dpkg_installed(st, sizeof(st) - 1, "dracut"));
	CHECK(!dpkg_installed(st, sizeof(st) - 1, "initramfs-tools"));
	CHECK(dpkg_installed(st, sizeof(st) - 1, "initramfs-tools-core"));
	CHECK(dpkg_installed(st, sizeof(st) - 1, "half"));
	CHECK(!dpkg_installed(st, sizeof(st) - 1, "drac"));
	CHECK(!dpkg_installed(st, 40, "dracut"));
	CHECK(!dpkg_installed(NULL, 0, "dracut"));
	/* this machine's own database: make check needs e2fsprogs and cpio */
	FILE *f = fopen("/var/lib/dpkg/status", "rb");
	if (!f) {
		unit_skip("SKIP: no /var/lib/dpkg/status (not a Debian machine)");
		return;
	}
	size_t cap = 64 << 20, len;
	char *t = malloc(cap);
	len = t ? fread(t, 1, cap, f) : 0;
	fclose(f);
	CHECK(dpkg_installed(t, len, "e2fsprogs"));
	CHECK(dpkg_installed(t, len, "cpio"));
	CHECK(!dpkg_installed(t, len, "no-such-package-imager"));
	free(t);
}

static void setup(void)
{
	CHECK(mkdtemp(dir) != NULL);
}

static void cleanup(void)
{
	CHECK(sh("rm -rf %s", NULL, NULL) == 0);
}

UNIT_MAIN(UNIT(setup), UNIT(makers), UNIT(hostile), UNIT(bomb), UNIT(dpkg), UNIT(cleanup))
