/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Virtual machines as sources (include/imager/vmsource.h): the committed
 * samples (tests/data/vm: an OVF as VMware's ovftool exports it from ESXi,
 * one as VirtualBox 7 exports it, a .vmx as ESXi writes it) read into the
 * facts a new VM needs; then every hostile case: files outside the
 * folder ("../../etc/shadow", absolute paths, links out), extents named
 * twice or naming the descriptor, a flat extent too short, a sparse
 * header that disagrees, raw device mappings, snapshot chains that loop
 * or whose CIDs disagree; OVFs with 10^9 MB of memory, 17 disks, bad
 * MACs, a DOCTYPE; .vmx files with duplicate keys, missing quotes, NULs,
 * long lines; tars with members "../x", "/etc/x" and "d/x", truncated, a
 * bad checksum, a link; manifests whose digest does not match or that
 * miss an entry.  OVAs made by GNU tar (ustar, pax, gnu, long names) give
 * each member's bytes at the offsets found.  Runs under ASan/UBSan too.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "imager/vmsource.h"
#include "unit.h"

static char tmp[64];
static char data_dir[PATH_MAX - 256];

static void put(const char *name, const void *buf, size_t len)
{
	char p[PATH_MAX];
	FILE *f;
	snprintf(p, sizeof(p), "%s/%s", tmp, name);
	f = fopen(p, "wb");
	if (!f) {
		perror(p);
		abort();
	}
	if (len && fwrite(buf, 1, len, f) != len)
		abort();
	fclose(f);
}

static void puts_file(const char *name, const char *text)
{
	put(name, text, strlen(text));
}

static void put_size(const char *name, off_t size)
{
	char p[PATH_MAX];
	int fd;
	snprintf(p, sizeof(p), "%s/%s", tmp, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, size) < 0)
		abort();
	close(fd);
}

static char *path_of(const char *name)
{
	static char p[4][PATH_MAX];
	static int i;
	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", tmp, name);
	return p[i];
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b;
	long n;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	if (fread(b, 1, (size_t)n, f) != (size_t)n)
		abort();
	b[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return b;
}

static char *sample(const char *name, size_t *len)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", data_dir, name);
	return slurp(p, len);
}

/* s with the first `from` replaced by `to` (malloc'ed). */
static char *replace(const char *s, const char *from, const char *to)
{
	const char *at = strstr(s, from);
	char *r;
	if (!at)
		abort();
	r = malloc(strlen(s) - strlen(from) + strlen(to) + 1);
	memcpy(r, s, (size_t)(at - s));
	strcpy(r + (at - s), to);
	strcat(r, at + strlen(from));
	return r;
}

#define EXPECT_ERR(call, code, cls, needle) do { struct im_err _e = { 0 }; \
	int _r = (call); CHECK_EQ_U((unsigned)-_r, (unsigned)-(code)); \
	CHECK_EQ_U(_e.exit_class, cls); \
	if (!strstr(_e.msg, needle)) { unit_failures++; \
		fprintf(stderr, "  %s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, _e.msg, needle); } \
	} while (0)
#define E (&_e)

/* ---- descriptions ---- */

typedef int (*vm_parser)(const char *, size_t, struct vm_desc *, struct im_err *);

/* The sample parsed into *d; its text (free it), or NULL (failed). */
static char *parse_sample(const char *name, vm_parser parse, struct vm_desc *d)
{
	struct im_err err = { 0 };
	size_t len;
	char *x = sample(name, &len);

	CHECK(x);
	if (!x)
		return NULL;
	CHECK_EQ_U(parse(x, len, d, &err), 0);
	if (err.msg[0])
		fprintf(stderr, "  %s: %s\n", name, err.msg);
	return x;
}

static void check_vm(const struct vm_desc *d, const char *name, uint64_t mib, unsigned vcpus,
		     enum vm_firmware fw, bool secure, const char *os, size_t ndisks, size_t nnics)
{
	CHECK_STR(d->name, name);
	CHECK_EQ_U(d->memory_mib, mib);
	CHECK_EQ_U(d->vcpus, vcpus);
	CHECK_EQ_U(d->firmware, fw);
	CHECK_EQ_U(d->secure_boot, secure);
	CHECK_STR(d->guest_os, os);
	CHECK_EQ_U(d->ndisks, ndisks);
	CHECK_EQ_U(d->nnics, nnics);
}

static void ovf_esxi(void)
{
	struct vm_desc d;
	char *x = parse_sample("esxi-debian12.ovf", vm_ovf_parse, &d);

	if (!x)
		return;
	check_vm(&d, "debian12", 2048, 2, VM_FW_EFI, true, "debian12_64Guest", 1, 1);
	CHECK_STR(d.disks[0].file, "debian12-disk1.vmdk");
	CHECK_STR(d.disks[0].controller, "scsi");
	CHECK_EQ_U(d.disks[0].bus, 0);
	CHECK_EQ_U(d.disks[0].unit, 0);
	CHECK_EQ_U(d.disks[0].capacity, 16ull << 30);
	CHECK(!d.disks[0].gzip);
	CHECK_STR(d.nics[0].mac, "00:50:56:8a:4f:21");
	CHECK_STR(d.nics[0].model, "VmxNet3");
	/* the values of keys it does not read may be long and hold newlines */
	{
		char val[400], *h;
		struct im_err err = { 0 };
		memset(val, 'v', 300);
		snprintf(val + 300, sizeof(val) - 300, "&#10;x\"/>");
		h = replace(x, "TRUE\"/>", val);
		CHECK_EQ_U(vm_ovf_parse(h, strlen(h), &d, &err), 0);
		CHECK_EQ_U(d.firmware, VM_FW_EFI);
		free(h);
	}
	free(x);
}

static void ovf_vbox(void)
{
	struct vm_desc d;
	struct im_err err = { 0 };
	char *x = parse_sample("vbox7-debian12.ovf", vm_ovf_parse, &d);

	if (!x)
		return;
	check_vm(&d, "debian12", 4096, 2, VM_FW_EFI, false, "Debian_64", 1, 1);
	CHECK_STR(d.disks[0].file, "debian12-disk001.vmdk");
	CHECK_STR(d.disks[0].controller, "sata");
	CHECK_EQ_U(d.disks[0].unit, 0);
	CHECK_EQ_U(d.disks[0].capacity, 21474836480ull);
	CHECK_STR(d.nics[0].model, "E1000");
	CHECK_STR(d.nics[0].mac, "08:00:27:d1:e2:f3");
	/* BIOS when VirtualBox says so; gzip-compressed disks */
	{
		char *b = replace(x, "<Firmware type=\"EFI\"/>", "<Firmware type=\"BIOS\"/>");
		char *g = replace(b, "ovf:href=\"debian12-disk001.vmdk\"",
				  "ovf:href=\"debian12-disk001.vmdk.gz\" ovf:compression=\"gzip\"");
		CHECK_EQ_U(vm_ovf_parse(g, strlen(g), &d, &err), 0);
		CHECK_EQ_U(d.firmware, VM_FW_BIOS);
		CHECK(d.disks[0].gzip);
		CHECK_STR(d.disks[0].file, "debian12-disk001.vmdk.gz");
		free(b);
		free(g);
	}
	free(x);
}

/* An OVF 2.0 VirtualBox writes: StorageItem and EthernetPortItem. */
static void ovf_v2(void)
{
	static const char x[] =
		"<?xml version=\"1.0\"?>\n"
		"<Envelope ovf:version=\"2.0\" xmlns=\"http://schemas.dmtf.org/ovf/envelope/2\" "
		"xmlns:ovf=\"http://schemas.dmtf.org/ovf/envelope/2\" "
		"xmlns:rasd=\"http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData\" "
		"xmlns:epasd=\"http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_EthernetPortAllocationSettingData.xsd\" "
		"xmlns:sasd=\"http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_StorageAllocationSettingData.xsd\">"
		"<References><File ovf:id=\"file1\" ovf:href=\"v-disk001.vmdk\"/></References>"
		"<DiskSection><Info>x</Info><Disk ovf:capacity=\"8\" ovf:capacityAllocationUnits=\"byte * 2^30\" "
		"ovf:diskId=\"vmdisk1\" ovf:fileRef=\"file1\"/></DiskSection>"
		"<VirtualSystem ovf:id=\"v2\"><Info>x</Info><VirtualHardwareSection><Info>x</Info>"
		"<Item><rasd:InstanceID>1</rasd:InstanceID><rasd:ResourceType>3</rasd:ResourceType>"
		"<rasd:VirtualQuantity>4</rasd:VirtualQuantity></Item>"
		"<Item><rasd:AllocationUnits>byte * 2^30</rasd:AllocationUnits><rasd:InstanceID>2</rasd:InstanceID>"
		"<rasd:ResourceType>4</rasd:ResourceType><rasd:VirtualQuantity>8</rasd:VirtualQuantity></Item>"
		"<Item><rasd:InstanceID>3</rasd:InstanceID><rasd:ResourceSubType>AHCI</rasd:ResourceSubType>"
		"<rasd:ResourceType>20</rasd:ResourceType></Item>"
		"<StorageItem><sasd:AddressOnParent>1</sasd:AddressOnParent>"
		"<sasd:HostResource>ovf://disk/vmdisk1</sasd:HostResource><sasd:InstanceID>4</sasd:InstanceID>"
		"<sasd:Parent>3</sasd:Parent><sasd:ResourceType>17</sasd:ResourceType></StorageItem>"
		"<EthernetPortItem><epasd:Address>52-54-00-AB-CD-EF</epasd:Address><epasd:InstanceID>5</epasd:InstanceID>"
		"<epasd:ResourceSubType>virtio</epasd:ResourceSubType><epasd:ResourceType>10</epasd:ResourceType>"
		"</EthernetPortItem></VirtualHardwareSection></VirtualSystem></Envelope>";
	struct vm_desc d;
	struct im_err err = { 0 };

	CHECK_EQ_U(vm_ovf_parse(x, sizeof(x) - 1, &d, &err), 0);
	if (err.msg[0])
		fprintf(stderr, "  %s\n", err.msg);
	check_vm(&d, "v2", 8192, 4, VM_FW_UNKNOWN, false, "", 1, 1);
	CHECK_STR(d.disks[0].controller, "sata");
	CHECK_EQ_U(d.disks[0].unit, 1);
	CHECK_EQ_U(d.disks[0].capacity, 8ull << 30);
	CHECK_STR(d.nics[0].mac, "52:54:00:ab:cd:ef");
	CHECK_STR(d.nics[0].model, "virtio");
}

static char *many_disks(int n)
{
	size_t cap = 4096 + (size_t)n * 600;
	char *x = malloc(cap);
	size_t at = 0;
	at += (size_t)snprintf(x + at, cap - at,
		"<Envelope xmlns=\"http://schemas.dmtf.org/ovf/envelope/1\" "
		"xmlns:ovf=\"http://schemas.dmtf.org/ovf/envelope/1\" "
		"xmlns:rasd=\"http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData\">"
		"<References>");
	for (int i = 0; i < n; i++)
		at += (size_t)snprintf(x + at, cap - at, "<File ovf:id=\"f%d\" ovf:href=\"d%d.vmdk\"/>", i, i);
	at += (size_t)snprintf(x + at, cap - at, "</References><DiskSection>");
	for (int i = 0; i < n; i++)
		at += (size_t)snprintf(x + at, cap - at, "<Disk ovf:diskId=\"k%d\" ovf:fileRef=\"f%d\"/>", i, i);
	at += (size_t)snprintf(x + at, cap - at,
		"</DiskSection><VirtualSystem ovf:id=\"m\"><VirtualHardwareSection>");
	for (int i = 0; i < n; i++)
		at += (size_t)snprintf(x + at, cap - at,
			"<Item><rasd:HostResource>ovf:/disk/k%d</rasd:HostResource>"
			"<rasd:InstanceID>%d</rasd:InstanceID><rasd:ResourceType>17</rasd:ResourceType></Item>",
			i, 10 + i);
	snprintf(x + at, cap - at, "</VirtualHardwareSection></VirtualSystem></Envelope>");
	return x;
}

static void ovf_hostile(void)
{
	size_t len;
	char *x = sample("esxi-debian12.ovf", &len), *h, *h2;
	struct vm_desc d;

	if (!x) {
		CHECK(x);
		return;
	}
	/* 10^9 MB of memory */
	h = replace(x, "<rasd:VirtualQuantity>2048</rasd:VirtualQuantity>",
		    "<rasd:VirtualQuantity>1000000000</rasd:VirtualQuantity>");
	h2 = replace(h, "byte * 2^20", "MegaBytes");
	EXPECT_ERR(vm_ovf_parse(h2, strlen(h2), &d, E), -EINVAL, IM_EXIT_SOURCE, "1000000000");
	CHECK_EQ_U(d.ndisks, 0);
	free(h);
	free(h2);
	/* one lie each in the ESXi sample: what is replaced, by what, and the
	 * refusal (errno, class, a word of its message) */
	static const struct {
		const char *from, *to;
		int code, cls;
		const char *needle;
	} lies[] = {
		/* 8 MiB: too little; units it does not know; 2^64 bytes do not wrap */
		{ "<rasd:VirtualQuantity>2048<", "<rasd:VirtualQuantity>8<", -EINVAL, IM_EXIT_SOURCE, "memory" },
		{ "byte * 2^20", "furlongs", -ENOTSUP, IM_EXIT_UNSUPP, "furlongs" },
		{ "<rasd:VirtualQuantity>2048<", "<rasd:VirtualQuantity>17592186044416<", -EINVAL,
		  IM_EXIT_SOURCE, "17592186044416" },
		{ "<rasd:VirtualQuantity>2<", "<rasd:VirtualQuantity>5000<", -EINVAL, IM_EXIT_SOURCE, "5000" },
		/* bad MACs: not hex, multicast, all zero */
		{ "00:50:56:8a:4f:21", "00:50:56:8a:4f:2g", -EINVAL, IM_EXIT_SOURCE, "00:50:56:8a:4f:2g" },
		{ "00:50:56:8a:4f:21", "01:00:5e:00:00:01", -EINVAL, IM_EXIT_SOURCE, "MAC" },
		{ "00:50:56:8a:4f:21", "00:00:00:00:00:00", -EINVAL, IM_EXIT_SOURCE, "MAC" },
		/* a name with a control character */
		{ "<Name>debian12</Name>", "<Name>deb&#9;x</Name>", -EINVAL, IM_EXIT_SOURCE, "control" },
		/* a disk naming no Disk, a File not listed, a blank disk */
		{ "ovf:/disk/vmdisk1", "ovf:/disk/nothere", -EINVAL, IM_EXIT_SOURCE, "nothere" },
		{ "ovf:fileRef=\"file1\"", "ovf:fileRef=\"file9\"", -EINVAL, IM_EXIT_SOURCE, "file9" },
		{ "ovf:fileRef=\"file1\"", "", -ENOTSUP, IM_EXIT_UNSUPP, "blank" },
		/* no disk; two virtual systems */
		{ "<rasd:ResourceType>17<", "<rasd:ResourceType>14<", -EINVAL, IM_EXIT_SOURCE, "no disk" },
		{ "</VirtualSystem>", "</VirtualSystem><VirtualSystem ovf:id=\"b\"/>", -ENOTSUP, IM_EXIT_UNSUPP,
		  "several" },
		{ "vmw:value=\"efi\"", "vmw:value=\"coreboot\"", -EINVAL, IM_EXIT_SOURCE, "coreboot" },
	};
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		h = replace(x, lies[i].from, lies[i].to);
		EXPECT_ERR(vm_ovf_parse(h, strlen(h), &d, E), lies[i].code, lies[i].cls, lies[i].needle);
		free(h);
	}
	{
		char name[400];
		memset(name, 'n', 300);
		snprintf(name + 300, sizeof(name) - 300, "</Name>");
		h = replace(x, "debian12</Name>", name);
		EXPECT_ERR(vm_ovf_parse(h, strlen(h), &d, E), -EINVAL, IM_EXIT_SOURCE, "Name");
		free(h);
	}
	/* a DOCTYPE with entities (billion laughs, external files) */
	{
		static const char lol[] =
			"<?xml version=\"1.0\"?><!DOCTYPE Envelope [<!ENTITY a \"aaaaaaaaaa\">"
			"<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c SYSTEM \"file:///etc/shadow\">]>"
			"<Envelope><VirtualSystem><Name>&b;&c;</Name></VirtualSystem></Envelope>";
		EXPECT_ERR(vm_ovf_parse(lol, sizeof(lol) - 1, &d, E), -EINVAL, IM_EXIT_SOURCE, "DOCTYPE");
	}
	EXPECT_ERR(vm_ovf_parse("<Envelope><oops>", 16, &d, E), -EINVAL, IM_EXIT_SOURCE, "XML");
	EXPECT_ERR(vm_ovf_parse("", 0, &d, E), -EINVAL, IM_EXIT_SOURCE, "XML");
	EXPECT_ERR(vm_ovf_parse("<html/>", 7, &d, E), -EINVAL, IM_EXIT_SOURCE, "Envelope");
	free(x);
	/* 16 disks are taken, 17 refused by name */
	x = many_disks(16);
	{
		struct im_err err = { 0 };
		CHECK_EQ_U(vm_ovf_parse(x, strlen(x), &d, &err), 0);
		CHECK_EQ_U(d.ndisks, 16);
		CHECK_STR(d.disks[15].file, "d15.vmdk");
	}
	free(x);
	x = many_disks(17);
	EXPECT_ERR(vm_ovf_parse(x, strlen(x), &d, E), -EINVAL, IM_EXIT_SOURCE, "more than 16 disks");
	free(x);
}

static void vmx_sample(void)
{
	struct vm_desc d;
	char *x = parse_sample("esxi-debian12.vmx", vm_vmx_parse, &d);

	if (!x)
		return;
	/* two disks: the CD-ROM skipped */
	check_vm(&d, "debian12", 2048, 2, VM_FW_EFI, true, "debian12-64", 2, 1);
	CHECK_STR(d.disks[0].file, "debian12.vmdk");
	CHECK_STR(d.disks[0].controller, "scsi");
	CHECK_EQ_U(d.disks[1].unit, 1);
	CHECK_STR(d.disks[1].file,
		  "/vmfs/volumes/6566f0a1-0b7e4a22-39f1-001b21c3d4e5/debian12/debian12_1.vmdk");
	CHECK_STR(d.nics[0].model, "vmxnet3");
	CHECK_STR(d.nics[0].mac, "00:50:56:8a:4f:21");
	free(x);
}

static void vmx_hostile(void)
{
	static const char base[] = "memsize = \"1024\"\nscsi0.present = \"TRUE\"\n"
				   "scsi0:0.present = \"TRUE\"\nscsi0:0.fileName = \"a.vmdk\"\n";
	struct vm_desc d;
	char buf[8192];
	struct im_err err = { 0 };

	CHECK_EQ_U(vm_vmx_parse(base, sizeof(base) - 1, &d, &err), 0);
	CHECK_EQ_U(d.firmware, VM_FW_BIOS);
	CHECK_EQ_U(d.vcpus, 0);
	/* static MAC, |22 escapes, comments */
	snprintf(buf, sizeof(buf), "%s# c\nethernet0.present = \"TRUE\"\nethernet0.addressType = \"static\"\n"
		 "ethernet0.address = \"00:50:56:01:02:03\"\ndisplayName = \"a |22b|22\" # c\n", base);
	CHECK_EQ_U(vm_vmx_parse(buf, strlen(buf), &d, &err), 0);
	CHECK_STR(d.nics[0].mac, "00:50:56:01:02:03");
	CHECK_STR(d.name, "a \"b\"");
	snprintf(buf, sizeof(buf), "%smemsize = \"2048\"\n", base);
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "twice");
	snprintf(buf, sizeof(buf), "%sMEMSIZE = \"2048\"\n", base);
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "memsize twice");
	snprintf(buf, sizeof(buf), "%sguestOS = debian\n", base);
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "line 5");
	snprintf(buf, sizeof(buf), "%sguestOS = \"debian\n", base);
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "quote");
	memcpy(buf, base, sizeof(base));
	buf[3] = '\0';
	EXPECT_ERR(vm_vmx_parse(buf, sizeof(base) - 1, &d, E), -EINVAL, IM_EXIT_SOURCE, "NUL");
	snprintf(buf, sizeof(buf), "%sguestOS = \"a|00b\"\n", base);
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "NUL");
	snprintf(buf, sizeof(buf), "%sguestOS = \"a|1bb\"\n", base);
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "control");
	{
		size_t n = strlen(base);
		char *big = malloc(n + 70000);
		memcpy(big, base, n);
		memset(big + n, 'a', 70000);
		EXPECT_ERR(vm_vmx_parse(big, n + 70000, &d, E), -EINVAL, IM_EXIT_SOURCE, "line 5");
		free(big);
	}
	snprintf(buf, sizeof(buf), "memsize = \"99999999999\"\nscsi0:0.present = \"TRUE\"\n"
		 "scsi0:0.fileName = \"a.vmdk\"\n");
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "99999999999");
	snprintf(buf, sizeof(buf), "%snumvcpus = \"0\"\n", base);
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "numvcpus");
	snprintf(buf, sizeof(buf), "%sfirmware = \"coreboot\"\n", base);
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "coreboot");
	snprintf(buf, sizeof(buf), "%sethernet0.present = \"TRUE\"\nethernet0.generatedAddress = \"00:50:56:zz:00:01\"\n",
		 base);
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "00:50:56:zz:00:01");
	snprintf(buf, sizeof(buf), "memsize = \"1024\"\nide0:0.present = \"TRUE\"\n"
		 "ide0:0.deviceType = \"cdrom-image\"\nide0:0.fileName = \"x.iso\"\n");
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "no disk");
	snprintf(buf, sizeof(buf), "sata0:0.present = \"TRUE\"\n");
	EXPECT_ERR(vm_vmx_parse(buf, strlen(buf), &d, E), -EINVAL, IM_EXIT_SOURCE, "fileName");
	/* 17 disks */
	{
		size_t at = 0;
		for (int i = 0; i < 17; i++)
			at += (size_t)snprintf(buf + at, sizeof(buf) - at,
					       "scsi%d:%d.present = \"TRUE\"\nscsi%d:%d.fileName = \"d%d.vmdk\"\n",
					       i / 8, i % 8, i / 8, i % 8, i);
		EXPECT_ERR(vm_vmx_parse(buf, at, &d, E), -EINVAL, IM_EXIT_SOURCE, "more than 16 disks");
	}
	/* 9 NICs */
	{
		size_t at = (size_t)snprintf(buf, sizeof(buf), "%s", base);
		for (int i = 0; i < 9; i++)
			at += (size_t)snprintf(buf + at, sizeof(buf) - at, "ethernet%d.present = \"TRUE\"\n", i);
		EXPECT_ERR(vm_vmx_parse(buf, at, &d, E), -EINVAL, IM_EXIT_SOURCE, "network adapters");
	}
}

static void file_in_dir(void)
{
	char out[PATH_MAX], want[PATH_MAX], real[PATH_MAX - 64];

	put_size("disk.vmdk", 512);
	mkdir(path_of("sub"), 0755);
	CHECK(realpath(tmp, real) != NULL);
	snprintf(want, sizeof(want), "%s/disk.vmdk", real);
	{
		struct im_err err = { 0 };
		CHECK_EQ_U(vm_file_in_dir(tmp, "disk.vmdk", out, sizeof(out), &err), 0);
		CHECK_STR(out, want);
		CHECK_EQ_U(vm_file_in_dir(tmp, "/vmfs/volumes/datastore1/vm/disk.vmdk", out, sizeof(out), &err), 0);
		CHECK_STR(out, want);
	}
	EXPECT_ERR(vm_file_in_dir(tmp, "../../etc/shadow", out, sizeof(out), E), -EINVAL, IM_EXIT_SOURCE,
		   "../../etc/shadow");
	EXPECT_ERR(vm_file_in_dir(tmp, "sub/../../x", out, sizeof(out), E), -EINVAL, IM_EXIT_SOURCE, "outside");
	EXPECT_ERR(vm_file_in_dir(tmp, "/etc/shadow", out, sizeof(out), E), -EINVAL, IM_EXIT_SOURCE,
		   "/etc/shadow");
	EXPECT_ERR(vm_file_in_dir(tmp, "/vmfs/volumes/ds/..", out, sizeof(out), E), -EINVAL, IM_EXIT_SOURCE,
		   "outside");
	EXPECT_ERR(vm_file_in_dir(tmp, "a\nb", out, sizeof(out), E), -EINVAL, IM_EXIT_SOURCE, "control");
	EXPECT_ERR(vm_file_in_dir(tmp, "", out, sizeof(out), E), -EINVAL, IM_EXIT_SOURCE, "empty");
	EXPECT_ERR(vm_file_in_dir(tmp, "missing.vmdk", out, sizeof(out), E), -ENOENT, IM_EXIT_SOURCE,
		   "missing.vmdk");
	EXPECT_ERR(vm_file_in_dir(tmp, "sub", out, sizeof(out), E), -EINVAL, IM_EXIT_SOURCE, "regular");
	if (symlink("/etc/passwd", path_of("link.vmdk")) == 0)
		EXPECT_ERR(vm_file_in_dir(tmp, "link.vmdk", out, sizeof(out), E), -EINVAL, IM_EXIT_SOURCE,
			   "outside");
	unlink(path_of("link.vmdk"));
	unlink(path_of("disk.vmdk"));
	rmdir(path_of("sub"));
}

/* ---- VMDK ---- */

static void vmdk_parse(void)
{
	static const char good[] =
		"# Disk DescriptorFile\nversion=1\nencoding=\"UTF-8\"\nCID=1a2b3c4d\nparentCID=ffffffff\n"
		"createType=\"twoGbMaxExtentSparse\"\n\n# Extent description\n"
		"RW 4192256 SPARSE \"disk-s001.vmdk\"\nRW 4192256 SPARSE \"disk with blanks-s002.vmdk\"\n"
		"RDONLY 2048 ZERO\nRW 100 FLAT \"disk-f.vmdk\" 7\n\n# The Disk Data Base\n#DDB\n\n"
		"ddb.adapterType = \"lsilogic\"\nddb.geometry.cylinders = \"522\"\nddb.virtualHWVersion = \"4\"\n";
	struct vmdk_desc d;
	struct im_err err = { 0 };

	CHECK_EQ_U(vmdk_desc_parse(good, sizeof(good) - 1, &d, &err), 0);
	CHECK_STR(d.create_type, "twoGbMaxExtentSparse");
	CHECK_EQ_U(d.cid, 0x1a2b3c4d);
	CHECK_EQ_U(d.parent_cid, VMDK_NO_PARENT);
	CHECK_EQ_U(d.next, 4);
	CHECK_STR(d.ext[1].file, "disk with blanks-s002.vmdk");
	CHECK_STR(d.ext[2].type, "ZERO");
	CHECK_STR(d.ext[2].access, "RDONLY");
	CHECK_EQ_U(d.ext[3].offset, 7);
	CHECK_EQ_U(d.sectors, 4192256ull * 2 + 2048 + 100);
	EXPECT_ERR(vmdk_desc_parse("createType=\"x\"\nRW 1 BOGUS \"a\"\n", 30, &d, E), -ENOTSUP,
		   IM_EXIT_UNSUPP, "BOGUS");
	EXPECT_ERR(vmdk_desc_parse("createType=\"x\"\nRW -1 FLAT \"a\"\n", 29, &d, E), -EINVAL,
		   IM_EXIT_SOURCE, "line 2");
	EXPECT_ERR(vmdk_desc_parse("createType=\"x\"\nRW 1 FLAT a\n", 26, &d, E), -EINVAL, IM_EXIT_SOURCE,
		   "file name");
	EXPECT_ERR(vmdk_desc_parse("createType=\"x\"\nRW 18446744073709551615 FLAT \"a\"\n", 47, &d, E),
		   -EINVAL, IM_EXIT_SOURCE, "line 2");
	EXPECT_ERR(vmdk_desc_parse("createType=\"x\"\nRW 1 FLAT \"a\n", 27, &d, E), -EINVAL,
		   IM_EXIT_SOURCE, "line 2");
	EXPECT_ERR(vmdk_desc_parse("createType=\"x\"\n", 15, &d, E), -EINVAL, IM_EXIT_SOURCE, "no extent");
	EXPECT_ERR(vmdk_desc_parse("RW 1 FLAT \"a\"\n", 14, &d, E), -EINVAL, IM_EXIT_SOURCE, "createType");
	EXPECT_ERR(vmdk_desc_parse("createType=\"x\"\nCID=xyz\nRW 1 FLAT \"a\"\n", 37, &d, E), -EINVAL,
		   IM_EXIT_SOURCE, "CID");
	EXPECT_ERR(vmdk_desc_parse("createType=\"x\"\nparentCID=12345678\nRW 1 FLAT \"a\"\n", 48, &d, E),
		   -EINVAL, IM_EXIT_SOURCE, "parentFileNameHint");
	EXPECT_ERR(vmdk_desc_parse("createType=\"x\"\ngarbage\n", 23, &d, E), -EINVAL, IM_EXIT_SOURCE,
		   "line 2");
	EXPECT_ERR(vmdk_desc_parse("createType=\"x\0\"\n", 17, &d, E), -EINVAL, IM_EXIT_SOURCE, "NUL");
	{
		char big[80 * 70];
		size_t at = (size_t)snprintf(big, sizeof(big), "createType=\"x\"\n");
		for (int i = 0; i < 65; i++)
			at += (size_t)snprintf(big + at, sizeof(big) - at, "RW 1 FLAT \"e%d\"\n", i);
		EXPECT_ERR(vmdk_desc_parse(big, at, &d, E), -EINVAL, IM_EXIT_SOURCE, "more than 64 extents");
	}
}

static void vmdk_desc_file(const char *name, const char *create, uint32_t cid, uint32_t parent,
			   const char *hint, const char *extents)
{
	char t[4096];
	snprintf(t, sizeof(t), "# Disk DescriptorFile\nversion=1\nCID=%08x\nparentCID=%08x\n%s%s%s"
		 "createType=\"%s\"\n\n# Extent description\n%s\n# The Disk Data Base\n#DDB\n"
		 "ddb.adapterType = \"lsilogic\"\n",
		 cid, parent, hint ? "parentFileNameHint=\"" : "", hint ? hint : "", hint ? "\"\n" : "",
		 create, extents);
	puts_file(name, t);
}

/* A sparse extent's header (and, with desc, a monolithicSparse file with
 * its descriptor embedded at sector 1). */
static void sparse_file(const char *name, uint64_t capacity, const char *desc)
{
	unsigned char f[512 * 21];
	memset(f, 0, sizeof(f));
	memcpy(f, "KDMV", 4);
	f[4] = 1;
	for (int i = 0; i < 8; i++)
		f[12 + i] = (unsigned char)(capacity >> (8 * i));
	f[20] = 128;  /* grain size */
	if (desc) {
		f[28] = 1;
		f[36] = 20;
		snprintf((char *)f + 512, 20 * 512, "%s", desc);
	}
	f[73] = '\n';
	f[74] = ' ';
	f[75] = '\r';
	f[76] = '\n';
	put(name, f, desc ? sizeof(f) : 512);
}

static void vmdk_files(void)
{
	struct vmdk_desc d;
	unsigned depth;
	struct im_err err = { 0 };

	/* monolithicFlat: a descriptor and its -flat */
	put_size("a-flat.vmdk", 1 << 20);
	vmdk_desc_file("a.vmdk", "monolithicFlat", 0x11111111, VMDK_NO_PARENT, NULL,
		       "RW 2048 FLAT \"a-flat.vmdk\" 0");
	CHECK_EQ_U(vmdk_check(path_of("a.vmdk"), &d, &depth, &err), 0);
	if (err.msg[0])
		fprintf(stderr, "  %s\n", err.msg);
	CHECK_EQ_U(depth, 1);
	CHECK_EQ_U(d.sectors, 2048);
	CHECK_STR(d.create_type, "monolithicFlat");
	/* twoGbMaxExtentSparse: two sparse extents, a hole */
	sparse_file("s-s001.vmdk", 4096, NULL);
	sparse_file("s-s002.vmdk", 1024, NULL);
	vmdk_desc_file("s.vmdk", "twoGbMaxExtentSparse", 0x22222222, VMDK_NO_PARENT, NULL,
		       "RW 4096 SPARSE \"s-s001.vmdk\"\nRW 1024 SPARSE \"s-s002.vmdk\"\nRW 16 ZERO");
	CHECK_EQ_U(vmdk_check(path_of("s.vmdk"), &d, &depth, &err), 0);
	CHECK_EQ_U(d.sectors, 5136);
	/* monolithicSparse / streamOptimized: the descriptor embedded */
	sparse_file("m.vmdk", 8192, "# Disk DescriptorFile\nversion=1\nCID=33333333\nparentCID=ffffffff\n"
		    "createType=\"streamOptimized\"\nRW 8192 SPARSE \"original-name.vmdk\"\n");
	CHECK_EQ_U(vmdk_check(path_of("m.vmdk"), &d, &depth, &err), 0);
	if (err.msg[0])
		fprintf(stderr, "  %s\n", err.msg);
	CHECK_STR(d.create_type, "streamOptimized");
	CHECK_EQ_U(d.cid, 0x33333333);
	sparse_file("m2.vmdk", 4096, "createType=\"monolithicSparse\"\nRW 8192 SPARSE \"m2.vmdk\"\n");
	EXPECT_ERR(vmdk_check(path_of("m2.vmdk"), &d, &depth, E), -EBADMSG, IM_EXIT_DAMAGED, "capacity");
	sparse_file("m3.vmdk", 8192, "createType=\"monolithicSparse\"\nRW 8192 SPARSE \"m3.vmdk\"\n"
		    "RW 10 FLAT \"/etc/shadow\" 0\n");
	EXPECT_ERR(vmdk_check(path_of("m3.vmdk"), &d, &depth, E), -EINVAL, IM_EXIT_SOURCE, "embedded");
	sparse_file("m4.vmdk", 8192, NULL);
	EXPECT_ERR(vmdk_check(path_of("m4.vmdk"), &d, &depth, E), -EINVAL, IM_EXIT_SOURCE, "without a descriptor");

	/* hostile extents */
	vmdk_desc_file("h1.vmdk", "monolithicFlat", 1, VMDK_NO_PARENT, NULL, "RW 8 FLAT \"../../etc/shadow\" 0");
	EXPECT_ERR(vmdk_check(path_of("h1.vmdk"), &d, &depth, E), -EINVAL, IM_EXIT_SOURCE, "../../etc/shadow");
	vmdk_desc_file("h2.vmdk", "monolithicFlat", 1, VMDK_NO_PARENT, NULL, "RW 8 FLAT \"/etc/shadow\" 0");
	EXPECT_ERR(vmdk_check(path_of("h2.vmdk"), &d, &depth, E), -EINVAL, IM_EXIT_SOURCE, "/etc/shadow");
	vmdk_desc_file("h3.vmdk", "twoGbMaxExtentFlat", 1, VMDK_NO_PARENT, NULL,
		       "RW 8 FLAT \"a-flat.vmdk\" 0\nRW 8 FLAT \"a-flat.vmdk\" 8");
	EXPECT_ERR(vmdk_check(path_of("h3.vmdk"), &d, &depth, E), -EINVAL, IM_EXIT_SOURCE, "twice");
	vmdk_desc_file("h4.vmdk", "monolithicFlat", 1, VMDK_NO_PARENT, NULL, "RW 8 FLAT \"h4.vmdk\" 0");
	EXPECT_ERR(vmdk_check(path_of("h4.vmdk"), &d, &depth, E), -EINVAL, IM_EXIT_SOURCE, "descriptor itself");
	vmdk_desc_file("h5.vmdk", "monolithicFlat", 1, VMDK_NO_PARENT, NULL, "RW 4096 FLAT \"a-flat.vmdk\" 0");
	EXPECT_ERR(vmdk_check(path_of("h5.vmdk"), &d, &depth, E), -EBADMSG, IM_EXIT_DAMAGED, "shorter");
	vmdk_desc_file("h6.vmdk", "monolithicFlat", 1, VMDK_NO_PARENT, NULL, "RW 2048 FLAT \"a-flat.vmdk\" 1");
	EXPECT_ERR(vmdk_check(path_of("h6.vmdk"), &d, &depth, E), -EBADMSG, IM_EXIT_DAMAGED, "a-flat.vmdk");
	vmdk_desc_file("h7.vmdk", "twoGbMaxExtentSparse", 1, VMDK_NO_PARENT, NULL, "RW 4097 SPARSE \"s-s001.vmdk\"");
	EXPECT_ERR(vmdk_check(path_of("h7.vmdk"), &d, &depth, E), -EBADMSG, IM_EXIT_DAMAGED, "4096");
	vmdk_desc_file("h8.vmdk", "twoGbMaxExtentSparse", 1, VMDK_NO_PARENT, NULL, "RW 2048 SPARSE \"a-flat.vmdk\"");
	EXPECT_ERR(vmdk_check(path_of("h8.vmdk"), &d, &depth, E), -EBADMSG, IM_EXIT_DAMAGED, "magic");
	vmdk_desc_file("h9.vmdk", "vmfsRawDeviceMap", 1, VMDK_NO_PARENT, NULL, "RW 2048 VMFSRDM \"a-flat.vmdk\"");
	EXPECT_ERR(vmdk_check(path_of("h9.vmdk"), &d, &depth, E), -ENOTSUP, IM_EXIT_UNSUPP, "VMFSRDM");
	vmdk_desc_file("h10.vmdk", "monolithicFlat", 1, VMDK_NO_PARENT, NULL, "RW 8 FLAT \"gone-flat.vmdk\" 0");
	EXPECT_ERR(vmdk_check(path_of("h10.vmdk"), &d, &depth, E), -ENOENT, IM_EXIT_SOURCE, "gone-flat.vmdk");
	/* an extent loop through a link to the descriptor */
	if (symlink("h11.vmdk", path_of("h11-flat.vmdk")) == 0) {
		vmdk_desc_file("h11.vmdk", "monolithicFlat", 1, VMDK_NO_PARENT, NULL, "RW 1 FLAT \"h11-flat.vmdk\" 0");
		EXPECT_ERR(vmdk_check(path_of("h11.vmdk"), &d, &depth, E), -EINVAL, IM_EXIT_SOURCE, "itself");
	}

	/* snapshots: a delta on the flat disk, two deep */
	put_size("snap1-delta.vmdk", 1 << 20);
	vmdk_desc_file("snap1.vmdk", "monolithicFlat", 0x44444444, 0x11111111, "a.vmdk",
		       "RW 2048 FLAT \"snap1-delta.vmdk\" 0");
	put_size("snap2-delta.vmdk", 1 << 20);
	vmdk_desc_file("snap2.vmdk", "monolithicFlat", 0x55555555, 0x44444444,
		       "/vmfs/volumes/datastore1/vm/snap1.vmdk", "RW 2048 FLAT \"snap2-delta.vmdk\" 0");
	CHECK_EQ_U(vmdk_check(path_of("snap2.vmdk"), &d, &depth, &err), 0);
	if (err.msg[0])
		fprintf(stderr, "  %s\n", err.msg);
	CHECK_EQ_U(depth, 3);
	CHECK_EQ_U(d.cid, 0x55555555);
	CHECK_STR(d.parent_hint, "/vmfs/volumes/datastore1/vm/snap1.vmdk");
	/* CID mismatch */
	vmdk_desc_file("snap3.vmdk", "monolithicFlat", 0x66666666, 0x12345678, "a.vmdk",
		       "RW 2048 FLAT \"snap2-delta.vmdk\" 0");
	EXPECT_ERR(vmdk_check(path_of("snap3.vmdk"), &d, &depth, E), -EBADMSG, IM_EXIT_DAMAGED,
		   "snapshot chain broken at");
	/* a loop: x -> y -> x */
	put_size("x-delta.vmdk", 512);
	put_size("y-delta.vmdk", 512);
	vmdk_desc_file("x.vmdk", "monolithicFlat", 0x77777777, 0x88888888, "y.vmdk", "RW 1 FLAT \"x-delta.vmdk\" 0");
	vmdk_desc_file("y.vmdk", "monolithicFlat", 0x88888888, 0x77777777, "x.vmdk", "RW 1 FLAT \"y-delta.vmdk\" 0");
	EXPECT_ERR(vmdk_check(path_of("x.vmdk"), &d, &depth, E), -EINVAL, IM_EXIT_SOURCE, "loop");
	/* a parent outside, a parent that shares an extent with its child */
	vmdk_desc_file("z.vmdk", "monolithicFlat", 1, 2, "../../etc/z.vmdk", "RW 1 FLAT \"x-delta.vmdk\" 0");
	EXPECT_ERR(vmdk_check(path_of("z.vmdk"), &d, &depth, E), -EINVAL, IM_EXIT_SOURCE, "../../etc/z.vmdk");
	vmdk_desc_file("w.vmdk", "monolithicFlat", 0x99999999, 0x11111111, "a.vmdk", "RW 1 FLAT \"a-flat.vmdk\" 0");
	EXPECT_ERR(vmdk_check(path_of("w.vmdk"), &d, &depth, E), -EINVAL, IM_EXIT_SOURCE, "twice");
	/* a chain of 17 */
	for (int i = 0; i < 17; i++) {
		char n[32], p[32], f[64];
		snprintf(n, sizeof(n), "c%d.vmdk", i);
		snprintf(p, sizeof(p), "c%d.vmdk", i + 1);
		snprintf(f, sizeof(f), "c%d-f.vmdk", i);
		put_size(f, 512);
		snprintf(f, sizeof(f), "RW 1 FLAT \"c%d-f.vmdk\" 0", i);
		vmdk_desc_file(n, "monolithicFlat", (uint32_t)i, i == 16 ? VMDK_NO_PARENT : (uint32_t)i + 1,
			       i == 16 ? NULL : p, f);
	}
	EXPECT_ERR(vmdk_check(path_of("c0.vmdk"), &d, &depth, E), -ENOTSUP, IM_EXIT_UNSUPP, "deeper than 16");
	CHECK_EQ_U(vmdk_check(path_of("c1.vmdk"), &d, &depth, &err), 0);
	CHECK_EQ_U(depth, 16);
}

/* Every VMDK subformat as qemu-img writes it, and a delta disk on one. */
static void vmdk_qemu_img(void)
{
	static const char *const subformats[] = { "monolithicSparse", "monolithicFlat", "twoGbMaxExtentSparse",
						  "twoGbMaxExtentFlat", "streamOptimized" };
	char cmd[1024];
	struct vmdk_desc d;
	unsigned depth;

	if (system("qemu-img --version >/dev/null 2>&1") != 0) {
		unit_skip("SKIP: no qemu-img (qemu-utils)");
		return;
	}
	mkdir(path_of("q"), 0755);
	for (size_t i = 0; i < sizeof(subformats) / sizeof(subformats[0]); i++) {
		struct im_err err = { 0 };
		char name[64];
		snprintf(cmd, sizeof(cmd), "qemu-img create -q -f vmdk -o subformat=%s %s/q/%s.vmdk 64M",
			 subformats[i], tmp, subformats[i]);
		if (system(cmd) != 0) {
			CHECK(0);
			continue;
		}
		snprintf(name, sizeof(name), "q/%s.vmdk", subformats[i]);
		CHECK_EQ_U(vmdk_check(path_of(name), &d, &depth, &err), 0);
		if (err.msg[0])
			fprintf(stderr, "  %s: %s\n", subformats[i], err.msg);
		CHECK_STR(d.create_type, subformats[i]);
		CHECK_EQ_U(d.sectors, 131072);
		CHECK_EQ_U(depth, 1);
	}
	snprintf(cmd, sizeof(cmd), "cd %s/q && qemu-img create -q -f vmdk -b monolithicSparse.vmdk -F vmdk child.vmdk",
		 tmp);
	if (system(cmd) == 0) {
		struct im_err err = { 0 };
		CHECK_EQ_U(vmdk_check(path_of("q/child.vmdk"), &d, &depth, &err), 0);
		if (err.msg[0])
			fprintf(stderr, "  child: %s\n", err.msg);
		CHECK_EQ_U(depth, 2);
		CHECK_STR(d.parent_hint, "monolithicSparse.vmdk");
		/* the parent changed under its child: its CID no longer matches */
		snprintf(cmd, sizeof(cmd), "cd %s/q && qemu-img create -q -f vmdk monolithicSparse.vmdk 64M", tmp);
		if (system(cmd) == 0)
			EXPECT_ERR(vmdk_check(path_of("q/child.vmdk"), &d, &depth, E), -EBADMSG, IM_EXIT_DAMAGED,
				   "snapshot chain broken at");
	} else {
		CHECK(0);
	}
	/* a split flat disk whose second part is cut short */
	snprintf(cmd, sizeof(cmd), "truncate -s 1M %s/q/twoGbMaxExtentFlat-f001.vmdk", tmp);
	if (system(cmd) == 0)
		EXPECT_ERR(vmdk_check(path_of("q/twoGbMaxExtentFlat.vmdk"), &d, &depth, E), -EBADMSG,
			   IM_EXIT_DAMAGED, "twoGbMaxExtentFlat-f001.vmdk");
}

/* ---- OVA ---- */

struct tar_opts {
	char type;
	bool bad_sum;
	const char *pax_path;  /* a pax 'x' header before the member */
	const char *gnu_long;  /* a GNU 'L' header before the member */
};

static void tar_header(FILE *f, const char *name, uint64_t size, char type, bool bad_sum)
{
	unsigned char h[512];
	unsigned sum = 0;

	memset(h, 0, sizeof(h));
	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
	snprintf((char *)h + 136, 12, "%011o", 0);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar\0" "00", 8);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	if (bad_sum)
		sum++;
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	fwrite(h, 1, 512, f);
}

static void tar_data(FILE *f, const void *data, size_t len)
{
	static const char zero[512];
	fwrite(data, 1, len, f);
	if (len % 512)
		fwrite(zero, 1, 512 - len % 512, f);
}

static void tar_add(FILE *f, const char *name, const void *data, size_t len, const struct tar_opts *o)
{
	if (o && o->pax_path) {
		char rec[600];
		int body = (int)strlen(o->pax_path) + 7, total = body + 1, l;
		/* (the length counts its own digits) */
		while (snprintf(NULL, 0, "%d", total) != total - body)
			total++;
		l = snprintf(rec, sizeof(rec), "%d path=%s\n", total, o->pax_path);
		tar_header(f, "PaxHeaders/x", (uint64_t)l, 'x', false);
		tar_data(f, rec, (size_t)l);
	}
	if (o && o->gnu_long) {
		tar_header(f, "././@LongLink", strlen(o->gnu_long) + 1, 'L', false);
		tar_data(f, o->gnu_long, strlen(o->gnu_long) + 1);
	}
	tar_header(f, name, len, o && o->type ? o->type : '0', o && o->bad_sum);
	tar_data(f, data, len);
}

static void tar_end(FILE *f)
{
	static const char zero[1024];
	fwrite(zero, 1, sizeof(zero), f);
	fclose(f);
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int n = 0;
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

static char disk_bytes[3000];

/* An OVA of the ESXi sample: .ovf, .mf (with mf_text, or made right), disk. */
static void make_ova(const char *name, const char *ovf, const char *mf_text, bool with_mf,
		     const char *disk_name, const struct tar_opts *disk_opts)
{
	FILE *f = fopen(path_of(name), "wb");
	char mf[512], h1[65], h2[65];

	tar_add(f, "debian12.ovf", ovf, strlen(ovf), NULL);
	if (with_mf) {
		if (!mf_text) {
			sha256_hex(ovf, strlen(ovf), h1);
			sha256_hex(disk_bytes, sizeof(disk_bytes), h2);
			snprintf(mf, sizeof(mf), "SHA256(debian12.ovf)= %s\nSHA256(debian12-disk1.vmdk)= %s\n", h1, h2);
			mf_text = mf;
		}
		tar_add(f, "debian12.mf", mf_text, strlen(mf_text), NULL);
	}
	tar_add(f, disk_name, disk_bytes, sizeof(disk_bytes), disk_opts);
	tar_end(f);
}

static void ova_good(void)
{
	struct ova *o = malloc(sizeof(*o));
	struct im_err err = { 0 };
	size_t len;
	char *ovf = sample("esxi-debian12.ovf", &len), *b;
	bool had;

	for (size_t i = 0; i < sizeof(disk_bytes); i++)
		disk_bytes[i] = (char)(i * 7 + 3);
	make_ova("good.ova", ovf, NULL, true, "debian12-disk1.vmdk", NULL);
	CHECK_EQ_U(ova_open(path_of("good.ova"), o, &err), 0);
	if (err.msg[0])
		fprintf(stderr, "  %s\n", err.msg);
	CHECK_EQ_U(o->n, 3);
	CHECK_EQ_U(o->ovf, 0);
	CHECK_EQ_U(o->mf, 1);
	CHECK_EQ_U(o->disk_member[0], 2);
	CHECK_EQ_U(o->vm.memory_mib, 2048);
	CHECK_EQ_U(o->m[2].size, sizeof(disk_bytes));
	b = slurp(path_of("good.ova"), &len);
	CHECK(o->m[2].offset + o->m[2].size <= len);
	CHECK(!memcmp(b + o->m[2].offset, disk_bytes, sizeof(disk_bytes)));
	free(b);
	CHECK_EQ_U(ova_verify(path_of("good.ova"), o, -1, &had, &err), 0);
	CHECK(had);
	CHECK_EQ_U(ova_verify(path_of("good.ova"), o, 2, &had, &err), 0);
	if (err.msg[0])
		fprintf(stderr, "  %s\n", err.msg);

	/* without a manifest */
	make_ova("nomf.ova", ovf, NULL, false, "debian12-disk1.vmdk", NULL);
	CHECK_EQ_U(ova_open(path_of("nomf.ova"), o, &err), 0);
	CHECK_EQ_U(o->mf, -1);
	CHECK_EQ_U(ova_verify(path_of("nomf.ova"), o, -1, &had, &err), 0);
	CHECK(!had);

	/* pax and GNU long names */
	{
		struct tar_opts pax = { .pax_path = "debian12-disk1.vmdk" }, gnu = { .gnu_long = "debian12-disk1.vmdk" };
		make_ova("pax.ova", ovf, NULL, true, "PaxHeaders-ignored", &pax);
		CHECK_EQ_U(ova_open(path_of("pax.ova"), o, &err), 0);
		if (err.msg[0])
			fprintf(stderr, "  %s\n", err.msg);
		CHECK_STR(o->m[2].name, "debian12-disk1.vmdk");
		CHECK_EQ_U(ova_verify(path_of("pax.ova"), o, -1, &had, &err), 0);
		make_ova("gnu.ova", ovf, NULL, true, "././@LongLink-ignored", &gnu);
		CHECK_EQ_U(ova_open(path_of("gnu.ova"), o, &err), 0);
		CHECK_STR(o->m[2].name, "debian12-disk1.vmdk");
		CHECK_EQ_U(ova_verify(path_of("gnu.ova"), o, 2, &had, &err), 0);
	}
	free(ovf);
	free(o);
}

/* OVAs GNU tar makes, in each of its formats, with a name over 100 bytes. */
static void ova_gnu_tar(void)
{
	static const char *const formats[] = { "ustar", "pax", "gnu", "oldgnu" };
	char longname[160], cmd[1024], dir[PATH_MAX];
	struct ova *o = malloc(sizeof(*o));
	size_t len;
	char *ovf = sample("esxi-debian12.ovf", &len), *ovf2, *b;

	if (system("tar --version >/dev/null 2>&1") != 0) {
		unit_skip("SKIP: no tar");
		free(o);
		free(ovf);
		return;
	}
	memset(longname, 'l', 120);
	snprintf(longname + 120, sizeof(longname) - 120, "-disk1.vmdk");
	ovf2 = replace(ovf, "ovf:href=\"debian12-disk1.vmdk\"", "ovf:href=\"debian12-disk1.vmdk\"");
	snprintf(dir, sizeof(dir), "%s/gnutar", tmp);
	mkdir(dir, 0755);
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		struct im_err err = { 0 };
		const char *disk = strcmp(formats[i], "ustar") ? longname : "debian12-disk1.vmdk";
		char *o3 = replace(ovf2, "debian12-disk1.vmdk", disk);
		bool had;
		snprintf(cmd, sizeof(cmd), "%s/gnutar/a.ovf", tmp);
		FILE *f = fopen(cmd, "wb");
		fwrite(o3, 1, strlen(o3), f);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "%s/gnutar/%s", tmp, disk);
		f = fopen(cmd, "wb");
		fwrite(disk_bytes, 1, sizeof(disk_bytes), f);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "cd %s/gnutar && sha256sum --tag a.ovf %s > a.mf && "
			 "tar --format=%s -cf ../t-%s.ova a.ovf a.mf %s", tmp, disk, formats[i], formats[i], disk);
		if (system(cmd) != 0) {
			unit_skip("SKIP: tar or sha256sum failed");
			free(o3);
			continue;
		}
		snprintf(cmd, sizeof(cmd), "t-%s.ova", formats[i]);
		CHECK_EQ_U(ova_open(path_of(cmd), o, &err), 0);
		if (err.msg[0])
			fprintf(stderr, "  %s: %s\n", formats[i], err.msg);
		CHECK_EQ_U(o->n, 3);
		CHECK_STR(o->m[2].name, disk);
		b = slurp(path_of(cmd), &len);
		CHECK(o->m[2].offset + o->m[2].size <= len &&
		      !memcmp(b + o->m[2].offset, disk_bytes, sizeof(disk_bytes)));
		free(b);
		/* coreutils' "SHA256 (name) = hex" */
		CHECK_EQ_U(ova_verify(path_of(cmd), o, -1, &had, &err), 0);
		if (err.msg[0])
			fprintf(stderr, "  %s: %s\n", formats[i], err.msg);
		CHECK(had);
		free(o3);
		snprintf(cmd, sizeof(cmd), "rm -f %s/gnutar/*", tmp);
		if (system(cmd) != 0)
			CHECK(0);
	}
	rmdir(dir);
	free(ovf);
	free(ovf2);
	free(o);
}

static void ova_hostile(void)
{
	struct ova *o = malloc(sizeof(*o));
	size_t len;
	char *ovf = sample("esxi-debian12.ovf", &len), *b, mf[512], h1[65];
	bool had;

	/* members outside */
	make_ova("h1.ova", ovf, NULL, false, "../x", NULL);
	EXPECT_ERR(ova_open(path_of("h1.ova"), o, E), -EINVAL, IM_EXIT_SOURCE, "a tar with a path outside");
	make_ova("h2.ova", ovf, NULL, false, "/etc/x", NULL);
	EXPECT_ERR(ova_open(path_of("h2.ova"), o, E), -EINVAL, IM_EXIT_SOURCE, "a tar with a path outside");
	make_ova("h3.ova", ovf, NULL, false, "d/x", NULL);
	EXPECT_ERR(ova_open(path_of("h3.ova"), o, E), -EINVAL, IM_EXIT_SOURCE, "a tar with a path outside");
	{
		struct tar_opts pax = { .pax_path = "../../etc/passwd" };
		make_ova("h4.ova", ovf, NULL, false, "fine", &pax);
		EXPECT_ERR(ova_open(path_of("h4.ova"), o, E), -EINVAL, IM_EXIT_SOURCE, "../../etc/passwd");
	}
	/* a link, a device */
	{
		struct tar_opts sym = { .type = '2' }, dev = { .type = '3' };
		make_ova("h5.ova", ovf, NULL, false, "debian12-disk1.vmdk", &sym);
		EXPECT_ERR(ova_open(path_of("h5.ova"), o, E), -ENOTSUP, IM_EXIT_UNSUPP, "not a plain file");
		make_ova("h6.ova", ovf, NULL, false, "debian12-disk1.vmdk", &dev);
		EXPECT_ERR(ova_open(path_of("h6.ova"), o, E), -ENOTSUP, IM_EXIT_UNSUPP, "not a plain file");
	}
	/* truncated in the disk's data */
	make_ova("good2.ova", ovf, NULL, true, "debian12-disk1.vmdk", NULL);
	b = slurp(path_of("good2.ova"), &len);
	put("trunc.ova", b, len - 1024 - 1000);
	EXPECT_ERR(ova_open(path_of("trunc.ova"), o, E), -EBADMSG, IM_EXIT_DAMAGED, "truncated");
	put("trunc2.ova", b, 700);
	EXPECT_ERR(ova_open(path_of("trunc2.ova"), o, E), -EBADMSG, IM_EXIT_DAMAGED, "truncated");
	/* a bad checksum: one byte of the name changed */
	b[0] ^= 1;
	put("sum.ova", b, len);
	EXPECT_ERR(ova_open(path_of("sum.ova"), o, E), -EBADMSG, IM_EXIT_DAMAGED, "checksum");
	free(b);
	{
		struct tar_opts bad = { .bad_sum = true };
		make_ova("sum2.ova", ovf, NULL, false, "debian12-disk1.vmdk", &bad);
		EXPECT_ERR(ova_open(path_of("sum2.ova"), o, E), -EBADMSG, IM_EXIT_DAMAGED, "checksum");
	}
	/* the disk missing, two .ovf */
	make_ova("h7.ova", ovf, NULL, false, "other.vmdk", NULL);
	EXPECT_ERR(ova_open(path_of("h7.ova"), o, E), -ENOENT, IM_EXIT_SOURCE, "debian12-disk1.vmdk");
	make_ova("h8.ova", ovf, NULL, false, "second.ovf", NULL);
	EXPECT_ERR(ova_open(path_of("h8.ova"), o, E), -EINVAL, IM_EXIT_SOURCE, "two .ovf");
	make_ova("h9.ova", ovf, NULL, false, "debian12.ovf", NULL);
	EXPECT_ERR(ova_open(path_of("h9.ova"), o, E), -EINVAL, IM_EXIT_SOURCE, "twice");
	/* an OVF with 10^9 MB inside an OVA */
	{
		char *h = replace(ovf, "<rasd:VirtualQuantity>2048</rasd:VirtualQuantity>",
				  "<rasd:VirtualQuantity>1000000000</rasd:VirtualQuantity>");
		make_ova("h10.ova", h, NULL, false, "debian12-disk1.vmdk", NULL);
		EXPECT_ERR(ova_open(path_of("h10.ova"), o, E), -EINVAL, IM_EXIT_SOURCE, "1000000000");
		free(h);
	}
	/* manifests: a digest that does not match, an entry missing, a file
	 * not in the tar, a malformed line */
	sha256_hex(ovf, strlen(ovf), h1);
	snprintf(mf, sizeof(mf), "SHA256(debian12.ovf)= %s\nSHA256(debian12-disk1.vmdk)= %064d\n", h1, 0);
	make_ova("m1.ova", ovf, mf, true, "debian12-disk1.vmdk", NULL);
	{
		struct im_err err = { 0 };
		CHECK_EQ_U(ova_open(path_of("m1.ova"), o, &err), 0);
	}
	EXPECT_ERR(ova_verify(path_of("m1.ova"), o, -1, &had, E), -EBADMSG, IM_EXIT_DAMAGED,
		   "manifest digest of debian12-disk1.vmdk does not match");
	EXPECT_ERR(ova_verify(path_of("m1.ova"), o, 2, &had, E), -EBADMSG, IM_EXIT_DAMAGED,
		   "manifest digest of debian12-disk1.vmdk does not match");
	snprintf(mf, sizeof(mf), "SHA256(debian12.ovf)= %s\n", h1);
	make_ova("m2.ova", ovf, mf, true, "debian12-disk1.vmdk", NULL);
	{
		struct im_err err = { 0 };
		CHECK_EQ_U(ova_open(path_of("m2.ova"), o, &err), 0);
	}
	EXPECT_ERR(ova_verify(path_of("m2.ova"), o, -1, &had, E), -EBADMSG, IM_EXIT_DAMAGED,
		   "does not list debian12-disk1.vmdk");
	snprintf(mf, sizeof(mf), "SHA1(debian12.ovf)= %040d\n", 0);
	make_ova("m3.ova", ovf, mf, true, "debian12-disk1.vmdk", NULL);
	{
		struct im_err err = { 0 };
		CHECK_EQ_U(ova_open(path_of("m3.ova"), o, &err), 0);
	}
	EXPECT_ERR(ova_verify(path_of("m3.ova"), o, 2, &had, E), -EBADMSG, IM_EXIT_DAMAGED,
		   "manifest digest of debian12.ovf does not match");
	snprintf(mf, sizeof(mf), "SHA256(debian12.ovf)= %s\nSHA256(ghost.vmdk)= %064d\n", h1, 0);
	make_ova("m4.ova", ovf, mf, true, "debian12-disk1.vmdk", NULL);
	{
		struct im_err err = { 0 };
		CHECK_EQ_U(ova_open(path_of("m4.ova"), o, &err), 0);
	}
	EXPECT_ERR(ova_verify(path_of("m4.ova"), o, -1, &had, E), -EBADMSG, IM_EXIT_DAMAGED, "ghost.vmdk");
	snprintf(mf, sizeof(mf), "MD5(debian12.ovf)= %032d\n", 0);
	make_ova("m5.ova", ovf, mf, true, "debian12-disk1.vmdk", NULL);
	{
		struct im_err err = { 0 };
		CHECK_EQ_U(ova_open(path_of("m5.ova"), o, &err), 0);
	}
	EXPECT_ERR(ova_verify(path_of("m5.ova"), o, -1, &had, E), -EBADMSG, IM_EXIT_DAMAGED, "line 1");
	free(ovf);
	free(o);
}

static void ovf_folder(void)
{
	char files[VM_MAX_DISKS][4096], mf[512], h1[65], h2[65], dir[PATH_MAX], real[PATH_MAX];
	struct vm_desc d;
	struct im_err err = { 0 };
	size_t len;
	char *ovf = sample("esxi-debian12.ovf", &len);

	snprintf(dir, sizeof(dir), "%s/folder", tmp);
	mkdir(dir, 0755);
	puts_file("folder/debian12.ovf", ovf);
	put("folder/debian12-disk1.vmdk", disk_bytes, sizeof(disk_bytes));
	CHECK_EQ_U(vm_ovf_folder(path_of("folder/debian12.ovf"), &d, files, &err), 0);
	CHECK(realpath(path_of("folder/debian12-disk1.vmdk"), real) != NULL);
	CHECK_STR(files[0], real);
	sha256_hex(ovf, strlen(ovf), h1);
	sha256_hex(disk_bytes, sizeof(disk_bytes), h2);
	snprintf(mf, sizeof(mf), "SHA256(debian12.ovf)= %s\nSHA256(debian12-disk1.vmdk)= %s\n", h1, h2);
	puts_file("folder/debian12.mf", mf);
	CHECK_EQ_U(vm_ovf_folder(path_of("folder/debian12.ovf"), &d, files, &err), 0);
	if (err.msg[0])
		fprintf(stderr, "  %s\n", err.msg);
	disk_bytes[5] ^= 1;
	put("folder/debian12-disk1.vmdk", disk_bytes, sizeof(disk_bytes));
	disk_bytes[5] ^= 1;
	EXPECT_ERR(vm_ovf_folder(path_of("folder/debian12.ovf"), &d, files, E), -EBADMSG, IM_EXIT_DAMAGED,
		   "manifest digest of debian12-disk1.vmdk does not match");
	snprintf(mf, sizeof(mf), "SHA256(debian12.ovf)= %s\n", h1);
	puts_file("folder/debian12.mf", mf);
	EXPECT_ERR(vm_ovf_folder(path_of("folder/debian12.ovf"), &d, files, E), -EBADMSG, IM_EXIT_DAMAGED,
		   "does not list debian12-disk1.vmdk");
	unlink(path_of("folder/debian12.mf"));
	unlink(path_of("folder/debian12-disk1.vmdk"));
	EXPECT_ERR(vm_ovf_folder(path_of("folder/debian12.ovf"), &d, files, E), -ENOENT, IM_EXIT_SOURCE,
		   "debian12-disk1.vmdk");
	{
		char *h = replace(ovf, "ovf:href=\"debian12-disk1.vmdk\"", "ovf:href=\"../../etc/shadow\"");
		puts_file("folder/debian12.ovf", h);
		EXPECT_ERR(vm_ovf_folder(path_of("folder/debian12.ovf"), &d, files, E), -EINVAL, IM_EXIT_SOURCE,
			   "../../etc/shadow");
		free(h);
	}
	free(ovf);
}

static void setup(void)
{
	char exe[PATH_MAX - 512];
	ssize_t n;

	snprintf(tmp, sizeof(tmp), "/tmp/test-vmsource-XXXXXX");
	if (!mkdtemp(tmp))
		abort();
	/* the samples: from the tree's root, else beside the binary (BUILD/unit/..) */
	snprintf(data_dir, sizeof(data_dir), "tests/data/vm");
	if (access("tests/data/vm/esxi-debian12.ovf", R_OK) == 0)
		return;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		for (int up = 0; up < 4; up++) {
			char *s = strrchr(exe, '/');
			if (!s)
				break;
			*s = '\0';
			snprintf(data_dir, sizeof(data_dir), "%s/tests/data/vm", exe);
			strcat(data_dir, "/esxi-debian12.ovf");
			if (access(data_dir, R_OK) == 0) {
				data_dir[strlen(data_dir) - strlen("/esxi-debian12.ovf")] = '\0';
				return;
			}
		}
	}
	snprintf(data_dir, sizeof(data_dir), "tests/data/vm");
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "  could not remove %s\n", tmp);
}

static void all_first(void) { setup(); }
static void all_last(void) { teardown(); }

UNIT_MAIN(UNIT(all_first), UNIT(ovf_esxi), UNIT(ovf_vbox), UNIT(ovf_v2), UNIT(ovf_hostile),
	  UNIT(vmx_sample), UNIT(vmx_hostile), UNIT(file_in_dir), UNIT(vmdk_parse), UNIT(vmdk_files),
	  UNIT(vmdk_qemu_img), UNIT(ova_good), UNIT(ova_gnu_tar), UNIT(ova_hostile), UNIT(ovf_folder),
	  UNIT(all_last))
