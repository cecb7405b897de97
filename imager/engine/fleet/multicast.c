/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager multicast and restore multicast: an image folder sent once to
 * every receiver through udpcast, each receiver restoring it with imager's
 * own restore and reporting back (include/imager/fleet.h).
 */
#include "imager/fleet.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "frames.h"
#include "imager/image.h"
#include "imgtar.h"
#include "util.h"

#define MESSAGES_MAX (1u << 20)

static int need_tool(const char *name, struct im_err *err)
{
	char path[4096];

	if (util_find_program(name, path, sizeof(path)))
		return 0;
	return im_errf(err, IM_EXIT_UNSUPP, -ENOENT,
		       "%s is not installed (Debian package udpcast): multicast needs it", name);
}

/* Printable ASCII only, at most len-1 bytes. */
static void clean_copy(char *dst, size_t len, const char *src, size_t srclen)
{
	size_t n = 0;
	for (size_t i = 0; i < srclen && src[i] && n + 1 < len; i++)
		dst[n++] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : ' ';
	dst[n] = '\0';
}

bool im_multicast_spec(const char *spec, unsigned *portbase, char *iface, size_t ifacelen,
		       bool *bad)
{
	const char *p;

	*bad = false;
	*portbase = 0;
	if (ifacelen)
		iface[0] = '\0';
	if (strncmp(spec, "multicast:", 10))
		return false;
	p = spec + 10;
	if (*p && *p != ':') {
		char *end;
		errno = 0;
		unsigned long v = strtoul(p, &end, 10);
		/* (udpcast uses portbase and portbase + 1, imager's reports + 2) */
		if (errno || end == p || !isdigit((unsigned char)*p) || v < 1024 || v > 65533 ||
		    (*end && *end != ':')) {
			*bad = true;
			return true;
		}
		*portbase = (unsigned)v;
		p = end;
	}
	if (*p == ':') {
		p++;
		size_t n = strlen(p);
		if (!n || n >= ifacelen || n >= 16 || strspn(p, "abcdefghijklmnopqrstuvwxyz"
						   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@") != n)
			*bad = true;
		else
			memcpy(iface, p, n + 1);
	}
	return true;
}

/* ---- sending ---- */

/* The image checked as a restore would, before anything is sent. */
static int check_folder(const char *dir, struct img_manifest *m, struct im_err *err)
{
	int r;

	if ((r = img_manifest_read(m, dir, err)) < 0)
		return r;
	for (size_t i = 0; r == 0 && i < m->nparts; i++) {
		struct img_index ix;
		if ((r = image_check_part_files(dir, &m->parts[i], &ix, true, err)) == 0)
			img_index_free(&ix);
	}
	for (size_t i = 0; r == 0 && i < m->nareas; i++) {
		unsigned char *buf = NULL;
		r = image_read_area(dir, &m->areas[i], &buf, err);
		free(buf);
	}
	if (r < 0)
		img_manifest_free(m);
	return r;
}

static int report_socket(unsigned port, struct im_err *err)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1, s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (s < 0)
		return im_errf(err, IM_EXIT_IO, -errno, "a socket for the receivers' reports: %s",
			       strerror(errno));
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int r = -errno;
		close(s);
		return im_errf(err, IM_EXIT_IO, r,
			       "UDP port %u (the receivers' reports: portbase + 2): %s", port,
			       strerror(-r));
	}
	return s;
}

static struct mcast_receiver *receiver_by_ip(struct mcast_report *rep, const char *ip)
{
	for (unsigned i = 0; i < rep->nreceivers; i++)
		if (!strcmp(rep->r[i].ip, ip))
			return &rep->r[i];
	return NULL;
}

/* udp-sender's messages: "New connection from IP  (#N)", "Dropping client
 * #N because of timeout", and its statistics lines ("bytes= ... re-xmits=..."). */
static void parse_sender(const char *msgs, struct mcast_report *rep)
{
	char ipof[MCAST_MAX_RECEIVERS][48] = { { 0 } };

	for (const char *l = msgs; *l;) {
		size_t n = strcspn(l, "\r\n");
		char line[256];
		clean_copy(line, sizeof(line), l, n);
		char ip[48];
		unsigned k;
		if (sscanf(line, "New connection from %47s (#%u)", ip, &k) == 2 &&
		    k < MCAST_MAX_RECEIVERS && inet_pton(AF_INET, ip, &(struct in_addr){ 0 }) == 1) {
			snprintf(ipof[k], sizeof(ipof[k]), "%s", ip);
			if (!receiver_by_ip(rep, ip) && rep->nreceivers < MCAST_MAX_RECEIVERS) {
				struct mcast_receiver *r = &rep->r[rep->nreceivers++];
				memset(r, 0, sizeof(*r));
				str_copy(r->ip, sizeof(r->ip), ip);
				r->exit_code = -1;
			}
		} else if (sscanf(line, "Dropping client #%u", &k) == 1 && k < MCAST_MAX_RECEIVERS &&
			   ipof[k][0]) {
			struct mcast_receiver *r = receiver_by_ip(rep, ipof[k]);
			if (r)
				r->dropped = true;
		} else if (!strncmp(line, "bytes=", 6)) {
			str_copy(rep->sender_stats, sizeof(rep->sender_stats), line);
		}
		l += n;
		l += strspn(l, "\r\n");
	}
}

static void mac_from_arp(struct mcast_receiver *r)
{
	FILE *f = fopen("/proc/net/arp", "re");
	char line[256], ip[64], mac[64];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %*s %*s %63s", ip, mac) == 2 && !strcmp(ip, r->ip) &&
		    strlen(mac) == 17 && strcmp(mac, "00:00:00:00:00:00"))
			str_copy(r->mac, sizeof(r->mac), mac);
	fclose(f);
}

static bool valid_mac(const char *s)
{
	if (strlen(s) != 17)
		return false;
	for (int i = 0; i < 17; i++)
		if (i % 3 == 2 ? s[i] != ':' : !isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* One datagram from from_ip: taken when it is a report of a receiver
 * udp-sender connected. */
static void take_report(struct mcast_report *rep, const char *from_ip, const char *buf, size_t n)
{
	struct mcast_receiver *r = receiver_by_ip(rep, from_ip);
	size_t ml = strlen(MCAST_REPORT_MAGIC);

	if (!r || r->reported || n <= ml || memcmp(buf, MCAST_REPORT_MAGIC, ml))
		return;
	char mac[24] = "", msg[256] = "";
	long code = -1;
	for (const char *l = buf + ml, *end = buf + n; l < end;) {
		const char *nl = memchr(l, '\n', (size_t)(end - l));
		size_t len = nl ? (size_t)(nl - l) : (size_t)(end - l);
		char line[300];
		clean_copy(line, sizeof(line), l, len);
		if (!strncmp(line, "mac=", 4) && valid_mac(line + 4))
			str_copy(mac, sizeof(mac), line + 4);
		else if (!strncmp(line, "exit=", 5)) {
			char *e;
			long v = strtol(line + 5, &e, 10);
			if (e != line + 5 && !*e && v >= 0 && v <= 255)
				code = v;
		} else if (!strncmp(line, "message=", 8))
			str_copy(msg, sizeof(msg), line + 8);
		l += len + 1;
	}
	if (code < 0)
		return;
	r->reported = true;
	r->exit_code = (int)code;
	str_copy(r->message, sizeof(r->message), msg);
	if (mac[0])
		str_copy(r->mac, sizeof(r->mac), mac);
}

static bool all_reported(const struct mcast_report *rep)
{
	for (unsigned i = 0; i < rep->nreceivers; i++)
		if (!rep->r[i].reported && !rep->r[i].dropped)
			return false;
	return true;
}

static void collect_reports(int sock, struct mcast_report *rep, unsigned wait_s,
			    const volatile sig_atomic_t *cancel)
{
	long long deadline = util_mono_ms() + (long long)wait_s * 1000;

	for (;;) {
		char buf[1024];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(sock, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (n > 0 && from.sin_family == AF_INET) {
			char ip[48];
			inet_ntop(AF_INET, &from.sin_addr, ip, sizeof(ip));
			take_report(rep, ip, buf, (size_t)n);
			continue;
		}
		if (all_reported(rep) || util_mono_ms() >= deadline || (cancel && *cancel))
			return;
		struct pollfd p = { .fd = sock, .events = POLLIN };
		poll(&p, 1, 200);
	}
}

/* Write the stream into udp-sender's stdin with SIGPIPE held back in this
 * thread (a udp-sender that ends makes the write fail with EPIPE instead). */
static int send_stream(const char *dir, const struct img_manifest *m, int fd,
		       const struct im_progress *pr, uint64_t *sent, struct im_err *err)
{
	sigset_t pipe_set, old;
	struct timespec zero = { 0, 0 };

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	int r = img_tar_send(dir, m, fd, pr, sent, err);
	while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
		;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

int im_multicast_send(const char *dir, const struct mcast_opts *o, struct mcast_report *rep,
		      struct im_err *err)
{
	struct img_manifest m;
	unsigned port = o->portbase ? o->portbase : MCAST_PORTBASE_DEFAULT;
	char sport[16], smin[16], swait[16], sdrop[16];
	const char *argv[32];
	struct child c;
	int n = 0, r, status = 0, sock;

	memset(rep, 0, sizeof(*rep));
	if ((r = need_tool("udp-sender", err)) < 0)
		return r;
	/* A Clonezilla folder goes as its index: the imager image folder of
	 * the disk it restores to (im_czindex: built once by a restore's pass,
	 * then cached, as `imager serve` uses it) */
	char folder[4200];
	if ((r = im_serve_folder(dir, NULL, folder, sizeof(folder), err)) < 0)
		return r;
	if (strcmp(folder, dir))
		rep->clonezilla_index = true;
	dir = folder;
	if ((r = check_folder(dir, &m, err)) < 0)
		return r;
	if ((sock = report_socket(port + 2, err)) < 0) {
		img_manifest_free(&m);
		return sock;
	}
	snprintf(sport, sizeof(sport), "%u", port);
	snprintf(smin, sizeof(smin), "%u", o->min_receivers ? o->min_receivers : 1);
	snprintf(swait, sizeof(swait), "%u", o->max_wait);
	snprintf(sdrop, sizeof(sdrop), "%u", o->retries_until_drop ? o->retries_until_drop : 30);
	argv[n++] = "udp-sender";
	argv[n++] = "--nokbd";
	argv[n++] = "--portbase";
	argv[n++] = sport;
	argv[n++] = "--min-receivers";
	argv[n++] = smin;
	argv[n++] = "--retries-until-drop";
	argv[n++] = sdrop;
	if (o->max_wait) {
		argv[n++] = "--max-wait";
		argv[n++] = swait;
	}
	if (o->interface) {
		argv[n++] = "--interface";
		argv[n++] = o->interface;
	}
	if (o->max_bitrate) {
		argv[n++] = "--max-bitrate";
		argv[n++] = o->max_bitrate;
	}
	if (o->fec) {
		argv[n++] = "--fec";
		argv[n++] = o->fec;
	}
	argv[n] = NULL;
	r = child_start(&c, "multicast", NULL, argv, CHILD_DIE_WITH_PARENT | CHILD_STDIN_PIPE, err);
	if (r == 0) {
		r = send_stream(dir, &m, c.fd, &o->progress, &rep->stream_bytes, err);
		close(c.fd);   /* (the end of the stream for udp-sender) */
		c.piped = false;
		while (c.pid && !child_reaped(&c, 1000, &status))
			if (o->progress.cancel && *o->progress.cancel)
				break;
		char *msgs = malloc(MESSAGES_MAX);
		if (msgs) {
			child_messages(&c, msgs, MESSAGES_MAX);
			parse_sender(msgs, rep);
			free(msgs);
		}
		char last[256];
		child_last_line(&c, last, sizeof(last));
		bool ended_ok = !c.pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (r == -EPIPE && ended_ok && rep->nreceivers) {
			/* every receiver went away before the end: udp-sender
			 * stopped; what each one says is the report */
			*err = (struct im_err){ 0 };
			r = 0;
		}
		if (r < 0 || !ended_ok) {
			if (r == 0)
				r = im_errf(err, IM_EXIT_IO, -EIO, "udp-sender failed: %s",
					    last[0] ? last : "no message");
			else
				im_err_prefix(err, "udp-sender: %s; ", last[0] ? last : "ended");
		}
		child_stop(&c);
	}
	if (r == 0) {
		collect_reports(sock, rep, o->report_wait ? o->report_wait : 600, o->progress.cancel);
		for (unsigned i = 0; i < rep->nreceivers; i++) {
			if (!rep->r[i].mac[0])
				mac_from_arp(&rep->r[i]);
			rep->ok += rep->r[i].reported && rep->r[i].exit_code == 0;
		}
		if (rep->nreceivers == 0)
			r = im_errf(err, IM_EXIT_TARGET, -ENODEV, "no receiver took the image");
		else if (rep->ok < rep->nreceivers)
			r = im_errf(err, IM_EXIT_SOME_FAILED, -EIO,
				    "%u of %u receivers restored the image; the others failed, were dropped or did not report (restore them from the repository)",
				    rep->ok, rep->nreceivers);
	}
	close(sock);
	img_manifest_free(&m);
	return r;
}

/* ---- receiving ---- */

/* udp-receiver's "UDP receiver for (stdout) at IP on IF" and "Connected as
 * #N to ADDR". */
static void parse_receiver(const char *msgs, char *myif, size_t iflen, char *sender, size_t slen)
{
	for (const char *l = msgs; *l;) {
		size_t n = strcspn(l, "\r\n");
		char line[256], a[64], b[64];
		clean_copy(line, sizeof(line), l, n);
		if (sscanf(line, "UDP receiver for %*s at %63s on %63s", a, b) == 2)
			snprintf(myif, iflen, "%s", b);
		else if (sscanf(line, "Connected as #%*u to %63s", a) == 1 &&
			 inet_pton(AF_INET, a, &(struct in_addr){ 0 }) == 1)
			snprintf(sender, slen, "%s", a);
		l += n;
		l += strspn(l, "\r\n");
	}
}

static void send_report(const char *sender, unsigned port, const char *myif, int code,
			const char *message)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	char mac[64] = "", path[128], buf[600], msg[400];
	int s;

	if (inet_pton(AF_INET, sender, &to.sin_addr) != 1)
		return;
	if (myif[0] && !strchr(myif, '/') && strlen(myif) < 32) {
		snprintf(path, sizeof(path), "/sys/class/net/%s/address", myif);
		FILE *f = fopen(path, "re");
		if (f) {
			if (!fgets(mac, sizeof(mac), f))
				mac[0] = '\0';
			mac[strcspn(mac, "\n")] = '\0';
			fclose(f);
		}
	}
	clean_copy(msg, sizeof(msg), message, strlen(message));
	int n = snprintf(buf, sizeof(buf), "%smac=%s\nexit=%d\nmessage=%s\n", MCAST_REPORT_MAGIC,
			 mac, code, msg);
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return;
	for (int i = 0; i < 5; i++) {   /* (UDP: sent a few times, the sender takes one) */
		sendto(s, buf, (size_t)(n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1), 0,
		       (struct sockaddr *)&to, sizeof(to));
		util_sleep_ms(100);
	}
	close(s);
}

int im_multicast_restore(const struct disk_roots *roots, const char *spec, const char *target,
			 const struct restore_opts *opts, struct restore_stats *stats,
			 struct im_err *err)
{
	unsigned port;
	char iface[32], sport[16], myif[64] = "", sender[64] = "";
	const char *argv[12];
	bool bad;
	struct child c;
	int n = 0, r, status = 0;

	memset(stats, 0, sizeof(*stats));
	if (!im_multicast_spec(spec, &port, iface, sizeof(iface), &bad) || bad)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "%s: not multicast:[PORTBASE][:INTERFACE] (PORTBASE 1024-65533)", spec);
	if (!port)
		port = MCAST_PORTBASE_DEFAULT;
	if (opts->resume)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "a multicast restore cannot be resumed: restore from the repository instead");
	if ((r = need_tool("udp-receiver", err)) < 0)
		return r;
	snprintf(sport, sizeof(sport), "%u", port);
	argv[n++] = "udp-receiver";
	argv[n++] = "--nokbd";
	argv[n++] = "--no-progress";
	argv[n++] = "--portbase";
	argv[n++] = sport;
	if (iface[0]) {
		argv[n++] = "--interface";
		argv[n++] = iface;
	}
	argv[n] = NULL;
	if ((r = child_start(&c, "multicast", NULL, argv, CHILD_DIE_WITH_PARENT | CHILD_STDOUT_PIPE,
			     err)) < 0)
		return r;
	r = im_restore_stream(roots, c.fd, "the multicast stream", target, opts, stats, err);
	if (r == 0) {   /* (the rest of the stream, for udp-receiver to end cleanly) */
		char buf[65536];
		while (read(c.fd, buf, sizeof(buf)) > 0)
			;
		child_reaped(&c, 30000, &status);
	}
	close(c.fd);    /* (on a failure, udp-receiver ends on its next write) */
	c.piped = false;
	if (r < 0)
		child_reaped(&c, 5000, &status);
	char msgs[8192], last[200];
	child_messages(&c, msgs, sizeof(msgs));
	parse_receiver(msgs, myif, sizeof(myif), sender, sizeof(sender));
	child_last_line(&c, last, sizeof(last));
	if (r < 0 && last[0])   /* (what udp-receiver said last: why the stream ended) */
		im_err_prefix(err, "udp-receiver: \"%s\"; ", last);
	child_stop(&c);
	if (sender[0]) {
		char line[400];
		if (r == 0)
			snprintf(line, sizeof(line), "restored onto %s", target);
		else
			str_copy(line, sizeof(line), err->msg);
		send_report(sender, port + 2, myif, r == 0 ? 0 : err->exit_class, line);
	}
	return r;
}
