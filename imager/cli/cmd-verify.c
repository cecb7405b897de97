/* SPDX-License-Identifier: GPL-2.0-or-later */
/* imager verify DIR: exit 0 when intact, 3 when damaged. */
#include <getopt.h>
#include <json-c/json.h>
#include <string.h>

#include "commands.h"

int cmd_verify(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "no-progress", no_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	struct verify_report rep;
	struct cli_progress prog;
	struct im_progress p;
	struct im_err err = { 0 };
	unsigned threads = 0;
	bool json = false, progress = true;
	int c, r, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (cli_parse_uint(optarg, 1, 256, &threads) < 0)
				return cli_usage("verify", "--threads takes 1..256");
			break;
		case 'j': json = true; break;
		case 'P': progress = false; break;
		default: return cli_usage("verify", "unknown option");
		}
	}
	if (argc - optind != 1)
		return cli_usage("verify", "needs DIR");
	cli_progress_job(&prog, progress, cli, &p);
	r = im_verify(argv[optind], threads, &p, &rep, &err);
	cli_progress_end(&prog);
	if (r < 0) {
		if (json) {
			json_object *root = json_object_new_object();
			json_object_object_add(root, "image", json_object_new_string(argv[optind]));
			json_object_object_add(root, "ok", json_object_new_boolean(0));
			json_object_object_add(root, "error", json_object_new_string(err.msg));
			cli_print_json(root);
			cli_finish_stdout("verify", 0);
		}
		return cli_fail("verify", &err);
	}
	rc = rep.ndamage ? IM_EXIT_DAMAGED : IM_EXIT_OK;
	/* An intact image may still hold sectors its save could not read. */
	struct img_manifest m = { 0 };
	struct im_err me = { 0 };
	bool have_m = img_manifest_read(&m, argv[optind], &me) == 0;
	if (json) {
		json_object *root = json_object_new_object(), *arr = json_object_new_array();
		json_object_object_add(root, "image", json_object_new_string(argv[optind]));
		json_object_object_add(root, "ok", json_object_new_boolean(!rep.ndamage));
		json_object_object_add(root, "frames_checked", json_object_new_uint64(rep.frames_checked));
		for (size_t i = 0; i < rep.ndamage; i++) {
			const struct verify_damage *d = &rep.damage[i];
			json_object *o = json_object_new_object();
			json_object_object_add(o, "partition", json_object_new_int((int)d->partition));
			json_object_object_add(o, "file", json_object_new_string(d->file));
			json_object_object_add(o, "frame", json_object_new_int64(d->frame));
			json_object_object_add(o, "disk_offset", json_object_new_uint64(d->disk_offset));
			json_object_object_add(o, "length", json_object_new_uint64(d->length));
			json_object_object_add(o, "what", json_object_new_string(d->what));
			json_object_array_add(arr, o);
		}
		json_object_object_add(root, "damage", arr);
		if (have_m && m.unreadable.bytes)
			json_object_object_add(root, "unreadable", cli_unreadable_json(argv[optind], &m));
		cli_print_json(root);
	} else {
		for (size_t i = 0; i < rep.ndamage; i++) {
			const struct verify_damage *d = &rep.damage[i];
			char where[64] = "";
			if (d->frame >= 0)
				snprintf(where, sizeof(where), " frame %lld", (long long)d->frame);
			printf("DAMAGED partition %u, %s%s: disk bytes %llu-%llu: %s\n", d->partition,
			       d->file, where, (unsigned long long)d->disk_offset,
			       (unsigned long long)(d->disk_offset + d->length), d->what);
		}
		if (cli->verbose >= 0 || rep.ndamage)
			printf("%s: %s (%llu frames checked, %zu damaged)\n", argv[optind],
			       rep.ndamage ? "DAMAGED" : "ok", (unsigned long long)rep.frames_checked,
			       rep.ndamage);
		if (have_m && cli->verbose >= 0)
			cli_unreadable_lines(stdout, "  ", argv[optind], &m);
	}
	if (have_m)
		img_manifest_free(&m);
	verify_report_free(&rep);
	return cli_finish_stdout("verify", rc);
}
