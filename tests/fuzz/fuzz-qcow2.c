/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The qcow2 reader: header, extensions, L1/L2 tables, refcounts,
 * compressed clusters.  The input is a sparse image (fuzz.h) opened as
 * qcow2; what it maps is read and its block status walked, as save does. */
#include "fuzz.h"

#include "imager/backend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char buf[1 << 16];
	struct im_err err = { 0 };
	struct bk *bk;
	char path[64];
	uint64_t len;
	int fd = fuzz_image(data, size, &len);

	if (fd < 0)
		return 0;
	fuzz_fd_path(fd, path, sizeof(path));
	if (bk_open(path, "qcow2", 0, NULL, &bk, &err) == 0) {
		/* At most 64 steps of block status and 64 reads: a hostile
		 * header may claim petabytes. */
		uint64_t off = 0;
		for (int i = 0; i < 64 && off < bk->size; i++) {
			uint64_t n = 0;
			int st = bk_block_status(bk, off, bk->size - off, &n, &err);
			if (st < 0 || n == 0)
				break;
			if (st & BK_STATUS_DATA)
				bk_pread(bk, buf, n < sizeof(buf) ? (size_t)n : sizeof(buf), off, &err);
			off += n;
		}
		bk_close(bk, NULL);
	}
	close(fd);
	return 0;
}
