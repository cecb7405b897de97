/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Helpers shared by command code: messages, parsing, progress. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <json-c/json.h>

#include "commands.h"
#include "util.h"
#include "imager/convert.h"
#include "imager/pools.h"

void cli_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "imager%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_fail(const char *cmd, const struct im_err *err)
{
	cli_error(cmd, "%s", err->msg[0] ? err->msg : "failed");
	return im_err_exit(err);
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	const struct command *c = command_find(cmd);

	fprintf(stderr, "imager %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (c)
		fprintf(stderr, "\nusage: imager %s %s", c->name, c->usage);
	fprintf(stderr, "\nTry 'imager %s --help'.\n", cmd);
	return IM_EXIT_USAGE;
}

int cli_help(const char *cmd, FILE *out)
{
	const struct command *c = command_find(cmd);

	if (!c)
		return IM_EXIT_USAGE;
	fprintf(out, "usage: imager %s %s\n\n%s.\n", c->name, c->usage, c->summary);
	fprintf(out, "\nSee imager(1) for every option; exit codes are listed there.\n");
	return IM_EXIT_OK;
}

int cli_finish_stdout(const char *cmd, int rc)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error(cmd, "cannot write to standard output: %s", strerror(errno));
		return rc ? rc : IM_EXIT_IO;
	}
	return rc;
}

int cli_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case '\0': break;
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	case 'P': shift = 50; break;
	default: return -EINVAL;
	}
	if (*end) {
		end++;
		if (!strcasecmp(end, "iB") || !strcasecmp(end, "B"))
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	if (shift && v > (~0ull >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int cli_checkpoint_option(const char *cmd, const char *arg, unsigned *ms)
{
	unsigned s;
	if (cli_parse_uint(arg, 0, 3600, &s) < 0)
		return cli_usage(cmd, "--checkpoint takes seconds from 0 to 3600");
	*ms = s * 1000;
	return IM_EXIT_OK;
}

int cli_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

void cli_human(uint64_t bytes, char *out, size_t len)
{
	util_human_size(bytes, out, len);
}

double cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_progress_init(struct cli_progress *p, bool allowed)
{
	memset(p, 0, sizeof(*p));
	p->enabled = allowed && isatty(STDERR_FILENO);
	p->start = cli_now();
}

void cli_progress_job(struct cli_progress *p, bool allowed, const struct cli *cli,
		      struct im_progress *out)
{
	cli_progress_init(p, allowed && cli->verbose >= 0);
	p->notes = cli->verbose >= 0;
	out->note = cli_progress_note;
	out->fn = cli_progress_cb;
	out->opaque = p;
	out->cancel = cli->interrupted;
}

void cli_progress_cb(void *opaque, const char *phase, uint64_t done, uint64_t total)
{
	struct cli_progress *p = opaque;
	double now, rate, elapsed;
	char d[32], t[32], r[32], eta[32] = "--:--";

	if (!p->enabled)
		return;
	now = cli_now();
	if (p->drawn && now - p->last_draw < 0.25 && done < total)
		return;   /* at most four redraws a second */
	p->last_draw = now;
	p->drawn = true;
	elapsed = now - p->start;
	rate = elapsed > 0 ? (double)done / elapsed : 0;
	cli_human(done, d, sizeof(d));
	cli_human(total, t, sizeof(t));
	cli_human((uint64_t)rate, r, sizeof(r));
	if (rate > 0 && total >= done) {
		unsigned s = (unsigned)((double)(total - done) / rate);
		snprintf(eta, sizeof(eta), "%u:%02u:%02u", s / 3600, s / 60 % 60, s % 60);
	}
	fprintf(stderr, "\r%-8s %10s / %-10s %5.1f%%  %10s/s  ETA %s ", phase, d, t,
		total ? 100.0 * (double)done / (double)total : 100.0, r, eta);
}

void cli_progress_note(void *opaque, const char *line)
{
	struct cli_progress *p = opaque;

	if (!p->notes)
		return;
	if (p->enabled && p->drawn)
		fputs("\r\033[K", stderr);   /* over the progress line */
	fprintf(stderr, "imager: %s\n", line);
	p->drawn = false;
}

void cli_progress_end(struct cli_progress *p)
{
	if (p->enabled && p->drawn)
		fputc('\n', stderr);
}

void cli_print_grow(const struct grow_report *g)
{
	for (size_t i = 0; i < g->nparts; i++) {
		const struct layout_part *p = &g->parts[i];
		char a[32], b[32];
		if (p->new_start == p->old_start && p->new_size == p->old_size)
			continue;
		cli_human(p->old_size, a, sizeof(a));
		cli_human(p->new_size, b, sizeof(b));
		printf("partition %u: %s at %llu -> %s at %llu%s%s%s%s%s\n", p->number, a,
		       (unsigned long long)p->old_start, b, (unsigned long long)p->new_start,
		       g->grown_fs[i][0] ? ", " : "", g->grown_fs[i], g->grown_fs[i][0] ? " grown" : "",
		       g->note[i][0] ? "; " : "", g->note[i]);
	}
}

struct json_object *cli_grow_json(const struct grow_report *g)
{
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < g->nparts; i++) {
		const struct layout_part *p = &g->parts[i];
		json_object *o = json_object_new_object();
		json_object_object_add(o, "number", json_object_new_int((int)p->number));
		json_object_object_add(o, "old_start", json_object_new_uint64(p->old_start));
		json_object_object_add(o, "old_size", json_object_new_uint64(p->old_size));
		json_object_object_add(o, "start", json_object_new_uint64(p->new_start));
		json_object_object_add(o, "size", json_object_new_uint64(p->new_size));
		json_object_object_add(o, "filesystem_grown", json_object_new_boolean(g->grown_fs[i][0] != 0));
		if (g->note[i][0])
			json_object_object_add(o, "note", json_object_new_string(g->note[i]));
		json_object_array_add(arr, o);
	}
	return arr;
}

int cli_job_option(const char *cmd, int c, char *arg, struct cli_job *j,
		   struct cli_target *t)
{
	int r;

	switch (c) {
	case 't':
		if (cli_parse_uint(arg, 1, 256, &j->threads) < 0)
			return cli_usage(cmd, "--threads takes 1..256");
		return IM_EXIT_OK;
	case 'f': j->force = true; return IM_EXIT_OK;
	case 'j': j->json = true; return IM_EXIT_OK;
	case 'P': j->progress = false; return IM_EXIT_OK;
	}
	r = cli_net_option(cmd, c, arg, &j->net);
	if (r == CLI_NOT_MINE && t)
		r = cli_target_option(cmd, c, arg, t);
	return r != CLI_NOT_MINE ? r : cli_usage(cmd, "unknown option");
}

void cli_rescue_opts(struct rescue_opts *o, const struct bk_net *net, int argc, char **argv,
		     char *line, size_t len)
{
	size_t at = 0;
	int n = snprintf(line, len, "imager");

	for (int i = 0; n >= 0 && (size_t)n < len - at && i < argc; i++) {
		at += (size_t)n;
		n = snprintf(line + at, len - at, " %s", argv[i]);
	}
	if (n < 0 || (size_t)n >= len - at)   /* (said, not cut silently) */
		memcpy(line + len - 5, " ...", 5);
	o->on = true;
	o->retries = bk_net_get(net).retries;
	o->cmdline = line;
}

int cli_rescue_report(const char *cmd, const struct rescue_report *rep,
		      const unsigned *numbers, const char *const *filesystems,
		      const uint64_t *bytes, size_t n, struct json_object *json, bool quiet)
{
	char h[32];

	if (json) {
		json_object *o = json_object_new_object(), *parts = json_object_new_array();
		json_object_object_add(o, "bytes", json_object_new_uint64(rep->bytes));
		json_object_object_add(o, "ranges", json_object_new_uint64(rep->ranges));
		json_object_object_add(o, "map", rep->map[0] ? json_object_new_string(rep->map) : NULL);
		for (size_t i = 0; i < n; i++) {
			json_object *p = json_object_new_object();
			if (!bytes[i])
				continue;
			json_object_object_add(p, "number", json_object_new_int((int)numbers[i]));
			json_object_object_add(p, "filesystem", json_object_new_string(filesystems[i]));
			json_object_object_add(p, "bytes", json_object_new_uint64(bytes[i]));
			json_object_array_add(parts, p);
		}
		json_object_object_add(o, "partitions", parts);
		json_object_object_add(json, "unreadable", o);
	}
	if (!rep->bytes)
		return IM_EXIT_OK;
	if (!quiet) {
		cli_human(rep->bytes, h, sizeof(h));
		cli_error(cmd, "complete with unreadable areas: %s (%llu bytes) in %llu range%s, "
			  "filled with zeros", h, (unsigned long long)rep->bytes,
			  (unsigned long long)rep->ranges, rep->ranges == 1 ? "" : "s");
		for (size_t i = 0; i < n; i++) {
			if (!bytes[i])
				continue;
			cli_human(bytes[i], h, sizeof(h));
			cli_error(cmd, "  partition %u (%s): %s (%llu bytes) unreadable", numbers[i],
				  filesystems[i][0] ? filesystems[i] : "unknown", h,
				  (unsigned long long)bytes[i]);
		}
		cli_error(cmd, "  the map (GNU ddrescue's format): %s", rep->map);
	}
	return IM_EXIT_RESCUED;
}

/* The partition holding disk byte off, or NULL. */
static const struct img_part *part_at(const struct img_manifest *m, uint64_t off)
{
	for (size_t i = 0; i < m->nparts; i++)
		if (off >= m->parts[i].start && off - m->parts[i].start < m->parts[i].size)
			return &m->parts[i];
	return NULL;
}

/* A name from the filesystem, its control characters (a newline, an
 * escape sequence) and backslashes shown as \xNN: names are hostile. */
static void put_name(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x20 || c == 0x7f || c == '\\')
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

/* Under a range's line: the files it hits (save --rescue of a local
 * ext2/3/4), one a line, and its blocks that are in no file. */
static void unreadable_files(FILE *f, const char *lead, const struct img_unreadable_range *r)
{
	if (!r->looked_up)
		return;
	for (uint32_t k = 0; k < r->nfiles; k++) {
		fprintf(f, "%s    file: ", lead);
		put_name(f, r->files[k]);
		fputc('\n', f);
	}
	if (r->no_file_blocks)
		fprintf(f, "%s    %llu block%s in no file (free space or filesystem metadata)\n", lead,
			(unsigned long long)r->no_file_blocks, r->no_file_blocks == 1 ? "" : "s");
	if (r->files_partial)
		fprintf(f, "%s    (maybe more files: not every block of it was looked up, or it hits "
			"more than are kept)\n", lead);
	else if (!r->nfiles && !r->no_file_blocks)
		fprintf(f, "%s    (no file found)\n", lead);
}

void cli_unreadable_lines(FILE *f, const char *lead, const char *dir,
			  const struct img_manifest *m)
{
	const struct img_unreadable *u = &m->unreadable;
	char h[32];

	if (!u->bytes)
		return;
	cli_human(u->bytes, h, sizeof(h));
	fprintf(f, "%scomplete with unreadable areas: %s (%llu bytes) in %llu range%s, read as "
		"zeros when saved (map: %s/%s)\n", lead, h, (unsigned long long)u->bytes,
		(unsigned long long)u->ranges, u->ranges == 1 ? "" : "s", dir, u->map);
	for (size_t i = 0; i < m->nparts; i++) {
		const struct img_part *p = &m->parts[i];
		if (!p->unreadable_bytes)
			continue;
		cli_human(p->unreadable_bytes, h, sizeof(h));
		fprintf(f, "%s  partition %u (%s): %s (%llu bytes) unreadable\n", lead, p->number,
			p->filesystem[0] ? p->filesystem : "unknown", h,
			(unsigned long long)p->unreadable_bytes);
	}
	for (size_t i = 0; i < u->nlist; i++) {
		uint64_t a = u->list[i].offset, len = u->list[i].length;
		const struct img_part *p = part_at(m, a);
		fprintf(f, "%s  disk bytes %llu-%llu", lead, (unsigned long long)a,
			(unsigned long long)(a + len - 1));
		if (p && p->block_size)
			fprintf(f, ": partition %u, its %u-byte blocks %llu-%llu", p->number,
				p->block_size, (unsigned long long)((a - p->start) / p->block_size),
				(unsigned long long)((a + len - 1 - p->start) / p->block_size));
		else if (!p)
			fprintf(f, ": outside the partitions (the table or a gap)");
		fputc('\n', f);
		unreadable_files(f, lead, &u->list[i]);
	}
	if (u->ranges > u->nlist)
		fprintf(f, "%s  (%llu more ranges in the map)\n", lead,
			(unsigned long long)(u->ranges - u->nlist));
}

json_object *cli_unreadable_json(const char *dir, const struct img_manifest *m)
{
	const struct img_unreadable *u = &m->unreadable;
	json_object *o = json_object_new_object(), *parts = json_object_new_array(),
		    *list = json_object_new_array();
	char *map = NULL;

	/* (the folder's path whole, however long) */
	if (u->bytes && asprintf(&map, "%s/%s", dir, u->map) < 0)
		map = NULL;
	json_object_object_add(o, "bytes", json_object_new_uint64(u->bytes));
	json_object_object_add(o, "ranges", json_object_new_uint64(u->ranges));
	json_object_object_add(o, "map", map ? json_object_new_string(map) : NULL);
	free(map);
	for (size_t i = 0; i < m->nparts; i++) {
		const struct img_part *p = &m->parts[i];
		json_object *po;
		if (!p->unreadable_bytes)
			continue;
		po = json_object_new_object();
		json_object_object_add(po, "number", json_object_new_int((int)p->number));
		json_object_object_add(po, "filesystem", json_object_new_string(p->filesystem));
		json_object_object_add(po, "bytes", json_object_new_uint64(p->unreadable_bytes));
		json_object_array_add(parts, po);
	}
	for (size_t i = 0; i < u->nlist; i++) {
		const struct img_part *p = part_at(m, u->list[i].offset);
		json_object *e = json_object_new_object();
		json_object_object_add(e, "offset", json_object_new_uint64(u->list[i].offset));
		json_object_object_add(e, "length", json_object_new_uint64(u->list[i].length));
		if (p && p->block_size) {
			json_object_object_add(e, "partition", json_object_new_int((int)p->number));
			json_object_object_add(e, "first_block", json_object_new_uint64(
						       (u->list[i].offset - p->start) / p->block_size));
			json_object_object_add(e, "last_block", json_object_new_uint64(
						       (u->list[i].offset + u->list[i].length - 1 - p->start) /
						       p->block_size));
		}
		if (u->list[i].looked_up) {
			const struct img_unreadable_range *r = &u->list[i];
			json_object *files = json_object_new_array();
			for (uint32_t k = 0; k < r->nfiles; k++)
				json_object_array_add(files, json_object_new_string(r->files[k]));
			json_object_object_add(e, "files", files);
			json_object_object_add(e, "no_file_blocks", json_object_new_uint64(r->no_file_blocks));
			json_object_object_add(e, "files_partial", json_object_new_boolean(r->files_partial));
		}
		json_object_array_add(list, e);
	}
	json_object_object_add(o, "partitions", parts);
	json_object_object_add(o, "list", list);
	return o;
}

int cli_net_option(const char *cmd, int c, const char *arg, struct bk_net *net)
{
	struct bk_net n = bk_net_get(net);

	if (c == CLI_OPT_TIMEOUT) {
		if (cli_parse_uint(arg, 1, 86400, &n.timeout_s) < 0)
			return cli_usage(cmd, "--timeout takes seconds, 1..86400");
	} else if (c == CLI_OPT_RETRIES) {
		if (cli_parse_uint(arg, 0, 100, &n.retries) < 0)
			return cli_usage(cmd, "--retries takes 0..100");
	} else {
		return CLI_NOT_MINE;
	}
	*net = n;
	return IM_EXIT_OK;
}

/* "/dev/sda2", a UUID (hex digits and dashes) or "all". */
static bool key_id_ok(const char *id, size_t len)
{
	if (len == 3 && !memcmp(id, "all", 3))
		return true;
	if (len > 5 && len < 64 && !memcmp(id, "/dev/", 5))
		return true;
	if (len < 8 || len > 64)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isxdigit((unsigned char)id[i]) && id[i] != '-')
			return false;
	return true;
}

/* The first line of path (at most 1 KiB, its newline left out), malloc'ed;
 * NULL with errno set. */
static char *first_line(const char *path)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int e;

	if (!f)
		return NULL;
	n = getline(&line, &cap, f);
	e = n < 0 ? (ferror(f) ? errno : ENODATA) : n > 1025 ? EFBIG : 0;
	fclose(f);
	if (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	if (!e && !n)
		e = ENODATA;
	if (e) {
		if (line)
			explicit_bzero(line, cap);
		free(line);
		errno = e;
		return NULL;
	}
	return line;
}

int cli_key_option(const char *cmd, int c, char *arg, struct cli_keys *k)
{
	const char *opt = c == CLI_OPT_KEY ? "--key" : "--key-file";
	char *colon, *id, *pass;

	if (c != CLI_OPT_KEY && c != CLI_OPT_KEY_FILE)
		return CLI_NOT_MINE;
	colon = strchr(arg, ':');
	if (!colon || !key_id_ok(arg, (size_t)(colon - arg)) || !colon[1])
		return cli_usage(cmd, "%s takes %s, where ID is the volume (/dev/sda2), its UUID or all",
				 opt, c == CLI_OPT_KEY ? "ID:PASSPHRASE" : "ID:FILE");
	if (k->n == CONV_MAX_KEYS)
		return cli_usage(cmd, "at most %d keys", CONV_MAX_KEYS);
	if (!(id = strndup(arg, (size_t)(colon - arg))))
		return cli_error(cmd, "out of memory"), IM_EXIT_INTERNAL;
	if (c == CLI_OPT_KEY) {
		pass = strdup(colon + 1);
		if (pass)   /* (what ps shows from now on) */
			memset(colon + 1, 'x', strlen(colon + 1));
	} else if (!(pass = first_line(colon + 1))) {
		cli_error(cmd, "--key-file %s: %s", colon + 1, strerror(errno));
		free(id);
		return IM_EXIT_USAGE;
	}
	if (!pass) {
		free(id);
		return cli_error(cmd, "out of memory"), IM_EXIT_INTERNAL;
	}
	k->owned[k->nowned++] = id;
	k->owned[k->nowned++] = pass;
	k->k[k->n++] = (struct conv_key){ .id = id, .passphrase = pass };
	return IM_EXIT_OK;
}

void cli_keys_free(struct cli_keys *k)
{
	for (size_t i = 0; i < k->nowned; i++) {
		explicit_bzero(k->owned[i], strlen(k->owned[i]));
		free(k->owned[i]);
	}
	memset(k, 0, sizeof(*k));
}

int cli_target_option(const char *cmd, int c, char *arg, struct cli_target *t)
{
	uint64_t v;
	int r;

	if ((r = cli_key_option(cmd, c, arg, &t->keys)) != CLI_NOT_MINE)
		return r;
	switch (c) {
	case 'F':
		if (strcmp(arg, "raw") && strcmp(arg, "qcow2"))
			return cli_usage(cmd, "--format takes raw or qcow2");
		t->o.format = arg;
		return IM_EXIT_OK;
	case 'p':
		if (bk_prealloc_parse(arg, &t->o.prealloc) < 0)
			return cli_usage(cmd, "--preallocation takes off, metadata, falloc or full");
		return IM_EXIT_OK;
	case 'c':
		if (cli_parse_size(arg, &v) < 0 || v < 512 || v > (2u << 20) || (v & (v - 1)))
			return cli_usage(cmd, "--cluster-size takes a power of two from 512 to 2M");
		t->o.cluster_size = (uint32_t)v;
		return IM_EXIT_OK;
	case 's':
		if (cli_parse_size(arg, &t->o.size) < 0 || !t->o.size)
			return cli_usage(cmd, "--size takes a size such as 20G or 512MiB");
		return IM_EXIT_OK;
	case 'G':
	case 'R':
		if (t->o.grow != GROW_NONE)
			return cli_usage(cmd, "--grow-last and --proportional exclude each other");
		t->o.grow = c == 'G' ? GROW_LAST : GROW_PROPORTIONAL;
		return IM_EXIT_OK;
	case 'H':
		t->o.shrink = true;
		return IM_EXIT_OK;
	case 'C':
		t->convert = true;
		return IM_EXIT_OK;
	case 'b':
		if (!(t->block = conv_block_parse(arg)))
			return cli_usage(cmd, "--block takes virtio-blk or virtio-scsi");
		return IM_EXIT_OK;
	case 'I':
		t->rebuild_initramfs = true;
		return IM_EXIT_OK;
	case 'W':
		t->virtio_win = arg;
		return IM_EXIT_OK;
	}
	return CLI_NOT_MINE;
}

int cli_check_devices(const char *cmd, int n, char **args, struct cli *cli)
{
	for (int i = 0; i < n; i++) {
		char path[700];
		struct stat st;

		if (args[i][0] == '-')
			continue;
		/* (a name too long for path is no device: the job refuses it) */
		if ((strchr(args[i], '/') ? str_copy(path, sizeof(path), args[i]) :
		     path_join(path, sizeof(path), cli->roots.dev, args[i])) < 0)
			continue;
		if (stat(path, &st) != 0 || !S_ISBLK(st.st_mode))
			continue;
		if (access(path, R_OK | W_OK) != 0) {
			cli_error(cmd, "%s: this user may not read and write this block device (%s): "
				  "run imager as root", path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

void cli_print_json(struct json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
					    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}
