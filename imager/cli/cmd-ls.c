/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager ls DIR [PARTITION:[PATH]] [--long] [--cache SIZE]: an image
 * folder's partitions and filesystems, or the entries of a folder in one,
 * without a restore (the session of cmd-browse.c).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "commands.h"
#include "imager/browse.h"

/* ---- ls ---- */

static void mode_string(uint32_t m, char type, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = type;
	for (int i = 0; i < 9; i++)
		out[i + 1] = (m & (0400u >> i)) ? rwx[i] : '-';
	if (m & S_ISUID)
		out[3] = (m & 0100) ? 's' : 'S';
	if (m & S_ISGID)
		out[6] = (m & 0010) ? 's' : 'S';
	if (m & S_ISVTX)
		out[9] = (m & 0001) ? 't' : 'T';
	out[10] = '\0';
}

static int print_entry(void *opaque, const struct browse_entry *e)
{
	bool lng = *(bool *)opaque;
	char mode[11], when[32];
	time_t t = (time_t)e->mtime;
	struct tm tm;

	if (!lng) {
		printf("%s\n", e->name);
		return 0;
	}
	mode_string(e->mode, e->type, mode);
	if (gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	else
		snprintf(when, sizeof(when), "%lld", (long long)e->mtime);
	printf("%s %3llu %5llu %5llu %12llu %s %s%s%s\n", mode, (unsigned long long)e->nlink,
	       (unsigned long long)e->uid, (unsigned long long)e->gid,
	       (unsigned long long)e->size, when, e->name, e->type == 'l' ? " -> " : "",
	       e->type == 'l' ? e->target : "");
	return 0;
}

int cmd_ls(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "long", no_argument, NULL, 'l' },
		{ "cache", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	struct browse_session s;
	struct im_err err = { 0 };
	char name[160], path[4200], size[32];
	uint64_t cache = 0;
	bool lng = false;
	int c, rc;

	while ((c = getopt_long(argc, argv, "l", opts, NULL)) != -1) {
		switch (c) {
		case 'l': lng = true; break;
		case 'c':
			if (cli_parse_size(optarg, &cache) < 0 || cache < (1u << 20))
				return cli_usage("ls", "--cache takes a size of at least 1MiB");
			break;
		default: return cli_usage("ls", "unknown option");
		}
	}
	if (argc - optind < 1 || argc - optind > 2)
		return cli_usage("ls", "needs DIR and at most one PARTITION:PATH");
	if (argc - optind == 2 &&
	    (rc = browse_split_spec("ls", argv[optind + 1], name, sizeof(name), path, sizeof(path))) != IM_EXIT_OK)
		return rc;
	if ((rc = browse_session_open("ls", argv[optind], argc - optind == 2 ? name : NULL, cache, &s, cli)) != IM_EXIT_OK)
		return rc;
	if (argc - optind == 1) {
		printf("%-16s %-12s %10s  %s\n", "PARTITION", "FILESYSTEM", "SIZE", "LABEL");
		for (size_t i = 0; i < browse_count(s.b); i++) {
			const struct browse_fs *f = browse_at(s.b, i);
			cli_human(f->size, size, sizeof(size));
			printf("%-16s %-12s %10s  %s\n", f->name, f->type[0] ? f->type : "-", size,
			       f->label);
		}
	} else if (browse_mount(s.b, name, "/", &err) < 0 ||
		   browse_list(s.b, path, NULL, print_entry, &lng, &err) < 0) {
		rc = cli_fail("ls", &err);
	}
	browse_session_close(&s);
	return cli_finish_stdout("ls", rc);
}

