/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The conversion as the commands share it: imager convert, and the
 * --convert step of restore and clone (cli_convert(), cli_target_conv(),
 * cli_target_done()), with its report as text or JSON.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "imager/convert.h"

void cli_convert_phase(void *opaque, const char *what)
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
	 * files included), so a qcow2 overlay is as good as any; other
	 * hypervisors' disks go by qemu's names of their formats. */
	int r = bk_probe_format(path, format, err);
	if (r == 0 && (!strcmp(*format, "ova") || !strcmp(*format, "ovf") || !strcmp(*format, "vmx")))
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "%s is a virtual machine's description (%s), not a disk: imager p2v %s "
			       "moves the machine, or imager clone %s DISK copies one of its disks",
			       path, *format, path, path);
	if (r == 0)
		*format = bk_qemu_format(*format);
	return r;
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

	oo.phase = cli_convert_phase;
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
const struct conv_opts *cli_target_conv(const struct cli_target *t, struct cli *cli,
					struct conv_opts *o)
{
	if (!t->convert)
		return NULL;
	*o = (struct conv_opts){ .block = t->block ? (enum conv_block)t->block : CONV_BLOCK_VIRTIO_BLK,
				 .rebuild_initramfs = t->rebuild_initramfs,
				 .virtio_win = t->virtio_win, .keys = t->keys.k, .nkeys = t->keys.n,
				 .phase = cli_convert_phase, .opaque = cli };
	return o;
}

