/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the harnesses share (tests/fuzz, doc/tests.md "Fuzzing").  Each harness is
 * a libFuzzer target: LLVMFuzzerTestOneInput() feeds one input to one
 * parser of disk or image data and frees what it got; any crash, leak,
 * sanitizer report or timeout is a bug.
 *
 * Disk-shaped inputs come as a sparse image, so that a seed made from a
 * real filesystem stays small and the fuzzer mutates its metadata rather
 * than megabytes of zeros:
 *   u32 LE   the image's size in KiB (taken modulo 256 MiB, at least 64 KiB)
 *   records until the input ends:
 *     u32 LE   where, in 512-byte sectors (modulo the image's size)
 *     u16 LE   how many bytes follow (cut at the input's end and at the
 *              image's end)
 *     bytes
 * tests/fuzz/sparse.py writes one from a real image.
 */
#ifndef IMAGER_FUZZ_H
#define IMAGER_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The sparse image of data[0..size) in a memfd (-1 when the input is too
 * short); *len gets its size.  Close it after use. */
static inline int fuzz_image(const uint8_t *data, size_t size, uint64_t *len)
{
	uint64_t kib;
	int fd;

	if (size < 4)
		return -1;
	kib = ((uint64_t)data[0] | (uint64_t)data[1] << 8 | (uint64_t)data[2] << 16 |
	       (uint64_t)data[3] << 24) % (256u * 1024);
	if (kib < 64)
		kib = 64;
	*len = kib * 1024;
	fd = memfd_create("fuzz-image", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)*len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (size_t i = 4; i + 6 <= size;) {
		uint64_t at = ((uint64_t)data[i] | (uint64_t)data[i + 1] << 8 |
			       (uint64_t)data[i + 2] << 16 | (uint64_t)data[i + 3] << 24) * 512 % *len;
		size_t n = (size_t)data[i + 4] | (size_t)data[i + 5] << 8;
		i += 6;
		if (n > size - i)
			n = size - i;
		if (n > *len - at)
			n = (size_t)(*len - at);
		if (pwrite(fd, data + i, n, (off_t)at) < 0)
			break;
		i += n;
	}
	return fd;
}

/* The image's path for code that opens by name (/proc/self/fd/N). */
static inline void fuzz_fd_path(int fd, char *out, size_t len)
{
	snprintf(out, len, "/proc/self/fd/%d", fd);
}

/* A private folder for file-shaped inputs, made once per process. */
static inline const char *fuzz_dir(void)
{
	static char dir[64];
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/imager-fuzz.XXXXXX");
		if (!mkdtemp(dir))
			abort();
	}
	return dir;
}

/* Write data[0..size) to DIR/name; 0 or -1. */
static inline int fuzz_file(const char *name, const uint8_t *data, size_t size, char *path,
			    size_t pathlen)
{
	FILE *f;
	snprintf(path, pathlen, "%s/%s", fuzz_dir(), name);
	f = fopen(path, "wb");
	if (!f)
		return -1;
	if (size && fwrite(data, 1, size, f) != size) {
		fclose(f);
		return -1;
	}
	return fclose(f) == 0 ? 0 : -1;
}
#endif
