/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager serve DIR [--socket PATH | --port N] [--partition N] [--cache SIZE]:
 * the disk an image folder holds as a read-only NBD export.  The folder is
 * opened and checked here (the usual exit codes), then imager becomes
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
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "imager/imgread.h"
#include "util.h"

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
	if (serve_answers(path)) {
		cli_error("serve", "%s: a server already answers on this socket", path);
		return IM_EXIT_TARGET;
	}
	unlink(path);   /* (left behind by a server that stopped) */
	return IM_EXIT_OK;
}

/* nbdkit's command line for dir (made absolute) with the plugin, into
 * a->argv: on sock (a Unix socket) or port.  Returns an exit code (said). */
int serve_nbdkit_args(const char *cmd, const char *dir, const char *sock, unsigned port,
		      const struct img_reader_opts *ro, bool verbose, struct serve_args *a)
{
	size_t na = 0;
	char *abs;

	if (find_plugin(a->plugin, sizeof(a->plugin)) < 0) {
		cli_error(cmd, "%s not found next to imager, in ../lib/imager or in /usr/lib/imager "
			  "(make builds it into build/)", PLUGIN);
		return IM_EXIT_UNSUPP;
	}
	abs = realpath(dir, NULL);
	if (!abs) {
		cli_error(cmd, "%s: cannot resolve the folder's path", dir);
		return IM_EXIT_SOURCE;
	}
	snprintf(a->dirarg, sizeof(a->dirarg), "dir=%s", abs);
	free(abs);

	a->argv[na++] = "nbdkit";
	a->argv[na++] = "--foreground";
	a->argv[na++] = "--readonly";
	a->argv[na++] = "--threads";
	a->argv[na++] = "1";
	if (sock) {
		a->argv[na++] = "--unix";
		a->argv[na++] = sock;
		snprintf(a->where, sizeof(a->where), "nbd+unix:///?socket=%s", sock);
	} else {
		snprintf(a->portarg, sizeof(a->portarg), "%u", port ? port : 10809);
		a->argv[na++] = "--port";
		a->argv[na++] = a->portarg;
		snprintf(a->where, sizeof(a->where), "nbd://localhost:%s", a->portarg);
	}
	if (verbose)
		a->argv[na++] = "--verbose";
	a->argv[na++] = a->plugin;
	a->argv[na++] = a->dirarg;
	if (ro->partition) {
		snprintf(a->partarg, sizeof(a->partarg), "partition=%u", ro->partition);
		a->argv[na++] = a->partarg;
	}
	if (ro->cache_bytes) {
		snprintf(a->cachearg, sizeof(a->cachearg), "cache=%llu",
			 (unsigned long long)ro->cache_bytes);
		a->argv[na++] = a->cachearg;
	}
	a->argv[na] = NULL;
	return IM_EXIT_OK;
}

/* Whether a server answers on the Unix socket path. */
bool serve_answers(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, r;

	if (strlen(path) >= sizeof(a.sun_path))
		return false;
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	return r == 0;
}

int serve_bg_start(const char *cmd, const char *dir, uint64_t cache, struct serve_bg *s)
{
	struct img_reader_opts ro = { .cache_bytes = cache };
	struct im_err err = { 0 };
	struct serve_args a;
	int rc, status;

	memset(s, 0, sizeof(*s));
	if (tmp_dir_make("browse", s->tmpdir, sizeof(s->tmpdir), &err) < 0)
		return cli_fail(cmd, &err);
	if (path_join(s->sock, sizeof(s->sock), s->tmpdir, "nbd.sock") < 0) {
		cli_error(cmd, "%s: the temporary folder's name is too long for a socket "
			  "(set TMPDIR to a shorter one)", s->tmpdir);
		rmdir(s->tmpdir);
		return IM_EXIT_USAGE;
	}
	rc = serve_nbdkit_args(cmd, dir, s->sock, 0, &ro, false, &a);
	if (rc != IM_EXIT_OK) {
		rmdir(s->tmpdir);
		return rc;
	}
	fflush(stdout);
	fflush(stderr);
	s->pid = fork();
	if (s->pid < 0) {
		cli_error(cmd, "cannot start nbdkit: %s", strerror(errno));
		rmdir(s->tmpdir);
		return IM_EXIT_INTERNAL;
	}
	if (s->pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
		}
		execvp("nbdkit", (char *const *)a.argv);
		dprintf(2, "imager %s: cannot run nbdkit: %s (install the nbdkit package)\n", cmd,
			strerror(errno));
		_exit(127);
	}
	/* up when its socket is there (nbdkit listens on it as it makes it,
	 * once the plugin has opened the folder; a probe's connection would
	 * only make it complain) */
	for (unsigned i = 0; i < 3000; i++) {
		struct stat st;
		if (stat(s->sock, &st) == 0 && S_ISSOCK(st.st_mode))
			return IM_EXIT_OK;
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			s->pid = 0;
			serve_bg_stop(s);
			cli_error(cmd, "nbdkit stopped before it served %s", dir);
			return IM_EXIT_UNSUPP;
		}
		usleep(10000);
	}
	serve_bg_stop(s);
	cli_error(cmd, "nbdkit did not serve %s within 30 s", dir);
	return IM_EXIT_IO;
}

void serve_bg_stop(struct serve_bg *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		for (unsigned i = 0; i < 500 && waitpid(s->pid, NULL, WNOHANG) != s->pid; i++) {
			if (i == 499) {   /* 5 s */
				kill(s->pid, SIGKILL);
				waitpid(s->pid, NULL, 0);
			}
			usleep(10000);
		}
		s->pid = 0;
	}
	if (s->tmpdir[0]) {
		unlink(s->sock);
		rmdir(s->tmpdir);
		s->tmpdir[0] = '\0';
	}
}

int cmd_serve(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "port", required_argument, NULL, 'p' },
		{ "partition", required_argument, NULL, 'n' },
		{ "cache", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	struct img_reader_opts ro = { 0 };
	struct img_reader *rd;
	struct im_err err = { 0 };
	struct serve_args a;
	const char *sock = NULL, *dir;
	unsigned port = 0;
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
		default: return cli_usage("serve", "unknown option");
		}
	}
	if (argc - optind != 1)
		return cli_usage("serve", "needs DIR");
	if (sock && port)
		return cli_usage("serve", "--socket and --port exclude each other");
	dir = argv[optind];

	/* The folder checked here, so that its faults get imager's exit codes. */
	if (img_reader_open(dir, &ro, &rd, &err) < 0)
		return cli_fail("serve", &err);
	uint64_t size = img_reader_size(rd);
	img_reader_close(rd);
	if (sock && (c = socket_free(sock)) != IM_EXIT_OK)
		return c;
	if ((c = serve_nbdkit_args("serve", dir, sock, port, &ro, cli->verbose > 0, &a)) != IM_EXIT_OK)
		return c;

	if (cli->verbose >= 0) {
		char human[32];
		cli_human(size, human, sizeof(human));
		fprintf(stderr, "imager serve: %s%s%s (%s, read-only) on %s until stopped (Ctrl-C)\n",
			dir, ro.partition ? ", partition " : "", ro.partition ? a.partarg + 10 : "",
			human, a.where);
	}
	fflush(stdout);
	fflush(stderr);
	execvp("nbdkit", (char *const *)a.argv);
	cli_error("serve", "cannot run nbdkit: %s (install the nbdkit package)", strerror(errno));
	return IM_EXIT_UNSUPP;
}
