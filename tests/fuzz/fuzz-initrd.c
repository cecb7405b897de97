/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Which tool made an initramfs: newc cpio archives one after the other,
 * compressed or not (imager/convert/initrd.c), and Debian's package
 * database (dpkg_installed).  The input's first byte picks the reader
 * (its low bit: the package database), the rest is the file. */
#include "fuzz.h"

#include <errno.h>

#include "convtext.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1) {
		dpkg_installed((const char *)data + 1, size - 1, "dracut");
		return 0;
	}
	struct initrd_scan s;
	int m = initrd_maker(data + 1, size - 1, &s);
	if (m > IRD_SUSE_MKINITRD || (m < 0 && m != -EINVAL && m != -E2BIG && m != -ENOMEM))
		abort();
	return 0;
}
