/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The `imager define` job: host, guest, plan, XML (include/imager/domain.h).
 * The guest comes from a conversion report file or from a read-only
 * inspection of the disks; nothing here prints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "imager/convert.h"
#include "imager/domain.h"
#include "imager/pools.h"

static const char *jstr(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v) : "";
}

static bool jbool(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static int jint(json_object *o, const char *key)
{
	json_object *v;
	int64_t n;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return 0;
	n = json_object_get_int64(v);
	return n < 0 || n > 10000 ? 0 : (int)n;
}

int dom_guest_from_file(const char *path, struct dom_guest *g, struct im_err *err)
{
	json_object *root = json_object_from_file(path), *o = root, *v;

	memset(g, 0, sizeof(*g));
	if (!root)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: not a JSON file (%s)", path,
			       json_util_get_last_err() ? json_util_get_last_err() : "unreadable");
	/* restore/clone --json carry the conversion under "convert". */
	if (json_object_object_get_ex(root, "convert", &v) && json_object_is_type(v, json_type_object))
		o = v;
	if (!json_object_is_type(o, json_type_object) || !*jstr(o, "os_type")) {
		json_object_put(root);
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "%s: not a conversion report (imager convert --json): no os_type", path);
	}
	snprintf(g->os_type, sizeof(g->os_type), "%s", jstr(o, "os_type"));
	snprintf(g->distro, sizeof(g->distro), "%s", jstr(o, "distro"));
	snprintf(g->product, sizeof(g->product), "%s", jstr(o, "product"));
	snprintf(g->kernel, sizeof(g->kernel), "%s", jstr(o, "default_kernel"));
	snprintf(g->firmware, sizeof(g->firmware), "%s", jstr(o, "firmware"));
	g->major = jint(o, "major");
	g->minor = jint(o, "minor");
	/* ok: the conversion accepted the guest (done, or planned by a dry run). */
	g->virtio_blk = g->virtio_scsi = jbool(o, "ok");
	if (!strcmp(g->os_type, "windows") && *jstr(o, "block")) {
		/* Windows boots only on the storage driver registered for boot
		 * (a report without "block" claims both, as before). */
		g->virtio_blk &= !strcmp(jstr(o, "block"), "virtio-blk");
		g->virtio_scsi &= !strcmp(jstr(o, "block"), "virtio-scsi");
	}
	g->virtio_net = jbool(o, "ok") && jbool(o, "virtio_net");
	json_object_put(root);
	return 0;
}

/* The guest on the disks, read-only: a dry run of the conversion. */
static int inspect(const struct define_opts *o, struct define_report *r, struct im_err *err)
{
	const char *paths[64], *formats[64];
	struct conv_opts co = { .block = CONV_BLOCK_VIRTIO_BLK, .dry_run = true };
	struct conv_report rep;
	struct im_err ierr = { 0 };
	size_t n = o->dom.ndisks;
	int rc;

	if (n > sizeof(paths) / sizeof(paths[0]))
		return im_errf(err, IM_EXIT_USAGE, -E2BIG, "at most %zu disks can be inspected",
			       sizeof(paths) / sizeof(paths[0]));
	for (size_t i = 0; i < n; i++) {
		paths[i] = o->dom.disks[i].path;
		formats[i] = o->dom.disks[i].format;
	}
	if (o->on_inspect)
		o->on_inspect(o->opaque);
	r->inspected = true;
	rc = im_convert(paths, formats, n, &co, &rep, &ierr);
	if (rc < 0 && rc != -EOPNOTSUPP && rc != -ENOENT) {
		conv_report_free(&rep);
		*err = ierr;
		return rc;
	}
	r->unknown_guest = rc == -ENOENT || !rep.os_type[0];
	if (rc < 0)
		snprintf(r->inspect_note, sizeof(r->inspect_note), "%s", ierr.msg);
	if (rep.os_type[0])
		dom_guest_from_report(&rep, rc == 0, &r->guest);
	conv_report_free(&rep);
	return 0;
}

int im_define(const struct define_opts *o, struct define_report *r, struct im_err *err)
{
	struct dom_opts dom = o->dom;
	struct dom_host h;
	virConnectPtr conn = NULL;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	/* The host first: an unreachable one is found before a long inspection. */
	if (o->uri && (rc = host_open(o->uri, NULL, &conn, err)) < 0)
		return rc;
	if (o->inspection)
		rc = dom_guest_from_file(o->inspection, &r->guest, err);
	else if (!o->no_inspect)
		rc = inspect(o, r, err);
	if (rc < 0)
		goto out;
	/* The disks of this machine: it is the source (live media). */
	if (o->machine)
		dom_machine_apply(&dom, &r->guest, r->mac, NULL);
	dom_host_detect(conn, conn ? host_is_local(conn) : true, !dom.type, &h);
	snprintf(r->host_why, sizeof(r->host_why), "%s", h.why);
	if ((rc = dom_decide(&dom, &r->guest, &h, &r->plan, err)) < 0 ||
	    (rc = dom_xml(&dom, &r->guest, &r->plan, &r->xml, err)) < 0)
		goto out;
	r->planned = true;
	if (o->output)
		rc = dom_xml_save(o->output, r->xml, strlen(r->xml), o->force, err);
out:
	if (conn)
		virConnectClose(conn);
	return rc;
}

void define_report_free(struct define_report *r)
{
	free(r->xml);
	r->xml = NULL;
}
