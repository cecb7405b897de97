/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager cat | get (and what ls and mount share: cmd-ls.c, cmd-mount.c):
 * an image folder's files without a restore.  The folder's disk is served
 * by imager's nbdkit plugin on a socket in a private temporary folder
 * (img_serve_start, imgserve.h), one libguestfs appliance reads it
 * (include/imager/browse.h), and both are stopped at the end whatever
 * happens (nbdkit also gets SIGTERM when imager dies; libguestfs stops its
 * qemu when its process dies).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "imager/job.h"
#include "imager/imgserve.h"
#include "imager/browse.h"
#include "imager/imgread.h"

/* ---- shared: the folder served, one appliance over it ---- */

/* The folder checked first, so that its faults get imager's exit codes;
 * a partition number (name: digits) the image does not hold is refused
 * here too (IM_EXIT_USAGE, as serve --partition), before any launch. */
int browse_check_folder(const char *cmd, const char *dir, const char *name)
{
	struct img_reader_opts ro = { 0 };
	struct img_reader *rd;
	struct im_err err = { 0 };

	if (name && name[strspn(name, "0123456789")] == '\0' &&
	    cli_parse_uint(name, 0, 4096, &ro.partition) < 0)
		return cli_usage(cmd, "%s: a partition number is 0..4096", name);
	/* (a Clonezilla folder through its index: built here when missing) */
	if (im_reader_open(dir, &ro, NULL, &rd, NULL, &err) < 0)
		return cli_fail(cmd, &err);
	img_reader_close(rd);
	return IM_EXIT_OK;
}

int browse_session_open(const char *cmd, const char *dir, const char *name, uint64_t cache,
			struct browse_session *s, struct cli *cli)
{
	struct im_err err = { 0 };
	int rc;

	memset(s, 0, sizeof(*s));
	if ((rc = browse_check_folder(cmd, dir, name)) != IM_EXIT_OK)
		return rc;
	struct img_serve_opts so = { .cache_bytes = cache };
	char served[4200];
	if (im_serve_folder(dir, NULL, served, sizeof(served), &err) < 0 ||
	    img_serve_start(served, &so, &s->srv, &err) < 0)
		return cli_fail(cmd, &err);
	if (browse_open(img_server_socket(s->srv), &s->b, &err) < 0) {
		img_server_stop(s->srv);
		s->srv = NULL;
		return cli_fail(cmd, &err);
	}
	if (cli->interrupted && *cli->interrupted) {
		browse_close(s->b);
		img_server_stop(s->srv);
		s->srv = NULL;
		return IM_EXIT_INTERRUPTED;
	}
	return IM_EXIT_OK;
}

void browse_session_close(struct browse_session *s)
{
	browse_close(s->b);
	s->b = NULL;
	img_server_stop(s->srv);
	s->srv = NULL;
}

/* "NAME:PATH" into name and path ("/" when empty; a leading / added). */
int browse_split_spec(const char *cmd, const char *arg, char *name, size_t nlen, char *path,
		      size_t plen)
{
	const char *colon = strchr(arg, ':');

	if (!colon || colon == arg)
		return cli_usage(cmd, "%s: name a partition and a path, PARTITION:PATH "
				 "(2:/etc/fstab, vg0/root:/etc)", arg);
	if ((size_t)(colon - arg) >= nlen || strlen(colon + 1) + 2 >= plen)
		return cli_usage(cmd, "%s: too long", arg);
	snprintf(name, nlen, "%.*s", (int)(colon - arg), arg);
	snprintf(path, plen, "%s%s", colon[1] == '/' ? "" : "/", colon + 1);
	return IM_EXIT_OK;
}

/* ---- cat, get ---- */

/* cat (nargs 2: the file onto stdout) and get (nargs 3: into DEST).  The
 * option: --cache SIZE (the frame cache of the export's server, as
 * serve's). */
static int file_out(const char *cmd, int nargs, int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "cache", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	struct browse_session s;
	struct im_err err = { 0 };
	char name[160], path[4200];
	const char *dest;
	uint64_t cache = 0;
	int c, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'c')
			return cli_usage(cmd, "unknown option");
		if (cli_parse_size(optarg, &cache) < 0 || cache < (1u << 20))
			return cli_usage(cmd, "--cache takes a size of at least 1MiB");
	}
	if (argc - optind != nargs)
		return cli_usage(cmd, nargs == 2 ? "needs DIR and PARTITION:PATH"
				 : "needs DIR, PARTITION:PATH and DEST");
	dest = nargs == 3 ? argv[optind + 2] : NULL;
	if ((rc = browse_split_spec(cmd, argv[optind + 1], name, sizeof(name), path,
				    sizeof(path))) != IM_EXIT_OK ||
	    (rc = browse_session_open(cmd, argv[optind], name, cache, &s, cli)) != IM_EXIT_OK)
		return rc;
	fflush(stdout);
	if (browse_mount(s.b, name, "/", &err) < 0 ||
	    (dest ? browse_get(s.b, path, dest, &err) : browse_cat(s.b, path, 1, &err)) < 0)
		rc = cli_fail(cmd, &err);
	else if (dest && cli->verbose >= 0)
		fprintf(stderr, "imager get: %s:%s copied to %s\n", name, path, dest);
	browse_session_close(&s);
	return rc;
}

int cmd_cat(int argc, char **argv, struct cli *cli)
{
	return file_out("cat", 2, argc, argv, cli);
}

int cmd_get(int argc, char **argv, struct cli *cli)
{
	return file_out("get", 3, argc, argv, cli);
}
