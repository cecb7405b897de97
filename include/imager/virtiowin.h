/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The virtio-win driver collection: where the drivers for one Windows
 * version and architecture are, in a folder or an ISO image.
 *
 * Layouts understood (names compared without regard to case, as on the
 * ISO where they are mixed: "NetKVM", "Balloon"):
 *   by driver (the ISO; also drivers/by-driver/ of the virtio-win package):
 *       DRIVER/OS/ARCH/FILE             viostor/w10/amd64/viostor.sys
 *   by OS (the package's drivers/by-os/):
 *       by-os/ARCH/OS/FILE              drivers/by-os/amd64/w10/viostor.sys
 * OS is one of xp 2k3 vista 2k8 w7 2k8r2 w8 2k12 w8.1 2k12r2 w10 w11 2k16
 * 2k19 2k22 2k25 (older collections' winxp, win2003, win2008, win7,
 * win2008r2, win8, win2012, win8.1, win2012r2, win10, win11, win2016,
 * win2019, win2022 mean the same); ARCH is amd64, x86 (also i386) or ARM64.
 * A tree is virtio-win when it holds viostor.sys or vioscsi.sys in such a
 * folder.  The guest agent installer is qemu-ga-x86_64.msi (or
 * qemu-ga-x64.msi, rhev-qga64.msi) for x86_64 and qemu-ga-i386.msi (or
 * qemu-ga-x86.msi, rhev-qga.msi) for i386, anywhere in the tree.
 */
#ifndef IMAGER_VIRTIOWIN_H
#define IMAGER_VIRTIOWIN_H
/* The conversion (libguestfs) layer's header: only that layer and those above it include it
 * (the Makefile sets IMAGER_LAYER for each layer's sources). */
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 2
#error "a lower layer may not use the conversion (libguestfs) layer"
#endif


#include <stdbool.h>
#include <stddef.h>

#include "imager/error.h"

#define VW_MAX_CANDIDATES 6

/*
 * The folder names that hold drivers for Windows major.minor (NT version),
 * server or client, build number (0 when unknown), best first, into
 * out[0..VW_MAX_CANDIDATES-1]; returns how many (0: a version virtio-win
 * never supported).  Windows 10 and 11 and Server 2016 to 2025 share
 * NT 10.0 and are told apart by the build (22000: 11; 14393, 17763, 20348,
 * 26100: Server 2016, 2019, 2022, 2025).  On NT 10.0 the drivers of an
 * earlier NT 10.0 release follow as fallbacks (w11 then w10; 2k25 then
 * 2k22, 2k19, 2k16); before NT 10.0 there is no fallback: a driver built
 * for a later kernel may use what an earlier one lacks.
 */
size_t vw_os_candidates(int major, int minor, bool server, int build, const char **out);

/* The ARCH folder for a libguestfs architecture ("x86_64" -> "amd64",
 * "i386" -> "x86", "aarch64" -> "ARM64"); NULL when virtio-win has none. */
const char *vw_arch_dir(const char *arch);

struct vw_file {
	char *rel;                    /* path relative to the tree's top */
	char *name;                   /* base name, lower case */
	char *local;                  /* where to read it here (after vw_fetch) */
};

/* The drivers picked for one guest. */
struct vw_set {
	char os[16];                  /* folder picked: "w10" */
	char arch[8];                 /* "amd64" */
	bool fallback;                /* os is not the guest's own (see above) */
	struct vw_file *files;        /* one per base name; no .pdb (debug symbols) */
	size_t nfiles;
	struct vw_file agent;         /* guest agent installer; rel NULL when none */
	char drivers[256];            /* the packages (.inf names), comma separated */
};

/*
 * Pick the drivers for the guest from the n relative paths of a tree.
 * Returns 0; -ENOENT (IM_EXIT_SOURCE) when the paths are not a virtio-win
 * tree; -ENOTSUP (IM_EXIT_UNSUPP) when the tree has no folder for the
 * guest's version and architecture, or that folder lacks the driver named
 * need ("viostor", "vioscsi": its .sys and .inf), the message naming what
 * the tree has for that architecture.  src names the tree in messages.
 */
int vw_select(char *const *paths, size_t n, const char *src, const char *arch, int major,
	      int minor, bool server, int build, const char *need, struct vw_set *set,
	      struct im_err *err);
void vw_set_free(struct vw_set *set);
/* The file called name (lower case) in the set, or NULL. */
const struct vw_file *vw_set_find(const struct vw_set *set, const char *name);

/* A virtio-win folder or ISO image (read with libarchive: ISO 9660 with
 * Rock Ridge or Joliet names). */
struct vw_source {
	char *path;                   /* as given */
	bool iso;
	char label[64];               /* the ISO's volume id, "" for a folder */
	char **paths;                 /* every regular file, relative */
	size_t npaths;
	char *tmp;                    /* ISO: folder the picked files go to */
};

/*
 * List the files of path.  Returns 0; -ENOENT (IM_EXIT_SOURCE) when path
 * does not exist or is neither a folder nor an ISO image; -EIO on a read
 * error; -EMFILE when the tree is implausibly large (over 100000 files or
 * 8 levels deep).
 */
int vw_open(const char *path, struct vw_source *s, struct im_err *err);
/* Is path a virtio-win folder or ISO (vw_open(), then a viostor or vioscsi
 * driver folder)?  What convert checks before its appliance starts, so that
 * a wrong --virtio-win costs no launch.  Returns 0, or vw_open()'s errors
 * and -ENOENT (IM_EXIT_SOURCE) when it is not virtio-win. */
int vw_check(const char *path, struct im_err *err);
/* Make every file of set readable here (set->files[].local, agent.local):
 * a folder's files are where they are; an ISO's are extracted to a
 * temporary folder (under $TMPDIR) that vw_close() removes. */
int vw_fetch(struct vw_source *s, struct vw_set *set, struct im_err *err);
void vw_close(struct vw_source *s);

#endif
