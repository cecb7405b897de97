/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A server run as a child of imager, in a private folder (child.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "util.h"

static void child_exec(const struct child *c, const char *const argv[], unsigned flags, int pipe_end)
{
	char path[600];
	int fd, nul;

	if (flags & CHILD_DIE_WITH_PARENT)
		prctl(PR_SET_PDEATHSIG, SIGTERM);
	else
		setsid();   /* (a server that outlives imager leaves its session) */
	if (flags & CHILD_SHARED)
		umask(0);
	if (path_join(path, sizeof(path), c->dir, "messages") < 0)
		_exit(126);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	nul = open("/dev/null", O_RDONLY);
	if (fd < 0 || nul < 0 ||
	    dup2((flags & CHILD_STDIN_PIPE) ? pipe_end : nul, 0) < 0 ||
	    dup2((flags & CHILD_STDOUT_PIPE) ? pipe_end : fd, 1) < 0 || dup2(fd, 2) < 0)
		_exit(126);
	execvp(argv[0], (char *const *)argv);
	dprintf(2, "%s: cannot start %s: %s\n", argv[0], argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

int child_start(struct child *c, const char *prefix, const char *dir, const char *const argv[],
		unsigned flags, struct im_err *err)
{
	int pfd[2] = { -1, -1 };

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if (dir) {
		str_copy(c->dir, sizeof(c->dir), dir);
	} else {
		FORWARD_ERR(tmp_dir_make(prefix, c->dir, sizeof(c->dir), err));
		c->own_dir = true;
	}
	if ((flags & CHILD_SHARED) && chmod(c->dir, 0711) < 0) {
		int r = -errno;
		im_errf(err, IM_EXIT_IO, r, "%s: %s", c->dir, strerror(-r));
		child_stop(c);
		return r;
	}
	if (path_join(c->sock, sizeof(c->sock), c->dir, "sock") < 0 || strlen(c->sock) >= 100) {
		im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG,
			"%s: the folder's name is too long for a socket (set TMPDIR to a shorter one)",
			c->dir);
		child_stop(c);
		return -ENAMETOOLONG;
	}
	if ((flags & (CHILD_STDIN_PIPE | CHILD_STDOUT_PIPE)) && pipe2(pfd, O_CLOEXEC) < 0) {
		int r = -errno;
		im_errf(err, IM_EXIT_INTERNAL, r, "starting %s: %s", argv[0], strerror(-r));
		child_stop(c);
		return r;
	}
	c->pid = fork();
	if (c->pid < 0) {
		int r = -errno;
		c->pid = 0;
		im_errf(err, IM_EXIT_INTERNAL, r, "starting %s: %s", argv[0], strerror(-r));
		if (pfd[0] >= 0) {
			close(pfd[0]);
			close(pfd[1]);
		}
		child_stop(c);
		return r;
	}
	if (c->pid == 0)   /* (the child's end: read for stdin, write for stdout) */
		child_exec(c, argv, flags, (flags & CHILD_STDIN_PIPE) ? pfd[0] : pfd[1]);
	if (pfd[0] >= 0) {
		c->fd = (flags & CHILD_STDIN_PIPE) ? pfd[1] : pfd[0];
		c->piped = true;
		close((flags & CHILD_STDIN_PIPE) ? pfd[0] : pfd[1]);
	}
	return 0;
}

bool child_reaped(struct child *c, unsigned ms, int *status)
{
	for (unsigned i = 0; c->pid > 0 && i <= ms / 10; i++) {
		if (waitpid(c->pid, status, WNOHANG) == c->pid) {
			c->pid = 0;
			return true;
		}
		util_sleep_ms(10);
	}
	return false;
}

int child_listening(struct child *c, unsigned timeout_s, int *status)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct stat st;
		if (waitpid(c->pid, status, WNOHANG) == c->pid) {
			c->pid = 0;
			return 1;
		}
		if (stat(c->sock, &st) == 0 && S_ISSOCK(st.st_mode))
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= (time_t)timeout_s)
			return -ETIMEDOUT;
		util_sleep_ms(10);
	}
}

void child_messages(const struct child *c, char *out, size_t len)
{
	char path[600];
	ssize_t n = -1;
	int fd;

	out[0] = '\0';
	if (len && path_join(path, sizeof(path), c->dir, "messages") == 0 &&
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, out, len - 1);
		close(fd);
	}
	if (n > 0)
		out[n] = '\0';
}

void child_last_line(const struct child *c, char *out, size_t len)
{
	char path[600], buf[4096];
	ssize_t n = -1;
	int fd;

	out[0] = '\0';
	if (path_join(path, sizeof(path), c->dir, "messages") == 0 &&
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	char *line = strrchr(buf, '\n');
	line = line ? line + 1 : buf;
	for (char *p = line; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	str_copy(out, len, line);
}

void child_stop(struct child *c)
{
	int status;

	if (c->piped) {
		close(c->fd);
		c->fd = -1;
		c->piped = false;
	}
	if (c->pid > 0) {
		kill(c->pid, SIGTERM);
		if (!child_reaped(c, 2000, &status)) {   /* 2 s, then SIGKILL */
			kill(c->pid, SIGKILL);
			waitpid(c->pid, NULL, 0);
			c->pid = 0;
		}
	}
	if (c->dir[0]) {
		char path[600];
		if (c->sock[0])
			unlink(c->sock);
		if (path_join(path, sizeof(path), c->dir, "messages") == 0)
			unlink(path);
		if (c->own_dir)
			rmdir(c->dir);
		c->dir[0] = '\0';
	}
}
