/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager serve DIR [--socket PATH | --port N] [--partition N] [--cache SIZE]
 *              [--cache-dir DIR]:
 * the disk an image folder (imager's or Clonezilla's) holds as a read-only
 * NBD export.  The folder is opened and checked here (the usual exit
 * codes; a Clonezilla folder's index found or built here, under
 * --cache-dir, $IMAGER_CZINDEX_DIR or /var/cache/imager/czindex: job.h's
 * im_czindex), then imager becomes
 * nbdkit (exec, in the foreground) with imager's plugin, found next to the
 * binary (build/), in ../lib/imager beside its folder, or in
 * /usr/lib/imager.
 *
 * nbdkit runs with --threads 1: one request at a time per connection
 * (clients that want more open more connections: the export allows
 * multi-conn, and the plugin is thread-safe).  Debian 12's nbdkit 1.32
 * aborts (connections.c: raw_send_socket: Assertion `sock >= 0') when a
 * client goes away with several requests in flight on one connection, a
 * failed read's client among them, whatever the plugin (its own file
 * plugin too); with one thread per connection it does not.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "commands.h"
#include "imager/imgread.h"
#include "imager/job.h"

#define PLUGIN "nbdkit-imager-plugin.so"

/* The plugin's path into out: 0, or -1 when none is there. */
static int find_plugin(char *out, size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(out, len, "%s/%s", exe, PLUGIN);
			if (access(out, R_OK) == 0)
				return 0;
			snprintf(out, len, "%s/../lib/imager/%s", exe, PLUGIN);
			if (access(out, R_OK) == 0)
				return 0;
		}
	}
	snprintf(out, len, "/usr/lib/imager/%s", PLUGIN);
	return access(out, R_OK) == 0 ? 0 : -1;
}

/* --socket PATH: nothing there, or a socket nobody listens on any more
 * (nbdkit leaves its socket behind when stopped: removed); a live server's
 * socket or another file is refused. */
static int socket_free(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, r;

	if (strlen(path) >= sizeof(a.sun_path)) {
		cli_error("serve", "%s: a socket path is at most %zu bytes", path, sizeof(a.sun_path) - 1);
		return IM_EXIT_USAGE;
	}
	if (lstat(path, &st) < 0)
		return IM_EXIT_OK;
	if (!S_ISSOCK(st.st_mode)) {
		cli_error("serve", "%s exists and is not a socket", path);
		return IM_EXIT_TARGET;
	}
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return IM_EXIT_INTERNAL;
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	if (r == 0) {
		cli_error("serve", "%s: a server already answers on this socket", path);
		return IM_EXIT_TARGET;
	}
	unlink(path);   /* (left behind by a server that stopped) */
	return IM_EXIT_OK;
}

/* The folder checked here, so that its faults get imager's exit codes
 * (and a Clonezilla folder's index made before nbdkit starts): *size the
 * export's; *czabs the cache's absolute path when one was chosen for a
 * Clonezilla folder (the plugin gets it).  Returns an exit code. */
static int check_folder(const char *dir, const struct img_reader_opts *ro,
			struct im_czindex_opts *co, struct cli *cli, uint64_t *size, char **czabs)
{
	struct im_czindex_report rep;
	struct cli_progress prog;
	struct img_reader *rd;
	struct im_err err = { 0 };
	bool chosen = co->cache_dir && co->cache_dir[0];
	int r;

	if (img_is_clonezilla(dir) && cli->verbose >= 0)
		fprintf(stderr, "imager serve: %s is a Clonezilla folder: reading it through its index "
			"in %s\n", dir, chosen ? co->cache_dir : IM_CZINDEX_DIR_DEFAULT);
	cli_progress_job(&prog, true, cli, &co->progress);
	r = im_reader_open(dir, ro, co, &rd, &rep, &err);
	cli_progress_end(&prog);
	if (r < 0)
		return cli_fail("serve", &err);
	*size = img_reader_size(rd);
	img_reader_close(rd);
	if (rep.path[0] && cli->verbose >= 0) {
		char human[32];
		cli_human(rep.bytes, human, sizeof(human));
		fprintf(stderr, "imager serve: index %s %s in %llu.%03llu s (%s)\n", rep.path,
			rep.built ? "built" : "reused", (unsigned long long)(rep.ms / 1000),
			(unsigned long long)(rep.ms % 1000), human);
	}
	if (rep.path[0] && chosen && !(*czabs = realpath(co->cache_dir, NULL))) {
		cli_error("serve", "%s: cannot resolve the cache's path", co->cache_dir);
		return IM_EXIT_IO;
	}
	return IM_EXIT_OK;
}

int cmd_serve(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "port", required_argument, NULL, 'p' },
		{ "partition", required_argument, NULL, 'n' },
		{ "cache", required_argument, NULL, 'c' },
		{ "cache-dir", required_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	struct img_reader_opts ro = { 0 };
	struct im_czindex_opts co = { .cache_dir = getenv("IMAGER_CZINDEX_DIR") };
	const char *sock = NULL, *dir;
	unsigned port = 0;
	char plugin[PATH_MAX + 64], dirarg[PATH_MAX + 8], partarg[32], cachearg[40], portarg[16];
	char czarg[PATH_MAX + 16], *czabs = NULL;
	uint64_t size = 0;
	char where[PATH_MAX + 64], *abs;
	const char *nargv[20];
	size_t na = 0;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'p':
			if (cli_parse_uint(optarg, 1, 65535, &port) < 0)
				return cli_usage("serve", "--port takes 1..65535");
			break;
		case 'n':
			if (cli_parse_uint(optarg, 1, 4096, &ro.partition) < 0)
				return cli_usage("serve", "--partition takes a partition number (1..4096)");
			break;
		case 'c':
			if (cli_parse_size(optarg, &ro.cache_bytes) < 0 || ro.cache_bytes < (1u << 20))
				return cli_usage("serve", "--cache takes a size of at least 1MiB");
			break;
		case 'd': co.cache_dir = optarg; break;
		default: return cli_usage("serve", "unknown option");
		}
	}
	if (argc - optind != 1)
		return cli_usage("serve", "needs DIR");
	if (sock && port)
		return cli_usage("serve", "--socket and --port exclude each other");
	dir = argv[optind];

	c = check_folder(dir, &ro, &co, cli, &size, &czabs);
	if (c != IM_EXIT_OK)
		return c;
	if (sock && (c = socket_free(sock)) != IM_EXIT_OK)
		return c;

	if (find_plugin(plugin, sizeof(plugin)) < 0) {
		cli_error("serve", "%s not found next to imager, in ../lib/imager or in /usr/lib/imager "
			  "(make builds it into build/)", PLUGIN);
		return IM_EXIT_UNSUPP;
	}
	abs = realpath(dir, NULL);
	if (!abs) {
		cli_error("serve", "%s: cannot resolve the folder's path", dir);
		return IM_EXIT_SOURCE;
	}
	snprintf(dirarg, sizeof(dirarg), "dir=%s", abs);
	free(abs);

	nargv[na++] = "nbdkit";
	nargv[na++] = "--foreground";
	nargv[na++] = "--readonly";
	nargv[na++] = "--threads";
	nargv[na++] = "1";
	if (sock) {
		nargv[na++] = "--unix";
		nargv[na++] = sock;
		snprintf(where, sizeof(where), "nbd+unix:///?socket=%s", sock);
	} else {
		snprintf(portarg, sizeof(portarg), "%u", port ? port : 10809);
		nargv[na++] = "--port";
		nargv[na++] = portarg;
		snprintf(where, sizeof(where), "nbd://localhost:%s", portarg);
	}
	if (cli->verbose > 0)
		nargv[na++] = "--verbose";
	nargv[na++] = plugin;
	nargv[na++] = dirarg;
	if (ro.partition) {
		snprintf(partarg, sizeof(partarg), "partition=%u", ro.partition);
		nargv[na++] = partarg;
	}
	if (ro.cache_bytes) {
		snprintf(cachearg, sizeof(cachearg), "cache=%llu", (unsigned long long)ro.cache_bytes);
		nargv[na++] = cachearg;
	}
	if (czabs) {
		snprintf(czarg, sizeof(czarg), "czcache=%s", czabs);
		nargv[na++] = czarg;
		free(czabs);
	}
	nargv[na] = NULL;

	if (cli->verbose >= 0) {
		char human[32];
		cli_human(size, human, sizeof(human));
		fprintf(stderr, "imager serve: %s%s%s (%s, read-only) on %s until stopped (Ctrl-C)\n",
			dir, ro.partition ? ", partition " : "", ro.partition ? partarg + 10 : "",
			human, where);
	}
	fflush(stdout);
	fflush(stderr);
	execvp("nbdkit", (char *const *)nargv);
	cli_error("serve", "cannot run nbdkit: %s (install the nbdkit package)", strerror(errno));
	return IM_EXIT_UNSUPP;
}
