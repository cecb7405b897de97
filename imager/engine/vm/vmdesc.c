/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The descriptions of virtual machines other hypervisors write: OVF
 * (libxml2) and VMware's .vmx; and the files they name, resolved inside
 * their folder.  Contract: include/imager/vmsource.h. */
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

static int hexval(int c)
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
		int hi = hexval((unsigned char)s[i]), lo = hexval((unsigned char)s[i + 1]);
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

static int check_limits(struct vm_desc *d, const char *src, struct im_err *err)
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

static int ovf_walk(xmlNode *env, struct vm_desc *d, struct im_err *err)
{
	xmlNode *vs = NULL, *hw, *os;
	struct ovf_ctl ctl[64];
	size_t nctl = 0, nitems = 0;
	char v[256];

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
	FORWARD_ERR(child_text(vs, "Name", d->name, sizeof(d->name), err));
	if (!d->name[0])
		FORWARD_ERR(attr_text(vs, "id", d->name, sizeof(d->name), err));
	os = child(vs, "OperatingSystemSection");
	if (os) {
		FORWARD_ERR(attr_text(os, "osType", d->guest_os, sizeof(d->guest_os), err));
		if (!d->guest_os[0])
			FORWARD_ERR(child_text(os, "OSType", d->guest_os, sizeof(d->guest_os), err));
		if (!d->guest_os[0])
			FORWARD_ERR(child_text(os, "Description", d->guest_os, sizeof(d->guest_os), err));
		if (!d->guest_os[0])
			FORWARD_ERR(attr_text(os, "id", d->guest_os, sizeof(d->guest_os), err));
	}
	hw = child(vs, "VirtualHardwareSection");
	if (!hw)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: no VirtualHardwareSection");
	/* controllers first: a disk item may come before its controller */
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
		if (nctl == sizeof(ctl) / sizeof(ctl[0]))
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: more than %zu disk controllers",
				       nctl);
		if (bus > 64)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: controller bus %llu",
				       (unsigned long long)bus);
		FORWARD_ERR(child_text(it, "InstanceID", ctl[nctl].id, sizeof(ctl[nctl].id), err));
		snprintf(ctl[nctl].kind, sizeof(ctl[nctl].kind), "%s", kind);
		ctl[nctl].bus = (unsigned)bus;
		nctl++;
	}
	for (xmlNode *it = hw->children; it; it = it->next) {
		uint64_t type, n;
		bool has;
		if (is_el(it, "Config") || is_el(it, "ExtraConfig")) {
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
					return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
						       "OVF: firmware \"%s\" (efi or bios)", val);
			} else if (sb) {
				d->secure_boot = !strcasecmp(val, "true");
			}
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
			struct vm_nic *nic;
			char mac[64];
			if (d->nnics == VM_MAX_NICS)
				return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
					       "OVF: more than %d network adapters", VM_MAX_NICS);
			nic = &d->nics[d->nnics];
			FORWARD_ERR(child_text(it, "ResourceSubType", nic->model, sizeof(nic->model), err));
			FORWARD_ERR(child_text(it, "Address", mac, sizeof(mac), err));
			if (mac[0] && vm_mac_norm(mac, nic->mac) < 0)
				return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
					       "OVF: network adapter %zu: MAC address \"%s\" is not valid",
					       d->nnics + 1, mac);
			d->nnics++;
		} else if (type == 17) {
			struct vm_disk *k;
			char host[256], parent[64];
			if (d->ndisks == VM_MAX_DISKS)
				return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "OVF: more than %d disks",
					       VM_MAX_DISKS);
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
		r = check_limits(d, "OVF", err);
	if (r < 0)
		memset(d, 0, sizeof(*d));
	return r;
}

/* ---- .vmx ---- */

#define VMX_MAX_LINE 65536   /* guestinfo values can be long */
#define VMX_MAX_KEYS 20000

struct vmx_kv {
	char *key;      /* lowercased */
	char *val;      /* |XX decoded */
	unsigned line;
};

static int kv_cmp(const void *a, const void *b)
{
	return strcmp(((const struct vmx_kv *)a)->key, ((const struct vmx_kv *)b)->key);
}

static const struct vmx_kv *vmx_get(const struct vmx_kv *kv, size_t n, const char *key)
{
	struct vmx_kv k = { .key = (char *)key };
	return n ? bsearch(&k, kv, n, sizeof(*kv), kv_cmp) : NULL;
}

static bool vmx_true(const struct vmx_kv *kv, size_t n, const char *key)
{
	const struct vmx_kv *e = vmx_get(kv, n, key);
	return e && (!strcasecmp(e->val, "true") || !strcmp(e->val, "1"));
}

/* One line (no newline) into *kv; 0 (a key), 1 (blank or comment), -EINVAL. */
static int vmx_line(const char *s, size_t len, struct vmx_kv *kv, const char **why)
{
	size_t i = 0, ks, ke, vs, j;
	char *val;

	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
		i++;
	if (i == len || s[i] == '#')
		return 1;
	ks = i;
	while (i < len && (isalnum((unsigned char)s[i]) || strchr("._:-[]", s[i])))
		i++;
	ke = i;
	if (ke == ks)
		return *why = "no key", -EINVAL;
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i == len || s[i] != '=')
		return *why = "no '=' after the key", -EINVAL;
	i++;
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i == len || s[i] != '"')
		return *why = "the value is not in quotes", -EINVAL;
	vs = ++i;
	while (i < len && s[i] != '"')
		i++;
	if (i == len)
		return *why = "the value's closing quote is missing", -EINVAL;
	for (j = i + 1; j < len; j++)
		if (s[j] != ' ' && s[j] != '\t' && s[j] != '\r')
			break;
	if (j < len && s[j] != '#')
		return *why = "text after the value", -EINVAL;
	kv->key = strndup(s + ks, ke - ks);
	val = malloc(i - vs + 1);
	if (!kv->key || !val) {
		free(kv->key);
		free(val);
		kv->key = NULL;
		return *why = "out of memory", -ENOMEM;
	}
	for (char *k = kv->key; *k; k++)
		*k = (char)tolower((unsigned char)*k);
	/* |XX escapes (VMware writes '"' as |22, '|' as |7C) */
	j = 0;
	for (size_t p = vs; p < i; p++) {
		if (s[p] == '|' && p + 2 < i && hexval((unsigned char)s[p + 1]) >= 0 &&
		    hexval((unsigned char)s[p + 2]) >= 0) {
			val[j++] = (char)(hexval((unsigned char)s[p + 1]) << 4 | hexval((unsigned char)s[p + 2]));
			p += 2;
		} else {
			val[j++] = s[p];
		}
	}
	val[j] = '\0';
	if (strlen(val) != j) {
		free(kv->key);
		free(val);
		kv->key = NULL;
		return *why = "a NUL in the value", -EINVAL;
	}
	kv->val = val;
	return 0;
}

static void vmx_free(struct vmx_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].val);
	}
	free(kv);
}

static int vmx_str(const struct vmx_kv *kv, size_t n, const char *key, char *out, size_t outlen,
		   struct im_err *err)
{
	const struct vmx_kv *e = vmx_get(kv, n, key);
	char what[160];

	out[0] = '\0';
	if (!e)
		return 0;
	snprintf(what, sizeof(what), ".vmx line %u: %s", e->line, key);
	return vm_str_field(out, outlen, e->val, strlen(e->val), what, err);
}

static int vmx_num(const struct vmx_kv *kv, size_t n, const char *key, uint64_t lo, uint64_t hi,
		   uint64_t *v, struct im_err *err)
{
	const struct vmx_kv *e = vmx_get(kv, n, key);

	if (!e)
		return 0;
	if (vm_parse_u64(e->val, strlen(e->val), v) < 0 || *v < lo || *v > hi)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, ".vmx line %u: %s = \"%.40s\" (%llu..%llu)",
			       e->line, key, e->val, (unsigned long long)lo, (unsigned long long)hi);
	return 1;
}

static const char *const vmx_ctl[] = { "scsi", "sata", "nvme", "ide" };

struct vmx_slot {
	unsigned kind, bus, unit;
	const struct vmx_kv *present;
};

static int slot_cmp(const void *a, const void *b)
{
	const struct vmx_slot *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->bus != y->bus)
		return x->bus < y->bus ? -1 : 1;
	return x->unit < y->unit ? -1 : x->unit > y->unit;
}

/* "scsi0:1.present" -> kind, bus, unit; false for other keys. */
static bool disk_key(const char *key, struct vmx_slot *s)
{
	for (unsigned k = 0; k < sizeof(vmx_ctl) / sizeof(vmx_ctl[0]); k++) {
		size_t l = strlen(vmx_ctl[k]);
		unsigned bus, unit;
		int used = 0;
		if (strncmp(key, vmx_ctl[k], l))
			continue;
		if (!isdigit((unsigned char)key[l]) ||
		    sscanf(key + l, "%3u:%3u.present%n", &bus, &unit, &used) != 2 ||
		    (size_t)used != strlen(key + l) || bus > 99 || unit > 999)
			return false;
		s->kind = k;
		s->bus = bus;
		s->unit = unit;
		return true;
	}
	return false;
}

static int vmx_fill(const struct vmx_kv *kv, size_t n, struct vm_desc *d, struct im_err *err)
{
	struct vmx_slot slots[64];
	size_t nslots = 0;
	uint64_t v;
	char fw[16], key[64];
	int r;

	FORWARD_ERR(vmx_str(kv, n, "displayname", d->name, sizeof(d->name), err));
	FORWARD_ERR(vmx_str(kv, n, "guestos", d->guest_os, sizeof(d->guest_os), err));
	r = vmx_num(kv, n, "memsize", VM_MIN_MEMORY_MIB, VM_MAX_MEMORY_MIB, &v, err);
	if (r < 0)
		return r;
	if (r)
		d->memory_mib = v;
	r = vmx_num(kv, n, "numvcpus", 1, VM_MAX_VCPUS, &v, err);
	if (r < 0)
		return r;
	if (r)
		d->vcpus = (unsigned)v;
	FORWARD_ERR(vmx_str(kv, n, "firmware", fw, sizeof(fw), err));
	if (!fw[0] || !strcasecmp(fw, "bios"))
		d->firmware = VM_FW_BIOS;
	else if (!strcasecmp(fw, "efi"))
		d->firmware = VM_FW_EFI;
	else
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, ".vmx: firmware \"%s\" (efi or bios)", fw);
	d->secure_boot = vmx_true(kv, n, "uefi.secureboot.enabled");

	for (size_t i = 0; i < n; i++) {
		struct vmx_slot s;
		if (!disk_key(kv[i].key, &s) || !vmx_true(kv, n, kv[i].key))
			continue;
		if (nslots == sizeof(slots) / sizeof(slots[0]))
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, ".vmx: more than %zu devices", nslots);
		s.present = &kv[i];
		slots[nslots++] = s;
	}
	qsort(slots, nslots, sizeof(slots[0]), slot_cmp);
	for (size_t i = 0; i < nslots; i++) {
		const struct vmx_slot *s = &slots[i];
		char type[32], pfx[32];
		struct vm_disk *k;
		snprintf(pfx, sizeof(pfx), "%s%u", vmx_ctl[s->kind], s->bus);
		snprintf(key, sizeof(key), "%s.present", pfx);
		if (vmx_get(kv, n, key) && !vmx_true(kv, n, key))
			continue;  /* its controller is not there */
		snprintf(key, sizeof(key), "%s:%u.devicetype", pfx, s->unit);
		FORWARD_ERR(vmx_str(kv, n, key, type, sizeof(type), err));
		if (strcasestr(type, "cdrom") || strcasestr(type, "floppy") ||
		    !strcasecmp(type, "scsi-passthru"))
			continue;
		if (d->ndisks == VM_MAX_DISKS)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, ".vmx: more than %d disks", VM_MAX_DISKS);
		k = &d->disks[d->ndisks];
		snprintf(key, sizeof(key), "%s:%u.filename", pfx, s->unit);
		FORWARD_ERR(vmx_str(kv, n, key, k->file, sizeof(k->file), err));
		if (!k->file[0])
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, ".vmx line %u: %s:%u has no fileName",
				       s->present->line, pfx, s->unit);
		snprintf(k->controller, sizeof(k->controller), "%s", vmx_ctl[s->kind]);
		k->bus = s->bus;
		k->unit = s->unit;
		d->ndisks++;
	}

	for (unsigned e = 0; e < 100; e++) {
		char at[16], mac[32];
		struct vm_nic *nic;
		snprintf(key, sizeof(key), "ethernet%u.present", e);
		if (!vmx_true(kv, n, key))
			continue;
		if (d->nnics == VM_MAX_NICS)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, ".vmx: more than %d network adapters",
				       VM_MAX_NICS);
		nic = &d->nics[d->nnics];
		snprintf(key, sizeof(key), "ethernet%u.virtualdev", e);
		FORWARD_ERR(vmx_str(kv, n, key, nic->model, sizeof(nic->model), err));
		snprintf(key, sizeof(key), "ethernet%u.addresstype", e);
		FORWARD_ERR(vmx_str(kv, n, key, at, sizeof(at), err));
		snprintf(key, sizeof(key), "ethernet%u.%s", e,
			 !strcasecmp(at, "static") ? "address" : "generatedaddress");
		FORWARD_ERR(vmx_str(kv, n, key, mac, sizeof(mac), err));
		if (mac[0] && vm_mac_norm(mac, nic->mac) < 0)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, ".vmx: %s = \"%s\" is not a MAC address",
				       key, mac);
		d->nnics++;
	}
	return check_limits(d, ".vmx", err);
}

int vm_vmx_parse(const char *text, size_t len, struct vm_desc *d, struct im_err *err)
{
	struct vmx_kv *kv = NULL;
	size_t n = 0, cap = 0;
	unsigned line = 0;
	int r = 0;

	memset(d, 0, sizeof(*d));
	if (len > VM_MAX_DESC)
		return im_errf(err, IM_EXIT_SOURCE, -EFBIG, ".vmx: %zu bytes, more than %u", len,
			       VM_MAX_DESC);
	if (memchr(text, '\0', len))
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL, ".vmx: a NUL byte at %zu",
			       (size_t)((const char *)memchr(text, '\0', len) - text));
	for (size_t at = 0; at < len && r == 0;) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t l = nl ? (size_t)(nl - text) - at : len - at;
		const char *why = "";
		line++;
		if (l > VMX_MAX_LINE) {
			r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, ".vmx line %u: %zu bytes, more than %d",
				    line, l, VMX_MAX_LINE);
			break;
		}
		if (n == cap) {
			struct vmx_kv *g;
			if (cap >= VMX_MAX_KEYS) {
				r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, ".vmx: more than %d keys",
					    VMX_MAX_KEYS);
				break;
			}
			g = realloc(kv, (cap ? cap * 2 : 64) * sizeof(*kv));
			if (!g) {
				r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
				break;
			}
			kv = g;
			cap = cap ? cap * 2 : 64;
		}
		memset(&kv[n], 0, sizeof(kv[n]));
		r = vmx_line(text + at, l, &kv[n], &why);
		if (r == 0) {
			kv[n++].line = line;
		} else if (r == 1) {
			r = 0;
		} else {
			r = im_errf(err, r == -ENOMEM ? IM_EXIT_INTERNAL : IM_EXIT_SOURCE, r,
				    ".vmx line %u: %s", line, why);
		}
		at += l + 1;
	}
	if (r == 0 && n) {
		qsort(kv, n, sizeof(*kv), kv_cmp);
		for (size_t i = 1; i < n && r == 0; i++)
			if (!strcmp(kv[i - 1].key, kv[i].key))
				r = im_errf(err, IM_EXIT_SOURCE, -EINVAL,
					    ".vmx lines %u and %u: the key %.100s twice",
					    kv[i - 1].line < kv[i].line ? kv[i - 1].line : kv[i].line,
					    kv[i - 1].line < kv[i].line ? kv[i].line : kv[i - 1].line, kv[i].key);
	}
	if (r == 0)
		r = vmx_fill(kv, n, d, err);
	vmx_free(kv, n);
	if (r < 0)
		memset(d, 0, sizeof(*d));
	return r;
}
