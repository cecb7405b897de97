/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Migration plans: the plan parser on good and hostile text, the placement
 * (memory and pool space never overcommitted, refusals, kept placements),
 * the scheduler's limits, the state file written and read back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imager/migrate.h"
#include "unit.h"

#define MiB (1024ull * 1024)
#define GiB (1024 * MiB)

static int parse(const char *text, struct mig_plan *p, struct im_err *err)
{
	memset(err, 0, sizeof(*err));
	return mig_plan_parse(text, strlen(text), p, err);
}

static void test_parse_good(void)
{
	static const char text[] =
		"{ \"hosts\": [ { \"uri\": \"qemu:///system\", \"pools\": [\"a\", \"b\"], \"jobs\": 3,\n"
		"                 \"memory_mib\": 4096, \"vcpus\": 8 },\n"
		"               { \"uri\": \"qemu+ssh://root@kvm2/system\" } ],\n"
		"  \"machines\": [ { \"name\": \"web1\", \"sources\": [\"/srv/web1\", \"nbd://x/\"],\n"
		"                    \"memory_mib\": 1024, \"vcpus\": 1, \"convert\": false,\n"
		"                    \"format\": \"raw\", \"path\": \"lan-a\" },\n"
		"                  { \"name\": \"db\", \"sources\": [\"/srv/db.qcow2\"] } ],\n"
		"  \"per_path\": 2, \"probe_seconds\": 0.5 }\n";
	struct mig_plan p;
	struct im_err err;

	CHECK(parse(text, &p, &err) == 0);
	CHECK_EQ_U(p.nh, 2);
	CHECK_EQ_U(p.nm, 2);
	CHECK_STR(p.h[0].uri, "qemu:///system");
	CHECK_EQ_U(p.h[0].npools, 2);
	CHECK_STR(p.h[0].pools[1], "b");
	CHECK_EQ_U(p.h[0].jobs, 3);
	CHECK_EQ_U(p.h[0].memory_mib, 4096);
	CHECK_EQ_U(p.h[0].vcpus, 8);
	CHECK_EQ_U(p.h[1].npools, 0);
	CHECK_STR(p.m[0].name, "web1");
	CHECK_EQ_U(p.m[0].nsources, 2);
	CHECK_STR(p.m[0].sources[1], "nbd://x/");
	CHECK(!p.m[0].convert);
	CHECK_STR(p.m[0].format, "raw");
	CHECK_STR(p.m[0].path, "lan-a");
	CHECK(p.m[1].convert);
	CHECK_EQ_U(p.m[1].memory_mib, 0);
	CHECK_EQ_U(p.m[1].host, (unsigned long long)-1);
	CHECK_EQ_U(p.per_path, 2);
	CHECK(p.probe_seconds == 0.5);
	mig_plan_free(&p);
}

/* Each bad plan is refused with a message holding the words expected. */
static void test_parse_bad(void)
{
	static const struct { const char *text, *words; } cases[] = {
		{ "", "not JSON" },
		{ "{", "not JSON" },
		{ "[]", "must be a JSON object" },
		{ "{} {}", "something follows" },
		{ "{\"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"]}]}", "no \"hosts\"" },
		{ "{\"hosts\": [{\"uri\": \"u\"}]}", "no \"machines\"" },
		{ "{\"hosts\": [], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"]}]}", "hosts: must hold 1" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"]}], \"extra\": 1}",
		  "unknown key \"extra\"" },
		{ "{\"hosts\": [{\"uri\": \"u\", \"pool\": \"x\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"]}]}",
		  "hosts[0]: unknown key \"pool\"" },
		{ "{\"hosts\": [{}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"]}]}", "needs \"uri\"" },
		{ "{\"hosts\": [{\"uri\": \"u\"}, {\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"]}]}",
		  "listed twice" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"sources\": [\"/x\"]}]}", "needs \"name\"" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a b\", \"sources\": [\"/x\"]}]}",
		  "machines[0].name" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"]}, "
		  "{\"name\": \"a\", \"sources\": [\"/y\"]}]}", "machines[1].name: a is listed twice" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\"}]}", "needs \"sources\"" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": []}]}", "must hold 1" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [7]}]}", "must be a string" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"\"]}]}", "must be 1 to" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\\u0001\"]}]}",
		  "control characters" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\\u0000y\"]}]}",
		  "must be 1 to" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"], \"memory_mib\": -1}]}",
		  "memory_mib: must be from" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"], \"memory_mib\": 1e30}]}",
		  "must be a whole number" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"], \"vcpus\": 99999999999999999999}]}",
		  "vcpus" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"], \"convert\": \"no\"}]}",
		  "true or false" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"], \"format\": \"vmdk\"}]}",
		  "\"raw\" or \"qcow2\"" },
		{ "{\"hosts\": [{\"uri\": \"u\", \"jobs\": 0}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"]}]}",
		  "hosts[0].jobs" },
		{ "{\"hosts\": [{\"uri\": \"u\"}], \"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"]}], \"probe_seconds\": 11}",
		  "probe_seconds" },
		{ "{\"hosts\": \"u\", \"machines\": []}", "hosts: must be a list" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct mig_plan p;
		struct im_err err;
		int r = parse(cases[i].text, &p, &err);

		if (r != -EINVAL || err.exit_class != IM_EXIT_USAGE || !strstr(err.msg, cases[i].words)) {
			unit_failures++;
			fprintf(stderr, "  case %zu: r %d, \"%s\" (expected \"%s\")\n", i, r, err.msg,
				cases[i].words);
		}
		mig_plan_free(&p);
	}
	/* random bytes and cut plans: refused, never a crash */
	static const char good[] = "{\"hosts\": [{\"uri\": \"u\", \"pools\": [\"p\"]}], "
				   "\"machines\": [{\"name\": \"a\", \"sources\": [\"/x\"], \"path\": \"l\"}]}";
	uint64_t seed = 38;
	for (size_t cut = 0; cut < sizeof(good) - 1; cut++) {
		struct mig_plan p;
		struct im_err err = { 0 };
		char buf[sizeof(good)];

		memcpy(buf, good, sizeof(good));
		buf[cut] = (char)(unit_xorshift(&seed) & 0xff);
		(void)mig_plan_parse(buf, sizeof(good) - 1, &p, &err);
		mig_plan_free(&p);
		CHECK(mig_plan_parse(good, cut, &p, &err) < 0);
		mig_plan_free(&p);
	}
}

/* A host reached with pools of the given free space (capacity 100 GiB
 * each unless shared: then the same numbers). */
static void host(struct mig_plan *p, size_t i, uint64_t free_mib, unsigned cpus, size_t npools,
		 const uint64_t *avail, const double *fsyncs)
{
	struct mig_host *h = &p->h[i];

	snprintf(h->uri, sizeof(h->uri), "qemu+ssh://h%zu/system", i);
	h->reached = true;
	h->free_mib = free_mib;
	h->cpus = cpus;
	h->ps = calloc(npools, sizeof(*h->ps));
	h->nps = npools;
	for (size_t k = 0; k < npools; k++) {
		snprintf(h->ps[k].name, sizeof(h->ps[k].name), "h%zu-p%zu", i, k);
		snprintf(h->ps[k].type, sizeof(h->ps[k].type), "dir");
		h->ps[k].capacity = 100 * GiB + k * GiB;   /* distinct filesystems */
		h->ps[k].available = avail[k];
		h->ps[k].fsyncs = fsyncs ? fsyncs[k] : -1;
	}
}

static void machines(struct mig_plan *p, size_t n, uint64_t need, uint64_t mem)
{
	p->m = calloc(n, sizeof(*p->m));
	p->nm = n;
	for (size_t i = 0; i < n; i++) {
		snprintf(p->m[i].name, sizeof(p->m[i].name), "m%zu", i);
		p->m[i].need = need;
		p->m[i].memory_mib = mem;
		p->m[i].vcpus = 1;
		p->m[i].host = -1;
	}
}

static void test_place_spread_and_pools(void)
{
	struct mig_plan p = { 0 };
	uint64_t a0[] = { 200 * MiB, 50 * GiB }, a1[] = { 40 * GiB };
	double f0[] = { 5000, 100 };

	p.h = calloc(2, sizeof(*p.h));
	p.nh = 2;
	host(&p, 0, 16384, 4, 2, a0, f0);   /* its fast pool is too small for anything */
	host(&p, 1, 16384, 4, 1, a1, NULL);
	machines(&p, 4, 10 * GiB, 1024);
	mig_place(&p);
	for (size_t i = 0; i < 4; i++) {
		CHECK(p.m[i].status == MIG_PENDING);
		CHECK(strcmp(p.m[i].pool, "h0-p0"));    /* never the pool without room */
	}
	/* spread: two on each host, alternating (the least loaded first) */
	CHECK_EQ_U(p.m[0].host, 0);
	CHECK_STR(p.m[0].pool, "h0-p1");
	CHECK_EQ_U(p.m[1].host, 1);
	CHECK_EQ_U(p.m[2].host, 0);
	CHECK_EQ_U(p.m[3].host, 1);
	/* a fifth of 10 GiB: h0-p1 has 30 GiB left, h1-p0 20: still fits;
	 * then space runs out: 4 more fit (2 each), the next ones do not */
	mig_plan_free(&p);

	memset(&p, 0, sizeof(p));
	p.h = calloc(1, sizeof(*p.h));
	p.nh = 1;
	uint64_t a2[] = { 25 * GiB };
	host(&p, 0, 16384, 4, 1, a2, NULL);
	machines(&p, 3, 10 * GiB, 512);
	mig_place(&p);
	CHECK(p.m[0].status == MIG_PENDING && p.m[0].host == 0);
	CHECK(p.m[1].status == MIG_PENDING && p.m[1].host == 0);
	/* 5 GiB left: less than 10 GiB + 2 GiB margin: booked space counts */
	CHECK(p.m[2].status == MIG_UNPLACED && p.m[2].host == -1);
	CHECK(strstr(p.m[2].why, "no pool with room") != NULL);
	mig_plan_free(&p);
}

static void test_place_memory(void)
{
	struct mig_plan p = { 0 };
	uint64_t a[] = { 500 * GiB };

	p.h = calloc(2, sizeof(*p.h));
	p.nh = 2;
	host(&p, 0, 16384, 8, 1, a, NULL);
	p.h[0].memory_mib = 3000;     /* the plan's limit, lower than free memory */
	host(&p, 1, 2500, 8, 1, a, NULL);
	machines(&p, 5, 1 * GiB, 1024);
	p.m[4].memory_mib = 100000;  /* fits nowhere */
	mig_place(&p);
	uint64_t booked[2] = { 0, 0 };
	size_t placed = 0;
	for (size_t i = 0; i < 4; i++)
		if (p.m[i].status == MIG_PENDING) {
			booked[p.m[i].host] += p.m[i].memory_mib;
			placed++;
		}
	CHECK(booked[0] <= 3000);
	CHECK(booked[1] <= 2500);
	CHECK_EQ_U(placed, 4);       /* 2 + 2 */
	CHECK(p.m[4].status == MIG_UNPLACED);
	CHECK(strstr(p.m[4].why, "memory left") != NULL);
	CHECK(strstr(p.m[4].why, p.h[0].uri) != NULL && strstr(p.m[4].why, p.h[1].uri) != NULL);
	/* one more 1 GiB machine: no memory left anywhere */
	mig_plan_free(&p);

	/* a host not reached is never chosen; the others still are */
	memset(&p, 0, sizeof(p));
	p.h = calloc(2, sizeof(*p.h));
	p.nh = 2;
	host(&p, 0, 16384, 8, 1, a, NULL);
	host(&p, 1, 16384, 8, 1, a, NULL);
	p.h[0].reached = false;
	machines(&p, 2, GiB, 1024);
	mig_place(&p);
	CHECK(p.m[0].host == 1 && p.m[1].host == 1);
	mig_plan_free(&p);

	/* vCPU limit */
	memset(&p, 0, sizeof(p));
	p.h = calloc(1, sizeof(*p.h));
	p.nh = 1;
	host(&p, 0, 16384, 8, 1, a, NULL);
	p.h[0].vcpus = 3;
	machines(&p, 2, GiB, 256);
	p.m[0].vcpus = 2;
	p.m[1].vcpus = 2;
	mig_place(&p);
	CHECK(p.m[0].status == MIG_PENDING && p.m[1].status == MIG_UNPLACED);
	CHECK(strstr(p.m[1].why, "vCPUs left") != NULL);
	mig_plan_free(&p);
}

/* Placements from the state are kept and book their share; done ones do
 * not book (their volumes are in the pool's figures already). */
static void test_place_kept(void)
{
	struct mig_plan p = { 0 };
	uint64_t a[] = { 30 * GiB }, b[] = { 30 * GiB };

	p.h = calloc(2, sizeof(*p.h));
	p.nh = 2;
	host(&p, 0, 4096, 4, 1, a, NULL);
	host(&p, 1, 4096, 4, 1, b, NULL);
	machines(&p, 4, 10 * GiB, 2048);
	p.m[0].host = 1;             /* kept, pending */
	snprintf(p.m[0].pool, sizeof(p.m[0].pool), "h1-p0");
	p.m[1].host = 1;             /* kept, done: books nothing */
	snprintf(p.m[1].pool, sizeof(p.m[1].pool), "h1-p0");
	p.m[1].status = MIG_DONE;
	mig_place(&p);
	CHECK(p.m[0].host == 1 && !strcmp(p.m[0].pool, "h1-p0"));
	CHECK(p.m[1].host == 1 && p.m[1].status == MIG_DONE);
	/* h1 has 2048 MiB left: m2 goes to h0 (less loaded); m3 finds both
	 * as loaded with as much memory left: the plan's first host */
	CHECK_EQ_U(p.m[2].host, 0);
	CHECK_EQ_U(p.m[3].host, 0);
	mig_plan_free(&p);

	/* two pools on one filesystem share their room */
	memset(&p, 0, sizeof(p));
	p.h = calloc(1, sizeof(*p.h));
	p.nh = 1;
	uint64_t s[] = { 25 * GiB, 25 * GiB };
	host(&p, 0, 16384, 4, 2, s, NULL);
	p.h[0].ps[1].capacity = p.h[0].ps[0].capacity;
	machines(&p, 3, 10 * GiB, 256);
	mig_place(&p);
	CHECK(p.m[0].status == MIG_PENDING && p.m[1].status == MIG_PENDING);
	CHECK(p.m[2].status == MIG_UNPLACED);
	mig_plan_free(&p);
}

static void test_next(void)
{
	struct mig_plan p = { 0 };
	uint64_t a[] = { 500 * GiB };

	p.h = calloc(2, sizeof(*p.h));
	p.nh = 2;
	host(&p, 0, 16384, 8, 1, a, NULL);
	host(&p, 1, 16384, 8, 1, a, NULL);
	p.h[1].jobs = 1;
	machines(&p, 6, GiB, 256);
	for (size_t i = 0; i < 6; i++) {
		p.m[i].host = i < 4 ? 0 : 1;
		snprintf(p.m[i].pool, sizeof(p.m[i].pool), "x");
	}
	p.m[5].status = MIG_UNPLACED;
	p.m[5].host = -1;
	CHECK_EQ_U(mig_next(&p, 2, 0), 0);
	p.m[0].status = MIG_RUNNING;
	CHECK_EQ_U(mig_next(&p, 2, 0), 1);
	p.m[1].status = MIG_RUNNING;
	CHECK_EQ_U(mig_next(&p, 2, 0), 4);   /* host 0 full at 2 */
	CHECK_EQ_U(mig_next(&p, 3, 0), 2);
	CHECK_EQ_U(mig_next(&p, 2, 2), (unsigned long long)-1);   /* --jobs 2 */
	p.m[4].status = MIG_RUNNING;
	CHECK_EQ_U(mig_next(&p, 2, 0), (unsigned long long)-1);   /* host 1's jobs: 1 */
	p.m[0].status = MIG_DONE;
	CHECK_EQ_U(mig_next(&p, 2, 0), 2);
	/* per_path */
	p.per_path = 1;
	snprintf(p.m[1].path, sizeof(p.m[1].path), "wan");
	snprintf(p.m[2].path, sizeof(p.m[2].path), "wan");
	CHECK_EQ_U(mig_next(&p, 2, 0), 3);
	mig_plan_free(&p);
}

static void test_state(void)
{
	static const char text[] =
		"{ \"hosts\": [ { \"uri\": \"qemu:///system\" }, { \"uri\": \"qemu+ssh://b/system\" } ],\n"
		"  \"machines\": [ { \"name\": \"a\", \"sources\": [\"/a\"] },\n"
		"                  { \"name\": \"b\", \"sources\": [\"/b\"] },\n"
		"                  { \"name\": \"c\", \"sources\": [\"/c\"] } ] }";
	char path[] = "/tmp/imager-unit-migrate-XXXXXX";
	struct mig_plan p, q;
	struct im_err err = { 0 };
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	close(fd);
	unlink(path);
	CHECK(parse(text, &p, &err) == 0);
	CHECK(mig_state_read(&p, path, &err) == 1);    /* none yet */
	p.m[0].status = MIG_DONE;
	p.m[0].host = 1;
	snprintf(p.m[0].pool, sizeof(p.m[0].pool), "fast");
	p.m[0].bytes = 12345;
	p.m[0].need = 1 << 30;
	p.m[0].attempts = 1;
	p.m[1].status = MIG_RUNNING;
	p.m[1].host = 0;
	snprintf(p.m[1].pool, sizeof(p.m[1].pool), "bulk");
	p.m[1].pid = 4242;
	p.m[2].status = MIG_FAILED;
	snprintf(p.m[2].why, sizeof(p.m[2].why), "it \"broke\"\n");
	p.m[2].exit = 3;
	CHECK(mig_state_write(&p, path, &err) == 0);
	CHECK(parse(text, &q, &err) == 0);
	CHECK(mig_state_read(&q, path, &err) == 0);
	CHECK(q.m[0].status == MIG_DONE && q.m[0].host == 1 && !strcmp(q.m[0].pool, "fast"));
	CHECK_EQ_U(q.m[0].bytes, 12345);
	CHECK_EQ_U(q.m[0].need, 1u << 30);
	CHECK(q.m[1].status == MIG_RUNNING && q.m[1].host == 0 && q.m[1].pid == 4242);
	/* failed without a placement: to be placed again */
	CHECK(q.m[2].status == MIG_PENDING && q.m[2].host == -1);
	CHECK_STR(q.m[2].why, "it \"broke\"\n");
	mig_plan_free(&q);
	/* a host gone from the plan: the machine is placed again */
	static const char fewer[] =
		"{ \"hosts\": [ { \"uri\": \"qemu:///system\" } ],\n"
		"  \"machines\": [ { \"name\": \"b\", \"sources\": [\"/b\"] },\n"
		"                  { \"name\": \"a\", \"sources\": [\"/a\"] } ] }";
	CHECK(parse(fewer, &q, &err) == 0);
	CHECK(mig_state_read(&q, path, &err) == 0);
	CHECK(q.m[1].status == MIG_DONE && q.m[1].host == -1);
	CHECK(q.m[0].status == MIG_RUNNING && q.m[0].host == 0);
	mig_plan_free(&q);
	/* not a state file */
	FILE *f = fopen(path, "w");
	fputs("{\"machines\": 3}", f);
	fclose(f);
	CHECK(parse(text, &q, &err) == 0);
	memset(&err, 0, sizeof(err));
	CHECK(mig_state_read(&q, path, &err) < 0 && err.exit_class == IM_EXIT_USAGE);
	mig_plan_free(&q);
	mig_plan_free(&p);
	unlink(path);
}

static void test_exit_code(void)
{
	struct mig_plan p = { 0 };

	machines(&p, 3, GiB, 256);
	p.m[0].status = MIG_DONE;
	p.m[1].status = MIG_DONE;
	p.m[2].status = MIG_DONE;
	CHECK_EQ_U(mig_exit_code(&p, false), 0);
	p.m[1].status = MIG_FAILED;
	p.m[1].exit = 3;
	p.m[2].status = MIG_UNPLACED;
	CHECK_EQ_U(mig_exit_code(&p, false), IM_EXIT_SOME_FAILED);
	CHECK_EQ_U(mig_exit_code(&p, true), IM_EXIT_TARGET);
	p.m[2].status = MIG_DONE;
	CHECK_EQ_U(mig_exit_code(&p, true), IM_EXIT_OK);   /* (a failed one: a dry run places nothing new) */
	p.m[2].status = MIG_UNPLACED;
	p.m[1].status = MIG_PENDING;
	CHECK_EQ_U(mig_exit_code(&p, true), IM_EXIT_TARGET);
	CHECK_EQ_U(mig_exit_code(&p, false), IM_EXIT_INTERRUPTED);
	mig_plan_free(&p);
}

UNIT_MAIN(UNIT(test_parse_good), UNIT(test_parse_bad), UNIT(test_place_spread_and_pools),
	  UNIT(test_place_memory), UNIT(test_place_kept), UNIT(test_next), UNIT(test_state),
	  UNIT(test_exit_code))
