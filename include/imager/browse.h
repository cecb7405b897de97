/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Browsing the filesystems of an image folder without restoring it
 * (imager/convert/browse.c; `imager ls`, `cat`, `get`, `mount`).
 *
 * The caller serves the folder's disk as a read-only NBD export on a Unix
 * socket (imager's nbdkit plugin, as `imager serve` does) and keeps it up
 * while the handle lives; browse_open() starts one libguestfs appliance
 * over it (guest_open_nbd(): the same acceleration, quick kernel and
 * errors as every appliance of imager) and lists its filesystems.  Nothing
 * here parses a filesystem: the appliance's kernel, ntfs-3g and LVM do.
 *
 * Names: a filesystem is named by its partition number ("2"; "0" for a
 * disk that is one filesystem, no table), and a logical volume of an LVM
 * PV by "VG/LV" ("vg0/root").  A btrfs is mounted at its top level
 * (subvolid=5), so its subvolumes are folders of its root.
 *
 * Every mount is read-only (the appliance writes, such as a journal
 * replay, go to libguestfs's throwaway overlay, never to the export).
 * Paths are absolute inside the mounted filesystem; what the appliance
 * reads cannot reach the host's files (libguestfs resolves paths inside
 * the appliance).
 *
 * Rules: returns 0 or a negative errno with err filled; never prints.
 * Errors: -ENOENT no such filesystem name (IM_EXIT_USAGE) or no such path
 * (IM_EXIT_SOURCE); -ENOTSUP a filesystem the appliance cannot mount, or
 * a partition holding none (swap, an LVM PV: its LVs are named instead)
 * (IM_EXIT_UNSUPP); -EISDIR cat of a folder (IM_EXIT_USAGE); -EEXIST get
 * onto an existing file (IM_EXIT_TARGET); -EIO a read that failed
 * (IM_EXIT_IO; a damaged frame of the image fails the reads that touch it);
 * the errors of guest_open_nbd() (IM_EXIT_APPLIANCE when the appliance
 * does not start).
 */
#ifndef IMAGER_BROWSE_H
#define IMAGER_BROWSE_H
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 2
#error "a lower layer may not use the conversion (libguestfs) layer"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/error.h"

struct browse_fs {
	char name[160];      /* "2", "0", "vg0/root" */
	char device[200];    /* the appliance's: /dev/sda2, /dev/vg0/root */
	char type[32];       /* as blkid says: ext4, xfs, btrfs, ntfs, vfat, exfat,
			      * f2fs, swap, LVM2_member...; "" when none is known */
	char label[64];
	uint64_t size;       /* bytes */
	bool mountable;      /* a filesystem browse mounts (not swap, a PV, ...) */
};

struct browse_entry {
	char name[256];
	char type;           /* as ls -l: '-' file, 'd', 'l', 'c', 'b', 'p', 's', '?' */
	uint32_t mode;       /* st_mode */
	uint64_t size, nlink, uid, gid;
	int64_t mtime;       /* seconds since the epoch, UTC */
	char target[512];    /* a symlink's target */
};

struct browse;

/* Launch the appliance over the export on socket; list its filesystems:
 * partitions in order, then LVs.  Returns 0 (*out set) or negative. */
int browse_open(const char *socket, struct browse **out, struct im_err *err);
/* Unmounts, shuts the appliance down; NULL is fine. */
void browse_close(struct browse *b);
size_t browse_count(const struct browse *b);
const struct browse_fs *browse_at(const struct browse *b, size_t i);
/* The filesystem named name, or NULL (-ENOENT in err, naming the names
 * there are). */
const struct browse_fs *browse_find(const struct browse *b, const char *name,
				    struct im_err *err);

/* Mount the filesystem named name read-only at `at` inside the appliance:
 * "/" for one filesystem (ls, cat, get), or "/NAME" below an empty root
 * (every partition under one mount point: the folders are made first, by
 * browse_mount_points()).  btrfs at subvolid=5. */
int browse_mount(struct browse *b, const char *name, const char *at, struct im_err *err);
/* The folders /NAME (and /VG for /VG/LV) of every mountable filesystem,
 * made before any mount (libguestfs's mkmountpoint). */
int browse_mount_points(struct browse *b, struct im_err *err);

/* The entries of folder path (sorted by name), or the one entry of path
 * when it is not a folder: cb per entry; cb returns 0 to go on or negative
 * to stop (returned).  *is_dir (may be NULL) says which. */
typedef int (*browse_entry_fn)(void *opaque, const struct browse_entry *e);
int browse_list(struct browse *b, const char *path, bool *is_dir, browse_entry_fn cb,
		void *opaque, struct im_err *err);
/* The bytes of file path onto fd (a folder: -EISDIR). */
int browse_cat(struct browse *b, const char *path, int fd, struct im_err *err);
/* Copy path out to dest: a file into dest (a new file; or into an existing
 * folder dest under its own name), a folder's whole tree into dest (an
 * existing folder: dest/NAME is made). */
int browse_get(struct browse *b, const char *path, const char *dest, struct im_err *err);

/* Serve the appliance's mounted tree ("/") on the host's folder
 * mountpoint through FUSE, read-only (libguestfs's mount_local).  ready
 * is called once the mount exists; then requests are served until the
 * folder is unmounted, and this returns 0 (or negative). */
int browse_fuse(struct browse *b, const char *mountpoint, void (*ready)(void *), void *opaque,
		struct im_err *err);

#endif
