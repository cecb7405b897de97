/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Facts for the VM definition: what the target host can do, what the
 * machine we run on has (live media), what the conversion found.
 * See include/imager/domain.h.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "imager/domain.h"
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

void dom_host_detect(virConnectPtr conn, bool local, bool ask_kvm, struct dom_host *h,
		     char *why, size_t len)
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
		snprintf(why, len, "domain type given");
	} else if (!offered) {
		snprintf(why, len, "the host's hypervisor offers no KVM");
	} else if (local) {
		struct guest_accel_choice c;
		struct im_err err = { 0 };

		if (guest_accel_choose(NULL, &c, &err) == 0) {
			h->kvm = c.accel == GUEST_ACCEL_KVM;
			snprintf(why, len, "%s (%s)", h->kvm ? "KVM runs guests here" :
				 "KVM cannot run guests here", guest_accel_why_name(c.why));
		} else {
			snprintf(why, len, "%s", err.msg);
		}
	} else {
		h->kvm = true;
		snprintf(why, len, "the remote hypervisor offers KVM");
	}
	h->io_uring = lib >= 6003000 && hv >= 5000000 && (!local || kernel_has_io_uring());
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first NIC (by name) backed by a device, i.e. not lo, bridges, tun. */
static void first_mac(char *mac, size_t len)
{
	DIR *d = opendir("/sys/class/net");
	char *names[256];
	size_t n = 0;
	struct dirent *e;

	mac[0] = '\0';
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

		if (!names[i] || mac[0])
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
		if (dom_mac_ok(addr) && strcmp(addr, "00:00:00:00:00:00"))
			snprintf(mac, len, "%s", addr);
next:
		free(names[i]);
	}
}

void dom_machine_local(struct dom_machine *m)
{
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	memset(m, 0, sizeof(*m));
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long kb;

		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) {
			m->memory_mib = kb / 1024 / 256 * 256;
			if (m->memory_mib < 256)
				m->memory_mib = 256;
			break;
		}
	}
	if (f)
		fclose(f);
	m->vcpus = cpus > 0 ? (cpus > 255 ? 255 : (unsigned)cpus) : 1;
	first_mac(m->mac, sizeof(m->mac));
	m->uefi = access("/sys/firmware/efi", F_OK) == 0;
}

void dom_machine_apply(struct dom_opts *o, struct dom_guest *g, char mac[18])
{
	struct dom_machine m;

	dom_machine_local(&m);
	if (!o->memory_mib)
		o->memory_mib = m.memory_mib;
	if (!o->vcpus)
		o->vcpus = m.vcpus;
	if (!o->mac && m.mac[0]) {
		snprintf(mac, 18, "%s", m.mac);
		o->mac = mac;
	}
	if (m.uefi)
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
