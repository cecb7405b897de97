/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "imager/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A message too long for err->msg ends in "..." where it was cut, so
 * that the cut shows. */
static void mark_cut(struct im_err *err, int n)
{
	if (n >= (int)sizeof(err->msg))
		memcpy(err->msg + sizeof(err->msg) - 4, "...", 4);
}

int im_errf(struct im_err *err, int exit_class, int code, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!err || err->exit_class)
		return code;
	err->exit_class = exit_class;
	err->code = code;
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	mark_cut(err, n);
	return code;
}

void im_err_prefix(struct im_err *err, const char *fmt, ...)
{
	char prefix[sizeof(err->msg)], old[sizeof(err->msg)];
	size_t pl, ol;
	va_list ap;

	if (!err || !err->exit_class)
		return;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	pl = strlen(prefix);
	ol = strlen(old);
	/* (prefix fits: vsnprintf cut it to sizeof(msg) - 1) */
	memcpy(err->msg, prefix, pl);
	if (pl + ol < sizeof(err->msg)) {
		memcpy(err->msg + pl, old, ol + 1);
	} else {
		memcpy(err->msg + pl, old, sizeof(err->msg) - 1 - pl);
		err->msg[sizeof(err->msg) - 1] = '\0';
		mark_cut(err, (int)sizeof(err->msg));
	}
}

int im_err_exit(const struct im_err *err)
{
	return err && err->exit_class ? err->exit_class : IM_EXIT_INTERNAL;
}

void im_bug(const char *file, int line)
{
	fprintf(stderr, "imager: internal error at %s:%d, please report\n", file, line);
	abort();
}
