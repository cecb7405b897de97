/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * P2V as one job: every source (a disk, an image file, an image folder or
 * an NBD export) becomes a disk of a new machine, the guest is converted
 * for virtio, and the VM is defined.
 *
 * im_p2v(), in this order:
 *   1. the sources are probed (an image folder by its manifest, anything
 *      else through the backends) for their sizes.  A VM's description
 *      (an OVA, an OVF folder's .ovf, a .vmx: at most one) stands for its
 *      disks, in its order, and its memory, vCPUs, first NIC's MAC and
 *      firmware are the machine's facts (unless machine is given);
 *   2. with hosts (uris): each is connected, its active pools listed
 *      (measured with probe) and ranked for the sum of the sizes; a host
 *      that cannot be reached, or whose pools cannot be listed, is skipped
 *      with a warning when there are several.  The pool is the one named
 *      (first host that has it), else the best fitting pool of each host,
 *      the host whose best pool has the most room winning.  Format and
 *      preallocation not given come from the pool's recommendation;
 *   3. an existing domain of that name is refused, or with force (shut off)
 *      undefined first; the volumes NAME-diskN[.raw|.qcow2] are created
 *      through libvirt's storage API (force: replacing volumes of those
 *      names).  Without hosts: the folder (output, default ./NAME; made
 *      when absent) gets NAME-diskN.raw|qcow2 and NAME.xml, existing ones
 *      refused unless force;
 *   4. each source is restored (image folder) or cloned into its disk:
 *      straight into the volume's file when the host is this machine and
 *      the file is writable from here, else into a temporary file here
 *      ($TMPDIR, else /var/tmp; upload takes that way on a local host too);
 *   5. unless convert is false or the bus asked for is sata or ide (a
 *      guest kept there keeps its device names), the guest on all disks is
 *      converted (im_convert).  A guest the conversion refuses or where no
 *      single system was found is not an error: a warning, and the plan
 *      takes what inspection knew (SATA and e1000 for a known system);
 *   6. the temporary files are uploaded into their volumes (sparse);
 *   7. the domain is planned (dom_decide with the guest's facts; with
 *      machine, that machine's memory, vCPUs, MAC and firmware; else, all
 *      sources block devices: live media, this machine's), its XML written (dom_xml), defined on the host
 *      (without a network asked for: the host's network "default" when it
 *      is active, else user-mode networking, with a note) and, with start,
 *      started; or NAME.xml written into the folder, last.
 *
 * Failure leaves nothing half-made: volumes and files the job created are
 * deleted again (what could not be deleted is listed in the report's
 * rollback), a folder it made is removed; the domain is defined (or its
 * XML written) last.  One exception: a domain defined that does not start
 * is kept with its disks, for a look.
 *
 * Nothing here prints or exits.  What a person would want to see as the
 * job goes on comes through the phase callback (and progress while each
 * disk is written); the outcome is the report.
 */
#ifndef IMAGER_P2V_H
#define IMAGER_P2V_H
/* The virtualisation (libvirt) layer's header: only that layer and those above it include it
 * (the Makefile sets IMAGER_LAYER for each layer's sources). */
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 3
#error "a lower layer may not use the virtualisation (libvirt) layer"
#endif


#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/backend.h"
#include "imager/convert.h"
#include "imager/disk.h"
#include "imager/domain.h"
#include "imager/error.h"
#include "imager/job.h"

#define P2V_MAX_SOURCES 16
#define P2V_MAX_HOSTS 8

/* What the phase callback is told, in the order it happens.  msg is the
 * line for people ("" when the phase carries none). */
enum p2v_phase {
	P2V_WARNING,     /* something went less well than asked; also in rep->warnings */
	P2V_POOL,        /* the pool chosen: "pool NAME (TYPE) on URI, FORMAT PREALLOC" */
	P2V_WRITE,       /* a disk is about to be written (progress follows) */
	P2V_WRITTEN,     /* "SOURCE written to PATH" */
	P2V_CONVERT,     /* the conversion starts */
	P2V_CONVERTED,   /* rep->convert holds its outcome (r 0: converted) */
	P2V_UPLOAD,      /* "uploading NAME to URI" */
	P2V_NOTE,        /* worth telling even when quiet about phases; also in rep->notes */
	P2V_HOST,        /* what the host can do, for the plan (rep->host_why) */
	P2V_PLANNED,     /* rep->plan holds the choices (and their warnings) */
};

struct p2v_opts {
	const struct disk_roots *roots;
	const char *const *sources;
	size_t nsources;             /* 1..P2V_MAX_SOURCES */
	const char *const *uris;     /* libvirt hosts, in order of preference */
	size_t nuris;                /* 0..P2V_MAX_HOSTS; 0: the output folder */
	const char *pool;            /* a pool name; NULL or "auto": the best */
	const char *output;          /* without hosts: the folder; NULL: ./NAME */
	const char *format;          /* "raw", "qcow2"; NULL: the pool's (a folder: qcow2) */
	enum bk_prealloc prealloc;
	bool prealloc_set;           /* false: the pool's recommendation (a folder:
				      * metadata for qcow2, falloc for raw) */
	bool force;                  /* replace the domain, volumes or files of these names */
	bool start;                  /* start the defined domain */
	bool instant;                /* start it at once on overlays over the image folders'
				      * exports, then copy it into its volumes while it runs
				      * (a host on this machine; see "--instant" above) */
	bool resume;                 /* --instant: carry on a job that was stopped mid-copy
				      * (its domain and overlays kept): no conversion, the
				      * overlays served again, the copy begun again */
	uint64_t copy_rate;          /* --instant: each disk's copy at most this many
				      * bytes/s (libvirt's block copy bandwidth); 0: no limit */
	bool probe;                  /* measure the pools' fsyncs/s for the ranking */
	bool convert;                /* convert the guest for virtio (see 5. above) */
	bool rebuild_initramfs;      /* conversion: the guest's own initramfs tool */
	bool upload;                 /* a local host too gets its data by upload */
	uint64_t disk_size;          /* each disk this large (--disk-size); 0: the source's */
	bool shrink;                 /* onto a smaller disk: shrink filesystems (job.h) */
	struct bk_net net;           /* NBD sources and targets, libvirt connections:
				      * --timeout, --retries (backend.h) */
	const char *virtio_win;      /* conversion: Windows drivers (convert.h) */
	const struct conv_key *keys; /* conversion: encrypted volumes' keys (convert.h) */
	size_t nkeys;
	struct dom_opts dom;         /* the user's wishes (name required); disks are the job's */
	const struct dom_machine *machine; /* the source machine's facts (p2v --facts: memory,
				      * vCPUs, MAC, firmware); NULL: this machine's when
				      * every source is a block device, else none */
	struct im_progress progress; /* each disk's writing; cancel stops uploads too */
	void (*phase)(void *opaque, enum p2v_phase phase, const char *msg);  /* may be NULL */
	void *opaque;
};

struct p2v_disk {
	const char *source;          /* as given (opts->sources[i]), or spec for a disk of
				      * a VM's description */
	char spec[600];              /* a disk of a VM's description (an OVA, an OVF, a
				      * .vmx: "PATH/N", backend.h); "" otherwise */
	bool folder, block;          /* the source is an image folder, a block device */
	uint64_t capacity;           /* the disk's size: the source's, or --disk-size */
	char name[256];              /* the volume's or file's name */
	char path[4096];             /* the volume's path on its host, or the file
				      * (absolute when the folder could be resolved) */
	char format[8];              /* "raw", "qcow2" */
	enum bk_prealloc prealloc;
};

struct p2v_report {
	struct p2v_disk disks[P2V_MAX_SOURCES];
	size_t ndisks;
	const char *host;            /* the URI the domain went to (one of opts->uris); NULL: a folder */
	char pool[256], pool_type[16];
	char output[4096];           /* the folder ("" with a host) */
	char xml_path[4096];         /* the folder's NAME.xml */
	struct conv_step convert;    /* ran, r, rep and err (convert.h); opts NULL */
	char host_why[256];          /* what the host can do, for people */
	bool planned;
	struct dom_plan plan;
	bool defined, started;
	char warnings[8][600];       /* the first eight warnings ("" unused) */
	char notes[3][300];
	char rollback[P2V_MAX_SOURCES][600];   /* after a failure: what could not be undone */
};

/*
 * Run the job.  rep is filled as far as the job got, in every case (free
 * it with p2v_report_free() whatever the result).  Returns 0, or a
 * negative errno with err filled: IM_EXIT_USAGE for bad options (a
 * pool's format, the domain options: dom_decide), IM_EXIT_SOURCE for a
 * source that cannot be read, IM_EXIT_TARGET for hosts, pools, volumes,
 * domains and folders that refuse (no host reached, no pool or no room,
 * a domain or file that exists, a domain running, defining or starting
 * failed), and the errors of im_restore(), im_clone(), im_convert() (but
 * its refusals, see 5. above) and vol_upload().
 */
int im_p2v(const struct p2v_opts *o, struct p2v_report *rep, struct im_err *err);
void p2v_report_free(struct p2v_report *rep);

/* Step 1 alone: o's sources probed as im_p2v() probes them (a VM's
 * description for its disks; o->disk_size counts), no host touched.
 * rep->disks and ndisks are filled, *need is their sizes together.
 * Returns 0 or a negative errno with err filled (im_p2v's source errors). */
int p2v_measure(const struct p2v_opts *o, struct p2v_report *rep, uint64_t *need,
		struct im_err *err);

#endif
