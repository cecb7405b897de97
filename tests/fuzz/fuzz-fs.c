/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Every filesystem plugin's used-block reader (ext2/3/4, FAT, NTFS, XFS,
 * btrfs, exFAT, F2FS, swap, LVM, LUKS, raw), chosen as imager chooses:
 * libblkid's TYPE, then the plugins' magics.  The input is a sparse image
 * (fuzz.h); its first byte's low bit asks for --force. */
#include "fuzz.h"

#include "imager/fs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs_info info;
	struct im_err err = { 0 };
	uint64_t len;
	int fd = fuzz_image(data, size, &len);

	if (fd < 0)
		return 0;
	memset(&info, 0, sizeof(info));
	if (fs_examine(fd, 0, len, size > 4 && (data[4] & 1), &info, &err) == 0)
		fs_info_free(&info);
	close(fd);
	return 0;
}
