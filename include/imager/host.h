/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The target host: a libvirt connection (imager/virt/host.c).
 *
 * host_open() connects (read-write) to a libvirt URI ("qemu:///system",
 * "qemu+ssh://root@host/system", ...); host_reopen() connects again after
 * a lost connection, within the timeout.  Nothing here prints.
 */
#ifndef IMAGER_HOST_H
#define IMAGER_HOST_H
/* The virtualisation (libvirt) layer's header: only that layer and those above it include it
 * (the Makefile sets IMAGER_LAYER for each layer's sources). */
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 3
#error "a lower layer may not use the virtualisation (libvirt) layer"
#endif

#include <stdbool.h>

#include <libvirt/libvirt.h>

#include "imager/backend.h"
#include "imager/error.h"

/*
 * Connect to uri (NULL: libvirt's default, normally qemu:///system).
 * Returns 0; on failure (no daemon, refused, unknown URI) -ECONNREFUSED with
 * IM_EXIT_TARGET and a message that names the URI and, when the daemon is
 * not running, says so.  libvirt's own error printing is turned off.
 * net (the job's --timeout; NULL: the defaults, bk_net_get): how long a
 * daemon that stops answering is waited for: the connection sends
 * libvirt's keepalive pings (an event loop runs on a thread of its own),
 * and is closed when its daemon answers none for that long, so that a
 * blocked call (a volume upload's stream) fails instead of waiting forever.
 */
int host_open(const char *uri, const struct bk_net *net, virConnectPtr *out, struct im_err *err);
/* Is the connection still up (false after a keepalive timeout)? */
bool host_alive(virConnectPtr conn);
/* host_open() after a lost connection (the job connects again up to
 * net->retries times): it waits at most the timeout, since a daemon that
 * is stopped accepts the socket and never answers (the attempt is left to
 * finish on its own thread, and closed). */
/* libvirt's library version ("9.0.0"), no connection made; "" when it
 * cannot say.  For `imager -v --version`. */
void host_lib_version(char *buf, size_t n);

int host_reopen(const char *uri, const struct bk_net *net, virConnectPtr *out,
		struct im_err *err);
/* libvirt's last error message on this thread, or "libvirt gave no
 * reason"; for messages after a failed libvirt call. */
const char *host_last_error(void);
/* Whether the connection's host is this machine (no host part in the URI),
 * so that pool paths can be opened directly. */
bool host_is_local(virConnectPtr conn);
/* The same test on a URI string: true for "qemu:///system",
 * "qemu+unix:///system?socket=...", "test:///default"; false for
 * "qemu+ssh://root@host/system" and for NULL. */
bool host_uri_is_local(const char *uri);

#endif
