/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libguestfs: handles that never print, the KVM-or-TCG decision, growing
 * ext2/3/4 filesystems.  Contracts in include/imager/guest.h.
 */
#include "imager/guest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* libguestfs reports errno 0 for many failures: those become -EIO. */
static int guest_errno(guestfs_h *g)
{
	int e = g ? guestfs_last_errno(g) : 0;

	return e > 0 ? -e : -EIO;
}

static const char *guest_msg(guestfs_h *g)
{
	const char *m = g ? guestfs_last_error(g) : NULL;

	return m && *m ? m : "unknown libguestfs error";
}

/* Warnings, debug and trace messages go to stderr unless a callback takes
 * them; the engine does not print, so they are dropped here. */
static void swallow_event(guestfs_h *g, void *opaque, uint64_t event, int event_handle,
			  int flags, const char *buf, size_t buf_len, const uint64_t *array,
			  size_t array_len)
{
	(void)g; (void)opaque; (void)event; (void)event_handle; (void)flags;
	(void)buf; (void)buf_len; (void)array; (void)array_len;
}

#define MESSAGE_EVENTS (GUESTFS_EVENT_LIBRARY | GUESTFS_EVENT_APPLIANCE | \
			GUESTFS_EVENT_WARNING | GUESTFS_EVENT_TRACE)

/* A handle configured from the environment that cannot print: the error
 * handler goes before guestfs_parse_environment() so that a bad
 * LIBGUESTFS_* variable is reported through err, not on stderr. */
static int quiet_handle(guestfs_event_callback cb, void *opaque, guestfs_h **out,
			struct im_err *err)
{
	guestfs_h *g = guestfs_create_flags(GUESTFS_CREATE_NO_ENVIRONMENT);

	if (!g)
		return im_errf(err, IM_EXIT_INTERNAL, errno ? -errno : -ENOMEM,
			       "cannot create a libguestfs handle");
	guestfs_set_error_handler(g, NULL, NULL);
	if (guestfs_set_event_callback(g, cb, MESSAGE_EVENTS, 0, opaque) == -1 ||
	    guestfs_parse_environment(g) == -1) {
		int r = im_errf(err, IM_EXIT_USAGE, -EINVAL, "libguestfs environment: %s",
				guest_msg(g));
		guestfs_close(g);
		return r;
	}
	guestfs_set_verbose(g, 0);
	guestfs_set_trace(g, 0);
	if (!getenv("LIBGUESTFS_BACKEND") && guestfs_set_backend(g, "direct") == -1) {
		int r = im_errf(err, IM_EXIT_INTERNAL, guest_errno(g), "libguestfs backend: %s",
				guest_msg(g));
		guestfs_close(g);
		return r;
	}
	*out = g;
	return 0;
}

/* ---- acceleration ---- */

const char *guest_accel_name(enum guest_accel a)
{
	return a == GUEST_ACCEL_KVM ? "kvm" : a == GUEST_ACCEL_TCG ? "tcg" : "?";
}

const char *guest_accel_why_name(enum guest_accel_why w)
{
	switch (w) {
	case GUEST_WHY_ASKED:        return "asked for";
	case GUEST_WHY_LIBGUESTFS:   return "forced by LIBGUESTFS_BACKEND_SETTINGS";
	case GUEST_WHY_NO_KVM:       return "no usable KVM device";
	case GUEST_WHY_CACHED:       return "verdict recorded for this kernel";
	case GUEST_WHY_PROBE_OK:     return "probe: KVM launch succeeded";
	case GUEST_WHY_PROBE_HUNG:   return "probe: KVM launch hung";
	case GUEST_WHY_PROBE_FAILED: return "probe: KVM launch failed";
	}
	return "?";
}

enum accel_mode { MODE_AUTO, MODE_KVM, MODE_TCG };

static int resolve_mode(const char *s, enum accel_mode *mode, struct im_err *err)
{
	if (!s)
		s = getenv("IMAGER_ACCEL");
	if (!s || !*s || !strcmp(s, "auto"))
		*mode = MODE_AUTO;
	else if (!strcmp(s, "kvm"))
		*mode = MODE_KVM;
	else if (!strcmp(s, "tcg"))
		*mode = MODE_TCG;
	else
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "IMAGER_ACCEL=%s: expected kvm, tcg or auto", s);
	return 0;
}

static int cache_path(const struct guest_accel_cfg *cfg, char *buf, size_t len)
{
	const char *s = cfg && cfg->cache_file ? cfg->cache_file : getenv("IMAGER_ACCEL_CACHE");
	int n;

	if (s && *s)
		n = snprintf(buf, len, "%s", s);
	else if (geteuid() == 0) {
		/* Persistent: the verdict holds until the host kernel changes. */
		(void)mkdir("/var/cache/imager", 0755);
		n = snprintf(buf, len, "/var/cache/imager/accel");
	} else if ((s = getenv("XDG_RUNTIME_DIR")) && *s == '/')
		n = snprintf(buf, len, "%s/imager-accel", s);
	else
		n = snprintf(buf, len, "/tmp/imager-accel-%ju", (uintmax_t)geteuid());
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* The file may be anyone's (/tmp): only a regular file of ours (or root's)
 * holding exactly "<release> kvm|tcg\n" for the running kernel counts. */
static bool cache_read(const char *path, const char *release, enum guest_accel *out)
{
	char buf[256], want[sizeof(((struct utsname *)0)->release) + 8];
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return false;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (st.st_uid != geteuid() && st.st_uid != 0)) {
		close(fd);
		return false;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	snprintf(want, sizeof(want), "%s kvm\n", release);
	if (!strcmp(buf, want)) {
		*out = GUEST_ACCEL_KVM;
		return true;
	}
	snprintf(want, sizeof(want), "%s tcg\n", release);
	if (!strcmp(buf, want)) {
		*out = GUEST_ACCEL_TCG;
		return true;
	}
	return false;
}

/* Atomic replace; a failure only means the next run probes again. */
static void cache_write(const char *path, const char *release, enum guest_accel a)
{
	char tmp[4096 + 16], line[sizeof(((struct utsname *)0)->release) + 8];
	int fd, len;

	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return;
	fd = mkstemp(tmp);
	if (fd < 0)
		return;
	len = snprintf(line, sizeof(line), "%s %s\n", release, guest_accel_name(a));
	if (fchmod(fd, 0644) || write(fd, line, len) != len || close(fd)) {
		unlink(tmp);
		return;
	}
	if (rename(tmp, path))
		unlink(tmp);
}

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Probe child: reports the supermin build through the pipe ('b' begin,
 * 'f' finished), so that the parent does not count a first-time appliance
 * build as boot time.  These are libguestfs debug messages (the same in
 * every backend); without them the clock simply runs from the fork. */
struct probe_child {
	int fd;
};

static bool has_text(const char *buf, size_t len, const char *text)
{
	return memmem(buf, len, text, strlen(text)) != NULL;
}

static void probe_event(guestfs_h *g, void *opaque, uint64_t event, int event_handle,
			int flags, const char *buf, size_t buf_len, const uint64_t *array,
			size_t array_len)
{
	struct probe_child *pc = opaque;
	char c = 0;

	(void)g; (void)event_handle; (void)flags; (void)array; (void)array_len;
	if (event != GUESTFS_EVENT_LIBRARY || !buf)
		return;
	if (has_text(buf, buf_len, "begin building supermin appliance"))
		c = 'b';
	else if (has_text(buf, buf_len, "finished building supermin appliance"))
		c = 'f';
	if (c && write(pc->fd, &c, 1) != 1)
		pc->fd = -1;
}

static void ignore_signal(int sig)
{
	(void)sig;
}

#define PROBE_FD 3

static int probe_child_main(void)
{
	struct probe_child pc = { .fd = PROBE_FD };
	struct im_err err = { 0 };
	guestfs_h *g = NULL;
	int r;

	if (quiet_handle(probe_event, &pc, &g, &err) < 0)
		return 3;
	/* The debug messages carry the build markers; the callback keeps
	 * them off stderr (which is /dev/null here anyway). */
	guestfs_set_verbose(g, 1);
	if (guestfs_clear_backend_setting(g, "force_tcg") == -1 ||
	    guestfs_add_drive_scratch(g, 1 << 20, -1) == -1) {
		guestfs_close(g);
		return 3;
	}
	r = guestfs_launch(g);
	if (r == 0)
		r = guestfs_shutdown(g);
	guestfs_close(g);
	return r == 0 ? 0 : 1;
}

/* In the child, before anything else: own process group (the parent kills
 * the group: qemu, supermin, the recovery process), stdio on /dev/null,
 * only the pipe kept, SIGTERM turned into "launch fails, clean up, exit". */
static void probe_child_setup(int wfd)
{
	struct sigaction sa = { .sa_handler = ignore_signal };
	int w = fcntl(wfd, F_DUPFD_CLOEXEC, 10);  /* out of the way of 0-3 */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	setpgid(0, 0);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	dup2(w, PROBE_FD);
	fcntl(PROBE_FD, F_SETFD, FD_CLOEXEC);  /* not for qemu or supermin */
	close_range(PROBE_FD + 1, ~0u, 0);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

#define PROBE_GRACE_SECONDS 5.0

/* SIGKILL every member of process group pgid but its leader, the probe
 * child: with qemu gone its launch fails and it can still remove
 * libguestfs's temporary folders before it exits. */
static void kill_group_but_leader(pid_t pgid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[300], buf[512], state;
		const char *p;
		int fd, ppid, pgrp;
		ssize_t n;
		long pid = strtol(e->d_name, NULL, 10);

		if (pid <= 0 || pid == pgid)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		p = strrchr(buf, ')');  /* the name may hold anything */
		if (p && sscanf(p + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid)
			kill((pid_t)pid, SIGKILL);
	}
	if (d)
		closedir(d);
}

/* Runs the probe; returns the verdict's reason (OK, HUNG or FAILED). */
static enum guest_accel_why run_probe(unsigned seconds, double *elapsed)
{
	double start = now_seconds(), deadline = start + seconds, term_at = 0;
	double cap = start + GUEST_PROBE_MAX_SECONDS;
	int pfd[2], prev_reaper = 0, status = 0;
	bool hung = false, members_killed = false, killed = false;
	pid_t pid;

	*elapsed = 0;
	if (pipe2(pfd, O_CLOEXEC))
		return GUEST_WHY_PROBE_FAILED;
	/* Orphans of the group (qemu, when its parent dies first) come to us
	 * rather than to a PID 1 that may never reap them. */
	(void)prctl(PR_GET_CHILD_SUBREAPER, &prev_reaper, 0, 0, 0);
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		(void)prctl(PR_SET_CHILD_SUBREAPER, prev_reaper, 0, 0, 0);
		return GUEST_WHY_PROBE_FAILED;
	}
	if (pid == 0) {
		close(pfd[0]);
		probe_child_setup(pfd[1]);
		_exit(probe_child_main());
	}
	(void)setpgid(pid, pid);  /* both sides: no window without the group */
	close(pfd[1]);

	for (;;) {
		double now = now_seconds();
		siginfo_t si = { 0 };
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		char c[64];

		/* WNOWAIT: the child stays a zombie, so its pid (the group id)
		 * cannot be reused before the group has been killed. */
		if (waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
			break;
		if (!hung && now >= deadline) {
			hung = true;
			term_at = now;
			kill(-pid, SIGTERM);
		}
		if (hung && !members_killed && now >= term_at + PROBE_GRACE_SECONDS) {
			members_killed = true;
			kill_group_but_leader(pid);
		}
		if (hung && !killed && now >= term_at + 2 * PROBE_GRACE_SECONDS) {
			killed = true;
			kill(-pid, SIGKILL);
		}
		if (killed && now >= term_at + 4 * PROBE_GRACE_SECONDS)
			break;  /* unkillable (D state): reaped below if it ends */
		if (poll(&p, p.fd >= 0 ? 1 : 0, 100) > 0) {
			ssize_t n = read(pfd[0], c, sizeof(c));

			if (n <= 0) {
				close(pfd[0]);
				pfd[0] = -1;
			}
			for (ssize_t i = 0; i < n; i++) {
				double restart = now_seconds() + seconds;

				if (c[i] == 'b')
					deadline = cap;
				else if (c[i] == 'f')
					deadline = restart < cap ? restart : cap;
			}
		}
	}
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (hung)
		kill(-pid, SIGKILL);  /* stragglers that ignored SIGTERM */

	/* Reap the child and every orphan of its group. */
	for (double until = now_seconds() + 3; now_seconds() < until;) {
		int st;
		pid_t r = waitpid(-pid, &st, WNOHANG);

		if (r == pid)
			status = st;
		else if (r < 0 && errno == ECHILD)
			break;
		else if (r == 0)
			usleep(20000);
	}
	(void)prctl(PR_SET_CHILD_SUBREAPER, prev_reaper, 0, 0, 0);
	*elapsed = now_seconds() - start;
	if (hung)
		return GUEST_WHY_PROBE_HUNG;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? GUEST_WHY_PROBE_OK
							     : GUEST_WHY_PROBE_FAILED;
}

int guest_accel_choose(const struct guest_accel_cfg *cfg, struct guest_accel_choice *out,
		       struct im_err *err)
{
	const char *dev = cfg && cfg->kvm_device ? cfg->kvm_device : "/dev/kvm";
	unsigned seconds = cfg && cfg->probe_seconds ? cfg->probe_seconds : GUEST_PROBE_SECONDS;
	enum accel_mode mode;
	struct utsname u;
	char path[4096];
	int fd;

	*out = (struct guest_accel_choice){ GUEST_ACCEL_TCG, GUEST_WHY_ASKED, 0 };
	FORWARD_ERR(resolve_mode(cfg ? cfg->mode : NULL, &mode, err));
	if (mode != MODE_AUTO) {
		out->accel = mode == MODE_KVM ? GUEST_ACCEL_KVM : GUEST_ACCEL_TCG;
		return 0;
	}
	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		out->why = GUEST_WHY_NO_KVM;
		return 0;
	}
	close(fd);
	if (uname(&u) || cache_path(cfg, path, sizeof(path)))
		path[0] = '\0';
	if (path[0] && cache_read(path, u.release, &out->accel)) {
		out->why = GUEST_WHY_CACHED;
		return 0;
	}
	out->why = run_probe(seconds, &out->probe_seconds);
	out->accel = out->why == GUEST_WHY_PROBE_OK ? GUEST_ACCEL_KVM : GUEST_ACCEL_TCG;
	if (path[0] && out->why != GUEST_WHY_PROBE_FAILED)
		cache_write(path, u.release, out->accel);
	return 0;
}

/* ---- handles ---- */

static bool setting_forces_tcg(guestfs_h *g)
{
	char *v = guestfs_get_backend_setting(g, "force_tcg");
	bool yes = v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
			 !strcasecmp(v, "on"));

	free(v);
	return yes;
}

/* The decision a launch on g will follow: libguestfs's own force_tcg wins
 * in auto mode, else guest_accel_choose(). */
static int decide_accel(guestfs_h *g, struct guest_accel_choice *c, struct im_err *err)
{
	enum accel_mode mode;

	FORWARD_ERR(resolve_mode(NULL, &mode, err));
	if (mode == MODE_AUTO && setting_forces_tcg(g)) {
		*c = (struct guest_accel_choice){ GUEST_ACCEL_TCG, GUEST_WHY_LIBGUESTFS, 0 };
		return 0;
	}
	return guest_accel_choose(NULL, c, err);
}

/* ---- the quick kernel (guest.h; guest-kernel.c prepares it) ---- */

static struct guest_quick quick_state;
static bool quick_done;

static bool set_var(const char *name)
{
	const char *v = getenv(name);

	return v && *v;
}

void guest_quick_current(struct guest_quick *q)
{
	struct guest_env env;
	struct im_err e = { 0 };
	const char *off = getenv("IMAGER_QUICK_KERNEL");
	char base[1024], *slash;

	if (quick_done) {
		*q = quick_state;
		return;
	}
	quick_done = true;
	quick_state = (struct guest_quick){ 0 };
	if (off && !strcmp(off, "0")) {
		snprintf(quick_state.why, sizeof(quick_state.why), "IMAGER_QUICK_KERNEL=0");
	} else if (set_var("SUPERMIN_KERNEL") || set_var("LIBGUESTFS_CACHEDIR") ||
		   set_var("LIBGUESTFS_PATH")) {
		snprintf(quick_state.why, sizeof(quick_state.why),
			 "SUPERMIN_KERNEL, LIBGUESTFS_CACHEDIR or LIBGUESTFS_PATH is set: "
			 "libguestfs's appliance as set");
	} else if (guest_env_check(&env, &e) < 0) {
		snprintf(quick_state.why, sizeof(quick_state.why), "%s", e.msg);
	} else {
		/* env.cachedir is libguestfs's CACHEDIR/.guestfs-UID */
		snprintf(base, sizeof(base), "%s", env.cachedir);
		slash = strrchr(base, '/');
		if (slash && slash != base)
			*slash = '\0';
		if (guest_quick_prepare(&env, base, &quick_state) == 0 &&
		    (setenv("SUPERMIN_KERNEL", quick_state.vmlinux, 1) ||
		     setenv("SUPERMIN_MODULES", quick_state.modules, 1) ||
		     setenv("SUPERMIN_KERNEL_VERSION", quick_state.version, 1) ||
		     setenv("LIBGUESTFS_CACHEDIR", quick_state.cachedir, 1))) {
			quick_state.on = false;
			snprintf(quick_state.why, sizeof(quick_state.why),
				 "cannot set the environment");
		}
	}
	*q = quick_state;
}

static int apply_accel(guestfs_h *g, struct im_err *err)
{
	struct guest_accel_choice c;
	struct guest_quick q;
	int r;

	FORWARD_ERR(decide_accel(g, &c, err));
	if (c.accel == GUEST_ACCEL_TCG) {
		guest_quick_current(&q);
		if (q.on && guestfs_set_cachedir(g, q.cachedir) == -1)
			return im_errf(err, IM_EXIT_INTERNAL, guest_errno(g), "libguestfs: %s",
				       guest_msg(g));
	}
	if (c.why == GUEST_WHY_LIBGUESTFS)
		return 0;
	if (c.accel == GUEST_ACCEL_TCG)
		r = guestfs_set_backend_setting(g, "force_tcg", "1");
	else
		r = guestfs_clear_backend_setting(g, "force_tcg");
	if (r == -1)
		return im_errf(err, IM_EXIT_INTERNAL, guest_errno(g), "libguestfs: %s",
			       guest_msg(g));
	return 0;
}

int guest_accel_current(struct guest_accel_choice *out, struct im_err *err)
{
	guestfs_h *g = NULL;
	int r;

	FORWARD_ERR(quiet_handle(swallow_event, NULL, &g, err));
	r = decide_accel(g, out, err);
	guestfs_close(g);
	return r;
}

/* The launch failed: say what stands in the way, and what to do, with
 * libguestfs's words as the detail. */
static int launch_failed(guestfs_h *g, struct im_err *err)
{
	struct guest_env env;
	struct im_err ignored = { 0 };
	char detail[600];

	snprintf(detail, sizeof(detail), "%s", guest_msg(g));
	/* libguestfs appends a page of debugging advice: keep its first line. */
	detail[strcspn(detail, "\n")] = '\0';
	if (guest_env_check(&env, &ignored) == 0 && env.need)
		return im_errf(err, IM_EXIT_APPLIANCE, -EIO,
			       "the libguestfs appliance cannot start: %s. Fix: %s "
			       "(libguestfs: %s)", env.problem, env.fix, detail);
	return im_errf(err, IM_EXIT_APPLIANCE, -EIO,
		       "the libguestfs appliance did not start (libguestfs: %s). 'imager "
		       "appliance' checks what it needs; 'libguestfs-test-tool' shows its full log",
		       detail);
}

/* The end of every open: (r still 0) the acceleration, the memory, the
 * launch; the handle into *out, or closed on a failure (r returned). */
static int launch_handle(guestfs_h *g, int r, int memsize_mb, guestfs_h **out,
			 struct im_err *err)
{
	if (r == 0)
		r = apply_accel(g, err);
	if (r == 0 && memsize_mb > 0 && guestfs_get_memsize(g) < memsize_mb &&
	    guestfs_set_memsize(g, memsize_mb) == -1)
		r = im_errf(err, IM_EXIT_USAGE, -EINVAL, "the appliance's memory: %s", guest_msg(g));
	if (r == 0 && guestfs_launch(g) == -1)
		r = launch_failed(g, err);
	if (r < 0) {
		guestfs_close(g);
		return r;
	}
	*out = g;
	return 0;
}

int guest_open(const char *const *disks, const char *const *formats, size_t n, bool readonly,
	       int memsize_mb, guestfs_h **out, struct im_err *err)
{
	guestfs_h *g = NULL;
	int r;

	*out = NULL;
	RETURN_IF(!disks || !formats || n == 0, err, IM_EXIT_INTERNAL, -EINVAL,
		  "guest_open: no disks");
	for (size_t i = 0; i < n; i++)
		RETURN_IF(!disks[i] || !formats[i] || !*formats[i], err, IM_EXIT_USAGE, -EINVAL,
			  "%s: the image format must be given", disks[i] ? disks[i] : "disk");
	FORWARD_ERR(quiet_handle(swallow_event, NULL, &g, err));
	r = 0;
	/* Drives first: a missing file is reported before any probe. */
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (guestfs_add_drive_opts(g, disks[i],
					   GUESTFS_ADD_DRIVE_OPTS_FORMAT, formats[i],
					   GUESTFS_ADD_DRIVE_OPTS_READONLY, (int)readonly,
					   -1) == -1)
			r = im_errf(err, IM_EXIT_TARGET, guest_errno(g), "%s: %s", disks[i],
				    guest_msg(g));
	}
	return launch_handle(g, r, memsize_mb, out, err);
}

int guest_open_nbd(const char *socket, guestfs_h **out, struct im_err *err)
{
	guestfs_h *g = NULL;
	char server[700];
	const char *servers[] = { server, NULL };
	int r = 0;

	*out = NULL;
	RETURN_IF(strlen(socket) >= sizeof(server) - 6, err, IM_EXIT_USAGE, -ENAMETOOLONG,
		  "%s: the socket's path is too long", socket);
	snprintf(server, sizeof(server), "unix:%s", socket);
	FORWARD_ERR(quiet_handle(swallow_event, NULL, &g, err));
	if (guestfs_add_drive_opts(g, "", GUESTFS_ADD_DRIVE_OPTS_FORMAT, "raw",
				   GUESTFS_ADD_DRIVE_OPTS_READONLY, 1,
				   GUESTFS_ADD_DRIVE_OPTS_PROTOCOL, "nbd",
				   GUESTFS_ADD_DRIVE_OPTS_SERVER, servers, -1) == -1)
		r = im_errf(err, IM_EXIT_SOURCE, guest_errno(g), "nbd+unix:///?socket=%s: %s",
			    socket, guest_msg(g));
	return launch_handle(g, r, 0, out, err);
}

int guest_launch_test(double *seconds, struct im_err *err)
{
	double start = now_seconds();
	guestfs_h *g = NULL;
	int r;

	*seconds = 0;
	FORWARD_ERR(quiet_handle(swallow_event, NULL, &g, err));
	if (guestfs_add_drive_scratch(g, 1 << 20, -1) == -1)
		r = im_errf(err, IM_EXIT_INTERNAL, guest_errno(g), "libguestfs: %s", guest_msg(g));
	else
		r = apply_accel(g, err);
	if (r == 0 && guestfs_launch(g) == -1)
		r = launch_failed(g, err);
	if (r == 0 && guestfs_shutdown(g) == -1)
		r = im_errf(err, IM_EXIT_APPLIANCE, guest_errno(g),
			    "the appliance started but did not shut down cleanly: %s", guest_msg(g));
	guestfs_close(g);
	*seconds = now_seconds() - start;
	return r;
}

void guest_lib_version(char *buf, size_t n)
{
	guestfs_h *g = guestfs_create_flags(GUESTFS_CREATE_NO_ENVIRONMENT);
	struct guestfs_version *v = NULL;

	if (n)
		buf[0] = '\0';
	if (!g)
		return;
	guestfs_set_error_handler(g, NULL, NULL);
	v = guestfs_version(g);
	if (v)
		snprintf(buf, n, "%lld.%lld.%lld%s", (long long)v->major, (long long)v->minor,
			 (long long)v->release, v->extra ? v->extra : "");
	guestfs_free_version(v);
	guestfs_close(g);
}

void guest_close(guestfs_h *g)
{
	if (!g)
		return;
	(void)guestfs_shutdown(g);
	guestfs_close(g);
}

/* ---- ext2/3/4 ---- */

int guest_grow_ext(guestfs_h *g, const char *dev, struct im_err *err)
{
	if (guestfs_e2fsck(g, dev, GUESTFS_E2FSCK_CORRECT, 1, -1) == -1)
		return im_errf(err, IM_EXIT_FSCK, -EUCLEAN,
			       "%s: e2fsck -f -p found problems it may not fix alone: %s",
			       dev, guest_msg(g));
	if (guestfs_resize2fs(g, dev) == -1)
		return im_errf(err, IM_EXIT_IO, guest_errno(g), "%s: resize2fs: %s", dev,
			       guest_msg(g));
	return 0;
}

/* Block count x block size from tune2fs -l; 0 when unreadable. */
static uint64_t ext_bytes(guestfs_h *g, const char *dev)
{
	char **kv = guestfs_tune2fs_l(g, dev);
	uint64_t count = 0, bsize = 0;

	if (!kv)
		return 0;
	for (size_t i = 0; kv[i] && kv[i + 1]; i += 2) {
		if (!strcmp(kv[i], "Block count"))
			count = strtoull(kv[i + 1], NULL, 10);
		else if (!strcmp(kv[i], "Block size"))
			bsize = strtoull(kv[i + 1], NULL, 10);
	}
	for (size_t i = 0; kv[i]; i++)
		free(kv[i]);
	free(kv);
	return count <= UINT64_MAX / (bsize ? bsize : 1) ? count * bsize : 0;
}

static bool is_ext(const char *t)
{
	return !strcmp(t, "ext2") || !strcmp(t, "ext3") || !strcmp(t, "ext4");
}

static void free_strings(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int check_partitions(guestfs_h *g, const char *disk, const unsigned *numbers,
			    size_t n, struct im_err *err)
{
	char **parts = guestfs_list_partitions(g);

	if (!parts)
		return im_errf(err, IM_EXIT_IO, guest_errno(g), "%s: listing partitions: %s",
			       disk, guest_msg(g));
	for (size_t i = 0; i < n; i++) {
		char dev[32];
		bool found = false;

		snprintf(dev, sizeof(dev), "/dev/sda%u", numbers[i]);
		for (size_t j = 0; parts[j] && !found; j++)
			found = !strcmp(parts[j], dev);
		if (!found) {
			free_strings(parts);
			return im_errf(err, IM_EXIT_TARGET, -ENOENT, "%s: no partition %u",
				       disk, numbers[i]);
		}
	}
	free_strings(parts);
	return 0;
}

/* XFS and btrfs grow while mounted: at the appliance's /, then unmounted. */
static int grow_mounted(guestfs_h *g, const char *dev, const char *type, struct im_err *err)
{
	int r;

	if (guestfs_mount(g, dev, "/") == -1)
		return im_errf(err, IM_EXIT_IO, guest_errno(g), "%s: mounting it to grow it: %s", dev,
			       guest_msg(g));
	if (!strcmp(type, "xfs"))
		r = guestfs_xfs_growfs(g, "/", -1);
	else
		r = guestfs_btrfs_filesystem_resize(g, "/", -1);
	if (r == -1)
		r = im_errf(err, IM_EXIT_IO, guest_errno(g), "%s: growing the %s: %s", dev, type,
			    guest_msg(g));
	if (guestfs_umount_all(g) == -1 && r == 0)
		r = im_errf(err, IM_EXIT_IO, guest_errno(g), "%s: unmounting it: %s", dev, guest_msg(g));
	return r < 0 ? r : 0;
}

/* The filesystem on dev (a partition, or an LV), grown by its kind; false in
 * *grown for kinds that are not grown. */
static int grow_fs(guestfs_h *g, const char *dev, const char *type, bool *grown,
		   struct im_err *err)
{
	*grown = false;
	if (is_ext(type)) {
		FORWARD_ERR(guest_grow_ext(g, dev, err));
	} else if (!strcmp(type, "ntfs")) {
		if (guestfs_ntfsresize_opts(g, dev, GUESTFS_NTFSRESIZE_OPTS_FORCE, 1, -1) == -1)
			return im_errf(err, IM_EXIT_IO, guest_errno(g), "%s: ntfsresize: %s", dev,
				       guest_msg(g));
	} else if (!strcmp(type, "xfs") || !strcmp(type, "btrfs")) {
		FORWARD_ERR(grow_mounted(g, dev, type, err));
	} else {
		return 0;
	}
	*grown = true;
	return 0;
}

/* A PV: pvresize, then the last LV over every free extent, and its filesystem. */
static int grow_pv(guestfs_h *g, const char *dev, const char *lv, struct im_err *err)
{
	char path[200], *type;
	bool grown;
	int r;

	if (guestfs_pvresize(g, dev) == -1)
		return im_errf(err, IM_EXIT_IO, guest_errno(g), "%s: pvresize: %s", dev, guest_msg(g));
	if (!lv)
		return 0;
	if (snprintf(path, sizeof(path), "/dev/%s", lv) >= (int)sizeof(path) || strstr(lv, ".."))
		return im_errf(err, IM_EXIT_INTERNAL, -EINVAL, "%s: a bad LV name", lv);
	if (guestfs_lvresize_free(g, path, 100) == -1)
		return im_errf(err, IM_EXIT_IO, guest_errno(g), "%s: extending it: %s", path,
			       guest_msg(g));
	type = guestfs_vfs_type(g, path);
	if (!type)
		return im_errf(err, IM_EXIT_IO, guest_errno(g), "%s: reading its type: %s", path,
			       guest_msg(g));
	r = grow_fs(g, path, type, &grown, err);
	free(type);
	return r;
}

static int grow_one(guestfs_h *g, unsigned number, const char *last_lv,
		    struct guest_grow_result *res, struct im_err *err)
{
	char dev[32], *type;
	bool grown = false;

	snprintf(dev, sizeof(dev), "/dev/sda%u", number);
	type = guestfs_vfs_type(g, dev);
	if (!type)
		return im_errf(err, IM_EXIT_IO, guest_errno(g), "reading its type: %s",
			       guest_msg(g));
	snprintf(res->fstype, sizeof(res->fstype), "%s", type);
	free(type);
	if (is_ext(res->fstype))
		res->bytes_before = ext_bytes(g, dev);
	if (!strcmp(res->fstype, "LVM2_member")) {
		FORWARD_ERR(grow_pv(g, dev, last_lv, err));
		grown = true;
	} else {
		FORWARD_ERR(grow_fs(g, dev, res->fstype, &grown, err));
	}
	res->grown = grown;
	if (is_ext(res->fstype))
		res->bytes_after = ext_bytes(g, dev);
	return 0;
}

/* qemu flushes on exit; this makes "on the disk" not depend on it. */
static int sync_file(const char *path, struct im_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;  /* not a local file: nothing we can add */
	if (fsync(fd) && errno != EINVAL) {
		int e = errno;
		close(fd);
		return im_errf(err, IM_EXIT_IO, -e, "%s: fsync: %s", path, strerror(e));
	}
	close(fd);
	return 0;
}

int guest_grow_partitions(const char *disk, const char *format, const unsigned *numbers,
			  const char *const *last_lvs, size_t n, struct guest_grow_result *results,
			  struct im_err *err)
{
	guestfs_h *g;
	int r;

	for (size_t i = 0; results && i < n; i++)
		results[i] = (struct guest_grow_result){ .number = numbers[i] };
	if (n == 0)
		return 0;
	FORWARD_ERR(guest_open(&disk, &format, 1, false, 0, &g, err));
	r = check_partitions(g, disk, numbers, n, err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct guest_grow_result tmp = { .number = numbers[i] };

		r = grow_one(g, numbers[i], last_lvs ? last_lvs[i] : NULL,
			     results ? &results[i] : &tmp, err);
		if (r < 0)
			im_err_prefix(err, "%s partition %u: ", disk, numbers[i]);
	}
	if (guestfs_shutdown(g) == -1 && r == 0)
		r = im_errf(err, IM_EXIT_IO, guest_errno(g),
			    "%s: the appliance did not shut down cleanly, writes may be lost: %s",
			    disk, guest_msg(g));
	guestfs_close(g);
	if (r == 0)
		r = sync_file(disk, err);
	return r;
}
