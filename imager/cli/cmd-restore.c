/* SPDX-License-Identifier: GPL-2.0-or-later */
/* imager restore DIR TARGET */
#include <getopt.h>
#include <json-c/json.h>
#include <string.h>

#include "commands.h"
#include "imager/convert.h"

int cmd_restore(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		CLI_TARGET_OPTIONS,
		CLI_JOB_OPTIONS,
		{ "resume", no_argument, NULL, CLI_OPT_RESUME },
		{ "checkpoint", required_argument, NULL, CLI_OPT_CHECKPOINT },
		{ NULL, 0, NULL, 0 },
	};
	struct restore_opts o = { .checkpoint_ms = CLI_CHECKPOINT_MS };
	struct restore_stats st;
	struct cli_progress prog;
	struct im_err err = { 0 };
	struct cli_target t = { 0 };
	struct cli_job job = { .progress = true };
	struct conv_opts co;
	struct conv_step step = { 0 };
	double t0;
	int c, r;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == CLI_OPT_RESUME) {
			o.resume = true;
			continue;
		}
		if (c == CLI_OPT_CHECKPOINT) {
			if ((r = cli_checkpoint_option("restore", optarg, &o.checkpoint_ms)) != IM_EXIT_OK)
				return r;
			continue;
		}
		if ((r = cli_job_option("restore", c, optarg, &job, &t)) != IM_EXIT_OK)
			return r;
	}
	o.threads = job.threads;
	o.journal = true;
	t.o.force = job.force;
	t.o.net = job.net;
	if (argc - optind != 2)
		return cli_usage("restore", "needs DIR and TARGET");
	if (t.keys.n && !t.convert)
		return cli_usage("restore", "--key and --key-file go with --convert");
	cli_progress_job(&prog, job.progress, cli, &o.progress);
	t0 = cli_now();
	o.target = t.o;
	step.opts = cli_target_conv(&t, cli, &co);
	r = conv_restore(&cli->roots, argv[optind], argv[optind + 1], &o, &st, &step, &err);
	cli_keys_free(&t.keys);
	cli_progress_end(&prog);
	if (r < 0)
		return cli_fail("restore", &err);
	json_object *conv = NULL;
	int crc = cli_target_done("restore", argv[optind + 1], &st.grow, &step, job.json, cli, &conv);
	/* An image saved with --rescue: the sectors it could not read are
	 * zeros on the target too. */
	struct img_manifest m = { 0 };
	struct im_err me = { 0 };
	bool have_m = img_manifest_read(&m, argv[optind], &me) == 0 && m.unreadable.bytes;
	if (have_m && cli->verbose >= 0)
		cli_unreadable_lines(stderr, "imager restore: warning: ", argv[optind], &m);
	if (job.json) {
		json_object *root = json_object_new_object();
		if (conv)
			json_object_object_add(root, "convert", conv);
		json_object_object_add(root, "image", json_object_new_string(argv[optind]));
		json_object_object_add(root, "target", json_object_new_string(argv[optind + 1]));
		json_object_object_add(root, "target_size", json_object_new_uint64(st.target.size));
		json_object_object_add(root, "created", json_object_new_boolean(st.target.created));
		json_object_object_add(root, "bytes_written", json_object_new_uint64(st.bytes_written));
		if (o.resume)
			json_object_object_add(root, "resumed_bytes", json_object_new_uint64(st.resumed_bytes));
		json_object_object_add(root, "partitions", cli_grow_json(&st.grow));
		json_object_object_add(root, "seconds", json_object_new_double(cli_now() - t0));
		if (have_m)
			json_object_object_add(root, "unreadable", cli_unreadable_json(argv[optind], &m));
		cli_print_json(root);
	} else if (cli->verbose >= 0) {
		char a[32];
		cli_human(st.bytes_written, a, sizeof(a));
		printf("restored %s to %s: %s of data, %.1f s\n", argv[optind], argv[optind + 1], a,
		       cli_now() - t0);
		if (o.resume) {
			cli_human(st.resumed_bytes, a, sizeof(a));
			printf("resumed: %s of used data was on the target already\n", a);
		}
	}
	img_manifest_free(&m);
	return cli_finish_stdout("restore", crc);
}
