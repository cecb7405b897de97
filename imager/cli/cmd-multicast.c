/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager multicast DIR [--min-receivers N] [--max-wait S] [--max-bitrate R]
 *                      [--interface IF] [--fec SPEC] [--portbase P]
 *                      [--retries-until-drop N] [--report-wait S] [--json]
 *                      [--no-progress]
 *
 * One image folder to every receiver at once (im_multicast_send,
 * include/imager/fleet.h); then the report, one line per receiver.
 * Exit 0 when every receiver restored it, 12 when some did not.
 */
#include <getopt.h>
#include <json-c/json.h>
#include <string.h>

#include "commands.h"
#include "imager/fleet.h"

enum { OPT_MIN = 500, OPT_WAIT, OPT_RATE, OPT_IF, OPT_FEC, OPT_PORT, OPT_DROP, OPT_REPORT,
       OPT_JSON, OPT_NOPROG };

/* udp-sender's bitrate: digits, then k, m or g. */
static bool bitrate_ok(const char *s)
{
	size_t d = strspn(s, "0123456789");
	return d && d <= 9 && (!s[d] || (strchr("kKmMgG", s[d]) && !s[d + 1]));
}

/* udp-sender's FEC: STRIPESxREDUNDANCY/STRIPESIZE, numbers only. */
static bool fec_ok(const char *s)
{
	unsigned a, b, c;
	char end;
	return strlen(s) < 24 && sscanf(s, "%ux%u/%u%c", &a, &b, &c, &end) == 3 && a && b && c &&
	       a <= 128 && b <= 128 && c <= 1024;
}

static const char *result_of(const struct mcast_receiver *r, char *buf, size_t len)
{
	if (r->reported && r->exit_code == 0)
		snprintf(buf, len, "ok: %s", r->message);
	else if (r->reported)
		snprintf(buf, len, "failed (exit %d): %s", r->exit_code, r->message);
	else if (r->dropped)
		snprintf(buf, len, "dropped: it stopped answering during the transfer");
	else
		snprintf(buf, len, "no report: it received the image but did not say how its restore went");
	return buf;
}

static void print_json(const char *dir, const struct mcast_report *rep, int r, double secs)
{
	json_object *root = json_object_new_object(), *arr = json_object_new_array();
	char buf[400];

	json_object_object_add(root, "image", json_object_new_string(dir));
	json_object_object_add(root, "stream_bytes", json_object_new_uint64(rep->stream_bytes));
	json_object_object_add(root, "seconds", json_object_new_double(secs));
	json_object_object_add(root, "sender_stats", json_object_new_string(rep->sender_stats));
	json_object_object_add(root, "ok", json_object_new_int((int)rep->ok));
	json_object_object_add(root, "clonezilla_index", json_object_new_boolean(rep->clonezilla_index));
	for (unsigned i = 0; i < rep->nreceivers; i++) {
		const struct mcast_receiver *x = &rep->r[i];
		json_object *o = json_object_new_object();
		json_object_object_add(o, "ip", json_object_new_string(x->ip));
		json_object_object_add(o, "mac", json_object_new_string(x->mac));
		json_object_object_add(o, "result",
				       json_object_new_string(x->reported ? (x->exit_code ? "failed" : "ok") :
							      x->dropped ? "dropped" : "no-report"));
		if (x->reported)
			json_object_object_add(o, "exit", json_object_new_int(x->exit_code));
		json_object_object_add(o, "message", json_object_new_string(result_of(x, buf, sizeof(buf))));
		json_object_array_add(arr, o);
	}
	json_object_object_add(root, "receivers", arr);
	json_object_object_add(root, "exit", json_object_new_int(r));
	cli_print_json(root);
}

int cmd_multicast(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "min-receivers", required_argument, NULL, OPT_MIN },
		{ "max-wait", required_argument, NULL, OPT_WAIT },
		{ "max-bitrate", required_argument, NULL, OPT_RATE },
		{ "interface", required_argument, NULL, OPT_IF },
		{ "fec", required_argument, NULL, OPT_FEC },
		{ "portbase", required_argument, NULL, OPT_PORT },
		{ "retries-until-drop", required_argument, NULL, OPT_DROP },
		{ "report-wait", required_argument, NULL, OPT_REPORT },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "no-progress", no_argument, NULL, OPT_NOPROG },
		{ NULL, 0, NULL, 0 },
	};
	struct mcast_opts o = { 0 };
	static struct mcast_report rep;
	struct cli_progress prog;
	struct im_err err = { 0 };
	bool json = false, progress = true;
	int c, r;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_MIN:
			if (cli_parse_uint(optarg, 1, MCAST_MAX_RECEIVERS, &o.min_receivers) < 0)
				return cli_usage("multicast", "--min-receivers takes 1..%d", MCAST_MAX_RECEIVERS);
			break;
		case OPT_WAIT:
			if (cli_parse_uint(optarg, 1, 86400, &o.max_wait) < 0)
				return cli_usage("multicast", "--max-wait takes 1..86400 seconds");
			break;
		case OPT_RATE:
			if (!bitrate_ok(optarg))
				return cli_usage("multicast", "--max-bitrate takes a number with k, m or g (bits per second), e.g. 500m");
			o.max_bitrate = optarg;
			break;
		case OPT_IF:
			if (!*optarg || strlen(optarg) >= 16 || strchr(optarg, '/'))
				return cli_usage("multicast", "--interface takes a network interface's name");
			o.interface = optarg;
			break;
		case OPT_FEC:
			if (!fec_ok(optarg))
				return cli_usage("multicast", "--fec takes STRIPESxREDUNDANCY/STRIPESIZE, e.g. 8x8/128");
			o.fec = optarg;
			break;
		case OPT_PORT:
			if (cli_parse_uint(optarg, 1024, 65533, &o.portbase) < 0)
				return cli_usage("multicast", "--portbase takes 1024..65533");
			break;
		case OPT_DROP:
			if (cli_parse_uint(optarg, 1, 100000, &o.retries_until_drop) < 0)
				return cli_usage("multicast", "--retries-until-drop takes 1..100000");
			break;
		case OPT_REPORT:
			if (cli_parse_uint(optarg, 1, 86400, &o.report_wait) < 0)
				return cli_usage("multicast", "--report-wait takes 1..86400 seconds");
			break;
		case OPT_JSON: json = true; break;
		case OPT_NOPROG: progress = false; break;
		default: return cli_usage("multicast", "unknown option");
		}
	}
	if (argc - optind != 1)
		return cli_usage("multicast", "needs DIR, an image folder");
	const char *dir = argv[optind];
	cli_progress_job(&prog, progress && !json, cli, &o.progress);
	double t0 = cli_now();
	if (cli->verbose >= 0 && !json)
		fprintf(stderr, "imager multicast: sending %s%s; receivers boot with imager.run=\"restore multicast:%u DISK\"\n",
			dir, img_is_clonezilla(dir) ? " (a Clonezilla image: its index, built once)" : "",
			o.portbase ? o.portbase : MCAST_PORTBASE_DEFAULT);
	r = im_multicast_send(dir, &o, &rep, &err);
	cli_progress_end(&prog);
	if (r < 0 && err.exit_class != IM_EXIT_SOME_FAILED)
		return cli_fail("multicast", &err);
	if (json) {
		print_json(dir, &rep, r < 0 ? err.exit_class : 0, cli_now() - t0);
	} else if (cli->verbose >= 0 || r < 0) {
		char a[32], buf[400];
		cli_human(rep.stream_bytes, a, sizeof(a));
		printf("sent %s once: %s to %u receiver%s in %.1f s (udp-sender: %s)\n", dir, a,
		       rep.nreceivers, rep.nreceivers == 1 ? "" : "s", cli_now() - t0,
		       rep.sender_stats[0] ? rep.sender_stats : "no statistics");
		for (unsigned i = 0; i < rep.nreceivers; i++)
			printf("  %-15s  %-17s  %s\n", rep.r[i].ip, rep.r[i].mac[0] ? rep.r[i].mac : "-",
			       result_of(&rep.r[i], buf, sizeof(buf)));
		printf("%u of %u receivers restored the image\n", rep.ok, rep.nreceivers);
	}
	if (r < 0)
		cli_error("multicast", "%s", err.msg);
	return cli_finish_stdout("multicast", r < 0 ? err.exit_class : IM_EXIT_OK);
}
