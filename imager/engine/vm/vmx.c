/* SPDX-License-Identifier: GPL-2.0-or-later */
/* VMware's .vmx: `key = "value"` lines into a machine's description.
 * Contract: include/imager/vmsource.h; the helpers it shares with the
 * OVF reader are vmdesc.c's (vmsource-int.h). */
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

#include "imager/vmsource.h"
#include "util.h"
#include "vmsource-int.h"

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
		if (s[p] == '|' && p + 2 < i && vm_hexval((unsigned char)s[p + 1]) >= 0 &&
		    vm_hexval((unsigned char)s[p + 2]) >= 0) {
			val[j++] = (char)(vm_hexval((unsigned char)s[p + 1]) << 4 | vm_hexval((unsigned char)s[p + 2]));
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
	return vm_check_limits(d, ".vmx", err);
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
