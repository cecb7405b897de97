/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nbd: an export of a Network Block Device server, reached by its URI
 * (nbd://host[:port]/export, nbd+unix:///export?socket=PATH, nbds://...),
 * through libnbd's synchronous calls.  Modelled on QEMU's block/nbd.c.
 *
 * SIGPIPE: libnbd sends with MSG_NOSIGNAL (see "SIGNALS" in libnbd(3)), so a
 * server that goes away makes calls fail with an errno instead of killing
 * the process; nothing global is changed here.
 *
 * Networks stall and drop (struct bk_net, the job's): every request, and the
 * connection itself, goes through libnbd's asynchronous calls and waits in
 * nbd_poll() for at most the timeout; a server that does not answer in time
 * fails the request with -ETIMEDOUT.  A connection that is lost (the handle
 * is dead) is made again, with a pause of 1, 2, 4... seconds, and the
 * request sent again, up to the retries allowed: reads and writes of whole
 * blocks are safe to repeat.  The export must come back with the same size.
 */
#include <errno.h>
#include <libnbd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "imager/backend.h"

/* Requests larger than this are split even when the server allows more:
 * some servers drop the connection above 32 MiB without saying so. */
#define NBD_MAX_REQUEST (32u << 20)
/* nbd_zero and nbd_block_status lengths travel as 32 bits on the wire. */
#define NBD_MAX_RANGE (1ull << 30)
/* Extents kept from one block-status reply, so that a caller walking the
 * disk range by range does not pay one round trip per extent. */
#define NBD_EXTENT_CACHE 256

struct nbd_state {
	struct nbd_handle *h;
	unsigned timeout_s, retries;   /* the job's (bk->net) */
	char uri[1024];           /* to connect again */
	bool write;
	uint64_t size;
	size_t max_request;       /* bytes per pread/pwrite request */
	bool can_zero, can_flush, have_allocation;
	bool given_up;            /* lost, and every retry spent: later
				     requests fail at once */

	/* [cache_start, cache_start + sum of lengths) as the server last
	 * described it; emptied by every write. */
	uint64_t cache_start;
	unsigned cache_n;
	uint64_t cache_len[NBD_EXTENT_CACHE];
	uint32_t cache_flags[NBD_EXTENT_CACHE];
};

/* The errno of the libnbd call that just failed.  EBADMSG and ENOTSUP mean
 * something else to the framework (a corrupt image, a missing feature), so
 * a server sending them is reported as a plain I/O failure. */
static int nbd_errno(void)
{
	int e = nbd_get_errno();

	if (e <= 0 || e == EBADMSG || e == ENOTSUP)
		return -EIO;
	return -e;
}

/* Record the failure of the libnbd call that just failed, with its text. */
static int nbd_fail(struct im_err *err, int exit_class, const char *uri, const char *what)
{
	int r = nbd_errno();
	const char *msg = nbd_get_error();

	return im_errf(err, exit_class, r, "%s: %s: %s", uri, what,
		       msg && *msg ? msg : strerror(-r));
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Poll the handle until done(h) says so, at most the timeout.  Returns 0,
 * -ETIMEDOUT, or the failure (the handle may then be dead). */
static int poll_until(struct nbd_handle *h, int (*done)(struct nbd_handle *, int64_t), int64_t cookie,
		      unsigned timeout_s)
{
	double deadline = now_s() + timeout_s;

	for (;;) {
		int r = done(h, cookie);
		double left;
		if (r != 0)
			return r > 0 ? 0 : nbd_errno();
		left = deadline - now_s();
		if (left <= 0)
			return -ETIMEDOUT;
		if (nbd_poll(h, (int)(left * 1000) + 1) < 0)
			return nbd_errno();
	}
}

static int connected(struct nbd_handle *h, int64_t unused)
{
	(void)unused;
	if (nbd_aio_is_connecting(h) == 1)
		return 0;
	return nbd_aio_is_ready(h) == 1 ? 1 : -1;
}

/* nbd_connect_uri(), waiting at most the timeout. */
static int connect_wait(struct nbd_handle *h, const char *uri, unsigned timeout_s)
{
	if (nbd_aio_connect_uri(h, uri) < 0)
		return nbd_errno();
	return poll_until(h, connected, 0, timeout_s);
}

static int completed(struct nbd_handle *h, int64_t cookie)
{
	return nbd_aio_command_completed(h, cookie);
}

/* Connect and learn the export's size and limits.  exit_class is where a
 * failure to reach the export belongs: the source, or the target. */
static int nbd_connect_export(struct bk *bk, const char *uri, bool write, int exit_class,
			      struct im_err *err)
{
	struct nbd_state *s = bk->priv;
	int64_t size, minimum, maximum;
	int r;

	s->timeout_s = bk->net.timeout_s;
	s->retries = bk->net.retries;
	s->h = nbd_create();
	if (!s->h)
		return nbd_fail(err, IM_EXIT_INTERNAL, uri, "cannot create an NBD handle");
	/* The URI comes from the command line, so it may name local files
	 * (tls-psk-file=, tls-certificates=), which libnbd refuses by default. */
	if (nbd_set_uri_allow_local_file(s->h, true) < 0 ||
	    nbd_add_meta_context(s->h, LIBNBD_CONTEXT_BASE_ALLOCATION) < 0) {
		r = nbd_fail(err, IM_EXIT_INTERNAL, uri, "setting up the NBD handle");
		goto fail;
	}
	if ((r = connect_wait(s->h, uri, s->timeout_s)) < 0) {
		if (r == -ETIMEDOUT)
			r = im_errf(err, exit_class, r, "%s: cannot connect: no answer within %u s (--timeout)",
				    uri, s->timeout_s);
		else
			r = nbd_fail(err, exit_class, uri, "cannot connect");
		goto fail;
	}
	size = nbd_get_size(s->h);
	if (size < 0) {
		r = nbd_fail(err, exit_class, uri, "cannot get the export's size");
		goto fail;
	}
	if (write && nbd_is_read_only(s->h) == 1) {
		r = im_errf(err, IM_EXIT_TARGET, -EROFS,
			    "%s: the NBD export is read-only (the server refuses writes)", uri);
		goto fail;
	}

	/* The logical sector size is the smallest request the server accepts
	 * (4096 for a 4Kn disk), never below 512.  The preferred size is only
	 * a speed hint, often 4 KiB or more on 512-byte disks, and would move
	 * the partition tables (GPT sits at LBA 1). */
	minimum = nbd_get_block_size(s->h, LIBNBD_SIZE_MINIMUM);
	bk->sector_size = minimum > 512 ? (unsigned)minimum : 512;
	if (minimum > 65536 || (bk->sector_size & (bk->sector_size - 1))) {
		r = im_errf(err, exit_class, -EIO, "%s: the server advertises an invalid minimum "
			    "block size (%lld)", uri, (long long)minimum);
		goto fail;
	}
	/* The server's maximum request, which it may enforce by dropping the
	 * connection: honoured even when small, but whole sectors. */
	maximum = nbd_get_block_size(s->h, LIBNBD_SIZE_MAXIMUM);
	s->max_request = maximum > 0 && maximum < NBD_MAX_REQUEST ? (size_t)maximum : NBD_MAX_REQUEST;
	s->max_request -= s->max_request % bk->sector_size;
	if (s->max_request < bk->sector_size)
		s->max_request = bk->sector_size;

	s->can_zero = nbd_can_zero(s->h) == 1;
	s->can_flush = nbd_can_flush(s->h) == 1;
	s->have_allocation = nbd_can_meta_context(s->h, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;
	bk->size = (uint64_t)size;
	bk->zero_init = false;
	snprintf(s->uri, sizeof(s->uri), "%s", uri);
	s->write = write;
	s->size = (uint64_t)size;
	return 0;

fail:
	nbd_close(s->h);
	s->h = NULL;
	return r;
}

static int nbd_open(struct bk *bk, const char *uri, unsigned flags, struct im_err *err)
{
	bool write = flags & BK_OPEN_WRITE;

	/* Opened for writing, the export is a target (restore opens its target
	 * so); otherwise it is a source. */
	return nbd_connect_export(bk, uri, write, write ? IM_EXIT_TARGET : IM_EXIT_SOURCE, err);
}

/* An export cannot be created: it is the server's.  "Creating" connects
 * for writing and checks that the new disk fits.  Preallocation is the
 * server's business and is not attempted. */
static int nbd_create_export(struct bk *bk, const char *uri, const struct bk_create_opts *o,
			     struct im_err *err)
{
	struct nbd_state *s = bk->priv;
	int r = nbd_connect_export(bk, uri, true, IM_EXIT_TARGET, err);

	if (r < 0)
		return r;
	if (bk->size < o->size) {
		r = im_errf(err, IM_EXIT_TARGET, -ENOSPC,
			    "%s: the NBD export is too small: %llu bytes, %llu needed", uri,
			    (unsigned long long)bk->size, (unsigned long long)o->size);
		nbd_shutdown(s->h, 0);
		nbd_close(s->h);
		s->h = NULL;
		return r;
	}
	return 0;
}

/* The connection made again after it was lost: the same export (size),
 * a new handle.  Returns 0 or negative errno. */
static int reconnect(struct nbd_state *s)
{
	struct nbd_handle *h = nbd_create();
	int r;

	if (!h)
		return -ENOMEM;
	if (nbd_set_uri_allow_local_file(h, true) < 0 ||
	    nbd_add_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION) < 0 ||
	    (r = connect_wait(h, s->uri, s->timeout_s)) < 0 || nbd_get_size(h) != (int64_t)s->size ||
	    (s->write && nbd_is_read_only(h) == 1)) {
		nbd_close(h);
		return -ECONNREFUSED;
	}
	nbd_close(s->h);
	s->h = h;
	s->cache_n = 0;
	return 0;
}

enum req { REQ_READ, REQ_WRITE, REQ_ZERO, REQ_FLUSH, REQ_STATUS };

struct extent_reply {
	struct nbd_state *s;
	bool seen;
};
static int nbd_extents_cb(void *opaque, const char *context, uint64_t offset, uint32_t *entries,
			  size_t nr_entries, int *error);

/* One request, waited for at most the timeout; after a lost connection,
 * connected again and sent again, up to the retries allowed.  Returns 0,
 * -ETIMEDOUT, or the failure's negative errno (ENOTSUP kept for zero). */
static int request(struct nbd_state *s, enum req kind, void *buf, uint64_t n, uint64_t off,
		   struct extent_reply *rep)
{
	for (unsigned attempt = 0;;) {
		int64_t cookie = -1;
		int r;

		switch (kind) {
		case REQ_READ:
			cookie = nbd_aio_pread(s->h, buf, (size_t)n, off, NBD_NULL_COMPLETION, 0);
			break;
		case REQ_WRITE:
			cookie = nbd_aio_pwrite(s->h, buf, (size_t)n, off, NBD_NULL_COMPLETION, 0);
			break;
		case REQ_ZERO:
			cookie = nbd_aio_zero(s->h, n, off, NBD_NULL_COMPLETION, 0);
			break;
		case REQ_FLUSH:
			cookie = nbd_aio_flush(s->h, NBD_NULL_COMPLETION, 0);
			break;
		case REQ_STATUS:
			rep->seen = false;
			cookie = nbd_aio_block_status(s->h, n, off,
						      (nbd_extent_callback){ .callback = nbd_extents_cb,
									     .user_data = rep },
						      NBD_NULL_COMPLETION, 0);
			break;
		}
		if (cookie < 0) {
			r = nbd_errno();
			if (kind == REQ_ZERO && nbd_get_errno() == ENOTSUP)
				return -ENOTSUP;
		} else {
			r = poll_until(s->h, completed, cookie, s->timeout_s);
			if (r < 0 && kind == REQ_ZERO && nbd_get_errno() == ENOTSUP &&
			    nbd_aio_is_dead(s->h) != 1)
				return -ENOTSUP;   /* advertised but refused: written as data */
		}
		if (r == 0 || r == -ETIMEDOUT)
			return r;
		/* A server's answer (EIO, ENOSPC...) is final; a lost connection
		 * is made again, after a pause, while retries are left.  Once
		 * they are spent, the connection stays given up: the job's
		 * later calls (a flush, a close) fail at once. */
		if (nbd_aio_is_dead(s->h) != 1 && nbd_aio_is_closed(s->h) != 1)
			return r;
		do {
			if (s->given_up || attempt >= s->retries) {
				s->given_up = true;
				return r;
			}
			sleep(1u << (attempt < 5 ? attempt : 5));
			attempt++;
		} while (reconnect(s) != 0);
	}
}

/* Part of one sector at off (the server takes whole sectors only:
 * bk->sector_size is its minimum request). */
static int read_partial(struct bk *bk, void *buf, size_t len, uint64_t off)
{
	struct nbd_state *s = bk->priv;
	unsigned ss = bk->sector_size;
	uint64_t start = off - off % ss;
	unsigned char *sec = malloc(ss);
	int r;

	if (!sec)
		return -ENOMEM;
	if (start + ss > s->size)            /* a last sector cut short */
		r = -EIO;
	else if ((r = request(s, REQ_READ, sec, ss, start, NULL)) == 0)
		memcpy(buf, sec + (off - start), len);
	free(sec);
	return r;
}

static int nbd_read(struct bk *bk, void *buf, size_t len, uint64_t off)
{
	struct nbd_state *s = bk->priv;
	unsigned ss = bk->sector_size;

	/* A request that starts or ends inside a sector: those parts are read
	 * whole and cut (qemu-nbd serving VHDX asks for 512-byte units). */
	if (off % ss) {
		size_t n = ss - off % ss < len ? ss - off % ss : len;
		int r = read_partial(bk, buf, n, off);
		if (r < 0)
			return r;
		buf = (char *)buf + n;
		off += n;
		len -= n;
	}
	if (len % ss) {
		size_t n = len % ss;
		int r = read_partial(bk, (char *)buf + (len - n), n, off + (len - n));
		if (r < 0)
			return r;
		len -= n;
	}
	while (len) {
		size_t n = len < s->max_request ? len : s->max_request;
		int r = request(s, REQ_READ, buf, n, off, NULL);
		if (r < 0)
			return r;
		buf = (char *)buf + n;
		off += n;
		len -= n;
	}
	return 0;
}

static int nbd_write(struct bk *bk, const void *buf, size_t len, uint64_t off)
{
	struct nbd_state *s = bk->priv;

	s->cache_n = 0;
	while (len) {
		size_t n = len < s->max_request ? len : s->max_request;
		int r = request(s, REQ_WRITE, (void *)buf, n, off, NULL);
		if (r < 0)
			return r;
		buf = (const char *)buf + n;
		off += n;
		len -= n;
	}
	return 0;
}

static int nbd_write_zeroes(struct bk *bk, uint64_t off, uint64_t len)
{
	struct nbd_state *s = bk->priv;

	if (!s->can_zero)
		return -ENOTSUP;
	s->cache_n = 0;
	while (len) {
		uint64_t n = len < NBD_MAX_RANGE ? len : NBD_MAX_RANGE;
		/* (-ENOTSUP: advertised but refused: the framework writes zeros) */
		int r = request(s, REQ_ZERO, NULL, n, off, NULL);
		if (r < 0)
			return r;
		off += n;
		len -= n;
	}
	return 0;
}

/* Runs inside libnbd with the handle locked: it may only copy. */
static int nbd_extents_cb(void *opaque, const char *context, uint64_t offset, uint32_t *entries,
			  size_t nr_entries, int *error)
{
	struct extent_reply *rep = opaque;
	struct nbd_state *s = rep->s;

	(void)offset;
	(void)error;
	/* A buggy server may answer twice or with contexts we did not ask for. */
	if (strcmp(context, LIBNBD_CONTEXT_BASE_ALLOCATION) || rep->seen)
		return 0;
	rep->seen = true;
	for (size_t i = 0; i + 1 < nr_entries && s->cache_n < NBD_EXTENT_CACHE; i += 2) {
		if (entries[i] == 0)   /* forbidden by the protocol: trust nothing after */
			break;
		s->cache_len[s->cache_n] = entries[i];
		s->cache_flags[s->cache_n] = entries[i + 1];
		s->cache_n++;
	}
	return 0;
}

/* Which of the cached extents holds off; false when none does. */
static bool nbd_cached_extent(struct nbd_state *s, uint64_t off, uint64_t *end, uint32_t *flags)
{
	uint64_t start = s->cache_start;

	if (off < start)
		return false;
	for (unsigned i = 0; i < s->cache_n; i++) {
		if (off < start + s->cache_len[i]) {
			*end = start + s->cache_len[i];
			*flags = s->cache_flags[i];
			return true;
		}
		start += s->cache_len[i];
	}
	return false;
}

/*
 * base:allocation says HOLE (unallocated) and ZERO (reads as zeros)
 * separately.  A range is reported without DATA only when the server says
 * both, so that a caller skipping what is not DATA never skips a hole that
 * could read as something else (as behind a backing file).
 */
static int nbd_status(struct bk *bk, uint64_t off, uint64_t len, uint64_t *pnum)
{
	struct nbd_state *s = bk->priv;
	uint64_t end, count;
	uint32_t flags;

	*pnum = len;
	if (!s->have_allocation)
		return BK_STATUS_DATA;
	if (!nbd_cached_extent(s, off, &end, &flags)) {
		/* Ask beyond len: the rest of the reply serves the next calls. */
		struct extent_reply rep = { .s = s };
		count = bk->size - off < NBD_MAX_RANGE ? bk->size - off : NBD_MAX_RANGE;
		s->cache_start = off;
		s->cache_n = 0;
		int r = request(s, REQ_STATUS, NULL, count, off, &rep);
		if (r < 0) {
			s->cache_n = 0;
			return r;
		}
		if (!nbd_cached_extent(s, off, &end, &flags))
			return BK_STATUS_DATA;   /* the server said nothing usable */
	}
	if (end - off < len)
		*pnum = end - off;
	if ((flags & LIBNBD_STATE_HOLE) && (flags & LIBNBD_STATE_ZERO))
		return BK_STATUS_ZERO;
	return BK_STATUS_DATA | (flags & LIBNBD_STATE_ZERO ? BK_STATUS_ZERO : 0);
}

static int nbd_flush_export(struct bk *bk)
{
	struct nbd_state *s = bk->priv;

	return s->can_flush ? request(s, REQ_FLUSH, NULL, 0, 0, NULL) : 0;
}

/* A written export is flushed first: NBD_CMD_DISC alone does not promise
 * that the server's cache reaches its disk. */
static int nbd_close_export(struct bk *bk)
{
	struct nbd_state *s = bk->priv;
	int r = 0;

	if (bk->writable)
		r = nbd_flush_export(bk);
	if (nbd_shutdown(s->h, 0) < 0 && bk->writable && r == 0)
		r = nbd_errno();
	nbd_close(s->h);
	s->h = NULL;
	return r;
}

const struct bk_driver bk_nbd = {
	.name = "nbd",
	.priv_size = sizeof(struct nbd_state),
	.probe = NULL,
	.create = nbd_create_export,
	.open = nbd_open,
	.pread = nbd_read,
	.pwrite = nbd_write,
	.pwrite_zeroes = nbd_write_zeroes,
	.block_status = nbd_status,
	.flush = nbd_flush_export,
	.close = nbd_close_export,
};
