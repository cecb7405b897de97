/* SPDX-License-Identifier: GPL-2.0-or-later */
/* imager clone SOURCE TARGET */
#include <getopt.h>
#include <json-c/json.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "imager/convert.h"

/* What --rescue could not read, per source partition. */
static int clone_rescue_report(const struct clone_opts *o, const struct clone_stats *st,
			       json_object *json, bool quiet)
{
	unsigned num[PT_MAX_PARTS];
	const char *fs[PT_MAX_PARTS];
	uint64_t bytes[PT_MAX_PARTS];

	if (!o->rescue.on)
		return IM_EXIT_OK;
	for (size_t i = 0; i < st->nrescued && i < PT_MAX_PARTS; i++) {
		num[i] = st->rescued[i].number;
		fs[i] = st->rescued[i].filesystem;
		bytes[i] = st->rescued[i].bytes;
	}
	return cli_rescue_report("clone", &st->rescue, num, fs, bytes, st->nrescued, json, quiet);
}

/* --rescue's checks, and where its map goes (map, else TARGET.map). */
static int clone_rescue_setup(struct clone_opts *o, const struct cli_target *t, const char *map,
			      char *map_path, size_t len, int argc, char **argv, char *cmdline,
			      size_t cmdline_len)
{
	struct stat sb;
	const char *tg = argv[optind + 1];

	if (t->o.shrink)
		return cli_usage("clone", "--rescue does not shrink: save --rescue into a folder, "
			       "then restore --shrink");
	if (!map && (strstr(tg, "://") || (stat(tg, &sb) == 0 && !S_ISREG(sb.st_mode))))
		return cli_usage("clone", "--rescue onto a device or an NBD export needs --map FILE "
			       "(where the map of unreadable sectors goes)");
	if (!map) {
		if (snprintf(map_path, len, "%s.map", tg) >= (int)len)
			return cli_usage("clone", "the target's name is too long for its map's (give --map FILE)");
		map = map_path;
	}
	cli_rescue_opts(&o->rescue, &o->net, argc, argv, cmdline, cmdline_len);
	o->rescue.map = map;
	return 0;
}

/* The clone's summary (text or JSON) and exit code; args: SOURCE, TARGET. */
static int clone_report(const struct clone_opts *o, const struct clone_stats *st,
			struct conv_step *step, const struct cli_job *job, struct cli *cli,
			char **args, double seconds)
{
	json_object *conv = NULL, *root;
	int crc, rc;

	for (size_t i = 0; i < st->nwarnings && cli->verbose >= 0; i++)
		cli_error("clone", "warning: %s", st->warnings[i]);
	crc = cli_target_done("clone", args[1], &st->grow, step, job->json, cli, &conv);
	root = job->json ? json_object_new_object() : NULL;
	rc = clone_rescue_report(o, st, root, cli->verbose < 0);
	if (job->json) {
		if (conv)
			json_object_object_add(root, "convert", conv);
		json_object_object_add(root, "source", json_object_new_string(args[0]));
		json_object_object_add(root, "target", json_object_new_string(args[1]));
		json_object_object_add(root, "target_format", json_object_new_string(st->target.format));
		json_object_object_add(root, "target_size", json_object_new_uint64(st->target.size));
		json_object_object_add(root, "created", json_object_new_boolean(st->target.created));
		json_object_object_add(root, "bytes_read", json_object_new_uint64(st->bytes_read));
		json_object_object_add(root, "bytes_written", json_object_new_uint64(st->bytes_written));
		json_object_object_add(root, "verified_bytes", json_object_new_uint64(st->verified_bytes));
		if (o->resume)
			json_object_object_add(root, "resumed_bytes", json_object_new_uint64(st->resumed_bytes));
		json_object_object_add(root, "partitions", cli_grow_json(&st->grow));
		json_object_object_add(root, "seconds", json_object_new_double(seconds));
		cli_print_json(root);
	} else if (cli->verbose >= 0) {
		char a[32], b[32];
		cli_human(st->bytes_read, a, sizeof(a));
		cli_human(st->bytes_written, b, sizeof(b));
		printf("cloned %s to %s (%s): read %s, wrote %s%s, %.1f s\n", args[0], args[1],
		       st->target.format, a, b, o->verify ? ", verified" : "", seconds);
		if (o->resume) {
			cli_human(st->resumed_bytes, a, sizeof(a));
			printf("resumed: %s of used data was on the target already\n", a);
		}
	}
	return cli_finish_stdout("clone", crc ? crc : rc);
}

int cmd_clone(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		CLI_TARGET_OPTIONS,
		CLI_JOB_OPTIONS,
		{ "source-format", required_argument, NULL, 'S' },
		{ "verify", no_argument, NULL, 'V' },
		{ "rescue", no_argument, NULL, CLI_OPT_RESCUE },
		{ "map", required_argument, NULL, CLI_OPT_MAP },
		{ "resume", no_argument, NULL, CLI_OPT_RESUME },
		{ "checkpoint", required_argument, NULL, CLI_OPT_CHECKPOINT },
		{ NULL, 0, NULL, 0 },
	};
	struct clone_opts o = { .checkpoint_ms = CLI_CHECKPOINT_MS };
	struct clone_stats st;
	struct cli_progress prog;
	struct im_err err = { 0 };
	struct cli_target t = { 0 };
	struct cli_job job = { .progress = true };
	struct conv_opts co;
	struct conv_step step = { 0 };
	bool rescue = false;
	const char *map = NULL;
	char map_path[4200], cmdline[4096];
	double t0;
	int c, r;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'S':
			if (strcmp(optarg, "raw") && strcmp(optarg, "qcow2"))
				return cli_usage("clone", "--source-format takes raw or qcow2");
			o.source_format = optarg;
			break;
		case 'V': o.verify = true; break;
		case CLI_OPT_RESCUE: rescue = true; break;
		case CLI_OPT_MAP: map = optarg; break;
		case CLI_OPT_RESUME: o.resume = true; break;
		case CLI_OPT_CHECKPOINT:
			if ((r = cli_checkpoint_option("clone", optarg, &o.checkpoint_ms)) != IM_EXIT_OK)
				return r;
			break;
		default:
			if ((r = cli_job_option("clone", c, optarg, &job, &t)) != IM_EXIT_OK)
				return r;
			break;
		}
	}
	o.threads = job.threads;
	o.net = job.net;
	o.journal = true;
	t.o.force = o.force_fs = job.force;
	t.o.net = job.net;
	if (argc - optind != 2)
		return cli_usage("clone", "needs SOURCE and TARGET");
	if (t.keys.n && !t.convert)
		return cli_usage("clone", "--key and --key-file go with --convert");
	if (map && !rescue)
		return cli_usage("clone", "--map goes with --rescue");
	if (o.resume && rescue)
		return cli_usage("clone", "--resume does not combine with --rescue (the map would miss "
			       "what the first run met): clone --rescue anew");
	if (o.resume && t.o.shrink)
		return cli_usage("clone", "--resume does not shrink");
	if (rescue && (r = clone_rescue_setup(&o, &t, map, map_path, sizeof(map_path), argc, argv,
					     cmdline, sizeof(cmdline))))
		return r;
	cli_progress_job(&prog, job.progress, cli, &o.progress);
	t0 = cli_now();
	o.target = t.o;
	step.opts = cli_target_conv(&t, cli, &co);
	r = conv_clone(&cli->roots, argv[optind], argv[optind + 1], &o, &st, &step, &err);
	cli_keys_free(&t.keys);
	cli_progress_end(&prog);
	if (r < 0)
		return cli_fail("clone", &err);
	for (size_t i = 0; i < st.nwarnings && cli->verbose >= 0; i++)
		cli_error("clone", "warning: %s", st.warnings[i]);
	return clone_report(&o, &st, &step, &job, cli, argv + optind, cli_now() - t0);
}
