/* SPDX-License-Identifier: GPL-2.0-or-later */
/* OVA packages: the tar walked header by header (members' byte ranges),
 * the .ovf parsed, each disk mapped to its member, and the manifest's
 * digests checked. */
#include "fuzz.h"

#include "imager/vmsource.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ova o;
	struct im_err err = { 0 };
	char path[128];
	bool had;

	if (fuzz_file("in.ova", data, size, path, sizeof(path)) < 0)
		return 0;
	if (ova_open(path, &o, &err) == 0) {
		for (size_t i = 0; i < o.n; i++)
			if (o.m[i].offset + o.m[i].size > size)
				abort();
		ova_verify(path, &o, -1, &had, &err);
	}
	return 0;
}
