/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "imager/pipeline.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum slot_state { SLOT_FREE, SLOT_FILLED, SLOT_WORKING, SLOT_DONE };

struct pipe {
	const struct pipe_ops *ops;
	void *ctx;
	size_t nslots;
	struct pipe_slot *slots;
	enum slot_state *state;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	uint64_t next_fill;       /* seq the producer fills next */
	uint64_t next_work;       /* lowest seq not yet taken by a worker */
	bool produced_all;        /* producer reached the end (or failed) */
	bool stop;                /* abort: someone failed */
	int produce_status;
	struct im_err produce_err;
};

unsigned pipeline_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

static void *producer_main(void *arg)
{
	struct pipe *p = arg;

	for (;;) {
		struct pipe_slot *s;
		int r;

		pthread_mutex_lock(&p->lock);
		while (!p->stop && p->state[p->next_fill % p->nslots] != SLOT_FREE)
			pthread_cond_wait(&p->changed, &p->lock);
		if (p->stop) {
			p->produced_all = true;
			pthread_cond_broadcast(&p->changed);
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		s = &p->slots[p->next_fill % p->nslots];
		pthread_mutex_unlock(&p->lock);

		s->seq = p->next_fill;
		s->a_len = s->b_len = 0;
		s->status = 0;
		memset(&s->err, 0, sizeof(s->err));
		r = p->ops->produce(p->ctx, s, &p->produce_err);

		pthread_mutex_lock(&p->lock);
		if (r <= 0) {
			p->produce_status = r;
			p->produced_all = true;
			pthread_cond_broadcast(&p->changed);
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		p->state[p->next_fill % p->nslots] = SLOT_FILLED;
		p->next_fill++;
		pthread_cond_broadcast(&p->changed);
		pthread_mutex_unlock(&p->lock);
	}
}

static void *worker_main(void *arg)
{
	struct pipe *p = arg;
	void *ws = p->ops->worker_init ? p->ops->worker_init(p->ctx) : NULL;

	for (;;) {
		struct pipe_slot *s;
		size_t i;

		pthread_mutex_lock(&p->lock);
		for (;;) {
			if (p->stop)
				goto out_locked;
			if (p->next_work < p->next_fill)
				break;
			if (p->produced_all)
				goto out_locked;
			pthread_cond_wait(&p->changed, &p->lock);
		}
		i = p->next_work % p->nslots;
		p->next_work++;
		p->state[i] = SLOT_WORKING;
		s = &p->slots[i];
		pthread_mutex_unlock(&p->lock);

		if (p->ops->worker_init && !ws)
			s->status = im_errf(&s->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		else
			s->status = p->ops->work(p->ctx, ws, s);

		pthread_mutex_lock(&p->lock);
		p->state[i] = SLOT_DONE;
		pthread_cond_broadcast(&p->changed);
		pthread_mutex_unlock(&p->lock);
	}
out_locked:
	pthread_mutex_unlock(&p->lock);
	if (p->ops->worker_fini && ws)
		p->ops->worker_fini(p->ctx, ws);
	return NULL;
}

/* Tell every thread to stop; they finish the slot in hand and return. */
static void pipe_stop(struct pipe *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->changed);
	pthread_mutex_unlock(&p->lock);
}

static int slots_alloc(struct pipe *p, size_t a_cap, size_t b_cap, size_t meta_size,
		       struct im_err *err)
{
	p->slots = calloc(p->nslots, sizeof(*p->slots));
	p->state = calloc(p->nslots, sizeof(*p->state));
	if (!p->slots || !p->state)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	for (size_t i = 0; i < p->nslots; i++) {
		struct pipe_slot *s = &p->slots[i];
		s->a_cap = a_cap;
		s->b_cap = b_cap;
		/* Aligned, so that what a slot holds can be written with
		 * O_DIRECT as it is (util.h, struct dio). */
		s->a = a_cap ? dio_alloc(a_cap) : NULL;
		s->b = b_cap ? dio_alloc(b_cap) : NULL;
		s->meta = meta_size ? calloc(1, meta_size) : NULL;
		if ((a_cap && !s->a) || (b_cap && !s->b) || (meta_size && !s->meta))
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	return 0;
}

static void slots_free(struct pipe *p)
{
	for (size_t i = 0; p->slots && i < p->nslots; i++) {
		free(p->slots[i].a);
		free(p->slots[i].b);
		free(p->slots[i].meta);
	}
	free(p->slots);
	free(p->state);
}

/* The threads of one run: the producer and as many workers as would start. */
struct pipe_threads {
	pthread_t producer, *workers;
	bool producer_started;
	unsigned started;
};

/* The producer, then the workers; fewer workers than asked is fine, none
 * is an error. */
static int threads_start(struct pipe *p, unsigned threads, struct pipe_threads *t,
			 struct im_err *err)
{
	if (pthread_create(&t->producer, NULL, producer_main, p) != 0)
		return im_errf(err, IM_EXIT_INTERNAL, -EAGAIN, "cannot start a thread");
	t->producer_started = true;
	for (; t->started < threads; t->started++)
		if (pthread_create(&t->workers[t->started], NULL, worker_main, p) != 0)
			break;
	if (t->started == 0)
		return im_errf(err, IM_EXIT_INTERNAL, -EAGAIN, "cannot start a thread");
	return 0;
}

static void threads_join(struct pipe_threads *t)
{
	for (unsigned i = 0; i < t->started; i++)
		pthread_join(t->workers[i], NULL);
	if (t->producer_started)
		pthread_join(t->producer, NULL);
}

/* Wait until slot seq is worked on, or the producer ended before it.
 * Returns with the lock held: true when the slot is there to consume. */
static bool wait_for_slot(struct pipe *p, uint64_t seq)
{
	enum slot_state *state = &p->state[seq % p->nslots];

	pthread_mutex_lock(&p->lock);
	while (!(seq < p->next_fill && *state == SLOT_DONE) && !(p->produced_all && seq >= p->next_fill))
		pthread_cond_wait(&p->changed, &p->lock);
	return seq < p->next_fill;
}

/* The calling thread's part: consume every slot in order until the
 * producer's end (its failure, if it failed), a consumer's failure or a
 * cancel. */
static int consume_in_order(struct pipe *p, struct im_err *err)
{
	const struct pipe_ops *ops = p->ops;

	for (uint64_t seq = 0;; seq++) {
		struct pipe_slot *s = &p->slots[seq % p->nslots];
		int r;

		if (!wait_for_slot(p, seq)) {   /* produced_all and drained */
			pthread_mutex_unlock(&p->lock);
			if (p->produce_status >= 0)
				return 0;
			if (!p->produce_err.exit_class)
				im_errf(&p->produce_err, IM_EXIT_IO, p->produce_status, "%s",
					strerror(-p->produce_status));
			*err = p->produce_err;
			return p->produce_status;
		}
		pthread_mutex_unlock(&p->lock);
		if (ops->cancel && *ops->cancel)
			return im_errf(err, IM_EXIT_INTERRUPTED, -ECANCELED, "interrupted");
		r = ops->consume(p->ctx, s, err);
		if (r < 0)
			return r;
		pthread_mutex_lock(&p->lock);
		p->state[seq % p->nslots] = SLOT_FREE;
		pthread_cond_broadcast(&p->changed);
		pthread_mutex_unlock(&p->lock);
	}
}

int pipeline_run(const struct pipe_ops *ops, void *ctx, unsigned threads,
		 size_t a_cap, size_t b_cap, size_t meta_size, struct im_err *err)
{
	struct pipe p = { .ops = ops, .ctx = ctx };
	struct pipe_threads t = { 0 };
	int r;

	if (threads < 1)
		threads = 1;
	/* Enough slots to keep every worker busy while one is written out
	 * and one is being read in; few enough to bound memory. */
	p.nslots = threads + 3;
	t.workers = calloc(threads, sizeof(*t.workers));
	r = t.workers ? slots_alloc(&p, a_cap, b_cap, meta_size, err) :
			im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	if (r == 0) {
		pthread_mutex_init(&p.lock, NULL);
		pthread_cond_init(&p.changed, NULL);
		r = threads_start(&p, threads, &t, err);
		if (r == 0)
			r = consume_in_order(&p, err);
		if (r < 0)
			pipe_stop(&p);
		threads_join(&t);
		pthread_cond_destroy(&p.changed);
		pthread_mutex_destroy(&p.lock);
	}
	slots_free(&p);
	free(t.workers);
	return r;
}
