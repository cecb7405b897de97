/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fleets (engine room fleet/, above jobs): one image onto many machines at
 * once by multicast, through udpcast (Debian's udpcast: udp-sender and
 * udp-receiver, run as children of imager).
 *
 * What is sent is the image folder as one tar stream (image/imgtar.h:
 * manifest, boot areas and indexes first, then each partition's
 * compressed frames), so the network carries the image's size once,
 * whatever the number of receivers, and each receiver decompresses with
 * its own cores.  udpcast's protocol is reliable: the sender goes at the
 * pace of the slowest receiver and drops one that stops answering
 * (--retries-until-drop), the others carrying on.
 *
 * Each receiver restores with imager's own restore (im_restore_stream:
 * frames checked, shrink or grow to its disk, table last) and then sends
 * its result, one UDP datagram repeated a few times, to the sender's
 * address (from udp-receiver's "Connected ... to ADDR") on port
 * portbase + 2:
 *     "imager-multicast-report 1\n" "mac=M\n" "ip=A\n" "exit=N\n" "message=TEXT\n"
 * The sender listens there from before the transfer until every receiver
 * udp-sender connected has reported (or was dropped) or report_wait
 * seconds after the transfer have passed.  Every field of a report is
 * treated as hostile (size, form, a known receiver's address only).
 *
 * Nothing here prints or exits.
 */
#ifndef IMAGER_FLEET_H
#define IMAGER_FLEET_H

#include <stdbool.h>
#include <stdint.h>

#include "imager/error.h"
#include "imager/job.h"
#include "imager/pipeline.h"

#define MCAST_PORTBASE_DEFAULT 9000
#define MCAST_MAX_RECEIVERS 256
#define MCAST_REPORT_MAGIC "imager-multicast-report 1\n"

struct mcast_opts {
	unsigned portbase;          /* udpcast's (0: 9000); reports on portbase + 2 */
	const char *interface;      /* NULL: udp-sender's own choice */
	unsigned min_receivers;     /* start once this many are connected (0: 1) */
	unsigned max_wait;          /* ... or this many seconds after the first (0: wait for min_receivers) */
	const char *max_bitrate;    /* udp-sender's form ("100m"); NULL: no limit */
	const char *fec;            /* forward error correction, udp-sender's "8x8/128"; NULL: none */
	unsigned retries_until_drop;/* a receiver not answering this many times is dropped (0: 30) */
	unsigned report_wait;       /* seconds to wait for reports after the transfer (0: 600) */
	struct im_progress progress;/* the bytes of the streams handed to udp-sender */
};

struct mcast_receiver {
	char ip[48];
	char mac[24];               /* from its report, else this host's ARP table, else "" */
	bool reported;              /* its report came */
	bool dropped;               /* udp-sender dropped it (it stopped answering) */
	int exit_code;              /* its imager's exit code (enum im_exit) when reported */
	char message[256];          /* its result line when reported */
};

struct mcast_report {
	uint64_t stream_bytes;      /* the tar stream's size: sent once */
	unsigned nreceivers;
	struct mcast_receiver r[MCAST_MAX_RECEIVERS];
	unsigned ok;                /* reported exit 0 */
	char sender_stats[160];     /* udp-sender's last statistics line (bytes, re-xmits) */
	bool clonezilla_index;      /* dir was a Clonezilla folder: its index was sent */
};

/* Send the image folder dir to every receiver that connects.  A Clonezilla
 * folder is sent as its index (im_serve_folder, job.h: the imager image
 * folder of the disk it restores to, built by one restore's pass into the
 * index cache, $IMAGER_CZINDEX_DIR, and reused from there), so receivers
 * restore imager's frames either way.  The image is checked first
 * (manifest, indexes, boot areas, stream sizes).  0 when the transfer ended and every
 * receiver reported success; IM_EXIT_SOME_FAILED when it ended but a
 * receiver failed, was dropped or did not report (rep says which); else
 * negative errno with err (no receiver came: IM_EXIT_TARGET; udp-sender
 * missing or failing: IM_EXIT_UNSUPP/IM_EXIT_IO).  rep is filled in every
 * case. */
int im_multicast_send(const char *dir, const struct mcast_opts *o, struct mcast_report *rep,
		      struct im_err *err);

/* "multicast:" , "multicast:PORTBASE" or "multicast:PORTBASE:INTERFACE":
 * true and the parts filled (portbase 0 when not given), false when spec
 * does not begin with "multicast:" or is malformed (*bad set then). */
bool im_multicast_spec(const char *spec, unsigned *portbase, char *iface, size_t ifacelen,
		       bool *bad);

/* The receiving side of the above: udp-receiver started (on portbase and
 * interface from spec), its output restored onto target
 * (im_restore_stream), the result reported to the sender.  opts as for
 * im_restore (not resume).  Returns as im_restore; udp-receiver missing:
 * IM_EXIT_UNSUPP. */
int im_multicast_restore(const struct disk_roots *roots, const char *spec, const char *target,
			 const struct restore_opts *opts, struct restore_stats *stats,
			 struct im_err *err);

#endif
