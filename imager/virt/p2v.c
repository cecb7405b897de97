/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * P2V as one job: the sources probed, the pool chosen, the volumes created
 * (and deleted again on failure), the data written, the guest converted,
 * temporary files uploaded, the domain planned, defined and started; or
 * the disks and NAME.xml written into a folder.  See include/imager/p2v.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imager/image.h"
#include "imager/vmsource.h"
#include "imager/p2v.h"
#include "imager/clonezilla.h"
#include "imager/pools.h"
#include "imager/volume.h"
#include "p2v-int.h"
#include "util.h"

static void slot_put(char *slots, size_t n, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void slot_put(char *slots, size_t n, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	util_slot_vprintf(slots, n, len, fmt, ap);
	va_end(ap);
}

#define SLOTS(a) (a)[0], sizeof(a) / sizeof((a)[0]), sizeof((a)[0])

/* A phase with its line for people; warnings and notes are kept in the
 * report too. */
void p2v_tell(struct p2v *j, enum p2v_phase phase, const char *fmt, ...)
{
	char msg[9000];               /* two paths and some words */
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (phase == P2V_WARNING)
		slot_put(SLOTS(j->rep->warnings), "%s", msg);
	else if (phase == P2V_NOTE)
		slot_put(SLOTS(j->rep->notes), "%s", msg);
	if (j->o->phase)
		j->o->phase(j->o->opaque, phase, msg);
}

/* A phase without a line: the report says what happened. */
void p2v_event(struct p2v *j, enum p2v_phase phase)
{
	if (j->o->phase)
		j->o->phase(j->o->opaque, phase, "");
}

/* Where disk i is written on this machine. */
static const char *local_path(const struct p2v *j, size_t i)
{
	return j->dst[i].overlay[0] ? j->dst[i].overlay
	       : j->dst[i].tmp[0] ? j->dst[i].tmp : j->rep->disks[i].path;
}

/* ---- the sources, the disks' format, the data ---- */

static int probe_source(struct p2v_disk *d, const struct bk_net *net, struct im_err *err)
{
	struct stat st;

	if (d->spec[0]) {
		st.st_mode = S_IFREG;            /* a disk inside a VM's description */
	} else if (!bk_is_uri(d->source) && stat(d->source, &st) < 0) {
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", d->source, strerror(errno));
	}
	if (!bk_is_uri(d->source) && S_ISDIR(st.st_mode) && img_is_clonezilla(d->source)) {
		struct cz_image *cz = calloc(1, sizeof(*cz));
		int r;

		RETURN_IF(!cz, err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		r = cz_read(d->source, cz, err);  /* a Clonezilla image folder */
		d->folder = true;
		d->capacity = cz->disk_size;
		free(cz);
		FORWARD_ERR(r);
	} else if (!bk_is_uri(d->source) && S_ISDIR(st.st_mode)) {
		struct img_manifest m;

		FORWARD_ERR(img_manifest_read(&m, d->source, err));
		d->folder = true;
		d->capacity = m.disk_size;
		img_manifest_free(&m);
	} else {
		struct bk *bk;

		FORWARD_ERR(bk_open(d->source, NULL, 0, net, &bk, err));
		d->capacity = bk->size;
		d->block = bk->is_block_device;
		(void)bk_close(bk, err);
	}
	RETURN_IF(d->capacity == 0, err, IM_EXIT_SOURCE, -EINVAL, "%s: empty disk", d->source);
	return 0;
}

/* The machine a VM's description describes, told as a note. */
static void vm_facts(struct p2v *j, const char *source, const struct vm_desc *vm)
{
	dom_machine_from_vm(vm, &j->vm_machine);
	j->have_vm = true;
	p2v_tell(j, P2V_NOTE, "%s: %s, %llu MiB, %u vCPUs, %s firmware, MAC %s%s%s", source,
	     vm->guest_os[0] ? vm->guest_os : "a virtual machine",
	     (unsigned long long)vm->memory_mib, vm->vcpus,
	     vm->firmware == VM_FW_EFI ? "UEFI" : vm->firmware == VM_FW_BIOS ? "BIOS" : "unknown",
	     vm->nnics && vm->nics[0].mac[0] ? vm->nics[0].mac : "none",
	     vm->nnics > 1 ? " (only the first NIC is defined; the others: virsh attach-interface)"
			   : "",
	     vm->secure_boot ? " (it booted with Secure Boot: --firmware uefi-secure keeps it)" : "");
}

/* The sources, a VM's description replaced by its disks. */
static int expand_sources(struct p2v *j)
{
	size_t n = 0, found = 0;

	for (size_t i = 0; i < j->o->nsources; i++) {
		char (*specs)[600] = calloc(VM_MAX_DISKS, sizeof(*specs));
		struct vm_desc *vm = calloc(1, sizeof(*vm));
		size_t k = 0;
		int r = specs && vm ? bk_vm_describe(j->o->sources[i], vm, specs, &k, j->err)
				    : im_errf(j->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");

		if (r == 1 && ++found > 1)
			r = im_errf(j->err, IM_EXIT_USAGE, -EINVAL,
				    "%s: p2v moves one virtual machine at a time (%s was one)",
				    j->o->sources[i], j->rep->disks[0].source);
		if (r == 1 && n + k > P2V_MAX_SOURCES)
			r = im_errf(j->err, IM_EXIT_USAGE, -EINVAL, "p2v takes at most %d disks",
				    P2V_MAX_SOURCES);
		if (r == 1) {
			for (size_t m = 0; m < k; m++, n++) {
				struct p2v_disk *d = &j->rep->disks[n];
				memcpy(d->spec, specs[m], sizeof(d->spec));
				d->source = d->spec;
			}
			vm_facts(j, j->o->sources[i], vm);
		} else if (r == 0 && n < P2V_MAX_SOURCES) {
			j->rep->disks[n++].source = j->o->sources[i];
		} else if (r == 0) {
			r = im_errf(j->err, IM_EXIT_USAGE, -EINVAL, "p2v takes at most %d disks",
				    P2V_MAX_SOURCES);
		}
		free(specs);
		free(vm);
		FORWARD_ERR(r);
	}
	j->n = j->rep->ndisks = n;
	j->dom.ndisks = n;
	return 0;
}

static int probe_sources(struct p2v *j)
{
	FORWARD_ERR(expand_sources(j));
	for (size_t i = 0; i < j->n; i++) {
		struct p2v_disk *d = &j->rep->disks[i];

		FORWARD_ERR(probe_source(d, &j->o->net, j->err));
		if (j->o->disk_size)
			d->capacity = (j->o->disk_size + 511) / 512 * 512;
		j->need += d->capacity;
	}
	return 0;
}

/* Format and preallocation: as asked, else what the pool p recommends
 * (its preallocation only for its own format), else qcow2 with metadata
 * preallocation or raw with falloc.  A block pool's volumes are raw. */
static void choose_layout(struct p2v *j, const struct im_pool *p)
{
	const char *recommended = NULL;
	bool taken;

	if (j->o->format)
		j->format = j->o->format;
	else
		j->format = p && vol_pool_is_block(p->type) ? "raw" : p && p->format[0] ? p->format : "qcow2";
	if (p && !strcmp(j->format, p->format))
		recommended = p->preallocation;
	j->prealloc = j->o->prealloc;
	taken = j->o->prealloc_set ||
		(recommended && bk_prealloc_parse(recommended, &j->prealloc) == 0 &&
		 (j->prealloc != BK_PREALLOC_METADATA || !strcmp(j->format, "qcow2")));
	if (!taken)
		j->prealloc = !strcmp(j->format, "qcow2") ? BK_PREALLOC_METADATA : BK_PREALLOC_FALLOC;
	for (size_t i = 0; i < j->n; i++) {
		snprintf(j->rep->disks[i].format, sizeof(j->rep->disks[i].format), "%s", j->format);
		j->rep->disks[i].prealloc = j->prealloc;
	}
}

/* Source i onto its disk: restored from an image folder, else cloned. */
static int write_disk(struct p2v *j, size_t i)
{
	const struct p2v_disk *d = &j->rep->disks[i];
	const char *path = local_path(j, i);
	struct target_opts t = { .format = j->format, .prealloc = j->prealloc,
				 .shrink = j->o->shrink, .net = j->o->net };
	int r;

	/* A file the job creates gets the disk's size (a volume has it). */
	if (access(path, F_OK) != 0)
		t.size = d->capacity;
	p2v_event(j, P2V_WRITE);
	if (d->folder) {
		struct restore_opts o = { .target = t, .progress = j->o->progress };
		struct restore_stats st;

		r = conv_restore(j->o->roots, d->source, path, &o, &st, NULL, j->err);
	} else {
		struct clone_opts o = { .target = t, .net = j->o->net, .progress = j->o->progress };
		struct clone_stats st;

		r = conv_clone(j->o->roots, d->source, path, &o, &st, NULL, j->err);
	}
	if (r < 0)
		return r;
	p2v_tell(j, P2V_WRITTEN, "%s written to %s", d->source, path);
	return 0;
}

static int write_disks(struct p2v *j)
{
	for (size_t i = 0; i < j->n; i++) {
		FORWARD_ERR(write_disk(j, i));
		j->dst[i].written = true;
	}
	return 0;
}

/* Convert the written disks.  A guest the conversion refuses keeps SATA
 * and e1000 when inspection knew its system (with a warning; a disk where
 * no single system was found counts as unknown: virtio); any other
 * failure ends the job.  Conversion is for virtio: a guest kept on SATA or
 * IDE keeps its names. */
static int convert_disks(struct p2v *j)
{
	const char *bus = j->dom.bus, *paths[P2V_MAX_SOURCES], *formats[P2V_MAX_SOURCES];
	struct conv_opts co = { .block = bus && !strcmp(bus, "virtio-scsi") ? CONV_BLOCK_VIRTIO_SCSI
									    : CONV_BLOCK_VIRTIO_BLK,
				.rebuild_initramfs = j->o->rebuild_initramfs,
				.virtio_win = j->o->virtio_win, .keys = j->o->keys,
				.nkeys = j->o->nkeys };
	struct conv_step *s = &j->rep->convert;

	if (!j->o->convert || (bus && (!strcmp(bus, "sata") || !strcmp(bus, "ide"))))
		return 0;
	for (size_t i = 0; i < j->n; i++) {
		paths[i] = local_path(j, i);
		formats[i] = j->dst[i].overlay[0] ? "qcow2" : j->format;
	}
	p2v_tell(j, P2V_CONVERT, "converting the guest for virtio");
	s->ran = true;
	s->r = im_convert(paths, formats, j->n, &co, &s->rep, &s->err);
	p2v_event(j, P2V_CONVERTED);
	if (s->r == -EOPNOTSUPP || s->r == -ENOENT)
		p2v_tell(j, P2V_WARNING, "the guest was not converted: %s", s->err.msg);
	else if (s->r < 0)
		return im_errf(j->err, s->err.exit_class, s->r, "%s", s->err.msg);
	return 0;
}

/* ---- the definition ---- */

void p2v_guest_facts(struct p2v *j, struct dom_guest *g)
{
	const struct conv_step *s = &j->rep->convert;
	bool all_block = true;

	memset(g, 0, sizeof(*g));
	if (s->ran && s->rep.os_type[0])
		dom_guest_from_report(&s->rep, s->r == 0, g);
	for (size_t i = 0; i < j->n; i++)
		all_block &= j->rep->disks[i].block;
	if (j->o->machine)   /* the source machine's facts, from its live media */
		dom_machine_apply(&j->dom, g, j->mac, j->o->machine);
	else if (j->have_vm) /* a VM's, from its description */
		dom_machine_apply(&j->dom, g, j->mac, &j->vm_machine);
	else if (all_block)  /* live media: the source machine is this one */
		dom_machine_apply(&j->dom, g, j->mac, NULL);
}

/* Decide the definition for a host with the facts h, and write its XML. */
static int plan_domain(struct p2v *j, const struct dom_host *h, char **xml)
{
	struct dom_guest g;

	p2v_guest_facts(j, &g);
	FORWARD_ERR(dom_decide(&j->dom, &g, h, &j->rep->plan, j->err));
	FORWARD_ERR(dom_xml(&j->dom, &g, &j->rep->plan, xml, j->err));
	j->rep->planned = true;
	p2v_event(j, P2V_PLANNED);
	return 0;
}

/* ---- without a daemon: an output folder ---- */

/* Disk i's file in the folder: a file of that name is refused, or with
 * force removed. */
static int folder_disk(struct p2v *j, size_t i, const char *abs)
{
	struct p2v_disk *d = &j->rep->disks[i];
	const char *ext = !strcmp(j->format, "qcow2") ? "qcow2" : "raw";
	char name[sizeof(d->name)];

	if (str_printf(name, sizeof(name), "%s-disk%zu.%s", j->dom.name, i + 1, ext) < 0)
		return im_errf(j->err, IM_EXIT_USAGE, -ENAMETOOLONG, "--name %s: too long for a disk's name",
			       j->dom.name);
	str_copy(d->name, sizeof(d->name), name);
	FORWARD_ERR(path_join_err(d->path, sizeof(d->path), j->rep->output, name, j->err));
	if (access(d->path, F_OK) == 0) {
		RETURN_IF(!j->o->force, j->err, IM_EXIT_TARGET, -EEXIST,
			  "%s exists (--force replaces it)", d->path);
		if (unlink(d->path) < 0)
			return im_errf(j->err, IM_EXIT_TARGET, -errno, "%s: %s", d->path, strerror(errno));
	}
	/* The XML names absolute paths. */
	if (abs)
		FORWARD_ERR(path_join_err(d->path, sizeof(d->path), abs, name, j->err));
	j->disks[i] = (struct dom_disk){ DOM_SRC_FILE, d->path, NULL, NULL, j->format, NULL };
	return 0;
}

/* The folder dir (made when absent: *made_dir) and the names in it. */
static int folder_prepare(struct p2v *j, const char *dir, bool *made_dir)
{
	struct p2v_report *rep = j->rep;
	char *abs;
	int r = 0;

	*made_dir = mkdir(dir, 0755) == 0;
	if (!*made_dir && errno != EEXIST)   /* the parent must exist */
		return im_errf(j->err, IM_EXIT_TARGET, -errno, "%s: %s", dir, strerror(errno));
	/* (A name mkdir takes fits.) */
	snprintf(rep->output, sizeof(rep->output), "%s", dir);
	if (snprintf(rep->xml_path, sizeof(rep->xml_path), "%s/%s.xml", rep->output, j->dom.name) >=
	    (int)sizeof(rep->xml_path))
		return im_errf(j->err, IM_EXIT_USAGE, -ENAMETOOLONG, "--output: path too long");
	RETURN_IF(!j->o->force && access(rep->xml_path, F_OK) == 0, j->err, IM_EXIT_TARGET, -EEXIST,
		  "%s exists (--force replaces it)", rep->xml_path);
	abs = realpath(rep->output, NULL);
	for (size_t i = 0; i < j->n && r == 0; i++)
		r = folder_disk(j, i, abs);
	free(abs);
	return r;
}

static int p2v_folder(struct p2v *j)
{
	struct p2v_report *rep = j->rep;
	struct dom_host h;
	char dir[128], *xml = NULL;
	bool made_dir = false;
	int r;

	snprintf(dir, sizeof(dir), "./%s", j->dom.name);
	choose_layout(j, NULL);
	if ((r = folder_prepare(j, j->o->output ? j->o->output : dir, &made_dir)) < 0 || (r = write_disks(j)) < 0 ||
	    (r = convert_disks(j)) < 0)
		goto fail;
	dom_host_detect(NULL, true, !j->dom.type, &h);
	snprintf(rep->host_why, sizeof(rep->host_why), "%s", h.why);
	if ((r = plan_domain(j, &h, &xml)) < 0 ||
	    (r = dom_xml_save(rep->xml_path, xml, strlen(xml), true, j->err)) < 0)
		goto fail;
	free(xml);
	return 0;
fail:
	free(xml);
	for (size_t i = 0; i < j->n; i++)
		if (j->dst[i].written)
			unlink(rep->disks[i].path);
	if (made_dir)
		(void)rmdir(rep->output);
	return r;
}

/* ---- with libvirt: the host and its pool ---- */

/* Connect to every host and rank its pools for the disks.  A host that
 * cannot be reached, or whose pools cannot be listed, is skipped with a
 * warning (the only host given: its error is the job's). */
static int open_hosts(struct p2v *j)
{
	size_t up = 0;

	for (size_t i = 0; i < j->o->nuris; i++) {
		struct host *h = &j->hosts[i];
		struct im_err err = { 0 };
		int r;

		h->uri = j->o->uris[i];
		if ((r = host_open(h->uri, &j->o->net, &h->conn, &err)) < 0) {
			if (j->o->nuris == 1)
				return im_errf(j->err, err.exit_class, r, "%s", err.msg);
			p2v_tell(j, P2V_WARNING, "%s: skipped", err.msg);
			continue;
		}
		h->local = host_is_local(h->conn);
		if (pools_list(h->conn, &h->pools, &h->npools, &err) < 0) {
			p2v_tell(j, P2V_WARNING, "%s: %s", h->uri, err.msg);
			virConnectClose(h->conn);
			h->conn = NULL;
			continue;
		}
		for (size_t k = 0; j->o->probe && k < h->npools; k++) {
			struct im_err perr = { 0 };

			if (pools_probe(&h->pools[k], 1, &perr) < 0)
				p2v_tell(j, P2V_WARNING, "%s", perr.msg);
		}
		pools_rank(h->pools, h->npools, j->need);
		up++;
	}
	RETURN_IF(!up, j->err, IM_EXIT_TARGET, -EHOSTUNREACH, "no host could be reached");
	return 0;
}

/* The pool: the one named (first host that has it), else the best fitting
 * pool of each host, the host with the most room winning. */
static int choose_pool(struct p2v *j, const char *want)
{
	bool named = want && strcmp(want, "auto");
	char need[32], avail[32];

	util_human_size(j->need, need, sizeof(need));
	for (size_t i = 0; i < j->o->nuris; i++) {
		struct host *h = &j->hosts[i];
		struct im_pool *p;

		if (!h->conn)
			continue;
		p = named ? pools_find(h->pools, h->npools, want) : h->npools ? &h->pools[0] : NULL;
		if (named && p && !p->fits) {
			util_human_size(p->available, avail, sizeof(avail));
			return im_errf(j->err, IM_EXIT_TARGET, -ENOSPC,
				       "pool %s on %s has %s available; the disks need %s", want, h->uri,
				       avail, need);
		}
		if (p && p->fits && (named || !j->pool || p->available > j->pool->available)) {
			j->host = h;
			j->pool = p;
			if (named)
				break;
		}
	}
	if (j->pool)
		return 0;
	if (named)
		return im_errf(j->err, IM_EXIT_TARGET, -ENOENT, "no active pool named %s on %s%s", want,
			       j->hosts[0].uri, j->o->nuris > 1 ? " or the other hosts" : "");
	return im_errf(j->err, IM_EXIT_TARGET, -ENOSPC, "no active pool has room for %s%s", need,
		       j->o->nuris > 1 ? " on any of the hosts" : "");
}

/* The pool's handle, and an existing domain of the name: refused, or
 * (force, shut off) undefined first, so that no domain is left pointing
 * at volumes this job deletes and re-creates. */
static int check_target(struct p2v *j)
{
	const char *name = j->dom.name, *uri = j->host->uri;

	j->sp = virStoragePoolLookupByName(j->host->conn, j->pool->name);
	j->domain = virDomainLookupByName(j->host->conn, name);
	RETURN_IF(!j->sp, j->err, IM_EXIT_TARGET, -ENOENT, "pool %s: %s", j->pool->name,
		  host_last_error());
	RETURN_IF(vol_pool_is_block(j->pool->type) && strcmp(j->format, "raw"), j->err, IM_EXIT_USAGE,
		  -EINVAL, "pool %s is a %s pool: its volumes are raw (--format raw)", j->pool->name,
		  j->pool->type);
	if (j->o->resume)   /* (instant.c: the domain is carried on, not replaced) */
		return instant_check_resume(j);
	RETURN_IF(j->domain && !j->o->force, j->err, IM_EXIT_TARGET, -EEXIST,
		  "domain %s exists on %s (--force replaces it%s)", name, uri,
		  j->o->instant ? "; an --instant job stopped mid-copy is carried on with --resume"
				: "");
	RETURN_IF(j->domain && virDomainIsActive(j->domain) == 1, j->err, IM_EXIT_TARGET, -EBUSY,
		  "domain %s is running on %s: stop it first", name, uri);
	if (!j->domain)
		return 0;
	if (virDomainUndefineFlags(j->domain, VIR_DOMAIN_UNDEFINE_NVRAM |
				   VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
				   VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA) < 0)
		return im_errf(j->err, IM_EXIT_TARGET, -EIO, "replacing domain %s: %s", name,
			       host_last_error());
	virDomainFree(j->domain);
	j->domain = NULL;
	return 0;
}

/* ---- with libvirt: the volumes ---- */

/* A temporary file here for a volume not writable from here: written,
 * converted, then uploaded. */
static int make_tmp(struct p2v *j, struct dst *t)
{
	int r = tmp_file_name("p2v", t->tmp, sizeof(t->tmp), j->err);

	if (r < 0)
		t->tmp[0] = '\0';   /* (restore and clone create it) */
	return r;
}

static int create_volume(struct p2v *j, size_t i)
{
	struct p2v_disk *d = &j->rep->disks[i];
	struct dst *t = &j->dst[i];
	const char *ext = vol_pool_is_block(j->pool->type) ? ""
			  : !strcmp(j->format, "qcow2") ? ".qcow2" : ".raw";
	char *path;

	snprintf(d->name, sizeof(d->name), "%s-disk%zu%s", j->dom.name, i + 1, ext);
	FORWARD_ERR(vol_create(j->sp, j->pool->type, d->name, d->capacity, j->format, j->prealloc,
			       j->o->force || j->o->resume, &t->vol, j->err));
	t->created = true;
	if (!(path = virStorageVolGetPath(t->vol)))
		return im_errf(j->err, IM_EXIT_TARGET, -EIO, "volume %s: %s", d->name, host_last_error());
	snprintf(d->path, sizeof(d->path), "%s", path);
	free(path);
	j->disks[i] = (struct dom_disk){ DOM_SRC_VOLUME, NULL, j->pool->name, d->name, j->format, NULL };
	if (j->o->upload || !j->host->local || access(d->path, W_OK) != 0)
		return make_tmp(j, t);
	return 0;
}

/* After a lost connection: connected again, and what the job holds of the
 * old one (its pool, its volumes) looked up again by name. */
static int reconnect(struct p2v *j, struct im_err *err)
{
	struct host *h = j->host;
	virConnectPtr conn;
	virStoragePoolPtr sp;
	virStorageVolPtr vols[P2V_MAX_SOURCES] = { 0 };
	int r = host_reopen(h->uri, &j->o->net, &conn, err);

	if (r < 0)
		return r;
	sp = virStoragePoolLookupByName(conn, j->pool->name);
	if (!sp)
		r = im_errf(err, IM_EXIT_IO, -ENOENT, "pool %s: %s", j->pool->name, host_last_error());
	for (size_t i = 0; r == 0 && i < j->n; i++) {
		if (!j->dst[i].vol)
			continue;
		vols[i] = virStorageVolLookupByName(sp, j->rep->disks[i].name);
		if (!vols[i])
			r = im_errf(err, IM_EXIT_IO, -ENOENT, "volume %s: %s", j->rep->disks[i].name,
				    host_last_error());
	}
	if (r < 0) {
		for (size_t i = 0; i < j->n; i++)
			if (vols[i])
				virStorageVolFree(vols[i]);
		if (sp)
			virStoragePoolFree(sp);
		virConnectClose(conn);
		return r;
	}
	for (size_t i = 0; i < j->n; i++) {
		if (!vols[i])
			continue;
		virStorageVolFree(j->dst[i].vol);
		j->dst[i].vol = vols[i];
	}
	virStoragePoolFree(j->sp);
	j->sp = sp;
	virConnectClose(h->conn);
	h->conn = conn;
	return 0;
}

/* One volume's upload; a connection lost on the way (a daemon that stops
 * answering, a network that drops) is made again and the upload begun
 * again, up to --retries times. */
static int upload_volume(struct p2v *j, size_t i)
{
	struct dst *t = &j->dst[i];
	unsigned tries = 0, max = bk_net_get(&j->o->net).retries;
	int r;

	for (;;) {
		r = vol_upload(j->host->conn, t->vol, t->tmp, j->o->progress.cancel, j->err);
		if (r == 0 || j->err->exit_class != IM_EXIT_IO || host_alive(j->host->conn) ||
		    tries >= max)
			return r;
		/* (the first error recorded wins: cleared for the next try) */
		char lost[sizeof(j->err->msg)];
		snprintf(lost, sizeof(lost), "%s", j->err->msg);
		memset(j->err, 0, sizeof(*j->err));
		while (tries < max) {
			struct im_err e = { 0 };
			tries++;
			p2v_tell(j, P2V_UPLOAD, "uploading %s: the connection to %s was lost; connecting "
			     "again (%u of %u)", j->rep->disks[i].name, j->host->uri, tries, max);
			sleep(tries < 5 ? tries : 5);
			if (j->o->progress.cancel && *j->o->progress.cancel)
				return im_errf(j->err, IM_EXIT_INTERRUPTED, -EINTR, "upload interrupted");
			if (reconnect(j, &e) == 0)
				break;
			if (tries >= max)
				return im_errf(j->err, IM_EXIT_IO, e.code ? e.code : -EIO,
					       "%.400s; %u attempt%s to connect again failed (--retries): %.400s",
					       lost, tries, tries == 1 ? "" : "s", e.msg);
		}
	}
}

static int upload_volumes(struct p2v *j)
{
	for (size_t i = 0; i < j->n; i++) {
		struct dst *t = &j->dst[i];

		if (!t->tmp[0])
			continue;
		p2v_tell(j, P2V_UPLOAD, "uploading %s to %s", j->rep->disks[i].name, j->host->uri);
		FORWARD_ERR(upload_volume(j, i));
		unlink(t->tmp);
		t->tmp[0] = '\0';
	}
	return 0;
}

/* After a failure: the volumes this job made are deleted, its temporary
 * files removed. */
static void delete_volumes(struct p2v *j)
{
	for (size_t i = 0; i < j->n; i++) {
		struct dst *t = &j->dst[i];

		if (t->vol && t->created && virStorageVolDelete(t->vol, 0) < 0)
			slot_put(SLOTS(j->rep->rollback), "could not delete volume %s: %s%s%s%s",
				 j->rep->disks[i].name, host_last_error(),
				 host_alive(j->host->conn) ? "" : " (the connection to libvirt is lost: "
				 "delete it with virsh vol-delete --pool ",
				 host_alive(j->host->conn) ? "" : j->rep->pool,
				 host_alive(j->host->conn) ? "" : " once libvirtd answers)");
		if (t->tmp[0])
			unlink(t->tmp);
	}
}

/* ---- with libvirt: the domain ---- */

static const char *default_network(virConnectPtr conn)
{
	virNetworkPtr net = virNetworkLookupByName(conn, "default");
	bool up = net && virNetworkIsActive(net) == 1;

	if (net)
		virNetworkFree(net);
	return up ? NULL : "user";
}

static int define_domain(struct p2v *j)
{
	struct host *h = j->host;
	struct dom_host facts;
	char *xml = NULL;
	int r;

	if (!j->dom.net)
		j->dom.net = default_network(h->conn);
	if (j->dom.net && !strcmp(j->dom.net, "user"))
		p2v_tell(j, P2V_NOTE, "the host's network 'default' is not active: user-mode networking "
				  "(--network or --bridge choose another)");
	dom_host_detect(h->conn, h->local, !j->dom.type, &facts);
	snprintf(j->rep->host_why, sizeof(j->rep->host_why), "%s", facts.why);
	p2v_tell(j, P2V_HOST, "%s", j->rep->host_why);
	r = plan_domain(j, &facts, &xml);
	if (r == 0 && !(j->domain = virDomainDefineXML(h->conn, xml)))
		r = im_errf(j->err, IM_EXIT_TARGET, -EIO, "defining %s on %s: %s", j->dom.name, h->uri,
			    host_last_error());
	free(xml);
	j->rep->defined = r == 0;
	return r;
}

/* --instant (instant.c): overlays over the image folders' exports, the
 * conversion into them, the domain defined and started on them, then
 * copied into its volumes while it runs.  A domain that does not start on
 * its overlays is undefined again (its overlays go).  --resume: the
 * stopped job's overlays served again, its domain defined again on them
 * and started, no conversion; a failure keeps them. */
static int p2v_host_instant(struct p2v *j, int r)
{
	if (r == 0)
		r = instant_prepare(j);
	if (r == 0 && j->o->resume)
		r = instant_redefine(j);
	else if (r == 0 && (r = convert_disks(j)) == 0)
		r = define_domain(j);
	if (r == 0) {
		if (virDomainCreate(j->domain) < 0) {
			r = im_errf(j->err, IM_EXIT_TARGET, -EIO, "domain %s did not start: %s",
				    j->dom.name, host_last_error());
			if (!j->o->resume) {   /* (a domain carried on stays as it was) */
				virDomainUndefineFlags(j->domain, VIR_DOMAIN_UNDEFINE_NVRAM);
				j->rep->defined = false;
			}
		} else {
			j->rep->started = true;
			r = instant_copy(j);
		}
	}
	if (r < 0)
		delete_volumes(j);
	instant_release(j);
	return r;
}

static int p2v_host(struct p2v *j)
{
	int r;

	FORWARD_ERR(check_target(j));
	p2v_tell(j, P2V_POOL, "pool %s (%s) on %s, %s %s", j->pool->name, j->pool->type, j->host->uri,
	     j->format, bk_prealloc_name(j->prealloc));
	r = 0;
	for (size_t i = 0; i < j->n && r == 0; i++)
		r = create_volume(j, i);
	if (j->o->instant)
		return p2v_host_instant(j, r);
	if (r < 0 || (r = write_disks(j)) < 0 || (r = convert_disks(j)) < 0 ||
	    (r = upload_volumes(j)) < 0 || (r = define_domain(j)) < 0) {
		delete_volumes(j);
		return r;
	}
	/* A domain that does not start is complete: kept, for a look. */
	if (j->o->start && virDomainCreate(j->domain) < 0)
		return im_errf(j->err, IM_EXIT_TARGET, -EIO, "domain %s is defined, but did not start: %s",
			       j->dom.name, host_last_error());
	j->rep->started = j->o->start;
	return 0;
}

static int p2v_connect(struct p2v *j)
{
	FORWARD_ERR(open_hosts(j));
	FORWARD_ERR(choose_pool(j, j->o->pool));
	j->rep->host = j->host->uri;
	snprintf(j->rep->pool, sizeof(j->rep->pool), "%s", j->pool->name);
	snprintf(j->rep->pool_type, sizeof(j->rep->pool_type), "%s", j->pool->type);
	choose_layout(j, j->pool);
	return p2v_host(j);
}

static void release(struct p2v *j)
{
	for (size_t i = 0; i < j->n; i++)
		if (j->dst[i].vol)
			virStorageVolFree(j->dst[i].vol);
	if (j->domain)
		virDomainFree(j->domain);
	if (j->sp)
		virStoragePoolFree(j->sp);
	for (size_t i = 0; i < j->o->nuris; i++) {
		free(j->hosts[i].pools);
		if (j->hosts[i].conn)
			virConnectClose(j->hosts[i].conn);
	}
}

/* The job's run state for o (NULL: out of memory). */
static struct p2v *job_new(const struct p2v_opts *o, struct p2v_report *rep, struct im_err *err)
{
	struct p2v *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->o = o;
	j->rep = rep;
	j->err = err;
	j->n = rep->ndisks = o->nsources;
	j->dom = o->dom;
	j->dom.disks = j->disks;
	j->dom.ndisks = j->n;
	return j;
}

int im_p2v(const struct p2v_opts *o, struct p2v_report *rep, struct im_err *err)
{
	struct p2v *j;
	int r;

	memset(rep, 0, sizeof(*rep));
	RETURN_IF(!o->nsources || o->nsources > P2V_MAX_SOURCES, err, IM_EXIT_USAGE, -EINVAL,
		  "p2v takes 1 to %d sources", P2V_MAX_SOURCES);
	RETURN_IF(o->nuris > P2V_MAX_HOSTS, err, IM_EXIT_USAGE, -EINVAL, "p2v takes at most %d hosts",
		  P2V_MAX_HOSTS);
	RETURN_IF(!o->dom.name || !dom_name_ok(o->dom.name), err, IM_EXIT_USAGE, -EINVAL,
		  "p2v needs a domain name of 1 to 64 letters, digits, '_', '.', '+', '-'");
	if (!(j = job_new(o, rep, err)))
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = probe_sources(j);
	if (r == 0)
		r = o->nuris ? p2v_connect(j) : p2v_folder(j);
	release(j);
	free(j);
	return r;
}

int p2v_measure(const struct p2v_opts *o, struct p2v_report *rep, uint64_t *need,
		struct im_err *err)
{
	struct p2v *j;
	int r;

	memset(rep, 0, sizeof(*rep));
	*need = 0;
	RETURN_IF(!o->nsources || o->nsources > P2V_MAX_SOURCES, err, IM_EXIT_USAGE, -EINVAL,
		  "p2v takes 1 to %d sources", P2V_MAX_SOURCES);
	if (!(j = job_new(o, rep, err)))
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = probe_sources(j);
	*need = j->need;
	free(j);
	return r;
}

void p2v_report_free(struct p2v_report *rep)
{
	conv_report_free(&rep->convert.rep);
}
