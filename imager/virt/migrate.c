// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Migration plans (include/imager/migrate.h): the plan read as hostile
 * JSON, the machines placed on hosts and pools, each moved by im_p2v() in
 * a child process, the state kept in a file beside the plan.
 *
 * The parent never opens a libvirt connection (libvirt runs threads, and
 * a child forked from a threaded process may inherit a held lock): the
 * hosts are surveyed and the sources measured by children too, which hand
 * their findings back through pipes.
 */
#include "imager/migrate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libvirt/libvirt.h>

#include "imager/domain.h"
#include "imager/host.h"
#include "util.h"

#define MiB (1024ull * 1024)

const char *mig_status_name(enum mig_status s)
{
	switch (s) {
	case MIG_PENDING: return "pending";
	case MIG_RUNNING: return "running";
	case MIG_DONE: return "done";
	case MIG_FAILED: return "failed";
	case MIG_UNPLACED: return "unplaced";
	}
	return "pending";
}

static int status_parse(const char *s, enum mig_status *out)
{
	for (int i = MIG_PENDING; i <= MIG_UNPLACED; i++)
		if (!strcmp(s, mig_status_name((enum mig_status)i))) {
			*out = (enum mig_status)i;
			return 0;
		}
	return -1;
}

static double now_epoch(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the plan: hostile JSON ---- */

#define BAD(err, ...) im_errf((err), IM_EXIT_USAGE, -EINVAL, __VA_ARGS__)

/* A string of 1..max-1 printable bytes (no control characters) into out. */
static int take_string(json_object *v, const char *where, char *out, size_t max,
		       struct im_err *err)
{
	const char *s;
	size_t n;

	if (!json_object_is_type(v, json_type_string))
		return BAD(err, "%s: must be a string", where);
	s = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	if (n == 0 || n >= max || strlen(s) != n)
		return BAD(err, "%s: must be 1 to %zu characters", where, max - 1);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return BAD(err, "%s: control characters are not allowed", where);
	memcpy(out, s, n + 1);
	return 0;
}

static int take_uint(json_object *v, const char *where, uint64_t min, uint64_t max,
		     uint64_t *out, struct im_err *err)
{
	int64_t n;

	if (!json_object_is_type(v, json_type_int))
		return BAD(err, "%s: must be a whole number", where);
	errno = 0;
	n = json_object_get_int64(v);
	if (errno || n < 0 || (uint64_t)n < min || (uint64_t)n > max)
		return BAD(err, "%s: must be from %llu to %llu", where, (unsigned long long)min,
			   (unsigned long long)max);
	*out = (uint64_t)n;
	return 0;
}

static int take_array(json_object *v, const char *where, size_t min, size_t max,
		      struct im_err *err)
{
	size_t n;

	if (!json_object_is_type(v, json_type_array))
		return BAD(err, "%s: must be a list", where);
	n = json_object_array_length(v);
	if (n < min || n > max)
		return BAD(err, "%s: must hold %zu to %zu entries", where, min, max);
	return 0;
}

/* Every key of o must be one of keys (NULL-terminated). */
static int known_keys(json_object *o, const char *where, const char *const *keys,
		      struct im_err *err)
{
	json_object_object_foreach(o, key, val) {
		bool known = false;

		(void)val;
		for (size_t i = 0; keys[i] && !known; i++)
			known = !strcmp(key, keys[i]);
		if (!known) {
			char shown[64];
			size_t k = 0;

			for (const char *c = key; *c && k < sizeof(shown) - 1; c++)
				shown[k++] = (unsigned char)*c < 0x20 ? '?' : *c;
			shown[k] = '\0';
			return BAD(err, "%s: unknown key \"%s\"", where, shown);
		}
	}
	return 0;
}

static int parse_host(json_object *o, size_t i, struct mig_host *h, struct im_err *err)
{
	static const char *const keys[] = { "uri", "pools", "jobs", "memory_mib", "vcpus", NULL };
	char where[64];
	json_object *v;
	uint64_t n;

	snprintf(where, sizeof(where), "hosts[%zu]", i);
	if (!json_object_is_type(o, json_type_object))
		return BAD(err, "%s: must be an object", where);
	FORWARD_ERR(known_keys(o, where, keys, err));
	if (!json_object_object_get_ex(o, "uri", &v))
		return BAD(err, "%s: needs \"uri\" (a libvirt URI)", where);
	snprintf(where, sizeof(where), "hosts[%zu].uri", i);
	FORWARD_ERR(take_string(v, where, h->uri, sizeof(h->uri), err));
	if (json_object_object_get_ex(o, "pools", &v)) {
		snprintf(where, sizeof(where), "hosts[%zu].pools", i);
		FORWARD_ERR(take_array(v, where, 1, MIG_MAX_POOLS, err));
		h->npools = json_object_array_length(v);
		for (size_t k = 0; k < h->npools; k++) {
			snprintf(where, sizeof(where), "hosts[%zu].pools[%zu]", i, k);
			FORWARD_ERR(take_string(json_object_array_get_idx(v, k), where, h->pools[k],
						sizeof(h->pools[k]), err));
		}
	}
	if (json_object_object_get_ex(o, "jobs", &v)) {
		snprintf(where, sizeof(where), "hosts[%zu].jobs", i);
		FORWARD_ERR(take_uint(v, where, 1, 64, &n, err));
		h->jobs = (unsigned)n;
	}
	if (json_object_object_get_ex(o, "memory_mib", &v)) {
		snprintf(where, sizeof(where), "hosts[%zu].memory_mib", i);
		FORWARD_ERR(take_uint(v, where, 64, 1ull << 40, &h->memory_mib, err));
	}
	if (json_object_object_get_ex(o, "vcpus", &v)) {
		snprintf(where, sizeof(where), "hosts[%zu].vcpus", i);
		FORWARD_ERR(take_uint(v, where, 1, 65536, &n, err));
		h->vcpus = (unsigned)n;
	}
	return 0;
}

static int parse_machine(json_object *o, size_t i, struct mig_machine *m, struct im_err *err)
{
	static const char *const keys[] = { "name", "sources", "memory_mib", "vcpus", "convert",
					    "format", "path", NULL };
	char where[96], src[4096];
	json_object *v;
	uint64_t n;

	m->host = -1;
	m->convert = true;
	snprintf(where, sizeof(where), "machines[%zu]", i);
	if (!json_object_is_type(o, json_type_object))
		return BAD(err, "%s: must be an object", where);
	FORWARD_ERR(known_keys(o, where, keys, err));
	if (!json_object_object_get_ex(o, "name", &v))
		return BAD(err, "%s: needs \"name\"", where);
	snprintf(where, sizeof(where), "machines[%zu].name", i);
	FORWARD_ERR(take_string(v, where, m->name, sizeof(m->name), err));
	if (!dom_name_ok(m->name))
		return BAD(err, "%s \"%s\": use 1 to 64 letters, digits, '_', '.', '+', '-'", where,
			   m->name);
	snprintf(where, sizeof(where), "machines[%zu] (%s)", i, m->name);
	if (!json_object_object_get_ex(o, "sources", &v))
		return BAD(err, "%s: needs \"sources\" (a list of what p2v takes as SOURCE)", where);
	snprintf(where, sizeof(where), "machines[%zu].sources", i);
	FORWARD_ERR(take_array(v, where, 1, P2V_MAX_SOURCES, err));
	for (size_t k = 0; k < json_object_array_length(v); k++) {
		snprintf(where, sizeof(where), "machines[%zu].sources[%zu]", i, k);
		FORWARD_ERR(take_string(json_object_array_get_idx(v, k), where, src, sizeof(src), err));
		if (!(m->sources[k] = strdup(src)))
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		m->nsources = k + 1;
	}
	if (json_object_object_get_ex(o, "memory_mib", &v)) {
		snprintf(where, sizeof(where), "machines[%zu].memory_mib", i);
		FORWARD_ERR(take_uint(v, where, 64, 1ull << 26, &m->memory_mib, err));
	}
	if (json_object_object_get_ex(o, "vcpus", &v)) {
		snprintf(where, sizeof(where), "machines[%zu].vcpus", i);
		FORWARD_ERR(take_uint(v, where, 1, 4096, &n, err));
		m->vcpus = (unsigned)n;
	}
	if (json_object_object_get_ex(o, "convert", &v)) {
		if (!json_object_is_type(v, json_type_boolean))
			return BAD(err, "machines[%zu].convert: must be true or false", i);
		m->convert = json_object_get_boolean(v);
	}
	if (json_object_object_get_ex(o, "format", &v)) {
		snprintf(where, sizeof(where), "machines[%zu].format", i);
		FORWARD_ERR(take_string(v, where, m->format, sizeof(m->format), err));
		if (strcmp(m->format, "raw") && strcmp(m->format, "qcow2"))
			return BAD(err, "%s: must be \"raw\" or \"qcow2\"", where);
	}
	if (json_object_object_get_ex(o, "path", &v)) {
		snprintf(where, sizeof(where), "machines[%zu].path", i);
		FORWARD_ERR(take_string(v, where, m->path, sizeof(m->path), err));
	}
	return 0;
}

static int parse_root(json_object *root, struct mig_plan *p, struct im_err *err)
{
	static const char *const keys[] = { "hosts", "machines", "per_path", "probe_seconds", NULL };
	json_object *hosts, *machines, *v;
	uint64_t n;

	if (!json_object_is_type(root, json_type_object))
		return BAD(err, "the plan must be a JSON object with \"hosts\" and \"machines\"");
	FORWARD_ERR(known_keys(root, "the plan", keys, err));
	if (!json_object_object_get_ex(root, "hosts", &hosts))
		return BAD(err, "the plan has no \"hosts\" (libvirt URIs to move the machines to)");
	if (!json_object_object_get_ex(root, "machines", &machines))
		return BAD(err, "the plan has no \"machines\"");
	FORWARD_ERR(take_array(hosts, "hosts", 1, MIG_MAX_HOSTS, err));
	FORWARD_ERR(take_array(machines, "machines", 1, MIG_MAX_MACHINES, err));
	if (json_object_object_get_ex(root, "per_path", &v)) {
		FORWARD_ERR(take_uint(v, "per_path", 1, 1024, &n, err));
		p->per_path = (unsigned)n;
	}
	if (json_object_object_get_ex(root, "probe_seconds", &v)) {
		double d;

		if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
			return BAD(err, "probe_seconds: must be a number");
		d = json_object_get_double(v);
		if (!(d >= 0 && d <= 10))
			return BAD(err, "probe_seconds: must be from 0 to 10");
		p->probe_seconds = d;
	}
	p->h = calloc(json_object_array_length(hosts), sizeof(*p->h));
	p->m = calloc(json_object_array_length(machines), sizeof(*p->m));
	if (!p->h || !p->m)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	for (size_t i = 0; i < json_object_array_length(hosts); i++) {
		p->nh = i + 1;
		FORWARD_ERR(parse_host(json_object_array_get_idx(hosts, i), i, &p->h[i], err));
		for (size_t k = 0; k < i; k++)
			if (!strcmp(p->h[k].uri, p->h[i].uri))
				return BAD(err, "hosts[%zu].uri: %s is listed twice", i, p->h[i].uri);
	}
	for (size_t i = 0; i < json_object_array_length(machines); i++) {
		p->nm = i + 1;
		FORWARD_ERR(parse_machine(json_object_array_get_idx(machines, i), i, &p->m[i], err));
		for (size_t k = 0; k < i; k++)
			if (!strcmp(p->m[k].name, p->m[i].name))
				return BAD(err, "machines[%zu].name: %s is listed twice", i, p->m[i].name);
	}
	return 0;
}

static json_object *parse_json(const char *text, size_t len, struct im_err *err, const char *what)
{
	json_tokener *tok = json_tokener_new_ex(32);
	json_object *root;

	if (!tok) {
		im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		return NULL;
	}
	if (len > INT_MAX || memchr(text, '\0', len)) {
		json_tokener_free(tok);
		BAD(err, "%s: not JSON (a NUL byte, or too long)", what);
		return NULL;
	}
	root = json_tokener_parse_ex(tok, text, (int)len);
	if (json_tokener_get_error(tok) != json_tokener_success) {
		BAD(err, "%s: not JSON: %s", what,
		    json_tokener_error_desc(json_tokener_get_error(tok) == json_tokener_continue
					    ? json_tokener_error_parse_eof : json_tokener_get_error(tok)));
		json_object_put(root);
		root = NULL;
	} else {
		size_t at = json_tokener_get_parse_end(tok);

		while (at < len && strchr(" \t\r\n", text[at]))
			at++;
		if (at != len) {
			BAD(err, "%s: not JSON: something follows the object", what);
			json_object_put(root);
			root = NULL;
		}
	}
	json_tokener_free(tok);
	return root;
}

int mig_plan_parse(const char *text, size_t len, struct mig_plan *p, struct im_err *err)
{
	json_object *root;
	int r;

	memset(p, 0, sizeof(*p));
	p->probe_seconds = 1;
	if (!(root = parse_json(text, len, err, "the plan")))
		return -EINVAL;
	r = parse_root(root, p, err);
	json_object_put(root);
	return r;
}

/* A whole file of at most max bytes, NUL-terminated (free()); cls: the
 * exit code of a file that cannot be read. */
static int slurp(const char *path, size_t max, char **out, size_t *len, int cls, struct im_err *err)
{
	unsigned char *buf = NULL;
	int r = util_read_whole_file(path, &buf, len, max);

	*out = (char *)buf;
	if (r == -EFBIG || r == -EINVAL)
		return im_errf(err, cls, r, "%s: not a regular file of at most %zu bytes", path, max);
	if (r < 0)
		return im_errf(err, r == -ENOMEM ? IM_EXIT_INTERNAL : cls, r, "%s: %s", path, strerror(-r));
	return 0;
}

int mig_plan_read(const char *path, struct mig_plan *p, struct im_err *err)
{
	char *text;
	size_t len;
	int r;

	memset(p, 0, sizeof(*p));
	FORWARD_ERR(slurp(path, 4 * MiB, &text, &len, IM_EXIT_USAGE, err));
	r = mig_plan_parse(text, len, p, err);
	free(text);
	if (r < 0) {
		im_err_prefix(err, "%s: ", path);
		return r;
	}
	for (size_t i = 0; i < p->nm; i++)
		for (size_t k = 0; k < p->m[i].nsources; k++) {
			const char *s = p->m[i].sources[k];
			struct stat st;

			if (!bk_is_uri(s) && stat(s, &st) < 0)
				return im_errf(err, IM_EXIT_USAGE, -errno, "%s: machine %s: source %s: %s",
					       path, p->m[i].name, s, strerror(errno));
		}
	return 0;
}

void mig_plan_free(struct mig_plan *p)
{
	for (size_t i = 0; p->m && i < p->nm; i++)
		for (size_t k = 0; k < p->m[i].nsources; k++)
			free(p->m[i].sources[k]);
	for (size_t i = 0; p->h && i < p->nh; i++)
		free(p->h[i].ps);
	free(p->m);
	free(p->h);
	memset(p, 0, sizeof(*p));
}

/* ---- placement ---- */

static uint64_t mem_of(const struct mig_machine *m)
{
	return m->memory_mib ? m->memory_mib : MIG_DEFAULT_MEMORY_MIB;
}

static unsigned vcpus_of(const struct mig_machine *m)
{
	return m->vcpus ? m->vcpus : MIG_DEFAULT_VCPUS;
}

static uint64_t mem_cap(const struct mig_host *h)
{
	return h->memory_mib && h->memory_mib < h->free_mib ? h->memory_mib : h->free_mib;
}

/* Two pools of one host on one filesystem, as far as libvirt tells. */
static bool same_storage(const struct im_pool *a, const struct im_pool *b)
{
	uint64_t hi = a->available > b->available ? a->available : b->available;
	uint64_t lo = a->available > b->available ? b->available : a->available;

	return a->capacity == b->capacity && hi - lo <= hi / 100;
}

struct booking {
	uint64_t mem, vcpus;
	uint64_t *bytes;              /* per pool of the host */
};

static void book(struct mig_plan *p, struct booking *b, const struct mig_machine *m)
{
	struct mig_host *h = &p->h[m->host];
	struct booking *hb = &b[m->host];

	hb->mem += mem_of(m);
	hb->vcpus += vcpus_of(m);
	for (size_t k = 0; k < h->nps; k++)
		if (!strcmp(h->ps[k].name, m->pool))
			hb->bytes[k] += m->need;
}

/* The best pool of host h for m after the bookings, into *best; why says
 * why the host does not fit (false). */
static bool host_fits(const struct mig_plan *p, const struct booking *b, size_t hi,
		      const struct mig_machine *m, struct im_pool *scratch, struct im_pool *best,
		      char *why, size_t wlen)
{
	const struct mig_host *h = &p->h[hi];
	const struct booking *hb = &b[hi];

	if (!h->reached) {
		snprintf(why, wlen, "not reached");
		return false;
	}
	if (hb->mem + mem_of(m) > mem_cap(h)) {
		snprintf(why, wlen, "%llu MiB of memory left, %llu needed",
			 (unsigned long long)(mem_cap(h) > hb->mem ? mem_cap(h) - hb->mem : 0),
			 (unsigned long long)mem_of(m));
		return false;
	}
	if (h->vcpus && hb->vcpus + vcpus_of(m) > h->vcpus) {
		snprintf(why, wlen, "%llu vCPUs left, %u needed",
			 (unsigned long long)(h->vcpus > hb->vcpus ? h->vcpus - hb->vcpus : 0),
			 vcpus_of(m));
		return false;
	}
	if (!h->nps) {
		snprintf(why, wlen, "no usable active pool");
		return false;
	}
	for (size_t k = 0; k < h->nps; k++) {
		uint64_t taken = 0;

		scratch[k] = h->ps[k];
		for (size_t j = 0; j < h->nps; j++)
			if (j == k || same_storage(&h->ps[k], &h->ps[j]))
				taken += hb->bytes[j];
		scratch[k].available = scratch[k].available > taken ? scratch[k].available - taken : 0;
	}
	pools_rank(scratch, h->nps, m->need);
	if (!scratch[0].fits) {
		snprintf(why, wlen, "no pool with room for %llu MiB",
			 (unsigned long long)((m->need + MiB - 1) / MiB));
		return false;
	}
	*best = scratch[0];
	return true;
}

/* a before b among hosts that fit (see the header). */
static bool better(const struct mig_plan *p, const struct booking *b, const struct mig_machine *m,
		   size_t ha, const struct im_pool *pa, size_t hb, const struct im_pool *pb)
{
	double la = (double)(b[ha].vcpus + vcpus_of(m)) / (p->h[ha].cpus ? p->h[ha].cpus : 1);
	double lb = (double)(b[hb].vcpus + vcpus_of(m)) / (p->h[hb].cpus ? p->h[hb].cpus : 1);
	uint64_t ma = mem_cap(&p->h[ha]) - b[ha].mem, mb = mem_cap(&p->h[hb]) - b[hb].mem;

	if (la != lb)
		return la < lb;
	if ((pa->fsyncs >= 0) != (pb->fsyncs >= 0))
		return pa->fsyncs >= 0;
	if (pa->fsyncs >= 0 && pa->fsyncs != pb->fsyncs)
		return pa->fsyncs > pb->fsyncs;
	if (ma != mb)
		return ma > mb;
	return ha < hb;
}

void mig_place(struct mig_plan *p)
{
	struct booking *b = calloc(p->nh ? p->nh : 1, sizeof(*b));
	size_t most = 1;

	for (size_t i = 0; i < p->nh; i++)
		most = p->h[i].nps > most ? p->h[i].nps : most;
	struct im_pool *scratch = calloc(most, sizeof(*scratch));
	struct im_pool *best = calloc(2, sizeof(*best));
	bool ok = b && scratch && best;

	for (size_t i = 0; ok && i < p->nh; i++)
		ok = (b[i].bytes = calloc(p->h[i].nps ? p->h[i].nps : 1, sizeof(uint64_t))) != NULL;
	for (size_t i = 0; ok && i < p->nm; i++) {
		struct mig_machine *m = &p->m[i];

		if (m->host >= 0 && (size_t)m->host < p->nh && m->status != MIG_DONE &&
		    m->status != MIG_UNPLACED)
			book(p, b, m);
	}
	for (size_t i = 0; p->nm && i < p->nm; i++) {
		struct mig_machine *m = &p->m[i];
		int chosen = -1;
		size_t len = 0;

		if (m->host >= 0 || m->status == MIG_DONE || m->status == MIG_FAILED)
			continue;
		if (!ok) {
			m->status = MIG_UNPLACED;
			snprintf(m->why, sizeof(m->why), "out of memory while placing");
			continue;
		}
		m->why[0] = '\0';
		for (size_t h = 0; h < p->nh; h++) {
			char why[200];

			if (!host_fits(p, b, h, m, scratch, &best[1], why, sizeof(why))) {
				if (len < sizeof(m->why))
					len += (size_t)snprintf(m->why + len, sizeof(m->why) - len, "%s%s: %s",
								len ? "; " : "", p->h[h].uri, why);
				continue;
			}
			if (chosen < 0 || better(p, b, m, h, &best[1], (size_t)chosen, &best[0])) {
				chosen = (int)h;
				best[0] = best[1];
			}
		}
		if (chosen < 0) {
			m->status = MIG_UNPLACED;
			continue;
		}
		m->why[0] = '\0';
		m->host = chosen;
		m->status = MIG_PENDING;
		snprintf(m->pool, sizeof(m->pool), "%s", best[0].name);
		book(p, b, m);
	}
	for (size_t i = 0; b && i < p->nh; i++)
		free(b[i].bytes);
	free(b);
	free(scratch);
	free(best);
}

int mig_next(const struct mig_plan *p, unsigned per_host, unsigned jobs)
{
	unsigned total = 0;

	for (size_t i = 0; i < p->nm; i++)
		total += p->m[i].status == MIG_RUNNING;
	if (jobs && total >= jobs)
		return -1;
	for (size_t i = 0; i < p->nm; i++) {
		const struct mig_machine *m = &p->m[i];
		unsigned on_host = 0, on_path = 0, limit;

		if (m->status != MIG_PENDING || m->host < 0 || (size_t)m->host >= p->nh)
			continue;
		limit = p->h[m->host].jobs ? p->h[m->host].jobs : per_host ? per_host
									   : MIG_DEFAULT_PER_HOST;
		for (size_t k = 0; k < p->nm; k++) {
			if (p->m[k].status != MIG_RUNNING)
				continue;
			on_host += p->m[k].host == m->host;
			on_path += m->path[0] && !strcmp(p->m[k].path, m->path);
		}
		if (on_host < limit && (!p->per_path || !m->path[0] || on_path < p->per_path))
			return (int)i;
	}
	return -1;
}

int mig_exit_code(const struct mig_plan *p, bool dry)
{
	bool failed = false;

	for (size_t i = 0; i < p->nm; i++) {
		const struct mig_machine *m = &p->m[i];

		if (dry) {   /* (a dry run places; it runs nothing) */
			if (m->status == MIG_UNPLACED)
				return IM_EXIT_TARGET;
			continue;
		}
		if (m->status == MIG_FAILED || m->status == MIG_UNPLACED)
			failed = true;
		else if (m->status != MIG_DONE)
			return IM_EXIT_INTERRUPTED;
	}
	return failed ? IM_EXIT_SOME_FAILED : IM_EXIT_OK;
}

/* ---- files ---- */

/* text into path, atomically (util_write_file_atomic: a temporary file,
 * fsync, rename, the folder fsync'd). */
static int write_atomic(const char *path, const char *text, struct im_err *err)
{
	int r = util_write_file_atomic(path, text, strlen(text));

	return r < 0 ? im_errf(err, IM_EXIT_IO, r, "writing %s: %s", path, strerror(-r)) : 0;
}

static void add_str(json_object *o, const char *key, const char *s)
{
	json_object_object_add(o, key, json_object_new_string(s));
}

int mig_state_write(const struct mig_plan *p, const char *path, struct im_err *err)
{
	json_object *root = json_object_new_object(), *list = json_object_new_array();
	int r;

	json_object_object_add(root, "imager_migrate_state", json_object_new_int(1));
	for (size_t i = 0; i < p->nm; i++) {
		const struct mig_machine *m = &p->m[i];
		json_object *o = json_object_new_object();

		add_str(o, "name", m->name);
		add_str(o, "status", mig_status_name(m->status));
		add_str(o, "host", m->host >= 0 && (size_t)m->host < p->nh ? p->h[m->host].uri : "");
		add_str(o, "pool", m->pool);
		json_object_object_add(o, "need", json_object_new_uint64(m->need));
		json_object_object_add(o, "attempts", json_object_new_int((int)m->attempts));
		json_object_object_add(o, "force", json_object_new_boolean(m->force));
		json_object_object_add(o, "start", json_object_new_double(m->t_start));
		json_object_object_add(o, "end", json_object_new_double(m->t_end));
		json_object_object_add(o, "bytes", json_object_new_uint64(m->bytes));
		json_object_object_add(o, "exit", json_object_new_int(m->exit));
		json_object_object_add(o, "pid", json_object_new_int64(m->pid));
		json_object_object_add(o, "pid_start", json_object_new_uint64(m->pid_start));
		add_str(o, "error", m->why);
		add_str(o, "convert", m->convert_result);
		json_object_object_add(o, "started", json_object_new_boolean(m->started));
		json_object_array_add(list, o);
	}
	json_object_object_add(root, "machines", list);
	r = write_atomic(path, json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY), err);
	json_object_put(root);
	return r;
}

static const char *jstr(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
	       ? json_object_get_string(v) : "";
}

static int64_t jnum(json_object *o, const char *key, int64_t min, int64_t max)
{
	json_object *v;
	int64_t n;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return min;
	n = json_object_get_int64(v);
	return n < min ? min : n > max ? max : n;
}

static double jdouble(json_object *o, const char *key)
{
	json_object *v;
	double d;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
		return 0;
	d = json_object_get_double(v);
	return d >= 0 && d < 1e11 ? d : 0;
}

static bool jbool(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean) &&
	       json_object_get_boolean(v);
}

static void state_machine(struct mig_plan *p, json_object *o)
{
	struct mig_machine *m = NULL;
	enum mig_status st;
	const char *uri = jstr(o, "host");

	for (size_t i = 0; i < p->nm && !m; i++)
		if (!strcmp(p->m[i].name, jstr(o, "name")))
			m = &p->m[i];
	if (!m || status_parse(jstr(o, "status"), &st) < 0)
		return;
	m->status = st;
	m->host = -1;
	for (size_t h = 0; h < p->nh && uri[0]; h++)
		if (!strcmp(p->h[h].uri, uri))
			m->host = (int)h;
	snprintf(m->pool, sizeof(m->pool), "%s", jstr(o, "pool"));
	if (m->host < 0 || !m->pool[0]) {   /* to be placed (again) */
		m->host = -1;
		m->pool[0] = '\0';
		if (st != MIG_DONE)
			m->status = MIG_PENDING;
	}
	m->need = (uint64_t)jnum(o, "need", 0, INT64_MAX);
	m->attempts = (unsigned)jnum(o, "attempts", 0, 1000000);
	m->force = jbool(o, "force");
	m->t_start = jdouble(o, "start");
	m->t_end = jdouble(o, "end");
	m->bytes = (uint64_t)jnum(o, "bytes", 0, INT64_MAX);
	m->exit = (int)jnum(o, "exit", 0, 255);
	m->pid = (long)jnum(o, "pid", 0, INT_MAX);
	m->pid_start = (unsigned long long)jnum(o, "pid_start", 0, INT64_MAX);
	snprintf(m->why, sizeof(m->why), "%s", jstr(o, "error"));
	snprintf(m->convert_result, sizeof(m->convert_result), "%s", jstr(o, "convert"));
	m->started = jbool(o, "started");
}

int mig_state_read(struct mig_plan *p, const char *path, struct im_err *err)
{
	json_object *root, *list;
	char *text;
	size_t len;
	int r;

	if (access(path, F_OK) < 0 && errno == ENOENT)
		return 1;
	FORWARD_ERR(slurp(path, 64 * MiB, &text, &len, IM_EXIT_USAGE, err));
	root = parse_json(text, len, err, path);
	free(text);
	if (!root)
		return -EINVAL;
	r = json_object_is_type(root, json_type_object) &&
	    json_object_object_get_ex(root, "imager_migrate_state", &list) &&
	    json_object_object_get_ex(root, "machines", &list) &&
	    json_object_is_type(list, json_type_array) ? 0 : -EINVAL;
	if (r < 0)
		im_errf(err, IM_EXIT_USAGE, r, "%s: not a state file of imager migrate (remove it to "
			"start the plan over, or give another with --state)", path);
	for (size_t i = 0; r == 0 && i < json_object_array_length(list); i++) {
		json_object *o = json_object_array_get_idx(list, i);

		if (json_object_is_type(o, json_type_object))
			state_machine(p, o);
	}
	json_object_put(root);
	return r;
}

/* ---- children ---- */

/* A process's start time in clock ticks since boot; 0 when it is gone or
 * a zombie. */
static unsigned long long proc_start(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	FILE *f;
	int field;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (!p || !(p = strrchr(buf, ')')) || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
		return 0;
	p += 2;
	for (field = 3; field < 22 && p; field++)
		if ((p = strchr(p, ' ')))
			p++;
	if (p)
		start = strtoull(p, NULL, 10);
	return start;
}

/* A child an earlier run left (its parent was killed): stopped, and
 * waited for until it is gone. */
static void stop_leftover(const struct mig_machine *m)
{
	if (m->pid <= 1 || !m->pid_start || proc_start(m->pid) != m->pid_start)
		return;
	kill((pid_t)m->pid, SIGTERM);
	for (int i = 0; i < 100 && proc_start(m->pid) == m->pid_start; i++)
		usleep(100000);
	if (proc_start(m->pid) == m->pid_start) {
		kill((pid_t)m->pid, SIGKILL);
		for (int i = 0; i < 100 && proc_start(m->pid) == m->pid_start; i++)
			usleep(100000);
	}
}

static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The child's first steps: it dies with its parent. */
static void child_setup(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(IM_EXIT_INTERRUPTED);
}

/* Fork a child running fn(arg, fd) that writes into a pipe; the read end
 * into *rfd.  Returns the pid or -errno. */
static pid_t spawn_pipe(void (*fn)(void *arg, int fd), void *arg, int *rfd)
{
	int fds[2];
	pid_t parent = getpid(), pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL);
	if ((pid = fork()) < 0) {
		int e = errno;
		close(fds[0]);
		close(fds[1]);
		return -e;
	}
	if (pid == 0) {
		close(fds[0]);
		child_setup(parent);
		fn(arg, fds[1]);
		_exit(0);
	}
	close(fds[1]);
	*rfd = fds[0];
	return pid;
}

struct survey_head {
	int ok;
	char error[1100];
	uint64_t free_mib;
	unsigned cpus;
	size_t nps;
};

struct survey_arg {
	const struct mig_plan *p;
	const struct mig_opts *o;
	size_t host;
};

static bool pool_allowed(const struct mig_host *h, const char *name)
{
	for (size_t k = 0; k < h->npools; k++)
		if (!strcmp(h->pools[k], name))
			return true;
	return h->npools == 0;
}

static void survey_child(void *a, int fd)
{
	const struct survey_arg *s = a;
	const struct mig_host *h = &s->p->h[s->host];
	struct survey_head head = { 0 };
	struct im_pool *ps = NULL;
	size_t n = 0, kept = 0;
	virConnectPtr conn = NULL;
	virNodeInfo info;
	unsigned long long free_bytes;
	struct im_err err = { 0 };

	if (host_open(h->uri, &s->o->net, &conn, &err) < 0) {
		snprintf(head.error, sizeof(head.error), "%s", err.msg);
	} else if (virNodeGetInfo(conn, &info) < 0 || !(free_bytes = virNodeGetFreeMemory(conn))) {
		snprintf(head.error, sizeof(head.error), "%s: %s", h->uri, host_last_error());
	} else if (pools_list(conn, &ps, &n, &err) < 0) {
		snprintf(head.error, sizeof(head.error), "%s", err.msg);
	} else {
		head.ok = 1;
		head.free_mib = free_bytes / MiB;
		head.cpus = info.cpus;
		for (size_t k = 0; k < n; k++)
			if (pool_allowed(h, ps[k].name))
				ps[kept++] = ps[k];
		for (size_t k = 0; s->p->probe_seconds > 0 && k < kept; k++) {
			struct im_err perr = { 0 };
			(void)pools_probe(&ps[k], s->p->probe_seconds, &perr);
		}
		head.nps = kept;
	}
	if (conn)
		virConnectClose(conn);
	if (util_write_full(fd, &head, sizeof(head)) == 0 && kept)
		(void)util_write_full(fd, ps, kept * sizeof(*ps));
	free(ps);
}

struct measured {
	uint64_t need;
	int exit;
	char msg[1100];
};

struct measure_arg {
	const struct mig_plan *p;
	const struct mig_opts *o;
};

static bool to_place(const struct mig_machine *m)
{
	return m->host < 0 && m->status != MIG_DONE;
}

static void measure_child(void *a, int fd)
{
	const struct measure_arg *s = a;
	struct p2v_report *rep = malloc(sizeof(*rep));

	for (size_t i = 0; i < s->p->nm; i++) {
		const struct mig_machine *m = &s->p->m[i];
		struct p2v_opts o = { .sources = (const char *const *)m->sources,
				      .nsources = m->nsources, .net = s->o->net, .roots = s->o->roots };
		struct measured out = { 0 };
		struct im_err err = { 0 };

		if (!to_place(m))
			continue;
		o.dom.name = m->name;
		if (!rep) {
			out.exit = IM_EXIT_INTERNAL;
			snprintf(out.msg, sizeof(out.msg), "out of memory");
		} else if (p2v_measure(&o, rep, &out.need, &err) < 0) {
			out.exit = im_err_exit(&err);
			snprintf(out.msg, sizeof(out.msg), "%s", err.msg);
		}
		if (rep)
			p2v_report_free(rep);
		if (util_write_full(fd, &out, sizeof(out)) < 0)
			break;
	}
	free(rep);
}

static int reap(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return st;
}

static void tell(const struct mig_opts *o, enum mig_event ev, int machine, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void tell(const struct mig_opts *o, enum mig_event ev, int machine, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	if (!o->event)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o->event(o->opaque, ev, machine, msg);
}

/* Hosts surveyed and sources measured, each by a child, all at once. */
static int survey(struct mig_plan *p, const struct mig_opts *o, struct im_err *err)
{
	struct survey_arg *sa = calloc(p->nh, sizeof(*sa));
	pid_t *pids = calloc(p->nh + 1, sizeof(*pids));
	int *fds = calloc(p->nh + 1, sizeof(*fds));
	struct measure_arg ma = { p, o };
	int r = 0;

	if (!sa || !pids || !fds) {
		free(sa);
		free(pids);
		free(fds);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	for (size_t h = 0; h < p->nh && r == 0; h++) {
		sa[h] = (struct survey_arg){ p, o, h };
		tell(o, MIG_EV_SURVEY, -1, "%s", p->h[h].uri);
		if ((pids[h] = spawn_pipe(survey_child, &sa[h], &fds[h])) < 0)
			r = im_errf(err, IM_EXIT_INTERNAL, pids[h], "fork: %s", strerror(-pids[h]));
	}
	if (r == 0 && (pids[p->nh] = spawn_pipe(measure_child, &ma, &fds[p->nh])) < 0)
		r = im_errf(err, IM_EXIT_INTERNAL, pids[p->nh], "fork: %s", strerror(-pids[p->nh]));
	for (size_t h = 0; h < p->nh && pids[h] > 0; h++) {
		struct mig_host *mh = &p->h[h];
		struct survey_head head;

		free(mh->ps);
		mh->ps = NULL;
		mh->nps = 0;
		mh->reached = false;
		if (read_all(fds[h], &head, sizeof(head)) < 0) {
			snprintf(mh->error, sizeof(mh->error), "%s: the survey ended early", mh->uri);
		} else if (!head.ok) {
			memcpy(mh->error, head.error, sizeof(mh->error));
			mh->error[sizeof(mh->error) - 1] = '\0';
		} else if (head.nps > 4096 || (head.nps && !(mh->ps = calloc(head.nps, sizeof(*mh->ps)))) ||
			   (head.nps && read_all(fds[h], mh->ps, head.nps * sizeof(*mh->ps)) < 0)) {
			snprintf(mh->error, sizeof(mh->error), "%s: the survey ended early", mh->uri);
		} else {
			mh->reached = true;
			mh->nps = head.nps;
			mh->free_mib = head.free_mib;
			mh->cpus = head.cpus;
			for (size_t k = 0; k < mh->npools; k++)
				if (!pools_find(mh->ps, mh->nps, mh->pools[k]))
					tell(o, MIG_EV_WARNING, -1, "%s: pool %s is not an active pool there",
					     mh->uri, mh->pools[k]);
		}
		if (!mh->reached)
			tell(o, MIG_EV_WARNING, -1, "%s", mh->error);
		close(fds[h]);
		reap(pids[h]);
	}
	if (pids[p->nh] > 0) {
		tell(o, MIG_EV_SURVEY, -1, "sources");
		for (size_t i = 0; i < p->nm; i++) {
			struct mig_machine *m = &p->m[i];
			struct measured out;

			if (!to_place(m))
				continue;
			if (read_all(fds[p->nh], &out, sizeof(out)) < 0) {
				out.exit = IM_EXIT_INTERNAL;
				snprintf(out.msg, sizeof(out.msg), "measuring the sources ended early");
			}
			out.msg[sizeof(out.msg) - 1] = '\0';
			m->need = out.need;
			if (out.exit) {
				m->status = MIG_FAILED;
				m->exit = out.exit;
				snprintf(m->why, sizeof(m->why), "%s", out.msg);
			} else {
				m->status = MIG_PENDING;
			}
		}
		close(fds[p->nh]);
		reap(pids[p->nh]);
	}
	free(sa);
	free(pids);
	free(fds);
	return r;
}

/* ---- one machine's child ---- */

struct job_ctx {
	int log;
	uint64_t cur, sum;
};

static void job_progress(void *opaque, const char *phase, uint64_t done, uint64_t total)
{
	struct job_ctx *c = opaque;

	(void)phase;
	(void)total;
	c->cur = done;
}

static void job_phase(void *opaque, enum p2v_phase phase, const char *msg)
{
	struct job_ctx *c = opaque;

	if (phase == P2V_WRITE)
		c->cur = 0;
	if (phase == P2V_WRITTEN) {
		c->sum += c->cur;
		c->cur = 0;
	}
	if (msg && msg[0])
		dprintf(c->log, "%s%s\n", phase == P2V_WARNING ? "warning: " : "", msg);
}

static void report_path(const char *dir, const char *name, const char *ext, char *out, size_t len)
{
	if (snprintf(out, len, "%s/%s.%s", dir, name, ext) >= (int)len)
		out[len - 1] = '\0';   /* (the state's path was checked for length) */
}

static void convert_text(const struct mig_machine *m, const struct p2v_report *rep, char *out,
			 size_t len)
{
	const struct conv_step *c = &rep->convert;

	if (!m->convert)
		snprintf(out, len, "not asked (convert false)");
	else if (!c->ran)
		snprintf(out, len, "not run");
	else if (c->r == 0)
		snprintf(out, len, "converted%s%s", c->rep.product[0] ? ": " : "", c->rep.product);
	else if (snprintf(out, len, "not converted: %s", c->err.msg) >= (int)len)
		out[len - 1] = '\0';
}

static void job_child(struct mig_plan *p, size_t i, const struct mig_opts *o, const char *dir,
		      pid_t parent)
{
	struct mig_machine *m = &p->m[i];
	const char *uri = p->h[m->host].uri;
	struct p2v_report *rep = calloc(1, sizeof(*rep));
	struct job_ctx c = { .log = 2 };
	struct p2v_opts po = { 0 };
	struct im_err err = { 0 };
	char path[PATH_MAX], conv[300];
	json_object *j, *disks, *list;
	double t0 = now_epoch();
	int r, fd;

	child_setup(parent);
	report_path(dir, m->name, "log", path, sizeof(path));
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) >= 0) {
		dup2(fd, 2);
		close(fd);
	}
	if (!rep)
		_exit(IM_EXIT_INTERNAL);
	po.roots = o->roots;
	po.sources = (const char *const *)m->sources;
	po.nsources = m->nsources;
	po.uris = &uri;
	po.nuris = 1;
	po.pool = m->pool;
	po.format = m->format[0] ? m->format : NULL;
	po.force = m->force;
	po.start = o->start;
	po.convert = m->convert;
	po.net = o->net;
	po.dom.name = m->name;
	po.dom.memory_mib = mem_of(m);
	po.dom.vcpus = vcpus_of(m);
	po.progress = (struct im_progress){ job_progress, &c, o->interrupted, NULL };
	po.phase = job_phase;
	po.opaque = &c;
	dprintf(2, "imager migrate: %s onto %s, pool %s%s\n", m->name, uri, m->pool,
		m->force ? " (again, replacing what a stopped run left)" : "");
	r = im_p2v(&po, rep, &err);
	if (r < 0)
		dprintf(2, "error: %s\n", err.msg);
	for (size_t k = 0; k < P2V_MAX_SOURCES; k++)
		if (rep->rollback[k][0])
			dprintf(2, "rollback: %s\n", rep->rollback[k]);
	convert_text(m, rep, conv, sizeof(conv));
	j = json_object_new_object();
	add_str(j, "name", m->name);
	add_str(j, "host", uri);
	add_str(j, "pool", rep->pool[0] ? rep->pool : m->pool);
	json_object_object_add(j, "ok", json_object_new_boolean(r == 0));
	json_object_object_add(j, "exit", json_object_new_int(r < 0 ? im_err_exit(&err) : 0));
	add_str(j, "error", r < 0 ? err.msg : "");
	json_object_object_add(j, "bytes", json_object_new_uint64(c.sum));
	json_object_object_add(j, "seconds", json_object_new_double(now_epoch() - t0));
	add_str(j, "convert", conv);
	json_object_object_add(j, "defined", json_object_new_boolean(rep->defined));
	json_object_object_add(j, "started", json_object_new_boolean(rep->started));
	disks = json_object_new_array();
	for (size_t k = 0; k < rep->ndisks; k++) {
		json_object *d = json_object_new_object();

		add_str(d, "source", rep->disks[k].source ? rep->disks[k].source : "");
		add_str(d, "name", rep->disks[k].name);
		add_str(d, "path", rep->disks[k].path);
		add_str(d, "format", rep->disks[k].format);
		json_object_object_add(d, "capacity", json_object_new_uint64(rep->disks[k].capacity));
		json_object_array_add(disks, d);
	}
	json_object_object_add(j, "disks", disks);
	list = json_object_new_array();
	for (size_t k = 0; k < sizeof(rep->warnings) / sizeof(rep->warnings[0]); k++)
		if (rep->warnings[k][0])
			json_object_array_add(list, json_object_new_string(rep->warnings[k]));
	json_object_object_add(j, "warnings", list);
	list = json_object_new_array();
	for (size_t k = 0; k < P2V_MAX_SOURCES; k++)
		if (rep->rollback[k][0])
			json_object_array_add(list, json_object_new_string(rep->rollback[k]));
	json_object_object_add(j, "rollback", list);
	report_path(dir, m->name, "report.json", path, sizeof(path));
	(void)write_atomic(path, json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY), &err);
	json_object_put(j);
	p2v_report_free(rep);
	_exit(r < 0 ? im_err_exit(&err) : 0);
}

/* What machine i's child left: its report, its exit status. */
static void job_ended(struct mig_plan *p, size_t i, int st, const char *dir)
{
	struct mig_machine *m = &p->m[i];
	char path[PATH_MAX];
	json_object *j;

	m->t_end = now_epoch();
	m->pid = 0;
	m->pid_start = 0;
	report_path(dir, m->name, "report.json", path, sizeof(path));
	j = json_object_from_file(path);
	if (j && json_object_is_type(j, json_type_object)) {
		m->bytes = (uint64_t)jnum(j, "bytes", 0, INT64_MAX);
		m->started = jbool(j, "started");
		snprintf(m->convert_result, sizeof(m->convert_result), "%s", jstr(j, "convert"));
		snprintf(m->why, sizeof(m->why), "%s", jstr(j, "error"));
	}
	json_object_put(j);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		m->status = MIG_DONE;
		m->exit = 0;
		m->force = false;
		m->why[0] = '\0';
	} else if (WIFEXITED(st)) {
		m->status = MIG_FAILED;
		m->exit = WEXITSTATUS(st);
		m->force = false;      /* (p2v rolled its volumes back) */
		if (!m->why[0])
			snprintf(m->why, sizeof(m->why), "its job ended with exit %d (see %s/%s.log)",
				 m->exit, dir, m->name);
	} else {
		m->status = MIG_FAILED;
		m->exit = IM_EXIT_INTERNAL;
		m->force = true;       /* nothing rolled back */
		snprintf(m->why, sizeof(m->why), "its job was killed by signal %d (see %s/%s.log)",
			 WIFSIGNALED(st) ? WTERMSIG(st) : 0, dir, m->name);
	}
}

static int start_job(struct mig_plan *p, size_t i, const struct mig_opts *o, const char *dir,
		     struct im_err *err)
{
	struct mig_machine *m = &p->m[i];
	pid_t parent = getpid(), pid;
	char path[PATH_MAX];

	report_path(dir, m->name, "report.json", path, sizeof(path));
	unlink(path);
	m->redone = m->redone || m->force;
	m->attempts++;
	m->t_start = now_epoch();
	m->t_end = 0;
	m->bytes = 0;
	m->why[0] = '\0';
	m->convert_result[0] = '\0';
	m->started = false;
	fflush(NULL);
	if ((pid = fork()) < 0)
		return im_errf(err, IM_EXIT_INTERNAL, -errno, "fork: %s", strerror(errno));
	if (pid == 0)
		job_child(p, i, o, dir, parent);
	m->status = MIG_RUNNING;
	m->pid = pid;
	for (int k = 0; k < 50 && !(m->pid_start = proc_start(pid)); k++)
		usleep(1000);
	tell(o, MIG_EV_START, (int)i, "%s onto %s, pool %s", m->name, p->h[m->host].uri, m->pool);
	return 0;
}

int mig_run(struct mig_plan *p, const struct mig_opts *o, struct im_err *err)
{
	char dir[PATH_MAX];
	bool place = false, stopping = false;
	int r;

	if (strlen(o->state) + 3 > sizeof(dir))
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: too long a path", o->state);
	{   /* PLAN.state.json: PLAN.state.d */
		size_t n = strlen(o->state);

		if (n > 5 && !strcmp(o->state + n - 5, ".json"))
			n -= 5;
		snprintf(dir, sizeof(dir), "%.*s.d", (int)n, o->state);
	}
	if ((r = mig_state_read(p, o->state, err)) < 0)
		return r;
	for (size_t i = 0; i < p->nm; i++) {
		struct mig_machine *m = &p->m[i];

		if (m->status == MIG_RUNNING) {    /* a run that was killed */
			if (!o->dry_run)
				stop_leftover(m);
			m->status = MIG_PENDING;
			m->force = true;
			m->pid = 0;
		} else if (m->status == MIG_FAILED || m->status == MIG_UNPLACED) {
			m->status = MIG_PENDING;     /* tried again */
			if (m->host < 0 || !m->pool[0])
				m->host = -1;
		}
		place |= to_place(m);
	}
	if (place) {
		FORWARD_ERR(survey(p, o, err));
		mig_place(p);
	}
	if (o->dry_run)
		return 0;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return im_errf(err, IM_EXIT_IO, -errno, "%s: %s", dir, strerror(errno));
	FORWARD_ERR(mig_state_write(p, o->state, err));
	for (;;) {
		bool running = false;
		int i, st;
		pid_t pid;

		while (!stopping && !(o->interrupted && *o->interrupted) &&
		       (i = mig_next(p, o->per_host, o->jobs)) >= 0) {
			if ((r = start_job(p, (size_t)i, o, dir, err)) < 0)
				break;
			FORWARD_ERR(mig_state_write(p, o->state, err));
		}
		if (o->interrupted && *o->interrupted && !stopping) {
			stopping = true;
			for (size_t k = 0; k < p->nm; k++)
				if (p->m[k].status == MIG_RUNNING && p->m[k].pid > 0)
					kill((pid_t)p->m[k].pid, SIGTERM);
		}
		for (size_t k = 0; k < p->nm; k++)
			running |= p->m[k].status == MIG_RUNNING;
		if (!running)
			break;
		/* (polled: the CLI's signal handler restarts a blocked waitpid,
		 * and an interruption must be seen while the children run) */
		if ((pid = waitpid(-1, &st, WNOHANG)) == 0 || (pid < 0 && errno == EINTR)) {
			usleep(100000);
			continue;
		}
		if (pid < 0) {   /* (no child left: none of ours can end any more) */
			for (size_t k = 0; k < p->nm; k++)
				if (p->m[k].status == MIG_RUNNING)
					job_ended(p, k, SIGKILL, dir);
			FORWARD_ERR(mig_state_write(p, o->state, err));
			continue;
		}
		for (size_t k = 0; k < p->nm; k++) {
			struct mig_machine *m = &p->m[k];

			if (m->status != MIG_RUNNING || m->pid != pid)
				continue;
			job_ended(p, k, st, dir);
			if (stopping) {   /* to be done again, its volumes replaced */
				m->status = MIG_PENDING;
				m->force = true;
			}
			FORWARD_ERR(mig_state_write(p, o->state, err));
			tell(o, MIG_EV_END, (int)k, "%s %s", m->name, mig_status_name(m->status));
		}
		if (r < 0)
			stopping = true;
	}
	if (r < 0)
		return r;
	if (stopping || (o->interrupted && *o->interrupted))
		return im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted: the machines that were "
			       "running are done again next time");
	return 0;
}
