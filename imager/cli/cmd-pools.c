/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager pools: the target host's active storage pools, what is under them,
 * how fast they make writes durable (--probe), which format suits a new disk
 * there, and which pool is best for a disk of --size.
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "imager/pools.h"

/* One decimal is all a rate or a duration means here. */
static json_object *json_tenth(double v)
{
	char s[32];

	snprintf(s, sizeof(s), "%.1f", v);
	return json_object_new_double_s(v, s);
}

static json_object *pool_json(const struct im_pool *p)
{
	json_object *o = json_object_new_object(), *w = json_object_new_array(), *rec, *z;

	json_object_object_add(o, "name", json_object_new_string(p->name));
	json_object_object_add(o, "type", json_object_new_string(p->type));
	json_object_object_add(o, "path", json_object_new_string(p->path));
	json_object_object_add(o, "fstype", json_object_new_string(p->fstype));
	json_object_object_add(o, "source", json_object_new_string(p->source));
	json_object_object_add(o, "capacity", json_object_new_uint64(p->capacity));
	json_object_object_add(o, "allocation", json_object_new_uint64(p->allocation));
	json_object_object_add(o, "available", json_object_new_uint64(p->available));
	json_object_object_add(o, "local", json_object_new_boolean(p->local));
	json_object_object_add(o, "fsyncs", p->fsyncs >= 0 ? json_tenth(p->fsyncs) : NULL);
	json_object_object_add(o, "probe_seconds", json_tenth(p->probe_seconds));
	if (p->probe_note[0])
		json_object_object_add(o, "probe_note", json_object_new_string(p->probe_note));
	if (p->zfs) {
		z = json_object_new_object();
		json_object_object_add(z, "pool", json_object_new_string(p->zpool));
		json_object_object_add(z, "log", p->zfs_log < 0 ? NULL : json_object_new_boolean(p->zfs_log));
		json_object_object_add(z, "arc_max", json_object_new_uint64(p->arc_max));
		json_object_object_add(o, "zfs", z);
	} else {
		json_object_object_add(o, "zfs", NULL);
	}
	rec = json_object_new_object();
	json_object_object_add(rec, "format", json_object_new_string(p->format));
	json_object_object_add(rec, "preallocation", json_object_new_string(p->preallocation));
	json_object_object_add(rec, "reason", json_object_new_string(p->reason));
	json_object_object_add(o, "recommended", rec);
	json_object_object_add(o, "fits", json_object_new_boolean(p->fits));
	json_object_object_add(o, "rank", json_object_new_int(p->rank));
	for (size_t i = 0; i < sizeof(p->warnings) / sizeof(p->warnings[0]); i++)
		if (p->warnings[i][0])
			json_object_array_add(w, json_object_new_string(p->warnings[i]));
	json_object_object_add(o, "warnings", w);
	return o;
}

static void print_text(const char *uri, bool local, const struct im_pool *p, size_t n,
		       uint64_t need, bool sized, bool probed)
{
	char need_h[32];

	cli_human(need, need_h, sizeof(need_h));
	printf("host %s (%s)%s%s: %zu active pool%s\n", uri, local ? "local" : "remote",
	       sized ? ", disk of " : "", sized ? need_h : "", n, n == 1 ? "" : "s");
	printf("%4s %-20s %-8s %-8s %11s %11s %9s %s %s\n", "RANK", "POOL", "TYPE", "FSTYPE",
	       "AVAILABLE", "CAPACITY", "FSYNCS/S", sized ? "FITS" : "", "NEW DISK");
	for (size_t i = 0; i < n; i++) {
		const struct im_pool *q = &p[i];
		char avail[32], cap[32], fs[24] = "-", disk[40];

		cli_human(q->available, avail, sizeof(avail));
		cli_human(q->capacity, cap, sizeof(cap));
		if (q->fsyncs >= 0)
			snprintf(fs, sizeof(fs), "%.1f", q->fsyncs);
		snprintf(disk, sizeof(disk), "%s %s", q->format, q->preallocation);
		printf("%4d %-20s %-8s %-8s %11s %11s %9s %s %s\n", q->rank, q->name, q->type,
		       q->fstype[0] ? q->fstype : "-", avail, cap, fs,
		       sized ? (q->fits ? "yes " : "no  ") : "", disk);
		if (q->path[0])
			printf("     path: %s\n", q->path);
		if (q->source[0])
			printf("     source: %s\n", q->source);
		if (q->zfs) {
			char arc[32] = "unknown";
			if (q->arc_known && q->arc_max)
				cli_human(q->arc_max, arc, sizeof(arc));
			else if (q->arc_known)
				snprintf(arc, sizeof(arc), "no limit");
			printf("     zfs: pool %s, log vdev %s, ARC max %s\n", q->zpool[0] ? q->zpool : "?",
			       q->zfs_log > 0 ? "yes" : q->zfs_log == 0 ? "none" : "unknown", arc);
		}
		if (probed && q->fsyncs >= 0)
			printf("     fsyncs: %.1f per second (%.1f s)\n", q->fsyncs, q->probe_seconds);
		else if (probed)
			printf("     fsyncs: %s\n", q->probe_note[0] ? q->probe_note : "not measured");
		printf("     new disk: %s, preallocation %s: %s\n", q->format, q->preallocation, q->reason);
		for (size_t k = 0; k < sizeof(q->warnings) / sizeof(q->warnings[0]); k++)
			if (q->warnings[k][0])
				printf("     warning: %s\n", q->warnings[k]);
	}
	if (n && p[0].fits)
		printf("best: %s\n", p[0].name);
	else if (sized)
		printf("best: none (no pool has room for %s and its margin)\n", need_h);
	else
		printf("best: none (no pool has room left)\n");
}

/* What the command line asked for. */
struct pools_args {
	const char *uri;
	bool probe, json, sized;
	unsigned seconds;
	uint64_t need;                 /* --size; 0 without */
};

/* Returns IM_EXIT_OK, or the exit code of a bad command line (said). */
static int parse_args(int argc, char **argv, struct pools_args *a)
{
	static const struct option opts[] = {
		{ "connect", required_argument, NULL, 'c' },
		{ "probe", no_argument, NULL, 'p' },
		{ "seconds", required_argument, NULL, 't' },
		{ "size", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c': a->uri = optarg; break;
		case 'p': a->probe = true; break;
		case 't':
			if (cli_parse_uint(optarg, 1, 60, &a->seconds) < 0)
				return cli_usage("pools", "--seconds takes 1..60");
			break;
		case 's':
			if (cli_parse_size(optarg, &a->need) < 0 || !a->need)
				return cli_usage("pools", "--size takes a size such as 20G or 512MiB");
			a->sized = true;
			break;
		case 'j': a->json = true; break;
		default: return cli_usage("pools", "unknown option");
		}
	}
	if (optind < argc)
		return cli_usage("pools", "unexpected argument '%s'", argv[optind]);
	if (a->seconds && !a->probe)
		return cli_usage("pools", "--seconds is for --probe");
	return IM_EXIT_OK;
}

/* The host could not be reached: with --json, a report saying so too. */
static int fail_host(const struct pools_args *a, const struct im_err *err)
{
	if (a->json) {
		json_object *root = json_object_new_object();
		json_object_object_add(root, "ok", json_object_new_boolean(0));
		json_object_object_add(root, "uri", a->uri ? json_object_new_string(a->uri) : NULL);
		json_object_object_add(root, "error", json_object_new_string(err->msg));
		cli_print_json(root);
		cli_finish_stdout("pools", 0);
	}
	return cli_fail("pools", err);
}

/* --probe at -v: which pool is being measured. */
static void say_probe(void *opaque, const char *pool)
{
	if (((struct cli *)opaque)->verbose >= 1)
		fprintf(stderr, "imager pools: measuring %s\n", pool);
}

static void print_json(const char *uri, bool local, const struct im_pool *p, size_t n,
		       uint64_t need)
{
	json_object *root = json_object_new_object(), *arr = json_object_new_array();

	json_object_object_add(root, "ok", json_object_new_boolean(n > 0));
	if (!n)
		json_object_object_add(root, "error", json_object_new_string("no active storage pool"));
	json_object_object_add(root, "uri", json_object_new_string(uri));
	json_object_object_add(root, "local", json_object_new_boolean(local));
	for (size_t i = 0; i < n; i++)
		json_object_array_add(arr, pool_json(&p[i]));
	json_object_object_add(root, "pools", arr);
	json_object_object_add(root, "best", n && p[0].fits ? json_object_new_string(p[0].name) : NULL);
	json_object_object_add(root, "need", json_object_new_uint64(need));
	cli_print_json(root);
}

/* The survey shown: a pool that could not be measured is still listed,
 * with why on stderr. */
static int show_pools(const struct pools_args *a, const struct pools_survey *sv, struct cli *cli)
{
	for (size_t i = 0; i < sv->n; i++)
		if (sv->pools[i].probe_error[0] && cli->verbose >= 0)
			cli_error("pools", "%s: %s", sv->pools[i].name, sv->pools[i].probe_error);
	if (!sv->n)
		cli_error("pools", "no active storage pool on %s (define one: virsh pool-define-as "
			  "NAME dir --target PATH; virsh pool-build NAME; virsh pool-start NAME)",
			  sv->uri);
	if (a->json)
		print_json(sv->uri, sv->local, sv->pools, sv->n, a->need);
	else if (sv->n)
		print_text(sv->uri, sv->local, sv->pools, sv->n, a->need, a->sized, a->probe);
	return cli_finish_stdout("pools", sv->n ? IM_EXIT_OK : IM_EXIT_TARGET);
}

int cmd_pools(int argc, char **argv, struct cli *cli)
{
	struct pools_args a = { 0 };
	struct im_err err = { 0 };
	struct pools_survey sv;
	int rc = parse_args(argc, argv, &a);

	if (rc != IM_EXIT_OK)
		return rc;
	struct pools_survey_opts o = {
		.uri = a.uri, .probe = a.probe, .seconds = a.seconds, .need = a.need,
		.interrupted = cli->interrupted, .on_probe = say_probe, .opaque = cli,
	};
	rc = pools_survey(&o, &sv, &err);
	if (rc == -ECONNREFUSED)
		rc = fail_host(&a, &err);
	else if (rc < 0)
		rc = cli_fail("pools", &err);
	else
		rc = show_pools(&a, &sv, cli);
	pools_survey_free(&sv);
	return rc;
}
