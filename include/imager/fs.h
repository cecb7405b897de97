/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The engine's side of filesystems: detect what a partition holds (libblkid,
 * then the plugin registry) and obtain its used-block bitmap.
 */
#ifndef IMAGER_FS_H
#define IMAGER_FS_H

#include <stdbool.h>
#include <stdint.h>

#include "imager/bitmap.h"
#include "imager/error.h"
#include "imager/fsplugin.h"

/* A volume inside a container (fs_mark_volume()), for the report. */
struct fs_volume {
	char name[128];         /* "vg0/root" */
	char type[32];          /* libblkid TYPE of its contents, "" when unknown */
	char uuid[64], label[256];
	char plugin[16];        /* the plugin that read it; "whole" when kept whole */
	char note[512];         /* why it was kept whole, or its plugin's warning */
	uint64_t size;          /* bytes of it on this device */
	uint64_t used_bytes;    /* bytes of it marked used (in its own block units) */
	uint64_t end;           /* just past its last byte on this device: the LV
				 * that ends last is the one growing extends */
};

struct fs_info {
	const struct fs_plugin *plugin;  /* the plugin that produced the bitmap */
	char type[32];                   /* libblkid TYPE, "" when unknown */
	char uuid[64];
	char label[256];
	uint32_t block_size;             /* bitmap unit, bytes */
	uint64_t block_count;            /* blocks the filesystem spans */
	uint64_t used_blocks;            /* set bits in `used` */
	struct bitmap used;              /* owned; fs_info_free() releases it */
	struct bitmap blank;             /* owned: used blocks whose content does not
					  * matter (fs_mark_blank()); save stores them
					  * as zeros without reading them.  nbits 0:
					  * none */
	char warning[512];               /* first warning of the plugin, or "" */
	char container[128];             /* "LVM2 VG vg0", "" when not a container */
	size_t nvolumes;                 /* volumes inside it, in the order found */
	struct fs_volume *volumes;       /* owned; fs_info_free() releases it */
};

/* Where a filesystem's bytes come from when it is not a plain descriptor
 * (a qcow2 image, an NBD export): a read callback, and optionally a
 * descriptor showing the same bytes for libblkid (-1: the engine gives
 * libblkid a sparse in-memory copy of the regions it probes). */
struct fs_source {
	int (*pread)(void *opaque, void *buf, size_t len, uint64_t off);
	void *opaque;
	int fd;
};

/* Identify only (libblkid): type, UUID, label of the bytes [offset,
 * offset+size) of fd.  Fields stay "" when nothing is found.  Never fails
 * hard: returns 0, or a negative errno when fd cannot be probed at all. */
int fs_identify(int fd, uint64_t offset, uint64_t size, struct fs_info *out);

/* Identify and compute the used-block bitmap of [offset, offset+size) of fd.
 * The plugin is chosen by libblkid's TYPE, then the plugins' magics, then
 * the raw fallback.  force: go on despite an unclean filesystem.
 * Returns 0 or a negative errno with err filled (IM_EXIT_FSCK for an
 * unclean or inconsistent filesystem, IM_EXIT_SOURCE for a corrupt one). */
int fs_examine(int fd, uint64_t offset, uint64_t size, bool force,
	       struct fs_info *out, struct im_err *err);

/* As fs_examine(), for bytes read through a source. */
int fs_examine_src(const struct fs_source *src, uint64_t offset, uint64_t size, bool force,
		   struct fs_info *out, struct im_err *err);

/* Run one named plugin (tests, and the manifest's recorded plugin). */
int fs_examine_with(const struct fs_plugin *plugin, int fd, uint64_t offset,
		    uint64_t size, bool force, struct fs_info *out,
		    struct im_err *err);

/* As fs_examine_with(), for bytes read through a source. */
int fs_examine_src_with(const struct fs_plugin *plugin, const struct fs_source *src,
			uint64_t offset, uint64_t size, bool force, struct fs_info *out,
			struct im_err *err);

const struct fs_plugin *fs_plugin_by_name(const char *name);

void fs_info_free(struct fs_info *info);

#endif
