/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The quick-boot appliance kernel (include/imager/guest.h, "quick kernel").
 *
 * Under TCG a compressed kernel (bzImage) spends seconds unpacking itself
 * before it prints a line: Debian's is xz, ~8 MiB into ~64 MiB, about 4 s
 * of a 13 s appliance launch on an idle 2-core machine.  qemu boots an
 * uncompressed kernel (vmlinux, an ELF file) directly when the kernel has a
 * PVH entry point (Xen's ELF note PHYS32_ENTRY; CONFIG_PVH, which Debian's
 * and Ubuntu's kernels set).  So the payload of the kernel supermin would
 * take is unpacked once into a folder of its own, and supermin builds the
 * appliance there from it (SUPERMIN_KERNEL), with the same modules.
 *
 * Facts used (Linux's Documentation/arch/x86/boot.rst, the boot protocol):
 * the setup header's "HdrS" at 0x202, its version at 0x206 (payload fields
 * from 2.08), setup_sects at 0x1f1 (0 means 4), the protected-mode code at
 * (setup_sects + 1) * 512, payload_offset at 0x248 and payload_length at
 * 0x24c, relative to it.  Xen's public elfnote.h: note name "Xen", type 18
 * is XEN_ELFNOTE_PHYS32_ENTRY.  Every field is checked against the file.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
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
#include "util.h"

#define KERNEL_MAX    (128u << 20)   /* a compressed kernel larger than this is refused */
#define VMLINUX_MAX   (512u << 20)   /* and so is an unpacked one */

/* Off, and why: fmt has one %s for arg, or none (arg NULL). */
static int why(struct guest_quick *q, const char *fmt, const char *arg)
{
	q->on = false;
	snprintf(q->why, sizeof(q->why), fmt, arg ? arg : "");
	return -1;
}

/* Double the output buffer of unpack(), up to VMLINUX_MAX. */
static bool grow(unsigned char **out, size_t *cap)
{
	unsigned char *b = *cap < VMLINUX_MAX ? realloc(*out, *cap * 2) : NULL;

	if (!b)
		return false;
	*out = b;
	*cap *= 2;
	return true;
}

/* The compressed payload of a bzImage, or NULL (why in q). */
static const unsigned char *payload(const unsigned char *k, size_t len, size_t *plen,
				    struct guest_quick *q)
{
	uint64_t setup, off, n;

	if (len < 0x250 || memcmp(k + 0x202, "HdrS", 4)) {
		why(q, "the kernel is not a bzImage (no boot protocol header)", NULL);
		return NULL;
	}
	if (le16(k + 0x206) < 0x0208) {
		why(q, "the kernel's boot protocol is older than 2.08 (no payload fields)", NULL);
		return NULL;
	}
	setup = k[0x1f1] ? k[0x1f1] : 4;
	setup = (setup + 1) * 512;
	off = setup + le32(k + 0x248);
	n = le32(k + 0x24c);
	if (off >= len || n == 0 || n > len - off) {
		why(q, "the kernel's payload fields point outside the file", NULL);
		return NULL;
	}
	*plen = (size_t)n;
	return k + off;
}

/* Unpack an xz or zstd payload (a size the kernel build appends may
 * follow the stream: ignored). */
static unsigned char *unpack(const unsigned char *p, size_t n, size_t *out_len,
			     struct guest_quick *q)
{
	size_t cap = 64u << 20, got = 0;
	unsigned char *out = malloc(cap);

	if (!out) {
		why(q, "out of memory", NULL);
		return NULL;
	}
	if (n >= 6 && !memcmp(p, "\xfd" "7zXZ\0", 6)) {
		lzma_stream s = LZMA_STREAM_INIT;
		lzma_ret r;

		if (lzma_stream_decoder(&s, 256u << 20, 0) != LZMA_OK)
			goto fail;
		s.next_in = p;
		s.avail_in = n;
		for (;;) {
			if (got == cap && !grow(&out, &cap)) {
				lzma_end(&s);
				goto toobig;
			}
			s.next_out = out + got;
			s.avail_out = cap - got;
			r = lzma_code(&s, LZMA_FINISH);
			got = cap - s.avail_out;
			if (r == LZMA_STREAM_END)
				break;
			if (r != LZMA_OK) {
				lzma_end(&s);
				goto fail;
			}
		}
		lzma_end(&s);
	} else if (n >= 4 && le32(p) == 0xFD2FB528u) {
		ZSTD_DStream *z = ZSTD_createDStream();
		ZSTD_inBuffer in = { p, n, 0 };
		size_t r;

		if (!z)
			goto fail;
		for (;;) {
			ZSTD_outBuffer o;

			if (got == cap && !grow(&out, &cap)) {
				ZSTD_freeDStream(z);
				goto toobig;
			}
			o = (ZSTD_outBuffer){ out + got, cap - got, 0 };
			r = ZSTD_decompressStream(z, &o, &in);
			got += o.pos;
			if (ZSTD_isError(r)) {
				ZSTD_freeDStream(z);
				goto fail;
			}
			if (r == 0)
				break;
			if (in.pos == in.size && o.pos < o.size) {   /* truncated frame */
				ZSTD_freeDStream(z);
				goto fail;
			}
		}
		ZSTD_freeDStream(z);
	} else {
		free(out);
		why(q, "the kernel's payload is neither xz nor zstd", NULL);
		return NULL;
	}
	*out_len = got;
	return out;
toobig:
	free(out);
	why(q, "the unpacked kernel is larger than 512 MiB", NULL);
	return NULL;
fail:
	free(out);
	why(q, "the kernel's payload does not unpack", NULL);
	return NULL;
}

/* An x86-64 ELF executable with Xen's PHYS32_ENTRY note: qemu's PVH boot. */
static bool pvh_elf(const unsigned char *e, size_t len)
{
	uint64_t phoff;
	uint16_t phentsize, phnum;

	if (len < 64 || memcmp(e, "\x7f" "ELF", 4) || e[4] != 2 || e[5] != 1 || le16(e + 18) != 62)
		return false;
	phoff = le64(e + 32);
	phentsize = le16(e + 54);
	phnum = le16(e + 56);
	if (phentsize != 56 || phoff > len || (uint64_t)phnum * 56 > len - phoff)
		return false;
	for (uint16_t i = 0; i < phnum; i++) {
		const unsigned char *ph = e + phoff + (uint64_t)i * 56;
		uint64_t off = le64(ph + 8), sz = le64(ph + 32), at = 0;

		if (le32(ph) != 4 /* PT_NOTE */ || off > len || sz > len - off)
			continue;
		while (sz - at >= 12) {
			uint32_t namesz = le32(e + off + at), descsz = le32(e + off + at + 4);
			uint32_t type = le32(e + off + at + 8);
			uint64_t nlen = ((uint64_t)namesz + 3) & ~3ull, dlen = ((uint64_t)descsz + 3) & ~3ull;

			if (nlen > sz - at - 12 || dlen > sz - at - 12 - nlen)
				break;
			if (namesz == 4 && !memcmp(e + off + at + 12, "Xen", 4) && type == 18)
				return true;
			at += 12 + nlen + dlen;
		}
	}
	return false;
}

/* A folder of ours: made 0700 when missing; refused when it is a symlink
 * or someone else's (a shared /var/tmp). */
static bool own_dir(const char *path)
{
	struct stat st;

	if (mkdir(path, 0700) && errno != EEXIST)
		return false;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       !(st.st_mode & 022);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

int guest_quick_prepare(const struct guest_env *env, const char *cachedir, struct guest_quick *q)
{
	char top[1100], dir[1400], modcopy[512], version[256];
	unsigned char *k = NULL, *v = NULL;
	const unsigned char *p;
	size_t klen = 0, vlen = 0, plen = 0;
	struct stat st;
	uint64_t key = 0xcbf29ce484222325ull;

	*q = (struct guest_quick){ 0 };
	if (env->fixed)
		return why(q, "a fixed appliance is in use", NULL);
	if (env->need || !env->kernel[0] || !env->modules[0])
		return why(q, "the appliance cannot be built here", NULL);
	if (stat(env->kernel, &st))
		return why(q, "cannot read %s", env->kernel);
	snprintf(modcopy, sizeof(modcopy), "%s", env->modules);
	snprintf(version, sizeof(version), "%s", basename(modcopy));
	key = fnv(key, env->kernel, strlen(env->kernel));
	key = fnv(key, &st.st_size, sizeof(st.st_size));
	key = fnv(key, &st.st_mtim, sizeof(st.st_mtim));
	key = fnv(key, &st.st_ino, sizeof(st.st_ino));
	key = fnv(key, env->modules, strlen(env->modules));
	if (snprintf(top, sizeof(top), "%s/.imager-appliance-%ju", cachedir, (uintmax_t)geteuid()) >=
		    (int)sizeof(top) ||
	    snprintf(dir, sizeof(dir), "%s/%s-%016jx", top, version, (uintmax_t)key) >= (int)sizeof(dir))
		return why(q, "the cache folder's name is too long", NULL);
	if (!own_dir(top) || !own_dir(dir))
		return why(q, "%s is not a folder of this user's", top);
	snprintf(q->vmlinux, sizeof(q->vmlinux), "%s/vmlinux", dir);
	snprintf(q->cachedir, sizeof(q->cachedir), "%s", dir);
	snprintf(q->modules, sizeof(q->modules), "%s", env->modules);
	snprintf(q->version, sizeof(q->version), "%s", version);
	if (stat(q->vmlinux, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		q->on = true;
		return 0;
	}
	if (util_read_whole_file(env->kernel, &k, &klen, KERNEL_MAX) < 0 || klen == 0) {
		free(k);
		return why(q, "cannot read %s", env->kernel);
	}
	p = payload(k, klen, &plen, q);
	if (p)
		v = unpack(p, plen, &vlen, q);
	free(k);
	if (!v)
		return -1;
	if (!pvh_elf(v, vlen)) {
		free(v);
		return why(q, "%s has no PVH entry point (CONFIG_PVH)", env->kernel);
	}
	/* (two imager processes may do this at once: the same bytes, renamed
	 * over each other) */
	if (util_write_file_atomic(q->vmlinux, v, vlen) < 0) {
		free(v);
		return why(q, "cannot write the unpacked kernel into %s", dir);
	}
	free(v);
	/* A new kernel: the appliances built for earlier ones (each ~700 MiB)
	 * go; a launch still running from one keeps its open files. */
	{
		DIR *d = opendir(top);
		struct dirent *e;
		char old[1400];

		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.' || !strcmp(dir + strlen(top) + 1, e->d_name))
				continue;
			if (snprintf(old, sizeof(old), "%s/%s", top, e->d_name) < (int)sizeof(old))
				nftw(old, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		}
		if (d)
			closedir(d);
	}
	q->on = true;
	return 0;
}
