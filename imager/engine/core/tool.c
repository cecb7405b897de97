/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

extern char **environ;

/* Where one output stream of the tool goes: its tail, NUL-ended. */
struct sink {
	char *buf;
	size_t len, have;
	int fd;                   /* the pipe's read end, -1 once at its end */
};

static void sink_put(struct sink *s, const char *p, size_t n)
{
	if (!s->len)
		return;
	/* Keep the tail: the end of a tool's output says why it failed. */
	if (n >= s->len - 1) {
		memcpy(s->buf, p + n - (s->len - 1), s->len - 1);
		s->have = s->len - 1;
	} else {
		if (s->have + n > s->len - 1) {
			size_t drop = s->have + n - (s->len - 1);
			memmove(s->buf, s->buf + drop, s->have - drop);
			s->have -= drop;
		}
		memcpy(s->buf + s->have, p, n);
		s->have += n;
	}
	s->buf[s->have] = '\0';
}

/* Run argv with stdout into out and stderr into errs (NULL: into out too),
 * reading both until they end, or until seconds have passed (0: no limit):
 * then the tool is killed and -ETIMEDOUT returned. */
static int run(const char *const argv[], struct sink *out, struct sink *errs, unsigned seconds)
{
	posix_spawn_file_actions_t fa;
	int opipe[2], epipe[2] = { -1, -1 }, status, r;
	long long deadline = seconds ? util_mono_ms() + (long long)seconds * 1000 : 0;
	bool timed_out = false;
	pid_t pid;

	if (pipe2(opipe, O_CLOEXEC) < 0)
		return -errno;
	if (errs && pipe2(epipe, O_CLOEXEC) < 0) {
		r = -errno;
		close(opipe[0]);
		close(opipe[1]);
		return r;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, opipe[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errs ? epipe[1] : opipe[1], 2);
	r = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(opipe[1]);
	if (errs)
		close(epipe[1]);
	out->fd = opipe[0];
	if (errs)
		errs->fd = epipe[0];
	if (r != 0) {
		close(opipe[0]);
		if (errs)
			close(epipe[0]);
		return -r;
	}
	while (out->fd >= 0 || (errs && errs->fd >= 0)) {
		struct pollfd pf[2];
		struct sink *who[2];
		int n = 0, wait_ms = -1;

		if (out->fd >= 0) {
			pf[n] = (struct pollfd){ .fd = out->fd, .events = POLLIN };
			who[n++] = out;
		}
		if (errs && errs->fd >= 0) {
			pf[n] = (struct pollfd){ .fd = errs->fd, .events = POLLIN };
			who[n++] = errs;
		}
		if (deadline) {
			long long left = deadline - util_mono_ms();
			if (left <= 0) {
				timed_out = true;
				break;
			}
			wait_ms = left > 60000 ? 60000 : (int)left;
		}
		r = poll(pf, (nfds_t)n, wait_ms);
		if (r < 0 && errno != EINTR)
			break;
		for (int i = 0; r > 0 && i < n; i++) {
			char buf[4096];
			ssize_t got;

			if (!pf[i].revents)
				continue;
			got = read(pf[i].fd, buf, sizeof(buf));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				close(who[i]->fd);
				who[i]->fd = -1;
				continue;
			}
			sink_put(who[i], buf, (size_t)got);
		}
	}
	if (out->fd >= 0)
		close(out->fd);
	if (errs && errs->fd >= 0)
		close(errs->fd);
	/* (a tool stuck in a read of a failing disk dies when the read
	 * returns: the wait below lasts until then) */
	if (timed_out)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (timed_out)
		return -ETIMEDOUT;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return -EINTR;
}

int tool_run(const char *const argv[], char *out, size_t outlen)
{
	struct sink o = { .buf = out, .len = outlen };

	if (outlen)
		out[0] = '\0';
	return run(argv, &o, NULL, 0);
}

int tool_run_timed(const char *const argv[], char *out, size_t outlen, char *errs,
		   size_t errlen, unsigned seconds)
{
	struct sink o = { .buf = out, .len = outlen }, e = { .buf = errs, .len = errlen };

	if (outlen)
		out[0] = '\0';
	if (errlen)
		errs[0] = '\0';
	return run(argv, &o, &e, seconds);
}
