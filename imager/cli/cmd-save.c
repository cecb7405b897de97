/* SPDX-License-Identifier: GPL-2.0-or-later */
/* imager save SOURCE DIR */
#include <getopt.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

/* What --rescue could not read, from the manifest's partitions. */
static int save_rescue_report(const struct img_manifest *m, const struct save_stats *st, bool rescue,
			      json_object *const *json, bool quiet)
{
	unsigned num[PT_MAX_PARTS];
	const char *fs[PT_MAX_PARTS];
	uint64_t bytes[PT_MAX_PARTS];
	size_t n = 0;

	if (!rescue)
		return IM_EXIT_OK;
	/* (a manifest's partitions come from a table: PT_MAX_PARTS at most) */
	for (size_t i = 0; i < m->nparts && n < PT_MAX_PARTS; i++, n++) {
		num[n] = m->parts[i].number;
		fs[n] = m->parts[i].filesystem;
		bytes[n] = m->parts[i].unreadable_bytes;
	}
	return cli_rescue_report("save", &st->rescue, num, fs, bytes, n, json ? *json : NULL, quiet);
}

int cmd_save(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		CLI_JOB_OPTIONS,
		{ "level", required_argument, NULL, 'l' },
		{ "format", required_argument, NULL, 'F' },
		{ "rescue", no_argument, NULL, CLI_OPT_RESCUE },
		{ "resume", no_argument, NULL, CLI_OPT_RESUME },
		{ NULL, 0, NULL, 0 },
	};
	struct save_opts o = { .level = 3 };
	struct cli_progress prog;
	struct img_manifest m;
	struct save_stats st;
	struct im_err err = { 0 };
	struct cli_job job = { .progress = true };
	json_object *json = NULL;
	unsigned level = 3;
	bool rescue = false;
	char cmdline[4096];
	double t0;
	int c, r, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (cli_parse_uint(optarg, 1, 19, &level) < 0)
				return cli_usage("save", "--level takes 1..19");
			o.level = (int)level;
			break;
		case 'F':
			if (strcmp(optarg, "raw") && strcmp(optarg, "qcow2"))
				return cli_usage("save", "--format takes raw or qcow2");
			o.format = optarg;
			break;
		case CLI_OPT_RESCUE:
			rescue = true;
			break;
		case CLI_OPT_RESUME:
			o.resume = true;
			break;
		default:
			if ((r = cli_job_option("save", c, optarg, &job, NULL)) != IM_EXIT_OK)
				return r;
			break;
		}
	}
	o.threads = job.threads;
	o.force = job.force;
	o.net = job.net;
	if (argc - optind != 2)
		return cli_usage("save", "needs SOURCE and DIR");
	if (rescue && o.resume)
		return cli_usage("save", "--rescue does not resume (the map would miss what the first "
				 "run met): save --rescue anew");
	if (rescue)
		cli_rescue_opts(&o.rescue, &job.net, argc, argv, cmdline, sizeof(cmdline));
	cli_progress_job(&prog, job.progress, cli, &o.progress);
	t0 = cli_now();
	r = im_save(&cli->roots, argv[optind], argv[optind + 1], &o, &m, &st, &err);
	cli_progress_end(&prog);
	if (r < 0)
		return cli_fail("save", &err);
	if (job.json)
		json = json_object_new_object();
	for (size_t i = 0; i < st.nwarnings && cli->verbose >= 0; i++)
		cli_error("save", "warning: %s", st.warnings[i]);
	rc = save_rescue_report(&m, &st, rescue, job.json ? &json : NULL, cli->verbose < 0);
	if (job.json) {
		json_object *root = json, *parts = json_object_new_array();
		json_object_object_add(root, "image", json_object_new_string(argv[optind + 1]));
		json_object_object_add(root, "source", json_object_new_string(m.source));
		json_object_object_add(root, "disk_size", json_object_new_uint64(m.disk_size));
		json_object_object_add(root, "table", json_object_new_string(m.table));
		for (size_t i = 0; i < m.nparts; i++) {
			const struct img_part *p = &m.parts[i];
			json_object *po = json_object_new_object();
			json_object_object_add(po, "number", json_object_new_int((int)p->number));
			json_object_object_add(po, "filesystem", json_object_new_string(p->filesystem));
			json_object_object_add(po, "plugin", json_object_new_string(p->plugin));
			json_object_object_add(po, "block_size", json_object_new_int((int)p->block_size));
			json_object_object_add(po, "used_blocks", json_object_new_uint64(p->used_blocks));
			json_object_object_add(po, "zero_blocks", json_object_new_uint64(p->zero_blocks));
			json_object_object_add(po, "stored_bytes", json_object_new_uint64(p->data_bytes));
			json_object_object_add(po, "stream_size", json_object_new_uint64(p->stream_size));
			json_object_array_add(parts, po);
		}
		json_object_object_add(root, "partitions", parts);
		json_object_object_add(root, "bytes_read", json_object_new_uint64(st.bytes_read));
		json_object_object_add(root, "image_size", json_object_new_uint64(st.image_bytes));
		if (o.resume)
			json_object_object_add(root, "resumed_bytes", json_object_new_uint64(st.resumed_bytes));
		json_object_object_add(root, "seconds", json_object_new_double(cli_now() - t0));
		cli_print_json(root);
	} else if (cli->verbose >= 0) {
		char a[32], b[32];
		cli_human(st.bytes_read, a, sizeof(a));
		cli_human(st.image_bytes, b, sizeof(b));
		printf("saved %s (%s table, %zu partition%s): read %s, image %s, %.1f s\n",
		       m.source, m.table, m.nparts, m.nparts == 1 ? "" : "s", a, b, cli_now() - t0);
		if (o.resume) {
			cli_human(st.resumed_bytes, a, sizeof(a));
			printf("resumed: %s of used data kept from the interrupted save\n", a);
		}
	}
	img_manifest_free(&m);
	return cli_finish_stdout("save", rc);
}
