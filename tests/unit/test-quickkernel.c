/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The quick kernel (guest_quick_prepare, imager/convert/guest-kernel.c):
 * this machine's own kernel unpacked into a PVH-bootable vmlinux; kernels
 * made here by the boot protocol's layout, their payload packed by liblzma
 * and libzstd around a small ELF file with and without Xen's PHYS32_ENTRY
 * note; and hostile ones (fields pointing outside the file, an old
 * protocol, a corrupt or cut stream, a packing it does not know, ELF
 * headers that lie) that must all leave it off with a reason and write
 * nothing.  Also the cache folder's rules: found again, replaced for a new
 * kernel, refused when it is a symlink or open to others. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "imager/bytes.h"
#include "imager/guest.h"
#include "unit.h"

static char dir[64];

static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
#define put32 put_le32
#define put64 put_le64

/* A small x86-64 ELF file with one PT_NOTE holding a "Xen" note of TYPE
 * (18: PHYS32_ENTRY) and some text after it; *len its size. */
static unsigned char *elf(uint32_t type, size_t *len)
{
	size_t n = 64 + 56 + 24 + 4096;
	unsigned char *e = calloc(1, n);

	memcpy(e, "\x7f" "ELF", 4);
	e[4] = 2, e[5] = 1, e[6] = 1;
	put16(e + 16, 2);             /* ET_EXEC */
	put16(e + 18, 62);            /* x86-64 */
	put64(e + 32, 64);            /* e_phoff */
	put16(e + 52, 64);
	put16(e + 54, 56);            /* e_phentsize */
	put16(e + 56, 1);             /* e_phnum */
	put32(e + 64, 4);             /* PT_NOTE */
	put64(e + 64 + 8, 120);       /* p_offset */
	put64(e + 64 + 32, 24);       /* p_filesz */
	put32(e + 120, 4);            /* namesz */
	put32(e + 124, 8);            /* descsz */
	put32(e + 128, type);
	memcpy(e + 132, "Xen", 4);
	put64(e + 136, 0x1000000);
	for (size_t i = 144; i < n; i++)
		e[i] = (unsigned char)(i * 7);
	*len = n;
	return e;
}

static unsigned char *pack_xz(const unsigned char *in, size_t n, size_t *len)
{
	size_t cap = n + 4096, pos = 0;
	unsigned char *out = malloc(cap);

	CHECK(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC32, NULL, in, n, out, &pos, cap) == LZMA_OK);
	*len = pos;
	return out;
}

static unsigned char *pack_zstd(const unsigned char *in, size_t n, size_t *len)
{
	size_t cap = ZSTD_compressBound(n);
	unsigned char *out = malloc(cap);

	*len = ZSTD_compress(out, cap, in, n, 3);
	CHECK(!ZSTD_isError(*len));
	return out;
}

/* A bzImage: one setup sector, the header, the payload at 0x100 past the
 * protected-mode code, then the 4-byte size the kernel build appends. */
static void bzimage(const char *path, const unsigned char *payload, size_t plen, uint16_t ver)
{
	size_t n = 1024 + 0x100 + plen + 4;
	unsigned char *k = calloc(1, n);
	FILE *f;

	k[0x1f1] = 1;
	memcpy(k + 0x202, "HdrS", 4);
	put16(k + 0x206, ver);
	put32(k + 0x248, 0x100);
	put32(k + 0x24c, (uint32_t)plen + 4);
	memcpy(k + 1024 + 0x100, payload, plen);
	f = fopen(path, "wb");
	CHECK(f && fwrite(k, 1, n, f) == n);
	if (f)
		fclose(f);
	free(k);
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	CHECK(f && fwrite(p, 1, n, f) == n);
	if (f)
		fclose(f);
}

static struct guest_env env_for(const char *kernel)
{
	struct guest_env e = { 0 };

	snprintf(e.kernel, sizeof(e.kernel), "%s", kernel);
	snprintf(e.modules, sizeof(e.modules), "/lib/modules/9.9.9-test");
	return e;
}

/* Prepare KERNEL into a fresh cache folder: *q, and the return value. */
static int prep(const char *kernel, const char *cache, struct guest_quick *q)
{
	struct guest_env e = env_for(kernel);

	mkdir(cache, 0755);
	return guest_quick_prepare(&e, cache, q);
}

static bool same_file(const char *path, const unsigned char *want, size_t n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *got = malloc(n + 1);
	size_t r = f ? fread(got, 1, n + 1, f) : 0;
	bool ok = f && r == n && !memcmp(got, want, n);

	if (f)
		fclose(f);
	free(got);
	return ok;
}

static int count_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static void test_made_kernels(void)
{
	size_t elen, plen;
	unsigned char *e = elf(18, &elen), *p;
	char k[128], c[128];
	struct guest_quick q;

	/* xz, as Debian packs its kernels */
	p = pack_xz(e, elen, &plen);
	snprintf(k, sizeof(k), "%s/xz.bz", dir);
	snprintf(c, sizeof(c), "%s/cache-xz", dir);
	bzimage(k, p, plen, 0x020f);
	CHECK(prep(k, c, &q) == 0);
	CHECK(q.on);
	CHECK(strstr(q.vmlinux, "/.imager-appliance-") != NULL);
	CHECK(strstr(q.vmlinux, "/9.9.9-test-") != NULL);
	CHECK_STR(q.version, "9.9.9-test");
	CHECK(same_file(q.vmlinux, e, elen));
	free(p);

	/* zstd, as Ubuntu packs them */
	p = pack_zstd(e, elen, &plen);
	snprintf(k, sizeof(k), "%s/zstd.bz", dir);
	snprintf(c, sizeof(c), "%s/cache-zstd", dir);
	bzimage(k, p, plen, 0x020f);
	CHECK(prep(k, c, &q) == 0);
	CHECK(q.on);
	CHECK(same_file(q.vmlinux, e, elen));
	free(p);
	free(e);

	/* no PVH note: off, and nothing written */
	e = elf(17, &elen);
	p = pack_zstd(e, elen, &plen);
	snprintf(k, sizeof(k), "%s/nopvh.bz", dir);
	snprintf(c, sizeof(c), "%s/cache-nopvh", dir);
	bzimage(k, p, plen, 0x020f);
	CHECK(prep(k, c, &q) == -1);
	CHECK(!q.on);
	CHECK(strstr(q.why, "no PVH entry point") != NULL);
	CHECK(access(q.vmlinux, F_OK) != 0);
	free(p);
	free(e);
}

/* Each hostile kernel: off, a reason containing WHY, no vmlinux. */
static void hostile(const char *name, const char *why)
{
	char k[128], c[128];
	struct guest_quick q;

	snprintf(k, sizeof(k), "%s/%s", dir, name);
	snprintf(c, sizeof(c), "%s/cache-%s", dir, name);
	CHECK(prep(k, c, &q) == -1);
	CHECK(!q.on);
	if (!strstr(q.why, why))
		fprintf(stderr, "  %s: \"%s\", expected \"%s\"\n", name, q.why, why);
	CHECK(strstr(q.why, why) != NULL);
	CHECK(q.vmlinux[0] == '\0' || access(q.vmlinux, F_OK) != 0);
}

/* A zstd-packed PVH ELF with the WIDTH-byte field at OFF set to VALUE:
 * hostile (NAME), no PVH entry point found. */
static void lying_elf(const char *name, size_t off, int width, uint64_t value)
{
	size_t elen, plen;
	unsigned char *e = elf(18, &elen), *p;
	char k[128];

	if (width == 2)
		put16(e + off, (uint16_t)value);
	else if (width == 4)
		put32(e + off, (uint32_t)value);
	else
		put64(e + off, value);
	p = pack_zstd(e, elen, &plen);
	snprintf(k, sizeof(k), "%s/%s", dir, name);
	bzimage(k, p, plen, 0x020f);
	hostile(name, "no PVH entry point");
	free(p);
	free(e);
}

static void test_hostile_kernels(void)
{
	size_t elen, plen;
	unsigned char *e = elf(18, &elen), *p, buf[4096];
	char k[128];
	FILE *f;

	p = pack_xz(e, elen, &plen);
	/* the payload length runs past the end */
	snprintf(k, sizeof(k), "%s/long.bz", dir);
	bzimage(k, p, plen, 0x020f);
	f = fopen(k, "r+b");
	fseek(f, 0x24c, SEEK_SET);
	fwrite("\xff\xff\xff\x7f", 1, 4, f);
	fclose(f);
	hostile("long.bz", "outside the file");
	/* the payload offset points past the end */
	snprintf(k, sizeof(k), "%s/far.bz", dir);
	bzimage(k, p, plen, 0x020f);
	f = fopen(k, "r+b");
	fseek(f, 0x248, SEEK_SET);
	fwrite("\xf0\xff\xff\xff", 1, 4, f);
	fclose(f);
	hostile("far.bz", "outside the file");
	/* a boot protocol without payload fields */
	snprintf(k, sizeof(k), "%s/old.bz", dir);
	bzimage(k, p, plen, 0x0206);
	hostile("old.bz", "older than 2.08");
	/* a corrupt stream: bytes in the middle flipped */
	p[plen / 2] ^= 0x55;
	p[plen / 2 + 1] ^= 0xaa;
	snprintf(k, sizeof(k), "%s/corrupt.bz", dir);
	bzimage(k, p, plen, 0x020f);
	hostile("corrupt.bz", "does not unpack");
	free(p);
	/* a stream cut in half (the length says so too) */
	p = pack_zstd(e, elen, &plen);
	snprintf(k, sizeof(k), "%s/cut.bz", dir);
	bzimage(k, p, plen / 2, 0x020f);
	hostile("cut.bz", "does not unpack");
	free(p);
	p = pack_xz(e, elen, &plen);
	snprintf(k, sizeof(k), "%s/cutxz.bz", dir);
	bzimage(k, p, plen / 2, 0x020f);
	hostile("cutxz.bz", "does not unpack");
	free(p);
	/* gzip: a packing it does not unpack */
	memcpy(buf, "\x1f\x8b\x08\x00", 4);
	memset(buf + 4, 0x11, 60);
	snprintf(k, sizeof(k), "%s/gzip.bz", dir);
	bzimage(k, buf, 64, 0x020f);
	hostile("gzip.bz", "neither xz nor zstd");
	/* not a kernel: random bytes, a file shorter than the header, empty */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	snprintf(k, sizeof(k), "%s/random.bz", dir);
	write_file(k, buf, sizeof(buf));
	hostile("random.bz", "not a bzImage");
	snprintf(k, sizeof(k), "%s/short.bz", dir);
	write_file(k, buf, 0x200);
	hostile("short.bz", "not a bzImage");
	snprintf(k, sizeof(k), "%s/empty.bz", dir);
	write_file(k, buf, 0);
	hostile("empty.bz", "cannot read");
	hostile("missing.bz", "cannot read");
	free(e);

	/* ELF headers that lie: program headers past the end, a note whose
	 * sizes run past its segment, a segment past the file */
	lying_elf("phnum.bz", 56, 2, 0xffff);
	lying_elf("namesz.bz", 120, 4, 0xfffffff0u);
	lying_elf("filesz.bz", 64 + 32, 8, 0xffffffffffffull);
}
static void test_cache_folder(void)
{
	size_t elen, plen;
	unsigned char *e = elf(18, &elen), *p = pack_xz(e, elen, &plen);
	char k[128], k2[128], c[128], top[256], link[128];
	struct guest_quick q, q2;
	struct stat st1, st2;
	struct guest_env env;

	snprintf(k, sizeof(k), "%s/a.bz", dir);
	snprintf(c, sizeof(c), "%s/cache-a", dir);
	bzimage(k, p, plen, 0x020f);
	CHECK(prep(k, c, &q) == 0 && q.on);
	CHECK(stat(q.vmlinux, &st1) == 0);
	/* found again, not unpacked again */
	CHECK(prep(k, c, &q2) == 0 && q2.on);
	CHECK_STR(q2.vmlinux, q.vmlinux);
	CHECK(stat(q2.vmlinux, &st2) == 0 && st2.st_ino == st1.st_ino);
	CHECK(stat(q.cachedir, &st1) == 0 && (st1.st_mode & 0777) == 0700);
	/* a new kernel (another file): a new folder, the old one removed */
	snprintf(k2, sizeof(k2), "%s/b.bz", dir);
	bzimage(k2, p, plen, 0x020f);
	CHECK(prep(k2, c, &q2) == 0 && q2.on);
	CHECK(strcmp(q2.cachedir, q.cachedir) != 0);
	CHECK(access(q.cachedir, F_OK) != 0);
	snprintf(top, sizeof(top), "%s/.imager-appliance-%ju", c, (uintmax_t)geteuid());
	CHECK(count_entries(top) == 1);
	/* the top folder a symlink (someone else's /var/tmp trick): refused */
	snprintf(c, sizeof(c), "%s/cache-link", dir);
	mkdir(c, 0755);
	snprintf(top, sizeof(top), "%s/.imager-appliance-%ju", c, (uintmax_t)geteuid());
	snprintf(link, sizeof(link), "%s/elsewhere", dir);
	mkdir(link, 0700);
	CHECK(symlink(link, top) == 0);
	CHECK(prep(k, c, &q) == -1 && !q.on);
	CHECK(strstr(q.why, "not a folder of this user's") != NULL);
	CHECK(count_entries(link) == 0);
	/* open to others: refused */
	snprintf(c, sizeof(c), "%s/cache-open", dir);
	mkdir(c, 0755);
	snprintf(top, sizeof(top), "%s/.imager-appliance-%ju", c, (uintmax_t)geteuid());
	mkdir(top, 0777);
	chmod(top, 0777);
	CHECK(prep(k, c, &q) == -1 && !q.on);
	CHECK(strstr(q.why, "not a folder of this user's") != NULL);
	/* a fixed appliance, or one that cannot be built: off */
	env = env_for(k);
	env.fixed = true;
	CHECK(guest_quick_prepare(&env, c, &q) == -1 && !q.on);
	CHECK(strstr(q.why, "fixed appliance") != NULL);
	env = env_for(k);
	env.need = GUEST_NEED_KERNEL;
	CHECK(guest_quick_prepare(&env, c, &q) == -1 && !q.on);
	free(p);
	free(e);
}

/* This machine's kernel, the one supermin takes (when root can read it). */
static void test_host_kernel(void)
{
	struct guest_env env;
	struct im_err err = { 0 };
	struct guest_quick q;
	char c[128];
	unsigned char head[4];
	FILE *f;

	if (guest_env_check(&env, &err) < 0 || env.need || env.fixed || !env.kernel[0]) {
		unit_skip("SKIP: no kernel libguestfs can build from here (root and linux-image-amd64)");
		return;
	}
	snprintf(c, sizeof(c), "%s/cache-host", dir);
	mkdir(c, 0755);
	CHECK(guest_quick_prepare(&env, c, &q) == 0);
	if (!q.on) {
		fprintf(stderr, "  %s: %s\n", env.kernel, q.why);
		return;
	}
	f = fopen(q.vmlinux, "rb");
	CHECK(f && fread(head, 1, 4, f) == 4 && !memcmp(head, "\x7f" "ELF", 4));
	if (f)
		fclose(f);
}

int main(void)
{
	static const struct unit_case cases[] = {
		UNIT(test_made_kernels),
		UNIT(test_hostile_kernels),
		UNIT(test_cache_folder),
		UNIT(test_host_kernel),
	};
	int rc;
	char cmd[128];

	snprintf(dir, sizeof(dir), "/tmp/imager-quick.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	rc = unit_run("test-quickkernel", cases, sizeof(cases) / sizeof(cases[0]));
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return rc;
}
