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
		{ "threads", required_argument, NULL, 't' },
		{ "force", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "no-progress", no_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	struct restore_opts o = { 0 };
	struct restore_stats st;
	struct cli_progress prog;
	struct im_err err = { 0 };
	struct cli_target t = { 0 };
	struct conv_opts co;
	struct conv_step step = { 0 };
	bool json = false, progress = true;
	double t0;
	int c, r;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (cli_parse_uint(optarg, 1, 256, &o.threads) < 0)
				return cli_usage("restore", "--threads takes 1..256");
			break;
		case 'f': t.o.force = true; break;
		case 'j': json = true; break;
		case 'P': progress = false; break;
		default:
			r = cli_target_option("restore", c, optarg, &t);
			if (r < 0)
				return IM_EXIT_USAGE;
			if (r == 0)
				return cli_usage("restore", "unknown option");
			break;
		}
	}
	if (argc - optind != 2)
		return cli_usage("restore", "needs DIR and TARGET");
	cli_progress_init(&prog, progress && cli->verbose >= 0);
	o.progress.fn = cli_progress_cb;
	o.progress.opaque = &prog;
	o.progress.cancel = cli->interrupted;
	t0 = cli_now();
	o.target = t.o;
	step.opts = cli_target_conv(&t, cli, &co);
	r = conv_restore(&cli->roots, argv[optind], argv[optind + 1], &o, &st, &step, &err);
	cli_progress_end(&prog);
	if (r < 0)
		return cli_fail("restore", &err);
	if (!json && cli->verbose >= 0)
		cli_print_grow(&st.grow);
	json_object *conv = NULL;
	int crc = IM_EXIT_OK;
	if (step.ran) {
		const char *disk = argv[optind + 1];
		crc = cli_convert_print("restore", &step.rep, step.r, &step.err, &disk, 1, false, cli,
					json ? &conv : NULL);
		conv_report_free(&step.rep);
	}
	if (json) {
		json_object *root = json_object_new_object();
		if (conv)
			json_object_object_add(root, "convert", conv);
		json_object_object_add(root, "image", json_object_new_string(argv[optind]));
		json_object_object_add(root, "target", json_object_new_string(argv[optind + 1]));
		json_object_object_add(root, "target_size", json_object_new_uint64(st.target.size));
		json_object_object_add(root, "created", json_object_new_boolean(st.target.created));
		json_object_object_add(root, "bytes_written", json_object_new_uint64(st.bytes_written));
		json_object_object_add(root, "partitions", cli_grow_json(&st.grow));
		json_object_object_add(root, "seconds", json_object_new_double(cli_now() - t0));
		cli_print_json(root);
	} else if (cli->verbose >= 0) {
		char a[32];
		cli_human(st.bytes_written, a, sizeof(a));
		printf("restored %s to %s: %s of data, %.1f s\n", argv[optind], argv[optind + 1], a,
		       cli_now() - t0);
	}
	return cli_finish_stdout("restore", crc);
}
