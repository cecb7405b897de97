/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Errors and exit codes.
 *
 * The engine never prints and never exits.  Internal functions return >= 0 or
 * a negative errno, and take a `struct im_err *` last, which they fill with a
 * message and the exit class the failure belongs to.  Only command code turns
 * the class into the process exit code (see the README's table, "Exit codes").
 */
#ifndef IMAGER_ERROR_H
#define IMAGER_ERROR_H

#include <errno.h>

/* Exit codes, documented in README.md and imager.1.  Stable: scripts use them. */
enum im_exit {
	IM_EXIT_OK       = 0,  /* success */
	IM_EXIT_USAGE    = 1,  /* bad command line */
	IM_EXIT_SOURCE   = 2,  /* source missing, unreadable or not usable */
	IM_EXIT_DAMAGED  = 3,  /* image damaged, truncated or unfinished */
	IM_EXIT_TARGET   = 4,  /* target refused: too small, mounted, busy, wrong kind */
	IM_EXIT_FSCK     = 5,  /* filesystem unclean or inconsistent: run fsck or --force */
	IM_EXIT_IO       = 6,  /* read or write failure during the job */
	IM_EXIT_UNSUPP   = 7,  /* a feature imager does not support */
	IM_EXIT_INTERNAL = 8,  /* out of memory or a bug */
	IM_EXIT_INTERRUPTED = 9, /* stopped by SIGINT/SIGTERM; nothing complete-looking left */
	IM_EXIT_APPLIANCE = 10,  /* libguestfs's appliance cannot start here (no kernel, no room...) */
	IM_EXIT_RESCUED  = 11,   /* --rescue: complete, but sectors were unreadable (zeros, in the map) */
	IM_EXIT_SOME_FAILED = 12, /* a fleet's job (multicast, migrate): done, but some machines failed (the report names them) */
};

struct im_err {
	int exit_class;        /* enum im_exit; 0 while no error was recorded */
	int code;              /* negative errno */
	char msg[1024];
};

/* Record an error (the first one wins, later calls keep the first message
 * but the code is returned anyway).  Returns code, so callers can write
 * `return im_errf(err, IM_EXIT_IO, -errno, "reading %s", path);`. */
int im_errf(struct im_err *err, int exit_class, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Prefix context to an existing message ("partition 2: " + msg). */
void im_err_prefix(struct im_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The exit code to use for a failed call: the recorded class, else INTERNAL. */
int im_err_exit(const struct im_err *err);

#define RETURN_IF(cond, err, cls, code, ...) \
	do { if (cond) return im_errf((err), (cls), (code), __VA_ARGS__); } while (0)

#define FORWARD_ERR(expr) \
	do { int _r = (expr); if (_r < 0) return _r; } while (0)

/* Broken invariant: a bug in imager, never a reaction to input. */
#define BUG() im_bug(__FILE__, __LINE__)
void im_bug(const char *file, int line) __attribute__((noreturn));

#endif
