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

#include <stdbool.h>
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

/* ---- a VG's text (vgcfgbackup's format: Clonezilla's lvm_VG.conf) ---- */

#define LVM_MAP_PVS  16
#define LVM_MAP_SEGS 64

struct lvm_seg {
	uint64_t lv_off, len;        /* bytes of the LV */
	unsigned pv;                 /* index in lvm_vg_map.pvs */
	uint64_t pv_off;             /* bytes from that PV's start */
};

struct lvm_map_lv {
	char name[128];              /* the LV's name in its VG */
	uint64_t size;
	bool linear;                 /* every segment striped with one stripe */
	size_t nsegs;
	struct lvm_seg segs[LVM_MAP_SEGS];
};

struct lvm_vg_map {
	char vg[128];
	size_t vg_start, vg_end;     /* the VG's section in the text */
	unsigned npvs;
	struct {
		char uuid[33];           /* without dashes */
		uint64_t pe_start;       /* bytes */
		uint64_t dev_size;       /* bytes, as the text says */
	} pvs[LVM_MAP_PVS];
	uint64_t extent_bytes;
	size_t nlvs;
	struct lvm_map_lv *lvs;      /* malloc'ed */
};

/* The VG of text (hostile: parsed with the plugin's bounds): its PVs and
 * where each LV's bytes lie on them.  Returns 0 or -EINVAL/-ENOTSUP with
 * why; lvm_vg_map_free() in every case. */
int lvm_text_map(const char *text, size_t len, struct lvm_vg_map *m, char *why, size_t whylen);
void lvm_vg_map_free(struct lvm_vg_map *m);

/* The first pe_start bytes of PV pv of map, made afresh as pvcreate
 * --restorefile and vgcfgrestore make them, for a partition of size
 * bytes: sector 1 the label (pv_header with one data area from pe_start,
 * one metadata area from 4 KiB to pe_start, the extension marking it
 * used), the metadata area's header, and the text after it (the VG's
 * section first, as lvm2 wants it, then the rest, then a NUL).
 * *head is malloc'ed.  Returns 0 or -EINVAL/-ENOSPC with why. */
int lvm_pv_head(const struct lvm_vg_map *m, unsigned pv, const char *text, size_t len,
		uint64_t size, unsigned char **head, char *why, size_t whylen);

#endif
