/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The p2v job's run state, shared by p2v.c and instant.c (p2v --instant);
 * internal to the virtualisation layer. */
#ifndef IMAGER_VIRT_P2V_INT_H
#define IMAGER_VIRT_P2V_INT_H

#include <libvirt/libvirt.h>

#include "imager/p2v.h"
#include "imager/pools.h"

/* The run state of one disk (what was asked is in struct p2v_opts, what
 * came of it in struct p2v_disk). */
struct dst {
	char tmp[4096];              /* upload: the temporary file written here, "" otherwise */
	virStorageVolPtr vol;
	bool created;                /* a volume this job made: deleted on failure */
	bool written;                /* a folder's file this job wrote: removed on failure */
	char overlay[4096];          /* --instant: the qcow2 overlay over the image's export */
};

struct host {
	const char *uri;
	virConnectPtr conn;
	bool local;
	struct im_pool *pools;       /* ranked: best first */
	size_t npools;
};

struct p2v {
	const struct p2v_opts *o;
	struct p2v_report *rep;
	struct im_err *err;
	size_t n;
	uint64_t need;               /* the sources' sizes together */
	const char *format;
	enum bk_prealloc prealloc;
	struct dst dst[P2V_MAX_SOURCES];
	struct dom_opts dom;         /* o->dom with disks, network and machine filled in */
	struct dom_disk disks[P2V_MAX_SOURCES];
	char mac[18];
	struct dom_machine vm_machine;  /* a VM's description's facts (have_vm) */
	bool have_vm;
	/* With hosts. */
	struct host hosts[P2V_MAX_HOSTS];
	struct host *host;           /* the one chosen, with its pool */
	struct im_pool *pool;
	virStoragePoolPtr sp;
	virDomainPtr domain;
	struct instant *inst;        /* --instant (instant.c) */
};

/* A phase with its line for people; warnings and notes are kept in the
 * report too. */
void p2v_tell(struct p2v *j, enum p2v_phase phase, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A phase without a line: the report says what happened. */
void p2v_event(struct p2v *j, enum p2v_phase phase);
/* The guest's facts for the plan (conversion, machine, VM description). */
void p2v_guest_facts(struct p2v *j, struct dom_guest *g);

/* --instant (instant.c), in this order: instant_prepare after the volumes
 * are created (the checks, a server per image folder, the overlays: disk
 * i is then its overlay, for the conversion and the definition);
 * instant_copy once the domain runs (each overlay copied into its volume
 * by libvirt's block copy, pivoted, the definition written again with the
 * volumes); instant_release at the end whatever happened (servers stopped;
 * overlays removed unless a started guest still needs them). */
int instant_prepare(struct p2v *j);
/* --resume: the domain a stopped instant job left (on its overlays) must
 * exist; a guest still running there (paused: its server died with the
 * job) is destroyed first.  instant_redefine then defines it again with
 * the new servers' sockets, in place of the conversion and definition. */
int instant_check_resume(struct p2v *j);
int instant_redefine(struct p2v *j);
int instant_copy(struct p2v *j);
void instant_release(struct p2v *j);

#endif
