/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: what vmdesc.c, vmx.c, vmdk.c and ova.c share
 * (include/imager/vmsource.h is the contract). */
#ifndef IMAGER_VMSOURCE_INT_H
#define IMAGER_VMSOURCE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/vmsource.h"

/* A value of a hostile description copied into a field: refused (-EINVAL,
 * IM_EXIT_SOURCE, "WHAT: ...") when it holds a control character or does
 * not fit; never cut.  what names the field for the message. */
int vm_str_field(char *out, size_t outlen, const char *s, size_t len, const char *what,
		 struct im_err *err);
/* Strict unsigned decimal s[0..len) (no sign, no blanks, at least one
 * digit, no overflow): 0, or -EINVAL. */
int vm_parse_u64(const char *s, size_t len, uint64_t *v);
/* The value of a hex digit, or -1. */
int vm_hexval(int c);
/* A MAC as "00:50:56:aa:bb:cc", "00-50-56-AA-BB-CC" or "005056AABBCC" into
 * lowercase colon form (out: 18 bytes); unicast and not all zero.  0 or
 * -EINVAL. */
int vm_mac_norm(const char *s, char out[18]);
/* The folder part of path (".": none) into out; 0 or -ENAMETOOLONG. */
int vm_dirname(const char *path, char *out, size_t outlen);
/* path opened for reading: a descriptor (*size its length), or -errno
 * with err filled (IM_EXIT_SOURCE: missing, not a regular file). */
int vm_open_file(const char *path, uint64_t *size, struct im_err *err);
/* The final component of path. */
const char *vm_basename(const char *path);
/* The limits every description meets once read: memory in 16 MiB..16 TiB
 * when said, at least one disk.  0, or -EINVAL (IM_EXIT_SOURCE, src
 * named). */
int vm_check_limits(struct vm_desc *d, const char *src, struct im_err *err);

#endif
