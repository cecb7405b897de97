/* SPDX-License-Identifier: GPL-2.0-or-later */
/* VMDK descriptors (a text file, or embedded in a sparse extent): the
 * extents, CIDs and parent hint, every line checked. */
#include "fuzz.h"

#include "imager/vmsource.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmdk_desc *d = malloc(sizeof(*d));
	struct im_err err = { 0 };
	uint64_t sum = 0;

	if (!d)
		return 0;
	if (vmdk_desc_parse((const char *)data, size, d, &err) == 0) {
		if (d->next == 0 || d->next > VMDK_MAX_EXTENTS)
			abort();
		for (size_t i = 0; i < d->next; i++)
			sum += d->ext[i].sectors;
		if (sum != d->sectors)
			abort();
	}
	free(d);
	return 0;
}
