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
#include "imager/convert.h"
#include "imager/pools.h"

enum { OPT_INSPECTION = 400, OPT_NO_INSPECT, OPT_CONNECT, OPT_OUTPUT, OPT_JSON, OPT_FORCE };

/* The guest on the disks, read-only: a dry run of the conversion. */
static int inspect(const char *const *paths, const char *const *formats, size_t n,
		   struct dom_guest *g, struct cli *cli)
{
	struct conv_opts co = { .block = CONV_BLOCK_VIRTIO_BLK, .dry_run = true };
	struct conv_report rep;
	struct im_err err = { 0 };
	int r;

	if (cli->verbose >= 0)
		fprintf(stderr, "imager define: inspecting the guest (read-only)\n");
	r = im_convert(paths, formats, n, &co, &rep, &err);
	if (r < 0 && r != -EOPNOTSUPP && r != -ENOENT) {
		conv_report_free(&rep);
		return cli_fail("define", &err);
	}
	if (r == -ENOENT || !rep.os_type[0])
		fprintf(stderr, "imager define: warning: %s; the guest is taken as unknown\n", err.msg);
	else if (r < 0)
		fprintf(stderr, "imager define: the guest cannot boot on virtio (%s)\n", err.msg);
	if (rep.os_type[0])
		dom_guest_from_report(&rep, r == 0, g);
	conv_report_free(&rep);
	return 0;
}

int cmd_define(int argc, char **argv, struct cli *cli)
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
	struct cli_domain d = { 0 };
	const char *inspection = NULL, *uri = NULL, *output = NULL;
	bool no_inspect = false, json = false, force = false, all_block = true;
	struct dom_disk disks[16];
	const char *paths[16], *formats[16];
	char *real[16] = { 0 };
	struct dom_guest g = { 0 };
	struct dom_host h;
	struct dom_plan plan;
	struct im_err err = { 0 };
	virConnectPtr conn = NULL;
	char why[256], *xml = NULL;
	size_t n;
	int c, rc = IM_EXIT_OK;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int t = cli_domain_option("define", c, optarg, &d);
		if (t < 0)
			return IM_EXIT_USAGE;
		if (t > 0)
			continue;
		switch (c) {
		case OPT_INSPECTION: inspection = optarg; break;
		case OPT_NO_INSPECT: no_inspect = true; break;
		case OPT_CONNECT: uri = optarg; break;
		case OPT_OUTPUT: output = optarg; break;
		case OPT_JSON: json = true; break;
		case OPT_FORCE: force = true; break;
		default: return cli_usage("define", "unknown option");
		}
	}
	n = (size_t)(argc - optind);
	if (n < 1)
		return cli_usage("define", "needs DISK");
	if (n > 16)
		return cli_usage("define", "at most 16 disks");
	if (!d.o.name)
		return cli_usage("define", "needs --name NAME");
	if (inspection && no_inspect)
		return cli_usage("define", "--inspection and --no-inspect exclude each other");

	for (size_t i = 0; i < n; i++) {
		struct stat st;

		real[i] = realpath(argv[optind + (int)i], NULL);
		if (!real[i] || stat(real[i], &st) < 0) {
			cli_error("define", "%s: %s", argv[optind + (int)i], strerror(errno));
			rc = IM_EXIT_SOURCE;
			goto out;
		}
		if (S_ISDIR(st.st_mode)) {
			cli_usage("define", "%s is a folder: an image folder becomes a VM with "
				  "imager p2v DIR --name NAME (disks written, converted, defined)", real[i]);
			rc = IM_EXIT_USAGE;
			goto out;
		}
		if (cli_disk_format(real[i], &formats[i], &err) < 0) {
			rc = cli_fail("define", &err);
			goto out;
		}
		paths[i] = real[i];
		all_block &= S_ISBLK(st.st_mode);
		disks[i] = (struct dom_disk){ S_ISBLK(st.st_mode) ? DOM_SRC_BLOCK : DOM_SRC_FILE,
					      real[i], NULL, NULL, formats[i] };
	}
	d.o.disks = disks;
	d.o.ndisks = n;

	/* The host first: an unreachable one is found before a long inspection. */
	if (uri && host_open(uri, &conn, &err) < 0) {
		rc = cli_fail("define", &err);
		goto out;
	}
	if (inspection) {
		if (cli_inspection_file(inspection, &g, &err) < 0) {
			rc = cli_fail("define", &err);
			goto out;
		}
	} else if (!no_inspect && (rc = inspect(paths, formats, n, &g, cli)) != 0) {
		goto out;
	}
	/* The disks of this machine: it is the source (live media). */
	if (all_block)
		cli_domain_machine(&d, &g);

	dom_host_detect(conn, conn ? host_is_local(conn) : true, !d.o.type, &h, why, sizeof(why));
	if (cli->verbose >= 1)
		fprintf(stderr, "imager define: host: %s\n", why);
	if ((rc = cli_domain_plan("define", &d, &g, &h, &plan, &xml, cli)) != 0)
		goto out;
	if (output && cli_write_atomic(output, xml, strlen(xml), force, &err) < 0) {
		rc = cli_fail("define", &err);
		goto out;
	}
	if (json) {
		json_object *root = json_object_new_object();
		json_object_object_add(root, "ok", json_object_new_boolean(1));
		json_object_object_add(root, "name", json_object_new_string(d.o.name));
		json_object_object_add(root, "output", output ? json_object_new_string(output) : NULL);
		json_object_object_add(root, "guest", g.os_type[0] ? json_object_new_string(g.os_type) : NULL);
		json_object_object_add(root, "definition", cli_domain_json(&plan));
		if (!output)
			json_object_object_add(root, "xml", json_object_new_string(xml));
		cli_print_json(root);
	} else if (!output) {
		fputs(xml, stdout);
	} else if (cli->verbose >= 0) {
		printf("wrote %s (define it: virsh define %s)\n", output, output);
	}
	rc = cli_finish_stdout("define", IM_EXIT_OK);
out:
	if (conn)
		virConnectClose(conn);
	free(xml);
	for (size_t i = 0; i < n && i < 16; i++)
		free(real[i]);
	return rc;
}
