/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager migrate PLAN [--dry-run] [--json] [--state FILE] [--per-host N]
 *                [--jobs N] [--start] [--timeout SECONDS] [--retries N]
 *
 * Many machines onto many libvirt hosts from one plan file, each machine
 * moved as `imager p2v` moves it.  The engine is mig_run()
 * (include/imager/migrate.h: the plan's format, the placement, the state
 * file); this file parses the options, calls it, tells what happens on
 * stderr and prints the placement or the report on stdout (text, or
 * --json).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "commands.h"
#include "imager/migrate.h"

enum { OPT_DRY_RUN = 400, OPT_JSON, OPT_STATE, OPT_PER_HOST, OPT_JOBS, OPT_START };

struct show {
	const struct cli *cli;
	const struct mig_plan *p;
	bool json;
};

static void on_event(void *opaque, enum mig_event ev, int machine, const char *msg)
{
	struct show *s = opaque;

	(void)machine;
	if (ev == MIG_EV_WARNING)
		fprintf(stderr, "imager migrate: warning: %s\n", msg);
	else if (s->cli->verbose >= 0 && !s->json)
		fprintf(stderr, "imager migrate: %s%s\n", ev == MIG_EV_SURVEY ? "looking at " : "", msg);
}

static const char *host_of(const struct mig_plan *p, const struct mig_machine *m)
{
	return m->host >= 0 && (size_t)m->host < p->nh ? p->h[m->host].uri : "";
}

static double seconds_of(const struct mig_machine *m)
{
	return m->t_end > m->t_start && m->t_start > 0 ? m->t_end - m->t_start : 0;
}

static json_object *machine_json(const struct mig_plan *p, const struct mig_machine *m, bool dry)
{
	json_object *o = json_object_new_object();
	char s[32];

	json_object_object_add(o, "name", json_object_new_string(m->name));
	json_object_object_add(o, "status", json_object_new_string(mig_status_name(m->status)));
	json_object_object_add(o, "host", m->host >= 0 ? json_object_new_string(host_of(p, m)) : NULL);
	json_object_object_add(o, "pool", m->pool[0] ? json_object_new_string(m->pool) : NULL);
	json_object_object_add(o, "need", json_object_new_uint64(m->need));
	json_object_object_add(o, "memory_mib",
			       json_object_new_uint64(m->memory_mib ? m->memory_mib : MIG_DEFAULT_MEMORY_MIB));
	json_object_object_add(o, "vcpus", json_object_new_int((int)(m->vcpus ? m->vcpus : MIG_DEFAULT_VCPUS)));
	if (!dry) {
		snprintf(s, sizeof(s), "%.1f", seconds_of(m));
		json_object_object_add(o, "bytes", json_object_new_uint64(m->bytes));
		json_object_object_add(o, "seconds", json_object_new_double_s(seconds_of(m), s));
		json_object_object_add(o, "attempts", json_object_new_int((int)m->attempts));
		json_object_object_add(o, "redone", json_object_new_boolean(m->redone));
		json_object_object_add(o, "convert", m->convert_result[0]
						     ? json_object_new_string(m->convert_result) : NULL);
		json_object_object_add(o, "started", json_object_new_boolean(m->started));
		json_object_object_add(o, "exit", json_object_new_int(m->status == MIG_DONE ? 0
								       : m->status == MIG_UNPLACED ? IM_EXIT_TARGET
								       : m->exit));
	}
	json_object_object_add(o, "error", m->why[0] ? json_object_new_string(m->why) : NULL);
	return o;
}

static json_object *hosts_json(const struct mig_plan *p)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; i < p->nh; i++) {
		const struct mig_host *h = &p->h[i];
		json_object *o = json_object_new_object(), *pools = json_object_new_array();

		json_object_object_add(o, "uri", json_object_new_string(h->uri));
		json_object_object_add(o, "reached", json_object_new_boolean(h->reached));
		if (h->reached) {
			json_object_object_add(o, "free_mib", json_object_new_uint64(h->free_mib));
			json_object_object_add(o, "cpus", json_object_new_int((int)h->cpus));
		}
		if (h->error[0])
			json_object_object_add(o, "error", json_object_new_string(h->error));
		for (size_t k = 0; k < h->nps; k++) {
			json_object *q = json_object_new_object();
			char s[32];

			snprintf(s, sizeof(s), "%.1f", h->ps[k].fsyncs);
			json_object_object_add(q, "name", json_object_new_string(h->ps[k].name));
			json_object_object_add(q, "available", json_object_new_uint64(h->ps[k].available));
			json_object_object_add(q, "fsyncs", h->ps[k].fsyncs >= 0
							    ? json_object_new_double_s(h->ps[k].fsyncs, s) : NULL);
			json_object_array_add(pools, q);
		}
		json_object_object_add(o, "pools", pools);
		json_object_array_add(a, o);
	}
	return a;
}

static void print_text(const struct mig_plan *p, bool dry)
{
	char h[32], need[32];

	if (dry)
		printf("placement (dry run):\n");
	for (size_t i = 0; i < p->nm; i++) {
		const struct mig_machine *m = &p->m[i];

		cli_human(m->need, need, sizeof(need));
		cli_human(m->bytes, h, sizeof(h));
		if (m->status == MIG_UNPLACED)
			printf("%s: unplaced: %s\n", m->name, m->why);
		else if (m->status == MIG_FAILED && m->host < 0)
			printf("%s: failed: %s\n", m->name, m->why);
		else if (dry)
			printf("%s: %s, pool %s (%s of disks, %llu MiB, %u vCPUs)%s\n", m->name,
			       host_of(p, m), m->pool, need,
			       (unsigned long long)(m->memory_mib ? m->memory_mib : MIG_DEFAULT_MEMORY_MIB),
			       m->vcpus ? m->vcpus : MIG_DEFAULT_VCPUS,
			       m->status == MIG_DONE ? " (done)" : "");
		else if (m->status == MIG_DONE)
			printf("%s: done on %s, pool %s, %s in %.1f s%s, convert: %s%s\n", m->name,
			       host_of(p, m), m->pool, h, seconds_of(m), m->redone ? " (done again)" : "",
			       m->convert_result[0] ? m->convert_result : "-", m->started ? ", started" : "");
		else
			printf("%s: %s on %s, pool %s: %s\n", m->name, mig_status_name(m->status),
			       host_of(p, m), m->pool, m->why[0] ? m->why : "not finished");
	}
}

static int migrate_report(const struct mig_plan *p, bool dry, bool json, const char *state,
			  const struct cli *cli)
{
	int rc = mig_exit_code(p, dry);

	if (json) {
		json_object *o = json_object_new_object(), *a = json_object_new_array();

		json_object_object_add(o, "dry_run", json_object_new_boolean(dry));
		json_object_object_add(o, "state", json_object_new_string(state));
		for (size_t i = 0; i < p->nm; i++)
			json_object_array_add(a, machine_json(p, &p->m[i], dry));
		json_object_object_add(o, "machines", a);
		json_object_object_add(o, "hosts", hosts_json(p));
		json_object_object_add(o, "exit", json_object_new_int(rc));
		cli_print_json(o);
	} else if (cli->verbose >= 0 || rc) {
		print_text(p, dry);
	}
	return cli_finish_stdout("migrate", rc);
}

int cmd_migrate(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "state", required_argument, NULL, OPT_STATE },
		{ "per-host", required_argument, NULL, OPT_PER_HOST },
		{ "jobs", required_argument, NULL, OPT_JOBS },
		{ "start", no_argument, NULL, OPT_START },
		{ "timeout", required_argument, NULL, CLI_OPT_TIMEOUT },
		{ "retries", required_argument, NULL, CLI_OPT_RETRIES },
		{ NULL, 0, NULL, 0 },
	};
	struct mig_opts o = { .per_host = MIG_DEFAULT_PER_HOST };
	struct mig_plan p;
	struct show s = { .cli = cli };
	struct im_err err = { 0 };
	char *state = NULL;
	int c, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int t = cli_net_option("migrate", c, optarg, &o.net);

		if (t != CLI_NOT_MINE) {
			if (t != IM_EXIT_OK)
				return t;
			continue;
		}
		switch (c) {
		case OPT_DRY_RUN: o.dry_run = true; break;
		case OPT_JSON: s.json = true; break;
		case OPT_STATE: o.state = optarg; break;
		case OPT_START: o.start = true; break;
		case OPT_PER_HOST:
			if (cli_parse_uint(optarg, 1, 64, &o.per_host) < 0)
				return cli_usage("migrate", "--per-host takes 1 to 64");
			break;
		case OPT_JOBS:
			if (cli_parse_uint(optarg, 1, 1024, &o.jobs) < 0)
				return cli_usage("migrate", "--jobs takes 1 to 1024");
			break;
		default: return cli_usage("migrate", "unknown option");
		}
	}
	if (argc - optind != 1)
		return cli_usage("migrate", "needs one PLAN (a JSON file)");
	if (!o.state) {   /* PLAN.state.json beside the plan (".json" of PLAN left out) */
		const char *plan = argv[optind];
		size_t n = strlen(plan);

		if (n > 5 && !strcmp(plan + n - 5, ".json"))
			n -= 5;
		if (asprintf(&state, "%.*s.state.json", (int)n, plan) < 0)
			return cli_usage("migrate", "out of memory");
		o.state = state;
	}
	if (mig_plan_read(argv[optind], &p, &err) < 0) {
		free(state);
		return cli_fail("migrate", &err);
	}
	s.p = &p;
	o.roots = &cli->roots;
	o.interrupted = cli->interrupted;
	o.event = on_event;
	o.opaque = &s;
	if (mig_run(&p, &o, &err) < 0) {
		rc = cli_fail("migrate", &err);
		if (err.exit_class == IM_EXIT_INTERRUPTED && !s.json)
			print_text(&p, false);
	} else {
		rc = migrate_report(&p, o.dry_run, s.json, o.state, cli);
	}
	mig_plan_free(&p);
	free(state);
	return rc;
}
