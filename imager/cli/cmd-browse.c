/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager cat | get (and what ls and mount share: cmd-ls.c, cmd-mount.c):
 * an image folder's files without a restore.  The folder's disk is served
 * by imager's nbdkit plugin on a socket in a private temporary folder
 * (serve_bg_start), one libguestfs appliance reads it
 * (include/imager/browse.h), and both are stopped at the end whatever
 * happens (nbdkit also gets SIGTERM when imager dies; libguestfs stops its
 * qemu when its process dies).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
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
	if (img_reader_open(dir, &ro, &rd, &err) < 0)
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
	if ((rc = serve_bg_start(cmd, dir, cache, &s->srv)) != IM_EXIT_OK)
		return rc;
	if (browse_open(s->srv.sock, &s->b, &err) < 0) {
		serve_bg_stop(&s->srv);
		return cli_fail(cmd, &err);
	}
	if (cli->interrupted && *cli->interrupted) {
		browse_close(s->b);
		serve_bg_stop(&s->srv);
		return IM_EXIT_INTERRUPTED;
	}
	return IM_EXIT_OK;
}

void browse_session_close(struct browse_session *s)
{
	browse_close(s->b);
	s->b = NULL;
	serve_bg_stop(&s->srv);
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

/* The options of cat and get: --cache SIZE (the frame cache of the
 * export's server, as serve's).  Returns the index of the first operand,
 * or -(exit code). */
static int cache_only(const char *cmd, int argc, char **argv, uint64_t *cache)
{
	static const struct option opts[] = {
		{ "cache", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'c')
			return -cli_usage(cmd, "unknown option");
		if (cli_parse_size(optarg, cache) < 0 || *cache < (1u << 20))
			return -cli_usage(cmd, "--cache takes a size of at least 1MiB");
	}
	return optind;
}

int cmd_cat(int argc, char **argv, struct cli *cli)
{
	struct browse_session s;
	struct im_err err = { 0 };
	char name[160], path[4200];
	uint64_t cache = 0;
	int rc, i = cache_only("cat", argc, argv, &cache);

	if (i < 0)
		return -i;
	if (argc - i != 2)
		return cli_usage("cat", "needs DIR and PARTITION:PATH");
	if ((rc = browse_split_spec("cat", argv[i + 1], name, sizeof(name), path, sizeof(path))) != IM_EXIT_OK)
		return rc;
	if ((rc = browse_session_open("cat", argv[i], name, cache, &s, cli)) != IM_EXIT_OK)
		return rc;
	fflush(stdout);
	if (browse_mount(s.b, name, "/", &err) < 0 || browse_cat(s.b, path, 1, &err) < 0)
		rc = cli_fail("cat", &err);
	browse_session_close(&s);
	return rc;
}

int cmd_get(int argc, char **argv, struct cli *cli)
{
	struct browse_session s;
	struct im_err err = { 0 };
	char name[160], path[4200];
	uint64_t cache = 0;
	int rc, i = cache_only("get", argc, argv, &cache);

	if (i < 0)
		return -i;
	if (argc - i != 3)
		return cli_usage("get", "needs DIR, PARTITION:PATH and DEST");
	if ((rc = browse_split_spec("get", argv[i + 1], name, sizeof(name), path, sizeof(path))) != IM_EXIT_OK)
		return rc;
	if ((rc = browse_session_open("get", argv[i], name, cache, &s, cli)) != IM_EXIT_OK)
		return rc;
	if (browse_mount(s.b, name, "/", &err) < 0 || browse_get(s.b, path, argv[i + 2], &err) < 0)
		rc = cli_fail("get", &err);
	else if (cli->verbose >= 0)
		fprintf(stderr, "imager get: %s:%s copied to %s\n", name, path, argv[i + 2]);
	browse_session_close(&s);
	return rc;
}
