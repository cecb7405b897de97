/* SPDX-License-Identifier: GPL-2.0-or-later */
/* imager info DIR|DISK */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "imager/clonezilla.h"
#include "imager/partclone.h"
#include "util.h"

/* The image's disk: into root, or as text when root is NULL. */
static void cz_head(const char *dir, const struct cz_image *cz, json_object *root)
{
	char size[32];

	if (!root) {
		cli_human(cz->disk_size, size, sizeof(size));
		printf("image %s: a Clonezilla image of %s %s\n  disk %s (%llu bytes%s), sector %u, table %s\n",
		       dir, cz->partitions_only ? "partitions (saveparts) of disk" : "disk", cz->disk, size, (unsigned long long)cz->disk_size,
		       cz->size_known ? "" : ": not recorded, the last partition's end", cz->lss,
		       cz->table);
		if (cz->ext_size) {
			cli_human(cz->ext_size, size, sizeof(size));
			printf("  extended partition %u (%s): %s at %llu (its EBRs made from the table)\n",
			       cz->ext_number, cz->ext_name, size, (unsigned long long)cz->ext_start);
		}
		return;
	}
	json_object_object_add(root, "image", json_object_new_string(dir));
	json_object_object_add(root, "format", json_object_new_string("clonezilla"));
	json_object_object_add(root, "disk", json_object_new_string(cz->disk));
	json_object_object_add(root, "partitions_only", json_object_new_boolean(cz->partitions_only));
	json_object_object_add(root, "table", json_object_new_string(cz->table));
	json_object_object_add(root, "disk_size", json_object_new_uint64(cz->disk_size));
	json_object_object_add(root, "disk_size_recorded", json_object_new_boolean(cz->size_known));
	json_object_object_add(root, "logical_sector_size", json_object_new_int((int)cz->lss));
	if (cz->ext_size) {
		json_object *x = json_object_new_object();
		json_object_object_add(x, "number", json_object_new_int((int)cz->ext_number));
		json_object_object_add(x, "name", json_object_new_string(cz->ext_name));
		json_object_object_add(x, "start", json_object_new_uint64(cz->ext_start));
		json_object_object_add(x, "size", json_object_new_uint64(cz->ext_size));
		json_object_object_add(root, "extended", x);
	}
}

/* A stream with a header (partclone's or ntfsclone's): read it into h. */
static bool cz_headed(const struct cz_part *p)
{
	return p->kind == CZ_PTCL || p->kind == CZ_NTFSCLONE;
}

static const char *cz_stream_format(const struct cz_part *p)
{
	return p->kind == CZ_NTFSCLONE ? "ntfsclone" : p->kind == CZ_PTCL ? "partclone" :
	       strstr(p->stream, "-ptcl-img") ? "partclone.dd" : "dd";
}

static json_object *cz_part_json(const struct cz_image *cz, const struct cz_part *p,
				 const struct pcl_header *h)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "number", json_object_new_int((int)p->number));
	json_object_object_add(o, "name", json_object_new_string(p->name));
	json_object_object_add(o, "kind", json_object_new_string(
		!strcmp(cz->table, "gpt") ? "gpt" : p->logical ? "logical" : "primary"));
	json_object_object_add(o, "start", json_object_new_uint64(p->start));
	json_object_object_add(o, "size", json_object_new_uint64(p->size));
	json_object_object_add(o, "filesystem", json_object_new_string(p->fs));
	json_object_object_add(o, "stream", json_object_new_string(p->stream));
	if (p->kind == CZ_PTCL || p->kind == CZ_DD || p->kind == CZ_NTFSCLONE) {
		json_object_object_add(o, "format", json_object_new_string(cz_stream_format(p)));
		json_object_object_add(o, "compression", json_object_new_string(p->comp));
		json_object_object_add(o, "files", json_object_new_int((int)p->nfiles));
	}
	if (cz_headed(p)) {
		json_object_object_add(o, "block_size", json_object_new_int((int)h->block_size));
		json_object_object_add(o, "used_bytes", json_object_new_uint64(h->used_blocks * h->block_size));
	} else if (p->kind == CZ_SWAP) {
		json_object_object_add(o, "uuid", json_object_new_string(p->swap_uuid));
		json_object_object_add(o, "label", json_object_new_string(p->swap_label));
	}
	return o;
}

static void cz_part_text(const struct cz_image *cz, const struct cz_part *p,
			 const struct pcl_header *h)
{
	char psize[32], used[32] = "?", csum[64] = "";
	const char *files = p->nfiles == 1 ? "" : "s";

	if (cz_headed(p)) {
		cli_human(h->used_blocks * h->block_size, used, sizeof(used));
		if (h->checksum_mode)
			snprintf(csum, sizeof(csum), ", %s every %u block%s",
				 h->checksum_mode == 0x30 ? "XXH64" : h->checksum_mode == 0x31 ? "XXH128"
				 : h->checksum_mode == 0xFF ? "CRC32 (format 0001)" : "CRC32",
				 h->blocks_per_checksum, h->blocks_per_checksum == 1 ? "" : "s");
	}
	cli_human(p->size, psize, sizeof(psize));
	printf("  partition %u (%s): %s at %llu, ", p->number, p->name, psize,
	       (unsigned long long)p->start);
	if (p->kind == CZ_PTCL)
		printf("%s, used %s, stored in %s (%s, %u file%s; partclone %s%s)\n", p->fs, used,
		       p->stream, p->comp, p->nfiles, files, h->tool_version, csum);
	else if (p->kind == CZ_NTFSCLONE)
		printf("ntfs, used %s, stored in %s (%s, %u file%s; ntfsclone image %s)\n", used,
		       p->stream, p->comp, p->nfiles, files, h->tool_version);
	else if (p->kind == CZ_DD)
		printf("every byte stored in %s (%s, %u file%s; %s)\n", p->stream, p->comp, p->nfiles,
		       files, cz_stream_format(p));
	else if (p->kind == CZ_NONE)
		printf("not in the image (restored empty)\n");
	else if (p->kind == CZ_PV)
		printf("LVM2 PV of VG %s (made afresh from %s)\n", cz->vgs[p->vg], p->stream);
	else if (p->kind == CZ_SWAP)
		printf("swap%s%s%s%s (made afresh)\n", p->swap_label[0] ? " label " : "",
		       p->swap_label, p->swap_uuid[0] ? " uuid " : "", p->swap_uuid);
}

static void cz_lv_out(const struct cz_image *cz, const struct cz_lv *lv,
		      const struct pcl_header *h, json_object *root)
{
	const struct cz_part *p = &lv->part;
	char psize[32], used[32] = "";

	cli_human(p->size, psize, sizeof(psize));
	if (cz_headed(p))
		cli_human(h->used_blocks * h->block_size, used, sizeof(used));
	if (root) {
		json_object *o = json_object_new_object(), *lvs;
		json_object_object_add(o, "vg", json_object_new_string(cz->vgs[lv->vg]));
		json_object_object_add(o, "lv", json_object_new_string(lv->lv));
		json_object_object_add(o, "size", json_object_new_uint64(p->size));
		json_object_object_add(o, "linear", json_object_new_boolean(lv->linear));
		json_object_object_add(o, "filesystem", json_object_new_string(p->fs));
		json_object_object_add(o, "stream", json_object_new_string(p->stream));
		if (used[0])
			json_object_object_add(o, "used_bytes",
					       json_object_new_uint64(h->used_blocks * h->block_size));
		if (!json_object_object_get_ex(root, "logical_volumes", &lvs)) {
			lvs = json_object_new_array();
			json_object_object_add(root, "logical_volumes", lvs);
		}
		json_object_array_add(lvs, o);
	} else if (p->kind == CZ_NONE) {
		printf("  LV %s/%s: %s, not in the image (left as the target has it)\n",
		       cz->vgs[lv->vg], lv->lv, psize);
	} else if (p->kind == CZ_SWAP) {
		printf("  LV %s/%s: %s, swap%s%s (made afresh)\n", cz->vgs[lv->vg], lv->lv, psize,
		       p->swap_uuid[0] ? " uuid " : "", p->swap_uuid);
	} else {
		printf("  LV %s/%s: %s, %s%s%s, stored in %s (%s, %u file%s)\n", cz->vgs[lv->vg],
		       lv->lv, psize, p->fs, used[0] ? ", used " : "", used, p->stream, p->comp,
		       p->nfiles, p->nfiles == 1 ? "" : "s");
	}
}

/* Each partition and LV, after reading its stream's header (no block is
 * read: imager verify reads those). */
static int cz_parts_out(const char *dir, const struct cz_image *cz, json_object *root,
			struct im_err *err)
{
	json_object *arr = root ? json_object_new_array() : NULL;

	if (root)
		json_object_object_add(root, "partitions", arr);
	for (size_t i = 0; i < cz->nparts; i++) {
		const struct cz_part *p = &cz->parts[i];
		struct pcl_header h = { 0 };
		if (cz_headed(p) && cz_read_stream(dir, p, false, NULL, NULL, 0, &h, NULL, err) < 0)
			return -1;
		if (root)
			json_object_array_add(arr, cz_part_json(cz, p, &h));
		else
			cz_part_text(cz, p, &h);
	}
	for (size_t l = 0; l < cz->nlvs; l++) {
		struct pcl_header h = { 0 };
		if (cz_headed(&cz->lvs[l].part) &&
		    cz_read_stream(dir, &cz->lvs[l].part, false, NULL, NULL, 0, &h, NULL, err) < 0)
			return -1;
		cz_lv_out(cz, &cz->lvs[l], &h, root);
	}
	return 0;
}

/* A Clonezilla image folder: its disk and each partition's stream, with
 * what the partclone headers say (the streams' headers are read, not the
 * blocks: imager verify reads those). */
static int info_clonezilla(const char *dir, bool json)
{
	struct cz_image *cz = calloc(1, sizeof(*cz));
	struct im_err err = { 0 };
	json_object *root = json ? json_object_new_object() : NULL;
	int r;

	if (!cz) {
		json_object_put(root);
		return IM_EXIT_INTERNAL;
	}
	r = cz_read(dir, cz, &err);
	if (r == 0) {
		cz_head(dir, cz, root);
		r = cz_parts_out(dir, cz, root, &err);
	}
	free(cz);
	if (r < 0) {
		json_object_put(root);
		return cli_fail("info", &err);
	}
	if (root) {
		json_object_object_add(root, "status", json_object_new_string("complete"));
		cli_print_json(root);
	}
	return cli_finish_stdout("info", IM_EXIT_OK);
}

/* "    VG ...", then a line per volume: what it holds, and what was kept. */
static void print_volumes(const char *container, const struct fs_volume *v, size_t n)
{
	if (container[0])
		printf("    %s\n", container);
	for (size_t k = 0; k < n; k++) {
		char size[32], used[32];

		cli_human(v[k].size, size, sizeof(size));
		cli_human(v[k].used_bytes, used, sizeof(used));
		if (!strcmp(v[k].plugin, "whole"))
			printf("    volume %s: %s, imaged whole (%s)\n", v[k].name, size, v[k].note);
		else
			printf("    volume %s: %s, %s%s%s%s%s, used %s (plugin %s)%s%s\n", v[k].name, size,
			       v[k].type[0] ? v[k].type : "unknown", v[k].label[0] ? " label " : "",
			       v[k].label, v[k].uuid[0] ? " uuid " : "", v[k].uuid, used, v[k].plugin,
			       v[k].note[0] ? ": " : "", v[k].note);
	}
}

/* One image of a repository: its format, disk, size and date, as far as
 * they can be read (an image that cannot be read says why). */
static json_object *repo_entry(const char *dir, const struct img_folder_entry *e)
{
	json_object *o = json_object_new_object();
	struct im_err err = { 0 };
	char sub[4200];

	json_object_object_add(o, "name", json_object_new_string(e->name));
	json_object_object_add(o, "format", json_object_new_string(
				       e->kind == IMG_FOLDER_IMAGE ? "imager" : "clonezilla"));
	if (path_join(sub, sizeof(sub), dir, e->name) < 0)
		return o;
	if (e->kind == IMG_FOLDER_IMAGE) {
		struct img_manifest m;
		if (img_manifest_read(&m, sub, &err) == 0) {
			json_object_object_add(o, "created", json_object_new_string(m.created));
			json_object_object_add(o, "source", json_object_new_string(m.source));
			json_object_object_add(o, "disk_size", json_object_new_uint64(m.disk_size));
			json_object_object_add(o, "partitions", json_object_new_int((int)m.nparts));
			img_manifest_free(&m);
		}
	} else {
		struct cz_image *cz = calloc(1, sizeof(*cz));
		if (cz && cz_read(sub, cz, &err) == 0) {
			if (cz->disk[0])
				json_object_object_add(o, "source", json_object_new_string(cz->disk));
			if (cz->size_known)
				json_object_object_add(o, "disk_size", json_object_new_uint64(cz->disk_size));
			json_object_object_add(o, "partitions", json_object_new_int((int)cz->nparts));
		} else if (!cz) {
			im_errf(&err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		}
		free(cz);
	}
	if (err.exit_class)
		json_object_object_add(o, "error", json_object_new_string(err.msg));
	return o;
}

/* A folder of images (Clonezilla's /home/partimag, or a folder of saves):
 * the images in it. */
static int info_repository(const char *dir, const struct img_folder *f, bool json)
{
	json_object *root = json_object_new_object(), *arr = json_object_new_array();

	json_object_object_add(root, "repository", json_object_new_string(dir));
	for (size_t i = 0; i < f->nentries; i++)
		json_object_array_add(arr, repo_entry(dir, &f->entries[i]));
	json_object_object_add(root, "images", arr);
	if (json) {
		cli_print_json(root);
		return cli_finish_stdout("info", IM_EXIT_OK);
	}
	printf("%s: a folder of %zu image%s\n", dir, f->nentries, f->nentries == 1 ? "" : "s");
	for (size_t i = 0; i < f->nentries; i++) {
		json_object *o = json_object_array_get_idx(arr, i), *v;
		char size[32] = "size unknown";
		if (json_object_object_get_ex(o, "disk_size", &v))
			cli_human(json_object_get_uint64(v), size, sizeof(size));
		printf("  %-24s %-10s", f->entries[i].name, json_object_get_string(
			       json_object_object_get(o, "format")));
		if (json_object_object_get_ex(o, "error", &v)) {
			printf(" unreadable: %s\n", json_object_get_string(v));
			continue;
		}
		v = json_object_object_get(o, "partitions");
		printf(" disk %s, %d partition%s", size, json_object_get_int(v),
		       json_object_get_int(v) == 1 ? "" : "s");
		if (json_object_object_get_ex(o, "source", &v))
			printf(", from %s", json_object_get_string(v));
		if (json_object_object_get_ex(o, "created", &v))
			printf(", saved %s", json_object_get_string(v));
		printf("\n");
	}
	json_object_put(root);
	return cli_finish_stdout("info", IM_EXIT_OK);
}

static int info_image(const char *dir, bool json, struct cli *cli)
{
	struct img_manifest m;
	struct img_folder f;
	struct im_err err = { 0 };
	int r;

	(void)cli;
	r = img_folder_probe(dir, &f, &err);   /* (one look says which of them) */
	if (r == 0 && f.kind == IMG_FOLDER_CLONEZILLA) {
		img_folder_free(&f);
		return info_clonezilla(dir, json);
	}
	if (r == 0 && f.kind == IMG_FOLDER_REPOSITORY) {
		r = info_repository(dir, &f, json);
		img_folder_free(&f);
		return r;
	}
	/* Not an image (missing, unfinished, neither's): said from this look,
	 * as img_manifest_read() would say it after a look of its own. */
	if (r == 0 && f.kind != IMG_FOLDER_IMAGE)
		r = img_folder_refuse(&f, dir, &err);
	img_folder_free(&f);
	r = r < 0 ? r : img_manifest_read(&m, dir, &err);
	if (r < 0) {
		bool unfinished = r == -ENOENT && err.exit_class == IM_EXIT_DAMAGED;
		if (json) {
			json_object *root = json_object_new_object();
			json_object_object_add(root, "image", json_object_new_string(dir));
			json_object_object_add(root, "status", json_object_new_string(
						       unfinished ? "unfinished" :
						       err.exit_class == IM_EXIT_DAMAGED ? "damaged" : "not an image"));
			json_object_object_add(root, "error", json_object_new_string(err.msg));
			cli_print_json(root);
			cli_finish_stdout("info", 0);
		}
		return cli_fail("info", &err);
	}
	if (json) {
		json_object *root = img_manifest_to_json(&m);
		json_object_object_add(root, "status", json_object_new_string("complete"));
		cli_print_json(root);
	} else {
		char size[32];
		uint64_t stored = 0;
		cli_human(m.disk_size, size, sizeof(size));
		printf("image %s: complete%s\n  saved %s by imager %s from %s\n  disk %s (%llu bytes), sector %u, table %s\n",
		       dir, m.unreadable.bytes ? " (with unreadable areas, below)" : "", m.created, m.tool_version, m.source, size,
		       (unsigned long long)m.disk_size, m.logical_sector_size, m.table);
		for (size_t i = 0; i < m.nareas; i++)
			printf("  boot area %-10s %10llu bytes at %llu\n", m.areas[i].name,
			       (unsigned long long)m.areas[i].length, (unsigned long long)m.areas[i].offset);
		for (size_t i = 0; i < m.nparts; i++) {
			const struct img_part *p = &m.parts[i];
			char psize[32], used[32], img[32];
			cli_human(p->size, psize, sizeof(psize));
			cli_human(p->used_blocks * p->block_size, used, sizeof(used));
			cli_human(p->stream_size, img, sizeof(img));
			printf("  partition %u: %s at %llu, %s (%s) %s%s%s%s, used %s, stored in %s (%s, %llu frames)\n",
			       p->number, psize, (unsigned long long)p->start,
			       p->filesystem[0] ? p->filesystem : "unknown", p->plugin,
			       p->label[0] ? "label " : "", p->label, p->label[0] ? " " : "",
			       p->uuid, used, p->stream, img, (unsigned long long)p->frames);
			if (!strcmp(p->plugin, "crypt"))
				printf("    encrypted: imaged whole\n");
			print_volumes(p->container, p->volumes, p->nvolumes);
			stored += p->stream_size;
		}
		cli_human(stored, size, sizeof(size));
		printf("  streams total %s\n", size);
		cli_unreadable_lines(stdout, "  ", dir, &m);
	}
	img_manifest_free(&m);
	return cli_finish_stdout("info", IM_EXIT_OK);
}

static int info_disk(const char *name, bool json, struct cli *cli)
{
	struct disk_info *info = calloc(1, sizeof(*info));
	struct im_err err = { 0 };
	int r;

	if (!info)
		return IM_EXIT_INTERNAL;
	r = im_disk_info(&cli->roots, name, info, &err);
	if (r < 0) {
		free(info);
		return cli_fail("info", &err);
	}
	if (json) {
		json_object *root = json_object_new_object(), *parts = json_object_new_array();
		json_object_object_add(root, "path", json_object_new_string(info->path));
		json_object_object_add(root, "format", json_object_new_string(info->format));
		if (info->format_detail[0])
			json_object_object_add(root, "format_detail",
					       json_object_new_string(info->format_detail));
		json_object_object_add(root, "size", json_object_new_uint64(info->size));
		json_object_object_add(root, "logical_sector_size", json_object_new_int((int)info->lss));
		json_object_object_add(root, "table", json_object_new_string(info->table));
		for (size_t i = 0; i < info->nparts; i++) {
			const struct disk_part_info *p = &info->parts[i];
			json_object *o = json_object_new_object();
			json_object_object_add(o, "number", json_object_new_int((int)p->part.number));
			json_object_object_add(o, "start", json_object_new_uint64(p->part.start));
			json_object_object_add(o, "size", json_object_new_uint64(p->part.size));
			json_object_object_add(o, "kind", json_object_new_string(p->part.kind));
			json_object_object_add(o, "filesystem", json_object_new_string(p->fstype));
			json_object_object_add(o, "uuid", json_object_new_string(p->uuid));
			json_object_object_add(o, "label", json_object_new_string(p->label));
			json_object_object_add(o, "plugin", json_object_new_string(p->plugin));
			json_object_object_add(o, "block_size", json_object_new_int((int)p->block_size));
			json_object_object_add(o, "used_blocks", json_object_new_uint64(p->used_blocks));
			if (p->error[0])
				json_object_object_add(o, "error", json_object_new_string(p->error));
			if (p->container[0] || p->nvolumes) {
				json_object_object_add(o, "container", json_object_new_string(p->container));
				json_object_object_add(o, "volumes", img_volumes_to_json(p->volumes, p->nvolumes));
			}
			json_object_array_add(parts, o);
		}
		json_object_object_add(root, "partitions", parts);
		cli_print_json(root);
	} else {
		char size[32];
		cli_human(info->size, size, sizeof(size));
		printf("%s: %s%s%s%s %s (%llu bytes), sector %u, table %s\n", info->path,
		       info->format, info->format_detail[0] ? " (" : "", info->format_detail,
		       info->format_detail[0] ? ")" : "", size, (unsigned long long)info->size,
		       info->lss, info->table);
		for (size_t i = 0; i < info->nparts; i++) {
			const struct disk_part_info *p = &info->parts[i];
			char psize[32], used[32];
			cli_human(p->part.size, psize, sizeof(psize));
			cli_human(p->used_blocks * p->block_size, used, sizeof(used));
			printf("  partition %u (%s): %s at %llu, %s%s%s%s%s",
			       p->part.number, p->part.kind, psize, (unsigned long long)p->part.start,
			       p->fstype[0] ? p->fstype : "unknown", p->label[0] ? " label " : "",
			       p->label, p->uuid[0] ? " uuid " : "", p->uuid);
			if (p->error[0])
				printf(", %s\n", p->error);
			else
				printf(", used %s (plugin %s)%s\n", used, p->plugin,
				       !strcmp(p->plugin, "crypt") ? ", encrypted: imaged whole" : "");
			print_volumes(p->container, p->volumes, p->nvolumes);
		}
	}
	im_disk_info_free(info);
	free(info);
	return cli_finish_stdout("info", IM_EXIT_OK);
}

int cmd_info(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	struct stat st;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'j')
			json = true;
		else
			return cli_usage("info", "unknown option");
	}
	if (argc - optind != 1)
		return cli_usage("info", "needs an image folder or a disk");
	if (stat(argv[optind], &st) == 0 && S_ISDIR(st.st_mode))
		return info_image(argv[optind], json, cli);
	return info_disk(argv[optind], json, cli);
}
