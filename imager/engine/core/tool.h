/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Engine-internal: running a system tool (e2fsck, resize2fs, debugfs)
 * with its output captured, never shown: the engine does not print. */
#ifndef IMAGER_TOOL_H
#define IMAGER_TOOL_H

#include <stddef.h>

/* Run argv (argv[0] looked up in PATH) with stdin from /dev/null and
 * stdout+stderr captured into out (the last outlen-1 bytes, NUL-ended).
 * Returns the exit status (>= 0), or a negative errno when it could not be
 * started or was killed by a signal. */
int tool_run(const char *const argv[], char *out, size_t outlen);
/* The same for a tool whose output is parsed: stdout into out and stderr
 * into errs apart (its complaints would split the lines of its output),
 * each the last len-1 bytes, NUL-ended; killed after seconds (0: no
 * limit), then -ETIMEDOUT. */
int tool_run_timed(const char *const argv[], char *out, size_t outlen, char *errs,
		   size_t errlen, unsigned seconds);

#endif
