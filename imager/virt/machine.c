/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Facts for the VM definition: what the target host can do, what the
 * machine we run on has (live media), what the conversion found.
 * See include/imager/domain.h.
 */
#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "imager/domain.h"
#include "imager/vmsource.h"
#include "imager/guest.h"

/* io_uring_setup() with one entry: blocked by seccomp in many containers,
 * absent before Linux 5.1. */
static bool kernel_has_io_uring(void)
{
#ifdef __NR_io_uring_setup
	unsigned char params[120] = { 0 };
	long fd = syscall(__NR_io_uring_setup, 1, params);

	if (fd < 0)
		return false;
	close((int)fd);
	return true;
#else
	return false;
#endif
}

void dom_host_detect(virConnectPtr conn, bool local, bool ask_kvm, struct dom_host *h)
{
	unsigned long lib = 0, hv = 0;
	bool offered = true;
	char *caps;

	memset(h, 0, sizeof(*h));
	if (conn && ask_kvm) {
		caps = virConnectGetDomainCapabilities(conn, NULL, "x86_64", NULL, "kvm", 0);
		offered = caps != NULL;
		free(caps);
	}
	if (conn) {
		if (virConnectGetLibVersion(conn, &lib) < 0)
			lib = 0;
		if (virConnectGetVersion(conn, &hv) < 0)
			hv = 0;
	} else {
		if (virGetVersion(&lib, NULL, NULL) < 0)
			lib = 0;
		hv = 5000000;  /* not asked without a daemon: libvirt and the kernel decide */
	}
	if (!ask_kvm) {
		snprintf(h->why, sizeof(h->why), "domain type given");
	} else if (!offered) {
		snprintf(h->why, sizeof(h->why), "the host's hypervisor offers no KVM");
	} else if (local) {
		struct guest_accel_choice c;
		struct im_err err = { 0 };

		if (guest_accel_choose(NULL, &c, &err) == 0) {
			h->kvm = c.accel == GUEST_ACCEL_KVM;
			snprintf(h->why, sizeof(h->why), "%s (%s)", h->kvm ? "KVM runs guests here" :
				 "KVM cannot run guests here", guest_accel_why_name(c.why));
		} else {
			/* (one line for people: a longer message is cut there) */
			snprintf(h->why, sizeof(h->why), "%.*s", (int)sizeof(h->why) - 1, err.msg);
		}
	} else {
		h->kvm = true;
		snprintf(h->why, sizeof(h->why), "the remote hypervisor offers KVM");
	}
	h->io_uring = lib >= 6003000 && hv >= 5000000 && (!local || kernel_has_io_uring());
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every NIC backed by a device (not lo, bridges, tun), by name. */
static void physical_macs(struct dom_machine *m)
{
	DIR *d = opendir("/sys/class/net");
	char *names[256];
	size_t n = 0;
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)) && n < 256)
		if (e->d_name[0] != '.')
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_names);
	for (size_t i = 0; i < n; i++) {
		char path[512], addr[64] = "";
		FILE *f;

		if (!names[i] || m->nmacs == DOM_MACHINE_MACS)
			goto next;
		snprintf(path, sizeof(path), "/sys/class/net/%s/device", names[i]);
		if (access(path, F_OK))
			goto next;
		snprintf(path, sizeof(path), "/sys/class/net/%s/address", names[i]);
		f = fopen(path, "re");
		if (f) {
			if (fgets(addr, sizeof(addr), f))
				addr[strcspn(addr, "\n")] = '\0';
			fclose(f);
		}
		if (dom_mac_ok(addr) && strcmp(addr, "00:00:00:00:00:00") &&
		    strlen(addr) < sizeof(m->macs[0]))   /* (a MAC's 17 characters) */
			memcpy(m->macs[m->nmacs++], addr, strlen(addr) + 1);
next:
		free(names[i]);
	}
	if (m->nmacs)
		snprintf(m->mac, sizeof(m->mac), "%s", m->macs[0]);
}

/* A DMI string from sysfs, printable ASCII only ("" when absent). */
static void dmi(const char *name, char *out, size_t len)
{
	char path[128], buf[256] = "";
	size_t k = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/dmi/id/%s", name);
	out[0] = '\0';
	if (!(f = fopen(path, "re")))
		return;
	if (fgets(buf, sizeof(buf), f))
		for (const char *c = buf; *c && *c != '\n' && k + 1 < len; c++)
			out[k++] = (*c >= 0x20 && *c < 0x7f) ? *c : '?';
	out[k] = '\0';
	fclose(f);
}

/* Up to a multiple of 256 MiB: the firmware's map lacks a few holes of
 * the installed memory, and MemTotal more (the kernel's own share). */
static uint64_t round_mib(uint64_t bytes)
{
	uint64_t mib = (bytes + (256ull << 20) - 1) / (256ull << 20) * 256;
	return mib < 256 ? 256 : mib;
}

/* The memory installed: the "System RAM" ranges of the firmware's map
 * (0 when the kernel does not show it). */
static uint64_t firmware_ram(void)
{
	DIR *d = opendir("/sys/firmware/memmap");
	struct dirent *e;
	uint64_t sum = 0;

	while (d && (e = readdir(d))) {
		char path[512], type[64] = "";
		unsigned long long start = 0, end = 0;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/firmware/memmap/%s/type", e->d_name);
		if ((f = fopen(path, "re"))) {
			if (!fgets(type, sizeof(type), f))
				type[0] = '\0';
			fclose(f);
		}
		if (strncmp(type, "System RAM", 10))
			continue;
		snprintf(path, sizeof(path), "/sys/firmware/memmap/%s/start", e->d_name);
		if ((f = fopen(path, "re"))) {
			if (fscanf(f, "%llx", &start) != 1)
				start = 0;
			fclose(f);
		}
		snprintf(path, sizeof(path), "/sys/firmware/memmap/%s/end", e->d_name);
		if ((f = fopen(path, "re"))) {
			if (fscanf(f, "%llx", &end) != 1)
				end = 0;
			fclose(f);
		}
		if (end > start)
			sum += end - start + 1;
	}
	if (d)
		closedir(d);
	return sum;
}

void dom_machine_local(struct dom_machine *m)
{
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t ram;

	memset(m, 0, sizeof(*m));
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long kb;

		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) {
			m->memory = (uint64_t)kb * 1024;
			break;
		}
	}
	if (f)
		fclose(f);
	ram = firmware_ram();
	if (ram > m->memory)
		m->memory = ram;
	m->memory_mib = round_mib(m->memory);
	m->vcpus = cpus > 0 ? (cpus > 255 ? 255 : (unsigned)cpus) : 1;
	physical_macs(m);
	m->uefi = access("/sys/firmware/efi", F_OK) == 0;
	dmi("sys_vendor", m->vendor, sizeof(m->vendor));
	dmi("product_name", m->model, sizeof(m->model));
	dmi("product_serial", m->serial, sizeof(m->serial));
}

/* A string field of the facts: absent is "", anything but a printable
 * string that fits is refused. */
static int facts_str(json_object *o, const char *key, char *out, size_t len)
{
	json_object *v;
	const char *s;

	out[0] = '\0';
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return -1;
	s = json_object_get_string(v);
	if (strlen(s) >= len)
		return -1;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return -1;
	snprintf(out, len, "%s", s);
	return 0;
}

/* The facts' checks, in order; the first that fails names the field. */
static const char *facts_parse(json_object *o, struct dom_machine *m, char fw[8])
{
	json_object *v, *macs;
	int64_t cpus;

	if (!json_object_is_type(o, json_type_object))
		return "facts (not an object)";
	if (!json_object_object_get_ex(o, "memory", &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_uint64(v) < 64ull << 20 || json_object_get_uint64(v) > 64ull << 40)
		return "memory (bytes, 64 MiB to 64 TiB)";
	m->memory = json_object_get_uint64(v);
	if (!json_object_object_get_ex(o, "cpus", &v) || !json_object_is_type(v, json_type_int) ||
	    (cpus = json_object_get_int64(v)) < 1 || cpus > 4096)
		return "cpus (1 to 4096)";
	m->vcpus = cpus > 255 ? 255 : (unsigned)cpus;
	if (facts_str(o, "firmware", fw, 8) || (strcmp(fw, "bios") && strcmp(fw, "uefi")))
		return "firmware (bios or uefi)";
	if (facts_str(o, "vendor", m->vendor, sizeof(m->vendor)) ||
	    facts_str(o, "model", m->model, sizeof(m->model)) ||
	    facts_str(o, "serial", m->serial, sizeof(m->serial)))
		return "vendor, model or serial (printable strings)";
	if (!json_object_object_get_ex(o, "macs", &macs))
		return NULL;
	if (!json_object_is_type(macs, json_type_array) ||
	    json_object_array_length(macs) > DOM_MACHINE_MACS)
		return "macs (an array of at most 8 addresses)";
	for (size_t i = 0; i < json_object_array_length(macs); i++) {
		json_object *a = json_object_array_get_idx(macs, i);
		const char *str = json_object_is_type(a, json_type_string) ? json_object_get_string(a) : "";
		if (!dom_mac_ok(str))
			return "macs (an array of at most 8 addresses)";
		snprintf(m->macs[m->nmacs++], sizeof(m->macs[0]), "%s", str);
	}
	return NULL;
}

int dom_machine_from_file(const char *path, struct dom_machine *m, struct im_err *err)
{
	json_object *root, *o, *v;
	const char *bad;
	char fw[8] = "";

	memset(m, 0, sizeof(*m));
	if (access(path, R_OK))
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", path, strerror(errno));
	root = json_object_from_file(path);
	if (!root)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "%s: not JSON (imager list --json gives the facts)", path);
	o = json_object_object_get_ex(root, "machine", &v) ? v : root;
	bad = facts_parse(o, m, fw);
	json_object_put(root);
	if (bad) {
		memset(m, 0, sizeof(*m));
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: machine facts: bad %s", path, bad);
	}
	m->memory_mib = round_mib(m->memory);
	m->uefi = !strcmp(fw, "uefi");
	if (m->nmacs)
		snprintf(m->mac, sizeof(m->mac), "%s", m->macs[0]);
	return 0;
}

void dom_machine_from_vm(const struct vm_desc *vm, struct dom_machine *m)
{
	memset(m, 0, sizeof(*m));
	m->memory = vm->memory_mib << 20;
	m->memory_mib = vm->memory_mib;
	m->vcpus = vm->vcpus;
	m->uefi = vm->firmware == VM_FW_EFI;
	for (size_t i = 0; i < vm->nnics && m->nmacs < DOM_MACHINE_MACS; i++)
		if (vm->nics[i].mac[0])
			snprintf(m->macs[m->nmacs++], sizeof(m->macs[0]), "%s", vm->nics[i].mac);
	if (vm->nnics && vm->nics[0].mac[0])
		snprintf(m->mac, sizeof(m->mac), "%s", vm->nics[0].mac);
	snprintf(m->model, sizeof(m->model), "%s", vm->name);
}

void dom_machine_apply(struct dom_opts *o, struct dom_guest *g, char mac[18],
		       const struct dom_machine *given)
{
	struct dom_machine local;
	const struct dom_machine *m = given;

	if (!m) {
		dom_machine_local(&local);
		m = &local;
	}
	if (!o->memory_mib)
		o->memory_mib = m->memory_mib;
	if (!o->vcpus)
		o->vcpus = m->vcpus;
	if (!o->mac && m->mac[0]) {
		snprintf(mac, 18, "%s", m->mac);
		o->mac = mac;
	}
	if (m->uefi)
		snprintf(g->firmware, sizeof(g->firmware), "uefi");
}

void dom_guest_from_report(const struct conv_report *r, bool convertible, struct dom_guest *g)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->os_type, sizeof(g->os_type), "%s", r->os_type);
	snprintf(g->distro, sizeof(g->distro), "%s", r->distro);
	snprintf(g->product, sizeof(g->product), "%s", r->product);
	snprintf(g->kernel, sizeof(g->kernel), "%s", r->default_kernel);
	snprintf(g->firmware, sizeof(g->firmware), "%s", r->firmware);
	g->major = r->major;
	g->minor = r->minor;
	if (!strcmp(r->os_type, "windows")) {
		/* only the storage driver that was registered for boot */
		g->virtio_blk = convertible && !strcmp(r->block, "virtio-blk");
		g->virtio_scsi = convertible && !strcmp(r->block, "virtio-scsi");
	} else {
		g->virtio_blk = g->virtio_scsi = convertible;
	}
	g->virtio_net = convertible && r->virtio_net;
}
