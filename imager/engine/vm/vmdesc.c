/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The descriptions of virtual machines other hypervisors write: OVF
 * (libxml2; VMware's .vmx is vmx.c's), the helpers both readers share,
 * and the files a description names, resolved inside its folder.
 * Contract: include/imager/vmsource.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "imager/vmsource.h"
#include "util.h"
#include "vmsource-int.h"

/* ---- shared helpers ---- */

int vm_str_field(char *out, size_t outlen, const char *s, size_t len, const char *what,
		 struct im_err *err)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "%s holds a control character (byte %zu)", what, i);
	if (len >= outlen)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "%s is %zu bytes long, more than the %zu taken", what, len, outlen - 1);
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

int vm_parse_u64(const char *s, size_t len, uint64_t *v)
{
	uint64_t n = 0;

	if (!len)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (n > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return -EINVAL;
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	*v = n;
	return 0;
}

int vm_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int vm_mac_norm(const char *s, char out[18])
{
	unsigned char b[6];
	size_t len = strlen(s), i = 0;
	bool sep = len == 17;

	if (len != 17 && len != 12)
		return -EINVAL;
	for (int k = 0; k < 6; k++) {
		int hi = vm_hexval((unsigned char)s[i]), lo = vm_hexval((unsigned char)s[i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		b[k] = (unsigned char)(hi << 4 | lo);
		i += 2;
		if (sep && k < 5) {
			if (s[i] != ':' && s[i] != '-')
				return -EINVAL;
			i++;
		}
	}
	if (b[0] & 1)
		return -EINVAL;  /* multicast */
	if (!(b[0] | b[1] | b[2] | b[3] | b[4] | b[5]))
		return -EINVAL;
	snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
	return 0;
}

int vm_dirname(const char *path, char *out, size_t outlen)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return str_copy(out, outlen, ".");
	if (slash == path)
		return str_copy(out, outlen, "/");
	if ((size_t)(slash - path) >= outlen)
		return -ENAMETOOLONG;
	memcpy(out, path, (size_t)(slash - path));
	out[slash - path] = '\0';
	return 0;
}

int vm_open_file(const char *path, uint64_t *size, struct im_err *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return im_errf(err, IM_EXIT_SOURCE, errno == ENOENT ? -ENOENT : -errno, "%s: %s", path,
			       strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s is not a regular file", path);
	}
	*size = (uint64_t)st.st_size;
	return fd;
}

const char *vm_basename(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

int vm_check_limits(struct vm_desc *d, const char *src, struct im_err *err)
{
	if (d->memory_mib && (d->memory_mib < VM_MIN_MEMORY_MIB || d->memory_mib > VM_MAX_MEMORY_MIB))
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "%s: memory of %llu MiB is outside 16 MiB..16 TiB", src,
			       (unsigned long long)d->memory_mib);
	if (!d->ndisks)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: the virtual machine has no disk", src);
	return 0;
}

/* ---- files named by a description ---- */

static bool inside(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	if (!strcmp(dir, "/"))
		return true;
	return !strncmp(path, dir, n) && path[n] == '/';
}

int vm_file_in_dir(const char *dir, const char *name, char *out, size_t outlen,
		   struct im_err *err)
{
	static const char vmfs[] = "/vmfs/volumes/";
	char rdir[PATH_MAX], joined[PATH_MAX], real[PATH_MAX];
	const char *rel = name;
	struct stat st;
	size_t len = strlen(name);

	if (!len)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "an empty file name in %s", dir);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "a file name with a control character in %s", dir);
	if (len >= PATH_MAX)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "a file name of %zu bytes in %s", len, dir);
	if (name[0] == '/') {
		if (strncmp(name, vmfs, sizeof(vmfs) - 1))
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "%s names %s, an absolute path outside %s", dir, name, dir);
		rel = vm_basename(name);
	}
	/* no ".." component, no empty one */
	for (const char *p = rel;;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (!n || (n == 2 && !strncmp(p, "..", 2)) || (n == 1 && *p == '.' && !e))
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s names %s, outside %s", dir,
				       name, dir);
		if (!e)
			break;
		p = e + 1;
	}
	if (!realpath(dir, rdir))
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", dir, strerror(errno));
	if (str_printf(joined, sizeof(joined), "%s/%s", rdir, rel) < 0)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: the path of %s is too long", dir, name);
	if (!realpath(joined, real)) {
		int e = errno;
		return im_errf(err, IM_EXIT_SOURCE, e == ENOENT || e == ENOTDIR ? -ENOENT : -e,
			       "%s, named by the description, is not in %s: %s", name, dir, strerror(e));
	}
	if (!inside(rdir, real))
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s names %s, outside %s (a link to %s)",
			       dir, name, dir, real);
	if (stat(real, &st) < 0)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", real, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s (%s in %s) is not a regular file", name,
			       real, dir);
	if (str_copy(out, outlen, real) < 0)
		return im_errf(err, IM_EXIT_SOURCE, -ENAMETOOLONG, "%s: the path is too long", real);
	return 0;
}

/* ---- OVF ---- */

#define OVF_MAX_ITEMS 1024

static bool is_el(const xmlNode *n, const char *local)
{
	return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, local);
}

static xmlNode *child(const xmlNode *n, const char *local)
{
	for (xmlNode *c = n ? n->children : NULL; c; c = c->next)
		if (is_el(c, local))
			return c;
	return NULL;
}

/* The text of n (entity references are refused before: no DTD), blanks
 * around it dropped, into out.  1 found, 0 absent (n NULL), or -errno. */
static int node_text(xmlNode *n, char *out, size_t outlen, const char *what, struct im_err *err)
{
	xmlChar *t;
	const char *s, *e;
	int r;

	out[0] = '\0';
	if (!n)
		return 0;
	t = xmlNodeGetContent(n);
	if (!t)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	s = (const char *)t;
	while (*s && isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	r = vm_str_field(out, outlen, s, (size_t)(e - s), what, err);
	xmlFree(t);
	return r < 0 ? r : 1;
}

static int child_text(xmlNode *n, const char *local, char *out, size_t outlen, struct im_err *err)
{
	return node_text(child(n, local), out, outlen, local, err);
}

/* An attribute by its local name (whatever its namespace: OVF 1.0 and 2.0
 * differ), like node_text. */
static int attr_text(xmlNode *n, const char *local, char *out, size_t outlen, struct im_err *err)
{
	out[0] = '\0';
	for (xmlAttr *a = n ? n->properties : NULL; a; a = a->next) {
		if (strcmp((const char *)a->name, local))
			continue;
		xmlChar *t = xmlNodeListGetString(n->doc, a->children, 1);
		int r;
		if (!t)
			return 1;  /* empty */
		r = vm_str_field(out, outlen, (const char *)t, strlen((const char *)t), local, err);
		xmlFree(t);
		return r < 0 ? r : 1;
	}
	return 0;
}

/* Is n's attribute `local` (any namespace) exactly value? */
static bool attr_is(xmlNode *n, const char *local, const char *value)
{
	for (xmlAttr *a = n->properties; a; a = a->next) {
		xmlChar *t;
		bool eq;
		if (strcmp((const char *)a->name, local))
			continue;
		t = xmlNodeListGetString(n->doc, a->children, 1);
		eq = t && !strcmp((const char *)t, value);
		xmlFree(t);
		return eq;
	}
	return false;
}

/* "byte * 2^20", "MegaBytes", "MB"...: the shift, or -1. */
static int unit_shift(const char *u)
{
	static const struct { const char *name; int shift; } names[] = {
		{ "byte", 0 }, { "bytes", 0 }, { "KB", 10 }, { "KiB", 10 }, { "KiloBytes", 10 },
		{ "MB", 20 }, { "MiB", 20 }, { "MegaBytes", 20 }, { "GB", 30 }, { "GiB", 30 },
		{ "GigaBytes", 30 }, { "TB", 40 }, { "TiB", 40 }, { "TeraBytes", 40 },
	};
	char c[64];
	size_t j = 0;

	for (size_t i = 0; u[i] && j < sizeof(c) - 1; i++)
		if (u[i] != ' ')
			c[j++] = u[i];
	c[j] = '\0';
	if (!strncasecmp(c, "byte*2^", 7)) {
		uint64_t s;
		if (vm_parse_u64(c + 7, strlen(c + 7), &s) < 0 || s > 40)
			return -1;
		return (int)s;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(c, names[i].name))
			return names[i].shift;
	return -1;
}

/* quantity * 2^shift bytes, overflow refused. */
static int scaled(uint64_t q, int shift, uint64_t *bytes)
{
	if (shift >= 64 || (q && q > (UINT64_MAX >> shift)))
		return -EOVERFLOW;
	*bytes = q << shift;
	return 0;
}

struct ovf_ctl {              /* a controller item */
	char id[64];
	char kind[16];
	unsigned bus;
};

static int item_num(xmlNode *it, const char *field, uint64_t *v, bool *present, struct im_err *err)
{
	char s[64];
	int r = child_text(it, field, s, sizeof(s), err);

	*present = false;
	if (r <= 0)
		return r;
	if (vm_parse_u64(s, strlen(s), v) < 0)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: %s \"%s\" is not a number", field, s);
	*present = true;
	return 0;
}

static int ovf_memory(xmlNode *it, struct vm_desc *d, struct im_err *err)
{
	char units[64], q[64];
	uint64_t n, bytes;
	int shift = 20, r;

	FORWARD_ERR(child_text(it, "VirtualQuantity", q, sizeof(q), err));
	if (vm_parse_u64(q, strlen(q), &n) < 0)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: memory \"%s\" is not a number", q);
	r = child_text(it, "AllocationUnits", units, sizeof(units), err);
	if (r < 0)
		return r;
	if (r > 0 && units[0] && (shift = unit_shift(units)) < 0)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "OVF: memory in unknown units \"%s\"", units);
	if (scaled(n, shift, &bytes) < 0 || bytes / (1ull << 20) > VM_MAX_MEMORY_MIB ||
	    bytes / (1ull << 20) < VM_MIN_MEMORY_MIB)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "OVF: memory of %s %s is outside 16 MiB..16 TiB", q,
			       r > 0 && units[0] ? units : "MiB");
	d->memory_mib = bytes >> 20;
	return 0;
}

/* The first child element `el` of parent whose attribute `key` is value:
 * 1 (*found set), 0 (none), or -errno. */
static int find_by_attr(xmlNode *parent, const char *el, const char *key, const char *value,
			xmlNode **found, struct im_err *err)
{
	char v[128];

	*found = NULL;
	for (xmlNode *c = parent ? parent->children : NULL; c; c = c->next) {
		if (!is_el(c, el))
			continue;
		FORWARD_ERR(attr_text(c, key, v, sizeof(v), err));
		if (!strcmp(v, value)) {
			*found = c;
			return 1;
		}
	}
	return 0;
}

static int ovf_disk_file(xmlNode *env, const char *host, struct vm_disk *k, struct im_err *err)
{
	char ref[128], v[256];
	const char *disk_id = host;
	xmlNode *disk, *file;

	if (!strncmp(disk_id, "ovf:", 4))
		disk_id += 4;
	if (!strncmp(disk_id, "//disk/", 7))
		disk_id++;  /* "ovf://disk/ID", as some writers spell it */
	if (strncmp(disk_id, "/disk/", 6))
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "OVF: a disk's HostResource \"%s\" names no disk (ovf:/disk/ID)", host);
	disk_id += 6;
	FORWARD_ERR(find_by_attr(child(env, "DiskSection"), "Disk", "diskId", disk_id, &disk, err));
	if (!disk)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: disk \"%s\" is not in the DiskSection",
			       disk_id);
	FORWARD_ERR(attr_text(disk, "fileRef", ref, sizeof(ref), err));
	if (!ref[0])
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "OVF: disk \"%s\" has no file (a blank disk is not a source)", disk_id);
	FORWARD_ERR(attr_text(disk, "capacity", v, sizeof(v), err));
	if (v[0]) {
		char u[64];
		uint64_t n;
		int shift = 0;
		if (vm_parse_u64(v, strlen(v), &n) < 0)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "OVF: disk \"%s\": capacity \"%s\" is not a number", disk_id, v);
		FORWARD_ERR(attr_text(disk, "capacityAllocationUnits", u, sizeof(u), err));
		if (u[0] && (shift = unit_shift(u)) < 0)
			return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				       "OVF: disk \"%s\": capacity in unknown units \"%s\"", disk_id, u);
		if (scaled(n, shift, &k->capacity) < 0)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "OVF: disk \"%s\": capacity %s %s is too large", disk_id, v, u);
	}
	FORWARD_ERR(find_by_attr(child(env, "References"), "File", "id", ref, &file, err));
	if (!file)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "OVF: disk \"%s\" names file \"%s\", which References does not list",
			       disk_id, ref);
	FORWARD_ERR(attr_text(file, "href", k->file, sizeof(k->file), err));
	if (!k->file[0])
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: file \"%s\" has no ovf:href", ref);
	FORWARD_ERR(attr_text(file, "compression", v, sizeof(v), err));
	if (!strcmp(v, "gzip"))
		k->gzip = true;
	else if (v[0] && strcmp(v, "identity"))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "OVF: %s is compressed with \"%s\"",
			       k->file, v);
	return 0;
}

static bool is_item(const xmlNode *n)
{
	return is_el(n, "Item") || is_el(n, "StorageItem") || is_el(n, "EthernetPortItem");
}

/* VirtualBox's own section: firmware, and MACs for the NICs that lack one. */
static int ovf_vbox(xmlNode *vs, struct vm_desc *d, struct im_err *err)
{
	xmlNode *m = child(vs, "Machine"), *hw, *fw, *net;
	char v[64];
	size_t nic = 0;
	long last = -1;

	if (!m)
		return 0;
	hw = child(m, "Hardware");
	fw = child(hw, "Firmware");
	if (!fw)
		fw = child(child(hw, "Platform"), "Firmware");
	if (fw) {
		FORWARD_ERR(attr_text(fw, "type", v, sizeof(v), err));
		if (!strncasecmp(v, "EFI", 3))
			d->firmware = VM_FW_EFI;
		else if (!strcasecmp(v, "BIOS") && d->firmware == VM_FW_UNKNOWN)
			d->firmware = VM_FW_BIOS;
	} else if (hw && d->firmware == VM_FW_UNKNOWN) {
		d->firmware = VM_FW_BIOS;  /* VirtualBox's default */
	}
	if (!d->guest_os[0])
		FORWARD_ERR(attr_text(m, "OSType", d->guest_os, sizeof(d->guest_os), err));
	net = child(hw, "Network");
	/* enabled adapters in slot order (VirtualBox writes them in it) */
	for (xmlNode *a = net ? net->children : NULL; a; a = a->next) {
		char mac[32];
		uint64_t slot;
		if (!is_el(a, "Adapter"))
			continue;
		FORWARD_ERR(attr_text(a, "enabled", v, sizeof(v), err));
		if (strcasecmp(v, "true"))
			continue;
		FORWARD_ERR(attr_text(a, "slot", v, sizeof(v), err));
		if (vm_parse_u64(v, strlen(v), &slot) < 0 || slot > 64 || (long)slot <= last)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "OVF: VirtualBox adapter slot \"%s\" is not a number after %ld", v, last);
		last = (long)slot;
		FORWARD_ERR(attr_text(a, "MACAddress", mac, sizeof(mac), err));
		if (nic >= d->nnics)
			break;
		if (mac[0] && !d->nics[nic].mac[0] && vm_mac_norm(mac, d->nics[nic].mac) < 0)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
				       "OVF: VirtualBox adapter %llu: MAC address \"%s\" is not valid",
				       (unsigned long long)slot, mac);
		nic++;
	}
	return 0;
}

/* The one VirtualSystem of the envelope. */
static int ovf_system(xmlNode *env, xmlNode **out, struct im_err *err)
{
	xmlNode *vs = NULL;

	for (xmlNode *c = env->children; c; c = c->next) {
		if (is_el(c, "VirtualSystemCollection"))
			return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				       "OVF: a collection of virtual systems (one machine at a time)");
		if (!is_el(c, "VirtualSystem"))
			continue;
		if (vs)
			return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				       "OVF: several virtual systems (one machine at a time)");
		vs = c;
	}
	if (!vs)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: no VirtualSystem");
	*out = vs;
	return 0;
}

/* The machine's name and guest OS. */
static int ovf_names(xmlNode *vs, struct vm_desc *d, struct im_err *err)
{
	xmlNode *os = child(vs, "OperatingSystemSection");

	FORWARD_ERR(child_text(vs, "Name", d->name, sizeof(d->name), err));
	if (!d->name[0])
		FORWARD_ERR(attr_text(vs, "id", d->name, sizeof(d->name), err));
	if (os) {
		FORWARD_ERR(attr_text(os, "osType", d->guest_os, sizeof(d->guest_os), err));
		if (!d->guest_os[0])
			FORWARD_ERR(child_text(os, "OSType", d->guest_os, sizeof(d->guest_os), err));
		if (!d->guest_os[0])
			FORWARD_ERR(child_text(os, "Description", d->guest_os, sizeof(d->guest_os), err));
		if (!d->guest_os[0])
			FORWARD_ERR(attr_text(os, "id", d->guest_os, sizeof(d->guest_os), err));
	}
	return 0;
}

/* The disk controllers (IDE 5, SCSI 6, SATA or NVMe 20), first: a disk
 * item may come before its controller. */
static int ovf_controllers(xmlNode *hw, struct ovf_ctl *ctl, size_t max, size_t *nctl,
			   struct im_err *err)
{
	size_t nitems = 0;
	char v[256];

	*nctl = 0;
	for (xmlNode *it = hw->children; it; it = it->next) {
		uint64_t type, bus = 0;
		bool has, hasbus;
		const char *kind;
		if (!is_item(it))
			continue;
		if (++nitems > OVF_MAX_ITEMS)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: more than %d hardware items",
				       OVF_MAX_ITEMS);
		FORWARD_ERR(item_num(it, "ResourceType", &type, &has, err));
		if (!has || (type != 5 && type != 6 && type != 20))
			continue;
		FORWARD_ERR(child_text(it, "ResourceSubType", v, sizeof(v), err));
		kind = type == 5 ? "ide" : type == 6 ? "scsi" : strcasestr(v, "nvme") ? "nvme" : "sata";
		FORWARD_ERR(item_num(it, "Address", &bus, &hasbus, err));
		if (*nctl == max)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: more than %zu disk controllers",
				       max);
		if (bus > 64)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: controller bus %llu",
				       (unsigned long long)bus);
		FORWARD_ERR(child_text(it, "InstanceID", ctl[*nctl].id, sizeof(ctl[*nctl].id), err));
		snprintf(ctl[*nctl].kind, sizeof(ctl[*nctl].kind), "%s", kind);
		ctl[*nctl].bus = (unsigned)bus;
		(*nctl)++;
	}
	return 0;
}

/* VMware's <vmw:Config key="firmware"> and its secure boot. */
static int ovf_config(xmlNode *it, struct vm_desc *d, struct im_err *err)
{
	char val[64];
	bool fw = attr_is(it, "key", "firmware"),
	     sb = attr_is(it, "key", "bootOptions.efiSecureBootEnabled");

	/* (the values of other keys are not read: they may be long) */
	if (fw || sb)
		FORWARD_ERR(attr_text(it, "value", val, sizeof(val), err));
	if (fw) {
		if (!strcasecmp(val, "efi"))
			d->firmware = VM_FW_EFI;
		else if (!strcasecmp(val, "bios"))
			d->firmware = VM_FW_BIOS;
		else
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: firmware \"%s\" (efi or bios)",
				       val);
	} else if (sb) {
		d->secure_boot = !strcasecmp(val, "true");
	}
	return 0;
}

static int ovf_nic(xmlNode *it, struct vm_desc *d, struct im_err *err)
{
	struct vm_nic *nic;
	char mac[64];

	if (d->nnics == VM_MAX_NICS)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: more than %d network adapters",
			       VM_MAX_NICS);
	nic = &d->nics[d->nnics];
	FORWARD_ERR(child_text(it, "ResourceSubType", nic->model, sizeof(nic->model), err));
	FORWARD_ERR(child_text(it, "Address", mac, sizeof(mac), err));
	if (mac[0] && vm_mac_norm(mac, nic->mac) < 0)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "OVF: network adapter %zu: MAC address \"%s\" is not valid", d->nnics + 1,
			       mac);
	d->nnics++;
	return 0;
}

static int ovf_disk(xmlNode *env, xmlNode *it, const struct ovf_ctl *ctl, size_t nctl,
		    struct vm_desc *d, struct im_err *err)
{
	struct vm_disk *k;
	char host[256], parent[64];
	uint64_t n;
	bool has;

	if (d->ndisks == VM_MAX_DISKS)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: more than %d disks", VM_MAX_DISKS);
	k = &d->disks[d->ndisks];
	FORWARD_ERR(child_text(it, "HostResource", host, sizeof(host), err));
	if (!host[0])
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "OVF: disk %zu has no HostResource (a blank disk is not a source)",
			       d->ndisks + 1);
	FORWARD_ERR(ovf_disk_file(env, host, k, err));
	FORWARD_ERR(child_text(it, "Parent", parent, sizeof(parent), err));
	for (size_t c = 0; parent[0] && c < nctl; c++)
		if (!strcmp(ctl[c].id, parent)) {
			snprintf(k->controller, sizeof(k->controller), "%s", ctl[c].kind);
			k->bus = ctl[c].bus;
		}
	if (parent[0] && !k->controller[0])
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "OVF: disk %s's Parent %s is no disk controller", k->file, parent);
	FORWARD_ERR(item_num(it, "AddressOnParent", &n, &has, err));
	if (has && n > 255)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "OVF: disk %s at address %llu on its controller", k->file,
			       (unsigned long long)n);
	k->unit = has ? (unsigned)n : 0;
	d->ndisks++;
	return 0;
}

static int ovf_walk(xmlNode *env, struct vm_desc *d, struct im_err *err)
{
	xmlNode *vs = NULL, *hw;
	struct ovf_ctl ctl[64];
	size_t nctl;

	FORWARD_ERR(ovf_system(env, &vs, err));
	FORWARD_ERR(ovf_names(vs, d, err));
	hw = child(vs, "VirtualHardwareSection");
	if (!hw)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: no VirtualHardwareSection");
	FORWARD_ERR(ovf_controllers(hw, ctl, sizeof(ctl) / sizeof(ctl[0]), &nctl, err));
	for (xmlNode *it = hw->children; it; it = it->next) {
		uint64_t type, n;
		bool has;
		if (is_el(it, "Config") || is_el(it, "ExtraConfig")) {
			FORWARD_ERR(ovf_config(it, d, err));
			continue;
		}
		if (!is_item(it))
			continue;
		FORWARD_ERR(item_num(it, "ResourceType", &type, &has, err));
		if (!has)
			continue;
		if (type == 3) {
			FORWARD_ERR(item_num(it, "VirtualQuantity", &n, &has, err));
			if (!has || n < 1 || n > VM_MAX_VCPUS)
				return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
					       "OVF: %llu virtual CPUs (1..%u)", has ? (unsigned long long)n : 0ull,
					       VM_MAX_VCPUS);
			d->vcpus = (unsigned)n;
		} else if (type == 4) {
			FORWARD_ERR(ovf_memory(it, d, err));
		} else if (type == 10) {
			FORWARD_ERR(ovf_nic(it, d, err));
		} else if (type == 17) {
			FORWARD_ERR(ovf_disk(env, it, ctl, nctl, d, err));
		}
	}
	return ovf_vbox(vs, d, err);
}

int vm_ovf_parse(const char *xml, size_t len, struct vm_desc *d, struct im_err *err)
{
	xmlParserCtxtPtr ctx;
	xmlDocPtr doc;
	xmlNode *root;
	int r;

	memset(d, 0, sizeof(*d));
	if (len > VM_MAX_DESC)
		return im_errf(err, IM_EXIT_SOURCE, -EFBIG, "OVF: %zu bytes, more than %u", len,
			       VM_MAX_DESC);
	xmlInitParser();
	ctx = xmlNewParserCtxt();
	if (!ctx)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	/* no network, no entity substitution, no DTD loading (none of
	 * XML_PARSE_NOENT, DTDLOAD, DTDATTR, XINCLUDE), nothing printed */
	doc = xmlCtxtReadMemory(ctx, xml, (int)len, "descriptor.ovf", NULL,
				XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
				XML_PARSE_NOCDATA);
	if (!doc) {
		const xmlError *e = xmlCtxtGetLastError(ctx);
		char msg[200] = "";
		if (e && e->message) {
			size_t i;
			for (i = 0; e->message[i] && e->message[i] != '\n' && i < sizeof(msg) - 1; i++)
				msg[i] = (unsigned char)e->message[i] < 0x20 ? ' ' : e->message[i];
			msg[i] = '\0';
		}
		r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: not well-formed XML (line %d: %s)",
			    e ? e->line : 0, msg[0] ? msg : "?");
		xmlFreeParserCtxt(ctx);
		return r;
	}
	xmlFreeParserCtxt(ctx);
	root = xmlDocGetRootElement(doc);
	if (doc->intSubset || doc->extSubset)
		r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: a DOCTYPE (refused: entities)");
	else if (!is_el(root, "Envelope"))
		r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: the root element is not an Envelope");
	else
		r = ovf_walk(root, d, err);
	xmlFreeDoc(doc);
	if (r == 0)
		r = vm_check_limits(d, "OVF", err);
	if (r < 0)
		memset(d, 0, sizeof(*d));
	return r;
}

