/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Disk names, buses and discovery.  Everything that turns a name into a
 * device goes through here, so /dev/vda, vda and an image path are
 * resolved by one rule.
 */
#include "imager/disk.h"

#include <blkid.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util.h"

const char *disk_bus_name(enum disk_bus bus)
{
	static const char *const names[] = {
		[BUS_UNKNOWN] = "unknown", [BUS_VIRTIO_BLK] = "virtio-blk",
		[BUS_VIRTIO_SCSI] = "virtio-scsi", [BUS_ATA] = "ata",
		[BUS_SCSI] = "scsi", [BUS_NVME] = "nvme", [BUS_XEN] = "xen",
		[BUS_MMC] = "mmc", [BUS_USB] = "usb", [BUS_LOOP] = "loop",
		[BUS_VIRTUAL] = "virtual",
	};
	if ((unsigned)bus >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[bus];
}

void disk_roots_default(struct disk_roots *roots)
{
	const char *s = getenv("IMAGER_SYSFS_ROOT"), *d = getenv("IMAGER_DEV_ROOT");

	snprintf(roots->sysfs, sizeof(roots->sysfs), "%s", s && *s ? s : "/sys");
	snprintf(roots->dev, sizeof(roots->dev), "%s", d && *d ? d : "/dev");
}

/* s starts with prefix and the rest is one or more lowercase letters. */
static bool prefix_letters(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strncmp(s, prefix, n) || !s[n])
		return false;
	for (s += n; *s; s++)
		if (*s < 'a' || *s > 'z')
			return false;
	return true;
}

/* Advance past one or more digits; NULL when there are none. */
static const char *skip_digits(const char *s)
{
	if (!isdigit((unsigned char)*s))
		return NULL;
	while (isdigit((unsigned char)*s))
		s++;
	return s;
}

/* s is prefix followed by a number and nothing else. */
static bool prefix_number(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);
	const char *e;

	if (strncmp(s, prefix, n))
		return false;
	e = skip_digits(s + n);
	return e && !*e;
}

bool disk_name_known(const char *name)
{
	const char *e;

	if (prefix_letters(name, "sd") || prefix_letters(name, "hd") ||
	    prefix_letters(name, "vd") || prefix_letters(name, "xvd"))
		return true;
	if (!strncmp(name, "nvme", 4) && (e = skip_digits(name + 4)) && *e == 'n' &&
	    (e = skip_digits(e + 1)) && !*e)
		return true;
	return prefix_number(name, "mmcblk") || prefix_number(name, "md") ||
	       prefix_number(name, "nbd") || prefix_number(name, "loop") ||
	       prefix_number(name, "dm-");
}

bool disk_name_needs_p(const char *disk)
{
	size_t n = strlen(disk);
	return n && isdigit((unsigned char)disk[n - 1]);
}

int disk_partition_name(const char *disk, unsigned number, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s%s%u", disk, disk_name_needs_p(disk) ? "p" : "", number);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int disk_split_partition(const char *name, char *disk, size_t disklen, unsigned *number)
{
	size_t n = strlen(name), end = n;
	unsigned long num;
	char base[64];

	while (end && isdigit((unsigned char)name[end - 1]))
		end--;
	if (end == n || end == 0 || end >= sizeof(base) || n - end > 6)
		return -EINVAL;
	num = strtoul(name + end, NULL, 10);
	if (num == 0)
		return -EINVAL;
	memcpy(base, name, end);
	base[end] = '\0';
	/* "nvme0n1p2": the p belongs to the rule, the disk ends in a digit. */
	if (end >= 2 && base[end - 1] == 'p' && isdigit((unsigned char)base[end - 2]))
		base[end - 1] = '\0';
	else if (disk_name_needs_p(base))
		return -EINVAL;
	if (!disk_name_known(base) || strlen(base) >= disklen)
		return -EINVAL;
	strcpy(disk, base);
	*number = (unsigned)num;
	return 0;
}

/* Does some component of path match the test? */
static bool path_has(const char *path, bool (*match)(const char *comp, size_t len))
{
	const char *p = path;

	while (*p) {
		const char *slash;
		size_t len;
		while (*p == '/')
			p++;
		slash = strchr(p, '/');
		len = slash ? (size_t)(slash - p) : strlen(p);
		if (len && match(p, len))
			return true;
		if (!slash)
			break;
		p = slash;
	}
	return false;
}

static bool comp_prefix_num(const char *c, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	if (len <= n || strncmp(c, prefix, n))
		return false;
	for (size_t i = n; i < len; i++)
		if (!isdigit((unsigned char)c[i]))
			return false;
	return true;
}

static bool is_virtio(const char *c, size_t l) { return comp_prefix_num(c, l, "virtio"); }
static bool is_host(const char *c, size_t l) { return comp_prefix_num(c, l, "host"); }
static bool is_nvme(const char *c, size_t l)
{
	return (l == 4 && !strncmp(c, "nvme", 4)) || comp_prefix_num(c, l, "nvme") ||
	       (l >= 10 && !strncmp(c, "nvme-subsys", 11));
}
static bool is_usb(const char *c, size_t l) { return comp_prefix_num(c, l, "usb"); }
static bool is_ata(const char *c, size_t l) { return comp_prefix_num(c, l, "ata"); }
static bool is_mmc(const char *c, size_t l)
{
	return (l == 8 && !strncmp(c, "mmc_host", 8)) || comp_prefix_num(c, l, "mmc");
}
static bool is_xen(const char *c, size_t l)
{
	return comp_prefix_num(c, l, "vbd-") || (l == 3 && !strncmp(c, "xen", 3));
}

enum disk_bus disk_bus_from_sysfs_path(const char *devpath, const char *name)
{
	if (prefix_number(name, "loop"))
		return BUS_LOOP;
	if (prefix_number(name, "md") || prefix_number(name, "dm-") || prefix_number(name, "nbd"))
		return BUS_VIRTUAL;
	if (path_has(devpath, is_virtio))
		return path_has(devpath, is_host) ? BUS_VIRTIO_SCSI : BUS_VIRTIO_BLK;
	if (path_has(devpath, is_nvme))
		return BUS_NVME;
	if (path_has(devpath, is_usb))
		return BUS_USB;
	if (path_has(devpath, is_ata))
		return BUS_ATA;
	if (path_has(devpath, is_mmc))
		return BUS_MMC;
	if (path_has(devpath, is_xen))
		return BUS_XEN;
	if (path_has(devpath, is_host))
		return BUS_SCSI;
	return BUS_UNKNOWN;
}

/* Read a small sysfs attribute, trimmed.  Returns 0 or -errno. */
static int read_attr(const char *dir, const char *attr, char *buf, size_t len)
{
	char path[1200];
	size_t n;
	FILE *f;

	buf[0] = '\0';
	if (path_join(path, sizeof(path), dir, attr) < 0)
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	n = strspn(buf, " \t");
	memmove(buf, buf + n, strlen(buf + n) + 1);
	return 0;
}

static uint64_t read_attr_u64(const char *dir, const char *attr, uint64_t dflt)
{
	char buf[64], *end;
	unsigned long long v;

	if (read_attr(dir, attr, buf, sizeof(buf)) < 0 || !buf[0])
		return dflt;
	errno = 0;
	v = strtoull(buf, &end, 10);
	return errno || *end ? dflt : v;
}

static void probe_fs(const char *path, struct partition_desc *p)
{
	blkid_probe pr = blkid_new_probe_from_filename(path);
	const char *v;

	if (!pr)
		return;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_UUID | BLKID_SUBLKS_LABEL);
	if (blkid_do_safeprobe(pr) == 0) {
		if (!blkid_probe_lookup_value(pr, "TYPE", &v, NULL))
			snprintf(p->fstype, sizeof(p->fstype), "%s", v);
		if (!blkid_probe_lookup_value(pr, "UUID", &v, NULL))
			snprintf(p->uuid, sizeof(p->uuid), "%s", v);
		if (!blkid_probe_lookup_value(pr, "LABEL", &v, NULL))
			snprintf(p->label, sizeof(p->label), "%s", v);
	}
	blkid_free_probe(pr);
}

static void probe_table(const char *path, char *table, size_t len)
{
	blkid_probe pr = blkid_new_probe_from_filename(path);
	const char *v;

	snprintf(table, len, "none");
	if (!pr)
		return;
	blkid_probe_enable_superblocks(pr, 0);
	blkid_probe_enable_partitions(pr, 1);
	snprintf(table, len, "none");
	/* The names the rest of imager uses (libparted's): msdos, gpt. */
	if (blkid_do_safeprobe(pr) == 0 && !blkid_probe_lookup_value(pr, "PTTYPE", &v, NULL))
		snprintf(table, len, "%s", !strcmp(v, "dos") ? "msdos" : v);
	blkid_free_probe(pr);
}

static int cmp_part(const void *a, const void *b)
{
	const struct partition_desc *x = a, *y = b;
	return (x->number > y->number) - (x->number < y->number);
}

static int scan_partitions(const struct disk_roots *roots, const char *dir, struct disk_desc *d)
{
	DIR *dh = opendir(dir);
	struct dirent *de;

	if (!dh)
		return 0;
	while ((de = readdir(dh))) {
		char sub[1200], attr[1300];
		struct partition_desc *p, *grown;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		if (path_join(sub, sizeof(sub), dir, de->d_name) < 0 ||
		    path_join(attr, sizeof(attr), sub, "partition") < 0) {
			closedir(dh);
			return -ENAMETOOLONG;
		}
		if (stat(attr, &st) < 0)
			continue;
		grown = realloc(d->parts, (d->nparts + 1) * sizeof(*d->parts));
		if (!grown) {
			closedir(dh);
			return -ENOMEM;
		}
		d->parts = grown;
		p = &d->parts[d->nparts++];
		memset(p, 0, sizeof(*p));
		if (str_copy(p->name, sizeof(p->name), de->d_name) < 0 ||
		    path_join(p->path, sizeof(p->path), roots->dev, de->d_name) < 0) {
			closedir(dh);
			return -ENAMETOOLONG;
		}
		p->number = (unsigned)read_attr_u64(sub, "partition", 0);
		p->start = read_attr_u64(sub, "start", 0) * 512;   /* sysfs counts 512-byte sectors */
		p->size = read_attr_u64(sub, "size", 0) * 512;
		probe_fs(p->path, p);
	}
	closedir(dh);
	if (d->nparts)
		qsort(d->parts, d->nparts, sizeof(*d->parts), cmp_part);
	return 0;
}

static int cmp_disk(const void *a, const void *b)
{
	return strcmp(((const struct disk_desc *)a)->name, ((const struct disk_desc *)b)->name);
}

int disk_list(const struct disk_roots *roots, struct disk_desc **out, struct im_err *err)
{
	char blockdir[600];
	struct disk_desc *disks = NULL;
	size_t n = 0;
	struct dirent *de;
	DIR *dh;
	int r;

	if (path_join(blockdir, sizeof(blockdir), roots->sysfs, "block") < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: path too long", roots->sysfs);
	dh = opendir(blockdir);
	if (!dh)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "cannot read %s: %s", blockdir, strerror(errno));
	while ((de = readdir(dh))) {
		char dir[1200], real[PATH_MAX], buf[256];
		struct disk_desc *d, *grown;

		if (!disk_name_known(de->d_name))
			continue;
		if (path_join(dir, sizeof(dir), blockdir, de->d_name) < 0)
			continue;   /* (no kernel name is that long) */
		if (!strncmp(de->d_name, "loop", 4) && read_attr(dir, "loop/backing_file", buf, sizeof(buf)) < 0)
			continue;   /* an unbacked loop device is no disk */
		if (read_attr_u64(dir, "size", 0) == 0 && (!strncmp(de->d_name, "nbd", 3) ||
							   !strncmp(de->d_name, "md", 2)))
			continue;   /* not connected / not assembled */
		grown = realloc(disks, (n + 1) * sizeof(*disks));
		if (!grown) {
			closedir(dh);
			disk_list_free(disks, n);
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		}
		disks = grown;
		d = &disks[n++];
		memset(d, 0, sizeof(*d));
		if (str_copy(d->name, sizeof(d->name), de->d_name) < 0 ||
		    path_join(d->path, sizeof(d->path), roots->dev, de->d_name) < 0) {
			r = im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s/%s: path too long",
				    roots->dev, de->d_name);
			closedir(dh);
			disk_list_free(disks, n);
			return r;
		}
		d->size = read_attr_u64(dir, "size", 0) * 512;
		d->logical_sector_size = (unsigned)read_attr_u64(dir, "queue/logical_block_size", 512);
		d->physical_sector_size = (unsigned)read_attr_u64(dir, "queue/physical_block_size",
								  d->logical_sector_size);
		d->rotational = read_attr_u64(dir, "queue/rotational", 0) == 1;
		d->removable = read_attr_u64(dir, "removable", 0) == 1;
		read_attr(dir, "device/model", d->model, sizeof(d->model));
		if (read_attr(dir, "device/serial", d->serial, sizeof(d->serial)) < 0 || !d->serial[0])
			if (read_attr(dir, "serial", d->serial, sizeof(d->serial)) < 0 || !d->serial[0])
				read_attr(dir, "device/wwid", d->serial, sizeof(d->serial));
		if (!realpath(dir, real))
			snprintf(real, sizeof(real), "%s", dir);
		d->bus = disk_bus_from_sysfs_path(real, d->name);
		probe_table(d->path, d->table, sizeof(d->table));
		r = scan_partitions(roots, dir, d);
		if (r < 0) {
			closedir(dh);
			disk_list_free(disks, n);
			return r == -ENOMEM ? im_errf(err, IM_EXIT_INTERNAL, r, "out of memory") :
			       im_errf(err, IM_EXIT_USAGE, r, "%s: a partition's path is too long", d->path);
		}
	}
	closedir(dh);
	if (n)
		qsort(disks, n, sizeof(*disks), cmp_disk);
	*out = disks;
	return (int)n;
}

void disk_list_free(struct disk_desc *disks, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(disks[i].parts);
	free(disks);
}

/* Kernel name of a block device node, via sysfs/dev/block/MAJ:MIN.
 * Returns 0, or -ENAMETOOLONG when a name does not fit. */
static int block_sysname(const struct disk_roots *roots, dev_t rdev, const char *path,
			 char *name, size_t len, bool *is_partition)
{
	char link[700], real[PATH_MAX], attr[PATH_MAX + 16];
	const char *base;
	struct stat st;

	if (str_printf(link, sizeof(link), "%s/dev/block/%u:%u", roots->sysfs, major(rdev),
		       minor(rdev)) == 0 && realpath(link, real)) {
		base = strrchr(real, '/');
		FORWARD_ERR(str_copy(name, len, base ? base + 1 : real));
		FORWARD_ERR(path_join(attr, sizeof(attr), real, "partition"));
		*is_partition = stat(attr, &st) == 0;
		return 0;
	}
	base = strrchr(path, '/');
	FORWARD_ERR(str_copy(name, len, base ? base + 1 : path));
	{
		char disk[64];
		unsigned num;
		*is_partition = disk_split_partition(name, disk, sizeof(disk), &num) == 0;
	}
	return 0;
}

/* The file name at the end of ref->path, into ref->name. */
static int ref_file_name(struct disk_ref *ref, struct im_err *err)
{
	const char *base = strrchr(ref->path, '/');

	if (str_copy(ref->name, sizeof(ref->name), base ? base + 1 : ref->path) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: file name too long",
			       ref->path);
	return 0;
}

int disk_resolve(const struct disk_roots *roots, const char *name, struct disk_ref *ref,
		 struct im_err *err)
{
	struct stat st;
	int fd, r;

	memset(ref, 0, sizeof(*ref));
	if (!name || !*name)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL, "empty disk name");
	/* A path that does not fit is refused: cut, it would name another
	 * file (a target would be created there). */
	if (str_copy(ref->path, sizeof(ref->path), name) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG,
			       "%s: path too long (imager takes up to %zu bytes)", name,
			       sizeof(ref->path) - 1);
	if (!strchr(name, '/')) {
		/* A device name, unless it is none and names a file in the
		 * current folder. */
		char dev[sizeof(ref->path)];
		if (path_join(dev, sizeof(dev), roots->dev, name) == 0 &&
		    (stat(dev, &st) == 0 || (stat(name, &st) < 0 && disk_name_known(name))))
			memcpy(ref->path, dev, sizeof(dev));
	}
	{
		size_t n = strlen(roots->dev);
		ref->under_dev = !strncmp(ref->path, roots->dev, n) && ref->path[n] == '/';
	}
	if (stat(ref->path, &st) < 0 && errno == ENOTDIR) {
		/* PATH/DISK, a disk inside a VM's description (an OVA...):
		 * the backends tell (bk_open). */
		ref->kind = DISK_KIND_FILE;
		ref->exists = true;
		ref->logical_sector_size = 512;
		return ref_file_name(ref, err);
	}
	if (stat(ref->path, &st) < 0) {
		if (errno != ENOENT)
			return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", ref->path, strerror(errno));
		ref->kind = DISK_KIND_FILE;
		ref->exists = false;
		return ref_file_name(ref, err);
	}
	ref->exists = true;
	if (S_ISREG(st.st_mode)) {
		ref->kind = DISK_KIND_FILE;
		ref->size = (uint64_t)st.st_size;
		ref->logical_sector_size = 512;
		return ref_file_name(ref, err);
	}
	if (!S_ISBLK(st.st_mode))
		return im_errf(err, IM_EXIT_SOURCE, -ENOTBLK,
			       "%s is neither a block device nor a disk image file", ref->path);
	{
		bool part = false;
		if (block_sysname(roots, st.st_rdev, ref->path, ref->name, sizeof(ref->name), &part) < 0)
			return im_errf(err, IM_EXIT_SOURCE, -ENAMETOOLONG,
				       "%s: its kernel name is too long", ref->path);
		ref->kind = part ? DISK_KIND_PARTITION : DISK_KIND_BLOCK;
	}
	fd = open(ref->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", ref->path, strerror(errno));
	r = util_fd_geometry(fd, &ref->size, &ref->logical_sector_size);
	close(fd);
	if (r < 0)
		return im_errf(err, IM_EXIT_SOURCE, r, "%s: cannot read its size: %s", ref->path, strerror(-r));
	return 0;
}

/* Is a device number mounted (mountinfo's maj:min, or its source path)?
 * rw_only: only a read-write mount counts (its per-mount options start
 * "rw"), and swap does not. */
static int mounted_devnum(dev_t dev, const char *path, bool rw_only, char *what, size_t whatlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	char real[PATH_MAX];
	bool have_real = realpath(path, real) != NULL;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned ma, mi;
		char mnt[1024], opts[256], *sep;
		if (sscanf(line, "%*u %*u %u:%u %*s %1023s %255s", &ma, &mi, mnt, opts) != 4)
			continue;
		if (rw_only && strncmp(opts, "rw", 2) != 0)
			continue;
		sep = strstr(line, " - ");
		if ((ma == major(dev) && mi == minor(dev)) ||
		    (have_real && sep && strstr(sep, real) &&
		     strchr(" \t", *(strstr(sep, real) + strlen(real))))) {
			snprintf(what, whatlen, "mounted on %s", mnt);
			fclose(f);
			return 1;
		}
	}
	fclose(f);
	f = rw_only ? NULL : fopen("/proc/swaps", "re");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			char dev_path[1024];
			struct stat st;
			if (sscanf(line, "%1023s", dev_path) == 1 && stat(dev_path, &st) == 0 &&
			    S_ISBLK(st.st_mode) && st.st_rdev == dev) {
				snprintf(what, whatlen, "in use as swap");
				fclose(f);
				return 1;
			}
		}
		fclose(f);
	}
	return 0;
}

/* Is path (a block device) or one of its partitions mounted (read-write
 * only, with rw_only)?  1 with what filled, 0, or -errno. */
static int mounted_or_parts(const struct disk_roots *roots, const char *path, bool rw_only,
			    char *what, size_t whatlen)
{
	char link[700], real[PATH_MAX];
	struct stat st;
	DIR *dh;

	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISBLK(st.st_mode))
		return 0;
	if (mounted_devnum(st.st_rdev, path, rw_only, what, whatlen))
		return 1;
	/* Its partitions. */
	snprintf(link, sizeof(link), "%s/dev/block/%u:%u", roots->sysfs, major(st.st_rdev),
		 minor(st.st_rdev));
	if (realpath(link, real) && (dh = opendir(real))) {
		struct dirent *de;
		while ((de = readdir(dh))) {
			char attr[PATH_MAX + 300], buf[64];
			unsigned ma, mi;
			int n;
			if (de->d_name[0] == '.')
				continue;
			if (path_join(attr, sizeof(attr), real, de->d_name) < 0 ||
			    read_attr(attr, "partition", buf, sizeof(buf)) < 0 ||
			    read_attr(attr, "dev", buf, sizeof(buf)) < 0 ||
			    sscanf(buf, "%u:%u", &ma, &mi) != 2)
				continue;
			if (path_join(attr, sizeof(attr), roots->dev, de->d_name) < 0)
				continue;   /* (no node of ours: /dev's names are short) */
			n = mounted_devnum(makedev(ma, mi), attr, rw_only, what, whatlen);
			if (n) {
				char part[400];
				snprintf(part, sizeof(part), "%s: %s", de->d_name, what);
				snprintf(what, whatlen, "%s", part);
				closedir(dh);
				return 1;
			}
		}
		closedir(dh);
	}
	return 0;
}

int disk_mounted_rw(const struct disk_roots *roots, const char *path, char *what, size_t whatlen)
{
	return mounted_or_parts(roots, path, true, what, whatlen);
}

int disk_in_use(const struct disk_roots *roots, const char *path, char *what, size_t whatlen)
{
	int fd, r = mounted_or_parts(roots, path, false, what, whatlen);
	struct stat st;

	if (r != 0 || stat(path, &st) < 0 || !S_ISBLK(st.st_mode))
		return r;
	/* Held by something else (device mapper, md, another exclusive opener). */
	fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (fd < 0 && errno == EBUSY) {
		snprintf(what, whatlen, "busy (held by another user: a mount, LVM, RAID or a program)");
		return 1;
	}
	if (fd >= 0)
		close(fd);
	return 0;
}
