/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "imager/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int im_errf(struct im_err *err, int exit_class, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err || err->exit_class)
		return code;
	err->exit_class = exit_class;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

void im_err_prefix(struct im_err *err, const char *fmt, ...)
{
	char prefix[256], old[sizeof(err->msg)];
	va_list ap;

	if (!err || !err->exit_class)
		return;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	snprintf(err->msg, sizeof(err->msg), "%s%s", prefix, old);
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
