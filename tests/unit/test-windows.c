/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Windows conversion without a guest: which virtio-win folder fits which
 * Windows, picking the files from both layouts, and the registry edits made
 * on real hives (grown with libhivex from the hivex project's minimal hive,
 * ../shared/testdata/minimal.hive, or $IMAGER_TESTDATA/minimal.hive).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert-int.h"
#include "winreg.h"
#include "imager/virtiowin.h"
#include "unit.h"

static void os_names(void)
{
	const char *c[VW_MAX_CANDIDATES];
	size_t n;

	CHECK_EQ_U(vw_os_candidates(5, 1, false, 2600, c), 1);
	CHECK_STR(c[0], "xp");
	n = vw_os_candidates(5, 2, false, 3790, c);   /* XP x64 */
	CHECK_EQ_U(n, 2);
	CHECK_STR(c[0], "2k3");
	CHECK_STR(c[1], "xp");
	CHECK_EQ_U(vw_os_candidates(5, 2, true, 3790, c), 1);
	CHECK_STR(c[0], "2k3");
	CHECK_EQ_U(vw_os_candidates(6, 0, true, 6002, c), 1);
	CHECK_STR(c[0], "2k8");
	CHECK_EQ_U(vw_os_candidates(6, 0, false, 6002, c), 2);
	CHECK_STR(c[0], "vista");
	vw_os_candidates(6, 1, false, 7601, c);
	CHECK_STR(c[0], "w7");
	vw_os_candidates(6, 1, true, 7601, c);
	CHECK_STR(c[0], "2k8r2");
	vw_os_candidates(6, 2, false, 9200, c);
	CHECK_STR(c[0], "w8");
	vw_os_candidates(6, 2, true, 9200, c);
	CHECK_STR(c[0], "2k12");
	vw_os_candidates(6, 3, false, 9600, c);
	CHECK_STR(c[0], "w8.1");
	vw_os_candidates(6, 3, true, 9600, c);
	CHECK_STR(c[0], "2k12r2");
	CHECK_EQ_U(vw_os_candidates(10, 0, false, 19045, c), 1);
	CHECK_STR(c[0], "w10");
	CHECK_EQ_U(vw_os_candidates(10, 0, false, 22631, c), 2);
	CHECK_STR(c[0], "w11");
	CHECK_STR(c[1], "w10");
	CHECK_EQ_U(vw_os_candidates(10, 0, true, 14393, c), 1);
	CHECK_STR(c[0], "2k16");
	CHECK_EQ_U(vw_os_candidates(10, 0, true, 17763, c), 2);
	CHECK_STR(c[0], "2k19");
	CHECK_EQ_U(vw_os_candidates(10, 0, true, 20348, c), 3);
	CHECK_STR(c[0], "2k22");
	n = vw_os_candidates(10, 0, true, 26100, c);
	CHECK_EQ_U(n, 4);
	CHECK_STR(c[0], "2k25");
	CHECK_STR(c[3], "2k16");
	CHECK_EQ_U(vw_os_candidates(10, 0, false, 0, c), 1);   /* build unknown */
	CHECK_STR(c[0], "w10");
	CHECK_EQ_U(vw_os_candidates(5, 0, false, 2195, c), 0);   /* Windows 2000 */
	CHECK_EQ_U(vw_os_candidates(4, 0, false, 1381, c), 0);
	CHECK_STR(vw_arch_dir("x86_64"), "amd64");
	CHECK_STR(vw_arch_dir("i386"), "x86");
	CHECK(vw_arch_dir("ppc64le") == NULL);
}

/* The ISO's layout, names in mixed case as there. */
static char *iso_paths[] = {
	"viostor/w10/amd64/viostor.sys", "viostor/w10/amd64/viostor.inf",
	"viostor/w10/amd64/viostor.cat", "viostor/w10/amd64/viostor.pdb",
	"viostor/w10/x86/viostor.sys",   "viostor/w10/x86/viostor.inf",
	"viostor/w7/amd64/viostor.sys",  "viostor/w7/amd64/viostor.inf",
	"vioscsi/w10/amd64/vioscsi.sys", "vioscsi/w10/amd64/vioscsi.inf",
	"NetKVM/w10/amd64/netkvm.sys",   "NetKVM/w10/amd64/netkvm.inf",
	"NetKVM/w10/amd64/netkvm.cat",   "Balloon/w10/amd64/balloon.sys",
	"Balloon/w10/amd64/balloon.inf", "Balloon/2k19/amd64/balloon.inf",
	"fwcfg/w10/amd64/fwcfg.inf",     "qemufwcfg/w10/amd64/qemufwcfg.inf",
	"guest-agent/qemu-ga-x86_64.msi", "guest-agent/qemu-ga-i386.msi",
	"virtio-win_license.txt",        "./Win10/amd64/odd.sys",
	"viostor/w10/amd64/..",          "viostor/w10/amd64/a\\b.sys",
	"viostor/w10/amd64/.hidden.inf", "viostor/w10/amd64/x\ty.inf",
};

static void select_iso(void)
{
	size_t n = sizeof(iso_paths) / sizeof(iso_paths[0]);
	struct im_err err = { 0 };
	struct vw_set s;

	CHECK_EQ_U(vw_select(iso_paths, n, "vw", "x86_64", 10, 0, false, 19045, "viostor", &s, &err), 0);
	CHECK_STR(s.os, "w10");
	CHECK_STR(s.arch, "amd64");
	CHECK(!s.fallback);
	CHECK(vw_set_find(&s, "viostor.sys") != NULL);
	CHECK_STR(vw_set_find(&s, "viostor.sys")->rel, "viostor/w10/amd64/viostor.sys");
	CHECK(vw_set_find(&s, "viostor.pdb") == NULL);      /* debug symbols stay */
	CHECK(vw_set_find(&s, "netkvm.inf") != NULL);        /* NetKVM: case ignored */
	CHECK(vw_set_find(&s, "qemufwcfg.inf") == NULL);     /* fwcfg wins */
	CHECK(vw_set_find(&s, "fwcfg.inf") != NULL);
	for (size_t i = 0; i < s.nfiles; i++)                /* hostile names left out */
		CHECK(s.files[i].name[0] != '.' && !strpbrk(s.files[i].name, "\\\t/"));
	CHECK_STR(s.agent.rel, "guest-agent/qemu-ga-x86_64.msi");
	CHECK_STR(s.drivers, "balloon,fwcfg,netkvm,vioscsi,viostor");
	vw_set_free(&s);

	/* Windows 11 on a collection without w11: w10's, said so. */
	CHECK_EQ_U(vw_select(iso_paths, n, "vw", "x86_64", 10, 0, false, 22631, "vioscsi", &s, &err), 0);
	CHECK_STR(s.os, "w10");
	CHECK(s.fallback);
	vw_set_free(&s);

	/* 32-bit Windows 10 */
	CHECK_EQ_U(vw_select(iso_paths, n, "vw", "i386", 10, 0, false, 19045, "viostor", &s, &err), 0);
	CHECK_STR(s.arch, "x86");
	CHECK_STR(s.agent.rel, "guest-agent/qemu-ga-i386.msi");
	CHECK_EQ_U(s.nfiles, 2);
	vw_set_free(&s);

	/* Windows 8.1: no folder; the message says what there is. */
	CHECK(vw_select(iso_paths, n, "vw", "x86_64", 6, 3, false, 9600, "viostor", &s, &err) == -ENOTSUP);
	CHECK_EQ_U(err.exit_class, IM_EXIT_UNSUPP);
	CHECK(strstr(err.msg, "w8.1") != NULL);
	CHECK(strstr(err.msg, "w7 w10") != NULL);
	/* w7 has viostor but no vioscsi */
	CHECK(vw_select(iso_paths, n, "vw", "x86_64", 6, 1, false, 7601, "vioscsi", &s, &err) == -ENOTSUP);
	/* Server 2019 has only a balloon folder: no viostor there, so 2k16?  None. */
	CHECK(vw_select(iso_paths, n, "vw", "x86_64", 10, 0, true, 17763, "viostor", &s, &err) == -ENOTSUP);
	/* Windows 2000 */
	CHECK(vw_select(iso_paths, n, "vw", "x86_64", 5, 0, false, 2195, "viostor", &s, &err) == -ENOTSUP);

	/* Not virtio-win at all */
	char *other[] = { "boot/grub/grub.cfg", "casper/vmlinuz", "EFI/BOOT/BOOTX64.EFI" };
	memset(&err, 0, sizeof(err));
	CHECK(vw_select(other, 3, "x.iso", "x86_64", 10, 0, false, 19045, "viostor", &s, &err) == -ENOENT);
	CHECK_EQ_U(err.exit_class, IM_EXIT_SOURCE);
	CHECK(strstr(err.msg, "not virtio-win") != NULL);
}

static void select_by_os(void)
{
	char *p[] = {
		"drivers/by-os/amd64/w11/viostor.sys", "drivers/by-os/amd64/w11/viostor.inf",
		"drivers/by-os/amd64/w11/netkvm.sys",  "drivers/by-os/amd64/w11/netkvm.inf",
		"drivers/by-os/amd64/2k22/viostor.sys", "drivers/by-os/amd64/2k22/viostor.inf",
		"drivers/by-os/amd64/2k25/netkvm.sys",  "drivers/by-os/ARM64/w11/viostor.sys",
		"drivers/by-os/ARM64/w11/viostor.inf",
	};
	struct im_err err = { 0 };
	struct vw_set s;

	CHECK_EQ_U(vw_select(p, 9, "vw", "x86_64", 10, 0, false, 22631, "viostor", &s, &err), 0);
	CHECK_STR(s.os, "w11");
	CHECK_EQ_U(s.nfiles, 4);
	CHECK(s.agent.rel == NULL);
	vw_set_free(&s);
	/* Server 2025: 2k25 has no viostor, 2k22 has */
	CHECK_EQ_U(vw_select(p, 9, "vw", "x86_64", 10, 0, true, 26100, "viostor", &s, &err), 0);
	CHECK_STR(s.os, "2k22");
	CHECK(s.fallback);
	vw_set_free(&s);
	CHECK_EQ_U(vw_select(p, 9, "vw", "aarch64", 10, 0, false, 22631, "viostor", &s, &err), 0);
	CHECK_STR(s.arch, "ARM64");
	vw_set_free(&s);
}

/* ---- hives ---- */

static const char *minimal_hive(void)
{
	static char path[512];
	const char *env = getenv("IMAGER_TESTDATA");
	const char *tries[] = { env, "../shared/testdata", "/work/shared/testdata" };
	struct stat st;

	for (size_t i = 0; i < 3; i++) {
		if (!tries[i])
			continue;
		snprintf(path, sizeof(path), "%s/minimal.hive", tries[i]);
		if (!stat(path, &st))
			return path;
	}
	return NULL;
}

/* Hive tests need minimal.hive; without it they say so and do nothing. */
static bool have_hive(void)
{
	if (minimal_hive())
		return true;
	printf("skip: minimal.hive not found (../shared/testdata, /work/shared/testdata or "
	       "$IMAGER_TESTDATA)\n");
	return false;
}

static int copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	char buf[8192];
	size_t n;
	int r = a && b ? 0 : -1;
	while (!r && (n = fread(buf, 1, sizeof(buf), a)) > 0)
		if (fwrite(buf, 1, n, b) != n)
			r = -1;
	if (a)
		fclose(a);
	if (b && fclose(b))
		r = -1;
	return r;
}

static hive_h *new_hive(const char *dir, const char *name)
{
	char p[600];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (copy_file(minimal_hive(), p))
		return NULL;
	return hivex_open(p, HIVEX_OPEN_WRITE);
}

/* A SYSTEM hive like Windows': ControlSet002 current, old-platform leftovers. */
static hive_h *make_system(const char *dir, bool ddb)
{
	hive_h *h = new_hive(dir, "SYSTEM");
	struct reg_val sel[] = { RV_DWORD("Current", 2), RV_DWORD("Default", 2),
				 RV_DWORD("LastKnownGood", 1) };
	struct reg_val start2[] = { RV_DWORD("Type", 0x10), RV_DWORD("Start", 2) };
	struct reg_val start0[] = { RV_DWORD("Type", 1), RV_DWORD("Start", 0) };
	struct reg_val start4[] = { RV_DWORD("Type", 1), RV_DWORD("Start", 4) };
	struct reg_val disk[] = { RV_MULTI("UpperFilters", "PartMgr\nxenfilt"),
				  RV_SZ("Class", "DiskDrive") };

	if (!h)
		return NULL;
	reg_set(h, "Select", sel, 3, NULL);
	reg_set(h, "ControlSet001\\Services\\VMTools", start2, 2, NULL);
	reg_set(h, "ControlSet002\\Services\\VMTools", start2, 2, NULL);
	reg_set(h, "ControlSet002\\Services\\xenfilt", start0, 2, NULL);
	reg_set(h, "ControlSet002\\Services\\vmmouse", start4, 2, NULL);
	reg_set(h, "ControlSet002\\Services\\disk", start0, 2, NULL);
	reg_set(h, "ControlSet002\\Control\\Class\\{4d36e967-e325-11ce-bfc1-08002be10318}", disk, 2, NULL);
	if (ddb)
		reg_mkpath(h, "DriverDatabase\\DeviceIds\\PCI");
	return h;
}

static hive_h *make_software(const char *dir)
{
	hive_h *h = new_hive(dir, "SOFTWARE");
	struct reg_val cv[] = { RV_EXPAND("DevicePath", "%SystemRoot%\\inf") };
	if (h)
		reg_set(h, "Microsoft\\Windows\\CurrentVersion", cv, 1, NULL);
	return h;
}

static void check_dword(hive_h *h, const char *key, const char *name, uint32_t want)
{
	uint32_t v = 0xdeadbeef;
	int r = reg_get_dword(h, key, name, &v);
	if (r || v != want) {
		unit_failures++;
		fprintf(stderr, "  %s\\%s: %d %u, expected %u\n", key, name, r, v, want);
	}
}

static void check_str(hive_h *h, const char *key, const char *name, const char *want)
{
	char *v = reg_get_str(h, key, name);
	if (!v || strcmp(v, want)) {
		unit_failures++;
		fprintf(stderr, "  %s\\%s: \"%s\", expected \"%s\"\n", key, name, v ? v : "(none)", want);
	}
	free(v);
}

static void registry_win7(void)
{
	char dir[] = "/tmp/imager-unit-win.XXXXXX", p[600];
	struct win_reg_in in = { .cs = "ControlSet002", .major = 6, .minor = 1, .block = "viostor",
				 .firstboot = true };
	struct win_reg_out out;
	struct im_err err = { 0 };
	hive_h *sys, *soft;

	if (!have_hive())
		return;
	CHECK(mkdtemp(dir) != NULL);
	sys = make_system(dir, false);
	soft = make_software(dir);
	CHECK(sys && soft);
	if (!sys || !soft)
		return;
	CHECK_EQ_U(win_registry_plan(sys, soft, &in, &out, &err), 0);
	/* written and read back from files: what the guest gets */
	snprintf(p, sizeof(p), "%s/SYSTEM.new", dir);
	CHECK(hivex_commit(sys, p, 0) == 0);
	hivex_close(sys);
	sys = hivex_open(p, 0);
	snprintf(p, sizeof(p), "%s/SOFTWARE.new", dir);
	CHECK(hivex_commit(soft, p, 0) == 0);
	hivex_close(soft);
	soft = hivex_open(p, 0);
	CHECK(sys && soft);
	if (!sys || !soft)
		return;

	const char *svc = "ControlSet002\\Services\\viostor";
	check_dword(sys, svc, "Type", 1);
	check_dword(sys, svc, "Start", 0);
	check_dword(sys, svc, "ErrorControl", 1);
	check_str(sys, svc, "Group", "SCSI miniport");
	check_str(sys, svc, "ImagePath", "system32\\drivers\\viostor.sys");
	CHECK(reg_find(sys, "ControlSet001\\Services\\viostor") == 0);   /* not the old set */
	const char *cdd = "ControlSet002\\Control\\CriticalDeviceDatabase\\PCI#VEN_1AF4&DEV_1001&REV_00";
	check_str(sys, cdd, "Service", "viostor");
	check_str(sys, cdd, "ClassGUID", "{4D36E97B-E325-11CE-BFC1-08002BE10318}");
	check_str(sys, "ControlSet002\\Control\\CriticalDeviceDatabase\\pci#ven_1af4&dev_1042&rev_01",
		  "Service", "viostor");
	check_str(sys, "ControlSet002\\Control\\CriticalDeviceDatabase\\PCI#VEN_1AF4&DEV_1001&SUBSYS_00021AF4&REV_00",
		  "Service", "viostor");
	check_str(sys, "ControlSet002\\Control\\CriticalDeviceDatabase\\PCI#VEN_1AF4&DEV_1042&SUBSYS_11001AF4&REV_01",
		  "Service", "viostor");
	CHECK(reg_find(sys, "DriverDatabase") == 0);                   /* not before Windows 8 */
	/* old platform: disabled in the current set only, filter taken out */
	check_dword(sys, "ControlSet002\\Services\\VMTools", "Start", 4);
	check_dword(sys, "ControlSet002\\Services\\xenfilt", "Start", 4);
	check_dword(sys, "ControlSet001\\Services\\VMTools", "Start", 2);
	CHECK_STR(out.disabled, "VMTools,xenfilt");                     /* vmmouse was off already */
	char **f = reg_get_multi(sys, "ControlSet002\\Control\\Class\\{4D36E967-E325-11CE-BFC1-08002BE10318}",
				 "UpperFilters");
	CHECK(f && f[0] && !strcmp(f[0], "PartMgr") && !f[1]);
	reg_strv_free(f);
	/* first boot and DevicePath */
	check_dword(sys, "ControlSet002\\Services\\imager-firstboot", "Start", 2);
	check_dword(sys, "ControlSet002\\Services\\imager-firstboot", "Type", 0x10);
	check_str(soft, "Microsoft\\Windows\\CurrentVersion", "DevicePath",
		  "%SystemRoot%\\inf;%SystemRoot%\\Drivers\\VirtIO");
	CHECK_STR(out.old_devicepath, "%SystemRoot%\\inf");

	struct sbuf b = { 0 };
	win_firstboot_script(&in, &out, "qemu-ga-x86_64.msi", &b);
	sbuf_add(&b, "", 1);
	CHECK(strstr(b.p, "\"%PNPUTIL%\" -i -a \"%DRV%\\viostor.inf\"") != NULL);
	CHECK(strstr(b.p, "/d \"%%SystemRoot%%\\inf\"") != NULL);      /* restored, % doubled */
	CHECK(strstr(b.p, "DriverDatabase") == NULL);                  /* nothing to remove */
	CHECK(strstr(b.p, "msiexec.exe /i \"%HERE%\\qemu-ga-x86_64.msi\"") != NULL);
	CHECK(strstr(b.p, "sc.exe delete imager-firstboot") != NULL);
	CHECK(strstr(b.p, "\r\n") != NULL && strstr(b.p, "\n\n") == NULL);
	sbuf_free(&b);

	/* Converting again changes nothing more: DevicePath once. */
	win_reg_out_free(&out);
	hivex_close(sys);
	hivex_close(soft);
	snprintf(p, sizeof(p), "%s/SYSTEM.new", dir);
	sys = hivex_open(p, HIVEX_OPEN_WRITE);
	snprintf(p, sizeof(p), "%s/SOFTWARE.new", dir);
	soft = hivex_open(p, HIVEX_OPEN_WRITE);
	CHECK_EQ_U(win_registry_plan(sys, soft, &in, &out, &err), 0);
	CHECK(out.new_devicepath == NULL);
	CHECK(out.devicepath_ours);                       /* still restored at first boot */
	CHECK_STR(out.old_devicepath, "%SystemRoot%\\inf");
	CHECK_STR(out.disabled, "");
	win_reg_out_free(&out);
	hivex_close(sys);
	hivex_close(soft);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

static void registry_win10_scsi(void)
{
	char dir[] = "/tmp/imager-unit-win.XXXXXX", cmd[700];
	struct win_reg_in in = { .cs = "ControlSet002", .major = 10, .minor = 0, .block = "vioscsi",
				 .firstboot = true };
	struct win_reg_out out;
	struct im_err err = { 0 };
	hive_h *sys, *soft;

	if (!have_hive())
		return;
	CHECK(mkdtemp(dir) != NULL);
	sys = make_system(dir, true);
	soft = make_software(dir);
	CHECK(sys && soft);
	if (!sys || !soft)
		return;
	CHECK_EQ_U(win_registry_plan(sys, soft, &in, &out, &err), 0);
	check_dword(sys, "ControlSet002\\Services\\vioscsi", "Start", 0);
	CHECK(reg_find(sys, "ControlSet002\\Control\\CriticalDeviceDatabase") == 0);
	const char *ids[] = { "VEN_1AF4&DEV_1004&SUBSYS_00081AF4&REV_00", "VEN_1AF4&DEV_1004&REV_00",
			      "VEN_1AF4&DEV_1048&SUBSYS_11001AF4&REV_01", "VEN_1AF4&DEV_1048&REV_01" };
	for (int i = 0; i < 4; i++) {
		char k[256];
		snprintf(k, sizeof(k), "DriverDatabase\\DeviceIds\\PCI\\%s", ids[i]);
		hive_node_h n = reg_find(sys, k);
		CHECK(n != 0);
		CHECK(n && hivex_node_get_value(sys, n, "imager_vioscsi.inf") != 0);
		snprintf(k, sizeof(k),
			 "DriverDatabase\\DriverPackages\\imager_vioscsi.inf_tmp\\Descriptors\\PCI\\%s", ids[i]);
		check_str(sys, k, "Configuration", "imager_vioscsi_conf");
	}
	check_str(sys, "DriverDatabase\\DriverPackages\\imager_vioscsi.inf_tmp\\Configurations\\imager_vioscsi_conf",
		  "Service", "vioscsi");
	check_str(sys, "DriverDatabase\\DriverInfFiles\\imager_vioscsi.inf", "Active", "imager_vioscsi.inf_tmp");

	struct sbuf b = { 0 };
	win_firstboot_script(&in, &out, NULL, &b);
	sbuf_add(&b, "", 1);
	CHECK(strstr(b.p, "DriverPackages\\imager_vioscsi.inf_tmp\" /f") != NULL);
	CHECK(strstr(b.p, "DeviceIds\\PCI\\VEN_1AF4&DEV_1048&REV_01\" /v imager_vioscsi.inf /f") != NULL);
	CHECK(strstr(b.p, "msiexec") == NULL);
	sbuf_free(&b);
	win_reg_out_free(&out);

	/* A SYSTEM hive without the current control set is damaged. */
	in.cs = "ControlSet003";
	CHECK(win_registry_plan(sys, soft, &in, &out, &err) == -EUCLEAN);
	CHECK_EQ_U(err.exit_class, IM_EXIT_DAMAGED);
	win_reg_out_free(&out);
	hivex_close(sys);
	hivex_close(soft);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

static void registry_values(void)
{
	char dir[] = "/tmp/imager-unit-win.XXXXXX", cmd[700];
	hive_h *h;

	if (!have_hive())
		return;
	CHECK(mkdtemp(dir) != NULL);
	h = new_hive(dir, "X");
	CHECK(h != NULL);
	if (!h)
		return;
	/* UTF-8 in, UTF-8 out (UTF-16LE in the hive, with a surrogate pair) */
	struct reg_val v[] = { RV_SZ("Name", "Caf\xc3\xa9 \xf0\x9f\x98\x80"), RV_MULTI("L", "a\nbc\n") };
	CHECK_EQ_U(reg_set(h, "A\\B\\C", v, 2, NULL), 0);
	check_str(h, "a\\b\\c", "Name", "Caf\xc3\xa9 \xf0\x9f\x98\x80");
	char **l = reg_get_multi(h, "A\\B\\C", "L");
	CHECK(l && l[0] && l[1] && !strcmp(l[0], "a") && !strcmp(l[1], "bc") && !l[2]);
	reg_strv_free(l);
	uint32_t d;
	CHECK(reg_get_dword(h, "A\\B\\C", "Name", &d) == -ENOENT);     /* wrong type: absent */
	CHECK(reg_get_str(h, "A\\B\\C", "L") == NULL);
	CHECK(reg_get_str(h, "A\\X", "Name") == NULL);
	char **k = reg_subkeys(h, "A");
	CHECK(k && k[0] && !strcmp(k[0], "B") && !k[1]);
	reg_strv_free(k);
	hivex_close(h);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

UNIT_MAIN(UNIT(os_names), UNIT(select_iso), UNIT(select_by_os), UNIT(registry_win7),
	  UNIT(registry_win10_scsi), UNIT(registry_values))
