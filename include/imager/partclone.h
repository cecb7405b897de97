/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Reading partclone images (the partition streams inside Clonezilla image
 * folders), format 0002, from any byte stream: a file, a decompressed
 * stream, split parts joined.  Facts from partclone's IMAGE_FORMATS.md,
 * checked against images Debian's partclone 0.3.23 writes:
 *
 *   header, 110 bytes, little-endian:
 *     0  "partclone-image\0"        16
 *    16  partclone's version text    14
 *    30  "0002"                      4
 *    34  0xC0DE (little-endian)      2
 *    36  filesystem name ("EXTFS")   16
 *    52  device size in bytes        8
 *    60  total blocks                8
 *    68  used blocks (superblock)    8
 *    76  used blocks (bitmap)        8
 *    84  block size                  4
 *    88  feature size (18)           4
 *    92  image version (2)           2
 *    94  cpu bits                    2
 *    96  checksum mode: 0 none, 0x20 CRC32 (0x30 XXH64, 0x31 XXH128 in
 *        newer partclone; 0xFF CRC32 of format 0001)
 *    98  checksum size (4 for CRC32) 2
 *   100  blocks per checksum         4
 *   104  reseed (1: each checksum starts afresh)  1
 *   105  bitmap mode (1: a bit per block)         1
 *   106  CRC32 of bytes 0-105        4
 *   then the bitmap, ceil(total / 8) bytes, bit b of byte n = block 8n+b,
 *   and its CRC32 (4 bytes); then the used blocks in order, a checksum
 *   after every "blocks per checksum" of them and after the last ones.
 *   partclone's CRC32 is the reflected CRC-32 (polynomial 0xEDB88320)
 *   started at 0xFFFFFFFF without the final inversion: zlib's crc32()
 *   inverted.  Newer partclone (facts from its checksum.c) also writes
 *   XXH64 (mode 0x30: 8 bytes, XXH64 seeded 0) and XXH3-128 (mode 0x31:
 *   16 bytes, the low then the high half), each little-endian, the state
 *   started afresh after each checksum when reseed is set.
 *
 *   format 0001 (partclone before 0.3.0; IMAGE_FORMATS.md, partclone.c):
 *     0  "partclone-image"  15,  15 the filesystem's name  15,
 *    30  "0001"  4,  34 padding  2,  36 block size  4,  40 device size  8,
 *    48 total blocks  8,  56 used blocks  8,  64 unused  4096: 4160 bytes;
 *   then a byte per block (1: used, anything else: not), "BiTmAgIc", and
 *   each used block followed by 4 bytes: a CRC never reseeded, made by
 *   partclone's crc32_0001(), which (a bug kept for these images) feeds a
 *   block's first byte block-size times.
 *
 * Every field is treated as hostile: the header, the bitmap and every
 * strip are checked before their contents are used, the bitmap must hold
 * exactly the used count the header states (format 0002) and nothing past
 * the last block, and the stream must end where the bitmap says it does.
 * What this reader does not take (big-endian images, other bitmap modes
 * or checksum modes) is refused by name (IM_EXIT_UNSUPP).
 * Damage is IM_EXIT_DAMAGED with the blocks and the partition's byte
 * range named; a failing read callback is IM_EXIT_IO.
 */
#ifndef IMAGER_PARTCLONE_H
#define IMAGER_PARTCLONE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "imager/bitmap.h"
#include "imager/error.h"

#define PCL_HEADER_SIZE 110
/* The largest block count read (a bitmap of 1 GiB: 32 TiB of 4 KiB blocks). */
#define PCL_MAX_BLOCKS (1ULL << 33)

/* Reads up to len bytes; returns the count (0: the end) or a negative errno. */
typedef ssize_t (*pcl_read_fn)(void *opaque, void *buf, size_t len);

struct pcl_header {
	char tool_version[15];     /* partclone's version, NUL-terminated */
	char fs[17];               /* partclone's filesystem name: "EXTFS", "NTFS", "FAT", "XFS"... */
	uint64_t device_size;      /* bytes */
	uint64_t total_blocks;
	uint64_t used_blocks;      /* as the bitmap holds them */
	uint32_t block_size;
	unsigned checksum_mode;    /* 0, 0x20 CRC32, 0x30 XXH64, 0x31 XXH128, 0xFF format 0001's */
	unsigned checksum_size;    /* 0, 4, 8 or 16 */
	uint32_t blocks_per_checksum;
	bool reseed;
};

/* A checksum read but not yet compared (pcl_read_run_marked): the strip
 * ends end blocks into the run it came with. */
struct pcl_mark {
	size_t end;
	uint64_t strip_first, last;   /* the strip's blocks, for messages */
	unsigned char sum[16];        /* as stored */
};
struct pcl_marks {
	struct pcl_mark *m;
	size_t n, cap;                /* cap: max + 1 of the runs read */
};

struct pcl_reader {
	struct pcl_header h;
	struct bitmap used;        /* the image's bitmap */
	/* private */
	pcl_read_fn read;
	void *opaque;
	char name[256];
	uint64_t next;             /* the next block to look at */
	uint64_t read_blocks;      /* used blocks read so far */
	uint32_t strip_count;      /* blocks in the current checksum strip */
	uint64_t strip_first;      /* its first block */
	uint64_t last;             /* the last block read */
	uint32_t crc;              /* partclone's running CRC32 */
	void *xxh;                 /* the XXH64 or XXH3-128 state */
	struct pcl_marks *marks;   /* marked mode: where checksums go */
	bool v1;                   /* format 0001 */
	bool done;
};

/* Read and check the header and the bitmap.  name (the stream's file
 * name) is for messages.  Returns 0, or a negative errno with err filled
 * (nothing to close then). */
int pcl_open(struct pcl_reader *r, pcl_read_fn fn, void *opaque, const char *name,
	     struct im_err *err);

/* The next run of used blocks, at most max of them, read into buf (room
 * for max * block_size bytes) with every checksum that ends on the way
 * checked.  *first: the run's first block.  Returns the run's length, 0
 * at the end (after the last checksum and the stream's end are checked),
 * or a negative errno. */
ssize_t pcl_read_run(struct pcl_reader *r, uint64_t *first, void *buf, size_t max,
		     struct im_err *err);

/* The same with the checking split off, so that another thread can do
 * it (the checksums cost a fifth of a restore's time): the run's stored
 * checksums are read into mk (cap at least max + 1; mk->n set) but not
 * compared.  A return of 0 may still bring the last strip's mark.
 * pcl_check_run() must then see every run (also the one of 0 blocks at
 * the end) in order, and only it touches the running checksum: it feeds
 * the run's blocks in and compares each mark where it falls, with the
 * damaged blocks named as pcl_read_run() would.  Returns 0 or -EBADMSG
 * (IM_EXIT_DAMAGED). */
ssize_t pcl_read_run_marked(struct pcl_reader *r, uint64_t *first, void *buf, size_t max,
			    struct pcl_marks *mk, struct im_err *err);
int pcl_check_run(struct pcl_reader *r, const void *buf, size_t blocks,
		  const struct pcl_marks *mk, struct im_err *err);

void pcl_close(struct pcl_reader *r);

#endif
