/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The Linux swap header, version 1 ("SWAPSPACE2"), as mkswap writes it in
 * a swap area's first page: the version, the last page, the bad page list,
 * the UUID and the label after 1024 boot bytes, and the magic in the page's
 * last ten bytes.  fsplugins/swap.c reads it; swap_header_make()
 * (imager/engine/fs/swapfmt.c) writes one.
 */
#ifndef IMAGER_SWAPFMT_H
#define IMAGER_SWAPFMT_H

#include <stdint.h>

#define SWAP_MAGIC_LEN       10
#define SWAP_MAGIC_V1        "SWAPSPACE2"
#define SWAP_MAGIC_V0        "SWAP-SPACE"   /* old format, gone since 2.5 */
#define SWAP_VERSION_OFF     1024
#define SWAP_LAST_PAGE_OFF   1028
#define SWAP_NR_BADPAGES_OFF 1032
#define SWAP_UUID_OFF        1036           /* 16 bytes */
#define SWAP_LABEL_OFF       1052           /* 16 bytes, NUL-padded */
#define SWAP_LABEL_LEN       16
#define SWAP_BADPAGES_OFF    1536           /* after 1024 + 512 header bytes */
#define SWAP_VERSION         1u

/* A fresh 4 KiB-page swap header for an area of size bytes (at least two
 * pages), with the given UUID (16 bytes, or NULL for none) and label (at
 * most 16 bytes, or NULL): what `mkswap -U UUID -L LABEL` writes into the
 * first page.  h holds 4096 bytes. */
void swap_header_make(unsigned char *h, uint64_t size, const unsigned char *uuid,
		      const char *label);

#endif
