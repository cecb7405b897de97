/* SPDX-License-Identifier: GPL-2.0-or-later */
/* VM definition: the choices for known guests and hosts, option checking,
 * and the XML read back with libxml2's XPath (escaping included). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>

#include "imager/domain.h"
#include "unit.h"

static const struct dom_disk disk1 = { DOM_SRC_FILE, "/var/lib/libvirt/images/a.qcow2", NULL, NULL, "qcow2", NULL };

static struct dom_guest linux_guest(bool virtio)
{
	struct dom_guest g = { .os_type = "linux", .distro = "debian", .major = 12,
			       .kernel = "6.1.0-13-amd64", .firmware = "bios",
			       .virtio_blk = virtio, .virtio_scsi = virtio, .virtio_net = virtio };
	return g;
}

static struct dom_guest windows_guest(int major, int minor)
{
	struct dom_guest g = { .os_type = "windows", .distro = "windows", .major = major,
			       .minor = minor, .firmware = "bios" };
	return g;
}

static int decide(const struct dom_opts *o, const struct dom_guest *g, bool kvm, struct dom_plan *p)
{
	struct dom_host h = { .kvm = kvm, .io_uring = true };
	struct im_err err = { 0 };
	return dom_decide(o, g, &h, p, &err);
}

static void choices_linux(void)
{
	struct dom_opts o = { .name = "web1", .disks = &disk1, .ndisks = 1 };
	struct dom_guest g = linux_guest(true);
	struct dom_plan p;

	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK_STR(p.type.value, "kvm");
	CHECK_STR(p.machine.value, "q35");
	CHECK_STR(p.bus.value, "virtio-blk");
	CHECK_STR(p.nic.value, "virtio");
	CHECK_STR(p.firmware.value, "bios");
	CHECK_STR(p.cpu.value, "host-model");
	CHECK_STR(p.io.value, "native");
	CHECK_STR(p.clock.value, "utc");
	CHECK_EQ_U(p.memory_mib, 2048);
	CHECK_EQ_U(p.vcpus, 2);
	CHECK(!p.warnings[0][0]);

	/* Without KVM: emulated, and the CPU is TCG's maximum. */
	CHECK(decide(&o, &g, false, &p) == 0);
	CHECK_STR(p.type.value, "qemu");
	CHECK_STR(p.cpu.value, "maximum");

	/* Not converted: SATA and e1000. */
	g = linux_guest(false);
	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK_STR(p.bus.value, "sata");
	CHECK_STR(p.nic.value, "e1000");

	/* Old kernel: pc. */
	snprintf(g.kernel, sizeof(g.kernel), "2.6.32-754.el6.x86_64");
	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK_STR(p.machine.value, "pc");
	g = linux_guest(true);
	snprintf(g.distro, sizeof(g.distro), "centos");
	g.major = 5;
	g.kernel[0] = '\0';
	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK_STR(p.machine.value, "pc");

	/* UEFI guest. */
	g = linux_guest(true);
	snprintf(g.firmware, sizeof(g.firmware), "uefi");
	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK_STR(p.firmware.value, "uefi");
}

static void choices_windows(void)
{
	struct dom_opts o = { .name = "w", .disks = &disk1, .ndisks = 1 };
	struct dom_guest g = windows_guest(10, 0);
	struct dom_plan p;

	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK(p.windows);
	CHECK_STR(p.machine.value, "q35");
	CHECK_STR(p.bus.value, "sata");
	CHECK_STR(p.nic.value, "e1000");
	CHECK_STR(p.clock.value, "localtime");
	g.virtio_blk = g.virtio_net = true;
	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK_STR(p.bus.value, "virtio-blk");
	CHECK_STR(p.nic.value, "virtio");

	g = windows_guest(6, 0);       /* Vista / 2008 */
	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK_STR(p.machine.value, "pc");
	CHECK_STR(p.bus.value, "sata");
	g = windows_guest(5, 1);       /* XP: no AHCI */
	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK_STR(p.bus.value, "ide");
	g = windows_guest(6, 1);       /* 7 */
	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK_STR(p.machine.value, "q35");
}

static void asked_and_warned(void)
{
	struct dom_opts o = { .name = "x", .disks = &disk1, .ndisks = 1, .cpu = "host-passthrough",
			      .bus = "virtio-blk", .io = "auto", .memory_mib = 4096, .vcpus = 4 };
	struct dom_guest g = linux_guest(false);
	struct dom_plan p;

	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK_STR(p.cpu.value, "host-passthrough");
	CHECK_STR(p.bus.value, "virtio-blk");
	CHECK_STR(p.io.value, "io_uring");
	CHECK(strstr(p.warnings[0], "convert it first") != NULL);
	CHECK(strstr(p.warnings[1], "migrate") != NULL);
	CHECK_EQ_U(p.memory_mib, 4096);
	CHECK_EQ_U(p.vcpus, 4);
	/* Unknown guest: virtio assumed, nothing warned. */
	o.cpu = NULL;
	o.bus = NULL;
	CHECK(decide(&o, NULL, false, &p) == 0);
	CHECK_STR(p.bus.value, "virtio-blk");
	CHECK(!p.warnings[0][0]);
}

static void bad_options(void)
{
	struct dom_opts base = { .name = "ok", .disks = &disk1, .ndisks = 1 }, o;
	struct dom_disk rel = { DOM_SRC_FILE, "rel.img", NULL, NULL, "raw", NULL };
	struct dom_disk fmt = { DOM_SRC_FILE, "/a.vmdk", NULL, NULL, "vmdk", NULL };
	struct dom_plan p;

#define BAD(field, value) do { o = base; o.field = value; CHECK(decide(&o, NULL, true, &p) == -EINVAL); } while (0)
	BAD(name, "");
	BAD(name, "-x");
	BAD(name, "a/b");
	BAD(name, "a'b");
	BAD(name, "0123456789012345678901234567890123456789012345678901234567890123456789");
	BAD(machine, "virt");
	BAD(bus, "nvme");
	BAD(nic, "rtl");
	BAD(firmware, "coreboot");
	BAD(io, "fast");
	BAD(cpu, "host model");
	BAD(mac, "52:54:00:12:34");
	BAD(mac, "01:54:00:12:34:56");     /* multicast */
	BAD(mac, "52:54:00:12:34:5g");
	BAD(net, "network:a b");
	BAD(net, "vde:x");
	BAD(serial_log, "relative.log");
	BAD(memory_mib, 1);
	BAD(vcpus, 1000);
	BAD(disks, &rel);
	BAD(disks, &fmt);
	BAD(ndisks, 0);
	o = base;
	o.bus = "ide";
	o.machine = "q35";
	CHECK(decide(&o, NULL, true, &p) == -EINVAL);
#undef BAD
	CHECK(dom_mac_ok("52:54:00:AB:cd:ef"));
	CHECK(dom_name_ok("imager-test_1.2+x"));
}

static char *xpath(xmlDocPtr doc, const char *expr)
{
	xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
	xmlXPathObjectPtr r;
	char *s = NULL;

	xmlXPathRegisterNs(ctx, BAD_CAST "imager", BAD_CAST "urn:x-imager:domain:1");
	r = xmlXPathEvalExpression(BAD_CAST expr, ctx);
	if (r) {
		xmlChar *v = xmlXPathCastToString(r);
		s = strdup((const char *)v);
		xmlFree(v);
		xmlXPathFreeObject(r);
	}
	xmlXPathFreeContext(ctx);
	return s;
}

#define CHECK_XP(doc, expr, want) do { char *_s = xpath(doc, expr); CHECK_STR(_s, want); free(_s); } while (0)

static void xml_linux(void)
{
	struct dom_disk d[3] = {
		{ DOM_SRC_VOLUME, NULL, "fast<&>", "web1-disk1.qcow2", "qcow2", NULL },
		{ DOM_SRC_BLOCK, "/dev/vg/web1", NULL, NULL, "raw", NULL },
		{ DOM_SRC_FILE, "/var/lib/imager/instant/web1/disk3.qcow2", NULL, NULL, "qcow2",
		  "/var/tmp/imager-serve-x/sock" },
	};
	struct dom_opts o = { .name = "web1", .disks = d, .ndisks = 3, .mac = "52:54:00:12:34:56",
			      .net = "bridge:br0", .serial_log = "/var/log/x'y.log", .vcpus = 4,
			      .description = "from \"sda\" <p2v>" };
	struct dom_guest g = linux_guest(true);
	struct im_err err = { 0 };
	struct dom_plan p;
	char *xml = NULL;
	xmlDocPtr doc;

	CHECK(decide(&o, &g, true, &p) == 0);
	CHECK(dom_xml(&o, &g, &p, &xml, &err) == 0 && xml);
	doc = xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET);
	CHECK(doc != NULL);
	if (!doc) {
		free(xml);
		return;
	}
	CHECK_XP(doc, "string(/domain/@type)", "kvm");
	CHECK_XP(doc, "string(/domain/name)", "web1");
	CHECK_XP(doc, "string(/domain/description)", "from \"sda\" <p2v>");
	CHECK_XP(doc, "string(/domain/os/type/@machine)", "q35");
	CHECK_XP(doc, "string(/domain/cpu/@mode)", "host-model");
	CHECK_XP(doc, "string(/domain/vcpu)", "4");
	CHECK_XP(doc, "string(/domain/iothreads)", "1");
	CHECK_XP(doc, "string(/domain/devices/disk[1]/@type)", "volume");
	CHECK_XP(doc, "string(/domain/devices/disk[1]/source/@pool)", "fast<&>");
	CHECK_XP(doc, "string(/domain/devices/disk[1]/driver/@cache)", "none");
	CHECK_XP(doc, "string(/domain/devices/disk[1]/driver/@io)", "native");
	CHECK_XP(doc, "string(/domain/devices/disk[1]/driver/@discard)", "unmap");
	CHECK_XP(doc, "string(/domain/devices/disk[1]/driver/@detect_zeroes)", "unmap");
	CHECK_XP(doc, "string(/domain/devices/disk[1]/driver/@iothread)", "1");
	CHECK_XP(doc, "string(/domain/devices/disk[1]/target/@dev)", "vda");
	CHECK_XP(doc, "string(/domain/devices/disk[1]/boot/@order)", "1");
	CHECK_XP(doc, "string(/domain/devices/disk[2]/@type)", "block");
	CHECK_XP(doc, "string(/domain/devices/disk[2]/source/@dev)", "/dev/vg/web1");
	CHECK_XP(doc, "string(/domain/devices/disk[2]/target/@dev)", "vdb");
	CHECK_XP(doc, "count(/domain/devices/disk[2]/boot)", "0");
	CHECK_XP(doc, "count(/domain/devices/disk[2]/backingStore)", "0");
	CHECK_XP(doc, "count(/domain/devices/disk[2]/driver/@error_policy)", "0");
	/* an overlay over an image's NBD export (p2v --instant) */
	CHECK_XP(doc, "string(/domain/devices/disk[3]/@type)", "file");
	CHECK_XP(doc, "string(/domain/devices/disk[3]/driver/@type)", "qcow2");
	CHECK_XP(doc, "string(/domain/devices/disk[3]/driver/@error_policy)", "stop");
	CHECK_XP(doc, "string(/domain/devices/disk[3]/driver/@rerror_policy)", "stop");
	CHECK_XP(doc, "string(/domain/devices/disk[3]/backingStore/@type)", "network");
	CHECK_XP(doc, "string(/domain/devices/disk[3]/backingStore/format/@type)", "raw");
	CHECK_XP(doc, "string(/domain/devices/disk[3]/backingStore/source/@protocol)", "nbd");
	CHECK_XP(doc, "string(/domain/devices/disk[3]/backingStore/source/host/@transport)", "unix");
	CHECK_XP(doc, "string(/domain/devices/disk[3]/backingStore/source/host/@socket)",
		 "/var/tmp/imager-serve-x/sock");
	CHECK_XP(doc, "count(/domain/devices/disk[3]/backingStore/backingStore)", "1");
	CHECK_XP(doc, "string(/domain/devices/disk[3]/target/@dev)", "vdc");
	CHECK_XP(doc, "string(/domain/devices/interface/@type)", "bridge");
	CHECK_XP(doc, "string(/domain/devices/interface/source/@bridge)", "br0");
	CHECK_XP(doc, "string(/domain/devices/interface/mac/@address)", "52:54:00:12:34:56");
	CHECK_XP(doc, "string(/domain/devices/interface/model/@type)", "virtio");
	CHECK_XP(doc, "string(/domain/devices/interface/driver/@queues)", "4");
	CHECK_XP(doc, "string(/domain/devices/serial/log/@file)", "/var/log/x'y.log");
	CHECK_XP(doc, "string(/domain/devices/channel/target/@name)", "org.qemu.guest_agent.0");
	CHECK_XP(doc, "string(/domain/devices/rng/@model)", "virtio");
	CHECK_XP(doc, "string(/domain/devices/memballoon/@model)", "virtio");
	CHECK_XP(doc, "count(/domain/features/acpi)", "1");
	CHECK_XP(doc, "count(/domain/features/hyperv)", "0");
	CHECK_XP(doc, "string(/domain/clock/@offset)", "utc");
	CHECK_XP(doc, "string(/domain/metadata/imager:definition/imager:choice[@name='bus']/@value)",
		 "virtio-blk");
	CHECK_XP(doc, "string(/domain/metadata/imager:definition/imager:guest/@distro)", "debian");
	xmlFreeDoc(doc);
	free(xml);
}

/* Decided (TCG host) and written, the XML parsed: NULL after a failed CHECK. */
static xmlDocPtr planned_doc(const struct dom_opts *o, const struct dom_guest *g, struct dom_plan *p)
{
	struct im_err err = { 0 };
	char *xml = NULL;
	xmlDocPtr doc = NULL;

	CHECK(decide(o, g, false, p) == 0);
	CHECK(dom_xml(o, g, p, &xml, &err) == 0 && xml);
	if (xml)
		doc = xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET);
	CHECK(doc != NULL);
	free(xml);
	return doc;
}

static void xml_windows_uefi_scsi(void)
{
	struct dom_opts o = { .name = "w10", .disks = &disk1, .ndisks = 1, .bus = "virtio-scsi",
			      .nic = "virtio", .net = "user", .vcpus = 2, .cpu = "EPYC-Rome" };
	struct dom_guest g = windows_guest(10, 0);
	struct dom_plan p;
	xmlDocPtr doc;

	snprintf(g.firmware, sizeof(g.firmware), "uefi");
	g.virtio_scsi = g.virtio_net = true;
	if (!(doc = planned_doc(&o, &g, &p)))
		return;
	CHECK_XP(doc, "string(/domain/@type)", "qemu");
	CHECK_XP(doc, "string(/domain/os/@firmware)", "efi");
	CHECK_XP(doc, "string(/domain/os/firmware/feature[@name='secure-boot']/@enabled)", "no");
	CHECK_XP(doc, "string(/domain/cpu/@mode)", "custom");
	CHECK_XP(doc, "string(/domain/cpu/model)", "EPYC-Rome");
	CHECK_XP(doc, "count(/domain/features/hyperv/*)", "9");
	CHECK_XP(doc, "string(/domain/features/hyperv/spinlocks/@retries)", "8191");
	CHECK_XP(doc, "string(/domain/clock/@offset)", "localtime");
	CHECK_XP(doc, "string(/domain/clock/timer[@name='hypervclock']/@present)", "yes");
	CHECK_XP(doc, "string(/domain/devices/controller[@type='scsi']/@model)", "virtio-scsi");
	CHECK_XP(doc, "string(/domain/devices/controller[@type='scsi']/driver/@iothread)", "1");
	CHECK_XP(doc, "string(/domain/devices/disk/target/@bus)", "scsi");
	CHECK_XP(doc, "string(/domain/devices/disk/target/@dev)", "sda");
	CHECK_XP(doc, "count(/domain/devices/disk/driver/@iothread)", "0");
	CHECK_XP(doc, "string(/domain/devices/interface/@type)", "user");
	CHECK_XP(doc, "count(/domain/devices/interface/driver)", "0");
	CHECK_XP(doc, "string(/domain/devices/video/model/@type)", "vga");
	CHECK_XP(doc, "count(/domain/features/smm)", "0");
	xmlFreeDoc(doc);

	/* Secure Boot asked: the keys enrolled, SMM on; refused on pc */
	o.firmware = "uefi-secure";
	if ((doc = planned_doc(&o, &g, &p))) {
		CHECK_STR(p.firmware.value, "uefi-secure");
		CHECK_XP(doc, "string(/domain/os/@firmware)", "efi");
		CHECK_XP(doc, "string(/domain/os/firmware/feature[@name='secure-boot']/@enabled)", "yes");
		CHECK_XP(doc, "string(/domain/os/firmware/feature[@name='enrolled-keys']/@enabled)", "yes");
		CHECK_XP(doc, "string(/domain/features/smm/@state)", "on");
		CHECK_XP(doc, "string(/domain/os/type/@machine)", "q35");
		xmlFreeDoc(doc);
	}
	o.machine = "pc";
	CHECK(decide(&o, &g, false, &p) == -EINVAL);
}

UNIT_MAIN(UNIT(choices_linux), UNIT(choices_windows), UNIT(asked_and_warned), UNIT(bad_options),
	  UNIT(xml_linux), UNIT(xml_windows_uefi_scsi))
