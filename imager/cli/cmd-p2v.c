/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager p2v SOURCE... --name NAME [--connect URI]... [--pool auto|NAME]
 *            [--format raw|qcow2] [--preallocation off|metadata|falloc|full]
 *            [--output DIR] [--start] [--force] [--probe] [--no-convert]
 *            [--rebuild-initramfs] [--upload] [domain options] [--json] [--no-progress]
 *
 * The whole move: every SOURCE (a disk, an image file, an image folder or
 * an NBD export) becomes a disk of the new machine, the guest is converted
 * for virtio, and the VM is defined.
 *
 * With --connect: the pool is chosen (pools.h's ranking; with several
 * hosts, the host whose best pool has the most room), each volume is
 * created through libvirt's storage API with the preallocation chosen, the
 * data is written straight into the volume's file when the host is this
 * machine (else into a temporary file here, converted, then uploaded
 * through a libvirt stream; --upload takes that way for a local host too),
 * the domain is defined and, with --start,
 * started.  Without --connect: the disks and NAME.xml go into --output DIR
 * (default ./NAME), ready for `virsh define`.
 *
 * Failure leaves nothing half-made: volumes and files created by the job are
 * deleted again; the domain XML is written (or defined) last.  --force
 * replaces: an existing (shut off) domain of that name is undefined and
 * volumes or files of the new disks' names are deleted before anything is
 * written, so a failed --force job leaves neither the old nor the new
 * machine.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libvirt/virterror.h>

#include "commands.h"
#include "imager/backend.h"
#include "imager/convert.h"
#include "imager/image.h"
#include "imager/pools.h"
#include "imager/volume.h"

#define MAX_SOURCES 16
#define MAX_HOSTS 8

enum {
	OPT_CONNECT = 400, OPT_POOL, OPT_FORMAT, OPT_PREALLOC, OPT_OUTPUT, OPT_START, OPT_FORCE,
	OPT_PROBE, OPT_NO_CONVERT, OPT_REBUILD, OPT_VIRTIO_WIN, OPT_JSON, OPT_NO_PROGRESS, OPT_UPLOAD,
};

struct src {
	const char *spec;
	bool folder, block;
	uint64_t size;
};

struct dst {
	char name[256];              /* volume or file name */
	char path[4096];             /* the file, or the volume's path on its host */
	char tmp[4096];              /* upload: the temporary file written here, "" otherwise */
	virStorageVolPtr vol;
	bool created;                /* ours to delete on failure */
};

/* Where the data is written on this machine. */
static const char *local_path(const struct dst *d) { return d->tmp[0] ? d->tmp : d->path; }

struct host {
	const char *uri;
	virConnectPtr conn;
	bool local;
	struct im_pool *pools;
	size_t npools;
};

struct job {
	struct cli *cli;
	struct cli_domain d;
	struct src src[MAX_SOURCES];
	struct dst dst[MAX_SOURCES];
	size_t n;
	const char *format;
	enum bk_prealloc prealloc;
	bool prealloc_set, force, start, json, progress, convert, rebuild, upload;
	const char *virtio_win;
	uint64_t need;
	struct conv_report rep;
	bool have_rep, convertible;
	json_object *conv_json;
};

static int probe_source(struct src *s, struct im_err *err)
{
	struct stat st;

	if (!bk_is_uri(s->spec) && stat(s->spec, &st) < 0)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", s->spec, strerror(errno));
	if (!bk_is_uri(s->spec) && S_ISDIR(st.st_mode)) {
		struct img_manifest m;

		FORWARD_ERR(img_manifest_read(&m, s->spec, err));
		s->folder = true;
		s->size = m.disk_size;
		img_manifest_free(&m);
	} else {
		struct bk *bk;

		FORWARD_ERR(bk_open(s->spec, NULL, 0, &bk, err));
		s->size = bk->size;
		s->block = bk->is_block_device;
		(void)bk_close(bk, err);
	}
	RETURN_IF(s->size == 0, err, IM_EXIT_SOURCE, -EINVAL, "%s: empty disk", s->spec);
	return 0;
}

/* Write source i onto path (an existing volume file, or a new file). */
static int write_disk(struct job *j, size_t i, const char *path)
{
	struct cli_progress prog;
	struct im_err err = { 0 };
	int r;

	cli_progress_init(&prog, j->progress && !j->json && j->cli->verbose >= 0);
	if (j->src[i].folder) {
		struct restore_opts o = { .target = { .format = j->format, .prealloc = j->prealloc } };
		struct restore_stats st;

		o.progress = (struct im_progress){ cli_progress_cb, &prog, j->cli->interrupted };
		r = im_restore(&j->cli->roots, j->src[i].spec, path, &o, &st, &err);
	} else {
		struct clone_opts o = { .target = { .format = j->format, .prealloc = j->prealloc } };
		struct clone_stats st;

		o.progress = (struct im_progress){ cli_progress_cb, &prog, j->cli->interrupted };
		r = im_clone(&j->cli->roots, j->src[i].spec, path, &o, &st, &err);
	}
	cli_progress_end(&prog);
	if (r < 0)
		return cli_fail("p2v", &err);
	if (j->cli->verbose >= 0 && !j->json)
		fprintf(stderr, "imager p2v: %s written to %s\n", j->src[i].spec, path);
	return 0;
}

/* Convert the written disks; a guest the conversion refuses keeps SATA and
 * e1000 when inspection knew its system (with a warning; a disk where no
 * single system was found counts as unknown: virtio), any other failure
 * ends the job. */
static int convert_disks(struct job *j)
{
	struct conv_opts co = { .block = j->d.o.bus && !strcmp(j->d.o.bus, "virtio-scsi")
						 ? CONV_BLOCK_VIRTIO_SCSI : CONV_BLOCK_VIRTIO_BLK,
				.rebuild_initramfs = j->rebuild, .virtio_win = j->virtio_win };
	const char *paths[MAX_SOURCES], *formats[MAX_SOURCES];
	struct im_err err = { 0 };
	int r;

	if (!j->convert)
		return 0;
	for (size_t i = 0; i < j->n; i++) {
		paths[i] = local_path(&j->dst[i]);
		formats[i] = j->format;
	}
	if (j->cli->verbose >= 0 && !j->json)
		fprintf(stderr, "imager p2v: converting the guest for virtio\n");
	r = im_convert(paths, formats, j->n, &co, &j->rep, &err);
	j->have_rep = true;
	j->conv_json = cli_convert_json(&j->rep, r < 0 ? &err : NULL);
	if (r == 0) {
		j->convertible = true;
		if (j->cli->verbose >= 0 && !j->json)
			cli_convert_text(&j->rep, stderr);
		return 0;
	}
	if (r == -EOPNOTSUPP || r == -ENOENT) {
		fprintf(stderr, "imager p2v: warning: the guest was not converted: %s\n", err.msg);
		return 0;
	}
	return cli_fail("p2v", &err);
}

static void guest_facts(struct job *j, struct dom_guest *g)
{
	bool all_block = true;

	memset(g, 0, sizeof(*g));
	if (j->have_rep && j->rep.os_type[0])
		dom_guest_from_report(&j->rep, j->convertible, g);
	for (size_t i = 0; i < j->n; i++)
		all_block &= j->src[i].block;
	if (all_block)   /* live media: the source machine is this one */
		cli_domain_machine(&j->d, g);
}

static void default_prealloc(struct job *j, const char *recommended)
{
	if (j->prealloc_set)
		return;
	if (recommended && bk_prealloc_parse(recommended, &j->prealloc) == 0 &&
	    (j->prealloc != BK_PREALLOC_METADATA || !strcmp(j->format, "qcow2")))
		return;
	j->prealloc = !strcmp(j->format, "qcow2") ? BK_PREALLOC_METADATA : BK_PREALLOC_FALLOC;
}

static json_object *result_json(struct job *j, const struct dom_plan *plan, const char *key,
				const char *where, const char *pool, bool started)
{
	json_object *root = json_object_new_object(), *disks = json_object_new_array();

	json_object_object_add(root, "ok", json_object_new_boolean(1));
	json_object_object_add(root, "name", json_object_new_string(j->d.o.name));
	for (size_t i = 0; i < j->n; i++) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "source", json_object_new_string(j->src[i].spec));
		json_object_object_add(o, "name", json_object_new_string(j->dst[i].name));
		json_object_object_add(o, "path", json_object_new_string(j->dst[i].path));
		json_object_object_add(o, "format", json_object_new_string(j->format));
		json_object_object_add(o, "preallocation", json_object_new_string(bk_prealloc_name(j->prealloc)));
		json_object_object_add(o, "capacity", json_object_new_uint64(j->src[i].size));
		json_object_array_add(disks, o);
	}
	json_object_object_add(root, "disks", disks);
	json_object_object_add(root, key, json_object_new_string(where));
	json_object_object_add(root, "pool", pool ? json_object_new_string(pool) : NULL);
	json_object_object_add(root, "convert", j->conv_json ? json_object_get(j->conv_json) : NULL);
	json_object_object_add(root, "definition", cli_domain_json(plan));
	json_object_object_add(root, "started", json_object_new_boolean(started));
	return root;
}

static void print_json(json_object *root)
{
	puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
					    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(root);
}

/* ---- without a daemon: an output folder ---- */

static int p2v_folder(struct job *j, const char *dir)
{
	const char *ext = !strcmp(j->format, "qcow2") ? "qcow2" : "raw";
	struct dom_disk disks[MAX_SOURCES];
	struct dom_guest g;
	struct dom_host h;
	struct dom_plan plan;
	struct im_err err = { 0 };
	char xmlpath[4096], why[256], *xml = NULL, *abs = NULL;
	int rc;

	bool made_dir;

	default_prealloc(j, NULL);
	made_dir = mkdir(dir, 0755) == 0;
	if (!made_dir && errno != EEXIST) {   /* the parent must exist */
		cli_error("p2v", "%s: %s", dir, strerror(errno));
		return IM_EXIT_TARGET;
	}
	if (snprintf(xmlpath, sizeof(xmlpath), "%s/%s.xml", dir, j->d.o.name) >= (int)sizeof(xmlpath)) {
		rc = cli_usage("p2v", "--output: path too long");
		goto fail;
	}
	if (!j->force && access(xmlpath, F_OK) == 0) {
		cli_error("p2v", "%s exists (--force replaces it)", xmlpath);
		rc = IM_EXIT_TARGET;
		goto fail;
	}
	abs = realpath(dir, NULL);
	for (size_t i = 0; i < j->n; i++) {
		snprintf(j->dst[i].name, sizeof(j->dst[i].name), "%s-disk%zu.%s", j->d.o.name, i + 1, ext);
		snprintf(j->dst[i].path, sizeof(j->dst[i].path), "%s/%s", dir, j->dst[i].name);
		if (access(j->dst[i].path, F_OK) == 0) {
			if (!j->force) {
				cli_error("p2v", "%s exists (--force replaces it)", j->dst[i].path);
				rc = IM_EXIT_TARGET;
				goto fail;
			}
			if (unlink(j->dst[i].path) < 0) {
				cli_error("p2v", "%s: %s", j->dst[i].path, strerror(errno));
				rc = IM_EXIT_TARGET;
				goto fail;
			}
		}
		/* The XML names absolute paths. */
		if (abs)
			snprintf(j->dst[i].path, sizeof(j->dst[i].path), "%s/%s", abs, j->dst[i].name);
	}
	for (size_t i = 0; i < j->n; i++) {
		if ((rc = write_disk(j, i, j->dst[i].path)) != 0)
			goto fail;
		j->dst[i].created = true;
		disks[i] = (struct dom_disk){ DOM_SRC_FILE, j->dst[i].path, NULL, NULL, j->format };
	}
	if ((rc = convert_disks(j)) != 0)
		goto fail;
	guest_facts(j, &g);
	j->d.o.disks = disks;
	j->d.o.ndisks = j->n;
	dom_host_detect(NULL, true, !j->d.o.type, &h, why, sizeof(why));
	if ((rc = cli_domain_plan("p2v", &j->d, &g, &h, &plan, &xml, j->cli)) != 0)
		goto fail;
	if (cli_write_atomic(xmlpath, xml, strlen(xml), true, &err) < 0) {
		rc = cli_fail("p2v", &err);
		goto fail;
	}
	free(xml);
	free(abs);
	if (j->json)
		print_json(result_json(j, &plan, "output", dir, NULL, false));
	else if (j->cli->verbose >= 0)
		printf("wrote %s and %zu disk%s in %s (define it: virsh define %s)\n", xmlpath, j->n,
		       j->n == 1 ? "" : "s", dir, xmlpath);
	return cli_finish_stdout("p2v", IM_EXIT_OK);
fail:
	free(xml);
	free(abs);
	for (size_t i = 0; i < j->n; i++)
		if (j->dst[i].created)
			unlink(j->dst[i].path);
	if (made_dir)
		(void)rmdir(dir);
	return rc;
}

/* ---- with libvirt: volumes in a pool ---- */

/* The pool: the one named (first host that has it), else the best fitting
 * pool of each host, the host with the most room winning. */
static int choose_pool(struct job *j, struct host *hosts, size_t nh, const char *want,
		       struct host **hp, struct im_pool **pp)
{
	char need[32], avail[32];

	cli_human(j->need, need, sizeof(need));
	*hp = NULL;
	*pp = NULL;
	for (size_t i = 0; i < nh; i++) {
		struct host *h = &hosts[i];
		struct im_pool *p;

		if (!h->conn)
			continue;
		if (want && strcmp(want, "auto")) {
			if (!(p = pools_find(h->pools, h->npools, want)))
				continue;
			if (!p->fits) {
				cli_human(p->available, avail, sizeof(avail));
				cli_error("p2v", "pool %s on %s has %s available; the disks need %s",
					  want, h->uri, avail, need);
				return IM_EXIT_TARGET;
			}
			*hp = h;
			*pp = p;
			return 0;
		}
		p = h->npools ? &h->pools[0] : NULL;      /* ranked: best first */
		if (p && p->fits && (!*pp || p->available > (*pp)->available)) {
			*hp = h;
			*pp = p;
		}
	}
	if (*pp)
		return 0;
	if (want && strcmp(want, "auto")) {
		cli_error("p2v", "no active pool named %s on %s%s", want, hosts[0].uri,
			  nh > 1 ? " or the other hosts" : "");
		return IM_EXIT_TARGET;
	}
	cli_error("p2v", "no active pool has room for %s%s", need,
		  nh > 1 ? " on any of the hosts" : "");
	return IM_EXIT_TARGET;
}

static const char *default_network(virConnectPtr conn)
{
	virNetworkPtr net = virNetworkLookupByName(conn, "default");
	bool up = net && virNetworkIsActive(net) == 1;

	if (net)
		virNetworkFree(net);
	return up ? NULL : "user";
}

static void delete_volumes(struct job *j)
{
	for (size_t i = 0; i < j->n; i++) {
		if (j->dst[i].vol) {
			if (j->dst[i].created && virStorageVolDelete(j->dst[i].vol, 0) < 0)
				fprintf(stderr, "imager p2v: could not delete volume %s: %s\n",
					j->dst[i].name, host_last_error());
			virStorageVolFree(j->dst[i].vol);
			j->dst[i].vol = NULL;
		}
		if (j->dst[i].tmp[0])
			unlink(j->dst[i].tmp);
	}
}

static int p2v_host(struct job *j, struct host *h, struct im_pool *pool)
{
	const char *ext = !strcmp(j->format, "qcow2") ? ".qcow2" : ".raw";
	bool block = vol_pool_is_block(pool->type);
	struct dom_disk disks[MAX_SOURCES];
	virStoragePoolPtr sp = virStoragePoolLookupByName(h->conn, pool->name);
	virDomainPtr dom = virDomainLookupByName(h->conn, j->d.o.name);
	struct dom_guest g;
	struct dom_host hf;
	struct dom_plan plan;
	struct im_err err = { 0 };
	char why[256], *xml = NULL;
	bool started = false, defined = false;
	int rc = IM_EXIT_OK;

	if (!sp) {
		cli_error("p2v", "pool %s: %s", pool->name, host_last_error());
		rc = IM_EXIT_TARGET;
		goto out;
	}
	if (dom) {
		if (!j->force) {
			cli_error("p2v", "domain %s exists on %s (--force replaces it)", j->d.o.name, h->uri);
			rc = IM_EXIT_TARGET;
			goto out;
		}
		if (virDomainIsActive(dom) == 1) {
			cli_error("p2v", "domain %s is running on %s: stop it first", j->d.o.name, h->uri);
			rc = IM_EXIT_TARGET;
			goto out;
		}
	}
	if (block && strcmp(j->format, "raw")) {
		cli_error("p2v", "pool %s is a %s pool: its volumes are raw (--format raw)", pool->name,
			  pool->type);
		rc = IM_EXIT_USAGE;
		goto out;
	}
	/* --force replaces: the old definition goes first, so that no domain
	 * is left pointing at volumes this job deletes and re-creates. */
	if (dom) {
		if (virDomainUndefineFlags(dom, VIR_DOMAIN_UNDEFINE_NVRAM |
					   VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
					   VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA) < 0) {
			cli_error("p2v", "replacing domain %s: %s", j->d.o.name, host_last_error());
			rc = IM_EXIT_TARGET;
			goto out;
		}
		virDomainFree(dom);
		dom = NULL;
	}
	if (j->cli->verbose >= 0 && !j->json)
		fprintf(stderr, "imager p2v: pool %s (%s) on %s, %s %s\n", pool->name, pool->type,
			h->uri, j->format, bk_prealloc_name(j->prealloc));

	for (size_t i = 0; i < j->n; i++) {
		struct dst *d = &j->dst[i];
		char *path;

		snprintf(d->name, sizeof(d->name), "%s-disk%zu%s", j->d.o.name, i + 1, block ? "" : ext);
		if (vol_create(sp, pool->type, d->name, j->src[i].size, j->format, j->prealloc, j->force, &d->vol,
			       &err) < 0) {
			rc = cli_fail("p2v", &err);
			goto fail;
		}
		d->created = true;
		if (!(path = virStorageVolGetPath(d->vol))) {
			cli_error("p2v", "volume %s: %s", d->name, host_last_error());
			rc = IM_EXIT_TARGET;
			goto fail;
		}
		snprintf(d->path, sizeof(d->path), "%s", path);
		free(path);
		if (j->upload || !h->local || access(d->path, W_OK) != 0) {
			/* Not reachable from here: a temporary file, uploaded later. */
			const char *td = getenv("TMPDIR");
			int fd;

			snprintf(d->tmp, sizeof(d->tmp), "%s/imager-p2v-XXXXXX", td && *td ? td : "/var/tmp");
			if ((fd = mkstemp(d->tmp)) < 0) {
				cli_error("p2v", "%s: %s", d->tmp, strerror(errno));
				d->tmp[0] = '\0';
				rc = IM_EXIT_IO;
				goto fail;
			}
			close(fd);
			unlink(d->tmp);       /* restore and clone create it */
		}
		disks[i] = (struct dom_disk){ DOM_SRC_VOLUME, NULL, pool->name, d->name, j->format };
	}
	for (size_t i = 0; i < j->n; i++)
		if ((rc = write_disk(j, i, local_path(&j->dst[i]))) != 0)
			goto fail;
	if ((rc = convert_disks(j)) != 0)
		goto fail;
	for (size_t i = 0; i < j->n; i++) {
		if (!j->dst[i].tmp[0])
			continue;
		if (j->cli->verbose >= 0 && !j->json)
			fprintf(stderr, "imager p2v: uploading %s to %s\n", j->dst[i].name, h->uri);
		if (vol_upload(h->conn, j->dst[i].vol, j->dst[i].tmp, j->cli->interrupted, &err) < 0) {
			rc = cli_fail("p2v", &err);
			goto fail;
		}
		unlink(j->dst[i].tmp);
		j->dst[i].tmp[0] = '\0';
	}

	guest_facts(j, &g);
	j->d.o.disks = disks;
	j->d.o.ndisks = j->n;
	if (!j->d.o.net)
		j->d.o.net = default_network(h->conn);
	if (j->d.o.net && !strcmp(j->d.o.net, "user") && j->cli->verbose >= 0)
		fprintf(stderr, "imager p2v: the host's network 'default' is not active: "
				"user-mode networking (--network or --bridge choose another)\n");
	dom_host_detect(h->conn, h->local, !j->d.o.type, &hf, why, sizeof(why));
	if (j->cli->verbose >= 1)
		fprintf(stderr, "imager p2v: host: %s\n", why);
	if ((rc = cli_domain_plan("p2v", &j->d, &g, &hf, &plan, &xml, j->cli)) != 0)
		goto fail;
	if (!(dom = virDomainDefineXML(h->conn, xml))) {
		cli_error("p2v", "defining %s on %s: %s", j->d.o.name, h->uri, host_last_error());
		rc = IM_EXIT_TARGET;
		goto fail;
	}
	defined = true;
	if (j->start) {
		if (virDomainCreate(dom) < 0) {
			/* The definition and disks are complete: kept, for a look. */
			cli_error("p2v", "domain %s is defined, but did not start: %s", j->d.o.name,
				  host_last_error());
			rc = IM_EXIT_TARGET;
			goto out;
		}
		started = true;
	}
	if (j->json)
		print_json(result_json(j, &plan, "host", h->uri, pool->name, started));
	else if (j->cli->verbose >= 0)
		printf("defined %s on %s (pool %s, %zu disk%s, %s %s)%s\n", j->d.o.name, h->uri,
		       pool->name, j->n, j->n == 1 ? "" : "s", j->format,
		       bk_prealloc_name(j->prealloc), started ? ", started" : "");
	rc = cli_finish_stdout("p2v", IM_EXIT_OK);
	goto out;
fail:
	if (defined && dom)
		(void)virDomainUndefineFlags(dom, VIR_DOMAIN_UNDEFINE_NVRAM);
	delete_volumes(j);
out:
	for (size_t i = 0; i < j->n; i++)
		if (j->dst[i].vol)
			virStorageVolFree(j->dst[i].vol);
	if (dom)
		virDomainFree(dom);
	if (sp)
		virStoragePoolFree(sp);
	free(xml);
	return rc;
}

static int p2v_connect(struct job *j, const char *const *uris, size_t nu, const char *pool,
		       bool probe)
{
	struct host hosts[MAX_HOSTS] = { 0 };
	struct host *h;
	struct im_pool *p;
	size_t up = 0;
	int rc;

	for (size_t i = 0; i < nu; i++) {
		struct im_err err = { 0 };

		hosts[i].uri = uris[i];
		if (host_open(uris[i], &hosts[i].conn, &err) < 0) {
			if (nu == 1)
				return cli_fail("p2v", &err);
			fprintf(stderr, "imager p2v: warning: %s: skipped\n", err.msg);
			continue;
		}
		hosts[i].local = host_is_local(hosts[i].conn);
		if (pools_list(hosts[i].conn, &hosts[i].pools, &hosts[i].npools, &err) < 0) {
			fprintf(stderr, "imager p2v: warning: %s: %s\n", uris[i], err.msg);
			virConnectClose(hosts[i].conn);
			hosts[i].conn = NULL;
			continue;
		}
		for (size_t k = 0; probe && k < hosts[i].npools; k++) {
			struct im_err perr = { 0 };
			if (pools_probe(&hosts[i].pools[k], 1, &perr) < 0)
				fprintf(stderr, "imager p2v: warning: %s\n", perr.msg);
		}
		pools_rank(hosts[i].pools, hosts[i].npools, j->need);
		up++;
	}
	if (!up) {
		cli_error("p2v", "no host could be reached");
		rc = IM_EXIT_TARGET;
		goto out;
	}
	if ((rc = choose_pool(j, hosts, nu, pool, &h, &p)) != 0)
		goto out;
	if (!j->format)
		j->format = vol_pool_is_block(p->type) ? "raw" : p->format[0] ? p->format : "qcow2";
	default_prealloc(j, !strcmp(j->format, p->format) ? p->preallocation : NULL);
	rc = p2v_host(j, h, p);
out:
	for (size_t i = 0; i < nu; i++) {
		free(hosts[i].pools);
		if (hosts[i].conn)
			virConnectClose(hosts[i].conn);
	}
	return rc;
}

int cmd_p2v(int argc, char **argv, struct cli *cli)
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
		{ NULL, 0, NULL, 0 },
	};
	static struct job j;
	const char *uris[MAX_HOSTS], *pool = NULL, *output = NULL;
	size_t nu = 0;
	bool probe = false;
	char outdir[4096];
	int c, rc;

	memset(&j, 0, sizeof(j));
	j.cli = cli;
	j.progress = j.convert = true;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int t = cli_domain_option("p2v", c, optarg, &j.d);
		if (t < 0)
			return IM_EXIT_USAGE;
		if (t > 0)
			continue;
		switch (c) {
		case OPT_CONNECT:
			if (nu == MAX_HOSTS)
				return cli_usage("p2v", "at most %d --connect", MAX_HOSTS);
			uris[nu++] = optarg;
			break;
		case OPT_POOL: pool = optarg; break;
		case OPT_FORMAT:
			if (strcmp(optarg, "raw") && strcmp(optarg, "qcow2"))
				return cli_usage("p2v", "--format takes raw or qcow2");
			j.format = optarg;
			break;
		case OPT_PREALLOC:
			if (bk_prealloc_parse(optarg, &j.prealloc) < 0)
				return cli_usage("p2v", "--preallocation takes off, metadata, falloc or full");
			j.prealloc_set = true;
			break;
		case OPT_OUTPUT: output = optarg; break;
		case OPT_START: j.start = true; break;
		case OPT_FORCE: j.force = true; break;
		case OPT_PROBE: probe = true; break;
		case OPT_NO_CONVERT: j.convert = false; break;
		case OPT_REBUILD: j.rebuild = true; break;
		case OPT_VIRTIO_WIN: j.virtio_win = optarg; break;
		case OPT_JSON: j.json = true; break;
		case OPT_NO_PROGRESS: j.progress = false; break;
		case OPT_UPLOAD: j.upload = true; break;
		default: return cli_usage("p2v", "unknown option");
		}
	}
	j.n = (size_t)(argc - optind);
	if (j.n < 1)
		return cli_usage("p2v", "needs SOURCE");
	if (j.n > MAX_SOURCES)
		return cli_usage("p2v", "at most %d sources", MAX_SOURCES);
	if (!j.d.o.name)
		return cli_usage("p2v", "needs --name NAME");
	if (!dom_name_ok(j.d.o.name))
		return cli_usage("p2v", "--name '%s': use 1 to 64 letters, digits, '_', '.', '+', '-'",
				 j.d.o.name);
	if (!nu && (pool || j.start || probe || j.upload))
		return cli_usage("p2v", "--pool, --start, --probe and --upload need --connect");
	if (j.prealloc_set && j.prealloc == BK_PREALLOC_METADATA && j.format && strcmp(j.format, "qcow2"))
		return cli_usage("p2v", "--preallocation metadata is for qcow2");
	/* Conversion is for virtio; a guest kept on SATA or IDE keeps its names. */
	if (j.d.o.bus && (!strcmp(j.d.o.bus, "sata") || !strcmp(j.d.o.bus, "ide")))
		j.convert = false;

	for (size_t i = 0; i < j.n; i++) {
		struct im_err err = { 0 };

		j.src[i].spec = argv[optind + (int)i];
		if (probe_source(&j.src[i], &err) < 0)
			return cli_fail("p2v", &err);
		j.need += j.src[i].size;
	}
	if (nu) {
		if (output)
			return cli_usage("p2v", "--output is for a job without --connect");
		rc = p2v_connect(&j, uris, nu, pool, probe);
	} else {
		if (!j.format)
			j.format = "qcow2";
		if (!output) {
			snprintf(outdir, sizeof(outdir), "./%s", j.d.o.name);
			output = outdir;
		}
		rc = p2v_folder(&j, output);
	}
	if (j.have_rep)
		conv_report_free(&j.rep);
	if (j.conv_json)
		json_object_put(j.conv_json);
	return rc;
}
