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

#include "imager/error.h"

/*
 * Connect to uri (NULL: libvirt's default, normally qemu:///system).
 * Returns 0; on failure (no daemon, refused, unknown URI) -ECONNREFUSED with
 * IM_EXIT_TARGET and a message that names the URI and, when the daemon is
 * not running, says so.  libvirt's own error printing is turned off.
 */
int host_open(const char *uri, virConnectPtr *out, struct im_err *err);
/* How long a daemon that stops answering is waited for (--timeout; 0: the
 * default, 60 s): connections opened afterwards send libvirt's keepalive
 * pings (an event loop runs on a thread of its own), and one whose daemon
 * answers none for that long is closed, so that a blocked call (a volume
 * upload's stream) fails instead of waiting forever.  Set once, before
 * host_open(). */
void host_set_timeout(unsigned seconds);
/* Is the connection still up (false after a keepalive timeout)? */
bool host_alive(virConnectPtr conn);
/* How many times a job connects again after its connection was lost
 * (--retries; default 3), and host_open() for that: it waits at most the
 * timeout, since a daemon that is stopped accepts the socket and never
 * answers (the attempt is left to finish on its own thread, and closed). */
void host_set_retries(unsigned n);
unsigned host_retries(void);
int host_reopen(const char *uri, virConnectPtr *out, struct im_err *err);
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
