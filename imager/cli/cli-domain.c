/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Command-side help for the VM definition, shared by define and p2v: the
 * domain options, guest facts from an inspection file, the choices printed
 * for people or as JSON, files replaced atomically.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "commands.h"

int cli_domain_option(const char *cmd, int c, const char *arg, struct cli_domain *d)
{
	uint64_t size;
	unsigned n;

	switch (c) {
	case DO_NAME: d->o.name = arg; return 1;
	case DO_MEMORY:
		/* A bare number is MiB, as in virt-install; else a size. */
		if (arg[strspn(arg, "0123456789")] == '\0') {
			if (cli_parse_uint(arg, 1, 1u << 24, &n) < 0)
				goto bad;
			size = (uint64_t)n << 20;
		} else if (cli_parse_size(arg, &size) < 0) {
			goto bad;
		}
		if (size < (UINT64_C(64) << 20)) {
			cli_usage(cmd, "--memory %s: at least 64 MiB", arg);
			return -1;
		}
		d->o.memory_mib = size >> 20;
		return 1;
	case DO_VCPUS:
		if (cli_parse_uint(arg, 1, 255, &n) < 0)
			goto bad;
		d->o.vcpus = n;
		return 1;
	case DO_CPU: d->o.cpu = arg; return 1;
	case DO_MACHINE: d->o.machine = arg; return 1;
	case DO_BUS: d->o.bus = arg; return 1;
	case DO_NIC: d->o.nic = arg; return 1;
	case DO_MAC: d->o.mac = arg; return 1;
	case DO_FIRMWARE: d->o.firmware = arg; return 1;
	case DO_TYPE: d->o.type = arg; return 1;
	case DO_IO: d->o.io = arg; return 1;
	case DO_SERIAL_LOG: d->o.serial_log = arg; return 1;
	case DO_NETWORK:
	case DO_BRIDGE:
		if (d->o.net)
			goto twice;
		snprintf(d->net, sizeof(d->net), "%s:%s", c == DO_NETWORK ? "network" : "bridge", arg);
		d->o.net = d->net;
		return 1;
	case DO_USER_NET:
		if (d->o.net)
			goto twice;
		d->o.net = "user";
		return 1;
	default:
		return 0;
	}
bad:
	cli_usage(cmd, "bad value '%s' for --%s", arg, c == DO_MEMORY ? "memory" : "vcpus");
	return -1;
twice:
	cli_usage(cmd, "give one of --network, --bridge, --user-net");
	return -1;
}

void cli_domain_machine(struct cli_domain *d, struct dom_guest *g)
{
	dom_machine_apply(&d->o, g, d->mac);
}

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

int cli_inspection_file(const char *path, struct dom_guest *g, struct im_err *err)
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

int cli_domain_plan(const char *cmd, struct cli_domain *d, const struct dom_guest *g,
		    const struct dom_host *h, struct dom_plan *plan, char **xml, struct cli *cli)
{
	struct im_err err = { 0 };

	if (dom_decide(&d->o, g, h, plan, &err) < 0 || dom_xml(&d->o, g, plan, xml, &err) < 0)
		return cli_fail(cmd, &err);
	cli_domain_print_plan(cmd, plan, cli);
	return 0;
}

void cli_domain_print_plan(const char *cmd, const struct dom_plan *plan, const struct cli *cli)
{
	if (cli->verbose >= 0) {
		const struct { const char *name; const struct dom_choice *c; } cs[] = {
			{ "type", &plan->type }, { "machine", &plan->machine }, { "bus", &plan->bus },
			{ "nic", &plan->nic }, { "firmware", &plan->firmware }, { "cpu", &plan->cpu },
			{ "io", &plan->io },
		};
		for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++)
			fprintf(stderr, "imager %s: %-8s %-12s (%s)\n", cmd, cs[i].name, cs[i].c->value,
				cs[i].c->why);
	}
	for (size_t i = 0; i < 4; i++)
		if (plan->warnings[i][0])
			fprintf(stderr, "imager %s: warning: %s\n", cmd, plan->warnings[i]);
}

json_object *cli_domain_json(const struct dom_plan *plan)
{
	const struct { const char *name; const struct dom_choice *c; } cs[] = {
		{ "type", &plan->type }, { "machine", &plan->machine }, { "bus", &plan->bus },
		{ "nic", &plan->nic }, { "firmware", &plan->firmware }, { "cpu", &plan->cpu },
		{ "io", &plan->io }, { "clock", &plan->clock },
	};
	json_object *o = json_object_new_object(), *w = json_object_new_array();

	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		json_object *c = json_object_new_object();
		json_object_object_add(c, "value", json_object_new_string(cs[i].c->value));
		json_object_object_add(c, "why", json_object_new_string(cs[i].c->why));
		json_object_object_add(o, cs[i].name, c);
	}
	json_object_object_add(o, "memory_mib", json_object_new_uint64(plan->memory_mib));
	json_object_object_add(o, "vcpus", json_object_new_int((int)plan->vcpus));
	for (size_t i = 0; i < 4; i++)
		if (plan->warnings[i][0])
			json_object_array_add(w, json_object_new_string(plan->warnings[i]));
	json_object_object_add(o, "warnings", w);
	return o;
}

int cli_write_atomic(const char *path, const char *data, size_t len, bool force, struct im_err *err)
{
	return dom_xml_save(path, data, len, force, err);
}
