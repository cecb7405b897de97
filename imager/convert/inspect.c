/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The quick inspection of a Linux guest (convert-int.h): what the plan
 * needs and nothing more, in a handful of appliance calls, where
 * libguestfs's own inspection looks at every filesystem for every system it
 * knows (about 10 s under TCG on a one-disk Debian guest).
 *
 * It answers only when the answer is plain, and leaves every other guest
 * to guestfs_inspect_os() as before:
 *   - every filesystem is ext2/3/4, XFS, btrfs, swap, FAT or unknown (no
 *     NTFS, which may hold Windows);
 *   - exactly one of them, mounted read-only, has /etc and an os-release
 *     (a btrfs as mounting it shows it: its default subvolume, where SUSE
 *     keeps the root; a root in another subvolume, as Ubuntu's @ under a
 *     default top level, is the full inspection's);
 *   - its fstab's entries for /, /boot, /usr, /etc, /lib and /var name
 *     filesystems found here (by UUID=, LABEL=, PARTUUID=, PARTLABEL=, their
 *     /dev/disk/by-* links, an LVM name or a disk name), each once; a btrfs
 *     entry with subvol=PATH becomes libguestfs's btrfsvol:DEVICE/PATH (not
 *     for /, and not by subvolid=).
 * Everything read from the guest is hostile: the parsers are convtext.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "convert-int.h"

#define QI_MAXFS 128
#define QI_MAXENT 128

struct qfs {
	const char *dev;          /* the device (owned by the lists) */
	const char *type;         /* blkid's TYPE ("LVM2_member", "ext4"), "" none */
	char **tags;              /* blkid's answer: key, value, ..., NULL */
};

static bool one_of(const char *s, const char *const *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, set[i]))
			return true;
	return false;
}

static const char *const root_types[] = { "ext2", "ext3", "ext4", "xfs", "btrfs" };
#define NROOT_TYPES (sizeof(root_types) / sizeof(root_types[0]))

/* The guest's os-release (realpath inside the guest: /etc/os-release is
 * usually a relative link to /usr/lib/os-release); NULL when none. */
static char *read_osrelease(guestfs_h *g, size_t *len)
{
	static const char *const paths[] = { "/etc/os-release", "/usr/lib/os-release" };

	for (size_t i = 0; i < 2; i++) {
		char *rp = guestfs_realpath(g, paths[i]), *d = NULL;
		if (rp && gx_is_file(g, rp))
			d = gx_read(g, rp, len, NULL);
		free(rp);
		if (d)
			return d;
	}
	return NULL;
}

/* Does dev, mounted read-only on /, hold a Linux root?  Its os-release
 * (malloc'ed) when it does, else NULL.  Left unmounted. */
static char *linux_root(guestfs_h *g, const char *dev, size_t *len)
{
	char *d = NULL;

	if (guestfs_mount_ro(g, dev, "/") == -1)
		return NULL;
	if (gx_is_dir(g, "/etc"))
		d = read_osrelease(g, len);
	guestfs_umount_all(g);
	return d;
}

static const char *tag(const struct qfs *f, const char *key)
{
	for (size_t i = 0; f->tags && f->tags[i] && f->tags[i + 1]; i += 2)
		if (!strcmp(f->tags[i], key))
			return f->tags[i + 1];
	return NULL;
}

/* A filesystem by one of blkid's tags (UUIDs in any case). */
static const struct qfs *by_tag(const struct qfs *fs, size_t n, const char *key, const char *v)
{
	bool uuid = strstr(key, "UUID") != NULL;

	for (size_t i = 0; i < n; i++) {
		const char *t = tag(&fs[i], key);
		if (t && *t && (uuid ? !strcasecmp(t, v) : !strcmp(t, v)))
			return &fs[i];
	}
	return NULL;
}

static const struct qfs *by_dev(const struct qfs *fs, size_t n, const char *dev)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(fs[i].dev, dev))
			return &fs[i];
	return NULL;
}

/* The filesystem an fstab spec names, or NULL. */
static const struct qfs *resolve(const struct conv_ctx *c, const struct qfs *fs, size_t n,
				 const char *spec)
{
	static const struct { const char *prefix, *key; } tags[] = {
		{ "UUID=", "UUID" }, { "LABEL=", "LABEL" },
		{ "PARTUUID=", "PART_ENTRY_UUID" }, { "PARTLABEL=", "PART_ENTRY_NAME" },
		{ "/dev/disk/by-uuid/", "UUID" }, { "/dev/disk/by-label/", "LABEL" },
		{ "/dev/disk/by-partuuid/", "PART_ENTRY_UUID" },
		{ "/dev/disk/by-partlabel/", "PART_ENTRY_NAME" },
	};
	char v[256];

	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
		size_t pl = strlen(tags[i].prefix), vl;
		if (strncmp(spec, tags[i].prefix, pl))
			continue;
		snprintf(v, sizeof(v), "%s", spec + pl);
		vl = strlen(v);
		if (vl >= 2 && (v[0] == '"' || v[0] == '\'') && v[vl - 1] == v[0]) {
			memmove(v, v + 1, vl - 2);
			v[vl - 2] = 0;
		}
		return *v ? by_tag(fs, n, tags[i].key, v) : NULL;
	}
	if (!strncmp(spec, "/dev/mapper/", 12)) {
		/* VG-LV, with each '-' of a name doubled */
		const char *s = spec + 12;
		size_t o = snprintf(v, sizeof(v), "/dev/");
		bool split = false;
		for (; *s && o + 2 < sizeof(v); s++) {
			if (*s == '-' && s[1] == '-') {
				v[o++] = '-';
				s++;
			} else if (*s == '-' && !split) {
				v[o++] = '/';
				split = true;
			} else {
				v[o++] = *s;
			}
		}
		v[o] = 0;
		return split && !*s ? by_dev(fs, n, v) : NULL;
	}
	struct devref d;
	if (devname_parse(spec, strlen(spec), &d) && d.len == strlen(spec)) {
		if (!d.part || d.disk >= c->ndevices)
			return NULL;
		snprintf(v, sizeof(v), "%s%u", c->devices[d.disk], d.part);
		return by_dev(fs, n, v);
	}
	return by_dev(fs, n, spec);   /* /dev/VG/LV */
}

/* Mount points whose filesystem the plan needs: one that cannot be found
 * sends the guest to the full inspection. */
static bool needed(const char *mp)
{
	static const char *const dirs[] = { "/boot", "/usr", "/etc", "/lib", "/var" };

	if (!strcmp(mp, "/"))
		return true;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		size_t l = strlen(dirs[i]);
		if (!strncmp(mp, dirs[i], l) && (mp[l] == 0 || mp[l] == '/'))
			return true;
	}
	return false;
}

/* Types that are never a filesystem on the guest's disks. */
static bool not_a_disk(const char *type, const char *spec)
{
	static const char *const t[] = { "swap", "none", "proc", "sysfs", "tmpfs", "devtmpfs",
					 "devpts", "nfs", "nfs4", "cifs", "smbfs", "sshfs",
					 "iso9660", "udf", "auto", "bind", "efivarfs", "securityfs",
					 "cgroup", "cgroup2", "debugfs", "hugetlbfs", "mqueue" };
	return one_of(type, t, sizeof(t) / sizeof(t[0])) || !strncmp(type, "fuse", 4) ||
	       (spec[0] != '/' && !strchr(spec, '='));
}

static const char *distro_name(const char *id)
{
	static const struct { const char *id, *name; } map[] = {
		{ "debian", "debian" }, { "ubuntu", "ubuntu" }, { "fedora", "fedora" },
		{ "rhel", "rhel" }, { "centos", "centos" }, { "rocky", "rocky" },
		{ "almalinux", "alma" }, { "ol", "oraclelinux" }, { "sles", "sles" },
		{ "sled", "sles" }, { "arch", "archlinux" }, { "alpine", "alpinelinux" },
		{ "gentoo", "gentoo" }, { "mageia", "mageia" }, { "linuxmint", "linuxmint" },
		{ "kali", "kalilinux" }, { "void", "voidlinux" }, { "amzn", "amazonlinux" },
	};

	if (!strncmp(id, "opensuse", 8))
		return "opensuse";
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(id, map[i].id))
			return map[i].name;
	return "unknown";
}

/* The report's facts from the root's os-release (the root mounted
 * read-only on /, for debian_version). */
static void root_facts(struct conv_ctx *c, const char *osrelease, size_t osrlen)
{
	struct conv_report *rep = c->rep;
	struct osrel o;
	size_t len = 0;
	char *d;

	osrel_parse(osrelease, osrlen, &o);
	snprintf(rep->os_type, sizeof(rep->os_type), "linux");
	snprintf(rep->distro, sizeof(rep->distro), "%s", distro_name(o.id));
	snprintf(rep->product, sizeof(rep->product), "%s", o.pretty[0] ? o.pretty : o.id);
	if (!version_parse(o.version_id, strlen(o.version_id), &rep->major, &rep->minor))
		rep->major = rep->minor = 0;
	/* Debian's point release is only in debian_version ("12.15"). */
	if (!strcmp(o.id, "debian") && gx_is_file(c->g, "/etc/debian_version") &&
	    (d = gx_read(c->g, "/etc/debian_version", &len, NULL))) {
		int ma, mi;
		if (version_parse(d, len, &ma, &mi) && ma == rep->major)
			rep->minor = mi;
		free(d);
	}
}

void conv_guess_arch(struct conv_ctx *c)
{
	static const char *const bins[] = { "/bin/sh", "/usr/bin/sh", "/bin/bash", "/sbin/init",
					    "/usr/lib/systemd/systemd" };

	for (size_t i = 0; i < sizeof(bins) / sizeof(bins[0]) && !c->rep->arch[0]; i++) {
		char *rp = guestfs_realpath(c->g, bins[i]), *h = NULL;
		size_t n = 0;
		if (rp && gx_is_file(c->g, rp))
			h = guestfs_pread(c->g, rp, 20, 0, &n);
		const char *a = h ? elf_arch((const unsigned char *)h, n) : NULL;
		if (a)
			snprintf(c->rep->arch, sizeof(c->rep->arch), "%s", a);
		free(h);
		free(rp);
	}
}

/* What to mount for fstab entry e on filesystem f, into dev: f's device,
 * or for a btrfs subvolume (subvol=PATH) libguestfs's
 * btrfsvol:DEVICE/PATH.  -1 when the quick way cannot tell: the root in a
 * named subvolume, a subvolume by number, a path it will not take. */
static int btrfs_mountable(const struct qfs *f, const struct fstab_ent *e, char *dev, size_t len)
{
	char v[256];
	const char *p = v;

	snprintf(dev, len, "%s", f->dev);
	if (strcmp(f->type, "btrfs"))
		return 0;
	if (fstab_opt(e->opts, "subvolid", NULL, 0))
		return -1;
	if (!fstab_opt(e->opts, "subvol", v, sizeof(v)))
		return 0;
	while (*p == '/')
		p++;
	if (!*p || !strcmp(e->file, "/") || strlen(v) >= sizeof(v) - 1 || strstr(p, "..") ||
	    strpbrk(p, " \t\n,"))
		return -1;
	if ((size_t)snprintf(dev, len, "btrfsvol:%s/%s", f->dev, p) >= len)
		return -1;
	return 0;
}

/* The mount points as guestfs_inspect_get_mountpoints gives them (mount
 * point, device, ..., NULL), from the root's fstab, and the report's facts
 * (root_facts) when they are all found; 0 when it needs the full
 * inspection (nothing filled). */
static int mountpoints(struct conv_ctx *c, const struct qfs *fs, size_t n, const char *root,
		       const char *osrelease, size_t osrlen, char ***out)
{
	struct fstab_ent *e = calloc(QI_MAXENT, sizeof(*e));
	char **mp = calloc(2 * QI_MAXENT + 3, sizeof(char *));
	size_t ne = 0, nm = 0, len = 0;
	char *text = NULL;
	int r = 1;

	if (!e || !mp) {
		r = im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto out;
	}
	if (guestfs_mount_ro(c->g, root, "/") == -1) {
		r = 0;
		goto out;
	}
	if (gx_is_file(c->g, "/etc/fstab") && !(text = gx_read(c->g, "/etc/fstab", &len, NULL))) {
		r = 0;
		goto umount;
	}
	ne = text ? fstab_parse(text, len, e, QI_MAXENT) : 0;
	if (ne > QI_MAXENT) {
		r = 0;
		goto umount;
	}
	for (size_t i = 0; i < ne && r == 1; i++) {
		const struct qfs *f;
		if (e[i].file[0] != '/' || not_a_disk(e[i].type, e[i].spec))
			continue;
		f = resolve(c, fs, n, e[i].spec);
		if (f && !one_of(f->type, root_types, NROOT_TYPES) && strcmp(f->type, "vfat"))
			f = NULL;   /* a PV, a swap, nothing: not a filesystem to mount */
		char dev[400];
		if (f && btrfs_mountable(f, &e[i], dev, sizeof(dev)) < 0)
			f = NULL;
		if (!f) {
			if (needed(e[i].file))
				r = 0;
			continue;
		}
		for (size_t j = 0; j < nm; j++)
			if (!strcmp(mp[2 * j], e[i].file) || !strcmp(mp[2 * j + 1], dev))
				r = 0;   /* twice: the full inspection decides */
		if (!strcmp(e[i].file, "/") && strcmp(dev, root))
			r = 0;   /* fstab's root is another filesystem */
		if (r == 1 && (!(mp[2 * nm] = strdup(e[i].file)) || !(mp[2 * nm + 1] = strdup(dev))))
			r = im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		else if (r == 1)
			nm++;
	}
	if (r == 1) {
		bool has_root = false;
		for (size_t j = 0; j < nm; j++)
			has_root |= !strcmp(mp[2 * j], "/");
		if (!has_root && (!(mp[2 * nm] = strdup("/")) || !(mp[2 * nm + 1] = strdup(root))))
			r = im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	if (r == 1)
		root_facts(c, osrelease, osrlen);
umount:
	guestfs_umount_all(c->g);
out:
	free(text);
	free(e);
	if (r == 1)
		*out = mp;
	else
		gx_strings_free(mp);
	return r;
}

/* blkid's TYPE for a device (its tags kept in f): "" when blkid finds
 * nothing there (a BIOS boot or extended partition). */
static void probe(guestfs_h *g, struct qfs *f, const char *dev)
{
	f->dev = dev;
	f->tags = guestfs_blkid(g, dev);
	f->type = tag(f, "TYPE");
	if (!f->type)
		f->type = "";
}

static const char *const ok_types[] = { "ext2", "ext3", "ext4", "xfs", "btrfs", "swap", "vfat",
					"", "LVM2_member" };

/* Probe dev into the next place: false when the list is full or it holds
 * what needs the full inspection (btrfs, NTFS, RAID, LUKS...). */
static bool add(guestfs_h *g, struct qfs *fs, size_t *n, const char *dev, bool *pv)
{
	if (*n >= QI_MAXFS)
		return false;
	probe(g, &fs[*n], dev);
	*pv |= !strcmp(fs[*n].type, "LVM2_member");
	return one_of(fs[(*n)++].type, ok_types, sizeof(ok_types) / sizeof(ok_types[0]));
}

/* Filesystems on the whole disks, the partitions and the LVs, without
 * guestfs_list_filesystems() (5 to 8 s under TCG: it probes for every kind
 * of volume manager); 0 when some volume needs the full inspection.  *lvs
 * is the LV list when there are PVs (freed by the caller). */
static int list_fs(struct conv_ctx *c, char **parts, char ***lvs, struct qfs *fs, size_t *n)
{
	guestfs_h *g = c->g;
	bool pv = false;

	*n = 0;
	for (size_t d = 0; d < c->ndevices; d++) {
		size_t dl = strlen(c->devices[d]);
		bool has_parts = false;
		for (size_t i = 0; parts[i]; i++)
			has_parts |= !strncmp(parts[i], c->devices[d], dl);
		if (!has_parts && !add(g, fs, n, c->devices[d], &pv))
			return 0;
	}
	for (size_t i = 0; parts[i]; i++)
		if (!add(g, fs, n, parts[i], &pv))
			return 0;
	if (!pv)
		return 1;
	if (!(*lvs = guestfs_lvs(g)))
		return 0;
	for (size_t i = 0; (*lvs)[i]; i++)
		if (!add(g, fs, n, (*lvs)[i], &pv))
			return 0;
	return 1;
}

int conv_quick_inspect(struct conv_ctx *c, char **root, char ***mp)
{
	guestfs_h *g = c->g;
	char **parts = NULL, **lvs = NULL, **md = NULL;
	struct qfs *fs = NULL;
	size_t n = 0, nroots = 0, osrlen = 0;
	const char *found = NULL;
	char *osrelease = NULL;
	int r = 0;

	*root = NULL;
	*mp = NULL;
	if (!(parts = guestfs_list_partitions(g)) || !(md = guestfs_list_md_devices(g)) || md[0] ||
	    !(fs = calloc(QI_MAXFS, sizeof(*fs))) || list_fs(c, parts, &lvs, fs, &n) != 1)
		goto out;
	for (size_t i = 0; i < n; i++) {
		size_t len = 0;
		char *d;
		if (!one_of(fs[i].type, root_types, NROOT_TYPES) || !(d = linux_root(g, fs[i].dev, &len)))
			continue;
		free(osrelease);
		osrelease = d;
		osrlen = len;
		found = fs[i].dev;
		nroots++;
	}
	if (nroots != 1)
		goto out;
	if ((r = mountpoints(c, fs, n, found, osrelease, osrlen, mp)) == 1 &&
	    !(*root = strdup(found))) {
		gx_strings_free(*mp);
		*mp = NULL;
		r = im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
out:
	free(osrelease);
	for (size_t i = 0; fs && i < n; i++)
		gx_strings_free(fs[i].tags);
	free(fs);
	gx_strings_free(parts);
	gx_strings_free(lvs);
	gx_strings_free(md);
	return r;
}
