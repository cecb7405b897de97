/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Volumes in a libvirt storage pool, for p2v: created through the storage
 * API with the chosen preallocation, filled either through their path (a
 * pool on this machine) or through an upload stream (a remote host), and
 * deleted again when the job fails.  Nothing here prints.
 */
#ifndef IMAGER_VOLUME_H
#define IMAGER_VOLUME_H
/* The virtualisation (libvirt) layer's header: only that layer and those above it include it
 * (the Makefile sets IMAGER_LAYER for each layer's sources). */
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 3
#error "a lower layer may not use the virtualisation (libvirt) layer"
#endif


#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#include "imager/backend.h"
#include "imager/error.h"

/*
 * Create volume `name` of `capacity` bytes in pool (refreshed first), whose
 * libvirt type (struct im_pool's type: "dir", "logical", ...) is type.
 * format "raw" or "qcow2"; logical (LVM) and other block pools take raw
 * only, and always allocate the whole volume.  Preallocation in file pools:
 *   off       allocation 0 (sparse);
 *   metadata  qcow2 only: allocation 0 with libvirt's PREALLOC_METADATA
 *             flag (cluster tables laid out, data sparse);
 *   falloc, full   allocation = capacity (libvirt reserves it all).
 * An existing volume of that name: -EEXIST (IM_EXIT_TARGET) unless
 * replace, when it is deleted first.  A capacity above the pool's available
 * space: -ENOSPC (IM_EXIT_TARGET), nothing created.
 * Returns 0 with *out set (virStorageVolFree it), or -errno.
 */
int vol_create(virStoragePoolPtr pool, const char *type, const char *name, uint64_t capacity,
	       const char *format, enum bk_prealloc prealloc, bool replace, virStorageVolPtr *out,
	       struct im_err *err);

/* Copy the local file at path into vol through a libvirt upload stream
 * (remote hosts), sparse: holes of the file (SEEK_HOLE) are sent as holes,
 * so a sparse raw or qcow2 file stays sparse in the volume (libvirt >= 3.4
 * on both ends).  cancel as in struct im_progress.  Returns 0 or -errno
 * (IM_EXIT_IO; IM_EXIT_INTERRUPTED when cancelled). */
int vol_upload(virConnectPtr conn, virStorageVolPtr vol, const char *path,
	       const volatile sig_atomic_t *cancel, struct im_err *err);

/* Pool types whose volumes are block devices (raw only, fully allocated). */
bool vol_pool_is_block(const char *pool_type);

#endif
