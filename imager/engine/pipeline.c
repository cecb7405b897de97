/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "imager/pipeline.h"

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

int pipeline_run(const struct pipe_ops *ops, void *ctx, unsigned threads,
		 size_t a_cap, size_t b_cap, size_t meta_size, struct im_err *err)
{
	struct pipe p = { .ops = ops, .ctx = ctx };
	pthread_t producer, *workers = NULL;
	unsigned started = 0;
	uint64_t next_consume = 0;
	bool producer_started = false;
	int r = 0;

	if (threads < 1)
		threads = 1;
	/* Enough slots to keep every worker busy while one is written out
	 * and one is being read in; few enough to bound memory. */
	p.nslots = threads + 3;
	p.slots = calloc(p.nslots, sizeof(*p.slots));
	p.state = calloc(p.nslots, sizeof(*p.state));
	workers = calloc(threads, sizeof(*workers));
	if (!p.slots || !p.state || !workers) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < p.nslots; i++) {
		struct pipe_slot *s = &p.slots[i];
		s->a_cap = a_cap;
		s->b_cap = b_cap;
		s->a = a_cap ? malloc(a_cap) : NULL;
		s->b = b_cap ? malloc(b_cap) : NULL;
		s->meta = meta_size ? calloc(1, meta_size) : NULL;
		if ((a_cap && !s->a) || (b_cap && !s->b) || (meta_size && !s->meta)) {
			r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
			goto out;
		}
	}
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.changed, NULL);
	if (pthread_create(&producer, NULL, producer_main, &p) != 0) {
		r = im_errf(err, IM_EXIT_INTERNAL, -EAGAIN, "cannot start a thread");
		goto out_sync;
	}
	producer_started = true;
	for (; started < threads; started++)
		if (pthread_create(&workers[started], NULL, worker_main, &p) != 0)
			break;
	if (started == 0) {
		r = im_errf(err, IM_EXIT_INTERNAL, -EAGAIN, "cannot start a thread");
		pthread_mutex_lock(&p.lock);
		p.stop = true;
		pthread_cond_broadcast(&p.changed);
		pthread_mutex_unlock(&p.lock);
		goto out_join;
	}

	for (;;) {
		size_t i = next_consume % p.nslots;
		struct pipe_slot *s = &p.slots[i];

		pthread_mutex_lock(&p.lock);
		while (!(next_consume < p.next_fill && p.state[i] == SLOT_DONE) &&
		       !(p.produced_all && next_consume >= p.next_fill))
			pthread_cond_wait(&p.changed, &p.lock);
		if (next_consume >= p.next_fill) {   /* produced_all and drained */
			pthread_mutex_unlock(&p.lock);
			if (p.produce_status < 0) {
				r = p.produce_status;
				if (!p.produce_err.exit_class)
					im_errf(&p.produce_err, IM_EXIT_IO, r, "%s", strerror(-r));
				*err = p.produce_err;
			}
			break;
		}
		pthread_mutex_unlock(&p.lock);

		if (ops->cancel && *ops->cancel) {
			r = im_errf(err, IM_EXIT_INTERRUPTED, -ECANCELED, "interrupted");
			break;
		}
		r = ops->consume(ctx, s, err);
		if (r < 0)
			break;
		pthread_mutex_lock(&p.lock);
		p.state[i] = SLOT_FREE;
		next_consume++;
		pthread_cond_broadcast(&p.changed);
		pthread_mutex_unlock(&p.lock);
	}
	if (r < 0) {
		pthread_mutex_lock(&p.lock);
		p.stop = true;
		pthread_cond_broadcast(&p.changed);
		pthread_mutex_unlock(&p.lock);
	}
out_join:
	for (unsigned i = 0; i < started; i++)
		pthread_join(workers[i], NULL);
	if (producer_started)
		pthread_join(producer, NULL);
out_sync:
	pthread_cond_destroy(&p.changed);
	pthread_mutex_destroy(&p.lock);
out:
	if (p.slots)
		for (size_t i = 0; i < p.nslots; i++) {
			free(p.slots[i].a);
			free(p.slots[i].b);
			free(p.slots[i].meta);
		}
	free(p.slots);
	free(p.state);
	free(workers);
	return r;
}
