/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager serve DIR [--socket PATH | --port N] [--partition N] [--cache SIZE]:
 * the disk an image folder holds as a read-only NBD export.  The folder is
 * opened and checked here (the usual exit codes), then imager becomes
 * nbdkit (exec, in the foreground) with imager's plugin (imgserve.h: where
 * the plugin is found, nbdkit's arguments and why --threads 1).
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
#include "imager/imgserve.h"

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
	if (img_socket_answers(path)) {
		cli_error("serve", "%s: a server already answers on this socket", path);
		return IM_EXIT_TARGET;
	}
	unlink(path);   /* (left behind by a server that stopped) */
	return IM_EXIT_OK;
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
	const char *sock = NULL, *dir;
	unsigned port = 0;
	struct img_serve_opts so = { 0 };
	char plugin[PATH_MAX + 64], argbuf[PATH_MAX + 128], where[PATH_MAX + 64], *abs;
	const char *nargv[IMG_SERVE_ARGC];
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

	if (img_plugin_path(plugin, sizeof(plugin)) < 0) {
		cli_error("serve", "%s not found next to imager, in ../lib/imager or in /usr/lib/imager "
			  "(make builds it into build/)", IMG_PLUGIN);
		return IM_EXIT_UNSUPP;
	}
	abs = realpath(dir, NULL);
	if (!abs) {
		cli_error("serve", "%s: cannot resolve the folder's path", dir);
		return IM_EXIT_SOURCE;
	}
	so.partition = ro.partition;
	so.cache_bytes = ro.cache_bytes;
	so.verbose = cli->verbose > 0;
	c = img_serve_argv(abs, plugin, sock, port, &so, nargv, argbuf, sizeof(argbuf));
	free(abs);
	if (c < 0) {
		cli_error("serve", "%s: the path is too long", dir);
		return IM_EXIT_USAGE;
	}
	if (sock)
		snprintf(where, sizeof(where), "nbd+unix:///?socket=%s", sock);
	else
		snprintf(where, sizeof(where), "nbd://localhost:%u", port ? port : 10809);
	if (cli->verbose >= 0) {
		char human[32];
		cli_human(size, human, sizeof(human));
		char part[32] = "";
		if (ro.partition)
			snprintf(part, sizeof(part), ", partition %u", ro.partition);
		fprintf(stderr, "imager serve: %s%s (%s, read-only) on %s until stopped (Ctrl-C)\n",
			dir, part, human, where);
	}
	fflush(stdout);
	fflush(stderr);
	execvp("nbdkit", (char *const *)nargv);
	cli_error("serve", "cannot run nbdkit: %s (install the nbdkit package)", strerror(errno));
	return IM_EXIT_UNSUPP;
}
