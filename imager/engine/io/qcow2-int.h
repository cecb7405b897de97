/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The qcow2 driver's private header (backend-qcow2.c has the whole story):
 * the format's constants, the driver's state and what its files share.
 *   qcow2-host.c     host I/O, the table caches, refcounts, the state's
 *                    buffers (setup, free)
 *   qcow2-rw.c       mapping guest clusters, compressed clusters, reading,
 *                    writing, flush and close
 *   backend-qcow2.c  probing, opening and checking the header, creating;
 *                    the driver (bk_qcow2), the only symbol exported beyond
 *                    these files
 */
#ifndef IMAGER_QCOW2_INT_H
#define IMAGER_QCOW2_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <zlib.h>
#include <zstd.h>

#include "imager/backend.h"
#include "util.h"

#define QC_MAGIC              0x514649fbu   /* "QFI\xfb" */
#define QC_HDR_V2_LEN         72
#define QC_HDR_V3_LEN         104
#define QC_NEW_HDR_LEN        112           /* with compression_type, padded */

#define QC_INCOMPAT_DIRTY     (1ull << 0)
#define QC_INCOMPAT_CORRUPT   (1ull << 1)
#define QC_INCOMPAT_DATA_FILE (1ull << 2)
#define QC_INCOMPAT_COMPRESS  (1ull << 3)
#define QC_INCOMPAT_EXT_L2    (1ull << 4)

#define QC_EXT_END            0x00000000u
#define QC_EXT_FEATURE_NAMES  0x6803f857u

#define QC_OFLAG_COPIED       (1ull << 63)
#define QC_OFLAG_COMPRESSED   (1ull << 62)
#define QC_OFLAG_ZERO         1ull
#define QC_OFFSET_MASK        0x00fffffffffffe00ull   /* bits 9-55 */
#define QC_L1_RESERVED        0x7f000000000001ffull   /* bits 0-8, 56-62 */
#define QC_L2_RESERVED        0x3f000000000001feull   /* bits 1-8, 56-61 */
#define QC_RT_RESERVED        0x1ffull

/* Implementation limits, the same as QEMU's, which bound our memory. */
#define QC_MAX_L1_BYTES       (32u << 20)
#define QC_MAX_RT_BYTES       (8u << 20)
#define QC_MIN_CLUSTER_BITS   9
#define QC_MAX_CLUSTER_BITS   21
#define QC_CACHE_BYTES        (8u << 20)   /* L2 cache budget */
#define QC_L2_SLOTS_MAX       32
#define QC_RB_SLOTS           4

/* A cached cluster-sized table (L2 table or refcount block). */
struct qc_slot {
	uint64_t off;        /* host offset; 0 = empty slot */
	unsigned char *buf;  /* big-endian, as on disk */
	uint64_t used;       /* LRU clock */
	bool dirty;
};

struct qc_state {
	int fd;
	struct dio dio;           /* writable: big aligned writes go direct */
	unsigned version;
	unsigned cluster_bits;
	uint64_t cs;              /* cluster size */
	uint64_t file_size;       /* bytes of the file: the bound for every host offset */
	uint64_t phys_size;       /* bytes the host file really has (writing) */
	uint64_t incompat;
	uint64_t autoclear;
	unsigned refcount_order;
	unsigned compression;     /* 0 deflate, 1 zstd */
	bool ext_l2;
	unsigned l2_bits;         /* log2 of the entries of an L2 table */
	unsigned entry_size;      /* 8, or 16 with extended L2 entries */
	bool writable;
	enum bk_prealloc prealloc;

	uint64_t l1_off;
	uint32_t l1_size;
	uint64_t *l1;             /* host order */
	uint64_t l1_dirty_lo, l1_dirty_hi;   /* entry range to write */

	uint64_t rt_off;
	uint64_t rt_entries;
	uint64_t *rt;             /* refcount table, host order (writing only) */
	uint64_t rt_dirty_lo, rt_dirty_hi;
	unsigned rb_bits;         /* log2 of the entries of a refcount block */
	uint64_t alloc_next;      /* next host cluster index to allocate */

	struct qc_slot l2c[QC_L2_SLOTS_MAX];
	unsigned n_l2c;
	struct qc_slot rbc[QC_RB_SLOTS];
	uint64_t clock;

	/* Compressed clusters: input buffer, the last decompressed cluster. */
	unsigned char *zin;
	unsigned char *zout;
	uint64_t zout_entry;
	bool zout_valid;
	z_stream zs;
	bool zs_ready;
	ZSTD_DCtx *zd;
	unsigned char *cbuf;      /* a cluster of scratch for writes */
};

/* ---- byte order ---- */

/* (readers: imager/bytes.h, through util.h) */
static inline void put_be16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v; }
static inline void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}
static inline void put_be64(unsigned char *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static inline uint64_t div_up(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }
static inline uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* ---- qcow2-host.c ---- */

/* Host I/O: the file's bytes (reads of guest data checked against
 * file_size), tables of big-endian 64-bit entries, appending, zeroing. */
int qc_host_read(struct qc_state *s, void *buf, size_t len, uint64_t off);
int qc_read_table(struct qc_state *s, uint64_t off, uint64_t count, uint64_t *out);
int qc_data_read(struct qc_state *s, void *buf, size_t len, uint64_t off);
int qc_host_write(struct qc_state *s, const void *buf, size_t len, uint64_t off);
int qc_host_extend(struct qc_state *s, uint64_t size);
int qc_host_zero(struct qc_state *s, uint64_t off, uint64_t len);
/* Table caches: the cached table at host offset off, read on a miss
 * (fresh: a new, zeroed one). */
int qc_cache_get(struct qc_state *s, struct qc_slot *slots, unsigned n, uint64_t off,
		 bool fresh, struct qc_slot **out);
/* Refcounts (writing). */
void qc_rc_set(unsigned char *b, unsigned order, uint64_t i, uint64_t v);
void qc_dirty_range(uint64_t *lo, uint64_t *hi, uint64_t i);
bool qc_overlaps_metadata(const struct qc_state *s, uint64_t h);
int qc_rc_decref(struct qc_state *s, uint64_t c);
int qc_alloc_cluster(struct qc_state *s, uint64_t *host);
int qc_write_table(struct qc_state *s, const uint64_t *t, uint64_t base, uint64_t lo, uint64_t hi);
int qc_write_metadata(struct qc_state *s);
/* The state: buffers once cluster_bits is known; everything freed. */
void qc_free(struct qc_state *s);
int qc_setup(struct qc_state *s);

/* ---- qcow2-rw.c: the driver's I/O callbacks ---- */

int qc_pread(struct bk *bk, void *buf, size_t len, uint64_t off);
int qc_block_status(struct bk *bk, uint64_t off, uint64_t len, uint64_t *pnum);
int qc_pwrite(struct bk *bk, const void *buf, size_t len, uint64_t off);
int qc_pwrite_zeroes(struct bk *bk, uint64_t off, uint64_t len);
int qc_flush(struct bk *bk);
int qc_close(struct bk *bk);

#endif
