/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An ordered parallel pipeline: one producer thread fills slots in order,
 * `threads` workers process them in any order, and the calling thread
 * consumes them in order.  Memory is bounded: a fixed ring of slots, each
 * with two buffers (a_cap and b_cap bytes) and a meta area.
 *
 * Callbacks return >= 0 on success or a negative errno; the first failure
 * stops the pipeline, which then returns it.  produce() returns 1 when it
 * filled the slot, 0 at the end.  A worker's failure is delivered to the
 * consumer in order, through slot->status, so errors are reported in the
 * order of the data (the earliest damaged frame is the one named).
 */
#ifndef IMAGER_PIPELINE_H
#define IMAGER_PIPELINE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/error.h"

/* Progress, as every job takes it (job.h): the engine calls fn with bytes done of total for the phase;
 * the command decides whether and how often to draw. */
struct im_progress {
	void (*fn)(void *opaque, const char *phase, uint64_t done, uint64_t total);
	void *opaque;
	/* Set (by a signal handler) to stop the job: it ends between two
	 * frames with IM_EXIT_INTERRUPTED and cleans up as on any failure. */
	const volatile sig_atomic_t *cancel;
	/* A line worth telling before or while the job runs (the plan of a
	 * shrink, a step begun); NULL: not told. */
	void (*note)(void *opaque, const char *line);
};

struct pipe_slot {
	uint64_t seq;
	unsigned char *a, *b;
	size_t a_cap, b_cap, a_len, b_len;
	void *meta;
	int status;               /* set by work(): 0 or negative errno */
	struct im_err err;        /* detail of a work() failure */
};

struct pipe_ops {
	/* Producer thread: fill slot (seq is set).  1 = filled, 0 = end. */
	int (*produce)(void *ctx, struct pipe_slot *slot, struct im_err *err);
	/* Worker threads: process a slot; wstate from worker_init. */
	int (*work)(void *ctx, void *wstate, struct pipe_slot *slot);
	/* Calling thread, in order.  slot->status tells how work() went. */
	int (*consume)(void *ctx, struct pipe_slot *slot, struct im_err *err);
	/* Optional per-worker state (a compression context). */
	void *(*worker_init)(void *ctx);
	void (*worker_fini)(void *ctx, void *wstate);
	/* When it points at a non-zero value, the pipeline stops before the
	 * next consume() with IM_EXIT_INTERRUPTED. */
	const volatile sig_atomic_t *cancel;
};

int pipeline_run(const struct pipe_ops *ops, void *ctx, unsigned threads,
		 size_t a_cap, size_t b_cap, size_t meta_size, struct im_err *err);

/* Worker threads to use by default: the online cores. */
unsigned pipeline_default_threads(void);

#endif
