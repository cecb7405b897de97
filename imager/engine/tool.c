/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int tool_run(const char *const argv[], char *out, size_t outlen)
{
	posix_spawn_file_actions_t fa;
	int pipefd[2], status, r;
	size_t have = 0;
	pid_t pid;

	if (outlen)
		out[0] = '\0';
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	r = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (r != 0) {
		close(pipefd[0]);
		return -r;
	}
	for (;;) {
		char buf[4096];
		ssize_t n = read(pipefd[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (!outlen)
			continue;
		/* Keep the tail: the end of a tool's output says why it failed. */
		if ((size_t)n >= outlen - 1) {
			memcpy(out, buf + n - (outlen - 1), outlen - 1);
			have = outlen - 1;
		} else {
			if (have + (size_t)n > outlen - 1) {
				size_t drop = have + (size_t)n - (outlen - 1);
				memmove(out, out + drop, have - drop);
				have -= drop;
			}
			memcpy(out + have, buf, (size_t)n);
			have += (size_t)n;
		}
		out[have] = '\0';
	}
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return -EINTR;
}
