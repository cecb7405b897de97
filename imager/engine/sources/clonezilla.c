/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Clonezilla image folders restored through the writer (contract and the
 * folder's facts in include/imager/clonezilla.h).  Every file of the
 * folder is hostile input: names, numbers and sizes are checked before use.
 */
#include "imager/clonezilla.h"

#include <archive.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "imager/lvmfmt.h"
#include "imager/partclone.h"
#include "imager/pipeline.h"
#include "imager/ptable.h"
#include "imager/swapfmt.h"
#include "copyjob.h"
#include "util.h"

#define MiB (1ull << 20)

bool cz_detect(const char *dir)
{
	char p[4200];
	struct stat st;

	snprintf(p, sizeof(p), "%s/manifest.json", dir);
	if (stat(p, &st) == 0)
		return false;
	snprintf(p, sizeof(p), "%s/disk", dir);
	if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
		return true;
	snprintf(p, sizeof(p), "%s/parts", dir);
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* A file of the folder of at most max bytes, malloc'ed and NUL-terminated;
 * -ENOENT (err untouched) when absent. */
static int read_file(const char *dir, const char *name, uint64_t max, unsigned char **buf,
		     size_t *len, struct im_err *err)
{
	char p[4200];
	size_t n;
	int r;

	if (path_join(p, sizeof(p), dir, name) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s/%s: name too long", dir, name);
	r = read_whole_file(p, buf, len ? len : &n, max);
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
	int r = read_file(dir, name, cap - 1, &b, &n, err);

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
					snprintf(cz->ext_name, sizeof(cz->ext_name), "%s", pname);
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
			snprintf(p->name, sizeof(p->name), "%s", pname);
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
static int load_vg(const char *dir, const char *vg, struct lvm_vg_map *map, char **text,
		   size_t *len, struct im_err *err)
{
	char name[200], why[300];
	unsigned char *t = NULL;
	int r;

	snprintf(name, sizeof(name), "lvm_%s.conf", vg);
	r = read_file(dir, name, 8u << 20, &t, len, err);
	if (r == -ENOENT)
		return im_errf(err, IM_EXIT_DAMAGED, r, "%s: no %s for VG %s", dir, name, vg);
	if (r < 0)
		return r;
	r = lvm_text_map((const char *)t, *len, map, why, sizeof(why));
	if (r == 0 && strcmp(map->vg, vg)) {
		lvm_vg_map_free(map);
		r = -EINVAL;
		snprintf(why, sizeof(why), "it describes VG %s", map->vg);
	}
	if (r < 0) {
		free(t);
		return im_errf(err, r == -ENOTSUP ? IM_EXIT_UNSUPP : IM_EXIT_DAMAGED, r, "%s/%s: %s",
			       dir, name, why);
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
			r = load_vg(dir, vg, &maps[v], &text, &len, err);
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
	/* Each VG's LVs: their places on this disk's PVs, and their streams. */
	for (size_t v = 0; r == 0 && v < cz->nvgs; v++) {
		const struct lvm_vg_map *map = &maps[v];

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
	}
	for (size_t v = 0; v < cz->nvgs; v++)
		lvm_vg_map_free(&maps[v]);
	return r;
}

int cz_read(const char *dir, struct cz_image *cz, struct im_err *err)
{
	char buf[4096], name[128], *tok, *save = NULL;
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

	/* The disk's size: the GPT header's; for MBR, the last partition's
	 * end rounded up to a MiB (Clonezilla does not record it). */
	if (!strcmp(cz->table, "gpt")) {
		unsigned char h[512];
		char p[4200];
		int fd;

		snprintf(name, sizeof(name), "%s-gpt-1st", cz->disk);
		snprintf(p, sizeof(p), "%s/%s", dir, name);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0 || pread_full(fd, h, 512, cz->lss) < 0) {
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

/* ---- one stream: split parts joined, decompressed by libarchive ---- */

struct czs {
	const char *dir;
	char first[256];
	unsigned nfiles, cur;
	int fd;
	struct archive *a;
	unsigned char buf[1 << 17];
	uint64_t consumed;  /* bytes read from the files */
	char why[300];      /* what went wrong below the partclone layer */
};

/* The name of split part i: the first's name with its last two letters
 * counted up (aa, ab, ... zz), or the file itself when it is not split. */
static void part_name(const struct czs *s, unsigned i, char *out, size_t len)
{
	size_t n = strlen(s->first);
	snprintf(out, len, "%s/%s", s->dir, s->first);
	if (s->nfiles > 1 && n >= 3) {
		size_t o = strlen(out);
		out[o - 2] = (char)('a' + i / 26);
		out[o - 1] = (char)('a' + i % 26);
	}
}

static la_ssize_t czs_read_cb(struct archive *a, void *ctx, const void **data)
{
	struct czs *s = ctx;
	char p[4400];
	(void)a;
	for (;;) {
		ssize_t n;
		if (s->fd < 0) {
			if (s->cur >= s->nfiles)
				return 0;
			part_name(s, s->cur, p, sizeof(p));
			s->fd = open(p, O_RDONLY | O_CLOEXEC);
			if (s->fd < 0) {
				snprintf(s->why, sizeof(s->why), "%s: %s (a missing part)", p,
					 strerror(errno));
				archive_set_error(a, errno, "%s", s->why);
				return -1;
			}
			posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		}
		n = read(s->fd, s->buf, sizeof(s->buf));
		if (n < 0) {
			snprintf(s->why, sizeof(s->why), "reading part %u: %s", s->cur + 1,
				 strerror(errno));
			archive_set_error(a, errno, "%s", s->why);
			return -1;
		}
		if (n > 0) {
			*data = s->buf;
			s->consumed += (uint64_t)n;
			return n;
		}
		close(s->fd);
		s->fd = -1;
		s->cur++;
	}
}

static ssize_t czs_read(void *opaque, void *buf, size_t len)
{
	struct czs *s = opaque;
	la_ssize_t n = archive_read_data(s->a, buf, len);
	if (n < 0) {
		if (!s->why[0])
			snprintf(s->why, sizeof(s->why), "%s", archive_error_string(s->a));
		return -EBADMSG;
	}
	return n;
}

static int czs_open(struct czs *s, const char *dir, const struct cz_part *p, struct im_err *err)
{
	struct archive_entry *e;
	char path[4400];
	struct stat st;

	memset(s, 0, sizeof(*s));
	s->dir = dir;
	s->fd = -1;
	snprintf(s->first, sizeof(s->first), "%s", p->stream);
	s->nfiles = p->nfiles;
	/* Every part present before a byte is read: a missing one is named. */
	for (unsigned i = 0; i < s->nfiles; i++) {
		part_name(s, i, path, sizeof(path));
		if (stat(path, &st) < 0)
			return im_errf(err, IM_EXIT_DAMAGED, -ENOENT,
				       "partition %s: %s is missing (part %u of %u)", p->name, path, i + 1,
				       s->nfiles);
	}
	s->a = archive_read_new();
	if (!s->a)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	archive_read_support_filter_all(s->a);
	archive_read_support_format_raw(s->a);
	if (archive_read_open(s->a, s, NULL, czs_read_cb, NULL) != ARCHIVE_OK ||
	    archive_read_next_header(s->a, &e) != ARCHIVE_OK)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "partition %s: %s: %s", p->name,
			       p->stream, s->why[0] ? s->why : archive_error_string(s->a));
	return 0;
}

static void czs_close(struct czs *s)
{
	if (s->a)
		archive_read_free(s->a);
	if (s->fd >= 0)
		close(s->fd);
	s->a = NULL;
	s->fd = -1;
}

/* A failure below the partclone layer (a missing part, a corrupt compressed
 * stream) replaces the partclone reader's "Bad message". */
static int stream_failed(struct czs *s, const struct cz_part *p, int r, struct im_err *err)
{
	if (!s->why[0])
		return r;
	memset(err, 0, sizeof(*err));
	return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "partition %s: %s: %s", p->name, p->stream,
		       s->why);
}

/* A partition's stream opened and its partclone header and bitmap read;
 * on failure nothing stays open. */
static int ptcl_open(struct czs *s, struct pcl_reader *r, const char *dir, const struct cz_part *p,
		     struct im_err *err)
{
	int rc = czs_open(s, dir, p, err);

	if (rc == 0) {
		rc = pcl_open(r, czs_read, s, p->stream, err);
		if (rc < 0)
			rc = stream_failed(s, p, rc, err);
	}
	if (rc < 0)
		czs_close(s);
	return rc;
}

/* ---- restore ---- */

/* A boot area's file, which must hold at least need bytes. */
static int read_area(const char *dir, const char *name, uint64_t need, unsigned char **buf,
		     size_t *len, struct im_err *err)
{
	int r = read_file(dir, name, PT_HEAD_MAX, buf, len, err);

	if (r == -ENOENT)
		return im_errf(err, IM_EXIT_DAMAGED, r, "%s/%s: missing", dir, name);
	if (r == 0 && *len < need) {
		free(*buf);
		*buf = NULL;
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s/%s: shorter than %llu bytes", dir,
			       name, (unsigned long long)need);
	}
	return r;
}

/* The EBR chain of the logical partitions (facts in clonezilla.h), as
 * boot areas "ebr-N" after the head. */
static int plan_ebrs(const char *dir, const struct cz_image *cz, struct disk_plan *pl,
		     struct im_err *err)
{
	char name[128];
	unsigned char *first = NULL;
	uint64_t pos[CZ_MAX_PARTS], prev_end = cz->ext_start, lead = 0;
	size_t nlog = 0, len = 0, log[CZ_MAX_PARTS];
	int r;

	snprintf(name, sizeof(name), "%s-ebr", cz->ext_name);
	r = read_file(dir, name, 512, &first, &len, err);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0 && (len != 512 || first[510] != 0x55 || first[511] != 0xAA)) {
		free(first);
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s/%s: not an EBR", dir, name);
	}
	for (size_t i = 0; i < cz->nparts; i++)
		if (cz->parts[i].logical)
			log[nlog++] = i;
	for (size_t k = 0; k < nlog; k++) {
		const struct cz_part *p = &cz->parts[log[k]];
		uint64_t at = p->start - lead;

		if (k == 0) {
			at = cz->ext_start;
			lead = p->start - at;
		} else if (k == 1 && first && le32(first + 446 + 16 + 8)) {
			uint64_t link = cz->ext_start + (uint64_t)le32(first + 446 + 16 + 8) * 512;
			if (link >= prev_end && link < p->start)
				at = link;
		}
		if (lead > p->start - prev_end)
			at = prev_end;
		pos[k] = at;
		prev_end = p->start + p->size;
	}
	for (size_t k = 0; k < nlog; k++) {
		const struct cz_part *p = &cz->parts[log[k]];
		unsigned char *sec = calloc(1, 512);
		size_t a = pl->nareas;

		if (!sec) {
			free(first);
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		}
		if (k == 0 && first)
			memcpy(sec, first, 446);  /* its boot code, as ocs-restore-ebr puts back */
		ptable_mbr_entry(sec + 446, p->start / 512, (p->start - pos[k]) / 512, p->size / 512);
		sec[446 + 4] = p->mbr_type;
		if (k + 1 < nlog) {
			const struct cz_part *q = &cz->parts[log[k + 1]];
			ptable_mbr_entry(sec + 446 + 16, pos[k + 1] / 512,
					 (pos[k + 1] - cz->ext_start) / 512,
					 (q->start + q->size - pos[k + 1]) / 512);
			sec[446 + 16 + 4] = 0x05;
		}
		sec[510] = 0x55;
		sec[511] = 0xAA;
		snprintf(name, sizeof(name), "ebr-%zu", k);
		pl->area_data[a] = sec;
		disk_plan_set_area(pl, a, name, pos[k], 512);
		pl->nareas++;
	}
	free(first);
	return 0;
}

/* The boot areas: the table's sectors and what Clonezilla kept of the
 * gap before the first partition. */
static int plan_areas(const char *dir, const struct cz_image *cz, struct disk_plan *pl,
		      struct im_err *err)
{
	char name[128];
	unsigned char *d;
	uint64_t first = cz->disk_size;
	size_t len;
	int r;

	for (size_t i = 0; i < cz->nparts; i++)
		if (cz->parts[i].start < first)
			first = cz->parts[i].start;
	if (cz->ext_size && cz->ext_start < first)
		first = cz->ext_start;  /* the first EBR */
	pl->nareas = 1;
	if (!strcmp(cz->table, "gpt")) {
		snprintf(name, sizeof(name), "%s-gpt-1st", cz->disk);
		r = read_area(dir, name, 34ull * cz->lss, &pl->area_data[0], &len, err);
		if (r == 0)
			r = ptable_gpt_check(pl->area_data[0], 34ull * cz->lss, cz->lss, cz->disk_size,
					     err);
		if (r < 0) {
			if (!strstr(err->msg, name))
				im_err_prefix(err, "%s: ", name);
			return r;
		}
		/* The backup is made from the primary when the table is written
		 * (Clonezilla's gpt-2nd misses the backup entries' first sector). */
		disk_plan_set_area(pl, 0, "head", 0, 34ull * cz->lss);
		return 0;
	}
	snprintf(name, sizeof(name), "%s-mbr", cz->disk);
	r = read_area(dir, name, 512, &pl->area_data[0], &len, err);
	if (r < 0)
		return r;
	d = pl->area_data[0];
	if (d[510] != 0x55 || d[511] != 0xAA)
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "%s/%s: no MBR signature", dir, name);
	/* The four entries as DISK-pt.sf has them (ocs-sr writes the table
	 * with sfdisk and puts back only the MBR's first 446 bytes). */
	memset(d + 446, 0, 64);
	for (size_t i = 0; i < cz->nparts; i++) {
		const struct cz_part *p = &cz->parts[i];
		unsigned char *e = d + 446 + 16 * (p->number - 1);
		if (p->logical)
			continue;
		ptable_mbr_entry(e, p->start / 512, p->start / 512, p->size / 512);
		e[0] = p->bootable ? 0x80 : 0;
		e[4] = p->mbr_type;
	}
	if (cz->ext_size) {
		unsigned char *e = d + 446 + 16 * (cz->ext_number - 1);
		ptable_mbr_entry(e, cz->ext_start / 512, cz->ext_start / 512, cz->ext_size / 512);
		e[4] = cz->ext_type;
		r = plan_ebrs(dir, cz, pl, err);
		if (r < 0)
			return r;
	}
	disk_plan_set_area(pl, 0, "head", 0, 512);
	snprintf(name, sizeof(name), "%s-hidden-data-after-mbr", cz->disk);
	r = first > 512 ? read_area(dir, name, 1, &pl->area_data[pl->nareas], &len, err) : -ENOENT;
	if (r == 0) {
		if (len > first - 512)
			len = first - 512;  /* never over the first partition */
		disk_plan_set_area(pl, pl->nareas, "head-gap", 512, len);
		pl->nareas++;
	}
	/* No hidden data: the gap stays as the target has it. */
	return r == -ENOENT ? 0 : r;
}

struct cz_job {
	struct writer *w;
	uint64_t done, total;
	const struct restore_opts *opts;
	const struct cz_lv *lv;    /* the LV being written, or NULL */
};

static int cz_put(struct cz_job *j, size_t i, uint64_t off, uint64_t len, const void *buf,
		  struct im_err *err);

/* restore_ptcl's pipeline (pipeline.h): the producer decompresses runs
 * into the slots, one worker compares their checksums in order (the
 * running checksum is the stream's), and the caller's thread writes them;
 * the three overlap (decompression is the longest: the checksums took a
 * fifth of the time inside it, and direct writes wait on the disk).  The
 * run of 0 blocks at the end is a slot too (its check closes the stream);
 * a read that fails is a slot that carries the failure, so that the runs
 * before it are written first. */
struct ptcl_meta {
	uint64_t first;
	ssize_t n;                /* blocks; < 0: the read's failure */
	struct pcl_marks marks;   /* its checksums, for the check */
	struct pcl_mark m[];
};

struct ptcl_job {
	struct pcl_reader *r;
	size_t max;               /* blocks a slot holds */
	const struct cz_part *p;
	size_t i;
	struct cz_job *j;
	unsigned char boot[512];
	bool ended;
	bool read_failed;         /* the failure came from the stream */
	struct im_err rerr;
};

static int ptcl_produce(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct ptcl_job *q = ctx;
	struct ptcl_meta *m = s->meta;

	(void)err;
	if (q->ended)
		return 0;
	m->marks.m = m->m;
	m->marks.cap = q->max + 1;
	m->n = pcl_read_run_marked(q->r, &m->first, s->a, q->max, &m->marks, &q->rerr);
	q->ended = m->n <= 0;
	return 1;
}

static int ptcl_work(void *ctx, void *ws, struct pipe_slot *s)
{
	struct ptcl_job *q = ctx;
	struct ptcl_meta *m = s->meta;

	(void)ws;
	return m->n >= 0 ? pcl_check_run(q->r, s->a, (size_t)m->n, &m->marks, &s->err) : 0;
}

static int ptcl_consume(void *ctx, struct pipe_slot *s, struct im_err *err)
{
	struct ptcl_job *q = ctx;
	struct ptcl_meta *m = s->meta;
	struct cz_job *j = q->j;
	uint64_t off, len;
	int rc;

	if (s->status < 0) {
		*err = s->err;
		return s->status;
	}
	if (m->n < 0) {
		q->read_failed = true;
		*err = q->rerr;
		return (int)m->n;
	}
	if (m->n == 0)
		return 0;
	off = m->first * q->r->h.block_size;
	len = (uint64_t)m->n * q->r->h.block_size;
	if (off + len > q->p->size)  /* a partial last block */
		len = q->p->size - off;
	if (m->first == 0 && len >= 512)
		memcpy(q->boot, s->a, 512);
	rc = cz_put(j, q->i, off, len, s->a, err);
	if (rc == 0 && j->opts->progress.cancel && *j->opts->progress.cancel)
		rc = im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
	j->done += len;
	if (j->opts->progress.fn)
		j->opts->progress.fn(j->opts->progress.opaque, "restore", j->done, j->total);
	return rc;
}

/* NTFS keeps a copy of its boot sector in the volume's last sector, past
 * the last cluster, which partclone.ntfs does not save: written from the
 * primary, as ntfsfix would. */
static int ntfs_backup_boot(struct ptcl_job *q, struct im_err *err)
{
	const unsigned char *boot = q->boot;
	uint64_t bps = le16(boot + 11), sectors = le64(boot + 0x28);

	if (strcmp(q->p->fs, "ntfs") || memcmp(boot + 3, "NTFS    ", 8) || boot[510] != 0x55 ||
	    boot[511] != 0xAA)
		return 0;
	if ((bps == 512 || bps == 1024 || bps == 2048 || bps == 4096) &&
	    sectors < q->p->size / bps &&
	    sectors * bps >= q->r->h.total_blocks * q->r->h.block_size)
		return cz_put(q->j, q->i, sectors * bps, 512, boot, err);
	return 0;
}

static int restore_ptcl(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
			struct im_err *err)
{
	const struct pipe_ops ops = { .produce = ptcl_produce, .work = ptcl_work,
				      .consume = ptcl_consume };
	struct czs s;
	struct pcl_reader r;
	struct ptcl_job q = { .r = &r, .p = p, .i = i, .j = j };
	int rc;

	rc = ptcl_open(&s, &r, dir, p, err);
	if (rc < 0)
		return rc;
	if (r.h.total_blocks * r.h.block_size > p->size + r.h.block_size - 1) {
		rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
			     "partition %s: its image holds %llu bytes, more than the partition's %llu",
			     p->name, (unsigned long long)(r.h.total_blocks * r.h.block_size),
			     (unsigned long long)p->size);
		goto out;
	}
	q.max = (4u << 20) / r.h.block_size;
	if (q.max == 0)
		q.max = 1;
	/* (one worker: the checksums run in the stream's order) */
	rc = pipeline_run(&ops, &q, 1, q.max * r.h.block_size, 0,
			  sizeof(struct ptcl_meta) + (q.max + 1) * sizeof(struct pcl_mark), err);
	if (rc < 0 && q.read_failed) {
		rc = stream_failed(&s, p, rc, err);
		if (!strstr(err->msg, p->name))
			im_err_prefix(err, "partition %s: ", p->name);
	}
	if (rc == 0)
		rc = ntfs_backup_boot(&q, err);
out:
	pcl_close(&r);
	czs_close(&s);
	return rc;
}

/* partclone.dd's stream: the partition's bytes, exactly its size.  With
 * j, written to partition i; without, only read (verify). */
static int read_dd(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
		   const struct im_progress *progress, uint64_t *done, uint64_t total,
		   struct im_err *err)
{
	struct czs s;
	unsigned char *buf = malloc(4u << 20);
	uint64_t off = 0;
	int rc = buf ? czs_open(&s, dir, p, err)
		     : im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");

	if (rc < 0) {
		free(buf);
		return rc;
	}
	for (;;) {
		size_t want = 4u << 20, got = 0;
		ssize_t n = 0;
		while (got < want && (n = czs_read(&s, buf + got, want - got)) > 0)
			got += (size_t)n;
		if (n < 0) {
			rc = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "partition %s: %s: %s", p->name,
				     p->stream, s.why);
			break;
		}
		if (got > p->size - off) {
			rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				     "partition %s: %s holds more than the partition's %llu bytes",
				     p->name, p->stream, (unsigned long long)p->size);
			break;
		}
		if (got && j)
			rc = cz_put(j, i, off, got, buf, err);
		off += got;
		if (rc == 0 && j && j->opts->progress.cancel && *j->opts->progress.cancel)
			rc = im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
		if (j) {
			j->done += got;
			if (j->opts->progress.fn)
				j->opts->progress.fn(j->opts->progress.opaque, "restore", j->done,
						     j->total);
		} else if (progress && progress->fn && done) {
			progress->fn(progress->opaque, "verify", *done + s.consumed, total);
		}
		if (rc < 0 || got < want)
			break;
	}
	if (rc == 0 && off != p->size)
		rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
			     "partition %s: %s ends at byte %llu of the partition's %llu (truncated)",
			     p->name, p->stream, (unsigned long long)off, (unsigned long long)p->size);
	czs_close(&s);
	free(buf);
	return rc;
}

/* ---- ntfsclone --save-image streams (Clonezilla before partclone) ----
 * Facts (ntfs-3g's ntfsclone, checked on images ntfsclone 2022.10.3
 * writes): a 50-byte header, "\0ntfsclone-image", u8 major 10, u8 minor
 * 0 or 1, le32 cluster size, le64 device size, le64 number of clusters,
 * le64 clusters in use, le32 offset of the data from the header's start;
 * then commands until the cluster count is reached: 0x00 and a le64 count
 * (a gap of that many clusters, not stored), 0x01 and one cluster's bytes;
 * then, when the device is longer than its clusters (NTFS keeps its backup
 * boot sector there), one more 0x01 and the remaining bytes; then the end. */
#define NTC_HEADER 50

struct ntc {
	struct czs s;
	unsigned char *buf;       /* read-ahead */
	size_t pos, len;
	uint32_t cs;
	uint64_t device_size, clusters, inuse, off;
	unsigned major, minor;
	bool eof;                 /* the stream ended cleanly */
};

/* Exactly n bytes from the stream; -EBADMSG at its end or on damage. */
static int ntc_get(struct ntc *t, void *out, size_t n)
{
	unsigned char *o = out;
	while (n) {
		if (t->pos == t->len) {
			ssize_t r = czs_read(&t->s, t->buf, 1 << 20);
			if (r <= 0) {
				t->eof = r == 0 && !t->s.why[0];
				if (t->eof)
					snprintf(t->s.why, sizeof(t->s.why),
						 "the stream ends early (truncated)");
				return -EBADMSG;
			}
			t->pos = 0;
			t->len = (size_t)r;
		}
		size_t k = t->len - t->pos < n ? t->len - t->pos : n;
		memcpy(o, t->buf + t->pos, k);
		t->pos += k;
		o += k;
		n -= k;
	}
	return 0;
}

static int ntc_fail(struct ntc *t, const struct cz_part *p, struct im_err *err)
{
	return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "partition %s: %s: %s", p->name, p->stream,
		       t->s.why);
}

static void ntc_close(struct ntc *t)
{
	czs_close(&t->s);
	free(t->buf);
	t->buf = NULL;
}

/* The stream opened and its header read and checked against the
 * partition; nothing stays open on failure. */
static int ntc_open(struct ntc *t, const char *dir, const struct cz_part *p, struct im_err *err)
{
	unsigned char h[NTC_HEADER], skip[64];
	int r;

	memset(t, 0, sizeof(*t));
	t->buf = malloc(1 << 20);
	if (!t->buf)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = czs_open(&t->s, dir, p, err);
	if (r < 0) {
		free(t->buf);
		return r;
	}
	if (ntc_get(t, h, sizeof(h)) < 0) {
		r = ntc_fail(t, p, err);
		goto fail;
	}
	if (memcmp(h, "\0ntfsclone-image", 16)) {
		r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "partition %s: %s is not an ntfsclone image",
			    p->name, p->stream);
		goto fail;
	}
	t->major = h[16];
	t->minor = h[17];
	t->cs = le32(h + 18);
	t->device_size = le64(h + 22);
	t->clusters = le64(h + 30);
	t->inuse = le64(h + 38);
	t->off = le32(h + 46);
	if (t->major != 10 || t->minor > 1) {
		r = im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			    "partition %s: %s: ntfsclone image version %u.%u (10.0 and 10.1 are read)",
			    p->name, p->stream, t->major, t->minor);
		goto fail;
	}
	if (t->cs < 256 || t->cs > (2u << 20) || (t->cs & (t->cs - 1)) ||
	    t->device_size > p->size || t->clusters > t->device_size / t->cs ||
	    t->device_size - t->clusters * t->cs > t->cs || t->inuse > t->clusters ||
	    t->off < NTC_HEADER || t->off > NTC_HEADER + sizeof(skip)) {
		r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
			    "partition %s: %s: the ntfsclone header lies (cluster %u, %llu clusters, %llu in use, device %llu bytes, data at %llu; the partition has %llu bytes)",
			    p->name, p->stream, t->cs, (unsigned long long)t->clusters,
			    (unsigned long long)t->inuse, (unsigned long long)t->device_size,
			    (unsigned long long)t->off, (unsigned long long)p->size);
		goto fail;
	}
	if (ntc_get(t, skip, t->off - NTC_HEADER) < 0) {
		r = ntc_fail(t, p, err);
		goto fail;
	}
	return 0;
fail:
	ntc_close(t);
	return r;
}

/* The stream read to its end, every count checked; with j, the used
 * clusters written to partition i (runs of them at once). */
static int read_ntfsclone(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
			  const struct im_progress *progress, uint64_t *done, uint64_t total,
			  struct im_err *err)
{
	struct ntc t;
	unsigned char *run = NULL;
	size_t run_max, run_n = 0;
	uint64_t idx = 0, run_first = 0, used = 0;
	int rc = ntc_open(&t, dir, p, err);

	if (rc < 0)
		return rc;
	run_max = (4u << 20) / t.cs ? (4u << 20) / t.cs : 1;
	run = malloc(run_max * t.cs);
	if (!run) {
		ntc_close(&t);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	while (rc == 0 && idx < t.clusters) {
		unsigned char cmd, c[8];
		bool flush = false;

		if (ntc_get(&t, &cmd, 1) < 0) {
			rc = ntc_fail(&t, p, err);
			break;
		}
		if (cmd == 0) {
			uint64_t count;
			if (ntc_get(&t, c, 8) < 0) {
				rc = ntc_fail(&t, p, err);
				break;
			}
			count = le64(c);
			if (count == 0 || count > t.clusters - idx) {
				rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					     "partition %s: %s: a gap of %llu clusters at cluster %llu of %llu",
					     p->name, p->stream, (unsigned long long)count,
					     (unsigned long long)idx, (unsigned long long)t.clusters);
				break;
			}
			flush = true;
			idx += count;
		} else if (cmd == 1) {
			if (++used > t.inuse) {
				rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
					     "partition %s: %s: more clusters than the %llu the header says are in use",
					     p->name, p->stream, (unsigned long long)t.inuse);
				break;
			}
			if (run_n == 0)
				run_first = idx;
			if (ntc_get(&t, run + run_n * t.cs, t.cs) < 0) {
				rc = ntc_fail(&t, p, err);
				break;
			}
			run_n++;
			idx++;
			flush = run_n == run_max || idx == t.clusters;
		} else {
			rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				     "partition %s: %s: an unknown command 0x%02x at cluster %llu",
				     p->name, p->stream, cmd, (unsigned long long)idx);
			break;
		}
		if (flush && run_n) {
			if (j) {
				rc = cz_put(j, i, run_first * t.cs, (uint64_t)run_n * t.cs, run, err);
				j->done += (uint64_t)run_n * t.cs;
			}
			run_n = 0;
			if (rc == 0 && j && j->opts->progress.cancel && *j->opts->progress.cancel)
				rc = im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
			if (j && j->opts->progress.fn)
				j->opts->progress.fn(j->opts->progress.opaque, "restore", j->done,
						     j->total);
			else if (!j && progress && progress->fn && done)
				progress->fn(progress->opaque, "verify", *done + t.s.consumed, total);
		}
	}
	/* The bytes past the last cluster (the backup boot sector). */
	if (rc == 0 && t.device_size > t.clusters * t.cs) {
		size_t n = (size_t)(t.device_size - t.clusters * t.cs);
		unsigned char cmd;
		if (ntc_get(&t, &cmd, 1) < 0 || (cmd == 1 && ntc_get(&t, run, n) < 0))
			rc = ntc_fail(&t, p, err);
		else if (cmd != 1)
			rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				     "partition %s: %s: no bytes past the last cluster (command 0x%02x)",
				     p->name, p->stream, cmd);
		else if (j)
			rc = cz_put(j, i, t.clusters * t.cs, n, run, err);
		if (rc == 0 && j)
			j->done += n;
	}
	if (rc == 0 && used != t.inuse)
		rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
			     "partition %s: %s: %llu clusters stored, the header says %llu",
			     p->name, p->stream, (unsigned long long)used, (unsigned long long)t.inuse);
	if (rc == 0) {
		unsigned char extra;
		if (ntc_get(&t, &extra, 1) == 0)
			rc = im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				     "partition %s: %s: bytes after the image's end", p->name, p->stream);
		else if (!t.eof)
			rc = ntc_fail(&t, p, err);  /* a damaged end, not a clean one */
	}
	free(run);
	ntc_close(&t);
	return rc;
}

int cz_read_stream(const char *dir, const struct cz_part *p, bool read_all,
		   const struct im_progress *progress, uint64_t *done, uint64_t total,
		   struct pcl_header *h, uint64_t *strips, struct im_err *err)
{
	struct czs s;
	struct pcl_reader r;
	unsigned char *buf = NULL;
	uint64_t first;
	ssize_t n = 0;
	int rc;

	if (p->kind == CZ_DD) {
		memset(h, 0, sizeof(*h));
		rc = read_all ? read_dd(dir, p, 0, NULL, progress, done, total, err) : 0;
		if (done)
			*done += p->bytes;
		return rc;
	}
	if (p->kind == CZ_NTFSCLONE) {
		struct ntc t;
		memset(h, 0, sizeof(*h));
		rc = ntc_open(&t, dir, p, err);
		if (rc < 0)
			return rc;
		snprintf(h->tool_version, sizeof(h->tool_version), "%u.%u", t.major, t.minor);
		snprintf(h->fs, sizeof(h->fs), "NTFS");
		h->device_size = t.device_size;
		h->block_size = t.cs;
		h->total_blocks = t.clusters;
		h->used_blocks = t.inuse;
		ntc_close(&t);
		if (read_all)
			rc = read_ntfsclone(dir, p, 0, NULL, progress, done, total, err);
		if (done)
			*done += p->bytes;
		return rc;
	}
	if (p->kind != CZ_PTCL)
		return im_errf(err, IM_EXIT_INTERNAL, -EINVAL, "partition %s has no stream", p->name);
	rc = ptcl_open(&s, &r, dir, p, err);
	if (rc < 0)
		return rc;
	*h = r.h;
	if (read_all) {
		buf = malloc((size_t)64 * r.h.block_size);
		if (!buf)
			rc = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		while (buf && (n = pcl_read_run(&r, &first, buf, 64, err)) > 0)
			if (progress && progress->fn && done)
				progress->fn(progress->opaque, "verify", *done + s.consumed, total);
		if (n < 0)
			rc = stream_failed(&s, p, (int)n, err);
		if (strips)
			*strips = r.h.checksum_mode ? (r.h.used_blocks + r.h.blocks_per_checksum - 1) /
							      r.h.blocks_per_checksum
						    : 0;
	}
	if (done)
		*done += p->bytes;
	free(buf);
	pcl_close(&r);
	czs_close(&s);
	return rc;
}

/* The bytes to write, for progress: each stream's used blocks.  Only the
 * headers and bitmaps are read here (a bitmap is 1/32768 of its partition);
 * this also finds a damaged header before anything is written. */
/* The bytes a stream writes: its used blocks (headers and bitmaps only
 * are read; this also finds a damaged header before anything is
 * written). */
static int stream_used(const char *dir, const struct cz_part *p, uint64_t *used,
		       struct im_err *err)
{
	struct czs s;
	struct pcl_reader r;
	int rc;

	*used = p->kind == CZ_SWAP ? 4096 : p->kind == CZ_DD ? p->size
		: p->kind == CZ_PV ? p->pe_start : 0;
	if (p->kind == CZ_NTFSCLONE) {
		struct ntc t;
		rc = ntc_open(&t, dir, p, err);
		if (rc < 0)
			return rc;
		*used = t.inuse * t.cs + (t.device_size - t.clusters * t.cs);
		ntc_close(&t);
	} else if (p->kind == CZ_PTCL) {
		rc = ptcl_open(&s, &r, dir, p, err);
		if (rc < 0)
			return rc;
		*used = r.h.used_blocks * r.h.block_size;
		pcl_close(&r);
		czs_close(&s);
	}
	return 0;
}

/* The bytes to write, for progress and for --shrink's plan: each
 * partition's (a PV's with its LVs'). */
static int count_used(const char *dir, const struct cz_image *cz, uint64_t *total,
		      uint64_t *used, uint64_t *lv_used, struct im_err *err)
{
	for (size_t i = 0; i < cz->nparts; i++) {
		int rc = stream_used(dir, &cz->parts[i], &used[i], err);
		if (rc < 0)
			return rc;
		*total += used[i];
	}
	for (size_t l = 0; l < cz->nlvs; l++) {
		uint64_t u;
		int rc = stream_used(dir, &cz->lvs[l].part, &u, err);
		if (rc < 0)
			return rc;
		*total += u;
		lv_used[l] = u;
		if (cz->lvs[l].nsegs)
			used[cz->lvs[l].segs[0].part] += u;
	}
	return 0;
}

/* The LVs that lie on partition i alone (a PV), as the shrink planner
 * takes them (fs.h): out[] gets one per LV, at most CZ_MAX_LVS in all.
 * An LV's used bytes are its stream's; one not read by partclone (dd, a
 * swap's header) is kept whole. */
static size_t pv_volumes(const struct cz_image *cz, size_t i, const uint64_t *lv_used,
			 struct fs_volume *out)
{
	size_t n = 0;

	for (size_t l = 0; l < cz->nlvs; l++) {
		const struct cz_lv *lv = &cz->lvs[l];
		struct fs_volume *v = &out[n];
		bool here = lv->nsegs > 0;
		uint64_t size = 0, end = 0;

		for (size_t k = 0; k < lv->nsegs; k++) {
			here &= lv->segs[k].part == i;
			size += lv->segs[k].len;
			if (lv->segs[k].part_off + lv->segs[k].len > end)
				end = lv->segs[k].part_off + lv->segs[k].len;
		}
		if (!here)
			continue;
		memset(v, 0, sizeof(*v));
		snprintf(v->name, sizeof(v->name), "%s/%s", cz->vgs[lv->vg], lv->lv);
		snprintf(v->type, sizeof(v->type), "%s", lv->part.fs);
		snprintf(v->plugin, sizeof(v->plugin), "%s",
			 lv->part.kind == CZ_PTCL ? "partclone" : "whole");
		v->size = size;
		v->used_bytes = lv_used[l];
		v->end = end;
		n++;
	}
	return n;
}

/* A write of [off, off+len) of partition i, or, for an LV (j->lv), of the
 * LV's bytes, split over its segments. */
static int cz_put(struct cz_job *j, size_t i, uint64_t off, uint64_t len, const void *buf,
		  struct im_err *err)
{
	const struct cz_lv *lv = j->lv;
	const unsigned char *b = buf;

	if (!lv)
		return writer_put(j->w, i, off, len, buf, err);
	while (len) {
		size_t k;
		uint64_t n;
		int r;
		for (k = 0; k < lv->nsegs; k++)
			if (off >= lv->segs[k].lv_off && off - lv->segs[k].lv_off < lv->segs[k].len)
				break;
		if (k == lv->nsegs)
			return im_errf(err, IM_EXIT_DAMAGED, -EINVAL,
				       "LV %s: byte %llu of its stream lies outside its extents",
				       lv->part.name, (unsigned long long)off);
		n = lv->segs[k].len - (off - lv->segs[k].lv_off);
		if (n > len)
			n = len;
		r = writer_put(j->w, lv->segs[k].part, lv->segs[k].part_off + (off - lv->segs[k].lv_off),
			       n, b, err);
		if (r < 0)
			return r;
		off += n;
		b += n;
		len -= n;
	}
	return 0;
}

/* One partition's or LV's stream written (j->lv: an LV). */
static int restore_part(const char *dir, const struct cz_part *p, size_t i, struct cz_job *j,
			struct im_err *err)
{
	if (p->kind == CZ_PTCL)
		return restore_ptcl(dir, p, i, j, err);
	if (p->kind == CZ_DD)
		return read_dd(dir, p, i, j, NULL, NULL, 0, err);
	if (p->kind == CZ_NTFSCLONE)
		return read_ntfsclone(dir, p, i, j, NULL, NULL, 0, err);
	if (p->kind == CZ_SWAP && p->size >= 40960) {
		unsigned char swap[4096], uuid[16];
		for (int k = 0, c = 0; p->swap_uuid[0] && k < 16; k++, c += 2) {
			if (p->swap_uuid[c] == '-')
				c++;
			uuid[k] = (unsigned char)strtoul(
				(char[3]){ p->swap_uuid[c], p->swap_uuid[c + 1], 0 }, NULL, 16);
		}
		swap_header_make(swap, p->size, p->swap_uuid[0] ? uuid : NULL, p->swap_label);
		j->done += sizeof(swap);
		return cz_put(j, i, 0, sizeof(swap), swap, err);
	}
	return 0;
}

/* Each PV made afresh from its VG's text. */
static int write_pvs(const char *dir, const struct cz_image *cz, struct cz_job *j,
		     struct im_err *err)
{
	for (size_t v = 0; v < cz->nvgs; v++) {
		struct lvm_vg_map map;
		char *text, why[300];
		size_t len;
		int r = load_vg(dir, cz->vgs[v], &map, &text, &len, err);

		if (r < 0)
			return r;
		for (size_t i = 0; r == 0 && i < cz->nparts; i++) {
			const struct cz_part *p = &cz->parts[i];
			unsigned char *head;
			if (p->kind != CZ_PV || p->vg != v)
				continue;
			if (lvm_pv_head(&map, p->pv, text, len, p->size, &head, why, sizeof(why)) < 0) {
				r = im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "partition %s: VG %s: %s",
					    p->name, cz->vgs[v], why);
				break;
			}
			r = writer_put(j->w, i, 0, p->pe_start, head, err);
			j->done += p->pe_start;
			free(head);
		}
		lvm_vg_map_free(&map);
		free(text);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- the folder as the source of the copy job (copyjob.h) ---- */

struct czsrc {
	const char *dir;
	struct cz_image *cz;
	uint64_t used[CZ_MAX_PARTS], lv_used[CZ_MAX_LVS];
	struct fs_volume *vols;    /* CZ_MAX_LVS: the PVs' LVs, for the shrink planner */
	size_t nvols;
	struct cz_job j;
};

static int czsrc_plan(void *ctx, struct disk_plan *pl, uint64_t *total, struct im_err *err)
{
	struct czsrc *c = ctx;
	const struct cz_image *cz = c->cz;
	int r = disk_plan_alloc(pl, cz->disk_size, cz->table, cz->lss, cz->nparts, 2 + cz->nparts,
				err);

	for (size_t i = 0; r == 0 && i < cz->nparts; i++) {
		const struct cz_part *p = &cz->parts[i];
		disk_plan_set_part(pl, i, p->number,
				   !strcmp(cz->table, "gpt") ? "gpt" : p->logical ? "logical" : "primary",
				   p->start, p->size);
		grow_fs_set(&pl->fs[i], p->fs[0] ? p->fs : NULL, NULL, 0);
	}
	if (r == 0)
		r = plan_areas(c->dir, cz, pl, err);
	if (r == 0)
		r = count_used(c->dir, cz, &c->j.total, c->used, c->lv_used, err);
	*total = c->j.total;
	return r;
}

static void czsrc_shrink_part(void *ctx, size_t i, struct shrink_part *sp)
{
	struct czsrc *c = ctx;

	if (i == 0)
		c->nvols = 0;
	snprintf(sp->fs, sizeof(sp->fs), "%s", c->cz->parts[i].fs);
	sp->used = c->used[i];
	if (c->cz->parts[i].kind == CZ_PV) {
		/* (an LV may shrink with its PV) */
		strcpy(sp->fs, "LVM2_member");
		sp->vols = c->vols + c->nvols;
		sp->nvols = pv_volumes(c->cz, i, c->lv_used, c->vols + c->nvols);
		c->nvols += sp->nvols;
	}
}

/* Partition i's stream; the PVs made afresh before the first, the LVs
 * written after the last. */
static int czsrc_copy(void *ctx, struct copyjob *cj, size_t i, uint64_t from, struct im_err *err)
{
	struct czsrc *c = ctx;
	const struct cz_image *cz = c->cz;
	int r = 0;

	(void)from;   /* (no journal: nothing to resume) */
	if (i == 0) {
		c->j.w = &cj->w;
		c->j.done = 0;
		r = write_pvs(c->dir, cz, &c->j, err);
	}
	if (r == 0)
		r = restore_part(c->dir, &cz->parts[i], i, &c->j, err);
	for (size_t l = 0; r == 0 && i + 1 == cz->nparts && l < cz->nlvs; l++) {
		c->j.lv = &cz->lvs[l];
		r = restore_part(c->dir, &cz->lvs[l].part, 0, &c->j, err);
		c->j.lv = NULL;
	}
	cj->written = c->j.done;
	return r;
}

int cz_restore(const struct disk_roots *roots, const char *dir, const char *target,
	       const struct restore_opts *opts, struct restore_stats *stats, struct im_err *err)
{
	struct czsrc *c = calloc(1, sizeof(*c));
	const struct cj_source src = {
		.ctx = c, .what = "restore", .name = dir, .kind = TJNL_RESTORE,
		.plan = czsrc_plan, .shrink_part = czsrc_shrink_part, .copy = czsrc_copy,
	};
	const struct cj_opts o = cj_restore_opts(roots, target, opts);
	struct cj_stats st = CJ_STATS(stats);
	int r;

	memset(stats, 0, sizeof(*stats));
	if (c) {
		c->dir = dir;
		c->j.opts = opts;
		c->cz = calloc(1, sizeof(*c->cz));
		c->vols = calloc(CZ_MAX_LVS, sizeof(*c->vols));
	}
	if (!c || !c->cz || !c->vols)
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	else
		r = cz_read(dir, c->cz, err);
	if (r == 0)
		r = cj_run(&src, &o, &st, err);
	if (c) {
		free(c->vols);
		free(c->cz);
	}
	free(c);
	return r;
}
