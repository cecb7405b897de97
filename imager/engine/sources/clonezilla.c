/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Clonezilla image folders (contract and the folder's facts in
 * include/imager/clonezilla.h; what the files share in clonezilla-int.h):
 * reading the folder, its disk, its partition table, its partitions'
 * streams' names and its LVM.  Every file of the folder is hostile input:
 * names, numbers and sizes are checked before use.
 */
#include "imager/clonezilla.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imager/lvmfmt.h"
#include "imager/ptable.h"
#include "clonezilla-int.h"
#include "util.h"

#define MiB (1ull << 20)

/* A file of the folder of at most max bytes, malloc'ed and NUL-terminated;
 * -ENOENT (err untouched) when absent. */
int cz_read_file(const char *dir, const char *name, uint64_t max, unsigned char **buf,
		 size_t *len, struct im_err *err)
{
	char p[4200];
	size_t n;
	int r;

	if (path_join(p, sizeof(p), dir, name) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s/%s: name too long", dir, name);
	r = util_read_whole_file(p, buf, len ? len : &n, max);
	if (r == -EFBIG)
		return im_errf(err, IM_EXIT_DAMAGED, r, "%s: larger than %llu bytes", p,
			       (unsigned long long)max);
	if (r < 0 && r != -ENOENT)
		return im_errf(err, IM_EXIT_SOURCE, r, "%s: %s", p, strerror(-r));
	return r;
}

/* A small text file of the folder into buf (NUL-terminated). */
static int read_small(const char *dir, const char *name, char *buf, size_t cap,
		      struct im_err *err)
{
	unsigned char *b;
	size_t n;
	int r = cz_read_file(dir, name, cap - 1, &b, &n, err);

	if (r < 0)
		return r;
	memcpy(buf, b, n + 1);
	free(b);
	return 0;
}

/* A device or partition name as Clonezilla writes them: letters, digits,
 * '-' and '_' only (so that it can be part of a file name safely). */
static bool name_ok(const char *s)
{
	if (!*s || strlen(s) >= 64)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_')
			return false;
	return true;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;
	while (*s == ' ')
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || (*end && *end != ',' && *end != ' ' && *end != '\n'))
		return -EINVAL;
	*v = x;
	return 0;
}

/* The trailing partition number of a name ("sda1" 1, "nvme0n1p12" 12). */
static unsigned part_number(const char *name)
{
	size_t n = strlen(name);
	while (n && isdigit((unsigned char)name[n - 1]))
		n--;
	return (unsigned)strtoul(name + n, NULL, 10);
}

/* DISK-pt.sf: the label, the sector size, and each partition's place. */
static int parse_sf(const char *dir, struct cz_image *cz, uint64_t *last_lba, struct im_err *err)
{
	static char buf[1 << 16];
	char name[128], *line, *save = NULL;
	int r;

	snprintf(name, sizeof(name), "%s-pt.sf", cz->disk);
	r = read_small(dir, name, buf, sizeof(buf), err);
	if (r == -ENOENT)
		return im_errf(err, IM_EXIT_DAMAGED, -ENOENT,
			       "%s: no %s: not a complete Clonezilla image", dir, name);
	if (r < 0)
		return r;
	cz->lss = 512;
	*last_lba = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "label: ", 7)) {
			if (!strcmp(line + 7, "gpt"))
				strcpy(cz->table, "gpt");
			else if (!strcmp(line + 7, "dos"))
				strcpy(cz->table, "msdos");
			else
				return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
					       "%s: partition table '%.20s' (dos and gpt are supported)",
					       name, line + 7);
		} else if (!strncmp(line, "sector-size: ", 13)) {
			uint64_t v;
			if (parse_u64(line + 13, &v) || (v != 512 && v != 4096))
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: bad sector size",
					       name);
			cz->lss = (unsigned)v;
		} else if (!strncmp(line, "last-lba: ", 10)) {
			if (parse_u64(line + 10, last_lba))
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: bad last-lba", name);
		} else if (!strncmp(line, "/dev/", 5)) {
			char *colon = strstr(line, " : "), *st, *sz, *ty;
			char pname[128];
			struct cz_part *p;
			uint64_t start, size;

			if (!cz->table[0])
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					       "%s: a partition line before the label line", name);
			if (!colon || (size_t)(colon - line - 5) >= sizeof(pname))
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: bad line '%.60s'",
					       name, line);
			memcpy(pname, line + 5, (size_t)(colon - line - 5));
			pname[colon - line - 5] = '\0';
			st = strstr(colon, "start=");
			sz = strstr(colon, "size=");
			if (!name_ok(pname) || !st || !sz || parse_u64(st + 6, &start) ||
			    parse_u64(sz + 5, &size))
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: bad line '%.60s'",
					       name, line);
			if (cz->nparts == CZ_MAX_PARTS)
				return im_errf(err, IM_EXIT_UNSUPP, -E2BIG, "%s: more than %d partitions",
					       name, CZ_MAX_PARTS);
			if (size == 0)
				continue;  /* an empty slot */
			if (start > (UINT64_MAX >> 13) || size > (UINT64_MAX >> 13))
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: %s: out of range",
					       name, pname);
			ty = strstr(colon, "type=");
			if (!strcmp(cz->table, "msdos") &&
			    (start > 0xFFFFFFFFull || size > 0xFFFFFFFFull - start))
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					       "%s: %s: past what an MBR can hold", name, pname);
			if (!strcmp(cz->table, "msdos")) {
				char *end;
				unsigned long t = ty ? strtoul(ty + 5, &end, 16) : 256;
				if (t > 255 || end == ty + 5 || (*end && *end != ',' && *end != ' '))
					return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
						       "%s: %s: no MBR type", name, pname);
				if (t == 0x05 || t == 0x0f || t == 0x85) {
					if (cz->ext_size)
						return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
							       "%s: two extended partitions", name);
					if (str_copy(cz->ext_name, sizeof(cz->ext_name), pname) < 0)
						return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
							       "%s: partition name %.80s...: too long", name, pname);
					cz->ext_number = part_number(pname);
					cz->ext_type = (unsigned char)t;
					cz->ext_start = start * cz->lss;
					cz->ext_size = size * cz->lss;
					continue;
				}
				p = &cz->parts[cz->nparts];
				p->mbr_type = (unsigned char)t;
				p->bootable = strstr(colon, "bootable") != NULL;
			}
			p = &cz->parts[cz->nparts++];
			if (str_copy(p->name, sizeof(p->name), pname) < 0)
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					       "%s: partition name %.80s...: too long", name, pname);
			p->number = part_number(pname);
			p->start = start * cz->lss;
			p->size = size * cz->lss;
		}
	}
	if (!cz->table[0])
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: no label line", name);
	return 0;
}

/* Find PART's stream in the folder: PART.FS-ptcl-img.COMP with its split
 * parts, or swappt-PART.info. */
static int find_stream(const char *dir, struct cz_part *p, struct im_err *err)
{
	char prefix[80], info[100], first[256] = "";
	size_t plen;
	unsigned nsplit = 0, nwhole = 0;
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", dir, strerror(errno));
	snprintf(prefix, sizeof(prefix), "%s.", p->name);
	snprintf(info, sizeof(info), "swappt-%s.info", p->name);
	plen = strlen(prefix);
	while ((e = readdir(d))) {
		const char *n = e->d_name, *dash, *comp;
		if (!strcmp(n, info)) {
			p->kind = CZ_SWAP;
			snprintf(p->stream, sizeof(p->stream), "%s", n);
			continue;
		}
		if (strncmp(n, prefix, plen))
			continue;
		if (strstr(n, ".aufs"))
			return closedir(d), im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
						    "%s: %s: Clonezilla's aufs streams are not supported",
						    dir, n);
		/* FS-ptcl-img (partclone; dd-ptcl-img: partclone.dd), or the
		 * older ntfs-img (ntfsclone --save-image) and dd-img (dd). */
		const char *rest = n + plen, *after;
		enum cz_kind kind;
		size_t fl;
		if ((dash = strstr(rest, "-ptcl-img"))) {
			fl = (size_t)(dash - rest);
			after = dash + 9;
			kind = fl == 2 && !strncmp(rest, "dd", 2) ? CZ_DD : CZ_PTCL;
		} else if (!strncmp(rest, "ntfs-img", 8)) {
			fl = 4;
			after = rest + 8;
			kind = CZ_NTFSCLONE;
		} else if (!strncmp(rest, "dd-img", 6)) {
			fl = 2;
			after = rest + 6;
			kind = CZ_DD;
		} else {
			continue;
		}
		if (strlen(n) >= sizeof(first) || fl == 0 || fl >= sizeof(p->fs) ||
		    (*after && *after != '.'))
			continue;
		comp = *after ? after + 1 : "uncomp";
		{
			size_t cl = strcspn(comp, ".");
			if (cl == 0 || cl >= sizeof(p->comp))
				continue;
			memcpy(p->fs, rest, fl);
			p->fs[fl] = '\0';
			memcpy(p->comp, comp, cl);
			p->comp[cl] = '\0';
			p->kind = kind;
			if (comp[cl] == '.')
				nsplit++;
			else
				nwhole++;
			{
				struct stat st;
				if (fstatat(dirfd(d), n, &st, 0) == 0)
					p->bytes += (uint64_t)st.st_size;
			}
			if (!first[0] || strcmp(n, first) < 0)
				snprintf(first, sizeof(first), "%s", n);
		}
	}
	closedir(d);
	if (nwhole + nsplit == 0)
		return 0;
	if (nwhole > 1 || (nwhole && nsplit))
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
			       "%s: partition %s has more than one image stream", dir, p->name);
	if (nsplit > CZ_MAX_FILES)
		return im_errf(err, IM_EXIT_UNSUPP, -E2BIG, "%s: %s: more than %d parts", dir, p->name,
			       CZ_MAX_FILES);
	if (strcmp(p->comp, "gz") && strcmp(p->comp, "bz2") && strcmp(p->comp, "xz") &&
	    strcmp(p->comp, "zst") && strcmp(p->comp, "lz4") && strcmp(p->comp, "lzo") &&
	    strcmp(p->comp, "uncomp") && strcmp(p->comp, "lzma") && strcmp(p->comp, "lzip"))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "%s: %s: compression '%s' is not supported",
			       dir, first, p->comp);
	p->nfiles = nsplit ? nsplit : 1;
	snprintf(p->stream, sizeof(p->stream), "%s", first);
	return 0;
}

/* swappt-PART.info: UUID="..." and LABEL="..." lines. */
static int read_swap_info(const char *dir, struct cz_part *p, struct im_err *err)
{
	char buf[1024], *u, *l;
	int r = read_small(dir, p->stream, buf, sizeof(buf), err);
	if (r < 0)
		return r;
	u = strstr(buf, "UUID=\"");
	l = strstr(buf, "LABEL=\"");
	if (u) {
		size_t n = strcspn(u + 6, "\"");
		if (n != 36 || u[6 + n] != '"')
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: bad UUID", p->stream);
		memcpy(p->swap_uuid, u + 6, 36);
		for (int i = 0; i < 36; i++)
			if ((i == 8 || i == 13 || i == 18 || i == 23) ? p->swap_uuid[i] != '-'
								       : !isxdigit((unsigned char)p->swap_uuid[i]))
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: bad UUID",
					       p->stream);
	}
	if (l) {
		size_t n = strcspn(l + 7, "\"");
		if (n > 16)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: label too long", p->stream);
		memcpy(p->swap_label, l + 7, n);
	}
	snprintf(p->fs, sizeof(p->fs), "swap");
	return 0;
}

/* An MBR's numbers: primaries 1 to 4, the extended partition among them;
 * logical partitions 5 and up inside it, in disk order, each with room for
 * its EBR before it. */
static int check_logical(const char *dir, struct cz_image *cz, struct im_err *err)
{
	uint64_t prev_end = cz->ext_start;
	unsigned prev_number = 4;
	bool primary[5] = { false };

	if (strcmp(cz->table, "msdos"))
		return 0;
	if (cz->ext_size) {
		if (cz->ext_number < 1 || cz->ext_number > 4)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				       "%s: extended partition %s is not numbered 1 to 4", dir,
				       cz->ext_name);
		primary[cz->ext_number] = true;
	}
	for (size_t i = 0; i < cz->nparts; i++) {
		struct cz_part *p = &cz->parts[i];
		if (p->number >= 1 && p->number <= 4) {
			if (primary[p->number])
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					       "%s: two partitions numbered %u", dir, p->number);
			primary[p->number] = true;
			if (cz->ext_size && p->start < cz->ext_start + cz->ext_size &&
			    cz->ext_start < p->start + p->size)
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					       "%s: partitions %s and %s overlap", dir, cz->ext_name,
					       p->name);
			continue;
		}
		if (p->number < 5)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: %s has no partition number",
				       dir, p->name);
		if (!cz->ext_size)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				       "%s: logical partition %s but no extended partition", dir, p->name);
		if (p->start < cz->ext_start || p->start + p->size > cz->ext_start + cz->ext_size)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				       "%s: logical partition %s lies outside extended partition %s", dir,
				       p->name, cz->ext_name);
		if (p->number <= prev_number || p->start <= prev_end)
			return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				       "%s: logical partition %s is out of disk order or has no room for its EBR",
				       dir, p->name);
		if (p->number - prev_number != 1)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				       "%s: logical partitions are numbered with a gap before %s", dir,
				       p->name);
		p->logical = true;
		prev_number = p->number;
		prev_end = p->start + p->size;
	}
	return 0;
}

/* A partition image (ocs-sr saveparts: "parts", no "disk"): the disk the
 * partitions are on, from the one DISK-pt.sf the folder holds, into buf. */
static int partition_image_disk(const char *dir, char *buf, size_t cap, struct im_err *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l > 6 && !strcmp(e->d_name + l - 6, "-pt.sf") && l - 6 < cap) {
			memcpy(buf, e->d_name, l - 6);
			buf[l - 6] = '\0';
			n++;
		}
	}
	closedir(d);
	if (n == 0)
		return im_errf(err, IM_EXIT_DAMAGED, -ENOENT,
			       "%s: a Clonezilla image of partitions without its disk's table (no DISK-pt.sf)",
			       dir);
	if (n > 1)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: a Clonezilla image of partitions of several disks is not supported",
			       dir);
	return 0;
}

/* VG's text from lvm_VG.conf, mapped (lvmfmt.h); *text malloc'ed. */
int cz_load_vg(const char *dir, const char *vg, struct lvm_vg_map *map, char **text,
	       size_t *len, struct im_err *err)
{
	char name[200];
	struct im_err e = { 0 };
	unsigned char *t = NULL;
	int r;

	snprintf(name, sizeof(name), "lvm_%s.conf", vg);
	r = cz_read_file(dir, name, 8u << 20, &t, len, err);
	if (r == -ENOENT)
		return im_errf(err, IM_EXIT_DAMAGED, r, "%s: no %s for VG %s", dir, name, vg);
	if (r < 0)
		return r;
	r = lvm_text_map((const char *)t, *len, map, &e);
	if (r == 0 && strcmp(map->vg, vg)) {
		lvm_vg_map_free(map);
		r = lvm_errf(&e, -EINVAL, "it describes VG %s", map->vg);
	}
	if (r < 0) {
		free(t);
		return im_errf(err, r == -ENOTSUP ? IM_EXIT_UNSUPP : IM_EXIT_DAMAGED, r, "%s/%s: %s",
			       dir, name, e.msg);
	}
	*text = (char *)t;
	return 0;
}

static bool lvm_name_ok(const char *s)
{
	if (!*s || strlen(s) >= 120 || *s == '-' || *s == '.')
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("+_.-", *s))
			return false;
	return true;
}

/* VG v's LVs (map): their places on this disk's PVs, and their streams. */
static int read_lvs(const char *dir, struct cz_image *cz, size_t v,
		    const struct lvm_vg_map *map, struct im_err *err)
{
	int r = 0;

	for (size_t l = 0; r == 0 && l < map->nlvs; l++) {
		const struct lvm_map_lv *ml = &map->lvs[l];
		struct cz_lv *lv;

		if (cz->nlvs == CZ_MAX_LVS) {
			r = im_errf(err, IM_EXIT_UNSUPP, -E2BIG, "%s: more than %d LVs", dir,
				    CZ_MAX_LVS);
			break;
		}
		if (!lvm_name_ok(ml->name)) {
			r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: VG %s: a bad LV name", dir,
				    cz->vgs[v]);
			break;
		}
		lv = &cz->lvs[cz->nlvs++];
		memset(lv, 0, sizeof(*lv));
		lv->vg = (unsigned)v;
		snprintf(lv->lv, sizeof(lv->lv), "%s", ml->name);
		snprintf(lv->part.name, sizeof(lv->part.name), "%.30s-%.30s", cz->vgs[v], ml->name);
		lv->part.size = ml->size;
		lv->linear = ml->linear;
		for (size_t k = 0; k < ml->nsegs && lv->linear; k++) {
			const struct lvm_seg *sg = &ml->segs[k];
			size_t pi = cz->nparts;
			for (size_t i = 0; i < cz->nparts; i++)
				if (cz->parts[i].kind == CZ_PV && cz->parts[i].vg == v &&
				    cz->parts[i].pv == sg->pv)
					pi = i;
			if (pi == cz->nparts || sg->pv_off > cz->parts[pi].size ||
			    sg->len > cz->parts[pi].size - sg->pv_off) {
				r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					    "%s: LV %s/%s lies outside this disk's PVs", dir,
					    cz->vgs[v], ml->name);
				break;
			}
			lv->segs[lv->nsegs].lv_off = sg->lv_off;
			lv->segs[lv->nsegs].len = sg->len;
			lv->segs[lv->nsegs].part = pi;
			lv->segs[lv->nsegs].part_off = sg->pv_off;
			lv->nsegs++;
		}
		if (r == 0)
			r = find_stream(dir, &lv->part, err);
		if (r == 0 && lv->part.kind == CZ_SWAP)
			r = read_swap_info(dir, &lv->part, err);
		if (r == 0 && lv->part.kind != CZ_NONE && !lv->linear)
			r = im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				    "%s: LV %s/%s has a stream but is not linear on this disk's PVs (thin, RAID, striped)",
				    dir, cz->vgs[v], ml->name);
	}
	return r;
}

/* LVM: lvm_vg_dev.list's PVs marked (CZ_PV), and each VG's LVs with their
 * streams and places.  No list: nothing to do. */
static int read_lvm(const char *dir, struct cz_image *cz, struct im_err *err)
{
	char buf[8192], *line, *save = NULL;
	struct lvm_vg_map maps[CZ_MAX_VGS];   /* each VG's text, read once */
	int r = read_small(dir, "lvm_vg_dev.list", buf, sizeof(buf), err);

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	for (line = strtok_r(buf, "\n", &save); line && r == 0;
	     line = strtok_r(NULL, "\n", &save)) {
		char vg[128], dev[128], uuid[64], plain[40];
		size_t k = 0, v;
		struct cz_part *p = NULL;
		const struct lvm_vg_map *map;
		unsigned pv;

		if (sscanf(line, "%127s %127s %63s", vg, dev, uuid) != 3)
			continue;
		if (!lvm_name_ok(vg) || strncmp(dev, "/dev/", 5)) {
			r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s/lvm_vg_dev.list: bad line '%.80s'",
				    dir, line);
			break;
		}
		for (size_t i = 0; i < cz->nparts; i++)
			if (!strcmp(cz->parts[i].name, dev + 5))
				p = &cz->parts[i];
		if (!p) {
			r = im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				    "%s: VG %s has a PV on %s, not on this disk (images of several disks are not supported)",
				    dir, vg, dev);
			break;
		}
		for (const char *c = uuid; *c && k < sizeof(plain) - 1; c++)
			if (*c != '-')
				plain[k++] = *c;
		plain[k] = '\0';
		for (v = 0; v < cz->nvgs && strcmp(cz->vgs[v], vg); v++)
			;
		if (v == cz->nvgs) {
			char *text;
			size_t len;
			if (v == CZ_MAX_VGS) {
				r = im_errf(err, IM_EXIT_UNSUPP, -E2BIG, "%s: more than %d VGs", dir,
					    CZ_MAX_VGS);
				break;
			}
			r = cz_load_vg(dir, vg, &maps[v], &text, &len, err);
			if (r < 0)
				break;
			free(text);
			snprintf(cz->vgs[cz->nvgs++], sizeof(cz->vgs[0]), "%s", vg);
		}
		map = &maps[v];
		for (pv = 0; pv < map->npvs && strcmp(map->pvs[pv].uuid, plain); pv++)
			;
		if (pv == map->npvs) {
			r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				    "%s: PV %s of lvm_vg_dev.list is not in lvm_%s.conf", dir, uuid, vg);
			break;
		}
		if (map->pvs[pv].pe_start > p->size || map->pvs[pv].pe_start < 8192) {
			r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				    "%s: PV %s: its extents start outside partition %s", dir, uuid,
				    p->name);
			break;
		}
		p->kind = CZ_PV;
		p->vg = (unsigned)v;
		p->pv = pv;
		p->pe_start = map->pvs[pv].pe_start;
		snprintf(p->fs, sizeof(p->fs), "LVM2_member");
		snprintf(p->stream, sizeof(p->stream), "lvm_%s.conf", vg);
	}
	for (size_t v = 0; r == 0 && v < cz->nvgs; v++)
		r = read_lvs(dir, cz, v, &maps[v], err);
	for (size_t v = 0; v < cz->nvgs; v++)
		lvm_vg_map_free(&maps[v]);
	return r;
}

/* The disk's size: the GPT header's; for MBR, the last partition's
 * end rounded up to a MiB (Clonezilla does not record it).  end: where
 * the last partition ends; last_lba: the table's. */
static int disk_size(const char *dir, struct cz_image *cz, uint64_t last_lba, uint64_t end,
		     struct im_err *err)
{
	char name[128];
	struct stat st;

	if (!strcmp(cz->table, "gpt")) {
		unsigned char h[512];
		char p[4200];
		int fd;

		snprintf(name, sizeof(name), "%s-gpt-1st", cz->disk);
		snprintf(p, sizeof(p), "%s/%s", dir, name);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0 || util_pread_full(fd, h, 512, cz->lss) < 0) {
			if (fd >= 0)
				close(fd);
			return im_errf(err, IM_EXIT_DAMAGED, -ENOENT, "%s: no readable %s", dir, name);
		}
		close(fd);
		if ((uint64_t)st.st_size != 34ull * cz->lss || memcmp(h, "EFI PART", 8))
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				       "%s: %s is not a protective MBR, a GPT header and its entries", dir,
				       name);
		if (le64(h + 32) != last_lba + 33 || le64(h + 32) > (UINT64_MAX >> 13) ||
		    (le64(h + 32) + 1) * cz->lss < end)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				       "%s: %s's backup LBA %llu disagrees with the table's last LBA %llu",
				       dir, name, (unsigned long long)le64(h + 32),
				       (unsigned long long)last_lba);
		cz->disk_size = (le64(h + 32) + 1) * cz->lss;
		cz->size_known = true;
	} else {
		cz->disk_size = (end + MiB - 1) / MiB * MiB;
		if (cz->disk_size < MiB)
			cz->disk_size = MiB;
	}
	return 0;
}

int cz_read(const char *dir, struct cz_image *cz, struct im_err *err)
{
	char buf[4096], *tok, *save = NULL;
	uint64_t last_lba = 0, end = 0;
	struct stat st;
	int r;

	memset(cz, 0, sizeof(*cz));
	snprintf(buf, sizeof(buf), "%s/ecryptfs.info", dir);
	if (stat(buf, &st) == 0)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: an encrypted Clonezilla image (ecryptfs) is not supported: decrypt it with Clonezilla first",
			       dir);
	r = read_small(dir, "disk", buf, sizeof(buf), err);
	if (r == -ENOENT) {
		/* saveparts: the disk is the one whose table was kept */
		r = partition_image_disk(dir, buf, sizeof(buf), err);
		if (r < 0)
			return r;
		cz->partitions_only = true;
	}
	if (r < 0)
		return r;
	tok = strtok_r(buf, " \t\n", &save);
	if (!tok || !name_ok(tok))
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s/disk: no disk name", dir);
	snprintf(cz->disk, sizeof(cz->disk), "%s", tok);
	if (strtok_r(NULL, " \t\n", &save))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: a Clonezilla image of several disks is not supported", dir);
	r = parse_sf(dir, cz, &last_lba, err);
	if (r < 0)
		return r;

	/* The partitions the image holds, as "parts" lists them. */
	r = read_small(dir, "parts", buf, sizeof(buf), err);
	if (r == -ENOENT)
		buf[0] = '\0';
	else if (r < 0)
		return r;
	r = check_logical(dir, cz, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < cz->nparts; i++) {
		struct cz_part *p = &cz->parts[i];
		if (p->start + p->size > end)
			end = p->start + p->size;
	}
	if (cz->ext_start + cz->ext_size > end)
		end = cz->ext_start + cz->ext_size;
	r = read_lvm(dir, cz, err);
	if (r < 0)
		return r;
	save = NULL;
	for (tok = strtok_r(buf, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
		struct cz_part *p = NULL;
		for (size_t i = 0; i < cz->nparts; i++)
			if (!strcmp(cz->parts[i].name, tok))
				p = &cz->parts[i];
		if (!p)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				       "%s/parts names %.64s, which the partition table does not have", dir,
				       tok);
		if (p->kind == CZ_PV)
			continue;
		r = find_stream(dir, p, err);
		if (r == 0 && p->kind == CZ_SWAP)
			r = read_swap_info(dir, p, err);
		if (r < 0)
			return r;
		if (p->kind == CZ_NONE)
			return im_errf(err, IM_EXIT_DAMAGED, -ENOENT,
				       "%s: no image of partition %s (a missing %s.*-ptcl-img.* file)",
				       dir, p->name, p->name);
	}

	/* Swap partitions are not in "parts": their swappt-PART.info is. */
	for (size_t i = 0; i < cz->nparts; i++) {
		struct cz_part *p = &cz->parts[i];
		char path[4200];

		snprintf(path, sizeof(path), "%s/swappt-%s.info", dir, p->name);
		if (p->kind != CZ_NONE || stat(path, &st) != 0)
			continue;
		p->kind = CZ_SWAP;
		snprintf(p->stream, sizeof(p->stream), "swappt-%s.info", p->name);
		r = read_swap_info(dir, p, err);
		if (r < 0)
			return r;
	}

	r = disk_size(dir, cz, last_lba, end, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < cz->nparts; i++) {
		const struct cz_part *a = &cz->parts[i];
		if (a->start < cz->lss || a->start + a->size > cz->disk_size)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s: partition %s lies outside the disk",
				       dir, a->name);
		for (size_t k = 0; k < i; k++) {
			const struct cz_part *b = &cz->parts[k];
			if (a->start < b->start + b->size && b->start < a->start + a->size)
				return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					       "%s: partitions %s and %s overlap", dir, b->name, a->name);
		}
	}
	return 0;
}
