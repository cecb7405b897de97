/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager mount DIR MOUNTPOINT [--partition N|VG/LV] [--cache SIZE]: an
 * image folder's filesystems mounted read-only (FUSE), without a restore.
 * A daemon (a child in a session of its own) keeps nbdkit and the
 * appliance (the session of cmd-browse.c) running and serves the mount
 * (libguestfs's mount_local) until the folder is unmounted; then it stops
 * them, and removes its state file MOUNTS_DIR/HASH.state (HASH: XXH3-64 of
 * the mount point's path), which says what it started (its PID and start
 * time, nbdkit's, the socket, the folders) for imager umount (cmd-umount.c).
 * Its messages go to MOUNTS_DIR/HASH.log, which mount shows.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "commands.h"
#include "imager/imgserve.h"
#include "imager/browse.h"

/* A process's start time (clock ticks since boot), 0 when it is gone. */
unsigned long long mount_proc_start(long pid)
{
	char p[64], buf[1024], *s;
	unsigned long long v = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%ld/stat", pid);
	f = fopen(p, "re");
	if (!f)
		return 0;
	s = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	if (!s || s[1] != ' ' || s[2] == 'Z')
		return 0;   /* a zombie has ended (PID 1 may never reap it) */
	/* after ") ": state is field 3; starttime is field 22 */
	for (int field = 2; s && field < 22; field++)
		s = strchr(s + 1, ' ');
	if (s)
		v = strtoull(s + 1, NULL, 10);
	return v;
}

/* The mount point's absolute path: realpath, or (a FUSE mount whose
 * server died cannot be resolved) its parent's realpath and its name. */
int mount_point_path(const char *cmd, const char *mp, char *out)
{
	char parent[PATH_MAX], *slash, resolved[PATH_MAX];

	if (realpath(mp, out))
		return IM_EXIT_OK;
	snprintf(parent, sizeof(parent), "%s", mp);
	while (strlen(parent) > 1 && parent[strlen(parent) - 1] == '/')
		parent[strlen(parent) - 1] = '\0';
	slash = strrchr(parent, '/');
	const char *base = slash ? slash + 1 : parent;
	if (slash == parent)
		snprintf(resolved, sizeof(resolved), "/");
	else if (!realpath(slash ? (*slash = '\0', parent) : ".", resolved)) {
		cli_error(cmd, "%s: %s", mp, strerror(errno));
		return IM_EXIT_TARGET;
	}
	if (snprintf(out, PATH_MAX, "%s/%s", strcmp(resolved, "/") ? resolved : "", base) >= PATH_MAX)
		return cli_usage(cmd, "%s: too long", mp);
	return IM_EXIT_OK;
}

void mount_state_path(const char *mp, const char *ext, char *out, size_t len)
{
	snprintf(out, len, "%s/%016llx.%s", MOUNTS_DIR,
		 (unsigned long long)XXH3_64bits(mp, strlen(mp)), ext);
}

static int state_write(const struct mount_state *st)
{
	char path[256], tmp[300];
	FILE *f;

	mount_state_path(st->mountpoint, "state", path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	fprintf(f, "mountpoint=%s\ndir=%s\npid=%ld\nstart=%llu\nnbdkit=%ld\nnbdkit_start=%llu\n"
		"socket=%s\ntmpdir=%s\n", st->mountpoint, st->dir, st->pid, st->start, st->nbdkit,
		st->nbdkit_start, st->sock, st->tmpdir);
	if (fclose(f) != 0 || rename(tmp, path) < 0) {
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

/* 1 read, 0 none there. */
int mount_state_read(const char *mp, struct mount_state *st)
{
	char path[256], line[5000];
	FILE *f;

	memset(st, 0, sizeof(*st));
	mount_state_path(mp, "state", path, sizeof(path));
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq++ = '\0';
		eq[strcspn(eq, "\n")] = '\0';
		if (!strcmp(line, "mountpoint")) snprintf(st->mountpoint, sizeof(st->mountpoint), "%s", eq);
		else if (!strcmp(line, "dir")) snprintf(st->dir, sizeof(st->dir), "%s", eq);
		else if (!strcmp(line, "socket")) snprintf(st->sock, sizeof(st->sock), "%s", eq);
		else if (!strcmp(line, "tmpdir")) snprintf(st->tmpdir, sizeof(st->tmpdir), "%s", eq);
		else if (!strcmp(line, "pid")) st->pid = strtol(eq, NULL, 10);
		else if (!strcmp(line, "nbdkit")) st->nbdkit = strtol(eq, NULL, 10);
		else if (!strcmp(line, "start")) st->start = strtoull(eq, NULL, 10);
		else if (!strcmp(line, "nbdkit_start")) st->nbdkit_start = strtoull(eq, NULL, 10);
	}
	fclose(f);
	return !strcmp(st->mountpoint, mp);
}

void mount_state_remove(const char *mp)
{
	char path[256];

	mount_state_path(mp, "state", path, sizeof(path));
	unlink(path);
	mount_state_path(mp, "log", path, sizeof(path));
	unlink(path);
}

/* Whether path is a mount point (its own line in /proc/self/mountinfo). */
bool mount_is_mounted(const char *path)
{
	char line[8192], mp[PATH_MAX];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool yes = false;

	if (!f)
		return false;
	while (!yes && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1)
			yes = !strcmp(mp, path);   /* (paths with spaces: octal escapes, not ours) */
	fclose(f);
	return yes;
}

struct daemon_ctx {
	int ready_fd;
};

static void daemon_ready(void *opaque)
{
	struct daemon_ctx *d = opaque;
	char ok = 0;

	if (write(d->ready_fd, &ok, 1) != 1) {
		/* the parent is gone: it will find the state file */
	}
	close(d->ready_fd);
	d->ready_fd = -1;
}

/* The daemon: serve, launch, mount, FUSE until unmounted, then stop all. */
static int mount_daemon(const char *dir, const char *mp, const char *part, uint64_t cache,
			int ready_fd, struct cli *cli)
{
	struct daemon_ctx d = { ready_fd };
	struct browse_session s;
	struct mount_state st;
	struct im_err err = { 0 };
	size_t mounted = 0;
	int rc;

	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	if ((rc = browse_session_open("mount", dir, NULL, cache, &s, cli)) != IM_EXIT_OK)
		return rc;
	if (part) {
		if (browse_mount(s.b, part, "/", &err) < 0)
			rc = cli_fail("mount", &err);
		else
			fprintf(stderr, "imager mount: %s mounted on %s\n", part, mp);
	} else if (browse_mount_points(s.b, &err) < 0) {
		rc = cli_fail("mount", &err);
	} else {
		for (size_t i = 0; i < browse_count(s.b); i++) {
			const struct browse_fs *f = browse_at(s.b, i);
			char at[200];
			struct im_err e = { 0 };

			if (!f->mountable) {
				fprintf(stderr, "imager mount: %s (%s): no filesystem to mount\n", f->name,
					f->type[0] ? f->type : "none known");
				continue;
			}
			snprintf(at, sizeof(at), "/%s", f->name);
			if (browse_mount(s.b, f->name, at, &e) < 0) {
				fprintf(stderr, "imager mount: %s/%s left empty: %s\n", mp, f->name, e.msg);
				continue;
			}
			fprintf(stderr, "imager mount: %s (%s) on %s/%s\n", f->name, f->type, mp, f->name);
			mounted++;
		}
		if (mounted == 0) {
			cli_error("mount", "%s: no filesystem the appliance can mount", dir);
			rc = IM_EXIT_UNSUPP;
		}
	}
	if (rc == IM_EXIT_OK) {
		memset(&st, 0, sizeof(st));
		snprintf(st.mountpoint, sizeof(st.mountpoint), "%s", mp);
		if (!realpath(dir, st.dir))
			snprintf(st.dir, sizeof(st.dir), "%s", dir);
		snprintf(st.sock, sizeof(st.sock), "%s", img_server_socket(s.srv));
		snprintf(st.tmpdir, sizeof(st.tmpdir), "%s", img_server_dir(s.srv));
		st.pid = (long)getpid();
		st.start = mount_proc_start(st.pid);
		st.nbdkit = img_server_pid(s.srv);
		st.nbdkit_start = mount_proc_start(st.nbdkit);
		if (state_write(&st) < 0) {
			cli_error("mount", "cannot write the state file in %s", MOUNTS_DIR);
			rc = IM_EXIT_IO;
		}
	}
	if (rc == IM_EXIT_OK && browse_fuse(s.b, mp, daemon_ready, &d, &err) < 0)
		rc = cli_fail("mount", &err);
	browse_session_close(&s);
	if (d.ready_fd < 0)   /* it was mounted: what umount waits for */
		mount_state_remove(mp);
	else {
		char path[256];
		mount_state_path(mp, "state", path, sizeof(path));
		unlink(path);
	}
	return rc;
}

/* Print the daemon's log (its messages) on stderr. */
static void relay_log(const char *mp)
{
	char path[256], buf[4096];
	size_t n;
	FILE *f;

	mount_state_path(mp, "log", path, sizeof(path));
	f = fopen(path, "re");
	if (!f)
		return;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, stderr);
	fclose(f);
}

/* MOUNTPOINT: an existing, empty folder, not a mount point. */
static int mountpoint_ok(const char *mp)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	bool empty = true;

	if (stat(mp, &st) < 0 || !S_ISDIR(st.st_mode)) {
		cli_error("mount", "%s: the mount point must be an existing, empty folder", mp);
		return IM_EXIT_TARGET;
	}
	if (mount_is_mounted(mp)) {
		cli_error("mount", "%s is already a mount point", mp);
		return IM_EXIT_TARGET;
	}
	d = opendir(mp);
	if (!d) {
		cli_error("mount", "%s: %s", mp, strerror(errno));
		return IM_EXIT_TARGET;
	}
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	if (!empty) {
		cli_error("mount", "%s is not empty: the mount point must be an empty folder", mp);
		return IM_EXIT_TARGET;
	}
	return IM_EXIT_OK;
}

int cmd_mount(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "partition", required_argument, NULL, 'n' },
		{ "cache", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	const char *part = NULL;
	uint64_t cache = 0;
	char mp[PATH_MAX], adir[PATH_MAX], logp[256];
	struct mount_state old;
	int c, rc, fds[2], logfd;
	pid_t pid;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			part = optarg;
			if (!*part || strchr(part, ':'))
				return cli_usage("mount", "--partition takes a partition number or VG/LV");
			break;
		case 'c':
			if (cli_parse_size(optarg, &cache) < 0 || cache < (1u << 20))
				return cli_usage("mount", "--cache takes a size of at least 1MiB");
			break;
		default: return cli_usage("mount", "unknown option");
		}
	}
	if (argc - optind != 2)
		return cli_usage("mount", "needs DIR and MOUNTPOINT");
	const char *dir = argv[optind];
	if ((rc = browse_check_folder("mount", dir, part)) != IM_EXIT_OK ||
	    (rc = mountpoint_ok(argv[optind + 1])) != IM_EXIT_OK ||
	    (rc = mount_point_path("mount", argv[optind + 1], mp)) != IM_EXIT_OK)
		return rc;
	if (!realpath(dir, adir)) {
		cli_error("mount", "%s: %s", dir, strerror(errno));
		return IM_EXIT_SOURCE;
	}
	if (access("/dev/fuse", R_OK | W_OK) < 0) {
		cli_error("mount", "/dev/fuse cannot be opened (%s): mount needs FUSE", strerror(errno));
		return IM_EXIT_UNSUPP;
	}
	if (mount_state_read(mp, &old))
		mount_state_remove(mp);   /* (a mount that ended without cleaning up) */
	if ((mkdir("/run/imager", 0755) < 0 && errno != EEXIST) ||
	    (mkdir(MOUNTS_DIR, 0700) < 0 && errno != EEXIST)) {
		cli_error("mount", "%s: %s (mount keeps its state there: run as root)", MOUNTS_DIR,
			  strerror(errno));
		return IM_EXIT_TARGET;
	}
	mount_state_path(mp, "log", logp, sizeof(logp));
	logfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (logfd < 0 || pipe2(fds, O_CLOEXEC) < 0) {
		cli_error("mount", "%s: %s", logp, strerror(errno));
		return IM_EXIT_IO;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		cli_error("mount", "fork: %s", strerror(errno));
		return IM_EXIT_INTERNAL;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		close(fds[0]);
		setsid();
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(logfd, 2) < 0)
			_exit(IM_EXIT_INTERNAL);
		if (chdir("/") < 0)
			_exit(IM_EXIT_INTERNAL);
		_exit(mount_daemon(adir, mp, part, cache, fds[1], cli));
	}
	close(fds[1]);
	close(logfd);
	char ok;
	ssize_t n;
	do
		n = read(fds[0], &ok, 1);
	while (n < 0 && errno == EINTR);
	close(fds[0]);
	relay_log(mp);
	if (n == 1 && ok == 0) {
		if (truncate(logp, 0) < 0) {
			/* (the notes were shown; an old log is harmless) */
		}
		if (cli->verbose >= 0)
			fprintf(stderr, "imager mount: %s mounted read-only on %s ('imager umount %s' "
				"undoes it)\n", dir, mp, mp);
		return IM_EXIT_OK;
	}
	int status;
	waitpid(pid, &status, 0);
	unlink(logp);
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : IM_EXIT_INTERNAL;
	return rc ? rc : IM_EXIT_INTERNAL;
}

/* Kill pid when it is still the process that started at start. */
