/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager convert DISK... : make the guest on the disks boot on virtio
 * (what restore's and clone's --convert share with it: cli-convert.c).
 */
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "imager/convert.h"

static int convert_folder(const char *dir, const char *output, const char *format,
			  uint64_t size, bool shrink, const struct conv_opts *o, bool json,
			  struct cli *cli)
{
	struct restore_opts ro = { .target = { .format = format, .size = size, .shrink = shrink } };
	struct cli_progress prog;
	struct conv_opts oo = *o;
	struct conv_step step = { .opts = &oo };
	struct restore_stats st;
	struct im_err err = { 0 };
	char target[4096];
	const char *shown = target;
	int rc;

	if (!output && !o->dry_run)
		return cli_usage("convert", "an image folder needs --output DISK (or --dry-run)");
	ro.progress.cancel = cli->interrupted;
	cli_progress_init(&prog, false);
	prog.notes = cli->verbose >= 0;
	ro.progress.note = cli_progress_note;
	ro.progress.opaque = &prog;
	oo.phase = cli_convert_phase;
	oo.opaque = cli;
	if (cli->verbose >= 1)
		fprintf(stderr, "imager convert: restoring %s onto %s\n", dir,
			output ? output : "a temporary qcow2");
	if (conv_folder(&cli->roots, dir, output, &ro, &st, &step, target, sizeof(target), &err) < 0)
		return cli_fail("convert", &err);
	rc = cli_convert_print("convert", &step.rep, step.r, &step.err, &shown, 1, json, cli, NULL);
	conv_report_free(&step.rep);
	return rc;
}

int cmd_convert(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "block", required_argument, NULL, 'b' },
		{ "rebuild-initramfs", no_argument, NULL, 'r' },
		{ "virtio-win", required_argument, NULL, 'W' },
		{ "format", required_argument, NULL, 'F' },
		{ "output", required_argument, NULL, 'o' },
		{ "size", required_argument, NULL, 's' },
		{ "shrink", no_argument, NULL, 'H' },
		CLI_KEY_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	static struct cli_keys keys;
	const char *output = NULL;
	struct conv_opts o = { .block = CONV_BLOCK_VIRTIO_BLK };
	const char *force_format = NULL;
	const char *formats[16];
	uint64_t size = 0;
	bool json = false, shrink = false;
	int c, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if ((rc = cli_key_option("convert", c, optarg, &keys)) != CLI_NOT_MINE) {
			if (rc != IM_EXIT_OK)
				return rc;
			continue;
		}
		switch (c) {
		case 'n': o.dry_run = true; break;
		case 'j': json = true; break;
		case 'r': o.rebuild_initramfs = true; break;
		case 'W': o.virtio_win = optarg; break;
		case 'b':
			if (!(o.block = conv_block_parse(optarg)))
				return cli_usage("convert", "--block takes virtio-blk or virtio-scsi");
			break;
		case 'F':
			if (strcmp(optarg, "raw") && strcmp(optarg, "qcow2"))
				return cli_usage("convert", "--format takes raw or qcow2");
			force_format = optarg;
			break;
		case 'o': output = optarg; break;
		case 's':
			if (cli_parse_size(optarg, &size) < 0 || !size)
				return cli_usage("convert", "--size takes a size such as 20G or 512MiB");
			break;
		case 'H': shrink = true; break;
		default: return cli_usage("convert", "unknown option");
		}
	}
	o.keys = keys.k;
	o.nkeys = keys.n;
	size_t n = (size_t)(argc - optind);
	if (n < 1)
		return cli_usage("convert", "needs DISK");
	if (n > sizeof(formats) / sizeof(formats[0]))
		return cli_usage("convert", "at most %zu disks", sizeof(formats) / sizeof(formats[0]));
	struct stat st;
	if (n == 1 && !stat(argv[optind], &st) && S_ISDIR(st.st_mode)) {
		rc = convert_folder(argv[optind], output, force_format, size, shrink, &o, json, cli);
		cli_keys_free(&keys);
		return rc;
	}
	if (output || size || shrink)
		return cli_usage("convert", "--output, --size and --shrink are for an image folder");
	for (size_t i = 0; i < n; i++) {
		struct im_err err = { 0 };
		if (force_format)
			formats[i] = force_format;
		else if (cli_disk_format(argv[optind + (int)i], &formats[i], &err) < 0)
			return cli_fail("convert", &err);
	}
	rc = cli_convert("convert", (const char *const *)argv + optind, formats, n, &o, json, cli, NULL);
	cli_keys_free(&keys);
	return cli_finish_stdout("convert", rc);
}
