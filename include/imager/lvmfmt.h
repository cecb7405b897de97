/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LVM2's on-disk format, as the engine reads and writes it.
 *
 * The facts (lvm2's lib/label/label.h and lib/format_text/layout.h), in
 * imager/engine/fs/lvmfmt.c, shared by the plugin (fsplugins/lvm.c) and the
 * engine:
 *   label in one of sectors 0..3: "LABELONE", u64 sector, u32 crc of bytes
 *   20..511, u32 offset of the contents (pv_header), "LVM2 001";
 *   pv_header: 32-byte PV UUID, u64 device size, a zero-terminated list of
 *   data areas (u64 offset, u64 size) then one of metadata areas;
 *   metadata area header (512 bytes): u32 crc of bytes 4..511, magic
 *   " LVM2 x[5A%r0N*>", u32 version 1, u64 start, u64 size, then raw
 *   locations (u64 offset from start, u64 size, u32 crc of the text, u32
 *   flags); the text is a circular buffer after the header: it wraps to
 *   start + 512.  Every CRC is lvm2's: CRC-32 (0xEDB88320) seeded
 *   0xf597a6cf, no final XOR.
 * The text (a VG section with physical_volumes and logical_volumes) is
 * parsed as hostile input: bounded size, depth and node count.
 *
 * Shrinking an LVM2 physical volume without device-mapper
 * (imager/engine/fs/lvm-pv.c): for restore and clone --shrink, on a temporary
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
 * reason in err (-ENOTSUP), damage with -EINVAL; nothing is written then.
 *
 * A VG's text mapped, and a PV's head made from it
 * (imager/engine/fs/lvm-text.c): Clonezilla's restore of LVM.
 */
#ifndef IMAGER_LVMFMT_H
#define IMAGER_LVMFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/error.h"

/* ---- the on-disk facts (imager/engine/fs/lvmfmt.c) ---- */

#define LVM_SECTOR      512u
#define LVM_LABEL_SCAN  4u            /* the label is in one of sectors 0..3 */
#define LVM_MDA_HEADER  512u
#define LVM_MDA_MAGIC   "\040\114\126\115\062\040\170\133\065\101\045\162\060\116\052\076"
#define LVM_TEXT_MAX    (8u << 20)    /* lvm2's own metadata limit is far below */
#define LVM_CRC_SEED    0xf597a6cfu

/* How the functions below fail: err filled with the message and a class
 * that follows code (-ENOTSUP: IM_EXIT_UNSUPP, -EIO: IM_EXIT_IO, -ENOMEM:
 * IM_EXIT_INTERNAL, -ENOSPC: IM_EXIT_TARGET, else IM_EXIT_DAMAGED);
 * returns code. */
int lvm_errf(struct im_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* lvm2's CRC-32 of len bytes of p, continuing crc (LVM_CRC_SEED first). */
uint32_t lvm_crc(uint32_t crc, const unsigned char *p, size_t len);

/* The sector of b (LVM_LABEL_SCAN sectors) holding the label, its own CRC
 * right; -1 when none does. */
int lvm_label_in(const unsigned char *b);

/* A metadata area's header h (at mda, of mda_size bytes) checked, and where
 * its committed text is (*roff from mda, *rsize bytes, its *crc); NULL,
 * "ignored" for an ignored copy, or what is wrong. */
const char *lvm_mda_check(const unsigned char *h, uint64_t mda, uint64_t mda_size,
			  uint64_t *roff, uint64_t *rsize, uint32_t *crc);

/* A character lvm2 allows in a name (and in a UUID). */
bool lvm_name_char(char c);

/* id (a UUID as the text writes it, with dashes) without its dashes: the
 * first 32 characters in out; returns how many there are in all. */
size_t lvm_uuid_plain(const char *id, char out[33]);

/* The text: a tree of sections, values and arrays. */
enum lvm_node_kind { LVM_N_SECTION, LVM_N_INT, LVM_N_STRING, LVM_N_ARRAY };

struct lvm_node {
	enum lvm_node_kind kind;
	const char *name;       /* key or section name (points into the text) */
	size_t name_len;
	int64_t num;            /* LVM_N_INT */
	uint32_t pos, len;      /* LVM_N_INT: where its digits are in the text;
				 * LVM_N_SECTION: its name to its '}' */
	const char *str;        /* LVM_N_STRING: unescaped, NUL-ended (in the text) */
	uint32_t first, next;   /* children (sections, arrays) and siblings; 0: none */
};

struct lvm_tree {
	struct lvm_node *nodes; /* nodes[1] is the root section; 0 means none */
	uint32_t n, cap;
	char *text;             /* owned: strings are unescaped in place */
	size_t len, pos;
	const char *err;        /* what is wrong, at byte pos */
};

/* The text (len bytes, malloc'ed, NUL after them; the tree owns it from
 * here on) parsed into t.  Returns 0, or -EINVAL (t->err says what is
 * wrong, at byte t->pos) or -ENOMEM; lvm_tree_free() in every case. */
int lvm_tree_parse(struct lvm_tree *t, char *text, size_t len);
void lvm_tree_free(struct lvm_tree *t);

/* The entry name of section sec (NULL when none, or sec is no section). */
const struct lvm_node *lvm_child(const struct lvm_tree *t, const struct lvm_node *sec,
				 const char *name);
/* An integer, a string entry of section sec: false, NULL when none. */
bool lvm_get_int(const struct lvm_tree *t, const struct lvm_node *sec, const char *name,
		 int64_t *v);
const char *lvm_get_str(const struct lvm_tree *t, const struct lvm_node *sec, const char *name);
/* The VG: the first top-level section with physical_volumes, or NULL. */
const struct lvm_node *lvm_tree_vg(const struct lvm_tree *t);
/* Is section seg a segment ("segment1" ...)? */
bool lvm_is_segment(const struct lvm_node *seg);

/* ---- shrinking a PV (imager/engine/fs/lvm-pv.c) ---- */

struct lvm_pv_lv {
	uint64_t offset, size;       /* the LV's bytes, from the PV's start */
	uint64_t new_size;           /* what it keeps for a PV of new_size bytes */
	uint64_t extent_bytes, pe_start, pe_count;
};

/* LV name ("vg/lv") of the PV at [off, off+size) of fd, and what it keeps
 * when the PV shrinks to new_size bytes (new_size 0: its size). */
int lvm_pv_find_lv(int fd, uint64_t off, uint64_t size, const char *name, uint64_t new_size,
		   struct lvm_pv_lv *out, struct im_err *err);

/* The PV shrunk to new_size bytes as lvm_pv_find_lv() planned it. */
int lvm_pv_shrink(int fd, uint64_t off, uint64_t size, const char *name, uint64_t new_size,
		  struct im_err *err);

/* ---- a VG's text (vgcfgbackup's format: Clonezilla's lvm_VG.conf;
 *      imager/engine/fs/lvm-text.c) ---- */

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

/* The VG of text (hostile: parsed with the bounds above): its PVs and
 * where each LV's bytes lie on them.  Returns 0 or -EINVAL/-ENOTSUP with
 * err; lvm_vg_map_free() in every case. */
int lvm_text_map(const char *text, size_t len, struct lvm_vg_map *m, struct im_err *err);
void lvm_vg_map_free(struct lvm_vg_map *m);

/* The first pe_start bytes of PV pv of map, made afresh as pvcreate
 * --restorefile and vgcfgrestore make them, for a partition of size
 * bytes: sector 1 the label (pv_header with one data area from pe_start,
 * one metadata area from 4 KiB to pe_start, the extension marking it
 * used), the metadata area's header, and the text after it (the VG's
 * section first, as lvm2 wants it, then the rest, then a NUL).
 * *head is malloc'ed.  Returns 0 or -EINVAL/-ENOSPC with err. */
int lvm_pv_head(const struct lvm_vg_map *m, unsigned pv, const char *text, size_t len,
		uint64_t size, unsigned char **head, struct im_err *err);

#endif
