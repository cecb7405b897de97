/* SPDX-License-Identifier: GPL-2.0-or-later */
/* LVM2 metadata text (as in a PV's metadata area and Clonezilla's
 * lvm_VG.conf): mapped to PVs and LV segments, then each PV's head made
 * from it as vgcfgrestore would. */
#include "fuzz.h"

#include "imager/lvmfmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lvm_vg_map m;
	struct im_err e = { 0 };

	memset(&m, 0, sizeof(m));
	if (lvm_text_map((const char *)data, size, &m, &e) == 0) {
		for (unsigned pv = 0; pv < m.npvs; pv++) {
			unsigned char *head = NULL;
			if (lvm_pv_head(&m, pv, (const char *)data, size, 64ull << 20, &head, &e) == 0)
				free(head);
		}
	}
	lvm_vg_map_free(&m);
	return 0;
}
