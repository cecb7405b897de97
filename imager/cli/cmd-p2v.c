/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager p2v SOURCE... --name NAME [--connect URI]... [--pool auto|NAME]
 *            [--format raw|qcow2] [--preallocation off|metadata|falloc|full]
 *            [--output DIR] [--start] [--force] [--probe] [--no-convert]
 *            [--rebuild-initramfs] [--key ID:PASSPHRASE] [--key-file ID:FILE] [--upload]
 *            [--facts FILE] [domain options] [--json]
 *            [--no-progress]
 *
 * The whole move: every SOURCE (a disk, an image file, an image folder or
 * an NBD export) becomes a disk of the new machine, the guest is converted
 * for virtio, and the VM is defined.
 *
 * The job is im_p2v() (include/imager/p2v.h: the pool's choice, volumes
 * and their rollback, upload, --force, the output folder); this file parses
 * the options, calls it, and prints its phases on stderr and its report on
 * stdout (text, or --json).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "commands.h"
#include "imager/p2v.h"

enum {
	OPT_CONNECT = 400, OPT_POOL, OPT_FORMAT, OPT_PREALLOC, OPT_OUTPUT, OPT_START, OPT_FORCE,
	OPT_PROBE, OPT_NO_CONVERT, OPT_REBUILD, OPT_VIRTIO_WIN, OPT_JSON, OPT_NO_PROGRESS, OPT_UPLOAD,
	OPT_FACTS, OPT_DISK_SIZE, OPT_SHRINK, OPT_INSTANT, OPT_COPY_RATE, OPT_RESUME,
};

/* What the job's phases are printed with. */
struct show {
	const struct cli *cli;
	const struct p2v_report *rep;
	bool json, progress;
	struct cli_progress prog;
	bool drawing;                /* a disk is being written: its progress is on */
};

static void end_progress(struct show *s)
{
	if (s->drawing)
		cli_progress_end(&s->prog);
	s->drawing = false;
}

/* The job's phases as stderr lines: what it does (not with -q or --json),
 * warnings (always), notes (not with -q), the host (-v), the plan. */
static void show_phase(void *opaque, enum p2v_phase phase, const char *msg)
{
	struct show *s = opaque;
	bool talk = s->cli->verbose >= 0 && !s->json;

	switch (phase) {
	case P2V_WRITE:
		cli_progress_init(&s->prog, s->progress && talk);
		s->prog.notes = talk;   /* (a shrink's plan) */
		s->drawing = true;
		return;
	case P2V_WRITTEN:
		end_progress(s);
		break;
	case P2V_WARNING:
		fprintf(stderr, "imager p2v: warning: %s\n", msg);
		return;
	case P2V_NOTE:
		talk = s->cli->verbose >= 0;
		break;
	case P2V_HOST:
		if (s->cli->verbose >= 1)
			fprintf(stderr, "imager p2v: host: %s\n", msg);
		return;
	case P2V_CONVERTED:
		if (talk && s->rep->convert.r == 0)
			cli_convert_text(&s->rep->convert.rep, stderr);
		return;
	case P2V_PLANNED:
		cli_domain_print_plan("p2v", &s->rep->plan, s->cli);
		return;
	case P2V_POOL:
	case P2V_CONVERT:
	case P2V_UPLOAD:
		break;
	}
	if (talk)
		fprintf(stderr, "imager p2v: %s\n", msg);
}

static json_object *report_json(const struct p2v_report *r, const char *name)
{
	json_object *root = json_object_new_object(), *disks = json_object_new_array();
	const struct conv_step *c = &r->convert;

	json_object_object_add(root, "ok", json_object_new_boolean(1));
	json_object_object_add(root, "name", json_object_new_string(name));
	for (size_t i = 0; i < r->ndisks; i++) {
		const struct p2v_disk *d = &r->disks[i];
		json_object *o = json_object_new_object();

		json_object_object_add(o, "source", json_object_new_string(d->source));
		json_object_object_add(o, "name", json_object_new_string(d->name));
		json_object_object_add(o, "path", json_object_new_string(d->path));
		json_object_object_add(o, "format", json_object_new_string(d->format));
		json_object_object_add(o, "preallocation",
				       json_object_new_string(bk_prealloc_name(d->prealloc)));
		json_object_object_add(o, "capacity", json_object_new_uint64(d->capacity));
		json_object_array_add(disks, o);
	}
	json_object_object_add(root, "disks", disks);
	json_object *notes = json_object_new_array(), *warnings = json_object_new_array();
	for (size_t i = 0; i < sizeof(r->notes) / sizeof(r->notes[0]) && r->notes[i][0]; i++)
		json_object_array_add(notes, json_object_new_string(r->notes[i]));
	for (size_t i = 0; i < sizeof(r->warnings) / sizeof(r->warnings[0]) && r->warnings[i][0]; i++)
		json_object_array_add(warnings, json_object_new_string(r->warnings[i]));
	json_object_object_add(root, "notes", notes);
	json_object_object_add(root, "warnings", warnings);
	json_object_object_add(root, r->host ? "host" : "output",
			       json_object_new_string(r->host ? r->host : r->output));
	json_object_object_add(root, "pool", r->host ? json_object_new_string(r->pool) : NULL);
	json_object_object_add(root, "convert", c->ran ? cli_convert_json(&c->rep, c->r < 0 ? &c->err : NULL)
						       : NULL);
	json_object_object_add(root, "definition", cli_domain_json(&r->plan));
	json_object_object_add(root, "started", json_object_new_boolean(r->started));
	return root;
}

static int print_report(const struct p2v_report *r, const char *name, bool json, const struct cli *cli)
{
	const char *s = r->ndisks == 1 ? "" : "s";

	if (json)
		cli_print_json(report_json(r, name));
	else if (cli->verbose >= 0 && r->host)
		printf("defined %s on %s (pool %s, %zu disk%s, %s %s)%s\n", name, r->host, r->pool,
		       r->ndisks, s, r->disks[0].format, bk_prealloc_name(r->disks[0].prealloc),
		       r->started ? ", started" : "");
	else if (cli->verbose >= 0)
		printf("wrote %s and %zu disk%s in %s (define it: virsh define %s)\n", r->xml_path,
		       r->ndisks, s, r->output, r->xml_path);
	return cli_finish_stdout("p2v", IM_EXIT_OK);
}

/* The job's error, then what its rollback could not undo. */
static int print_failure(const struct p2v_report *r, const struct im_err *err)
{
	int rc = cli_fail("p2v", err);

	for (size_t i = 0; i < P2V_MAX_SOURCES; i++)
		if (r->rollback[i][0])
			fprintf(stderr, "imager p2v: %s\n", r->rollback[i]);
	return rc;
}

/* The command line: the job's options, and how to show it. */
struct cmdline {
	struct p2v_opts o;
	struct cli_keys keys;        /* --key, --key-file */
	struct cli_domain d;
	const char *uris[P2V_MAX_HOSTS];
	const char *facts;           /* --facts FILE */
	struct dom_machine machine;  /* what it says */
	bool json, progress;
};

/* One of p2v's own options: 0, or the exit code of a bad one. */
static int parse_option(int c, const char *arg, struct cmdline *l)
{
	struct p2v_opts *o = &l->o;

	switch (c) {
	case OPT_CONNECT:
		if (o->nuris == P2V_MAX_HOSTS)
			return cli_usage("p2v", "at most %d --connect", P2V_MAX_HOSTS);
		l->uris[o->nuris++] = arg;
		break;
	case OPT_POOL: o->pool = arg; break;
	case OPT_FORMAT:
		if (strcmp(arg, "raw") && strcmp(arg, "qcow2"))
			return cli_usage("p2v", "--format takes raw or qcow2");
		o->format = arg;
		break;
	case OPT_PREALLOC:
		if (bk_prealloc_parse(arg, &o->prealloc) < 0)
			return cli_usage("p2v", "--preallocation takes off, metadata, falloc or full");
		o->prealloc_set = true;
		break;
	case OPT_OUTPUT: o->output = arg; break;
	case OPT_START: o->start = true; break;
	case OPT_FORCE: o->force = true; break;
	case OPT_PROBE: o->probe = true; break;
	case OPT_NO_CONVERT: o->convert = false; break;
	case OPT_REBUILD: o->rebuild_initramfs = true; break;
	case OPT_VIRTIO_WIN: o->virtio_win = arg; break;
	case OPT_JSON: l->json = true; break;
	case OPT_NO_PROGRESS: l->progress = false; break;
	case OPT_UPLOAD: o->upload = true; break;
	case OPT_FACTS: l->facts = arg; break;
	case OPT_DISK_SIZE:
		if (cli_parse_size(arg, &o->disk_size) < 0 || !o->disk_size)
			return cli_usage("p2v", "--disk-size takes a size such as 20G or 512MiB");
		break;
	case OPT_SHRINK: o->shrink = true; break;
	case OPT_INSTANT: o->instant = o->start = true; break;
	case OPT_RESUME: o->resume = true; break;
	case OPT_COPY_RATE:
		if (cli_parse_size(arg, &o->copy_rate) < 0 || o->copy_rate < (1u << 20))
			return cli_usage("p2v", "--copy-rate takes bytes per second, at least 1M "
					 "(such as 50M)");
		break;
	default: return cli_usage("p2v", "unknown option");
	}
	return 0;
}

/* What the options say together: 0, or IM_EXIT_USAGE. */
static int check_options(const struct cmdline *l)
{
	const struct p2v_opts *o = &l->o;
	const char *name = l->d.o.name;

	if (o->nsources < 1)
		return cli_usage("p2v", "needs SOURCE");
	if (o->nsources > P2V_MAX_SOURCES)
		return cli_usage("p2v", "at most %d sources", P2V_MAX_SOURCES);
	if (!name)
		return cli_usage("p2v", "needs --name NAME");
	if (!dom_name_ok(name))
		return cli_usage("p2v", "--name '%s': use 1 to 64 letters, digits, '_', '.', '+', '-'",
				 name);
	if (!o->nuris && (o->pool || o->start || o->probe || o->upload))
		return cli_usage("p2v", "--pool, --start, --probe and --upload need --connect");
	if (o->prealloc_set && o->prealloc == BK_PREALLOC_METADATA && o->format &&
	    strcmp(o->format, "qcow2"))
		return cli_usage("p2v", "--preallocation metadata is for qcow2");
	if (o->nuris && o->output)
		return cli_usage("p2v", "--output is for a job without --connect");
	if ((o->copy_rate || o->resume) && !o->instant)
		return cli_usage("p2v", "--copy-rate and --resume are for --instant");
	if (o->resume && o->force)
		return cli_usage("p2v", "--resume carries a stopped --instant job on, --force drops it: "
				 "one or the other");
	if (o->instant && (!o->nuris || o->upload || o->disk_size || o->shrink))
		return cli_usage("p2v", "--instant needs --connect, and takes no --upload, "
				 "--disk-size or --shrink");
	return 0;
}

static int parse(int argc, char **argv, struct cmdline *l)
{
	static const struct option opts[] = {
		CLI_DOMAIN_OPTIONS,
		{ "connect", required_argument, NULL, OPT_CONNECT },
		{ "pool", required_argument, NULL, OPT_POOL },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "preallocation", required_argument, NULL, OPT_PREALLOC },
		{ "output", required_argument, NULL, OPT_OUTPUT },
		{ "start", no_argument, NULL, OPT_START },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ "probe", no_argument, NULL, OPT_PROBE },
		{ "no-convert", no_argument, NULL, OPT_NO_CONVERT },
		{ "rebuild-initramfs", no_argument, NULL, OPT_REBUILD },
		{ "virtio-win", required_argument, NULL, OPT_VIRTIO_WIN },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
		{ "upload", no_argument, NULL, OPT_UPLOAD },
		{ "facts", required_argument, NULL, OPT_FACTS },
		{ "disk-size", required_argument, NULL, OPT_DISK_SIZE },
		{ "shrink", no_argument, NULL, OPT_SHRINK },
		{ "instant", no_argument, NULL, OPT_INSTANT },
		{ "copy-rate", required_argument, NULL, OPT_COPY_RATE },
		{ "resume", no_argument, NULL, OPT_RESUME },
		CLI_KEY_OPTIONS,
		{ "timeout", required_argument, NULL, CLI_OPT_TIMEOUT },
		{ "retries", required_argument, NULL, CLI_OPT_RETRIES },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int t = cli_domain_option("p2v", c, optarg, &l->d);
		if (t == CLI_NOT_MINE)
			t = cli_net_option("p2v", c, optarg, &l->o.net);
		if (t == CLI_NOT_MINE)
			t = cli_key_option("p2v", c, optarg, &l->keys);
		if (t == CLI_NOT_MINE)
			t = parse_option(c, optarg, l);
		if (t != IM_EXIT_OK)
			return t;
	}
	l->o.sources = (const char *const *)(argv + optind);
	l->o.nsources = (size_t)(argc - optind);
	l->o.uris = l->uris;
	l->o.dom = l->d.o;
	l->o.keys = l->keys.k;
	l->o.nkeys = l->keys.n;
	if (l->keys.n && !l->o.convert)
		return cli_usage("p2v", "--key and --key-file are for the conversion (not with --no-convert)");
	return check_options(l);
}

/* imager run: p2v --instant, on this machine's libvirtd unless --connect
 * names another. */
static int p2v_main(int argc, char **argv, struct cli *cli, bool run)
{
	static struct p2v_report rep;
	struct cmdline l = { .o.convert = true, .progress = true };
	struct show s = { .cli = cli, .rep = &rep };
	struct im_err err = { 0 };
	int rc, r;

	if (run) {
		l.o.instant = l.o.start = true;
		l.uris[l.o.nuris++] = "qemu:///system";
	}
	if ((rc = parse(argc, argv, &l)) != 0)
		return rc;
	if (run && l.o.nuris > 1) {   /* --connect given: it replaces the default */
		memmove(l.uris, l.uris + 1, (l.o.nuris - 1) * sizeof(l.uris[0]));
		l.o.nuris--;
	}
	if (l.facts) {   /* the source machine's, from its live media */
		if (dom_machine_from_file(l.facts, &l.machine, &err) < 0)
			return cli_fail("p2v", &err);
		l.o.machine = &l.machine;
	}
	l.o.roots = &cli->roots;
	l.o.progress = (struct im_progress){ cli_progress_cb, &s.prog, cli->interrupted,
					     cli_progress_note };
	l.o.phase = show_phase;
	l.o.opaque = &s;
	s.json = l.json;
	s.progress = l.progress;
	r = im_p2v(&l.o, &rep, &err);
	cli_keys_free(&l.keys);
	end_progress(&s);
	rc = r < 0 ? print_failure(&rep, &err) : print_report(&rep, l.d.o.name, l.json, cli);
	p2v_report_free(&rep);
	return rc;
}

int cmd_p2v(int argc, char **argv, struct cli *cli)
{
	return p2v_main(argc, argv, cli, false);
}

int cmd_run(int argc, char **argv, struct cli *cli)
{
	return p2v_main(argc, argv, cli, true);
}
