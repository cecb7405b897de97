/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * p2v --instant: the VM runs before its disks are copied.
 *
 * Each image folder is served read-only by nbdkit with imager's plugin
 * (imgserve.h) on a Unix socket that qemu, run by libvirt as its own user,
 * may reach.  Each disk of the domain is a qcow2 overlay (in the state
 * folder, $IMAGER_INSTANT_DIR or /var/lib/imager/instant, then NAME/) whose
 * backing store is that export: the conversion for virtio writes into the
 * overlay, and so does the guest.  The image folder is never written.
 * Once the guest runs, libvirt's block copy (virDomainBlockCopy, the
 * volume reused as created by the job, the whole chain flattened into it)
 * copies each overlay with its backing into the disk's pool volume while
 * the guest goes on; when every copy mirrors, each is pivoted, the
 * definition is written again with the volumes (as p2v without --instant
 * writes it), the servers are stopped and the overlays removed: nothing of
 * the image is left in the domain's chain.
 *
 * The overlays' errors pause the guest (error_policy "stop"): a server
 * that dies with imager leaves a paused guest, never one that reads
 * errors.  Interrupted (SIGINT, SIGTERM) or a copy that fails: the copies
 * are cancelled, the guest is shut down (destroyed after 60 s), and the
 * domain stays defined on its overlays, which keep what it wrote; the
 * message says how to carry on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/xpath.h>

#include "imager/host.h"
#include "imager/imgserve.h"
#include "imager/job.h"
#include "imager/volume.h"
#include "p2v-int.h"
#include "tool.h"
#include "util.h"

/* The definition on the volumes, kept in the state folder from the first
 * run for a --resume (which has no conversion report to plan from). */
#define FINAL_XML "domain.xml"

struct instant {
	struct img_server *srv[P2V_MAX_SOURCES];
	struct dom_disk vol[P2V_MAX_SOURCES];  /* the volumes, for the final definition */
	char dir[3000];              /* the state folder: the overlays */
	bool made_dir;
	bool started;                /* the guest ran on the overlays */
	bool done;                   /* every disk pivoted onto its volume */
	bool keep;                   /* stopped mid-copy: overlays and domain kept */
	bool offline;                /* the guest stopped: copied with it off */
};

static bool cancelled(const struct p2v *j)
{
	return j->o->progress.cancel && *j->o->progress.cancel;
}

/* The state folder, made afresh (a folder left by an earlier job of that
 * name is refused, or with force emptied). */
static int state_dir(struct p2v *j, struct instant *in)
{
	const char *base = getenv("IMAGER_INSTANT_DIR");
	char path[sizeof(in->dir) + 32];

	if (!base || !*base)
		base = "/var/lib/imager/instant";
	if (str_printf(in->dir, sizeof(in->dir), "%s/%s", base, j->dom.name) < 0)
		return im_errf(j->err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: too long", base);
	int r = util_mkdir_p(base);
	if (r < 0)
		return im_errf(j->err, IM_EXIT_TARGET, r, "%s: %s", base, strerror(-r));
	if (j->o->resume) {
		for (size_t i = 0; i < j->n; i++) {
			snprintf(path, sizeof(path), "%s/disk%zu.qcow2", in->dir, i + 1);
			RETURN_IF(access(path, R_OK | W_OK) != 0, j->err, IM_EXIT_TARGET, -ENOENT,
				  "--resume: %s: %s (no stopped instant job of %s to carry on)", path,
				  strerror(errno), j->dom.name);
		}
		in->made_dir = true;
		return 0;
	}
	if (mkdir(in->dir, 0711) == 0) {
		in->made_dir = true;
		return 0;
	}
	RETURN_IF(errno != EEXIST, j->err, IM_EXIT_TARGET, -errno, "%s: %s", in->dir, strerror(errno));
	RETURN_IF(!j->o->force, j->err, IM_EXIT_TARGET, -EEXIST,
		  "%s exists: an instant job of %s was stopped before its copy ended (its overlays "
		  "hold what the guest wrote); --resume carries it on, --force starts afresh and "
		  "drops them", in->dir,
		  j->dom.name);
	for (size_t i = 0; i < P2V_MAX_SOURCES; i++) {
		snprintf(path, sizeof(path), "%s/disk%zu.qcow2", in->dir, i + 1);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/" FINAL_XML, in->dir);
	unlink(path);
	in->made_dir = true;
	return 0;
}

/* qemu-img create -f qcow2 -F raw -b nbd+unix:///?socket=SOCK OVERLAY SIZE
 * (--resume: the existing overlay rebased onto SOCK, its data kept) */
static int make_overlay(struct p2v *j, size_t i, const char *sock)
{
	struct dst *t = &j->dst[i];
	char backing[700], size[32], out[2048];

	snprintf(backing, sizeof(backing), "nbd+unix:///?socket=%s", sock);
	snprintf(size, sizeof(size), "%llu", (unsigned long long)j->rep->disks[i].capacity);
	snprintf(t->overlay, sizeof(t->overlay), "%s/disk%zu.qcow2", j->inst->dir, i + 1);
	const char *create[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
				 backing, t->overlay, size, NULL };
	/* --resume: the overlay's backing is the new server's socket */
	const char *rebase[] = { "qemu-img", "rebase", "-u", "-f", "qcow2", "-F", "raw", "-b",
				 backing, t->overlay, NULL };
	int r = tool_run(j->o->resume ? rebase : create, out, sizeof(out));
	if (r != 0) {
		t->overlay[0] = '\0';
		return im_errf(j->err, r == 127 ? IM_EXIT_UNSUPP : IM_EXIT_TARGET, -EIO,
			       "%s the overlay of %s: qemu-img: %s",
			       j->o->resume ? "rebasing" : "creating", j->rep->disks[i].source,
			       out[0] ? out : "failed");
	}
	return 0;
}

int instant_prepare(struct p2v *j)
{
	struct instant *in;
	struct img_serve_opts so = { .shared = true };

	RETURN_IF(!j->host->local, j->err, IM_EXIT_USAGE, -EINVAL,
		  "--instant needs the host to be this machine (qemu reads the image through a "
		  "local socket): %s is not", j->host->uri);
	RETURN_IF(j->o->upload, j->err, IM_EXIT_USAGE, -EINVAL,
		  "--instant copies through libvirt's block copy: not with --upload");
	for (size_t i = 0; i < j->n; i++)
		RETURN_IF(!j->rep->disks[i].folder, j->err, IM_EXIT_USAGE, -EINVAL,
			  "--instant starts from image folders: %s is not one",
			  j->rep->disks[i].source);
	if (!(in = j->inst = calloc(1, sizeof(*in))))
		return im_errf(j->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	FORWARD_ERR(state_dir(j, in));
	in->keep = j->o->resume;   /* (a failed --resume drops nothing) */
	for (size_t i = 0; i < j->n; i++) {
		char served[4200];   /* (a Clonezilla folder: its index, job.h) */
		FORWARD_ERR(im_serve_folder(j->rep->disks[i].source, NULL, served, sizeof(served),
					    j->err));
		FORWARD_ERR(img_serve_start(served, &so, &in->srv[i], j->err));
		FORWARD_ERR(make_overlay(j, i, img_server_socket(in->srv[i])));
		in->vol[i] = j->disks[i];
		j->disks[i] = (struct dom_disk){ DOM_SRC_FILE, j->dst[i].overlay, NULL, NULL, "qcow2",
						 img_server_socket(in->srv[i]) };
	}
	p2v_tell(j, P2V_NOTE, "--instant: the guest %s on overlays over the image%s, "
		 "served by nbdkit; its disk%s then copied into the pool while it runs",
		 j->o->resume ? "starts again" : "starts", j->n > 1 ? "s" : "",
		 j->n > 1 ? "s are" : " is");
	return 0;
}

/* ---- the copy ---- */

static int start_copy(struct p2v *j, size_t i)
{
	const struct p2v_disk *d = &j->rep->disks[i];
	bool block = vol_pool_is_block(j->pool->type);
	char xml[5000];

	snprintf(xml, sizeof(xml), "<disk type='%s'><driver type='%s'/><source %s='%s'/></disk>",
		 block ? "block" : "file", d->format, block ? "dev" : "file", d->path);
	virTypedParameter bw = { .field = VIR_DOMAIN_BLOCK_COPY_BANDWIDTH,
				 .type = VIR_TYPED_PARAM_ULLONG,
				 .value.ul = j->o->copy_rate };
	if (virDomainBlockCopy(j->domain, j->dst[i].overlay, xml, &bw, j->o->copy_rate ? 1 : 0,
			       VIR_DOMAIN_BLOCK_COPY_REUSE_EXT |
			       VIR_DOMAIN_BLOCK_COPY_TRANSIENT_JOB) < 0)
		return im_errf(j->err, IM_EXIT_TARGET, -EIO, "copying %s into %s: %s",
			       d->source, d->path, host_last_error());
	return 0;
}

/* Every copy's state: 1 all mirroring (ready to pivot), 0 going on, or an
 * error (a copy that ended by itself failed). */
static int copies_state(struct p2v *j, uint64_t *done, uint64_t *total)
{
	bool ready = true;

	*done = *total = 0;
	for (size_t i = 0; i < j->n; i++) {
		virDomainBlockJobInfo info;
		int r = virDomainGetBlockJobInfo(j->domain, j->dst[i].overlay, &info, 0);

		if (r <= 0)
			return im_errf(j->err, IM_EXIT_IO, -EIO, "the copy of %s into %s stopped: %s",
				       j->rep->disks[i].source, j->rep->disks[i].path,
				       r < 0 ? host_last_error() : "libvirt ended it (see the "
				       "domain's log)");
		*done += info.cur;
		*total += info.end;
		ready = ready && info.end > 0 && info.cur == info.end;
	}
	return ready ? 1 : 0;
}

/* Stopped mid-copy: the copies cancelled, the guest shut down (destroyed
 * after 60 s), the domain and overlays kept. */
static void stop_guest(struct p2v *j)
{
	for (size_t i = 0; i < j->n; i++)
		virDomainBlockJobAbort(j->domain, j->dst[i].overlay, 0);
	if (virDomainShutdown(j->domain) == 0)
		for (unsigned s = 0; s < 600 && virDomainIsActive(j->domain) == 1; s++)
			util_sleep_ms(100);
	if (virDomainIsActive(j->domain) == 1)
		virDomainDestroy(j->domain);
	j->inst->keep = true;
}

int instant_check_resume(struct p2v *j)
{
	RETURN_IF(!j->domain, j->err, IM_EXIT_TARGET, -ENOENT,
		  "--resume: no domain %s on %s to carry on", j->dom.name, j->host->uri);
	if (virDomainIsActive(j->domain) == 1 && virDomainDestroy(j->domain) < 0)
		return im_errf(j->err, IM_EXIT_TARGET, -EBUSY, "--resume: stopping %s: %s",
			       j->dom.name, host_last_error());
	return 0;
}

/* The stopped job's domain defined again, each overlay's backing store
 * pointing at its new server's socket. */
int instant_redefine(struct p2v *j)
{
	char *xml = virDomainGetXMLDesc(j->domain, VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE);
	xmlDocPtr doc = xml ? xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL,
					    XML_PARSE_NONET) : NULL;
	xmlXPathContextPtr ctx = doc ? xmlXPathNewContext(doc) : NULL;
	xmlChar *out = NULL;
	int len = 0, r = 0;

	free(xml);
	if (!ctx)
		r = im_errf(j->err, IM_EXIT_TARGET, -EIO, "--resume: the definition of %s: %s",
			    j->dom.name, host_last_error());
	for (size_t i = 0; r == 0 && i < j->n; i++) {
		char expr[5000];
		snprintf(expr, sizeof(expr), "/domain/devices/disk[source/@file='%s']/backingStore"
			 "/source[@protocol='nbd']/host", j->dst[i].overlay);
		xmlXPathObjectPtr o = xmlXPathEvalExpression(BAD_CAST expr, ctx);
		if (o && o->nodesetval && o->nodesetval->nodeNr == 1)
			xmlSetProp(o->nodesetval->nodeTab[0], BAD_CAST "socket",
				   BAD_CAST img_server_socket(j->inst->srv[i]));
		else
			r = im_errf(j->err, IM_EXIT_TARGET, -EINVAL, "--resume: domain %s does not "
				    "run on the overlay %s of an instant job", j->dom.name,
				    j->dst[i].overlay);
		xmlXPathFreeObject(o);
	}
	if (r == 0) {
		xmlDocDumpMemory(doc, &out, &len);
		virDomainPtr d = out ? virDomainDefineXML(j->host->conn, (const char *)out) : NULL;
		if (d) {
			virDomainFree(j->domain);
			j->domain = d;
			j->rep->defined = true;
		} else {
			r = im_errf(j->err, IM_EXIT_TARGET, -EIO, "--resume: defining %s again: %s",
				    j->dom.name, host_last_error());
		}
	}
	xmlFree(out);
	xmlXPathFreeContext(ctx);
	xmlFreeDoc(doc);
	return r;
}

/* The definition on the volumes (as p2v without --instant writes it):
 * planned now and kept in the state folder, or read from there when
 * resuming. */
static int final_xml(struct p2v *j, char **xml)
{
	char path[sizeof(j->inst->dir) + 32];
	struct dom_disk saved[P2V_MAX_SOURCES];
	struct dom_guest g;
	int fd, r;

	snprintf(path, sizeof(path), "%s/" FINAL_XML, j->inst->dir);
	if (j->o->resume) {
		unsigned char *buf = NULL;
		size_t len = 0;
		RETURN_IF(util_read_whole_file(path, &buf, &len, 1 << 20) < 0, j->err,
			  IM_EXIT_TARGET, -ENOENT, "--resume: %s: %s", path, strerror(errno));
		*xml = (char *)buf;
		return 0;
	}
	memcpy(saved, j->disks, sizeof(saved));
	for (size_t i = 0; i < j->n; i++)
		j->disks[i] = j->inst->vol[i];
	p2v_guest_facts(j, &g);
	r = dom_xml(&j->dom, &g, &j->rep->plan, xml, j->err);
	memcpy(j->disks, saved, sizeof(saved));
	FORWARD_ERR(r);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || util_write_full(fd, *xml, strlen(*xml)) < 0 || fsync(fd) < 0) {
		r = im_errf(j->err, IM_EXIT_TARGET, -errno, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		free(*xml);
		*xml = NULL;
		return r;
	}
	close(fd);
	return 0;
}

/* The definition written again with the volumes (the running guest keeps
 * its live definition, pivoted, until it stops), under the domain's UUID.
 * libvirt has already pointed the persistent definition at the volumes'
 * files on pivot: a failure here is a warning, not the job's. */
static void define_on_volumes(struct p2v *j, const char *xml)
{
	char uuid[VIR_UUID_STRING_BUFLEN], *named = NULL;
	const char *at = strstr(xml, "</name>");
	virDomainPtr d = NULL;

	if (at && virDomainGetUUIDString(j->domain, uuid) == 0 &&
	    asprintf(&named, "%.*s</name>\n  <uuid>%s</uuid>%s", (int)(at - xml), xml, uuid,
		     at + 7) > 0)
		d = virDomainDefineXML(j->host->conn, named);
	if (d)
		virDomainFree(d);
	else
		p2v_tell(j, P2V_WARNING, "%s runs on its volumes, but its definition could not be "
			 "written again with them (%s): it names their files", j->dom.name,
			 host_last_error());
	free(named);
}

/* The guest stopped (powered off) before the copies ended: they went
 * with its qemu.  The rest is copied with the guest off: each overlay,
 * read with its backing (the server still runs), written over its volume
 * by qemu-img convert. */
static int copy_offline(struct p2v *j)
{
	p2v_tell(j, P2V_NOTE, "the guest stopped before its copy ended: the rest is copied with "
		 "it off");
	for (size_t i = 0; i < j->n; i++) {
		const struct p2v_disk *d = &j->rep->disks[i];
		char out[2048];
		const char *argv[] = { "qemu-img", "convert", "-n", "-f", "qcow2", "-O", d->format,
				       j->dst[i].overlay, d->path, NULL };
		int r = tool_run(argv, out, sizeof(out));

		if (r != 0)
			return im_errf(j->err, IM_EXIT_IO, -EIO, "copying %s into %s: qemu-img: %s",
				       d->source, d->path, out[0] ? out : "failed");
	}
	j->inst->offline = true;
	return 0;
}

static int wait_copies(struct p2v *j)
{
	uint64_t done, total;
	int r;

	p2v_event(j, P2V_WRITE);
	while ((r = copies_state(j, &done, &total)) == 0) {
		if (j->o->progress.fn)
			j->o->progress.fn(j->o->progress.opaque, "copy", done, total);
		if (cancelled(j))
			return im_errf(j->err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
		util_sleep_ms(200);
	}
	if (r < 0 && virDomainIsActive(j->domain) == 0) {
		memset(j->err, 0, sizeof(*j->err));
		return copy_offline(j);
	}
	if (r == 1 && j->o->progress.fn)
		j->o->progress.fn(j->o->progress.opaque, "copy", done, total);
	return r < 0 ? r : 0;
}

int instant_copy(struct p2v *j)
{
	struct instant *in = j->inst;
	struct timespec t0, t1;
	int r = 0;

	char *xml = NULL;

	in->started = true;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = final_xml(j, &xml);
	for (size_t i = 0; i < j->n && r == 0; i++)
		r = start_copy(j, i);
	if (r == 0)
		r = wait_copies(j);
	for (size_t i = 0; i < j->n && r == 0 && !in->offline; i++)
		if (virDomainBlockJobAbort(j->domain, j->dst[i].overlay,
					   VIR_DOMAIN_BLOCK_JOB_ABORT_PIVOT) < 0)
			r = im_errf(j->err, IM_EXIT_TARGET, -EIO, "switching %s onto %s: %s",
				    j->rep->disks[i].source, j->rep->disks[i].path, host_last_error());
	if (r < 0) {
		char why[sizeof(j->err->msg)];

		stop_guest(j);
		free(xml);
		str_copy(why, sizeof(why), j->err->msg);
		int cls = j->err->exit_class;
		memset(j->err, 0, sizeof(*j->err));   /* (the first error recorded wins) */
		return im_errf(j->err, cls, r, "%.300s: the guest %s is shut down, "
			       "defined on its overlays in %s (they hold what it wrote, over the image "
			       "folder); its volumes are removed. The same command with --resume "
			       "carries on", why, j->dom.name, in->dir);
	}
	in->done = true;
	in->keep = false;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	define_on_volumes(j, xml);
	free(xml);
	p2v_tell(j, P2V_WRITTEN, "the guest %s its volume%s in pool %s: copied %s, in %.1f s",
		 in->offline ? "is defined on" : "runs on", j->n > 1 ? "s" : "", j->pool->name,
		 in->offline ? "(the last part with the guest off)" : "while it ran",
		 (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}

void instant_release(struct p2v *j)
{
	struct instant *in = j->inst;

	if (!in)
		return;
	for (size_t i = 0; i < j->n; i++) {
		/* A guest that still runs on an overlay keeps its server: only
		 * a failure stops one (the guest was shut down first). */
		img_server_stop(in->srv[i]);
		if (!in->keep && j->dst[i].overlay[0])
			unlink(j->dst[i].overlay);
	}
	if (!in->keep && in->made_dir) {
		char path[sizeof(in->dir) + 32];
		snprintf(path, sizeof(path), "%s/" FINAL_XML, in->dir);
		unlink(path);
		rmdir(in->dir);
	}
	free(in);
	j->inst = NULL;
}
