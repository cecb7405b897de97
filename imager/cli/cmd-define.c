/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager define DISK... --name NAME [domain options] [--inspection FILE |
 *                       --no-inspect] [--connect URI] [--output FILE] [--json]
 *
 * Writes a libvirt domain XML tuned for the guest on the disks.  The guest
 * is known from a conversion report (--inspection), else from a read-only
 * inspection of the disks (the conversion's dry run: a guest it would
 * convert boots on virtio afterwards).  The host is the one behind
 * --connect, else this machine.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "commands.h"
#include "imager/domain.h"

enum { OPT_INSPECTION = 400, OPT_NO_INSPECT, OPT_CONNECT, OPT_OUTPUT, OPT_JSON, OPT_FORCE };

#define MAX_DISKS 16

/* What the command line asked for. */
struct define_args {
	struct cli_domain d;
	const char *inspection, *uri, *output;
	bool no_inspect, json, force;
	char **names;                  /* the DISK arguments */
	size_t n;
};

/* Returns IM_EXIT_OK, or the exit code of a bad command line (said). */
static int parse_args(int argc, char **argv, struct define_args *a)
{
	static const struct option opts[] = {
		CLI_DOMAIN_OPTIONS,
		{ "inspection", required_argument, NULL, OPT_INSPECTION },
		{ "no-inspect", no_argument, NULL, OPT_NO_INSPECT },
		{ "connect", required_argument, NULL, OPT_CONNECT },
		{ "output", required_argument, NULL, OPT_OUTPUT },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int t = cli_domain_option("define", c, optarg, &a->d);
		if (t != CLI_NOT_MINE) {
			if (t != IM_EXIT_OK)
				return t;
			continue;
		}
		switch (c) {
		case OPT_INSPECTION: a->inspection = optarg; break;
		case OPT_NO_INSPECT: a->no_inspect = true; break;
		case OPT_CONNECT: a->uri = optarg; break;
		case OPT_OUTPUT: a->output = optarg; break;
		case OPT_JSON: a->json = true; break;
		case OPT_FORCE: a->force = true; break;
		default: return cli_usage("define", "unknown option");
		}
	}
	a->names = argv + optind;
	a->n = (size_t)(argc - optind);
	if (a->n < 1)
		return cli_usage("define", "needs DISK");
	if (a->n > MAX_DISKS)
		return cli_usage("define", "at most 16 disks");
	if (!a->d.o.name)
		return cli_usage("define", "needs --name NAME");
	if (a->inspection && a->no_inspect)
		return cli_usage("define", "--inspection and --no-inspect exclude each other");
	return IM_EXIT_OK;
}

/* The disks as the domain will name them: resolved, their formats probed. */
struct define_disks {
	struct dom_disk disks[MAX_DISKS];
	const char *formats[MAX_DISKS];
	char *real[MAX_DISKS];         /* owned */
	bool all_block;                /* every one a block device: this machine's */
};

static int resolve_disks(char **names, size_t n, struct define_disks *dd)
{
	struct im_err err = { 0 };

	dd->all_block = true;
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		dd->real[i] = realpath(names[i], NULL);
		if (!dd->real[i] || stat(dd->real[i], &st) < 0) {
			cli_error("define", "%s: %s", names[i], strerror(errno));
			return IM_EXIT_SOURCE;
		}
		if (S_ISDIR(st.st_mode)) {
			cli_usage("define", "%s is a folder: an image folder becomes a VM with "
				  "imager p2v DIR --name NAME (disks written, converted, defined)",
				  dd->real[i]);
			return IM_EXIT_USAGE;
		}
		if (cli_disk_format(dd->real[i], &dd->formats[i], &err) < 0)
			return cli_fail("define", &err);
		if (strcmp(dd->formats[i], "raw") && strcmp(dd->formats[i], "qcow2")) {
			cli_usage("define", "%s is a %s disk: a VM on KVM runs from raw or qcow2 "
				  "(imager clone %s DISK.qcow2, or imager p2v %s --name NAME)",
				  dd->real[i], dd->formats[i], dd->real[i], dd->real[i]);
			return IM_EXIT_USAGE;
		}
		dd->all_block &= S_ISBLK(st.st_mode);
		dd->disks[i] = (struct dom_disk){ S_ISBLK(st.st_mode) ? DOM_SRC_BLOCK : DOM_SRC_FILE,
						  dd->real[i], NULL, NULL, dd->formats[i], NULL };
	}
	return IM_EXIT_OK;
}

/* The XML on stdout, or the JSON report, or where it was written. */
static int print_definition(const struct define_args *a, const struct dom_guest *g,
			    const struct dom_plan *plan, const char *xml, struct cli *cli)
{
	if (a->json) {
		json_object *root = json_object_new_object();
		json_object_object_add(root, "ok", json_object_new_boolean(1));
		json_object_object_add(root, "name", json_object_new_string(a->d.o.name));
		json_object_object_add(root, "output", a->output ? json_object_new_string(a->output) : NULL);
		json_object_object_add(root, "guest", g->os_type[0] ? json_object_new_string(g->os_type) : NULL);
		json_object_object_add(root, "definition", cli_domain_json(plan));
		if (!a->output)
			json_object_object_add(root, "xml", json_object_new_string(xml));
		cli_print_json(root);
	} else if (!a->output) {
		fputs(xml, stdout);
	} else if (cli->verbose >= 0) {
		printf("wrote %s (define it: virsh define %s)\n", a->output, a->output);
	}
	return cli_finish_stdout("define", IM_EXIT_OK);
}

static void say_inspect(void *opaque)
{
	if (((struct cli *)opaque)->verbose >= 0)
		fprintf(stderr, "imager define: inspecting the guest (read-only)\n");
}

/* The job (host, guest, plan, XML written), then what it found, printed. */
static int define_domain(struct define_args *a, struct define_disks *dd, struct cli *cli)
{
	struct define_opts o = {
		.dom = a->d.o, .inspection = a->inspection, .no_inspect = a->no_inspect,
		.machine = dd->all_block, .uri = a->uri, .output = a->output, .force = a->force,
		.on_inspect = say_inspect, .opaque = cli,
	};
	struct define_report r;
	struct im_err err = { 0 };
	int rc = im_define(&o, &r, &err);

	if (r.inspected && r.unknown_guest)
		fprintf(stderr, "imager define: warning: %s; the guest is taken as unknown\n", r.inspect_note);
	else if (r.inspect_note[0])
		fprintf(stderr, "imager define: the guest cannot boot on virtio (%s)\n", r.inspect_note);
	if (r.host_why[0] && cli->verbose >= 1)
		fprintf(stderr, "imager define: host: %s\n", r.host_why);
	if (r.planned)
		cli_domain_print_plan("define", &r.plan, cli);
	if (rc < 0)
		rc = cli_fail("define", &err);
	else
		rc = print_definition(a, &r.guest, &r.plan, r.xml, cli);
	define_report_free(&r);
	return rc;
}

int cmd_define(int argc, char **argv, struct cli *cli)
{
	struct define_args a = { 0 };
	struct define_disks dd = { 0 };
	int rc = parse_args(argc, argv, &a);

	if (rc != IM_EXIT_OK)
		return rc;
	rc = resolve_disks(a.names, a.n, &dd);
	if (rc == IM_EXIT_OK) {
		a.d.o.disks = dd.disks;
		a.d.o.ndisks = a.n;
		rc = define_domain(&a, &dd, cli);
	}
	for (size_t i = 0; i < a.n; i++)
		free(dd.real[i]);
	return rc;
}
