/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The text editors of conversion: disk names remapped in fstab, crypttab
 * and kernel command lines; grub.cfg's entries and default; "set default"
 * and GRUB_DEFAULT rewritten; modules.dep closures; the quick inspection's
 * readers (os-release, fstab, debian_version, ELF headers).  The input's
 * first byte picks the editor (its high bit: the readers), the rest is the
 * text. */
#include "fuzz.h"

#include <stdbool.h>

#include "convtext.h"

static bool lookup(void *opaque, unsigned disk, unsigned part, char *uuid, size_t len)
{
	(void)opaque;
	if ((disk + part) % 3 == 0)
		return false;
	snprintf(uuid, len, "0000-%u-%u", disk, part);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data + 1;
	size_t len = size ? size - 1 : 0;

	if (size < 1)
		return 0;
	if (data[0] & 0x80) {
		static struct fstab_ent e[8];
		struct osrel o;
		int ma, mi;
		switch (data[0] % 4) {
		case 0:
			osrel_parse(text, len, &o);
			if (strlen(o.id) >= sizeof(o.id) || strlen(o.pretty) >= sizeof(o.pretty))
				abort();
			break;
		case 1:
			if (fstab_parse(text, len, e, 8) > len + 1)
				abort();
			break;
		case 2:
			version_parse(text, len, &ma, &mi);
			break;
		case 3:
			elf_arch((const unsigned char *)text, len);
			break;
		}
		return 0;
	}
	switch (data[0] % 4) {
	case 0: {
		struct sbuf out = { 0 };
		struct remap_change *ch = NULL;
		size_t nch = 0;
		remap_text(text, len, data[0] & 4 ? CONV_BUS_VIRTIO_SCSI : CONV_BUS_VIRTIO_BLK,
			   data[0] & 8 ? lookup : NULL, NULL, &out, &ch, &nch);
		free(ch);
		sbuf_free(&out);
		break;
	}
	case 1: {
		static struct grub_entry e[16];
		char dv[128];
		int n = grub_entries(text, len, e, 16, dv, sizeof(dv));
		if (n >= 0)
			grub_default_entry(e, n < 16 ? (size_t)n : 16, dv);
		break;
	}
	case 2: {
		struct sbuf out = { 0 };
		set_assignment(text, len, data[0] & 4 ? "GRUB_DEFAULT" : "default", "1>2",
			       !(data[0] & 4), &out);
		sbuf_free(&out);
		break;
	}
	case 3: {
		static const char *const names[] = { "virtio_blk", "virtio_scsi", "virtio_pci", "virtio_net" };
		char **paths = NULL;
		size_t np = 0, nb = 0;
		const char *missing = NULL;
		size_t half = len / 2;
		if (modules_closure(text, half, text + half, len - half, names, 4, &paths, &np, &nb,
				    &missing) == 0)
			strv_free(paths, np);
		break;
	}
	}
	return 0;
}
