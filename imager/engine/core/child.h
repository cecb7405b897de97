/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Engine-internal: a server run as a child of imager (qemu-nbd for other
 * hypervisors' disks, nbdkit for an image folder's export), in a private
 * temporary folder of its own that holds its socket ("sock") and what it
 * writes on stdout and stderr ("messages").
 *
 * child_start makes the folder (tmp_dir_make, or the folder given) and
 * starts argv (looked up in PATH) with stdin from /dev/null.  Flags:
 * CHILD_DIE_WITH_PARENT, the child gets SIGTERM when imager dies
 * (PR_SET_PDEATHSIG; without it, the child leaves imager's session and
 * outlives it); CHILD_SHARED, the folder may be entered and the socket
 * connected to by other users (0711, the child's umask 0: qemu run by
 * libvirt as its own user reads the export); CHILD_STDIN_PIPE or
 * CHILD_STDOUT_PIPE, the child's stdin (or stdout, then not in the
 * messages) is a pipe whose other end is c->fd (close-on-exec; closed by
 * child_stop; -1 without), for a tool that streams (udp-sender,
 * udp-receiver).  child_listening waits until the socket exists, the
 * child ends or timeout_s passes.  child_stop sends SIGTERM, then SIGKILL
 * after 2 s, reaps it, and removes the socket, the messages and the folder
 * (a folder it did not make stays).  Killed children are reaped here:
 * liveness is never judged by the pid alone.
 */
#ifndef IMAGER_CORE_CHILD_H
#define IMAGER_CORE_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "imager/error.h"

struct child {
	pid_t pid;                /* 0 when not running */
	char dir[512];            /* the private folder */
	char sock[600];           /* dir/sock */
	bool own_dir;             /* made by child_start: removed by child_stop */
	int fd;                   /* CHILD_STD*_PIPE: our end of the pipe, else -1 */
	bool piped;               /* fd is ours to close */
};

/* Start argv in a new folder (prefix: tmp_dir_make's) or, with dir, in
 * that existing folder.  The socket's path must fit a sockaddr_un (a
 * too-long $TMPDIR: IM_EXIT_USAGE).  Returns 0 or -errno with err. */
enum { CHILD_DIE_WITH_PARENT = 1, CHILD_SHARED = 2, CHILD_STDIN_PIPE = 4, CHILD_STDOUT_PIPE = 8 };
int child_start(struct child *c, const char *prefix, const char *dir, const char *const argv[],
		unsigned flags, struct im_err *err);
/* 0: the socket is there; 1: the child ended first (*status); -ETIMEDOUT. */
int child_listening(struct child *c, unsigned timeout_s, int *status);
/* Reap the child if it ends within ms milliseconds: true (*status set,
 * c->pid cleared), else false. */
bool child_reaped(struct child *c, unsigned ms, int *status);
/* The last line the child wrote (control characters as spaces; "" when
 * none). */
void child_last_line(const struct child *c, char *out, size_t len);
/* What the child wrote so far (its messages file), the first len-1 bytes,
 * NUL-ended; "" when none. */
void child_messages(const struct child *c, char *out, size_t len);
void child_stop(struct child *c);

#endif
