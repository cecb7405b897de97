/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A fresh Linux swap header (include/imager/swapfmt.h), as mkswap writes
 * it: for shrink.c's and the Clonezilla restore's swap areas, which are
 * made afresh instead of copied.  (fsplugins/swap.c reads the header.)
 */
#include "imager/swapfmt.h"
#include "imager/bytes.h"

#include <string.h>

void swap_header_make(unsigned char *h, uint64_t size, const unsigned char *uuid,
		      const char *label)
{
	uint64_t last = size / 4096 - 1;

	memset(h, 0, 4096);
	put_le32(h + SWAP_VERSION_OFF, SWAP_VERSION);
	put_le32(h + SWAP_LAST_PAGE_OFF, (uint32_t)(last > 0xFFFFFFFFull ? 0xFFFFFFFFull : last));
	if (uuid)
		memcpy(h + SWAP_UUID_OFF, uuid, 16);
	if (label)
		memcpy(h + SWAP_LABEL_OFF, label, strnlen(label, SWAP_LABEL_LEN));
	memcpy(h + 4096 - SWAP_MAGIC_LEN, SWAP_MAGIC_V1, SWAP_MAGIC_LEN);
}
