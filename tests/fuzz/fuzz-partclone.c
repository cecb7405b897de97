/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A partclone image stream (format 0001 and 0002: header, bitmap, blocks
 * and their CRC32/XXH64/XXH128 checksums), read to its end as restore
 * reads it: the input's first byte's low bit picks the plain reader or the
 * marked one with its checks done apart (pcl_read_run_marked). */
#include "fuzz.h"

#include <sys/types.h>

#include "imager/partclone.h"

struct mem {
	const uint8_t *p;
	size_t len, pos;
};

static ssize_t mem_read(void *opaque, void *buf, size_t len)
{
	struct mem *m = opaque;
	size_t n = m->len - m->pos < len ? m->len - m->pos : len;
	memcpy(buf, m->p + m->pos, n);
	m->pos += n;
	return (ssize_t)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pcl_mark marks[65];
	struct mem m = { data + 1, size ? size - 1 : 0, 0 };
	struct pcl_reader r;
	struct im_err err = { 0 };
	unsigned char *buf;
	uint64_t first;
	ssize_t n;

	if (size < 1 || pcl_open(&r, mem_read, &m, "fuzz", &err) < 0)
		return 0;
	/* (block sizes are bounded by the reader: at most 64 of them here) */
	buf = malloc((size_t)64 * r.h.block_size);
	if (buf) {
		do {
			if (data[0] & 1) {
				struct pcl_marks mk = { marks, 0, 65 };
				n = pcl_read_run_marked(&r, &first, buf, 64, &mk, &err);
				if (n >= 0 && pcl_check_run(&r, buf, (size_t)n, &mk, &err) < 0)
					n = -1;
			} else {
				n = pcl_read_run(&r, &first, buf, 64, &err);
			}
		} while (n > 0);
	}
	free(buf);
	pcl_close(&r);
	return 0;
}
