// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The target host: a libvirt connection (include/imager/host.h), opened
 * with keepalive pings, opened again on its own thread within the timeout,
 * and told local or remote.
 */
#include "imager/host.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libvirt/virterror.h>

/* libvirt prints every error on stderr unless told otherwise; the engine
 * does not print, and host_open() reports the failure itself. */
static void quiet_error(void *opaque, virErrorPtr e)
{
	(void)opaque;
	(void)e;
}

static pthread_once_t events_once = PTHREAD_ONCE_INIT;
static bool events_on;

bool host_alive(virConnectPtr conn)
{
	return virConnectIsAlive(conn) == 1;
}

/* libvirt's keepalive needs an event loop, registered before the first
 * connection and run by a thread of its own. */
static void *events_run(void *arg)
{
	(void)arg;
	while (virEventRunDefaultImpl() == 0)
		;
	return NULL;
}

static void events_start(void)
{
	pthread_t t;

	if (virEventRegisterDefaultImpl() == 0 && pthread_create(&t, NULL, events_run, NULL) == 0) {
		pthread_detach(t);
		events_on = true;
	}
}

void host_lib_version(char *buf, size_t n)
{
	unsigned long v = 0;

	if (n)
		buf[0] = '\0';
	if (virGetVersion(&v, NULL, NULL) == 0 && v)
		snprintf(buf, n, "%lu.%lu.%lu", v / 1000000, v / 1000 % 1000, v % 1000);
}

int host_open(const char *uri, const struct bk_net *net, virConnectPtr *out, struct im_err *err)
{
	unsigned timeout = bk_net_get(net).timeout_s;
	const char *name = uri ? uri : "libvirt's default URI";
	virConnectPtr conn;
	virErrorPtr e;

	*out = NULL;
	virSetErrorFunc(NULL, quiet_error);
	pthread_once(&events_once, events_start);
	conn = virConnectOpen(uri);
	if (conn) {
		/* pings every timeout/3 s (at least 1), the connection closed
		 * after 2 unanswered: about the timeout in all */
		unsigned every = timeout >= 3 ? timeout / 3 : 1;
		if (events_on)
			(void)virConnectSetKeepAlive(conn, (int)every, 2);
		*out = conn;
		return 0;
	}
	e = virGetLastError();
	/* A missing or refusing socket is a daemon that is not running: the
	 * one failure people meet most, so it gets its own words. */
	if (e && e->code == VIR_ERR_SYSTEM_ERROR &&
	    (e->int1 == ENOENT || e->int1 == ECONNREFUSED))
		return im_errf(err, IM_EXIT_TARGET, -ECONNREFUSED,
			       "cannot connect to %s: libvirtd is not running (start it: libvirtd -d): %s",
			       name, e->message ? e->message : "no daemon answers");
	return im_errf(err, IM_EXIT_TARGET, -ECONNREFUSED, "cannot connect to %s: %s", name,
		       e && e->message ? e->message : "libvirt gave no reason");
}

/* An attempt of host_reopen(): shared by the waiter and the thread that
 * makes it, freed by the last of the two. */
struct opener {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done, abandoned;
	char uri[1024];
	bool has_uri;
	struct bk_net net;
	virConnectPtr conn;
	struct im_err err;
	int r;
};

static void *opener_run(void *arg)
{
	struct opener *o = arg;
	virConnectPtr conn = NULL;
	struct im_err err = { 0 };
	int r = host_open(o->has_uri ? o->uri : NULL, &o->net, &conn, &err);
	bool gone;

	pthread_mutex_lock(&o->mu);
	o->done = true;
	o->r = r;
	o->conn = conn;
	o->err = err;
	gone = o->abandoned;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
	if (gone) {   /* (the waiter gave up on it) */
		if (conn)
			virConnectClose(conn);
		free(o);
	}
	return NULL;
}

int host_reopen(const char *uri, const struct bk_net *net, virConnectPtr *out,
		struct im_err *err)
{
	unsigned timeout = bk_net_get(net).timeout_s;
	struct opener *o = calloc(1, sizeof(*o));
	struct timespec until;
	pthread_t t;
	bool done;

	*out = NULL;
	if (!o)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	o->has_uri = uri != NULL;
	o->net = bk_net_get(net);
	snprintf(o->uri, sizeof(o->uri), "%s", uri ? uri : "");
	if (pthread_create(&t, NULL, opener_run, o) != 0) {
		free(o);
		return im_errf(err, IM_EXIT_INTERNAL, -EAGAIN, "cannot start a thread");
	}
	pthread_detach(t);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout;
	pthread_mutex_lock(&o->mu);
	while (!o->done && pthread_cond_timedwait(&o->cv, &o->mu, &until) == 0)
		;
	done = o->done;
	if (!done)
		o->abandoned = true;
	pthread_mutex_unlock(&o->mu);
	if (!done)
		return im_errf(err, IM_EXIT_IO, -ETIMEDOUT,
			       "connecting to %s again: no answer within %u s (--timeout)",
			       uri ? uri : "libvirt's default URI", timeout);
	*out = o->conn;
	*err = o->err;
	int r = o->r;
	free(o);
	return r;
}

const char *host_last_error(void)
{
	const virError *e = virGetLastError();
	return e && e->message ? e->message : "libvirt gave no reason";
}

bool host_uri_is_local(const char *uri)
{
	const char *p, *host;

	if (!uri || !(p = strchr(uri, ':')) || p == uri)
		return false;
	if (strncmp(p + 1, "//", 2))
		return true;          /* "scheme:path": no authority at all */
	host = p + 3;
	/* The authority ends at the path, the query or the fragment; a user
	 * part ("root@") still names a host after it. */
	return host[0] == '\0' || host[0] == '/' || host[0] == '?' || host[0] == '#';
}

bool host_is_local(virConnectPtr conn)
{
	char *uri = virConnectGetURI(conn);
	bool local = host_uri_is_local(uri);

	free(uri);
	return local;
}

