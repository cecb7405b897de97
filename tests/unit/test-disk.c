/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Disk names, partition names, and bus detection from fake sysfs trees. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imager/disk.h"
#include "unit.h"
#include "util.h"

static void test_known_names(void)
{
	static const char *const yes[] = { "sda", "sdaa", "hda", "vda", "vdb", "xvda", "nvme0n1",
					   "nvme12n3", "mmcblk0", "md0", "md127", "nbd0", "loop7",
					   "dm-0" };
	static const char *const no[] = { "sda1", "vda2", "nvme0n1p1", "nvme0", "mmcblk0p1",
					  "mmcblk0boot0", "mmcblk0rpmb", "sr0", "ram0", "zram0",
					  "loop", "md", "dm-", "xvd", "sd", "nvme0n", "fd0", "" };
	for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++) {
		if (!disk_name_known(yes[i]))
			fprintf(stderr, "  expected known: %s\n", yes[i]);
		CHECK(disk_name_known(yes[i]));
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
		if (disk_name_known(no[i]))
			fprintf(stderr, "  expected unknown: %s\n", no[i]);
		CHECK(!disk_name_known(no[i]));
	}
}

static void test_partition_names(void)
{
	char out[64], disk[64];
	unsigned n = 0;

	CHECK(disk_partition_name("sda", 1, out, sizeof(out)) == 0);
	CHECK_STR(out, "sda1");
	CHECK(disk_partition_name("vda", 15, out, sizeof(out)) == 0);
	CHECK_STR(out, "vda15");
	CHECK(disk_partition_name("xvda", 2, out, sizeof(out)) == 0);
	CHECK_STR(out, "xvda2");
	CHECK(disk_partition_name("nvme0n1", 1, out, sizeof(out)) == 0);
	CHECK_STR(out, "nvme0n1p1");
	CHECK(disk_partition_name("mmcblk0", 2, out, sizeof(out)) == 0);
	CHECK_STR(out, "mmcblk0p2");
	CHECK(disk_partition_name("loop0", 3, out, sizeof(out)) == 0);
	CHECK_STR(out, "loop0p3");
	CHECK(disk_partition_name("md127", 1, out, sizeof(out)) == 0);
	CHECK_STR(out, "md127p1");
	CHECK(disk_partition_name("sda", 1, out, 4) == -ENAMETOOLONG);

	CHECK(disk_split_partition("sda10", disk, sizeof(disk), &n) == 0);
	CHECK_STR(disk, "sda");
	CHECK_EQ_U(n, 10);
	CHECK(disk_split_partition("nvme0n1p2", disk, sizeof(disk), &n) == 0);
	CHECK_STR(disk, "nvme0n1");
	CHECK_EQ_U(n, 2);
	CHECK(disk_split_partition("mmcblk1p1", disk, sizeof(disk), &n) == 0);
	CHECK_STR(disk, "mmcblk1");
	CHECK(disk_split_partition("vdb3", disk, sizeof(disk), &n) == 0);
	CHECK_STR(disk, "vdb");
	CHECK_EQ_U(n, 3);
	/* Whole disks are not partitions. */
	CHECK(disk_split_partition("nvme0n1", disk, sizeof(disk), &n) == -EINVAL);
	CHECK(disk_split_partition("mmcblk0", disk, sizeof(disk), &n) == -EINVAL);
	CHECK(disk_split_partition("sda", disk, sizeof(disk), &n) == -EINVAL);
	CHECK(disk_split_partition("loop0", disk, sizeof(disk), &n) == -EINVAL);
	/* "nvme0n12" is namespace 12, not partition 2 of nvme0n1. */
	CHECK(disk_split_partition("nvme0n12", disk, sizeof(disk), &n) == -EINVAL);
	CHECK(disk_split_partition("sda0", disk, sizeof(disk), &n) == -EINVAL);
}

static void test_bus_from_path(void)
{
	CHECK(disk_bus_from_sysfs_path("/sys/devices/pci0000:00/0000:00:05.0/virtio2/block/vda", "vda") == BUS_VIRTIO_BLK);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/pci0000:00/0000:00:04.0/virtio1/host2/target2:0:0/2:0:0:0/block/sda", "sda") == BUS_VIRTIO_SCSI);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda", "sda") == BUS_ATA);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/pci0000:00/0000:00:06.0/nvme/nvme0/nvme0n1", "nvme0n1") == BUS_NVME);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1", "nvme0n1") == BUS_NVME);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/vbd-51712/block/xvda", "xvda") == BUS_XEN);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/platform/soc/mmc_host/mmc0/mmc0:0001/block/mmcblk0", "mmcblk0") == BUS_MMC);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb", "sdb") == BUS_USB);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/pci0000:00/0000:00:10.0/host3/target3:0:0/3:0:0:0/block/sdc", "sdc") == BUS_SCSI);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/virtual/block/loop0", "loop0") == BUS_LOOP);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/virtual/block/md0", "md0") == BUS_VIRTUAL);
	CHECK(disk_bus_from_sysfs_path("/sys/devices/virtual/block/dm-0", "dm-0") == BUS_VIRTUAL);
	CHECK(disk_bus_is_virtio(BUS_VIRTIO_SCSI) && disk_bus_is_virtio(BUS_VIRTIO_BLK));
	CHECK(!disk_bus_is_virtio(BUS_ATA) && !disk_bus_is_virtio(BUS_NVME));
}

/* ---- a fake machine as a folder tree ---- */

static char root[PATH_MAX];

static void mkpath(const char *rel)
{
	char p[PATH_MAX * 2];
	CHECK(path_join(p, sizeof(p), root, rel) == 0);
	for (char *s = p + strlen(root) + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	mkdir(p, 0755);
}

static void put(const char *rel, const char *text)
{
	char p[PATH_MAX * 2];
	FILE *f;
	CHECK(path_join(p, sizeof(p), root, rel) == 0);
	f = fopen(p, "w");
	if (!f)
		return;
	fputs(text, f);
	fclose(f);
}

/* A disk at devpath (under sys/devices) linked from sys/block/NAME. */
static void fake_disk(const char *devpath, const char *name, const char *sectors,
		      const char *lbs, const char *pbs, const char *rot)
{
	char dir[PATH_MAX], link[PATH_MAX * 2], target[PATH_MAX], attr[PATH_MAX * 2];

	snprintf(dir, sizeof(dir), "sys/devices/%s/%s", devpath, name);
	mkpath(dir);
	snprintf(attr, sizeof(attr), "%s/queue", dir);
	mkpath(attr);
#define ATTR(file, val) do { snprintf(attr, sizeof(attr), "%s/" file, dir); put(attr, val); } while (0)
	ATTR("size", sectors);
	ATTR("queue/logical_block_size", lbs);
	ATTR("queue/physical_block_size", pbs);
	ATTR("queue/rotational", rot);
	ATTR("removable", "0\n");
	ATTR("dev", "8:0\n");
#undef ATTR
	mkpath("sys/block");
	snprintf(target, sizeof(target), "../devices/%s/%s", devpath, name);
	snprintf(link, sizeof(link), "%s/sys/block/%s", root, name);
	CHECK(symlink(target, link) == 0);
}

static void fake_part(const char *devpath, const char *disk, const char *name,
		      const char *num, const char *start, const char *size)
{
	char dir[PATH_MAX], attr[PATH_MAX * 2];
	snprintf(dir, sizeof(dir), "sys/devices/%s/%s/%s", devpath, disk, name);
	mkpath(dir);
	snprintf(attr, sizeof(attr), "%s/partition", dir);
	put(attr, num);
	snprintf(attr, sizeof(attr), "%s/start", dir);
	put(attr, start);
	snprintf(attr, sizeof(attr), "%s/size", dir);
	put(attr, size);
}

static const struct disk_desc *find(const struct disk_desc *d, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(d[i].name, name))
			return &d[i];
	return NULL;
}

static void make_root(void)
{
	snprintf(root, sizeof(root), "/tmp/imager-unit-sysfs-XXXXXX");
	CHECK(mkdtemp(root) != NULL);
}

static void rm_root(void)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	CHECK(system(cmd) == 0);
}

static void test_fake_machine_virtio(void)
{
	struct disk_roots roots;
	struct disk_desc *d = NULL;
	struct im_err err = { 0 };
	const struct disk_desc *x;
	int n;

	make_root();
	fake_disk("pci0000:00/0000:00:05.0/virtio2/block", "vda", "41943040\n", "512\n", "4096\n", "1\n");
	put("sys/devices/pci0000:00/0000:00:05.0/virtio2/block/vda/serial", "VDSERIAL01\n");
	fake_part("pci0000:00/0000:00:05.0/virtio2/block", "vda", "vda1", "1\n", "2048\n", "1024000\n");
	fake_part("pci0000:00/0000:00:05.0/virtio2/block", "vda", "vda2", "2\n", "1026048\n", "2048\n");
	fake_disk("pci0000:00/0000:00:04.0/virtio1/host2/target2:0:0/2:0:0:0/block", "sda",
		  "2097152\n", "512\n", "512\n", "0\n");
	put("sys/devices/pci0000:00/0000:00:04.0/virtio1/host2/target2:0:0/2:0:0:0/block/sda/../../model",
	    "QEMU HARDDISK   \n");
	fake_disk("pci0000:00/0000:00:06.0/nvme/nvme0", "nvme0n1", "1000215216\n", "512\n", "512\n", "0\n");
	fake_part("pci0000:00/0000:00:06.0/nvme/nvme0", "nvme0n1", "nvme0n1p1", "1\n", "2048\n", "409600\n");
	fake_disk("vbd-51712/block", "xvda", "20971520\n", "512\n", "512\n", "0\n");
	fake_disk("platform/soc/mmc_host/mmc0/mmc0:0001/block", "mmcblk0", "30777344\n", "512\n", "512\n", "0\n");
	fake_disk("platform/soc/mmc_host/mmc0/mmc0:0001/block", "mmcblk0boot0", "8192\n", "512\n", "512\n", "0\n");
	fake_disk("virtual/block", "loop0", "0\n", "512\n", "512\n", "0\n");   /* not backed */
	fake_disk("virtual/block", "ram0", "8192\n", "512\n", "512\n", "0\n");

	CHECK(path_join(roots.sysfs, sizeof(roots.sysfs), root, "sys") == 0);
	CHECK(path_join(roots.dev, sizeof(roots.dev), root, "dev") == 0);
	n = disk_list(&roots, &d, &err);
	CHECK_EQ_U(n, 5);   /* vda, sda, nvme0n1, xvda, mmcblk0 */
	if (n > 0) {
		CHECK((x = find(d, n, "vda")) && x->bus == BUS_VIRTIO_BLK);
		if (x) {
			CHECK_EQ_U(x->size, 41943040ull * 512);
			CHECK_EQ_U(x->logical_sector_size, 512);
			CHECK_EQ_U(x->physical_sector_size, 4096);
			CHECK(x->rotational);
			CHECK_STR(x->serial, "VDSERIAL01");
			CHECK_EQ_U(x->nparts, 2);
			if (x->nparts == 2) {
				CHECK_STR(x->parts[0].name, "vda1");
				CHECK_EQ_U(x->parts[0].start, 2048 * 512);
				CHECK_EQ_U(x->parts[1].number, 2);
			}
		}
		CHECK((x = find(d, n, "sda")) && x->bus == BUS_VIRTIO_SCSI && disk_bus_is_virtio(x->bus));
		CHECK((x = find(d, n, "nvme0n1")) && x->bus == BUS_NVME);
		if (x) {
			CHECK_EQ_U(x->nparts, 1);
			if (x->nparts)
				CHECK_STR(x->parts[0].name, "nvme0n1p1");
		}
		CHECK((x = find(d, n, "xvda")) && x->bus == BUS_XEN);
		CHECK((x = find(d, n, "mmcblk0")) && x->bus == BUS_MMC);
		CHECK(find(d, n, "mmcblk0boot0") == NULL);
		CHECK(find(d, n, "loop0") == NULL);
		CHECK(find(d, n, "ram0") == NULL);
	}
	disk_list_free(d, n > 0 ? (size_t)n : 0);
	rm_root();
}

static void test_fake_machine_sata(void)
{
	struct disk_roots roots;
	struct disk_desc *d = NULL;
	struct im_err err = { 0 };
	int n;

	make_root();
	fake_disk("pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block", "sda",
		  "976773168\n", "512\n", "4096\n", "1\n");
	fake_disk("virtual/block", "loop3", "2048\n", "512\n", "512\n", "0\n");
	mkpath("sys/devices/virtual/block/loop3/loop");
	put("sys/devices/virtual/block/loop3/loop/backing_file", "/var/tmp/disk.img\n");
	CHECK(path_join(roots.sysfs, sizeof(roots.sysfs), root, "sys") == 0);
	CHECK(path_join(roots.dev, sizeof(roots.dev), root, "dev") == 0);
	n = disk_list(&roots, &d, &err);
	CHECK_EQ_U(n, 2);
	if (n == 2) {
		CHECK_STR(d[0].name, "loop3");
		CHECK(d[0].bus == BUS_LOOP);
		CHECK_STR(d[1].name, "sda");
		CHECK(d[1].bus == BUS_ATA && !disk_bus_is_virtio(d[1].bus));
	}
	disk_list_free(d, n > 0 ? (size_t)n : 0);
	rm_root();
}

static void test_resolve(void)
{
	struct disk_roots roots;
	struct disk_ref ref;
	struct im_err err = { 0 };
	char file[PATH_MAX + 16];
	FILE *f;

	make_root();
	mkpath("dev");
	CHECK(path_join(roots.sysfs, sizeof(roots.sysfs), root, "sys") == 0);
	CHECK(path_join(roots.dev, sizeof(roots.dev), root, "dev") == 0);
	snprintf(file, sizeof(file), "%s/disk.img", root);
	f = fopen(file, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("0123456789", f);
		fclose(f);
	}
	CHECK(disk_resolve(&roots, file, &ref, &err) == 0);
	CHECK(ref.kind == DISK_KIND_FILE && ref.exists && ref.size == 10);
	snprintf(file, sizeof(file), "%s/new.img", root);
	CHECK(disk_resolve(&roots, file, &ref, &err) == 0);
	CHECK(ref.kind == DISK_KIND_FILE && !ref.exists);
	/* A device name that does not exist under the dev root. */
	CHECK(disk_resolve(&roots, "vdq", &ref, &err) == 0);
	CHECK(!ref.exists && ref.under_dev);
	CHECK(disk_resolve(&roots, file, &ref, &err) == 0);
	CHECK(!ref.under_dev);
	rm_root();
}

UNIT_MAIN(UNIT(test_known_names), UNIT(test_partition_names), UNIT(test_bus_from_path),
	  UNIT(test_fake_machine_virtio), UNIT(test_fake_machine_sata), UNIT(test_resolve))
