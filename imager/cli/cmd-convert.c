/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager convert DISK... : make the guest on the disks boot on virtio.
 * Also the --convert step of restore and clone (cli_convert()).
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

static void phase_cb(void *opaque, const char *what)
{
	const struct cli *cli = opaque;
	if (cli->verbose >= 1)
		fprintf(stderr, "imager convert: %s\n", what);
}

int cli_disk_format(const char *path, const char **format, struct im_err *err)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return im_errf(err, IM_EXIT_TARGET, -errno, "%s: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return im_errf(err, IM_EXIT_USAGE, -EISDIR,
			       "%s is a folder: an image folder is converted while it is restored "
			       "(imager convert DIR --output DISK, or imager restore DIR DISK --convert)",
			       path);
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return im_errf(err, IM_EXIT_TARGET, -EINVAL, "%s is not a disk or an image file", path);
	/* The backends' probe: libguestfs reads the image itself (backing
	 * files included), so a qcow2 overlay is as good as any. */
	return bk_probe_format(path, format, err);
}

json_object *cli_convert_json(const struct conv_report *r, const struct im_err *err)
{
	json_object *root = json_object_new_object(), *arr = json_object_new_array();
	json_object *ks = json_object_new_array();

	json_object_object_add(root, "ok", json_object_new_boolean(!err || !err->exit_class));
	if (err && err->exit_class)
		json_object_object_add(root, "error", json_object_new_string(err->msg));
	json_object_object_add(root, "dry_run", json_object_new_boolean(r->dry_run));
	json_object_object_add(root, "os_type", json_object_new_string(r->os_type));
	json_object_object_add(root, "distro", json_object_new_string(r->distro));
	json_object_object_add(root, "product", json_object_new_string(r->product));
	json_object_object_add(root, "major", json_object_new_int(r->major));
	json_object_object_add(root, "minor", json_object_new_int(r->minor));
	json_object_object_add(root, "arch", json_object_new_string(r->arch));
	json_object_object_add(root, "root", json_object_new_string(r->root));
	json_object_object_add(root, "bootloader", json_object_new_string(r->bootloader));
	json_object_object_add(root, "initramfs_tool", json_object_new_string(r->initramfs_tool));
	json_object_object_add(root, "initramfs_tool_from", json_object_new_string(r->initramfs_tool_from));
	json_object_object_add(root, "firmware", json_object_new_string(r->firmware));
	json_object_object_add(root, "block", json_object_new_string(r->block));
	json_object_object_add(root, "method", json_object_new_string(r->method));
	json_object_object_add(root, "default_kernel", json_object_new_string(r->default_kernel));
	json_object_object_add(root, "virtio_net", json_object_new_boolean(r->virtio_net));
	for (size_t i = 0; i < r->nkernels; i++) {
		json_object *k = json_object_new_object();
		json_object_object_add(k, "version", json_object_new_string(r->kernels[i].version));
		json_object_object_add(k, "virtio", json_object_new_boolean(r->kernels[i].virtio));
		json_object_object_add(k, "initramfs", json_object_new_boolean(r->kernels[i].has_initramfs));
		json_object_object_add(k, "was_default", json_object_new_boolean(r->kernels[i].is_default));
		json_object_array_add(ks, k);
	}
	json_object_object_add(root, "kernels", ks);
	json_object_object_add(root, "inspection", json_object_new_string(r->inspection));
	json_object *ms = json_object_new_array();
	for (size_t i = 0; i < r->nmounts; i++) {
		json_object *m = json_object_new_object();
		json_object_object_add(m, "path", json_object_new_string(r->mounts[i].path));
		json_object_object_add(m, "device", json_object_new_string(r->mounts[i].device));
		json_object_array_add(ms, m);
	}
	json_object_object_add(root, "mounts", ms);
	for (size_t i = 0; i < r->nchanges; i++) {
		json_object *c = json_object_new_object();
		json_object_object_add(c, "action", json_object_new_string(r->changes[i].action));
		json_object_object_add(c, "path", json_object_new_string(r->changes[i].path));
		json_object_object_add(c, "detail", json_object_new_string(r->changes[i].detail));
		json_object_array_add(arr, c);
	}
	json_object_object_add(root, "changes", arr);
	if (!strcmp(r->os_type, "windows")) {
		json_object *w = json_object_new_object();
		json_object_object_add(w, "variant", json_object_new_string(r->variant));
		json_object_object_add(w, "edition", json_object_new_string(r->edition));
		json_object_object_add(w, "build", json_object_new_int(r->build));
		json_object_object_add(w, "systemroot", json_object_new_string(r->systemroot));
		json_object_object_add(w, "control_set", json_object_new_string(r->control_set));
		json_object_object_add(w, "virtio_win", json_object_new_string(r->virtio_win));
		json_object_object_add(w, "drivers_os", json_object_new_string(r->drivers_os));
		json_object_object_add(w, "drivers", json_object_new_string(r->drivers));
		json_object_object_add(w, "guest_agent", json_object_new_boolean(r->guest_agent));
		json_object_object_add(w, "firstboot", json_object_new_boolean(r->firstboot));
		json_object_object_add(root, "windows", w);
	}
	json_object_object_add(root, "accel", json_object_new_string(r->accel));
	json_object_object_add(root, "seconds", json_object_new_double(r->seconds));
	return root;
}

void cli_convert_text(const struct conv_report *r, FILE *out)
{
	if (!strcmp(r->os_type, "windows"))
		fprintf(out, "guest: %s (Windows NT %d.%d build %d, %s%s%s, %s), %s on %s, %s; "
			"drivers: %s/%s from %s\n", r->product, r->major, r->minor, r->build,
			r->variant, r->edition[0] ? " " : "", r->edition, r->arch, r->systemroot,
			r->root, r->control_set, r->drivers_os[0] ? r->drivers_os : "-",
			r->drivers[0] ? r->drivers : "-", r->virtio_win[0] ? r->virtio_win : "-");
	else if (r->os_type[0])
		fprintf(out, "guest: %s (%s %d.%d, %s), root %s, %s, %s, initramfs by %s%s%s%s\n",
			r->product, r->distro, r->major, r->minor, r->arch, r->root,
			r->bootloader[0] ? r->bootloader : "no known bootloader", r->firmware,
			r->initramfs_tool[0] ? r->initramfs_tool : "none",
			r->initramfs_tool_from[0] ? " (from the " : "", r->initramfs_tool_from,
			r->initramfs_tool_from[0] ? ")" : "");
	for (size_t i = 0; i < r->nkernels; i++)
		fprintf(out, "kernel %s: %s%s%s\n", r->kernels[i].version,
			r->kernels[i].virtio ? "virtio" : "no virtio",
			r->kernels[i].has_initramfs ? ", initramfs" : "",
			r->kernels[i].is_default ? ", was the default" : "");
	for (size_t i = 0; i < r->nchanges; i++)
		fprintf(out, "%s%s %s: %s\n", r->dry_run ? "would " : "", r->changes[i].action,
			r->changes[i].path[0] ? r->changes[i].path : "-", r->changes[i].detail);
}

int cli_convert(const char *cmd, const char *const *disks, const char *const *formats, size_t n,
		const struct conv_opts *o, bool json, struct cli *cli, struct json_object **json_out)
{
	struct conv_report rep;
	struct im_err err = { 0 };
	struct conv_opts oo = *o;
	int r;

	oo.phase = phase_cb;
	oo.opaque = cli;
	r = im_convert(disks, formats, n, &oo, &rep, &err);
	r = cli_convert_print(cmd, &rep, r, &err, disks, n, json, cli, json_out);
	conv_report_free(&rep);
	return r;
}

int cli_convert_print(const char *cmd, const struct conv_report *rep, int r,
		      const struct im_err *err, const char *const *disks, size_t n, bool json,
		      struct cli *cli, struct json_object **json_out)
{
	if (json_out) {
		*json_out = cli_convert_json(rep, r < 0 ? err : NULL);
	} else if (json) {
		json_object *root = cli_convert_json(rep, r < 0 ? err : NULL);
		json_object *arr = json_object_new_array();
		for (size_t i = 0; i < n; i++)
			json_object_array_add(arr, json_object_new_string(disks[i]));
		json_object_object_add(root, "disks", arr);
		cli_print_json(root);
	} else if (cli->verbose >= 0 || r < 0) {
		cli_convert_text(rep, stdout);
		if (r == 0)
			printf("%s %s for %s in %.1f s (%s)\n", rep->dry_run ? "planned" : "converted",
			       rep->default_kernel[0] ? rep->default_kernel : "the guest", rep->block,
			       rep->seconds, rep->accel);
	}
	if (r < 0)
		return cli_fail(cmd, err);
	return IM_EXIT_OK;
}

int cli_target_done(const char *cmd, const char *target, const struct grow_report *g,
		    struct conv_step *step, bool json, struct cli *cli, json_object **conv)
{
	int rc = IM_EXIT_OK;

	if (!json && cli->verbose >= 0)
		cli_print_grow(g);
	if (step->ran) {
		rc = cli_convert_print(cmd, &step->rep, step->r, &step->err, &target, 1, false, cli,
				       json ? conv : NULL);
		conv_report_free(&step->rep);
	}
	return rc;
}

/* An image folder, restored on the fly: onto --output (then converted), or
 * with --dry-run onto a temporary sparse qcow2 that is removed afterwards. */
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
	oo.phase = phase_cb;
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
