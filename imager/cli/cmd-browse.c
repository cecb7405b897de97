/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * imager ls | cat | get | mount | umount: an image folder's files without
 * a restore.  The folder's disk is served by imager's nbdkit plugin on a
 * socket in a private temporary folder (serve_bg_start), one libguestfs
 * appliance reads it (include/imager/browse.h), and both are stopped at
 * the end whatever happens (nbdkit also gets SIGTERM when imager dies;
 * libguestfs stops its qemu when its process dies).
 *
 * mount: a daemon (a child in a session of its own) keeps nbdkit and the
 * appliance running and serves the FUSE mount (libguestfs's mount_local)
 * until the folder is unmounted; then it stops them, and removes its state
 * file MOUNTS_DIR/HASH.state (HASH: XXH3-64 of the mount point's path),
 * which says what it started (its PID and start time, nbdkit's, the socket,
 * the folders).  umount unmounts, waits for the state file to go (60 s),
 * stops what is left itself, and checks that the socket no longer answers.
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
#include "imager/browse.h"
#include "imager/imgread.h"

#define MOUNTS_DIR "/run/imager/mounts"

/* ---- shared: the folder served, one appliance over it ---- */

struct session {
	struct serve_bg srv;
	struct browse *b;
};

/* The folder checked first, so that its faults get imager's exit codes;
 * a partition number (name: digits) the image does not hold is refused
 * here too (IM_EXIT_USAGE, as serve --partition), before any launch. */
static int check_folder(const char *cmd, const char *dir, const char *name)
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

static int session_open(const char *cmd, const char *dir, const char *name, struct session *s,
			struct cli *cli)
{
	struct im_err err = { 0 };
	int rc;

	memset(s, 0, sizeof(*s));
	if ((rc = check_folder(cmd, dir, name)) != IM_EXIT_OK)
		return rc;
	if ((rc = serve_bg_start(cmd, dir, &s->srv)) != IM_EXIT_OK)
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

static void session_close(struct session *s)
{
	browse_close(s->b);
	s->b = NULL;
	serve_bg_stop(&s->srv);
}

/* "NAME:PATH" into name and path ("/" when empty; a leading / added). */
static int split_spec(const char *cmd, const char *arg, char *name, size_t nlen, char *path,
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
		{ NULL, 0, NULL, 0 },
	};
	struct session s;
	struct im_err err = { 0 };
	char name[160], path[4200], size[32];
	bool lng = false;
	int c, rc;

	while ((c = getopt_long(argc, argv, "l", opts, NULL)) != -1) {
		if (c != 'l')
			return cli_usage("ls", "unknown option");
		lng = true;
	}
	if (argc - optind < 1 || argc - optind > 2)
		return cli_usage("ls", "needs DIR and at most one PARTITION:PATH");
	if (argc - optind == 2 &&
	    (rc = split_spec("ls", argv[optind + 1], name, sizeof(name), path, sizeof(path))) != IM_EXIT_OK)
		return rc;
	if ((rc = session_open("ls", argv[optind], argc - optind == 2 ? name : NULL, &s, cli)) != IM_EXIT_OK)
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
	session_close(&s);
	return cli_finish_stdout("ls", rc);
}

/* ---- cat, get ---- */

int cmd_cat(int argc, char **argv, struct cli *cli)
{
	struct session s;
	struct im_err err = { 0 };
	char name[160], path[4200];
	int rc;

	if (argc > 1 && !strcmp(argv[1], "--"))
		argv++, argc--;
	if (argc != 3 || argv[1][0] == '-')
		return cli_usage("cat", "needs DIR and PARTITION:PATH");
	if ((rc = split_spec("cat", argv[2], name, sizeof(name), path, sizeof(path))) != IM_EXIT_OK)
		return rc;
	if ((rc = session_open("cat", argv[1], name, &s, cli)) != IM_EXIT_OK)
		return rc;
	fflush(stdout);
	if (browse_mount(s.b, name, "/", &err) < 0 || browse_cat(s.b, path, 1, &err) < 0)
		rc = cli_fail("cat", &err);
	session_close(&s);
	return rc;
}

int cmd_get(int argc, char **argv, struct cli *cli)
{
	struct session s;
	struct im_err err = { 0 };
	char name[160], path[4200];
	int rc;

	if (argc != 4 || argv[1][0] == '-')
		return cli_usage("get", "needs DIR, PARTITION:PATH and DEST");
	if ((rc = split_spec("get", argv[2], name, sizeof(name), path, sizeof(path))) != IM_EXIT_OK)
		return rc;
	if ((rc = session_open("get", argv[1], name, &s, cli)) != IM_EXIT_OK)
		return rc;
	if (browse_mount(s.b, name, "/", &err) < 0 || browse_get(s.b, path, argv[3], &err) < 0)
		rc = cli_fail("get", &err);
	else if (cli->verbose >= 0)
		fprintf(stderr, "imager get: %s:%s copied to %s\n", name, path, argv[3]);
	session_close(&s);
	return rc;
}

/* ---- mount, umount ---- */

struct mstate {
	char mountpoint[PATH_MAX], dir[PATH_MAX], sock[108], tmpdir[4096];
	long pid, nbdkit;
	unsigned long long start, nbdkit_start;
};

/* A process's start time (clock ticks since boot), 0 when it is gone. */
static unsigned long long proc_start(long pid)
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
	/* after ") ": state is field 3; starttime is field 22 */
	for (int field = 2; s && field < 22; field++)
		s = strchr(s + 1, ' ');
	if (s)
		v = strtoull(s + 1, NULL, 10);
	return v;
}

/* The mount point's absolute path: realpath, or (a FUSE mount whose
 * server died cannot be resolved) its parent's realpath and its name. */
static int mount_path(const char *cmd, const char *mp, char *out)
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

static void state_path(const char *mp, const char *ext, char *out, size_t len)
{
	snprintf(out, len, "%s/%016llx.%s", MOUNTS_DIR,
		 (unsigned long long)XXH3_64bits(mp, strlen(mp)), ext);
}

static int state_write(const struct mstate *st)
{
	char path[256], tmp[300];
	FILE *f;

	state_path(st->mountpoint, "state", path, sizeof(path));
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
static int state_read(const char *mp, struct mstate *st)
{
	char path[256], line[5000];
	FILE *f;

	memset(st, 0, sizeof(*st));
	state_path(mp, "state", path, sizeof(path));
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

static void state_remove(const char *mp)
{
	char path[256];

	state_path(mp, "state", path, sizeof(path));
	unlink(path);
	state_path(mp, "log", path, sizeof(path));
	unlink(path);
}

/* Whether path is a mount point (its own line in /proc/self/mountinfo). */
static bool is_mounted(const char *path)
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
static int mount_daemon(const char *dir, const char *mp, const char *part, int ready_fd,
			struct cli *cli)
{
	struct daemon_ctx d = { ready_fd };
	struct session s;
	struct mstate st;
	struct im_err err = { 0 };
	size_t mounted = 0;
	int rc;

	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	if ((rc = session_open("mount", dir, NULL, &s, cli)) != IM_EXIT_OK)
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
		snprintf(st.sock, sizeof(st.sock), "%s", s.srv.sock);
		snprintf(st.tmpdir, sizeof(st.tmpdir), "%s", s.srv.tmpdir);
		st.pid = (long)getpid();
		st.start = proc_start(st.pid);
		st.nbdkit = s.srv.pid;
		st.nbdkit_start = proc_start(st.nbdkit);
		if (state_write(&st) < 0) {
			cli_error("mount", "cannot write the state file in %s", MOUNTS_DIR);
			rc = IM_EXIT_IO;
		}
	}
	if (rc == IM_EXIT_OK && browse_fuse(s.b, mp, daemon_ready, &d, &err) < 0)
		rc = cli_fail("mount", &err);
	session_close(&s);
	if (d.ready_fd < 0)   /* it was mounted: what umount waits for */
		state_remove(mp);
	else {
		char path[256];
		state_path(mp, "state", path, sizeof(path));
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

	state_path(mp, "log", path, sizeof(path));
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
	if (is_mounted(mp)) {
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
		{ NULL, 0, NULL, 0 },
	};
	const char *part = NULL;
	char mp[PATH_MAX], adir[PATH_MAX], logp[256];
	struct mstate old;
	int c, rc, fds[2], logfd;
	pid_t pid;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'n')
			return cli_usage("mount", "unknown option");
		part = optarg;
		if (!*part || strchr(part, ':'))
			return cli_usage("mount", "--partition takes a partition number or VG/LV");
	}
	if (argc - optind != 2)
		return cli_usage("mount", "needs DIR and MOUNTPOINT");
	const char *dir = argv[optind];
	if ((rc = check_folder("mount", dir, part)) != IM_EXIT_OK ||
	    (rc = mountpoint_ok(argv[optind + 1])) != IM_EXIT_OK ||
	    (rc = mount_path("mount", argv[optind + 1], mp)) != IM_EXIT_OK)
		return rc;
	if (!realpath(dir, adir)) {
		cli_error("mount", "%s: %s", dir, strerror(errno));
		return IM_EXIT_SOURCE;
	}
	if (access("/dev/fuse", R_OK | W_OK) < 0) {
		cli_error("mount", "/dev/fuse cannot be opened (%s): mount needs FUSE", strerror(errno));
		return IM_EXIT_UNSUPP;
	}
	if (state_read(mp, &old))
		state_remove(mp);   /* (a mount that ended without cleaning up) */
	if ((mkdir("/run/imager", 0755) < 0 && errno != EEXIST) ||
	    (mkdir(MOUNTS_DIR, 0700) < 0 && errno != EEXIST)) {
		cli_error("mount", "%s: %s (mount keeps its state there: run as root)", MOUNTS_DIR,
			  strerror(errno));
		return IM_EXIT_TARGET;
	}
	state_path(mp, "log", logp, sizeof(logp));
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
		_exit(mount_daemon(adir, mp, part, fds[1], cli));
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
static void kill_same(long pid, unsigned long long start, int sig)
{
	if (pid > 0 && start && proc_start(pid) == start)
		kill((pid_t)pid, sig);
}

int cmd_umount(int argc, char **argv, struct cli *cli)
{
	char mp[PATH_MAX];
	struct mstate st;
	int rc;

	if (argc != 2 || argv[1][0] == '-')
		return cli_usage("umount", "needs MOUNTPOINT");
	if ((rc = mount_path("umount", argv[1], mp)) != IM_EXIT_OK)
		return rc;
	if (!state_read(mp, &st)) {
		cli_error("umount", "%s was not mounted by imager mount (no state in %s)", mp,
			  MOUNTS_DIR);
		return IM_EXIT_TARGET;
	}
	if (is_mounted(mp) && umount2(mp, 0) < 0) {
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
	 * state: wait for that (60 s), then stop what is left here. */
	char path[256];
	struct stat sb;
	state_path(mp, "state", path, sizeof(path));
	for (unsigned i = 0; i < 600 && stat(path, &sb) == 0; i++)
		usleep(100000);
	if (stat(path, &sb) == 0) {
		kill_same(st.pid, st.start, SIGTERM);
		kill_same(st.nbdkit, st.nbdkit_start, SIGTERM);
		for (unsigned i = 0; i < 50 && serve_answers(st.sock); i++)
			usleep(100000);
		kill_same(st.nbdkit, st.nbdkit_start, SIGKILL);
		state_remove(mp);
	}
	if (st.sock[0] && serve_answers(st.sock)) {
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
