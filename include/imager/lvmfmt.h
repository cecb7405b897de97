/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Shrinking an LVM2 physical volume without device-mapper (fsplugins/lvm.c
 * holds the on-disk facts): for restore and clone --shrink, on a temporary
 * copy of the PV.  One logical volume gives up extents at its end (its
 * filesystem shrunk first by the caller, at the place lvm_pv_find_lv()
 * names), the segments after it on the PV move down by as many extents,
 * and the PV ends at its new size: the metadata text rewritten with the
 * new extent counts and places and the next seqno, its checksums, the
 * metadata area header and the label's device size.
 *
 * Only what is understood is changed: a VG of this one PV, one metadata
 * area (at the PV's start), every LV made of linear segments on it, the
 * shrunk one of a single segment.  Anything else is refused with the
 * reason in why (-ENOTSUP), damage with -EINVAL; nothing is written then.
 */
#ifndef IMAGER_LVMFMT_H
#define IMAGER_LVMFMT_H

#include <stddef.h>
#include <stdint.h>

struct lvm_pv_lv {
	uint64_t offset, size;       /* the LV's bytes, from the PV's start */
	uint64_t new_size;           /* what it keeps for a PV of new_size bytes */
	uint64_t extent_bytes, pe_start, pe_count;
};

/* LV name ("vg/lv") of the PV at [off, off+size) of fd, and what it keeps
 * when the PV shrinks to new_size bytes (new_size 0: its size). */
int lvm_pv_find_lv(int fd, uint64_t off, uint64_t size, const char *name, uint64_t new_size,
		   struct lvm_pv_lv *out, char *why, size_t whylen);

/* The PV shrunk to new_size bytes as lvm_pv_find_lv() planned it. */
int lvm_pv_shrink(int fd, uint64_t off, uint64_t size, const char *name, uint64_t new_size,
		  char *why, size_t whylen);

#endif
