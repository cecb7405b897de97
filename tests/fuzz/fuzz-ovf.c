/* SPDX-License-Identifier: GPL-2.0-or-later */
/* OVF descriptors (the .ovf of an OVA or an OVF folder): parsed with
 * libxml2 into the facts of a new VM, every field checked. */
#include "fuzz.h"

#include "imager/vmsource.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vm_desc d;
	struct im_err err = { 0 };

	if (vm_ovf_parse((const char *)data, size, &d, &err) == 0 &&
	    (d.ndisks == 0 || d.ndisks > VM_MAX_DISKS || d.nnics > VM_MAX_NICS))
		abort();
	return 0;
}
