/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The VM definition: choices (dom_decide) and the domain XML (dom_xml),
 * written with libxml2's xmlTextWriter.  See include/imager/domain.h.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libxml/xmlwriter.h>

#include "imager/domain.h"
#include "util.h"

#define IMAGER_XMLNS "urn:x-imager:domain:1"

bool dom_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 64 || name[0] == '.' || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("_.+-", name[i]))
			return false;
	return true;
}

bool dom_mac_ok(const char *mac)
{
	if (!mac || strlen(mac) != 17)
		return false;
	for (int i = 0; i < 17; i++) {
		if (i % 3 == 2 ? mac[i] != ':' : !isxdigit((unsigned char)mac[i]))
			return false;
	}
	/* The low bit of the first octet marks multicast. */
	return (strtoul((char[3]){ mac[0], mac[1], 0 }, NULL, 16) & 1) == 0;
}

static bool one_of(const char *s, const char *const *set)
{
	for (; *set; set++)
		if (!strcmp(s, *set))
			return true;
	return false;
}

static void choose(struct dom_choice *c, const char *value, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void choose(struct dom_choice *c, const char *value, const char *fmt, ...)
{
	va_list ap;

	snprintf(c->value, sizeof(c->value), "%s", value);
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

static void warn(struct dom_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct dom_plan *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	util_slot_vprintf(p->warnings[0], sizeof(p->warnings) / sizeof(p->warnings[0]),
			  sizeof(p->warnings[0]), fmt, ap);
	va_end(ap);
}

/* Old guests get the i440FX machine ("pc"): no PCIe, no AHCI needed. */
struct guest_age {
	bool old;
	char why[sizeof(((struct dom_choice *)0)->why)];   /* what makes it old, for people */
};

static struct guest_age guest_old(const struct dom_guest *g)
{
	struct guest_age a = { 0 };

	if (!strcmp(g->os_type, "windows")) {
		if (g->major < 6 || (g->major == 6 && g->minor < 1)) {
			a.old = true;
			snprintf(a.why, sizeof(a.why), "Windows NT %d.%d is older than Windows 7/2008 R2",
				 g->major, g->minor);
		}
		return a;
	}
	if (!strcmp(g->os_type, "linux")) {
		unsigned kmaj = 0;

		if (g->kernel[0] && sscanf(g->kernel, "%u.", &kmaj) == 1 && kmaj < 3) {
			a.old = true;
			snprintf(a.why, sizeof(a.why), "Linux kernel %s is older than 3.0", g->kernel);
			return a;
		}
		if ((!strcmp(g->distro, "rhel") || !strcmp(g->distro, "centos") ||
		     !strcmp(g->distro, "scientificlinux") || !strcmp(g->distro, "oraclelinux")) &&
		    g->major > 0 && g->major < 6) {
			a.old = true;
			snprintf(a.why, sizeof(a.why), "%s %d is older than 6", g->distro, g->major);
		}
	}
	return a;
}

static const char *const TYPES[] = { "kvm", "qemu", NULL };
static const char *const MACHINES[] = { "q35", "pc", NULL };
static const char *const BUSES[] = { "virtio-blk", "virtio-scsi", "sata", "ide", NULL };
static const char *const NICS[] = { "virtio", "e1000", NULL };
static const char *const FIRMWARES[] = { "bios", "uefi", "uefi-secure", NULL };
static const char *const IOS[] = { "native", "io_uring", "threads", "auto", NULL };

static int bad(struct im_err *err, const char *what, const char *value, const char *const *set)
{
	char list[128] = "";

	for (; set && *set; set++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
			 list[0] ? ", " : "", *set);
	return im_errf(err, IM_EXIT_USAGE, -EINVAL, "%s '%s' is not one of: %s", what, value, list);
}

static bool name_chars_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
			return false;
	return true;
}

static int check_opts(const struct dom_opts *o, struct im_err *err)
{
	RETURN_IF(!dom_name_ok(o->name), err, IM_EXIT_USAGE, -EINVAL,
		  "domain name '%s': use 1 to 64 letters, digits, '_', '.', '+', '-' "
		  "(not starting with '.' or '-')", o->name ? o->name : "");
	RETURN_IF(o->ndisks == 0 || o->ndisks > 26 * 27, err, IM_EXIT_USAGE, -EINVAL,
		  "a domain needs 1 to %d disks", 26 * 27);
	if (o->type && !one_of(o->type, TYPES))
		return bad(err, "domain type", o->type, TYPES);
	if (o->machine && !one_of(o->machine, MACHINES))
		return bad(err, "machine", o->machine, MACHINES);
	if (o->bus && !one_of(o->bus, BUSES))
		return bad(err, "bus", o->bus, BUSES);
	if (o->nic && !one_of(o->nic, NICS))
		return bad(err, "nic", o->nic, NICS);
	if (o->firmware && !one_of(o->firmware, FIRMWARES))
		return bad(err, "firmware", o->firmware, FIRMWARES);
	if (o->io && !one_of(o->io, IOS))
		return bad(err, "io", o->io, IOS);
	RETURN_IF(o->cpu && !name_chars_ok(o->cpu, 63), err, IM_EXIT_USAGE, -EINVAL,
		  "cpu '%s': host-model, host-passthrough, maximum or a CPU model name", o->cpu);
	RETURN_IF(o->mac && !dom_mac_ok(o->mac), err, IM_EXIT_USAGE, -EINVAL,
		  "MAC '%s': expected six hex pairs like 52:54:00:12:34:56, unicast", o->mac);
	RETURN_IF(o->memory_mib && (o->memory_mib < 64 || o->memory_mib > (UINT64_C(16) << 20)),
		  err, IM_EXIT_USAGE, -EINVAL, "memory must be between 64 MiB and 16 TiB");
	RETURN_IF(o->vcpus > 255, err, IM_EXIT_USAGE, -EINVAL, "at most 255 vCPUs");
	if (o->net && strcmp(o->net, "user")) {
		const char *v = !strncmp(o->net, "network:", 8) ? o->net + 8 :
				!strncmp(o->net, "bridge:", 7) ? o->net + 7 : NULL;

		RETURN_IF(!v || !name_chars_ok(v, 64), err, IM_EXIT_USAGE, -EINVAL,
			  "network '%s': expected network:NAME, bridge:NAME or user", o->net);
	}
	RETURN_IF(o->serial_log && o->serial_log[0] != '/', err, IM_EXIT_USAGE, -EINVAL,
		  "the serial log must be an absolute path");
	for (size_t i = 0; i < o->ndisks; i++) {
		const struct dom_disk *d = &o->disks[i];

		RETURN_IF(!d->format || (strcmp(d->format, "raw") && strcmp(d->format, "qcow2")),
			  err, IM_EXIT_USAGE, -EINVAL, "disk %zu: format must be raw or qcow2", i + 1);
		if (d->source == DOM_SRC_VOLUME)
			RETURN_IF(!d->pool || !*d->pool || !d->volume || !*d->volume, err,
				  IM_EXIT_USAGE, -EINVAL, "disk %zu: pool and volume needed", i + 1);
		else
			RETURN_IF(!d->path || d->path[0] != '/', err, IM_EXIT_USAGE, -EINVAL,
				  "disk %zu: an absolute path is needed", i + 1);
	}
	return 0;
}

int dom_decide(const struct dom_opts *o, const struct dom_guest *g, const struct dom_host *h,
	       struct dom_plan *p, struct im_err *err)
{
	static const struct dom_guest unknown;
	static const struct dom_host nohost;
	struct guest_age age = { 0 };
	bool known, win;

	memset(p, 0, sizeof(*p));
	FORWARD_ERR(check_opts(o, err));
	g = g ? g : &unknown;
	h = h ? h : &nohost;
	known = g->os_type[0] != '\0';
	win = !strcmp(g->os_type, "windows");
	p->windows = win;
	p->memory_mib = o->memory_mib ? o->memory_mib : 2048;
	p->vcpus = o->vcpus ? o->vcpus : 2;

	if (o->type)
		choose(&p->type, o->type, "asked");
	else if (h->kvm)
		choose(&p->type, "kvm", "the host runs guests with KVM");
	else
		choose(&p->type, "qemu", "the host cannot run guests with KVM: emulation (TCG)");

	if (known)
		age = guest_old(g);
	if (o->machine)
		choose(&p->machine, o->machine, "asked");
	else if (age.old)
		choose(&p->machine, "pc", "%s", age.why);
	else
		choose(&p->machine, "q35", known ? "a modern guest" : "the default for unknown guests");

	if (o->bus) {
		choose(&p->bus, o->bus, "asked");
		if (known && ((!strcmp(o->bus, "virtio-blk") && !g->virtio_blk) ||
			      (!strcmp(o->bus, "virtio-scsi") && !g->virtio_scsi)))
			warn(p, "the guest has no %s driver for booting: convert it first "
				"(imager convert), or it will not find its root disk", o->bus);
		if (!strcmp(o->bus, "ide") && !strcmp(p->machine.value, "q35"))
			return im_errf(err, IM_EXIT_USAGE, -EINVAL,
				       "bus ide needs machine pc (q35 has no IDE controller)");
	} else if (!known) {
		choose(&p->bus, "virtio-blk", "guest not inspected: assumed converted for virtio");
	} else if (g->virtio_blk) {
		choose(&p->bus, "virtio-blk", "the guest boots on virtio-blk");
	} else if (g->virtio_scsi) {
		choose(&p->bus, "virtio-scsi", "the guest boots on virtio-scsi");
	} else if (win && g->major < 6 && !strcmp(p->machine.value, "pc")) {
		choose(&p->bus, "ide", "no virtio storage driver, and Windows before Vista has no AHCI driver");
	} else {
		choose(&p->bus, "sata", "the guest has no virtio storage driver");
	}

	if (o->nic) {
		choose(&p->nic, o->nic, "asked");
		if (known && !strcmp(o->nic, "virtio") && !g->virtio_net)
			warn(p, "the guest has no virtio_net driver: its network will not come up");
	} else if (!known) {
		choose(&p->nic, "virtio", "guest not inspected: assumed to have virtio_net");
	} else if (g->virtio_net) {
		choose(&p->nic, "virtio", "the guest has virtio_net");
	} else {
		choose(&p->nic, "e1000", "the guest has no virtio network driver");
	}

	if (o->firmware) {
		choose(&p->firmware, o->firmware, "asked");
		if (!strcmp(o->firmware, "uefi-secure") && strcmp(p->machine.value, "q35"))
			return im_errf(err, IM_EXIT_USAGE, -EINVAL,
				       "firmware uefi-secure needs machine q35 (Secure Boot needs SMM)");
	} else if (!strcmp(g->firmware, "uefi"))
		choose(&p->firmware, "uefi", "the guest boots UEFI");
	else
		choose(&p->firmware, "bios", known ? "the guest boots BIOS" : "the default");

	if (o->cpu) {
		choose(&p->cpu, o->cpu, "asked");
		if (!strcmp(o->cpu, "host-passthrough"))
			warn(p, "cpu host-passthrough: the guest sees this host's exact CPU and cannot "
				"live-migrate to a host with a different CPU");
		if (!strcmp(o->cpu, "host-passthrough") && !strcmp(p->type.value, "qemu"))
			warn(p, "cpu host-passthrough needs KVM; emulated (type qemu) guests will not start");
	} else if (!strcmp(p->type.value, "kvm")) {
		choose(&p->cpu, "host-model", "the host's CPU model: fast, and migratable between like hosts");
	} else {
		choose(&p->cpu, "maximum", "emulated CPU: every feature TCG offers");
	}

	if (!o->io || !strcmp(o->io, "native"))
		choose(&p->io, "native", o->io ? "asked" : "Linux native AIO, with cache=none");
	else if (!strcmp(o->io, "auto"))
		choose(&p->io, h->io_uring ? "io_uring" : "native", h->io_uring ?
		       "the host's libvirt, qemu and kernel have io_uring" :
		       "the host lacks io_uring: native AIO");
	else
		choose(&p->io, o->io, "asked");

	choose(&p->clock, win ? "localtime" : "utc",
	       win ? "Windows keeps its clock in local time" : "the guest keeps its clock in UTC");
	return 0;
}

/* ---- the XML ---- */

struct wr {
	xmlTextWriterPtr w;
	bool bad;
};

static void start(struct wr *x, const char *name)
{
	if (!x->bad && xmlTextWriterStartElement(x->w, BAD_CAST name) < 0)
		x->bad = true;
}

static void end(struct wr *x)
{
	if (!x->bad && xmlTextWriterEndElement(x->w) < 0)
		x->bad = true;
}

static void attr(struct wr *x, const char *name, const char *value)
{
	if (!x->bad && xmlTextWriterWriteAttribute(x->w, BAD_CAST name, BAD_CAST value) < 0)
		x->bad = true;
}

static void attrf(struct wr *x, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void attrf(struct wr *x, const char *name, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	attr(x, name, buf);
}

static void text(struct wr *x, const char *name, const char *value)
{
	if (!x->bad && xmlTextWriterWriteElement(x->w, BAD_CAST name, BAD_CAST value) < 0)
		x->bad = true;
}

/* An empty element with attribute pairs, NULL-terminated. */
static void leaf(struct wr *x, const char *name, ...)
{
	va_list ap;
	const char *k;

	start(x, name);
	va_start(ap, name);
	while ((k = va_arg(ap, const char *)))
		attr(x, k, va_arg(ap, const char *));
	va_end(ap);
	end(x);
}

/* vda, vdb, ... vdz, vdaa ... */
static void dev_name(char *out, size_t len, const char *prefix, size_t i)
{
	if (i < 26)
		snprintf(out, len, "%s%c", prefix, (char)('a' + i));
	else
		snprintf(out, len, "%s%c%c", prefix, (char)('a' + i / 26 - 1), (char)('a' + i % 26));
}

static void write_metadata(struct wr *x, const struct dom_guest *g, const struct dom_plan *p)
{
	const struct { const char *name; const struct dom_choice *c; } cs[] = {
		{ "type", &p->type }, { "machine", &p->machine }, { "bus", &p->bus },
		{ "nic", &p->nic }, { "firmware", &p->firmware }, { "cpu", &p->cpu },
		{ "io", &p->io }, { "clock", &p->clock },
	};

	start(x, "metadata");
	if (!x->bad && xmlTextWriterStartElementNS(x->w, BAD_CAST "imager", BAD_CAST "definition",
						   BAD_CAST IMAGER_XMLNS) < 0)
		x->bad = true;
	attr(x, "version", IMAGER_VERSION);
	if (g && g->os_type[0]) {
		if (!x->bad && xmlTextWriterStartElementNS(x->w, BAD_CAST "imager", BAD_CAST "guest", NULL) < 0)
			x->bad = true;
		attr(x, "os", g->os_type);
		if (g->distro[0])
			attr(x, "distro", g->distro);
		attrf(x, "version", "%d.%d", g->major, g->minor);
		if (g->product[0])
			attr(x, "product", g->product);
		if (g->kernel[0])
			attr(x, "kernel", g->kernel);
		end(x);
	}
	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		if (!x->bad && xmlTextWriterStartElementNS(x->w, BAD_CAST "imager", BAD_CAST "choice", NULL) < 0)
			x->bad = true;
		attr(x, "name", cs[i].name);
		attr(x, "value", cs[i].c->value);
		attr(x, "why", cs[i].c->why);
		end(x);
	}
	end(x);
	end(x);
}

static void write_os_features(struct wr *x, const struct dom_plan *p)
{
	bool secure = !strcmp(p->firmware.value, "uefi-secure");
	bool uefi = secure || !strcmp(p->firmware.value, "uefi");

	start(x, "os");
	if (uefi)
		attr(x, "firmware", "efi");
	start(x, "type");
	attr(x, "arch", "x86_64");
	attr(x, "machine", p->machine.value);
	if (!x->bad && xmlTextWriterWriteString(x->w, BAD_CAST "hvm") < 0)
		x->bad = true;
	end(x);
	if (uefi) {
		/* uefi: plain OVMF, since a moved machine's boot loader is not
		 * always signed for the Microsoft keys.  uefi-secure: OVMF with
		 * Secure Boot and those keys enrolled (shim is signed for them),
		 * which needs SMM. */
		const char *on = secure ? "yes" : "no";

		start(x, "firmware");
		leaf(x, "feature", "enabled", on, "name", "enrolled-keys", NULL);
		leaf(x, "feature", "enabled", on, "name", "secure-boot", NULL);
		end(x);
	}
	end(x);

	start(x, "features");
	leaf(x, "acpi", NULL);
	leaf(x, "apic", NULL);
	if (secure)
		leaf(x, "smm", "state", "on", NULL);
	if (p->windows) {
		static const char *const hv[] = { "relaxed", "vapic", "vpindex", "runtime", "synic",
						  "stimer", "reset", "frequencies", NULL };

		start(x, "hyperv");
		attr(x, "mode", "custom");
		for (const char *const *f = hv; *f; f++) {
			if (!strcmp(*f, "vpindex"))
				leaf(x, "spinlocks", "state", "on", "retries", "8191", NULL);
			leaf(x, *f, "state", "on", NULL);
		}
		end(x);
	}
	if (!strcmp(p->type.value, "kvm") || p->windows)
		leaf(x, "vmport", "state", "off", NULL);
	end(x);

	start(x, "cpu");
	if (!strcmp(p->cpu.value, "host-model") || !strcmp(p->cpu.value, "host-passthrough") ||
	    !strcmp(p->cpu.value, "maximum")) {
		attr(x, "mode", p->cpu.value);
	} else {
		attr(x, "mode", "custom");
		attr(x, "match", "exact");
		start(x, "model");
		attr(x, "fallback", "allow");
		if (!x->bad && xmlTextWriterWriteString(x->w, BAD_CAST p->cpu.value) < 0)
			x->bad = true;
		end(x);
	}
	end(x);

	start(x, "clock");
	attr(x, "offset", p->clock.value);
	leaf(x, "timer", "name", "rtc", "tickpolicy", "catchup", NULL);
	leaf(x, "timer", "name", "pit", "tickpolicy", "delay", NULL);
	leaf(x, "timer", "name", "hpet", "present", "no", NULL);
	if (p->windows)
		leaf(x, "timer", "name", "hypervclock", "present", "yes", NULL);
	end(x);
}

static void write_disks(struct wr *x, const struct dom_opts *o, const struct dom_plan *p)
{
	const char *bus = p->bus.value;
	bool vblk = !strcmp(bus, "virtio-blk"), vscsi = !strcmp(bus, "virtio-scsi");
	const char *prefix = vblk ? "vd" : !strcmp(bus, "ide") ? "hd" : "sd";
	const char *tbus = vblk ? "virtio" : vscsi ? "scsi" : bus;
	char dev[8];

	if (vscsi) {
		start(x, "controller");
		attr(x, "type", "scsi");
		attr(x, "index", "0");
		attr(x, "model", "virtio-scsi");
		start(x, "driver");
		attrf(x, "queues", "%u", p->vcpus);
		attr(x, "iothread", "1");
		end(x);
		end(x);
	}
	for (size_t i = 0; i < o->ndisks; i++) {
		const struct dom_disk *d = &o->disks[i];

		start(x, "disk");
		attr(x, "type", d->source == DOM_SRC_VOLUME ? "volume" :
				d->source == DOM_SRC_BLOCK ? "block" : "file");
		attr(x, "device", "disk");
		start(x, "driver");
		attr(x, "name", "qemu");
		attr(x, "type", d->format);
		attr(x, "cache", "none");
		attr(x, "io", p->io.value);
		attr(x, "discard", "unmap");
		attr(x, "detect_zeroes", "unmap");
		if (vblk)
			attr(x, "iothread", "1");
		if (d->backing_nbd) {
			attr(x, "error_policy", "stop");
			attr(x, "rerror_policy", "stop");
		}
		end(x);
		start(x, "source");
		if (d->source == DOM_SRC_VOLUME) {
			attr(x, "pool", d->pool);
			attr(x, "volume", d->volume);
		} else {
			attr(x, d->source == DOM_SRC_BLOCK ? "dev" : "file", d->path);
		}
		end(x);
		if (d->backing_nbd) {
			start(x, "backingStore");
			attr(x, "type", "network");
			leaf(x, "format", "type", "raw", NULL);
			start(x, "source");
			attr(x, "protocol", "nbd");
			leaf(x, "host", "transport", "unix", "socket", d->backing_nbd, NULL);
			end(x);
			leaf(x, "backingStore", NULL);
			end(x);
		}
		dev_name(dev, sizeof(dev), prefix, i);
		leaf(x, "target", "dev", dev, "bus", tbus, NULL);
		if (i == 0)
			leaf(x, "boot", "order", "1", NULL);
		end(x);
	}
}

static void write_nic(struct wr *x, const struct dom_opts *o, const struct dom_plan *p)
{
	const char *net = o->net ? o->net : "network:default";
	bool virtio = !strcmp(p->nic.value, "virtio");

	start(x, "interface");
	if (!strcmp(net, "user")) {
		attr(x, "type", "user");
	} else if (!strncmp(net, "bridge:", 7)) {
		attr(x, "type", "bridge");
		leaf(x, "source", "bridge", net + 7, NULL);
	} else {
		attr(x, "type", "network");
		leaf(x, "source", "network", net + 8, NULL);
	}
	if (o->mac)
		leaf(x, "mac", "address", o->mac, NULL);
	leaf(x, "model", "type", p->nic.value, NULL);
	/* Multiqueue needs a tap device (network, bridge); not user mode. */
	if (virtio && p->vcpus > 1 && strcmp(net, "user")) {
		start(x, "driver");
		attrf(x, "queues", "%u", p->vcpus);
		end(x);
	}
	end(x);
}

static void write_devices(struct wr *x, const struct dom_opts *o, const struct dom_plan *p)
{
	start(x, "devices");
	write_disks(x, o, p);
	write_nic(x, o, p);

	start(x, "serial");
	attr(x, "type", "pty");
	if (o->serial_log)
		leaf(x, "log", "file", o->serial_log, "append", "off", NULL);
	leaf(x, "target", "port", "0", NULL);
	end(x);
	start(x, "console");
	attr(x, "type", "pty");
	leaf(x, "target", "type", "serial", "port", "0", NULL);
	end(x);

	start(x, "channel");
	attr(x, "type", "unix");
	leaf(x, "target", "type", "virtio", "name", "org.qemu.guest_agent.0", NULL);
	end(x);

	leaf(x, "input", "type", "tablet", "bus", "usb", NULL);
	start(x, "graphics");
	attr(x, "type", "vnc");
	attr(x, "port", "-1");
	attr(x, "autoport", "yes");
	leaf(x, "listen", "type", "address", "address", "127.0.0.1", NULL);
	end(x);
	start(x, "video");
	/* virtio-gpu needs a guest driver: modern Linux has one, Windows and
	 * old guests get the standard VGA. */
	leaf(x, "model", "type", !p->windows && !strcmp(p->machine.value, "q35") ? "virtio" : "vga",
	     NULL);
	end(x);

	start(x, "memballoon");
	attr(x, "model", "virtio");
	leaf(x, "stats", "period", "10", NULL);
	end(x);
	start(x, "rng");
	attr(x, "model", "virtio");
	start(x, "backend");
	attr(x, "model", "random");
	if (!x->bad && xmlTextWriterWriteString(x->w, BAD_CAST "/dev/urandom") < 0)
		x->bad = true;
	end(x);
	end(x);
	end(x);
}

int dom_xml(const struct dom_opts *o, const struct dom_guest *g, const struct dom_plan *p,
	    char **out, struct im_err *err)
{
	xmlBufferPtr buf = xmlBufferCreate();
	struct wr x = { buf ? xmlNewTextWriterMemory(buf, 0) : NULL, false };
	char num[32];

	*out = NULL;
	if (!x.w) {
		if (buf)
			xmlBufferFree(buf);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "cannot start the XML writer");
	}
	xmlTextWriterSetIndent(x.w, 1);
	xmlTextWriterSetIndentString(x.w, BAD_CAST "  ");

	start(&x, "domain");
	attr(&x, "type", p->type.value);
	text(&x, "name", o->name);
	if (o->description)
		text(&x, "description", o->description);
	write_metadata(&x, g, p);
	snprintf(num, sizeof(num), "%ju", (uintmax_t)p->memory_mib);
	start(&x, "memory");
	attr(&x, "unit", "MiB");
	if (!x.bad && xmlTextWriterWriteString(x.w, BAD_CAST num) < 0)
		x.bad = true;
	end(&x);
	start(&x, "currentMemory");
	attr(&x, "unit", "MiB");
	if (!x.bad && xmlTextWriterWriteString(x.w, BAD_CAST num) < 0)
		x.bad = true;
	end(&x);
	snprintf(num, sizeof(num), "%u", p->vcpus);
	start(&x, "vcpu");
	attr(&x, "placement", "static");
	if (!x.bad && xmlTextWriterWriteString(x.w, BAD_CAST num) < 0)
		x.bad = true;
	end(&x);
	text(&x, "iothreads", "1");
	write_os_features(&x, p);
	text(&x, "on_poweroff", "destroy");
	text(&x, "on_reboot", "restart");
	text(&x, "on_crash", "destroy");
	start(&x, "pm");
	leaf(&x, "suspend-to-mem", "enabled", "no", NULL);
	leaf(&x, "suspend-to-disk", "enabled", "no", NULL);
	end(&x);
	write_devices(&x, o, p);
	end(&x);
	if (!x.bad && xmlTextWriterEndDocument(x.w) < 0)
		x.bad = true;
	xmlFreeTextWriter(x.w);
	if (!x.bad)
		*out = strdup((const char *)xmlBufferContent(buf));
	xmlBufferFree(buf);
	if (!*out)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "writing the domain XML failed");
	return 0;
}

int dom_xml_save(const char *path, const char *xml, size_t len, bool force, struct im_err *err)
{
	int r;

	RETURN_IF(!force && access(path, F_OK) == 0, err, IM_EXIT_TARGET, -EEXIST,
		  "%s exists (--force replaces it)", path);
	if ((r = util_write_file_atomic(path, xml, len)) < 0)
		return im_errf(err, r == -ENAMETOOLONG ? IM_EXIT_USAGE : IM_EXIT_IO, r, "writing %s: %s",
			       path, strerror(-r));
	return 0;
}
