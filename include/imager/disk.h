/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Disks: names, buses, discovery from sysfs, and opening any source or
 * target by the name a user gives (/dev/vda, vda, nvme0n1p2, an image file).
 *
 * sysfs and /dev can be pointed elsewhere (struct disk_roots), so tests
 * describe machines with virtio, NVMe, Xen and SATA disks as folder trees.
 */
#ifndef IMAGER_DISK_H
#define IMAGER_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/error.h"

enum disk_bus {
	BUS_UNKNOWN = 0,
	BUS_VIRTIO_BLK,
	BUS_VIRTIO_SCSI,
	BUS_ATA,
	BUS_SCSI,
	BUS_NVME,
	BUS_XEN,
	BUS_MMC,
	BUS_USB,
	BUS_LOOP,
	BUS_VIRTUAL,   /* md, dm, nbd: no hardware of their own */
};

const char *disk_bus_name(enum disk_bus bus);
static inline bool disk_bus_is_virtio(enum disk_bus bus)
{
	return bus == BUS_VIRTIO_BLK || bus == BUS_VIRTIO_SCSI;
}

struct disk_roots {
	char sysfs[512];   /* default "/sys", or $IMAGER_SYSFS_ROOT */
	char dev[512];     /* default "/dev", or $IMAGER_DEV_ROOT */
};
/* Fill from the environment (IMAGER_SYSFS_ROOT, IMAGER_DEV_ROOT), else defaults. */
void disk_roots_default(struct disk_roots *roots);

/* Is `name` (a kernel block device name without /dev/) a whole-disk name
 * imager knows: sd*, hd*, vd*, xvd*, nvmeXnY, mmcblkN, mdN, nbdN, loopN, dm-N? */
bool disk_name_known(const char *name);
/* Does the kernel name a partition of this disk with a "p" before the
 * number?  It does when the disk name ends in a digit (nvme0n1p1, mmcblk0p1,
 * loop0p1, md0p1). */
bool disk_name_needs_p(const char *disk);
/* Build the name of partition `number` of `disk` by the kernel's rule.
 * Returns 0, or -ENAMETOOLONG when it does not fit. */
int disk_partition_name(const char *disk, unsigned number, char *out, size_t outlen);
/* Split a partition name into disk name and number ("nvme0n1p2" -> "nvme0n1", 2;
 * "sda10" -> "sda", 10).  Only for names the rule could have built; returns
 * 0, or -EINVAL when `name` is not a partition name. */
int disk_split_partition(const char *name, char *disk, size_t disklen, unsigned *number);

/* The bus of block device `name`, from the resolved path of its sysfs node
 * (sysfs/block/NAME -> .../virtio2/block/vda): virtio before SCSI host
 * (an sda behind virtio-scsi is virtio), then nvme, usb, ata, mmc, xen. */
enum disk_bus disk_bus_from_sysfs_path(const char *devpath, const char *name);

struct partition_desc {
	char name[64];
	char path[600];
	unsigned number;
	uint64_t start;       /* bytes */
	uint64_t size;        /* bytes */
	char fstype[32], label[256], uuid[64];
};

struct disk_desc {
	char name[64];
	char path[600];        /* dev root + name */
	uint64_t size;         /* bytes */
	unsigned logical_sector_size, physical_sector_size;
	char model[128], serial[128];
	bool rotational, removable;
	enum disk_bus bus;
	char table[16];        /* "gpt", "msdos", "none" */
	size_t nparts;
	struct partition_desc *parts;
};

/* Every disk of the machine, sorted by name.  Partitions, boot areas of
 * mmc (mmcblk0boot0, rpmb), unbacked loops and ram disks are not disks.
 * Returns the count (>= 0) or a negative errno; free with disk_list_free. */
int disk_list(const struct disk_roots *roots, struct disk_desc **out, struct im_err *err);
void disk_list_free(struct disk_desc *disks, size_t n);

/* What a name given by the user turned out to be. */
enum disk_kind {
	DISK_KIND_FILE,        /* a regular file: a disk image */
	DISK_KIND_BLOCK,       /* a whole block device */
	DISK_KIND_PARTITION,   /* a partition block device */
};

struct disk_ref {
	enum disk_kind kind;
	char path[600];        /* what to open */
	char name[256];        /* kernel name for block devices, file name otherwise */
	uint64_t size;         /* bytes (0 for a file that does not exist yet) */
	unsigned logical_sector_size;
	bool exists;
	bool under_dev;        /* the path names the dev root: a device, never a new file */
};

/* Resolve "/dev/vda", "vda", "nvme0n1p2" or a file path.  A bare name is
 * looked up under the dev root; a path is taken as is.  A missing path is
 * reported with exists == false (restore creates image files); a name that
 * is neither a path nor a known device is -ENOENT. */
int disk_resolve(const struct disk_roots *roots, const char *name, struct disk_ref *ref,
		 struct im_err *err);

/* Is the block device (or any of its partitions) mounted, or used as swap?
 * Fills `what` with the first user found.  Returns 1 yes, 0 no, <0 errno. */
int disk_in_use(const struct disk_roots *roots, const char *path, char *what, size_t whatlen);
/* Is the block device (or any of its partitions) mounted read-write (a
 * save of it would copy a filesystem that changes while it is read)?
 * Returns 1 with `what` filled ("sda2: mounted on /home"), 0 (also for
 * files), or <0 errno. */
int disk_mounted_rw(const struct disk_roots *roots, const char *path, char *what, size_t whatlen);

#endif
