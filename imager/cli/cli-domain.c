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
	case DO_NAME: d->o.name = arg; return IM_EXIT_OK;
	case DO_MEMORY:
		/* A bare number is MiB, as in virt-install; else a size. */
		if (arg[strspn(arg, "0123456789")] == '\0') {
			if (cli_parse_uint(arg, 1, 1u << 24, &n) < 0)
				goto bad;
			size = (uint64_t)n << 20;
		} else if (cli_parse_size(arg, &size) < 0) {
			goto bad;
		}
		if (size < (UINT64_C(64) << 20))
			return cli_usage(cmd, "--memory %s: at least 64 MiB", arg);
		d->o.memory_mib = size >> 20;
		return IM_EXIT_OK;
	case DO_VCPUS:
		if (cli_parse_uint(arg, 1, 255, &n) < 0)
			goto bad;
		d->o.vcpus = n;
		return IM_EXIT_OK;
	case DO_CPU: d->o.cpu = arg; return IM_EXIT_OK;
	case DO_MACHINE: d->o.machine = arg; return IM_EXIT_OK;
	case DO_BUS: d->o.bus = arg; return IM_EXIT_OK;
	case DO_NIC: d->o.nic = arg; return IM_EXIT_OK;
	case DO_MAC: d->o.mac = arg; return IM_EXIT_OK;
	case DO_FIRMWARE: d->o.firmware = arg; return IM_EXIT_OK;
	case DO_TYPE: d->o.type = arg; return IM_EXIT_OK;
	case DO_IO: d->o.io = arg; return IM_EXIT_OK;
	case DO_SERIAL_LOG: d->o.serial_log = arg; return IM_EXIT_OK;
	case DO_NETWORK:
	case DO_BRIDGE:
		if (d->o.net)
			goto twice;
		snprintf(d->net, sizeof(d->net), "%s:%s", c == DO_NETWORK ? "network" : "bridge", arg);
		d->o.net = d->net;
		return IM_EXIT_OK;
	case DO_USER_NET:
		if (d->o.net)
			goto twice;
		d->o.net = "user";
		return IM_EXIT_OK;
	default:
		return CLI_NOT_MINE;
	}
bad:
	return cli_usage(cmd, "bad value '%s' for --%s", arg, c == DO_MEMORY ? "memory" : "vcpus");
twice:
	return cli_usage(cmd, "give one of --network, --bridge, --user-net");
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
