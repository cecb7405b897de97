/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: running a system tool (e2fsck, resize2fs) with its
 * output captured, never shown: the engine does not print. */
#ifndef IMAGER_TOOL_H
#define IMAGER_TOOL_H

#include <stddef.h>

/* Run argv (argv[0] looked up in PATH) with stdin from /dev/null and
 * stdout+stderr captured into out (the last outlen-1 bytes, NUL-ended).
 * Returns the exit status (>= 0), or a negative errno when it could not be
 * started or was killed by a signal. */
int tool_run(const char *const argv[], char *out, size_t outlen);

#endif
