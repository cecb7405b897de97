/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Encrypted volumes of the guest (convert.h, struct conv_key): opened
 * inside the appliance with the keys the user gave, before inspection;
 * the ones left closed are named when no operating system is found
 * without them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "convert-int.h"

enum vkind { V_LUKS, V_BITLK };

static const char *kind_name(enum vkind k) { return k == V_LUKS ? "LUKS" : "BitLocker"; }

/* The key for the volume dev (UUID uuid, may be ""): the one that names
 * the device, else its UUID, else "all". */
static const char *key_for(const struct conv_opts *o, const char *dev, const char *uuid)
{
	const char *all = NULL;

	for (size_t i = 0; o->keys && i < o->nkeys; i++) {
		const char *id = o->keys[i].id;
		if (!strcmp(id, dev) || (*uuid && !strcasecmp(id, uuid)))
			return o->keys[i].passphrase;
		if (!strcmp(id, "all") && !all)
			all = o->keys[i].passphrase;
	}
	return all;
}

/* "/dev/sda2 (LUKS)" appended to the closed volumes' list. */
static void note_locked(struct conv_ctx *c, const char *dev, enum vkind k)
{
	size_t len = strlen(c->locked);

	if (len + strlen(dev) + 16 >= sizeof(c->locked))
		return;
	snprintf(c->locked + len, sizeof(c->locked) - len, "%s%s (%s)", len ? ", " : "", dev,
		 kind_name(k));
	if (k == V_LUKS)
		c->nlocked_luks++;
	else
		c->nlocked_bitlk++;
}

/* A mapper name the appliance accepts: "luks-" or "bitlk-" and the UUID's
 * letters, digits and dashes (a hostile UUID cannot make a path), else
 * the volume's number. */
static void map_name(char *out, size_t len, enum vkind k, const char *uuid, unsigned n)
{
	size_t u = strlen(uuid);
	bool ok = u > 0 && u <= 64;

	for (size_t i = 0; ok && i < u; i++)
		ok = (uuid[i] >= '0' && uuid[i] <= '9') || (uuid[i] >= 'a' && uuid[i] <= 'z') ||
		     (uuid[i] >= 'A' && uuid[i] <= 'Z') || uuid[i] == '-';
	if (ok)
		snprintf(out, len, "%s-%s", k == V_LUKS ? "luks" : "bitlk", uuid);
	else
		snprintf(out, len, "imager-crypt%u", n);
}

/* Where an encrypted volume can be: every partition, every whole disk
 * (one without a table), every LV; malloc'ed, NULL-terminated. */
static char **volumes(guestfs_h *g, char **devices)
{
	char **parts = guestfs_list_partitions(g), **lvs = guestfs_lvs(g), **v;
	size_t n = 0, np = 0, nl = 0, nd = 0;

	while (parts && parts[np])
		np++;
	while (lvs && lvs[nl])
		nl++;
	while (devices && devices[nd])
		nd++;
	if ((v = calloc(np + nl + nd + 1, sizeof(*v)))) {
		for (size_t i = 0; i < np; i++)
			v[n++] = parts[i];
		for (size_t i = 0; i < nd; i++)
			if ((v[n] = strdup(devices[i])))
				n++;
		for (size_t i = 0; i < nl; i++)
			v[n++] = lvs[i];
	} else {
		gx_strings_free(parts);
		gx_strings_free(lvs);
		return NULL;
	}
	free(parts);
	free(lvs);
	return v;
}

int conv_unlock(struct conv_ctx *c)
{
	guestfs_h *g = c->g;
	char **vols;
	unsigned opened = 0, n = 0;
	int r = 0;

	c->locked[0] = '\0';
	c->nlocked_luks = c->nlocked_bitlk = 0;
	/* (libguestfs's list of filesystems leaves encrypted volumes out) */
	if (!(vols = volumes(g, c->devices)))
		return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	for (size_t i = 0; vols[i]; i++) {
		const char *dev = vols[i], *key;
		char mapname[80], *uuid, *type = guestfs_vfs_type(g, dev);
		enum vkind k;

		if (type && !strcmp(type, "crypto_LUKS"))
			k = V_LUKS;
		else if (type && !strcmp(type, "BitLocker"))
			k = V_BITLK;
		else {
			free(type);
			continue;
		}
		free(type);
		n++;
		uuid = guestfs_vfs_uuid(g, dev);
		if (!(key = key_for(c->o, dev, uuid ? uuid : ""))) {
			note_locked(c, dev, k);
			free(uuid);
			continue;
		}
		map_name(mapname, sizeof(mapname), k, uuid ? uuid : "", n);
		free(uuid);
		struct guestfs_cryptsetup_open_argv oa = {
			.bitmask = GUESTFS_CRYPTSETUP_OPEN_READONLY_BITMASK |
				   GUESTFS_CRYPTSETUP_OPEN_CRYPTTYPE_BITMASK,
			.readonly = c->o->dry_run,
			.crypttype = k == V_LUKS ? "luks" : "bitlk",
		};
		if (guestfs_cryptsetup_open_argv(g, dev, key, mapname, &oa) == -1) {
			/* (libguestfs's message holds cryptsetup's, never the key) */
			r = im_errf(c->err, IM_EXIT_USAGE, -EINVAL,
				    "the key given for %s (%s) does not open it: %s; nothing changed", dev,
				    kind_name(k), gx_error(g));
			break;
		}
		opened++;
	}
	gx_strings_free(vols);
	if (r == 0 && opened && guestfs_lvm_scan(g, 1) == -1)
		r = im_errf(c->err, IM_EXIT_IO, -EIO, "scanning the opened volumes for LVM: %s",
			    gx_error(g));
	return r;
}

int conv_locked_refusal(struct conv_ctx *c)
{
	char what[256] = "";

	if (!c->locked[0])
		return 0;
	if (c->nlocked_luks)
		snprintf(what, sizeof(what), "give the passphrase of each LUKS volume with --key "
			 "DEVICE:PASSPHRASE or --key-file DEVICE:FILE");
	if (c->nlocked_bitlk)
		snprintf(what + strlen(what), sizeof(what) - strlen(what),
			 "%ssuspend BitLocker on the machine first, or give the recovery key with "
			 "--key DEVICE:RECOVERY-KEY", what[0] ? "; " : "");
	return im_errf(c->err, IM_EXIT_UNSUPP, -ENOKEY,
		       "no operating system found outside the encrypted volume%s %s: %s; nothing "
		       "changed", c->nlocked_luks + c->nlocked_bitlk > 1 ? "s" : "", c->locked, what);
}
