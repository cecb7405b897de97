/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Pools: reading `zpool status` for log vdevs, the ranking rules, local URIs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imager/pools.h"
#include "unit.h"

/* As OpenZFS prints them: a tab, the pool at depth 0, vdevs two spaces
 * deeper per level, class headings ("logs", "cache") back at depth 0. */
static const char status_logs[] =
	"  pool: tank\n"
	" state: ONLINE\n"
	"  scan: scrub repaired 0B in 00:10:21 with 0 errors on Sun Nov  9 00:34:22 2025\n"
	"config:\n"
	"\n"
	"\tNAME                                    STATE     READ WRITE CKSUM\n"
	"\ttank                                    ONLINE       0     0     0\n"
	"\t  mirror-0                              ONLINE       0     0     0\n"
	"\t    /dev/disk/by-id/ata-ST4000-A-part1  ONLINE       0     0     0\n"
	"\t    /dev/disk/by-id/ata-ST4000-B-part1  ONLINE       0     0     0\n"
	"\tlogs\t\n"
	"\t  /dev/disk/by-id/nvme-SLOG-part1       ONLINE       0     0     0\n"
	"\n"
	"errors: No known data errors\n";

static const char status_mirrored_logs[] =
	"  pool: vms\n"
	" state: ONLINE\n"
	"config:\n"
	"\n"
	"\tNAME              STATE     READ WRITE CKSUM\n"
	"\tvms               ONLINE       0     0     0\n"
	"\t  raidz1-0        ONLINE       0     0     0\n"
	"\t    /dev/sda1     ONLINE       0     0     0\n"
	"\t    /dev/sdb1     ONLINE       0     0     0\n"
	"\t    /dev/sdc1     ONLINE       0     0     0\n"
	"\tlogs\t\n"
	"\t  mirror-1        ONLINE       0     0     0\n"
	"\t    /dev/nvme0n1p1  ONLINE       0     0     0\n"
	"\t    /dev/nvme1n1p1  ONLINE       0     0     0\n"
	"\tcache\n"
	"\t  /dev/nvme0n1p2  ONLINE       0     0     0\n"
	"\n"
	"errors: No known data errors\n";

static const char status_no_logs[] =
	"  pool: rpool\n"
	" state: ONLINE\n"
	"config:\n"
	"\n"
	"\tNAME           STATE     READ WRITE CKSUM\n"
	"\trpool          ONLINE       0     0     0\n"
	"\t  mirror-0     ONLINE       0     0     0\n"
	"\t    /dev/sda3  ONLINE       0     0     0\n"
	"\t    /dev/sdb3  ONLINE       0     0     0\n"
	"\n"
	"errors: No known data errors\n";

/* cache and spares, a special class, no logs; the spares line says AVAIL. */
static const char status_cache_only[] =
	"  pool: data\n"
	" state: ONLINE\n"
	"config:\n"
	"\n"
	"\tNAME           STATE     READ WRITE CKSUM\n"
	"\tdata           ONLINE       0     0     0\n"
	"\t  /dev/sdb     ONLINE       0     0     0\n"
	"\tspecial\t\n"
	"\t  /dev/sdd     ONLINE       0     0     0\n"
	"\tcache\n"
	"\t  /dev/sdc     ONLINE       0     0     0\n"
	"\tspares\n"
	"\t  /dev/sde     AVAIL\n"
	"\n"
	"errors: No known data errors\n";

/* A "logs" heading with nothing under it before the next class. */
static const char status_empty_logs[] =
	"  pool: odd\n"
	"config:\n"
	"\tNAME        STATE     READ WRITE CKSUM\n"
	"\todd         ONLINE       0     0     0\n"
	"\t  /dev/sdb  ONLINE       0     0     0\n"
	"\tlogs\n"
	"\tcache\n"
	"\t  /dev/sdc  ONLINE       0     0     0\n"
	"errors: No known data errors\n";

/* A pool named "logs" (a vdev line, not a heading), spaces instead of
 * tabs, and CRLF line ends. */
static const char status_pool_named_logs[] =
	"  pool: logs\r\n"
	"config:\r\n"
	"\r\n"
	"        NAME        STATE     READ WRITE CKSUM\r\n"
	"        logs        ONLINE       0     0     0\r\n"
	"          /dev/sdb  ONLINE       0     0     0\r\n"
	"\r\n"
	"errors: No known data errors\r\n";

static void zfs_log(void)
{
	CHECK(pools_zfs_has_log(status_logs) == 1);
	CHECK(pools_zfs_has_log(status_mirrored_logs) == 1);
	CHECK(pools_zfs_has_log(status_no_logs) == 0);
	CHECK(pools_zfs_has_log(status_cache_only) == 0);
	CHECK(pools_zfs_has_log(status_empty_logs) == 0);
	CHECK(pools_zfs_has_log(status_pool_named_logs) == 0);
	/* not a zpool status */
	CHECK(pools_zfs_has_log("") == -1);
	CHECK(pools_zfs_has_log(NULL) == -1);
	CHECK(pools_zfs_has_log("cannot open 'tank': no such pool\n") == -1);
	CHECK(pools_zfs_has_log("zpool: command not found\n") == -1);
	CHECK(pools_zfs_has_log("logs\n  /dev/sda ONLINE 0 0 0\n") == -1);
	CHECK(pools_zfs_has_log("  pool: tank\n state: ONLINE\n") == -1);
	CHECK(pools_zfs_has_log("  pool: tank\nconfig:\n\n") == -1);
	CHECK(pools_zfs_has_log("\n\n\t\t   \n\r\n") == -1);
	/* the second pool of a whole `zpool status` does not count */
	{
		char two[2048];
		snprintf(two, sizeof(two), "%s\n%s", status_no_logs, status_logs);
		CHECK(pools_zfs_has_log(two) == 0);
	}
	/* cut anywhere: never crashes, never claims a log it did not see */
	for (size_t cut = 0; cut < sizeof(status_logs); cut++) {
		char *t = strndup(status_logs, cut);
		int r = pools_zfs_has_log(t);
		CHECK(r >= -1 && r <= 1);
		if (cut < (size_t)(strstr(status_logs, "/dev/disk/by-id/nvme") - status_logs))
			CHECK(r != 1);
		free(t);
	}
	/* garbage bytes */
	{
		char junk[512];
		unsigned x = 12345;
		for (size_t i = 0; i + 1 < sizeof(junk); i++) {
			x = x * 1103515245u + 12345u;
			junk[i] = (char)((x >> 16) % 255 + 1);
		}
		junk[sizeof(junk) - 1] = '\0';
		CHECK(pools_zfs_has_log(junk) == -1);
	}
}

static struct im_pool mk(const char *name, const char *type, uint64_t avail, double fsyncs)
{
	struct im_pool p;

	memset(&p, 0, sizeof(p));
	snprintf(p.name, sizeof(p.name), "%s", name);
	snprintf(p.type, sizeof(p.type), "%s", type);
	p.capacity = 1000ull << 30;
	p.available = avail;
	p.fsyncs = fsyncs;
	p.zfs_log = -1;
	return p;
}

#define GiB (1ull << 30)
#define MiB (1ull << 20)

static void rank_fits(void)
{
	/* capacity 1000 GiB: the margin is 2% = 20 GiB */
	struct im_pool p[3] = {
		mk("small", "dir", 29 * GiB, 5000),      /* 10 + 20 > 29: does not fit */
		mk("exact", "dir", 30 * GiB, 100),       /* 10 + 20 = 30: fits */
		mk("big", "dir", 500 * GiB, 50),
	};

	pools_rank(p, 3, 10 * GiB);
	CHECK_STR(p[0].name, "exact");
	CHECK_STR(p[1].name, "big");
	CHECK_STR(p[2].name, "small");
	CHECK(p[0].fits && p[1].fits && !p[2].fits);
	CHECK(p[0].rank == 1 && p[1].rank == 2 && p[2].rank == 3);

	/* a small pool: the margin is at least 256 MiB */
	struct im_pool s = mk("tiny", "dir", 300 * MiB, -1);
	s.capacity = 1 * GiB;
	pools_rank(&s, 1, 44 * MiB);
	CHECK(s.fits);
	pools_rank(&s, 1, 45 * MiB);
	CHECK(!s.fits);
	CHECK(s.rank == 1);
	/* need 0 still wants the margin; a huge need does not overflow */
	s.available = 100 * MiB;
	pools_rank(&s, 1, 0);
	CHECK(!s.fits);
	s.available = UINT64_MAX;
	pools_rank(&s, 1, UINT64_MAX - 1);
	CHECK(!s.fits);
}

static void rank_fsyncs(void)
{
	struct im_pool p[4] = {
		mk("slow", "dir", 100 * GiB, 80),
		mk("unmeasured", "logical", 900 * GiB, -1),   /* best type, most room */
		mk("fast", "dir", 50 * GiB, 2500.5),
		mk("middle", "netfs", 100 * GiB, 700),
	};

	pools_rank(p, 4, 1 * GiB);
	CHECK_STR(p[0].name, "fast");
	CHECK_STR(p[1].name, "middle");
	CHECK_STR(p[2].name, "slow");
	CHECK_STR(p[3].name, "unmeasured");
}

static void rank_types(void)
{
	/* unmeasured, equal room: logical, zfs, fs, dir, netfs, others */
	const char *types[] = { "rbd", "netfs", "dir", "fs", "zfs", "logical", "iscsi" };
	struct im_pool p[7];

	for (size_t i = 0; i < 7; i++) {
		char name[16];
		snprintf(name, sizeof(name), "p%zu", i);
		p[i] = mk(name, types[i], 100 * GiB, -1);
	}
	pools_rank(p, 7, 1 * GiB);
	CHECK_STR(p[0].type, "logical");
	CHECK_STR(p[1].type, "zfs");
	CHECK_STR(p[2].type, "fs");
	CHECK_STR(p[3].type, "dir");
	CHECK_STR(p[4].type, "netfs");
	CHECK_STR(p[5].name, "p0");     /* rbd and iscsi: others, by name */
	CHECK_STR(p[6].name, "p6");

	/* same type: more room first, then the name */
	struct im_pool q[3] = {
		mk("b", "dir", 10 * GiB, -1),
		mk("c", "dir", 20 * GiB, -1),
		mk("a", "dir", 10 * GiB, -1),
	};
	pools_rank(q, 3, 0);
	CHECK_STR(q[0].name, "c");
	CHECK_STR(q[1].name, "a");
	CHECK_STR(q[2].name, "b");
	/* two pools on one filesystem, read a moment apart (the other has
	 * 40 MiB less: something was written in between): the name decides,
	 * whichever was read first; 2% less room is less room */
	struct im_pool f[2] = {
		mk("zz-first", "dir", 200 * GiB, -1),
		mk("aa-second", "dir", 200 * GiB - 40 * MiB, -1),
	};
	pools_rank(f, 2, 0);
	CHECK_STR(f[0].name, "aa-second");
	f[0].available = 200 * GiB;
	f[1].available = 200 * GiB - 40 * MiB;
	pools_rank(f, 2, 0);
	CHECK_STR(f[0].name, "aa-second");
	f[0].available = 196 * GiB;   /* aa-second */
	f[1].available = 200 * GiB;
	pools_rank(f, 2, 0);
	CHECK_STR(f[0].name, "zz-first");
}

static void rank_zfs_without_log(void)
{
	struct im_pool p[5] = {
		mk("zfs-nolog", "zfs", 800 * GiB, 9000),    /* fastest, but no SLOG */
		mk("dir-slow", "dir", 100 * GiB, 30),
		mk("remote", "dir", 100 * GiB, -1),
		mk("zfs-slog", "zfs", 100 * GiB, 4000),
		mk("zfs-unknown", "zfs", 100 * GiB, -1),    /* log vdevs unknown: not demoted */
	};

	p[0].zfs = true;
	p[0].zfs_log = 0;
	p[3].zfs = true;
	p[3].zfs_log = 1;
	p[4].zfs = true;
	pools_rank(p, 5, 1 * GiB);
	CHECK_STR(p[0].name, "zfs-slog");
	CHECK_STR(p[1].name, "dir-slow");
	CHECK_STR(p[2].name, "zfs-unknown");   /* unmeasured: zfs before dir */
	CHECK_STR(p[3].name, "remote");
	CHECK_STR(p[4].name, "zfs-nolog");

	/* a dir pool on a ZFS dataset without a log vdev is demoted alike;
	 * room still comes first */
	struct im_pool q[2] = {
		mk("on-zfs", "dir", 800 * GiB, 9000),
		mk("full", "dir", 1 * GiB, 10),
	};
	q[0].zfs = true;
	q[0].zfs_log = 0;
	pools_rank(q, 2, 10 * GiB);
	CHECK_STR(q[0].name, "on-zfs");
	CHECK(q[0].fits && !q[1].fits);
}

static void rank_stable(void)
{
	/* Identical but for the name: every starting order gives one result. */
	const char *names[] = { "delta", "alpha", "charlie", "bravo" };
	for (int rot = 0; rot < 4; rot++) {
		struct im_pool p[4];
		for (int i = 0; i < 4; i++)
			p[i] = mk(names[(i + rot) % 4], "dir", 100 * GiB, 250);
		pools_rank(p, 4, 1 * GiB);
		CHECK_STR(p[0].name, "alpha");
		CHECK_STR(p[1].name, "bravo");
		CHECK_STR(p[2].name, "charlie");
		CHECK_STR(p[3].name, "delta");
		CHECK(p[3].rank == 4);
	}
	pools_rank(NULL, 0, 0);
}

static void find(void)
{
	struct im_pool p[2] = { mk("one", "dir", 1, -1), mk("two", "dir", 1, -1) };

	CHECK(pools_find(p, 2, "two") == &p[1]);
	CHECK(pools_find(p, 2, "three") == NULL);
	CHECK(pools_find(p, 0, "one") == NULL);
}

static void uris(void)
{
	CHECK(host_uri_is_local("qemu:///system"));
	CHECK(host_uri_is_local("qemu:///session"));
	CHECK(host_uri_is_local("qemu+unix:///system?socket=/run/x.sock"));
	CHECK(host_uri_is_local("test:///default"));
	CHECK(!host_uri_is_local("qemu+ssh://root@kvm1/system"));
	CHECK(!host_uri_is_local("qemu+tcp://10.0.0.2/system"));
	CHECK(!host_uri_is_local("qemu+tls://[fe80::1]:16514/system"));
	CHECK(!host_uri_is_local(NULL));
	CHECK(!host_uri_is_local(""));
	CHECK(!host_uri_is_local(":///x"));
}

static void has_files(void)
{
	struct im_pool p = mk("x", "dir", 1, -1);
	CHECK(pools_has_files(&p));
	snprintf(p.type, sizeof(p.type), "netfs");
	CHECK(pools_has_files(&p));
	snprintf(p.type, sizeof(p.type), "logical");
	CHECK(!pools_has_files(&p));
	snprintf(p.type, sizeof(p.type), "zfs");
	CHECK(!pools_has_files(&p));
}

UNIT_MAIN(UNIT(zfs_log), UNIT(rank_fits), UNIT(rank_fsyncs), UNIT(rank_types),
	  UNIT(rank_zfs_without_log), UNIT(rank_stable), UNIT(find), UNIT(uris), UNIT(has_files))
