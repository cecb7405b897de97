/* SPDX-License-Identifier: GPL-2.0-or-later */
/* manifest.json: written with json-c, read back as hostile input. */
#include "imager/image.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "util.h"

void img_hash_hex(uint64_t h, char out[17])
{
	snprintf(out, 17, "%016" PRIx64, h);
}

int img_hash_parse(const char *s, uint64_t *h)
{
	char *end;

	if (!s || strlen(s) != 16)
		return -EINVAL;
	for (const char *p = s; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return -EINVAL;
	*h = strtoull(s, &end, 16);
	return 0;
}

int img_hash_file(const char *path, uint64_t *size, uint64_t *xxh3)
{
	static const size_t chunk = 1u << 20;
	XXH3_state_t *st = XXH3_createState();
	unsigned char *buf = malloc(chunk);
	uint64_t total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0 || !st || !buf) {
		r = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	XXH3_64bits_reset(st);
	for (;;) {
		ssize_t n = read(fd, buf, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		XXH3_64bits_update(st, buf, (size_t)n);
		total += (uint64_t)n;
	}
	*size = total;
	*xxh3 = XXH3_64bits_digest(st);
out:
	if (fd >= 0)
		close(fd);
	XXH3_freeState(st);
	free(buf);
	return r;
}

void img_manifest_free(struct img_manifest *m)
{
	for (size_t i = 0; m->parts && i < m->nparts; i++)
		free(m->parts[i].volumes);
	for (size_t i = 0; i < IMG_UNREADABLE_LIST; i++) {
		free(m->unreadable.list[i].files);
		m->unreadable.list[i].files = NULL;
		m->unreadable.list[i].nfiles = 0;
	}
	free(m->areas);
	free(m->parts);
	m->areas = NULL;
	m->parts = NULL;
	m->nareas = m->nparts = 0;
}

static void add_str(json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}
static void add_u64(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}
static void add_hash(json_object *o, const char *k, uint64_t v)
{
	char hex[17];
	img_hash_hex(v, hex);
	add_str(o, k, hex);
}

struct json_object *img_manifest_to_json(const struct img_manifest *m)
{
	json_object *root = json_object_new_object(), *disk, *table, *areas, *parts;

	add_str(root, "format", IMG_FORMAT_NAME);
	json_object_object_add(root, "format_version", json_object_new_int(IMG_FORMAT_VERSION));
	add_str(root, "tool_version", m->tool_version);
	add_str(root, "created", m->created);
	disk = json_object_new_object();
	add_str(disk, "source", m->source);
	add_u64(disk, "size", m->disk_size);
	add_u64(disk, "logical_sector_size", m->logical_sector_size);
	add_u64(disk, "physical_sector_size", m->physical_sector_size);
	json_object_object_add(root, "disk", disk);
	table = json_object_new_object();
	add_str(table, "type", m->table);
	json_object_object_add(root, "table", table);
	areas = json_object_new_array();
	for (size_t i = 0; i < m->nareas; i++) {
		const struct img_area *a = &m->areas[i];
		json_object *o = json_object_new_object();
		add_str(o, "name", a->name);
		add_u64(o, "offset", a->offset);
		add_u64(o, "length", a->length);
		add_str(o, "file", a->file);
		add_hash(o, "xxh3", a->xxh3);
		json_object_array_add(areas, o);
	}
	json_object_object_add(root, "boot_areas", areas);
	parts = json_object_new_array();
	for (size_t i = 0; i < m->nparts; i++) {
		const struct img_part *p = &m->parts[i];
		json_object *o = json_object_new_object();
		add_u64(o, "number", p->number);
		add_u64(o, "start", p->start);
		add_u64(o, "size", p->size);
		add_str(o, "kind", p->kind);
		add_str(o, "gpt_name", p->gpt_name);
		add_str(o, "filesystem", p->filesystem);
		add_str(o, "plugin", p->plugin);
		add_str(o, "uuid", p->uuid);
		add_str(o, "label", p->label);
		add_u64(o, "block_size", p->block_size);
		add_u64(o, "block_count", p->block_count);
		add_u64(o, "used_blocks", p->used_blocks);
		add_u64(o, "zero_blocks", p->zero_blocks);
		add_str(o, "stream", p->stream);
		add_u64(o, "stream_size", p->stream_size);
		add_hash(o, "stream_xxh3", p->stream_xxh3);
		add_str(o, "index", p->index);
		add_u64(o, "index_size", p->index_size);
		add_hash(o, "index_xxh3", p->index_xxh3);
		add_u64(o, "frames", p->frames);
		add_u64(o, "data_bytes", p->data_bytes);
		if (p->container[0] || p->nvolumes) {
			add_str(o, "container", p->container);
			json_object_object_add(o, "volumes", img_volumes_to_json(p->volumes, p->nvolumes));
		}
		if (p->unreadable_bytes)
			add_u64(o, "unreadable_bytes", p->unreadable_bytes);
		json_object_array_add(parts, o);
	}
	json_object_object_add(root, "partitions", parts);
	if (m->unreadable.bytes) {
		const struct img_unreadable *u = &m->unreadable;
		json_object *o = json_object_new_object(), *list = json_object_new_array();
		add_u64(o, "bytes", u->bytes);
		add_u64(o, "ranges", u->ranges);
		add_str(o, "map", u->map);
		add_u64(o, "map_size", u->map_size);
		add_hash(o, "map_xxh3", u->map_xxh3);
		for (size_t i = 0; i < u->nlist; i++) {
			const struct img_unreadable_range *ur = &u->list[i];
			json_object *e = json_object_new_object();
			add_u64(e, "offset", ur->offset);
			add_u64(e, "length", ur->length);
			if (ur->looked_up) {
				json_object *files = json_object_new_array();
				for (uint32_t k = 0; k < ur->nfiles; k++)
					json_object_array_add(files, json_object_new_string(ur->files[k]));
				json_object_object_add(e, "files", files);
				if (ur->no_file_blocks)
					add_u64(e, "no_file_blocks", ur->no_file_blocks);
				if (ur->files_partial)
					json_object_object_add(e, "files_partial",
							       json_object_new_boolean(true));
			}
			json_object_array_add(list, e);
		}
		json_object_object_add(o, "list", list);
		json_object_object_add(root, "unreadable", o);
	}
	return root;
}

struct json_object *img_volumes_to_json(const struct fs_volume *v, size_t n)
{
	json_object *vols = json_object_new_array();

	for (size_t k = 0; k < n; k++) {
		json_object *vo = json_object_new_object();
		add_str(vo, "name", v[k].name);
		add_str(vo, "filesystem", v[k].type);
		add_str(vo, "uuid", v[k].uuid);
		add_str(vo, "label", v[k].label);
		add_str(vo, "plugin", v[k].plugin);
		add_str(vo, "note", v[k].note);
		add_u64(vo, "size", v[k].size);
		add_u64(vo, "used_bytes", v[k].used_bytes);
		add_u64(vo, "end", v[k].end);
		json_object_array_add(vols, vo);
	}
	return vols;
}

int img_manifest_write(const struct img_manifest *m, const char *dir, struct im_err *err)
{
	json_object *root = img_manifest_to_json(m);
	char path[4096];
	const char *text;
	int r;

	if (path_join(path, sizeof(path), dir, IMG_MANIFEST) < 0) {
		json_object_put(root);
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: path too long", dir);
	}
	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
					      JSON_C_TO_STRING_NOSLASHESCAPE);
	r = util_write_file_atomic(path, text, strlen(text));
	json_object_put(root);
	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "writing %s: %s", path, strerror(-r));
	return 0;
}

/* ---- reading: every field checked ---- */

struct reader {
	const char *path;
	struct im_err *err;
	int r;
};

static json_object *get(struct reader *rd, json_object *o, const char *key, json_type type)
{
	json_object *v;

	if (rd->r < 0)
		return NULL;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type)) {
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
				"%s: field \"%s\" is missing or of the wrong type", rd->path, key);
		return NULL;
	}
	return v;
}

static void get_str(struct reader *rd, json_object *o, const char *key, char *out, size_t len)
{
	json_object *v = get(rd, o, key, json_type_string);
	if (!v)
		return;
	if ((size_t)json_object_get_string_len(v) >= len) {
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG, "%s: field \"%s\" is too long",
				rd->path, key);
		return;
	}
	snprintf(out, len, "%s", json_object_get_string(v));
}

static uint64_t get_u64(struct reader *rd, json_object *o, const char *key, uint64_t max)
{
	json_object *v = get(rd, o, key, json_type_int);
	uint64_t u;

	if (!v)
		return 0;
	/* json-c keeps negative numbers as int64; uint64 getter clamps them to 0. */
	if (json_object_get_int64(v) < 0) {
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG, "%s: field \"%s\" is negative",
				rd->path, key);
		return 0;
	}
	u = json_object_get_uint64(v);
	if (u > max) {
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
				"%s: field \"%s\" = %llu is out of range", rd->path, key,
				(unsigned long long)u);
		return 0;
	}
	return u;
}

#define MAX_ITEMS 4096           /* boot areas or partitions in one manifest */

/* The array at key, of at most MAX_ITEMS entries, with room calloc'ed for
 * as many items of item_size (NULL when empty or on error); *n its length,
 * 0 on error. */
static void *get_items(struct reader *rd, json_object *root, const char *key, const char *plural,
		       size_t item_size, json_object **arr, size_t *n)
{
	void *items = NULL;

	*n = 0;
	if (!(*arr = get(rd, root, key, json_type_array)))
		return NULL;
	*n = json_object_array_length(*arr);
	if (*n > MAX_ITEMS)
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG, "%s: too many %s", rd->path, plural);
	else if (*n && !(items = calloc(*n, item_size)))
		rd->r = im_errf(rd->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	if (rd->r < 0)
		*n = 0;
	return items;
}

/* Entry i of an array, which must be an object. */
static json_object *get_item(struct reader *rd, json_object *arr, size_t i, const char *what)
{
	json_object *o = json_object_array_get_idx(arr, i);

	if (!json_object_is_type(o, json_type_object)) {
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG, "%s: bad %s", rd->path, what);
		return NULL;
	}
	return o;
}

/* The optional "container" and "volumes" of a partition (LVM). */
static void read_volumes(struct reader *rd, json_object *o, struct img_part *p)
{
	json_object *arr;
	size_t n;

	if (rd->r < 0 || !json_object_object_get_ex(o, "container", NULL))
		return;
	get_str(rd, o, "container", p->container, sizeof(p->container));
	if (!(arr = get(rd, o, "volumes", json_type_array)))
		return;
	n = json_object_array_length(arr);
	if (n > FS_MAX_VOLUMES) {
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG, "%s: partition %u: too many volumes",
				rd->path, p->number);
		return;
	}
	if (n && !(p->volumes = calloc(n, sizeof(*p->volumes)))) {
		rd->r = im_errf(rd->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		return;
	}
	for (size_t k = 0; k < n && rd->r == 0; k++) {
		json_object *vo = get_item(rd, arr, k, "volume");
		struct fs_volume *v = &p->volumes[k];

		if (!vo)
			return;
		get_str(rd, vo, "name", v->name, sizeof(v->name));
		get_str(rd, vo, "filesystem", v->type, sizeof(v->type));
		get_str(rd, vo, "uuid", v->uuid, sizeof(v->uuid));
		get_str(rd, vo, "label", v->label, sizeof(v->label));
		get_str(rd, vo, "plugin", v->plugin, sizeof(v->plugin));
		get_str(rd, vo, "note", v->note, sizeof(v->note));
		v->size = get_u64(rd, vo, "size", p->size);
		v->used_bytes = get_u64(rd, vo, "used_bytes", p->size);
		v->end = get_u64(rd, vo, "end", p->size);
		p->nvolumes = k + 1;
	}
}

static void get_hash(struct reader *rd, json_object *o, const char *key, uint64_t *h)
{
	char hex[32] = "";
	get_str(rd, o, key, hex, sizeof(hex));
	if (rd->r == 0 && img_hash_parse(hex, h) < 0)
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG, "%s: field \"%s\" is not a hash",
				rd->path, key);
}

/* A file name inside the image folder: plain, no path. */
static void check_name(struct reader *rd, const char *name)
{
	if (rd->r < 0)
		return;
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") ||
	    name[0] == '.')
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
				"%s: file name \"%s\" is not a plain name", rd->path, name);
}

#define MAX_DISK (1ull << 56)   /* 64 PiB: anything larger is a lie */
/* DIR/manifest.json, whole.  Without it, a missing folder is told apart
 * from a save that never finished (the manifest is written last) by a look
 * at the folder: restore, verify and p2v read the manifest without one of
 * their own (info, which looks first, says what a folder that is no image
 * is without coming here). */
static int read_manifest_text(const char *dir, const char *path, unsigned char **text,
			      size_t *len, struct im_err *err)
{
	int r = util_read_whole_file(path, text, len, 64u << 20);

	if (r == -ENOENT) {
		struct img_folder f;
		r = img_folder_probe(dir, &f, err);
		if (r == 0 && f.kind == IMG_FOLDER_IMAGE)   /* (gone in between) */
			f.kind = IMG_FOLDER_UNFINISHED;
		if (r == 0)
			r = img_folder_refuse(&f, dir, err);
		img_folder_free(&f);
		return r < 0 ? r : -ENOENT;   /* (refuse names every kind but an image) */
	}
	if (r < 0)
		return im_errf(err, IM_EXIT_DAMAGED, r, "%s: %s", path, strerror(-r));
	return 0;
}

/* The text as one JSON object with nothing after it, or NULL.  Nesting is
 * bounded (64 levels): the text is hostile. */
static json_object *parse_object(const unsigned char *text, size_t len)
{
	json_tokener *tok = json_tokener_new_ex(64);
	json_object *root;

	if (!tok)
		return NULL;
	root = json_tokener_parse_ex(tok, (const char *)text, (int)len);
	if (json_tokener_get_error(tok) != json_tokener_success || tok->char_offset != (int)len ||
	    !json_object_is_type(root, json_type_object)) {
		json_object_put(root);
		root = NULL;
	}
	json_tokener_free(tok);
	return root;
}

/* "format" and its version first: anything else is not ours to read. */
static void read_top_fields(struct reader *rd, json_object *root, struct img_manifest *m)
{
	char fmt[64] = "";

	get_str(rd, root, "format", fmt, sizeof(fmt));
	if (rd->r == 0 && strcmp(fmt, IMG_FORMAT_NAME))
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG, "%s: not an imager image", rd->path);
	if (rd->r == 0 && get_u64(rd, root, "format_version", 1000) != IMG_FORMAT_VERSION && rd->r == 0)
		rd->r = im_errf(rd->err, IM_EXIT_UNSUPP, -ENOTSUP,
				"%s: image format version not supported", rd->path);
	get_str(rd, root, "tool_version", m->tool_version, sizeof(m->tool_version));
	get_str(rd, root, "created", m->created, sizeof(m->created));
}

static void read_disk(struct reader *rd, json_object *root, struct img_manifest *m)
{
	json_object *o = get(rd, root, "disk", json_type_object);

	if (!o)
		return;
	get_str(rd, o, "source", m->source, sizeof(m->source));
	m->disk_size = get_u64(rd, o, "size", MAX_DISK);
	m->logical_sector_size = (unsigned)get_u64(rd, o, "logical_sector_size", 65536);
	m->physical_sector_size = (unsigned)get_u64(rd, o, "physical_sector_size", 1u << 20);
}

static void read_table(struct reader *rd, json_object *root, struct img_manifest *m)
{
	json_object *o = get(rd, root, "table", json_type_object);

	if (o)
		get_str(rd, o, "type", m->table, sizeof(m->table));
	if (rd->r == 0 && strcmp(m->table, "msdos") && strcmp(m->table, "gpt") && strcmp(m->table, "none"))
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG, "%s: unknown table type \"%s\"",
				rd->path, m->table);
}

/* Checked after the table's type, so that of two faults the same one is
 * named as always. */
static void check_sector_size(struct reader *rd, const struct img_manifest *m)
{
	unsigned lss = m->logical_sector_size;

	if (rd->r == 0 && (lss < 512 || (lss & (lss - 1))))
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG, "%s: bad sector size", rd->path);
}

static void read_boot_area(struct reader *rd, json_object *o, const struct img_manifest *m,
			   struct img_area *a)
{
	get_str(rd, o, "name", a->name, sizeof(a->name));
	a->offset = get_u64(rd, o, "offset", MAX_DISK);
	a->length = get_u64(rd, o, "length", 1ull << 30);
	get_str(rd, o, "file", a->file, sizeof(a->file));
	get_hash(rd, o, "xxh3", &a->xxh3);
	check_name(rd, a->file);
	if (rd->r == 0 && (a->offset > m->disk_size || a->length > m->disk_size - a->offset))
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
				"%s: boot area %s lies outside the disk", rd->path, a->name);
}

static void read_boot_areas(struct reader *rd, json_object *root, struct img_manifest *m)
{
	json_object *arr, *o;
	size_t n;

	m->areas = get_items(rd, root, "boot_areas", "boot areas", sizeof(*m->areas), &arr, &n);
	for (size_t i = 0; i < n && rd->r == 0; i++) {
		if (!(o = get_item(rd, arr, i, "boot area")))
			break;
		read_boot_area(rd, o, m, &m->areas[i]);
		m->nareas = i + 1;
	}
}

static void read_partition_fields(struct reader *rd, json_object *o, struct img_part *p)
{
	p->number = (unsigned)get_u64(rd, o, "number", 1u << 20);
	p->start = get_u64(rd, o, "start", MAX_DISK);
	p->size = get_u64(rd, o, "size", MAX_DISK);
	get_str(rd, o, "kind", p->kind, sizeof(p->kind));
	get_str(rd, o, "gpt_name", p->gpt_name, sizeof(p->gpt_name));
	get_str(rd, o, "filesystem", p->filesystem, sizeof(p->filesystem));
	get_str(rd, o, "plugin", p->plugin, sizeof(p->plugin));
	get_str(rd, o, "uuid", p->uuid, sizeof(p->uuid));
	get_str(rd, o, "label", p->label, sizeof(p->label));
	p->block_size = (uint32_t)get_u64(rd, o, "block_size", 1u << 20);
	p->block_count = get_u64(rd, o, "block_count", MAX_DISK);
	p->used_blocks = get_u64(rd, o, "used_blocks", MAX_DISK);
	p->zero_blocks = get_u64(rd, o, "zero_blocks", MAX_DISK);
	get_str(rd, o, "stream", p->stream, sizeof(p->stream));
	p->stream_size = get_u64(rd, o, "stream_size", MAX_DISK);
	get_hash(rd, o, "stream_xxh3", &p->stream_xxh3);
	get_str(rd, o, "index", p->index, sizeof(p->index));
	p->index_size = get_u64(rd, o, "index_size", 1ull << 34);
	get_hash(rd, o, "index_xxh3", &p->index_xxh3);
	p->frames = get_u64(rd, o, "frames", MAX_DISK);
	p->data_bytes = get_u64(rd, o, "data_bytes", MAX_DISK);
	if (json_object_object_get_ex(o, "unreadable_bytes", NULL))
		p->unreadable_bytes = get_u64(rd, o, "unreadable_bytes", p->size);
	check_name(rd, p->stream);
	check_name(rd, p->index);
}

/* One partition on its own: inside the disk, its blocks inside it, and its
 * block counts adding up to the data the stream holds. */
static void check_partition(struct reader *rd, const struct img_manifest *m, const struct img_part *p)
{
	if (p->start > m->disk_size || p->size > m->disk_size - p->start)
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
				"%s: partition %u (%llu bytes at %llu) lies outside the %llu-byte disk",
				rd->path, p->number, (unsigned long long)p->size,
				(unsigned long long)p->start, (unsigned long long)m->disk_size);
	else if (p->block_size < 512 || (p->block_size & (p->block_size - 1)) ||
		 p->block_count > p->size / p->block_size)
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
				"%s: partition %u: %llu blocks of %u bytes do not fit in it",
				rd->path, p->number, (unsigned long long)p->block_count, p->block_size);
	else if (p->used_blocks > p->block_count || p->zero_blocks > p->used_blocks ||
		 p->data_bytes != (p->used_blocks - p->zero_blocks) * p->block_size)
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
				"%s: partition %u: block counts are not consistent", rd->path, p->number);
}

/* Partition i against those before it: no number, stream or byte shared. */
static void check_against_earlier(struct reader *rd, const struct img_manifest *m, size_t i)
{
	const struct img_part *p = &m->parts[i];

	for (size_t k = 0; k < i && rd->r == 0; k++) {
		const struct img_part *q = &m->parts[k];
		if (q->number == p->number || !strcmp(q->stream, p->stream) ||
		    (p->start < q->start + q->size && q->start < p->start + p->size))
			rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
					"%s: partitions %u and %u overlap or share files",
					rd->path, q->number, p->number);
	}
}

static void read_partitions(struct reader *rd, json_object *root, struct img_manifest *m)
{
	json_object *arr, *o;
	size_t n;

	m->parts = get_items(rd, root, "partitions", "partitions", sizeof(*m->parts), &arr, &n);
	for (size_t i = 0; i < n && rd->r == 0; i++) {
		struct img_part *p = &m->parts[i];

		if (!(o = get_item(rd, arr, i, "partition")))
			break;
		read_partition_fields(rd, o, p);
		m->nparts = i + 1;   /* (so that img_manifest_free() sees its volumes) */
		read_volumes(rd, o, p);
		if (rd->r < 0)
			break;
		check_partition(rd, m, p);
		check_against_earlier(rd, m, i);
	}
}

/* A listed range's optional "files" (save --rescue of a local ext2/3/4),
 * with "no_file_blocks" and "files_partial": at most IMG_UNREADABLE_FILES
 * strings, each non-empty, shorter than IMG_UNREADABLE_NAME, without NUL,
 * a path ("/...") or a note ("<inode 8>"). */
static void read_range_files(struct reader *rd, json_object *e, size_t i,
			     struct img_unreadable_range *ur)
{
	json_object *arr, *f;
	size_t n;

	if (rd->r < 0 || !json_object_object_get_ex(e, "files", NULL))
		return;
	if (!(arr = get(rd, e, "files", json_type_array)))
		return;
	n = json_object_array_length(arr);
	if (n > IMG_UNREADABLE_FILES) {
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
				"%s: unreadable range %zu: too many files", rd->path, i);
		return;
	}
	if (n && !(ur->files = calloc(n, sizeof(*ur->files)))) {
		rd->r = im_errf(rd->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		return;
	}
	for (size_t k = 0; k < n; k++) {
		const char *s;
		size_t len;

		f = json_object_array_get_idx(arr, k);
		if (!json_object_is_type(f, json_type_string) ||
		    (len = (size_t)json_object_get_string_len(f)) == 0 ||
		    len >= IMG_UNREADABLE_NAME || strlen(s = json_object_get_string(f)) != len ||
		    (s[0] != '/' && s[0] != '<')) {
			rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
					"%s: unreadable range %zu: bad file name", rd->path, i);
			return;
		}
		memcpy(ur->files[k], s, len + 1);
		ur->nfiles = (uint32_t)(k + 1);
	}
	ur->looked_up = true;
	if (json_object_object_get_ex(e, "no_file_blocks", NULL))
		ur->no_file_blocks = get_u64(rd, e, "no_file_blocks", 1u << 16);
	if (json_object_object_get_ex(e, "files_partial", NULL) &&
	    (f = get(rd, e, "files_partial", json_type_boolean)))
		ur->files_partial = json_object_get_boolean(f);
}

/* The optional "unreadable" object (save --rescue): counts inside the
 * disk, a plain map name, each listed range inside the disk. */
static void read_unreadable(struct reader *rd, json_object *root, struct img_manifest *m)
{
	struct img_unreadable *u = &m->unreadable;
	json_object *o, *arr, *e;
	size_t n;

	if (rd->r < 0 || !json_object_object_get_ex(root, "unreadable", NULL))
		return;
	if (!(o = get(rd, root, "unreadable", json_type_object)))
		return;
	u->bytes = get_u64(rd, o, "bytes", m->disk_size);
	u->ranges = get_u64(rd, o, "ranges", m->disk_size / 512);
	get_str(rd, o, "map", u->map, sizeof(u->map));
	u->map_size = get_u64(rd, o, "map_size", 1ull << 34);
	get_hash(rd, o, "map_xxh3", &u->map_xxh3);
	check_name(rd, u->map);
	if (!(arr = get(rd, o, "list", json_type_array)))
		return;
	n = json_object_array_length(arr);
	if (rd->r == 0 && (n > IMG_UNREADABLE_LIST || n > u->ranges || !u->bytes))
		rd->r = im_errf(rd->err, IM_EXIT_DAMAGED, -EBADMSG,
				"%s: the unreadable ranges are not consistent", rd->path);
	for (size_t i = 0; i < n && rd->r == 0; i++) {
		if (!(e = get_item(rd, arr, i, "unreadable range")))
			break;
		u->list[i].offset = get_u64(rd, e, "offset", m->disk_size);
		u->list[i].length = get_u64(rd, e, "length", m->disk_size - u->list[i].offset);
		u->nlist = i + 1;
		read_range_files(rd, e, i, &u->list[i]);
	}
}

int img_manifest_read(struct img_manifest *m, const char *dir, struct im_err *err)
{
	struct reader rd = { .err = err };
	char path[4096];
	unsigned char *text;
	size_t len;
	json_object *root;
	int r;

	memset(m, 0, sizeof(*m));
	if (path_join(path, sizeof(path), dir, IMG_MANIFEST) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: path too long", dir);
	rd.path = path;
	r = read_manifest_text(dir, path, &text, &len, err);
	if (r < 0)
		return r;
	root = parse_object(text, len);
	free(text);
	if (!root)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s: not valid JSON", path);
	read_top_fields(&rd, root, m);
	read_disk(&rd, root, m);
	read_table(&rd, root, m);
	check_sector_size(&rd, m);
	read_boot_areas(&rd, root, m);
	read_partitions(&rd, root, m);
	read_unreadable(&rd, root, m);
	json_object_put(root);
	if (rd.r < 0)
		img_manifest_free(m);
	return rd.r;
}
