/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Windows guests onto virtio (what it does: include/imager/convert.h).
 *
 * The hives are downloaded, edited here with libhivex and, when the plan
 * is applied, uploaded back after the driver files: until then the guest's
 * registry is untouched, and a refusal (no drivers for the version, a
 * damaged hive) leaves every byte as it was.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert-int.h"
#include "imager/virtiowin.h"
#include "util.h"
#include "winreg.h"

struct win_state {
	char tmp[256];                /* hives here: SYSTEM, SOFTWARE, *.new */
	struct vw_source src;
	struct vw_set set;
	bool have_src;
};

static const char scsi_class_guid[] = "{4D36E97B-E325-11CE-BFC1-08002BE10318}";

void win_pci_ids(const char *block, const char *ids[WIN_PCI_IDS])
{
	/* The device's first hardware ID (with the subsystem: virtio's device
	 * number for legacy devices, 0x1100 for modern ones; what virt-v2v 2.2
	 * binds) and the compatible ID without it (what later virt-v2v binds):
	 * Windows tries the first, then the second. */
	static const char *const blk[] = {
		"VEN_1AF4&DEV_1001&SUBSYS_00021AF4&REV_00", "VEN_1AF4&DEV_1001&REV_00",
		"VEN_1AF4&DEV_1042&SUBSYS_11001AF4&REV_01", "VEN_1AF4&DEV_1042&REV_01",
	};
	static const char *const scsi[] = {
		"VEN_1AF4&DEV_1004&SUBSYS_00081AF4&REV_00", "VEN_1AF4&DEV_1004&REV_00",
		"VEN_1AF4&DEV_1048&SUBSYS_11001AF4&REV_01", "VEN_1AF4&DEV_1048&REV_01",
	};
	for (int i = 0; i < WIN_PCI_IDS; i++)
		ids[i] = !strcmp(block, "vioscsi") ? scsi[i] : blk[i];
}

/* ---- the registry ---- */

/* Services that belong to the platform the machine leaves, and do nothing
 * (or harm: a filter driver that fails stops its device class) on KVM. */
static const struct {
	const char *name, *what;
} old_platform[] = {
	{ "VMTools", "VMware Tools" },          { "VGAuthService", "VMware Tools" },
	{ "vm3dservice", "VMware Tools" },      { "vmvss", "VMware Tools" },
	{ "vmci", "VMware" },                   { "vmhgfs", "VMware" },
	{ "vmmouse", "VMware" },                { "vmusbmouse", "VMware" },
	{ "vmrawdsk", "VMware" },               { "vmmemctl", "VMware" },
	{ "vmxnet", "VMware" },                 { "vmxnet3ndis6", "VMware" },
	{ "vmx_svga", "VMware" },               { "vm3dmp", "VMware" },
	{ "vsock", "VMware" },                  { "pvscsi", "VMware" },
	{ "VBoxService", "VirtualBox" },        { "VBoxGuest", "VirtualBox" },
	{ "VBoxMouse", "VirtualBox" },          { "VBoxSF", "VirtualBox" },
	{ "VBoxVideo", "VirtualBox" },          { "VBoxWddm", "VirtualBox" },
	{ "xenbus", "Xen" },                    { "xenfilt", "Xen" },
	{ "xenvbd", "Xen" },                    { "xennet", "Xen" },
	{ "xenvif", "Xen" },                    { "xeniface", "Xen" },
	{ "xendisk", "Xen" },                   { "xenvkbd", "Xen" },
	{ "xenhid", "Xen" },                    { "xenagent", "Xen" },
	{ "XenSvc", "Xen" },                    { "xenpci", "Xen" },
	{ "vmicheartbeat", "Hyper-V" },         { "vmickvpexchange", "Hyper-V" },
	{ "vmicshutdown", "Hyper-V" },          { "vmictimesync", "Hyper-V" },
	{ "vmicvss", "Hyper-V" },               { "vmicrdv", "Hyper-V" },
	{ "vmicguestinterface", "Hyper-V" },    { "vmicvmsession", "Hyper-V" },
};

static int add_line(struct win_reg_out *out, const char *hive, const char *key, const char *detail)
{
	struct win_reg_line *l = realloc(out->lines, (out->nlines + 1) * sizeof(*l));
	if (!l)
		return -ENOMEM;
	out->lines = l;
	l = &out->lines[out->nlines];
	l->hive = strdup(hive);
	l->key = strdup(key);
	l->detail = strdup(detail);
	if (!l->hive || !l->key || !l->detail) {
		free(l->hive);
		free(l->key);
		free(l->detail);
		return -ENOMEM;
	}
	out->nlines++;
	return 0;
}

/* Set values and log them (detail prefix, then the values). */
static int set_logged(hive_h *h, const char *hive, struct win_reg_out *out, const char *key,
		      const struct reg_val *v, size_t n, const char *why, struct im_err *err)
{
	struct sbuf vals = { 0 }, d = { 0 };
	int r;

	if ((r = reg_set(h, key, v, n, &vals)) < 0) {
		sbuf_free(&vals);
		return im_errf(err, IM_EXIT_INTERNAL, r, "registry %s\\%s: %s", hive, key, strerror(-r));
	}
	sbuf_addf(&d, "%s%s", why ? why : "", why ? ": " : "");
	sbuf_add(&d, vals.p ? vals.p : "", vals.len);
	sbuf_add(&d, "", 1);
	sbuf_free(&vals);
	r = d.oom ? -ENOMEM : add_line(out, hive, key, d.p);
	sbuf_free(&d);
	return r < 0 ? im_errf(err, IM_EXIT_INTERNAL, r, "out of memory") : 0;
}

static bool in_list(const char *csv, const char *name)
{
	size_t l = strlen(name);
	for (const char *p = csv; *p;) {
		const char *e = strchr(p, ',');
		size_t k = e ? (size_t)(e - p) : strlen(p);
		if (k == l && !strncasecmp(p, name, l))
			return true;
		p += k + (e ? 1 : 0);
	}
	return false;
}

static int disable_old_platform(hive_h *sys, const char *cs, struct win_reg_out *out,
				struct im_err *err)
{
	char key[256];
	int r;

	for (size_t i = 0; i < sizeof(old_platform) / sizeof(old_platform[0]); i++) {
		uint32_t start;
		snprintf(key, sizeof(key), "%s\\Services\\%s", cs, old_platform[i].name);
		if (!reg_find(sys, key))
			continue;
		bool known = !reg_get_dword(sys, key, "Start", &start);
		if (known && start == 4)
			continue;
		struct reg_val v[] = { RV_DWORD("Start", 4) };
		char why[96];
		snprintf(why, sizeof(why), "%s service disabled (was Start %s)", old_platform[i].what,
			 !known ? "unset" : start == 0 ? "0, boot"
				 : start == 1 ? "1, system" : start == 2 ? "2, automatic"
				 : start == 3 ? "3, on demand" : "other");
		if ((r = set_logged(sys, "HKLM\\SYSTEM", out, key, v, 1, why, err)) < 0)
			return r;
		size_t used = strlen(out->disabled);
		snprintf(out->disabled + used, sizeof(out->disabled) - used, "%s%s", used ? "," : "",
			 old_platform[i].name);
	}
	if (!out->disabled[0])
		return 0;
	/* A class filter that does not load stops every device of its class. */
	snprintf(key, sizeof(key), "%s\\Control\\Class", cs);
	char **classes = reg_subkeys(sys, key);
	for (size_t i = 0; classes && classes[i]; i++) {
		static const char *const which[] = { "UpperFilters", "LowerFilters" };
		char ckey[320];
		snprintf(ckey, sizeof(ckey), "%s\\%s", key, classes[i]);
		for (int w = 0; w < 2; w++) {
			char **list = reg_get_multi(sys, ckey, which[w]);
			struct sbuf keep = { 0 }, gone = { 0 };
			bool changed = false;
			for (size_t k = 0; list && list[k]; k++) {
				if (in_list(out->disabled, list[k])) {
					sbuf_addf(&gone, "%s%s", gone.len ? "," : "", list[k]);
					changed = true;
				} else {
					sbuf_addf(&keep, "%s%s", keep.len ? "\n" : "", list[k]);
				}
			}
			reg_strv_free(list);
			r = 0;
			if (changed) {
				char why[320];
				sbuf_add(&keep, "", 1);
				sbuf_add(&gone, "", 1);
				snprintf(why, sizeof(why), "disabled filter %s taken out", gone.p);
				struct reg_val v[] = { RV_MULTI(which[w], keep.oom ? "" : keep.p) };
				r = keep.oom || gone.oom
					? im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory")
					: set_logged(sys, "HKLM\\SYSTEM", out, ckey, v, 1, why, err);
			}
			sbuf_free(&keep);
			sbuf_free(&gone);
			if (r < 0) {
				reg_strv_free(classes);
				return r;
			}
		}
	}
	reg_strv_free(classes);
	return 0;
}

/* Windows 8 on finds drivers for devices it has not seen in the
 * DriverDatabase: a temporary package whose configuration names the
 * service, bound to the PCI IDs.  The first boot removes it once the real
 * package is installed (left behind, such entries break
 * `pnputil /enum-drivers` and upgrades). */
static int ddb_entries(hive_h *sys, const char *drv, const char **ids,
		       struct win_reg_out *out, struct im_err *err)
{
	static const unsigned char version[] = {
		0x00, 0xff, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7b, 0xe9, 0x36, 0x4d,
		0x25, 0xe3, 0xce, 0x11, 0xbf, 0xc1, 0x08, 0x00, 0x2b, 0xe1, 0x03, 0x18,
		0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
		0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
	};
	static const unsigned char rank[] = { 0x01, 0xff, 0x00, 0x00 };
	const char *why = "temporary boot-driver package (removed at first boot)";
	char inf[64], label[80], conf[64], key[320];
	int r;

	snprintf(inf, sizeof(inf), "imager_%s.inf", drv);
	snprintf(label, sizeof(label), "%s_tmp", inf);
	snprintf(conf, sizeof(conf), "imager_%s_conf", drv);

	snprintf(key, sizeof(key), "DriverDatabase\\DriverInfFiles\\%s", inf);
	struct reg_val v1[] = { RV_MULTI("", label), RV_SZ("Active", label),
				RV_MULTI("Configurations", conf) };
	if ((r = set_logged(sys, "HKLM\\SYSTEM", out, key, v1, 3, why, err)) < 0)
		return r;
	snprintf(key, sizeof(key), "DriverDatabase\\DriverPackages\\%s", label);
	struct reg_val v3[] = { RV_BIN("Version", version, sizeof(version)) };
	if ((r = set_logged(sys, "HKLM\\SYSTEM", out, key, v3, 1, why, err)) < 0)
		return r;
	snprintf(key, sizeof(key), "DriverDatabase\\DriverPackages\\%s\\Configurations\\%s", label, conf);
	struct reg_val v4[] = { RV_DWORD("ConfigFlags", 0), RV_SZ("Service", drv) };
	if ((r = set_logged(sys, "HKLM\\SYSTEM", out, key, v4, 2, why, err)) < 0)
		return r;
	for (int i = 0; i < WIN_PCI_IDS; i++) {
		snprintf(key, sizeof(key), "DriverDatabase\\DriverPackages\\%s\\Descriptors\\PCI\\%s",
			 label, ids[i]);
		struct reg_val v5[] = { RV_SZ("Configuration", conf) };
		if ((r = set_logged(sys, "HKLM\\SYSTEM", out, key, v5, 1, why, err)) < 0)
			return r;
		snprintf(key, sizeof(key), "DriverDatabase\\DeviceIds\\PCI\\%s", ids[i]);
		struct reg_val v2[] = { RV_BIN(inf, rank, sizeof(rank)) };
		if ((r = set_logged(sys, "HKLM\\SYSTEM", out, key, v2, 1,
				    "binds the PCI ID to the temporary package (removed at first boot)",
				    err)) < 0)
			return r;
	}
	return 0;
}

static bool windows8_or_later(int major, int minor)
{
	return major > 6 || (major == 6 && minor >= 2);
}

int win_registry_plan(hive_h *sys, hive_h *soft, const struct win_reg_in *in,
		      struct win_reg_out *out, struct im_err *err)
{
	const char *ids[WIN_PCI_IDS];
	char key[256], img[96];
	int r;

	memset(out, 0, sizeof(*out));
	if (!reg_find(sys, in->cs) || !reg_find(sys, "Select"))
		return im_errf(err, IM_EXIT_DAMAGED, -EUCLEAN,
			       "the SYSTEM hive has no %s or no Select key: damaged", in->cs);
	win_pci_ids(in->block, ids);

	/* The boot-start service. */
	snprintf(key, sizeof(key), "%s\\Services\\%s", in->cs, in->block);
	snprintf(img, sizeof(img), "system32\\drivers\\%s.sys", in->block);
	struct reg_val svc[] = { RV_DWORD("Type", 1), RV_DWORD("Start", 0),
				 RV_SZ("Group", "SCSI miniport"), RV_DWORD("ErrorControl", 1),
				 RV_EXPAND("ImagePath", img) };
	if ((r = set_logged(sys, "HKLM\\SYSTEM", out, key, svc, 5, "boot-start service", err)) < 0)
		return r;

	/* Bound to its PCI IDs where this version looks at boot. */
	if (windows8_or_later(in->major, in->minor) &&
	    (r = ddb_entries(sys, in->block, ids, out, err)) < 0)
		return r;
	for (int i = 0; i < WIN_PCI_IDS && !windows8_or_later(in->major, in->minor); i++) {
		{
			snprintf(key, sizeof(key), "%s\\Control\\CriticalDeviceDatabase\\PCI#%s", in->cs,
				 ids[i]);
			struct reg_val v[] = { RV_SZ("Service", in->block),
					       RV_SZ("ClassGUID", scsi_class_guid) };
			r = set_logged(sys, "HKLM\\SYSTEM", out, key, v, 2,
				       "critical device (boot driver for the PCI ID)", err);
		}
		if (r < 0)
			return r;
	}

	/* PnP looks for drivers of new devices along DevicePath. */
	const char *cv = "Microsoft\\Windows\\CurrentVersion";
	char *old = reg_get_str(soft, cv, "DevicePath"), *ours;
	if (!(out->old_devicepath = strdup(old ? old : "%SystemRoot%\\inf"))) {
		free(old);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	free(old);
	/* Converted before: what was there before is the value without ours. */
	if ((ours = strcasestr(out->old_devicepath, ";" WIN_DRIVER_DIR))) {
		size_t l = strlen(";" WIN_DRIVER_DIR);
		memmove(ours, ours + l, strlen(ours + l) + 1);
		out->devicepath_ours = true;
	} else if (!strcasestr(out->old_devicepath, WIN_DRIVER_DIR)) {
		out->devicepath_ours = true;
		if (asprintf(&out->new_devicepath, "%s;%s", out->old_devicepath, WIN_DRIVER_DIR) < 0) {
			out->new_devicepath = NULL;
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		}
		struct reg_val v[] = { RV_EXPAND("DevicePath", out->new_devicepath) };
		if ((r = set_logged(soft, "HKLM\\SOFTWARE", out, cv, v, 1,
				    in->firstboot ? "driver folder for PnP (restored at first boot)"
						  : "driver folder for PnP", err)) < 0)
			return r;
	}

	/* The first-boot step: a service that starts a detached cmd (the
	 * service control manager ends the process it started when it does not
	 * answer as a service; the detached one goes on). */
	if (in->firstboot) {
		snprintf(key, sizeof(key), "%s\\Services\\%s", in->cs, WIN_FIRSTBOOT_SERVICE);
		struct reg_val v[] = {
			RV_DWORD("Type", 0x10), RV_DWORD("Start", 2), RV_DWORD("ErrorControl", 0),
			RV_EXPAND("ImagePath",
				  "%SystemRoot%\\System32\\cmd.exe /c start \"imager-firstboot\" /min "
				  "%SystemRoot%\\System32\\cmd.exe /c \"" WIN_FIRSTBOOT_DIR "\\firstboot.cmd\""),
			RV_SZ("ObjectName", "LocalSystem"),
			RV_SZ("DisplayName", "imager first boot"),
			RV_SZ("Description", "Installs the virtio drivers once, then removes itself"),
		};
		if ((r = set_logged(sys, "HKLM\\SYSTEM", out, key, v, 7,
				    "first-boot service (deletes itself)", err)) < 0)
			return r;
	}
	return disable_old_platform(sys, in->cs, out, err);
}

void win_reg_out_free(struct win_reg_out *out)
{
	for (size_t i = 0; i < out->nlines; i++) {
		free(out->lines[i].hive);
		free(out->lines[i].key);
		free(out->lines[i].detail);
	}
	free(out->lines);
	free(out->old_devicepath);
	free(out->new_devicepath);
	memset(out, 0, sizeof(*out));
}

/* ---- the first-boot script ---- */

static void line(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(struct sbuf *b, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	sbuf_adds(b, buf);
	sbuf_adds(b, "\r\n");
}

/* A registry value for cmd's reg add /d "...": percent signs doubled (a
 * batch file expands them), quotes left out. */
static void batch_quote(const char *s, char *out, size_t len)
{
	size_t o = 0;
	for (; *s && o + 3 < len; s++) {
		if (*s == '"' || *s == '\r' || *s == '\n')
			continue;
		if (*s == '%')
			out[o++] = '%';
		out[o++] = *s;
	}
	out[o] = '\0';
}

void win_firstboot_script(const struct win_reg_in *in, const struct win_reg_out *out,
			  const char *agent, struct sbuf *b)
{
	const char *ids[WIN_PCI_IDS];
	char dp[1024];

	win_pci_ids(in->block, ids);
	line(b, "@echo off");
	line(b, "rem imager first boot: installs the virtio drivers imager copied while the");
	line(b, "rem disk was offline, then removes every trace of itself.");
	line(b, "setlocal EnableExtensions");
	line(b, "set \"DRV=%%SystemRoot%%\\Drivers\\VirtIO\"");
	line(b, "set \"HERE=%%SystemRoot%%\\imager-firstboot\"");
	line(b, "set \"LOG=%%SystemRoot%%\\Temp\\imager-firstboot.log\"");
	line(b, "set \"PNPUTIL=%%SystemRoot%%\\System32\\pnputil.exe\"");
	line(b, "echo imager first boot %%DATE%% %%TIME%%>>\"%%LOG%%\"");
	line(b, "set BOOTOK=0");
	line(b, "\"%%PNPUTIL%%\" -i -a \"%%DRV%%\\%s.inf\" >>\"%%LOG%%\" 2>&1 && set BOOTOK=1", in->block);
	line(b, "for %%%%f in (\"%%DRV%%\\*.inf\") do if /i not \"%%%%~nxf\"==\"%s.inf\" "
		"\"%%PNPUTIL%%\" -i -a \"%%%%f\" >>\"%%LOG%%\" 2>&1", in->block);
	if (agent)
		line(b, "if exist \"%%HERE%%\\%s\" msiexec.exe /i \"%%HERE%%\\%s\" /qn /norestart "
			"/l*v \"%%SystemRoot%%\\Temp\\imager-qemu-ga.log\"", agent, agent);
	line(b, "if \"%%BOOTOK%%\"==\"0\" (");
	line(b, "  echo %s did not install: the temporary boot entries and %%DRV%% stay>>\"%%LOG%%\"",
	     in->block);
	line(b, "  goto done");
	line(b, ")");
	if (windows8_or_later(in->major, in->minor)) {
		line(b, "rem the temporary package that bound %s to the disk at the first boot", in->block);
		line(b, "reg.exe delete \"HKLM\\SYSTEM\\DriverDatabase\\DriverPackages\\imager_%s.inf_tmp\" "
			"/f >>\"%%LOG%%\" 2>&1", in->block);
		line(b, "reg.exe delete \"HKLM\\SYSTEM\\DriverDatabase\\DriverInfFiles\\imager_%s.inf\" "
			"/f >>\"%%LOG%%\" 2>&1", in->block);
		for (int i = 0; i < WIN_PCI_IDS; i++)
			line(b, "reg.exe delete \"HKLM\\SYSTEM\\DriverDatabase\\DeviceIds\\PCI\\%s\" "
				"/v imager_%s.inf /f >>\"%%LOG%%\" 2>&1", ids[i], in->block);
	}
	if (out->devicepath_ours) {
		batch_quote(out->old_devicepath, dp, sizeof(dp));
		line(b, "reg.exe add \"HKLM\\SOFTWARE\\Microsoft\\Windows\\CurrentVersion\" /v DevicePath "
			"/t REG_EXPAND_SZ /d \"%s\" /f >>\"%%LOG%%\" 2>&1", dp);
	}
	line(b, "rd /s /q \"%%DRV%%\" >>\"%%LOG%%\" 2>&1");
	line(b, ":done");
	line(b, "sc.exe delete %s >>\"%%LOG%%\" 2>&1", WIN_FIRSTBOOT_SERVICE);
	line(b, "echo imager first boot done>>\"%%LOG%%\"");
	line(b, "(goto) 2>nul & rd /s /q \"%%HERE%%\"");
}

/* ---- the plan ---- */

/* The guest's own spelling of path (NTFS keeps case; Windows ignores it). */
static char *guest_path(guestfs_h *g, const char *path)
{
	char *p = guestfs_case_sensitive_path(g, path);
	return p ? p : strdup(path);
}

static const char *virtio_win_path(const struct conv_opts *o)
{
	static const char *const defaults[] = { "/usr/share/virtio-win/virtio-win.iso",
						"/usr/share/virtio-win" };
	const char *e;
	struct stat st;

	if (o->virtio_win && *o->virtio_win)
		return o->virtio_win;
	if ((e = getenv("VIRTIO_WIN")) && *e)
		return e;
	for (size_t i = 0; i < 2; i++)
		if (!stat(defaults[i], &st))
			return defaults[i];
	return NULL;
}

static void windows_free(struct conv_ctx *c)
{
	struct win_state *w = c->win;
	static const char *const names[] = { "SYSTEM", "SOFTWARE", "SYSTEM.new", "SOFTWARE.new" };
	char p[320];

	if (!w)
		return;
	if (w->tmp[0]) {
		for (size_t i = 0; i < 4; i++) {
			if (path_join(p, sizeof(p), w->tmp, names[i]) == 0)
				unlink(p);
		}
		rmdir(w->tmp);
	}
	vw_set_free(&w->set);
	if (w->have_src)
		vw_close(&w->src);
	free(w);
	c->win = NULL;
}

/* Plan mkdir of systemroot/rel (in the guest's spelling); *out gets the
 * path (malloc'd). */
static int plan_mkdir(struct conv_ctx *c, const char *rel, const char *detail, char **out)
{
	char gpath[512];

	FORWARD_ERR(path_join_err(gpath, sizeof(gpath), c->rep->systemroot, rel, c->err));
	if (!(*out = guest_path(c->g, gpath)))
		return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	return conv_act(c, ACT_MKDIR, *out, NULL, 0, NULL, 0, "mkdir", detail);
}

static int open_hive(struct conv_ctx *c, const char *guest, const char *local, hive_h **h)
{
	if (guestfs_download(c->g, guest, local) == -1)
		return im_errf(c->err, IM_EXIT_IO, -EIO, "reading the hive %s: %s", guest, gx_error(c->g));
	if (!(*h = hivex_open(local, HIVEX_OPEN_WRITE)))
		return im_errf(c->err, IM_EXIT_DAMAGED, -EUCLEAN,
			       "the registry hive %s is damaged (%s): nothing changed", guest,
			       strerror(errno));
	return 0;
}

static int plan_upload(struct conv_ctx *c, const char *local, const char *guest, const char *action,
		       const char *detail)
{
	char *d = strdup(local);
	if (!d)
		return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	return conv_act(c, ACT_UPLOAD, guest, d, strlen(d), NULL, 0, action, detail);
}

/* Commit the edited hive to a new local file and plan its upload, followed
 * by the report lines of its changes. */
static int plan_hive(struct conv_ctx *c, hive_h *h, const char *guest, const char *hive,
		     const struct win_reg_out *out)
{
	char local[320], detail[160];
	size_t n = 0;

	for (size_t i = 0; i < out->nlines; i++)
		n += !strcmp(out->lines[i].hive, hive);
	if (!n)
		return 0;
	if (str_printf(local, sizeof(local), "%s/%s.new", c->win->tmp, strrchr(hive, '\\') + 1) < 0)
		return im_errf(c->err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: path too long", c->win->tmp);
	if (hivex_commit(h, local, 0) == -1)
		return im_errf(c->err, IM_EXIT_IO, -errno, "writing the edited hive %s: %s", local,
			       strerror(errno));
	snprintf(detail, sizeof(detail), "%s: %zu key%s changed (below)", hive, n, n == 1 ? "" : "s");
	FORWARD_ERR(plan_upload(c, local, guest, "edit", detail));
	for (size_t i = 0; i < out->nlines; i++) {
		char key[600];
		if (strcmp(out->lines[i].hive, hive))
			continue;
		snprintf(key, sizeof(key), "%s\\%s", hive, out->lines[i].key);
		if (conv_change(c, key, "set", "%s", out->lines[i].detail) < 0)
			return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	return 0;
}

/* Server or client: InstallationType as libguestfs reads it, else the
 * product name ("Windows Server 2019 Standard"). */
static bool windows_server(const struct conv_report *rep)
{
	if (!strcmp(rep->variant, "Client"))
		return false;
	if (!strncmp(rep->variant, "Server", 6))
		return true;
	return strstr(rep->product, "Server") != NULL;
}

/* One Windows plan, stage by stage (inspect, hives, drivers, files, first
 * boot, registry): what the stages share. */
struct win_plan {
	struct conv_ctx *c;
	const char *root;
	const char *block;           /* "viostor" or "vioscsi" */
	const char *vwpath;          /* the virtio-win folder or ISO */
	char *syshive, *softhive;    /* the hives' paths in the guest */
	hive_h *sys, *soft;          /* their local copies, open */
	char *drvdir, *fbdir;        /* the driver and first-boot folders, in the guest */
	struct win_reg_in in;
	struct win_reg_out out;
};

/* A hibernated Windows (hibernation, or Fast Startup's hybrid shutdown)
 * resumes its memory image over whatever changed on the disk, and ntfs-3g
 * will not write to it. */
static bool hibernated(guestfs_h *g)
{
	size_t n = 0;
	char *head;
	bool yes;

	if (!gx_is_file(g, "/hiberfil.sys"))
		return false;
	head = guestfs_pread(g, "/hiberfil.sys", 4, 0, &n);
	yes = head && n == 4 && !strncasecmp(head, "hibr", 4);
	free(head);
	return yes;
}

/* What inspection knows, and the refusals that need nothing more. */
static int win_inspect(struct win_plan *wp)
{
	struct conv_ctx *c = wp->c;
	struct conv_report *rep = c->rep;

	conv_copy_str(rep->systemroot, sizeof(rep->systemroot),
		      guestfs_inspect_get_windows_systemroot(c->g, wp->root));
	conv_copy_str(rep->control_set, sizeof(rep->control_set),
		      guestfs_inspect_get_windows_current_control_set(c->g, wp->root));
	conv_copy_str(rep->variant, sizeof(rep->variant),
		      guestfs_inspect_get_product_variant(c->g, wp->root));
	conv_find_firmware(c);
	wp->syshive = guestfs_inspect_get_windows_system_hive(c->g, wp->root);
	wp->softhive = guestfs_inspect_get_windows_software_hive(c->g, wp->root);
	if (!rep->systemroot[0] || !rep->control_set[0] || !wp->syshive || !wp->softhive)
		return im_errf(c->err, IM_EXIT_DAMAGED, -EUCLEAN,
			       "Windows inspection found no %s: its registry is missing or damaged; "
			       "nothing changed",
			       !rep->systemroot[0] ? "system root" : !rep->control_set[0]
				   ? "current control set (SYSTEM\\Select)" : "SYSTEM or SOFTWARE hive");
	if (hibernated(c->g))
		return im_errf(c->err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s is hibernated (hiberfil.sys holds a memory image; Fast Startup "
			       "does this on shutdown): start it, then shut it down fully "
			       "(shutdown /s /t 0, or turn Fast Startup off) and image it again; "
			       "nothing changed", rep->product);
	if (!wp->vwpath)
		return im_errf(c->err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s needs the virtio-win drivers: give --virtio-win PATH (a virtio-win "
			       "folder or ISO) or set VIRTIO_WIN; nothing changed", rep->product);
	return 0;
}

/* The hives, copied here and opened; the build and edition from SOFTWARE. */
static int win_open_hives(struct win_plan *wp)
{
	struct conv_ctx *c = wp->c;
	struct win_state *w = c->win;
	const char *cv = "Microsoft\\Windows NT\\CurrentVersion";
	char local[320], *s;
	int r = tmp_dir_make("hives", w->tmp, sizeof(w->tmp), c->err);

	if (r < 0) {
		w->tmp[0] = '\0';
		return r;
	}
	snprintf(local, sizeof(local), "%s/SOFTWARE", w->tmp);
	FORWARD_ERR(open_hive(c, wp->softhive, local, &wp->soft));
	snprintf(local, sizeof(local), "%s/SYSTEM", w->tmp);
	FORWARD_ERR(open_hive(c, wp->syshive, local, &wp->sys));
	s = reg_get_str(wp->soft, cv, "CurrentBuildNumber");
	if (!s)
		s = reg_get_str(wp->soft, cv, "CurrentBuild");
	c->rep->build = s ? atoi(s) : 0;
	if (c->rep->build < 0 || c->rep->build > 999999)
		c->rep->build = 0;
	free(s);
	conv_copy_str(c->rep->edition, sizeof(c->rep->edition), reg_get_str(wp->soft, cv, "EditionID"));
	return 0;
}

/* The drivers: virtio-win opened, the version's folder picked, fetched. */
static int win_pick_drivers(struct win_plan *wp)
{
	struct conv_ctx *c = wp->c;
	struct conv_report *rep = c->rep;
	struct win_state *w = c->win;

	FORWARD_ERR(vw_open(wp->vwpath, &w->src, c->err));
	w->have_src = true;
	snprintf(rep->virtio_win, sizeof(rep->virtio_win), "%s%s%s%s", wp->vwpath,
		 w->src.label[0] ? " (" : "", w->src.label, w->src.label[0] ? ")" : "");
	FORWARD_ERR(vw_select(w->src.paths, w->src.npaths, wp->vwpath, rep->arch, rep->major,
			      rep->minor, windows_server(rep), rep->build, wp->block, &w->set, c->err));
	FORWARD_ERR(vw_fetch(&w->src, &w->set, c->err));
	snprintf(rep->drivers_os, sizeof(rep->drivers_os), "%s", w->set.os);
	snprintf(rep->drivers, sizeof(rep->drivers), "%s", w->set.drivers);
	rep->virtio_net = vw_set_find(&w->set, "netkvm.inf") != NULL;
	rep->firstboot = rep->major >= 6;
	rep->guest_agent = rep->firstboot && w->set.agent.local;
	if (w->set.fallback)
		conv_change(c, "", "note", "virtio-win has no %s folder for this Windows (build %d): "
			    "using the %s drivers of the same NT 10.0 kernel", rep->variant,
			    rep->build, w->set.os);
	if (!rep->firstboot)
		conv_change(c, "", "note", "Windows before Vista has no pnputil: Plug and Play "
			    "installs the other drivers from %s when it finds their devices",
			    WIN_DRIVER_DIR);
	return 0;
}

/* The files: the boot driver, then every package into the driver folder. */
static int win_plan_drivers(struct win_plan *wp)
{
	struct conv_ctx *c = wp->c;
	struct win_state *w = c->win;
	char gpath[512], name[64], *p;
	int r;

	snprintf(gpath, sizeof(gpath), "%s/System32/drivers/%s.sys", c->rep->systemroot, wp->block);
	p = guest_path(c->g, gpath);
	snprintf(name, sizeof(name), "%s.sys", wp->block);
	r = p ? plan_upload(c, vw_set_find(&w->set, name)->local, p, "copy",
			    "boot-critical storage driver from virtio-win")
	      : im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	free(p);
	FORWARD_ERR(r);
	FORWARD_ERR(plan_mkdir(c, "Drivers/VirtIO", "driver folder (named in DevicePath)", &wp->drvdir));
	for (size_t i = 0; i < w->set.nfiles; i++) {
		char det[600];
		FORWARD_ERR(path_join_err(gpath, sizeof(gpath), wp->drvdir, w->set.files[i].name,
					  c->err));
		snprintf(det, sizeof(det), "from virtio-win %s", w->set.files[i].rel);
		FORWARD_ERR(plan_upload(c, w->set.files[i].local, gpath, "copy", det));
	}
	return 0;
}

/* The first boot (Vista on): its folder, the agent installer, the script. */
static int win_plan_firstboot(struct win_plan *wp)
{
	struct conv_ctx *c = wp->c;
	struct win_state *w = c->win;
	struct sbuf script = { 0 };
	char gpath[512];

	if (!c->rep->firstboot)
		return 0;
	FORWARD_ERR(plan_mkdir(c, "imager-firstboot", "first-boot folder (removed at first boot)",
			       &wp->fbdir));
	if (c->rep->guest_agent) {
		FORWARD_ERR(path_join_err(gpath, sizeof(gpath), wp->fbdir, w->set.agent.name, c->err));
		FORWARD_ERR(plan_upload(c, w->set.agent.local, gpath, "copy",
					"guest agent installer, run at first boot"));
	}
	win_firstboot_script(&wp->in, &wp->out, c->rep->guest_agent ? w->set.agent.name : NULL,
			     &script);
	snprintf(gpath, sizeof(gpath), "%s/firstboot.cmd", wp->fbdir);
	if (script.oom) {
		sbuf_free(&script);
		return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	return conv_act(c, ACT_WRITE, gpath, script.p, script.len, NULL, 0, "create",
			"first-boot script: pnputil for every driver, then cleans up");
}

static void win_plan_free(struct win_plan *wp)
{
	if (wp->sys)
		hivex_close(wp->sys);
	if (wp->soft)
		hivex_close(wp->soft);
	win_reg_out_free(&wp->out);
	free(wp->syshive);
	free(wp->softhive);
	free(wp->drvdir);
	free(wp->fbdir);
}

/* The stages in order.  Files are planned before the registry, and of the
 * hives SOFTWARE before SYSTEM (what boots): applied in this order, a
 * failure while copying leaves the registry as it was. */
static int windows_plan(struct conv_ctx *c, const char *root)
{
	struct conv_report *rep = c->rep;
	struct win_plan wp = {
		.c = c, .root = root, .vwpath = virtio_win_path(c->o),
		.block = c->o->block == CONV_BLOCK_VIRTIO_SCSI ? "vioscsi" : "viostor",
	};
	int r;

	if (!(c->win = calloc(1, sizeof(*c->win))))
		return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	if ((r = win_inspect(&wp)) < 0 || (r = win_open_hives(&wp)) < 0 ||
	    (r = win_pick_drivers(&wp)) < 0)
		goto out;
	wp.in = (struct win_reg_in){ .cs = rep->control_set, .major = rep->major,
				     .minor = rep->minor, .block = wp.block,
				     .firstboot = rep->firstboot };
	if ((r = win_registry_plan(wp.sys, wp.soft, &wp.in, &wp.out, c->err)) < 0 ||
	    (r = win_plan_drivers(&wp)) < 0 || (r = win_plan_firstboot(&wp)) < 0 ||
	    (r = plan_hive(c, wp.soft, wp.softhive, "HKLM\\SOFTWARE", &wp.out)) < 0 ||
	    (r = plan_hive(c, wp.sys, wp.syshive, "HKLM\\SYSTEM", &wp.out)) < 0)
		goto out;
	r = 0;
out:
	win_plan_free(&wp);
	return r;
}

static bool windows_matches(const struct conv_report *rep)
{
	return !strcmp(rep->os_type, "windows");
}

const struct converter conv_windows = {
	.name = "windows",
	.matches = windows_matches,
	.plan = windows_plan,
	.apply = NULL,
	.free = windows_free,
};
