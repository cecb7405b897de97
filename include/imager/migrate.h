/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Migration plans: many machines onto many libvirt hosts from one plan file,
 * each machine moved by the p2v job (imager/p2v.h) in a process of its own
 * (imager/virt/migrate.c; the command is `imager migrate`, README.md
 * "Migration plans").
 *
 * The plan (JSON; every field checked, unknown keys refused):
 *
 *   {
 *     "hosts": [
 *       { "uri": "qemu+ssh://root@kvm1/system",   required, unique
 *         "pools": ["fast", "bulk"],              the pools it may use; absent: any active one
 *         "jobs": 2,                              machines at once here (1..64; absent: --per-host)
 *         "memory_mib": 65536,                    at most this much booked here (absent: the
 *                                                 host's free memory, as libvirt says)
 *         "vcpus": 32 }                           at most this many vCPUs booked (absent: no limit)
 *     ],
 *     "machines": [
 *       { "name": "web1",                         required, unique, a domain name (dom_name_ok)
 *         "sources": ["/srv/images/web1"],        required, 1..16: anything `imager p2v` takes
 *                                                 as SOURCE (an image folder, a Clonezilla folder,
 *                                                 nbd:// or nbd+unix:// URI, a disk file, an OVA,
 *                                                 an .ovf, a .vmx); a local path must exist
 *         "memory_mib": 4096,                     the domain's memory (absent: 2048, p2v's)
 *         "vcpus": 2,                             its vCPUs (absent: 2)
 *         "convert": true,                        convert the guest for virtio (absent: true)
 *         "format": "qcow2",                      "raw" or "qcow2" (absent: the pool's)
 *         "path": "lan-a" }                       the network path the data comes over (a label)
 *     ],
 *     "per_path": 2,                              machines of one path at once (absent: no limit)
 *     "probe_seconds": 1                          fsync measure of each pool, 0..10 (absent: 1;
 *                                                 0: not measured)
 *   }
 *
 * Placement (mig_place, pure): machines already placed (from the state
 * file) keep their host and pool, and those not done book their memory,
 * vCPUs and disk bytes first.  Then each other machine, in the plan's
 * order: a host fits when it was reached, its booked memory plus the
 * machine's stays within its memory (the host's free memory, or its
 * memory_mib when lower), its booked vCPUs within its vcpus limit (when
 * given), and one of its pools has room for the machine's disks after
 * what is booked there (pools_rank's rule: the sources' sizes plus a
 * margin of 2% of the pool, at least 256 MiB; pools of one host that report
 * the same capacity and the same free space within 1% are taken for one
 * filesystem: what is booked on one is booked on all of them).  The pool
 * is the best that pools_rank gives among those.  Among hosts that fit:
 * the least loaded first (booked vCPUs, with this machine's, per host
 * CPU), then the best pool's measured fsyncs/s (measured before not
 * measured), then the most memory left, then the plan's order.  No host
 * fits: the machine is unplaced (why says so), the others are placed.
 *
 * The run (mig_run): every placed machine not done is moved by im_p2v
 * (its one host, its pool, probe off; force only when an earlier run was
 * stopped while it ran: its half-made volumes are replaced), in a child
 * process of its own that dies with the parent (SIGTERM); at most jobs
 * per host (per_host, else the host's jobs), per_path per network path and
 * jobs in all at once; in the plan's order.  Each child writes
 * DIR/NAME.log (the job's lines) and DIR/NAME.report.json (its report);
 * DIR is the state file's path, its ".json" left out, with ".d" appended
 * (PLAN.state.d beside PLAN.state.json).
 *
 * The state (JSON, written after every change: a temporary file, fsync,
 * rename, the folder fsync'd): per machine its status, host, pool, the
 * bytes its disks need, start and end time, bytes written, attempts, the
 * child's pid, the exit code and the error.  A run finds it and carries on:
 * done machines are not done again, machines another run left running
 * (it was killed) are done again with force (a child of it still alive is
 * stopped first), failed ones are tried again; placements are kept.
 *
 * Nothing here prints.  What happens as it goes comes through the event
 * callback.
 */
#ifndef IMAGER_MIGRATE_H
#define IMAGER_MIGRATE_H
/* The virtualisation (libvirt) layer's header: only that layer and those above it include it
 * (the Makefile sets IMAGER_LAYER for each layer's sources). */
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 3
#error "a lower layer may not use the virtualisation (libvirt) layer"
#endif

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/backend.h"
#include "imager/disk.h"
#include "imager/error.h"
#include "imager/p2v.h"
#include "imager/pools.h"

#define MIG_MAX_MACHINES 256
#define MIG_MAX_HOSTS 64
#define MIG_MAX_POOLS 16
#define MIG_DEFAULT_PER_HOST 2
#define MIG_DEFAULT_MEMORY_MIB 2048
#define MIG_DEFAULT_VCPUS 2

enum mig_status {
	MIG_PENDING,     /* not begun (or to be done again) */
	MIG_RUNNING,     /* its child runs */
	MIG_DONE,        /* defined on its host (and started with --start) */
	MIG_FAILED,      /* its job failed, or its sources could not be read */
	MIG_UNPLACED,    /* no host fits (why) */
};
const char *mig_status_name(enum mig_status s);

struct mig_machine {
	/* The plan's. */
	char name[65];
	char *sources[P2V_MAX_SOURCES];   /* malloc'd */
	size_t nsources;
	uint64_t memory_mib;              /* 0: MIG_DEFAULT_MEMORY_MIB */
	unsigned vcpus;                   /* 0: MIG_DEFAULT_VCPUS */
	bool convert;
	char format[8];                   /* "", "raw", "qcow2" */
	char path[65];                    /* network path label; "": none */
	/* The placement. */
	uint64_t need;                    /* the sources' disks together, bytes */
	int host;                         /* index in the plan's hosts; -1: none */
	char pool[256];
	char why[1100];                   /* unplaced or failed: why */
	/* The run (kept in the state). */
	enum mig_status status;
	bool force;                       /* an earlier run was stopped while it ran */
	unsigned attempts;
	double t_start, t_end;            /* seconds since the epoch; 0: not yet */
	uint64_t bytes;                   /* written onto its disks */
	int exit;                         /* its job's exit code (enum im_exit) */
	long pid;                         /* the child while it runs */
	unsigned long long pid_start;     /* its start time (clock ticks since boot) */
	char convert_result[300];         /* "converted ...", "not converted", the refusal */
	bool started;                     /* --start: the domain was started */
	bool redone;                      /* this run did it again after a stopped run */
};

struct mig_host {
	/* The plan's. */
	char uri[1024];
	char pools[MIG_MAX_POOLS][256];   /* allowed; none: any */
	size_t npools;
	unsigned jobs;                    /* 0: the run's per_host */
	uint64_t memory_mib;              /* 0: the host's free memory */
	unsigned vcpus;                   /* 0: no limit */
	/* What the survey found. */
	bool reached;
	char error[1100];                 /* not reached: why */
	uint64_t free_mib;                /* free memory */
	unsigned cpus;
	struct im_pool *ps;               /* malloc'd; the allowed active pools */
	size_t nps;
};

struct mig_plan {
	struct mig_machine *m;            /* malloc'd */
	size_t nm;
	struct mig_host *h;               /* malloc'd */
	size_t nh;
	unsigned per_path;                /* 0: no limit */
	double probe_seconds;
};

/* Parse a plan from text (len bytes; hostile: anything may be there).
 * Returns 0, or -EINVAL with IM_EXIT_USAGE and a message that names the
 * place ("machines[2].name: ...").  Sources are not looked at. */
int mig_plan_parse(const char *text, size_t len, struct mig_plan *p, struct im_err *err);
/* Read the plan file (at most 4 MiB), parse it, and check that every
 * local source exists (IM_EXIT_USAGE naming the machine otherwise). */
int mig_plan_read(const char *path, struct mig_plan *p, struct im_err *err);
void mig_plan_free(struct mig_plan *p);

/* Place the machines (see above); pure: hosts' reached, free_mib, cpus
 * and ps are its input with the machines' need, host, pool and status. */
void mig_place(struct mig_plan *p);

/* The next machine the run may start (plan order; pending and placed;
 * within the limits given what runs now), or -1. */
int mig_next(const struct mig_plan *p, unsigned per_host, unsigned jobs);

/* The state file: written atomically; read back into a plan whose
 * machines are matched by name (unknown names, and hosts no longer in
 * the plan, are left out: such a machine is placed again).  read returns
 * 0, 1 when there is no state file, or -errno (IM_EXIT_USAGE: not a state
 * file of imager migrate). */
int mig_state_write(const struct mig_plan *p, const char *path, struct im_err *err);
int mig_state_read(struct mig_plan *p, const char *path, struct im_err *err);

enum mig_event {
	MIG_EV_SURVEY,     /* hosts and sources are being looked at (msg: the host or "sources") */
	MIG_EV_WARNING,    /* msg */
	MIG_EV_START,      /* machine i's child started */
	MIG_EV_END,        /* machine i ended (status done or failed) */
};

struct mig_opts {
	const char *state;                /* the state file */
	bool dry_run;                     /* place and return: nothing written */
	bool start;                       /* start each defined domain */
	unsigned per_host;                /* 0: MIG_DEFAULT_PER_HOST */
	unsigned jobs;                    /* 0: no limit but the hosts' */
	const struct disk_roots *roots;
	struct bk_net net;
	const volatile sig_atomic_t *interrupted;
	void (*event)(void *opaque, enum mig_event ev, int machine, const char *msg);
	void *opaque;
};

/*
 * Carry the plan out (see above), or with dry_run only place it.  The
 * machines hold the outcome.  Returns 0 when it ran to its end (machines
 * may have failed: see their status), or -errno: a state file that cannot
 * be read or written (IM_EXIT_USAGE, IM_EXIT_IO), interrupted
 * (IM_EXIT_INTERRUPTED: running children were stopped, they are done
 * again next time).
 */
int mig_run(struct mig_plan *p, const struct mig_opts *o, struct im_err *err);

/* The plan's exit code after a run: 0 when every machine is done;
 * IM_EXIT_INTERRUPTED when one was left pending or running; else
 * IM_EXIT_SOME_FAILED (the others done; each failed machine's own exit code
 * is in its report, an unplaced one's is IM_EXIT_TARGET).  After a dry run
 * (dry): 0 when every machine is placed (or done), else IM_EXIT_TARGET. */
int mig_exit_code(const struct mig_plan *p, bool dry);

#endif
