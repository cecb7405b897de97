/* SPDX-License-Identifier: GPL-2.0-or-later */
/* imager list: every disk of the machine, and which are virtio. */
#include <getopt.h>
#include <json-c/json.h>
#include <string.h>

#include "commands.h"
#include "imager/domain.h"

static json_object *disk_json(const struct disk_desc *d)
{
	json_object *o = json_object_new_object(), *parts = json_object_new_array();

	json_object_object_add(o, "name", json_object_new_string(d->name));
	json_object_object_add(o, "path", json_object_new_string(d->path));
	json_object_object_add(o, "size", json_object_new_uint64(d->size));
	json_object_object_add(o, "logical_sector_size", json_object_new_int((int)d->logical_sector_size));
	json_object_object_add(o, "physical_sector_size", json_object_new_int((int)d->physical_sector_size));
	json_object_object_add(o, "model", json_object_new_string(d->model));
	json_object_object_add(o, "serial", json_object_new_string(d->serial));
	json_object_object_add(o, "rotational", json_object_new_boolean(d->rotational));
	json_object_object_add(o, "removable", json_object_new_boolean(d->removable));
	json_object_object_add(o, "bus", json_object_new_string(disk_bus_name(d->bus)));
	json_object_object_add(o, "virtio", json_object_new_boolean(disk_bus_is_virtio(d->bus)));
	json_object_object_add(o, "table", json_object_new_string(d->table));
	for (size_t i = 0; i < d->nparts; i++) {
		const struct partition_desc *p = &d->parts[i];
		json_object *po = json_object_new_object();
		json_object_object_add(po, "name", json_object_new_string(p->name));
		json_object_object_add(po, "path", json_object_new_string(p->path));
		json_object_object_add(po, "number", json_object_new_int((int)p->number));
		json_object_object_add(po, "start", json_object_new_uint64(p->start));
		json_object_object_add(po, "size", json_object_new_uint64(p->size));
		json_object_object_add(po, "filesystem", json_object_new_string(p->fstype));
		json_object_object_add(po, "label", json_object_new_string(p->label));
		json_object_object_add(po, "uuid", json_object_new_string(p->uuid));
		json_object_array_add(parts, po);
	}
	json_object_object_add(o, "partitions", parts);
	return o;
}

/* This machine's facts, which `imager p2v --facts` reads on the KVM host
 * when the disks come from live media over the network. */
static json_object *machine_json(void)
{
	struct dom_machine m;
	json_object *o = json_object_new_object(), *macs = json_object_new_array();

	dom_machine_local(&m);
	json_object_object_add(o, "memory", json_object_new_uint64(m.memory));
	json_object_object_add(o, "cpus", json_object_new_int((int)m.vcpus));
	for (unsigned i = 0; i < m.nmacs; i++)
		json_object_array_add(macs, json_object_new_string(m.macs[i]));
	json_object_object_add(o, "macs", macs);
	json_object_object_add(o, "firmware", json_object_new_string(m.uefi ? "uefi" : "bios"));
	json_object_object_add(o, "vendor", json_object_new_string(m.vendor));
	json_object_object_add(o, "model", json_object_new_string(m.model));
	json_object_object_add(o, "serial", json_object_new_string(m.serial));
	return o;
}

int cmd_list(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct disk_desc *disks = NULL;
	struct im_err err = { 0 };
	bool json = false;
	int c, n, rc = IM_EXIT_OK;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'j')
			json = true;
		else
			return cli_usage("list", "unknown option");
	}
	if (optind < argc)
		return cli_usage("list", "unexpected argument '%s'", argv[optind]);
	n = disk_list(&cli->roots, &disks, &err);
	if (n < 0)
		return cli_fail("list", &err);
	if (json) {
		json_object *root = json_object_new_object(), *arr = json_object_new_array();
		for (int i = 0; i < n; i++)
			json_object_array_add(arr, disk_json(&disks[i]));
		json_object_object_add(root, "disks", arr);
		json_object_object_add(root, "machine", machine_json());
		cli_print_json(root);
	} else {
		printf("%-10s %10s  %-12s %-6s %-9s %-5s %s\n", "DISK", "SIZE", "BUS", "VIRTIO",
		       "SECTORS", "TABLE", "MODEL / SERIAL");
		for (int i = 0; i < n; i++) {
			const struct disk_desc *d = &disks[i];
			char size[32], sectors[24];
			cli_human(d->size, size, sizeof(size));
			snprintf(sectors, sizeof(sectors), "%u/%u", d->logical_sector_size,
				 d->physical_sector_size);
			printf("%-10s %10s  %-12s %-6s %-9s %-5s %s%s%s%s%s\n", d->name, size,
			       disk_bus_name(d->bus), disk_bus_is_virtio(d->bus) ? "yes" : "no",
			       sectors, d->table[0] ? d->table : "-", d->model,
			       d->serial[0] ? " / " : "", d->serial,
			       d->rotational ? " (rotational)" : "", d->removable ? " (removable)" : "");
			for (size_t k = 0; k < d->nparts; k++) {
				const struct partition_desc *p = &d->parts[k];
				cli_human(p->size, size, sizeof(size));
				printf("  %-8s %10s  %-12s %s%s%s\n", p->name, size,
				       p->fstype[0] ? p->fstype : "-", p->label[0] ? p->label : "",
				       p->label[0] ? " " : "", p->uuid);
			}
		}
	}
	disk_list_free(disks, (size_t)n);
	return cli_finish_stdout("list", rc);
}
