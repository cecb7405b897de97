/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager serve DIR [--socket PATH | --port N] [--partition N] [--cache SIZE]
 *              [--cache-dir DIR]:
 * the disk an image folder (imager's or Clonezilla's) holds as a read-only
 * NBD export.  The folder is opened and checked here (the usual exit
 * codes; a Clonezilla folder's index found or built here, under
 * --cache-dir, $IMAGER_CZINDEX_DIR or /var/cache/imager/czindex: job.h's
 * im_czindex), then imager becomes
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
#include "imager/job.h"

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
	uint64_t size = 0;
	const char *sock = NULL, *dir;
	unsigned port = 0;
	struct img_serve_opts so = { 0 };
	char plugin[PATH_MAX + 64], argbuf[2 * PATH_MAX + 160], where[PATH_MAX + 64], *abs;
	char *czabs = NULL;
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

	if (img_plugin_path(plugin, sizeof(plugin)) < 0) {
		cli_error("serve", "%s not found next to imager, in ../lib/imager or in /usr/lib/imager "
			  "(make builds it into build/)", IMG_PLUGIN);
		free(czabs);
		return IM_EXIT_UNSUPP;
	}
	abs = realpath(dir, NULL);
	if (!abs) {
		cli_error("serve", "%s: cannot resolve the folder's path", dir);
		free(czabs);
		return IM_EXIT_SOURCE;
	}
	so.partition = ro.partition;
	so.cache_bytes = ro.cache_bytes;
	so.verbose = cli->verbose > 0;
	so.czcache = czabs;
	c = img_serve_argv(abs, plugin, sock, port, &so, nargv, argbuf, sizeof(argbuf));
	free(abs);
	/* (copied into argbuf) */
	free(czabs);
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
