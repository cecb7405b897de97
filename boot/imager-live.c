/* SPDX-License-Identifier: GPL-2.0-or-later */
/* imager-live [--cmdline=STRING]: the live medium's kernel parameters
 * (include/imager/live.h), read from /proc/cmdline or given with
 * --cmdline (to try a PXE line before booting it), printed as shell
 * assignments (LIVE_MODE='unattended' ...) that the medium's init evals
 * and that read well to a person too.  Exit 0, or 1 with the reason on
 * stderr and nothing on stdout.
 *
 * imager-live --mount TYPE SOURCE DIR: mount(2) with the option string read
 * from stdin, passed to the kernel as it is.  busybox mount splits options
 * at every comma, so a cifs password holding one (escaped ",," as the
 * kernel wants) cannot go through it; and on stdin the password is not in
 * any process's arguments. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "imager/live.h"

static int usage(FILE *f, int rc)
{
	fputs("usage: imager-live [--cmdline=STRING]\n"
	      "Checks the live medium's imager.* and ip= kernel parameters (from\n"
	      "/proc/cmdline, or STRING) and prints them as shell assignments.\n"
	      "       imager-live --mount TYPE SOURCE DIR  (the options on stdin)\n",
	      f);
	return rc;
}

static int do_mount(const char *type, const char *source, const char *dir)
{
	static char data[4096];
	size_t n = fread(data, 1, sizeof(data), stdin);
	if (n == sizeof(data)) {
		fputs("imager-live: mount options too long\n", stderr);
		return 1;
	}
	data[n] = '\0';
	while (n && (data[n - 1] == '\n' || data[n - 1] == '\r'))
		data[--n] = '\0';
	if (mount(source, dir, type, 0, n ? data : NULL)) {
		fprintf(stderr, "imager-live: mount %s %s on %s: %s\n", type, source, dir,
			strerror(errno));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static char line[65536];
	const char *cmdline = NULL;
	char err[512];
	int rc;
	struct live_params *p;

	if (argc >= 2 && !strcmp(argv[1], "--mount"))
		return argc == 5 ? do_mount(argv[2], argv[3], argv[4]) : usage(stderr, 1);
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--cmdline=", 10))
			cmdline = argv[i] + 10;
		else if (!strcmp(argv[i], "--help"))
			return usage(stdout, 0);
		else
			return usage(stderr, 1);
	}
	if (!cmdline) {
		FILE *f = fopen("/proc/cmdline", "r");
		size_t n;
		if (!f) {
			perror("imager-live: /proc/cmdline");
			return 1;
		}
		n = fread(line, 1, sizeof(line) - 1, f);
		fclose(f);
		line[n] = '\0';
		cmdline = line;
	}
	p = malloc(sizeof(*p));
	if (!p) {
		fputs("imager-live: out of memory\n", stderr);
		return 1;
	}
	rc = live_parse(cmdline, p, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "imager-live: %s\n", err);
		free(p);
		return 1;
	}
	live_print_shell(stdout, p);
	free(p);
	if (fflush(stdout) || ferror(stdout)) {
		perror("imager-live: stdout");
		return 1;
	}
	return 0;
}
