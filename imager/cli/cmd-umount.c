/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager umount MOUNTPOINT [--timeout SECONDS]: undo imager mount
 * (cmd-mount.c): unmount, wait for the daemon to stop the appliance and
 * nbdkit and remove its state file, stop what is left, and check that the
 * export's socket no longer answers.  Liveness is judged by the state file
 * and the socket (a stopped process may stay a zombie: PID 1 may not reap).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "imager/imgserve.h"

static void kill_same(long pid, unsigned long long start, int sig)
{
	if (pid > 0 && start && mount_proc_start(pid) == start)
		kill((pid_t)pid, sig);
}

int cmd_umount(int argc, char **argv, struct cli *cli)
{
	char mp[PATH_MAX];
	struct mount_state st;
	int rc;

	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned timeout = 60;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 't' || cli_parse_uint(optarg, 1, 3600, &timeout) < 0)
			return cli_usage("umount", c == 't' ? "--timeout takes 1..3600 seconds"
					 : "unknown option");
	}
	if (argc - optind != 1)
		return cli_usage("umount", "needs MOUNTPOINT");
	if ((rc = mount_point_path("umount", argv[optind], mp)) != IM_EXIT_OK)
		return rc;
	if (!mount_state_read(mp, &st)) {
		cli_error("umount", "%s was not mounted by imager mount (no state in %s)", mp,
			  MOUNTS_DIR);
		return IM_EXIT_TARGET;
	}
	if (mount_is_mounted(mp) && umount2(mp, 0) < 0) {
		if (errno == EBUSY) {
			cli_error("umount", "%s is busy (a process uses it): nothing stopped", mp);
			return IM_EXIT_TARGET;
		}
		if (umount2(mp, MNT_DETACH) < 0) {
			cli_error("umount", "%s: %s", mp, strerror(errno));
			return IM_EXIT_TARGET;
		}
	}
	/* The daemon shuts the appliance down, stops nbdkit and removes its
	 * state: wait for that (--timeout, 60 s; not once it has ended), then
	 * stop what is left here. */
	char path[256];
	struct stat sb;
	mount_state_path(mp, "state", path, sizeof(path));
	for (unsigned i = 0; i < timeout * 10 && stat(path, &sb) == 0 &&
	     mount_proc_start(st.pid) == st.start; i++)
		usleep(100000);
	if (stat(path, &sb) == 0) {
		kill_same(st.pid, st.start, SIGTERM);
		kill_same(st.nbdkit, st.nbdkit_start, SIGTERM);
		for (unsigned i = 0; i < 50 && img_socket_answers(st.sock); i++)
			usleep(100000);
		kill_same(st.nbdkit, st.nbdkit_start, SIGKILL);
		mount_state_remove(mp);
	}
	if (st.sock[0] && img_socket_answers(st.sock)) {
		cli_error("umount", "%s: the image's server still answers on %s", mp, st.sock);
		return IM_EXIT_IO;
	}
	if (st.tmpdir[0] && !strncmp(st.sock, st.tmpdir, strlen(st.tmpdir))) {
		unlink(st.sock);
		rmdir(st.tmpdir);
	}
	if (cli->verbose >= 0)
		fprintf(stderr, "imager umount: %s unmounted (%s), nothing left running\n", mp, st.dir);
	return IM_EXIT_OK;
}

