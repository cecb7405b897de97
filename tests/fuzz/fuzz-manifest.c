/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The image folder's manifest.json reader (every field checked: sizes,
 * offsets, names, counts).  The input is the file. */
#include "fuzz.h"

#include "imager/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct img_manifest m;
	struct im_err err = { 0 };
	char path[128];

	if (fuzz_file("manifest.json", data, size, path, sizeof(path)) < 0)
		return 0;
	memset(&m, 0, sizeof(m));
	if (img_manifest_read(&m, fuzz_dir(), &err) == 0)
		img_manifest_free(&m);
	return 0;
}
