/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An image folder's disk as a read-only NBD export, served by nbdkit with
 * imager's plugin (imager/nbdkit/, over imgread.h) — `imager serve` in the
 * foreground, and in the background for the jobs that read an image
 * without restoring it (browse, mount, p2v --instant).
 *
 * The plugin, nbdkit-imager-plugin.so, is looked for next to the running
 * binary (build/), in ../lib/imager beside its folder, then in
 * /usr/lib/imager (img_plugin_path).
 *
 * nbdkit runs with --threads 1: one request at a time per connection
 * (clients that want more open more connections: the export allows
 * multi-conn, and the plugin is thread-safe).  Debian 12's nbdkit 1.32
 * aborts (connections.c: raw_send_socket: Assertion `sock >= 0') when a
 * client goes away with several requests in flight on one connection,
 * whatever the plugin; with one thread per connection it does not.
 */
#ifndef IMAGER_IMGSERVE_H
#define IMAGER_IMGSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "imager/error.h"

#define IMG_PLUGIN "nbdkit-imager-plugin.so"

struct img_serve_opts {
	unsigned partition;     /* 0: the whole disk */
	uint64_t cache_bytes;   /* 0: the plugin's default (imgread.h) */
	bool verbose;           /* nbdkit --verbose */
	const char *czcache;    /* czcache=: where a Clonezilla folder's index is
				 * kept (job.h's im_czindex); NULL: the plugin's default */
	bool outlive;           /* background: the server outlives imager (else it
				 * gets SIGTERM when imager dies) */
	bool shared;            /* background: other users (qemu run by libvirt)
				 * may connect: folder 0711, socket 0777 */
};

/* The plugin's path into out: 0, or -ENOENT (none found) / -ENAMETOOLONG. */
int img_plugin_path(char *out, size_t len);

/* nbdkit's arguments for DIR (absolute) served on the Unix socket sock, or
 * on TCP port when sock is NULL, into argv (at least IMG_SERVE_ARGC
 * entries, NULL-ended); the strings live in buf.  Returns 0 or
 * -ENAMETOOLONG. */
#define IMG_SERVE_ARGC 20
int img_serve_argv(const char *dir, const char *plugin, const char *sock, unsigned port,
		   const struct img_serve_opts *o, const char **argv, char *buf, size_t buflen);

/* In the background: DIR checked (img_reader_open: the usual exit codes),
 * then nbdkit started on a socket in a private temporary folder; returns
 * once the socket answers.  Errors: the folder's, the plugin or nbdkit
 * missing (IM_EXIT_UNSUPP), nbdkit ending or not listening within 30 s
 * (IM_EXIT_IO, its last line quoted). */
struct img_server;
int img_serve_start(const char *dir, const struct img_serve_opts *o, struct img_server **out,
		    struct im_err *err);
const char *img_server_socket(const struct img_server *s);  /* absolute */
const char *img_server_dir(const struct img_server *s);     /* the socket's private folder */
pid_t img_server_pid(const struct img_server *s);
uint64_t img_server_size(const struct img_server *s);        /* the export's bytes */
/* Whether a server accepts connections on the Unix socket path. */
bool img_socket_answers(const char *path);
/* SIGTERM (SIGKILL after 2 s), the folder removed, s freed (NULL: nothing). */
void img_server_stop(struct img_server *s);

#endif
