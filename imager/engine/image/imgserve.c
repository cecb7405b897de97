/* SPDX-License-Identifier: GPL-2.0-or-later */
/* An image folder's export, served by nbdkit with imager's plugin
 * (imgserve.h). */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "imager/imgread.h"
#include "imager/imgserve.h"
#include "util.h"

struct img_server {
	struct child child;
	uint64_t size;
};

int img_plugin_path(char *out, size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/'))) {
			*slash = '\0';
			if (str_printf(out, len, "%s/%s", exe, IMG_PLUGIN) == 0 && access(out, R_OK) == 0)
				return 0;
			if (str_printf(out, len, "%s/../lib/imager/%s", exe, IMG_PLUGIN) == 0 &&
			    access(out, R_OK) == 0)
				return 0;
		}
	}
	if (str_printf(out, len, "/usr/lib/imager/%s", IMG_PLUGIN) < 0)
		return -ENAMETOOLONG;
	return access(out, R_OK) == 0 ? 0 : -ENOENT;
}

/* buf's next string (printf-style), or NULL when buf is full. */
static const char *put(char *buf, size_t len, size_t *used, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static const char *put(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*used >= len)
		return NULL;
	va_start(ap, fmt);
	n = vsnprintf(buf + *used, len - *used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len - *used)
		return NULL;
	const char *s = buf + *used;
	*used += (size_t)n + 1;
	return s;
}

int img_serve_argv(const char *dir, const char *plugin, const char *sock, unsigned port,
		   const struct img_serve_opts *o, const char **argv, char *buf, size_t buflen)
{
	size_t na = 0, used = 0;
	bool ok = true;

	argv[na++] = "nbdkit";
	argv[na++] = "--foreground";
	argv[na++] = "--readonly";
	argv[na++] = "--threads";
	argv[na++] = "1";
	if (sock) {
		argv[na++] = "--unix";
		argv[na++] = sock;
	} else {
		argv[na++] = "--port";
		ok = ok && (argv[na++] = put(buf, buflen, &used, "%u", port ? port : 10809));
	}
	if (o->verbose)
		argv[na++] = "--verbose";
	argv[na++] = plugin;
	ok = ok && (argv[na++] = put(buf, buflen, &used, "dir=%s", dir));
	if (ok && o->partition)
		ok = (argv[na++] = put(buf, buflen, &used, "partition=%u", o->partition)) != NULL;
	if (ok && o->cache_bytes)
		ok = (argv[na++] = put(buf, buflen, &used, "cache=%llu",
				       (unsigned long long)o->cache_bytes)) != NULL;
	if (ok && o->czcache)
		ok = (argv[na++] = put(buf, buflen, &used, "czcache=%s", o->czcache)) != NULL;
	argv[na] = NULL;
	return ok ? 0 : -ENAMETOOLONG;
}

static int checked(const char *dir, const struct img_serve_opts *o, uint64_t *size,
		   struct im_err *err)
{
	struct img_reader_opts ro = { .cache_bytes = o->cache_bytes, .partition = o->partition };
	struct img_reader *rd;

	FORWARD_ERR(img_reader_open(dir, &ro, &rd, err));
	*size = img_reader_size(rd);
	img_reader_close(rd);
	return 0;
}

int img_serve_start(const char *dir, const struct img_serve_opts *o, struct img_server **out,
		    struct im_err *err)
{
	char plugin[PATH_MAX + 64], abs[PATH_MAX], folder[512], sock[600], buf[PATH_MAX + 128];
	const char *argv[IMG_SERVE_ARGC];
	struct img_server *s;
	int r, status;

	*out = NULL;
	if (!(s = calloc(1, sizeof(*s))))
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	if ((r = checked(dir, o, &s->size, err)) < 0)
		goto fail;
	if (img_plugin_path(plugin, sizeof(plugin)) < 0) {
		r = im_errf(err, IM_EXIT_UNSUPP, -ENOENT, "%s not found next to imager, in "
			    "../lib/imager or in /usr/lib/imager", IMG_PLUGIN);
		goto fail;
	}
	if (!realpath(dir, abs)) {
		r = im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", dir, strerror(errno));
		goto fail;
	}
	if ((r = tmp_dir_make("serve", folder, sizeof(folder), err)) < 0)
		goto fail;
	snprintf(sock, sizeof(sock), "%s/sock", folder);
	if (img_serve_argv(abs, plugin, sock, 0, o, argv, buf, sizeof(buf)) < 0) {
		rmdir(folder);
		r = im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: the path is too long", dir);
		goto fail;
	}
	r = child_start(&s->child, NULL, folder, argv, (o->outlive ? 0 : CHILD_DIE_WITH_PARENT) |
			(o->shared ? CHILD_SHARED : 0), err);
	s->child.own_dir = true;
	if (r < 0) {
		rmdir(folder);
		goto fail;
	}
	r = child_listening(&s->child, 30, &status);
	if (r != 0) {
		char line[300];
		child_last_line(&s->child, line, sizeof(line));
		r = im_errf(err, r == 1 && WIFEXITED(status) && WEXITSTATUS(status) == 127
			    ? IM_EXIT_UNSUPP : IM_EXIT_IO, r == 1 ? -EIO : r,
			    r == 1 && WIFEXITED(status) && WEXITSTATUS(status) == 127
			    ? "serving %s needs nbdkit (Debian package nbdkit), which is not installed"
			    : "serving %s: nbdkit %s%s%s", dir,
			    r == 1 ? "stopped" : "did not listen within 30 s", line[0] ? ": " : "",
			    line);
		child_stop(&s->child);
		goto fail;
	}
	/* (nbdkit makes its socket 0755 whatever the umask: connecting needs
	 * write permission) */
	if (o->shared && chmod(s->child.sock, 0777) < 0) {
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", s->child.sock, strerror(errno));
		child_stop(&s->child);
		goto fail;
	}
	*out = s;
	return 0;
fail:
	free(s);
	return r;
}

const char *img_server_socket(const struct img_server *s) { return s->child.sock; }
pid_t img_server_pid(const struct img_server *s) { return s->child.pid; }
uint64_t img_server_size(const struct img_server *s) { return s->size; }

const char *img_server_dir(const struct img_server *s) { return s->child.dir; }

bool img_socket_answers(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, r;

	if (str_copy(a.sun_path, sizeof(a.sun_path), path) < 0)
		return false;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return false;
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	return r == 0;
}

void img_server_stop(struct img_server *s)
{
	if (!s)
		return;
	child_stop(&s->child);
	free(s);
}
