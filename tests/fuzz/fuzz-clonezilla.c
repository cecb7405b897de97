/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A Clonezilla image folder's description: the input, split at NUL bytes,
 * becomes its files in this order: disk, parts, sda-pt.sf, sda-mbr,
 * lvm_vg_dev.list, lvm_czvg.conf, swappt-sda2.info and
 * sda1.ext4-ptcl-img.uncomp (a partclone stream); cz_read() parses the
 * folder, then each partition's stream is read to its end as verify reads
 * it. */
#include "fuzz.h"

#include <dirent.h>

#include "imager/clonezilla.h"
#include "imager/partclone.h"

static const char *const names[] = {
	"disk", "parts", "sda-pt.sf", "sda-mbr", "lvm_vg_dev.list", "lvm_czvg.conf",
	"swappt-sda2.info", "sda1.ext4-ptcl-img.uncomp",
};
#define NFILES (sizeof(names) / sizeof(names[0]))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cz_image cz;
	char path[256];
	size_t k = 0, start = 0;

	for (size_t i = 0; i <= size && k < NFILES; i++) {
		if (i == size || (data[i] == 0 && k + 1 < NFILES)) {
			if (fuzz_file(names[k], data + start, i - start, path, sizeof(path)) < 0)
				return 0;
			k++;
			start = i + 1;
		}
	}
	for (; k < NFILES; k++) {   /* (files of an earlier input must not stay) */
		snprintf(path, sizeof(path), "%s/%s", fuzz_dir(), names[k]);
		unlink(path);
	}
	if (cz_read(fuzz_dir(), &cz, &(struct im_err){ 0 }) == 0) {
		for (size_t i = 0; i < cz.nparts; i++) {
			struct pcl_header h;
			uint64_t done = 0, strips = 0;
			if (cz.parts[i].kind == CZ_PTCL)
				cz_read_stream(fuzz_dir(), &cz.parts[i], true, NULL, &done, 0, &h, &strips,
					       &(struct im_err){ 0 });
		}
	}
	return 0;
}
