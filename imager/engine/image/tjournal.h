/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The target journal: how far an interrupted restore or clone got, so that
 * --resume carries on where it stopped.
 *
 * One record of 64 bytes, replaced atomically at each checkpoint (after the
 * target was flushed: what it says is on the disk is), all little-endian:
 *
 *   0  magic: "IMGRJNL\1" (a restore) or "IMGCJNL\1" (a clone)
 *   8  u64 identity: what was being written (a restore: the XXH3-64 of the
 *      image's manifest.json; a clone: the XXH3-64 of the source's layout
 *      and used-block bitmaps)
 *  16  u64 the target's size
 *  24  u32 the partition being written (its index; = the count when all
 *      are done), u32 0
 *  32  u64 position in it: a restore's frames on the target, a clone's
 *      block before which every used block is on the target
 *  40  u64 used bytes done, over all partitions
 *  48  u64 0
 *  56  u64 XXH3-64 of the 56 bytes before it
 *
 * Raw targets only (a qcow2's tables are written when it closes).  Every
 * field read back is checked: a journal is a file anyone could have edited.
 */
#ifndef IMAGER_ENGINE_TJOURNAL_H
#define IMAGER_ENGINE_TJOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/error.h"

#define TJNL_SIZE 64

enum tjnl_kind { TJNL_RESTORE, TJNL_CLONE };

struct tjournal {
	bool on;
	/* this run wrote it, or took it over after every check of a resume:
	 * it may remove it (a refused job never touches another's journal) */
	bool mine;
	enum tjnl_kind kind;
	char path[4200];
	uint64_t identity, target_size;
	uint32_t part;             /* read: where the last run was */
	uint64_t pos, bytes;
	long long written_ms;      /* when this run last replaced the record (util_mono_ms; 0: never) */
};

/* Where the journal of TARGET lives: beside a file (TARGET.imager-resume),
 * or /var/lib/imager/resume/NAME.jnl for a device; false for a target that
 * cannot have one (an NBD export). */
bool tjournal_path(const char *target, char *out, size_t n);
/* Replace the record (0, or a negative errno). */
int tjournal_write(struct tjournal *jn, uint32_t part, uint64_t pos, uint64_t bytes);
/* Check a record of len bytes against jn->kind, jn->identity and nparts;
 * on success fill target_size, part, pos and bytes.  On refusal: a
 * negative errno and err (IM_EXIT_TARGET; the message without the path). */
int tjournal_parse(struct tjournal *jn, const unsigned char *rec, size_t len, uint32_t nparts,
		   struct im_err *err);
/* Read jn->path and parse it (IM_EXIT_TARGET when it is missing, of
 * another job or image, or damaged). */
int tjournal_read(struct tjournal *jn, uint32_t nparts, struct im_err *err);
/* Once the target is open (FORMAT, SIZE bytes): a target that is not raw
 * keeps no journal, and cannot be resumed (IM_EXIT_TARGET); a resumed one
 * must be the size the journal names; a new run writes its first record
 * (one that cannot be written costs the resume, not the job). */
int tjournal_start(struct tjournal *jn, bool resume, const char *target, const char *format,
		   uint64_t size, struct im_err *err);

#endif
