/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The partition table reader: MBR with EBR chains, GPT with both headers,
 * boot areas (libparted's, then imager's own checks).  The input is a
 * sparse image (fuzz.h). */
#include "fuzz.h"

#include "imager/backend.h"
#include "imager/ptable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct im_err err = { 0 };
	struct ptable *pt;
	struct bk *bk;
	char path[64];
	uint64_t len;
	int fd = fuzz_image(data, size, &len);

	if (fd < 0)
		return 0;
	fuzz_fd_path(fd, path, sizeof(path));
	pt = calloc(1, sizeof(*pt));
	if (pt && bk_open(path, "raw", 0, NULL, &bk, &err) == 0) {
		ptable_read_bk(bk, pt, &err);
		bk_close(bk, NULL);
	}
	free(pt);
	close(fd);
	return 0;
}
