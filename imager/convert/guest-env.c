/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What libguestfs needs before its appliance can start, looked at without
 * starting it: the checks of guest_env_check() (include/imager/guest.h), in
 * the order a launch meets them.  A launch that fails reads best as "what is
 * missing, and the command that fixes it"; libguestfs itself often says only
 * "supermin exited with error status 1".
 */
#include "imager/guest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util.h"

const char *guest_env_need_name(enum guest_env_need n)
{
	switch (n) {
	case GUEST_NEED_NOTHING:   return "nothing";
	case GUEST_NEED_APPLIANCE: return "appliance";
	case GUEST_NEED_SUPERMIN:  return "supermin";
	case GUEST_NEED_KERNEL:    return "kernel";
	case GUEST_NEED_CACHE:     return "cache";
	case GUEST_NEED_TMPDIR:    return "tmpdir";
	case GUEST_NEED_QEMU:      return "qemu";
	}
	return "?";
}

__attribute__((format(printf, 4, 5)))
static void need(struct guest_env *e, enum guest_env_need n, const char *fix, const char *fmt, ...)
{
	va_list ap;

	if (e->need)
		return;   /* the first problem is the one a launch meets */
	e->need = n;
	va_start(ap, fmt);
	vsnprintf(e->problem, sizeof(e->problem), fmt, ap);
	va_end(ap);
	snprintf(e->fix, sizeof(e->fix), "%s", fix);
}

static bool is_dir(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool in_dir(const char *dir, const char *name, bool want_dir)
{
	char p[1200];

	if (path_join(p, sizeof(p), dir, name))
		return false;
	return want_dir ? is_dir(p) : is_file(p);
}

/* The first folder of the colon-separated search path holding an appliance. */
static void find_appliance(struct guest_env *e, const char *search)
{
	const char *s = search && *search ? search : "";

	snprintf(e->path, sizeof(e->path), "%s", s);
	while (*s) {
		size_t len = strcspn(s, ":");
		char dir[1024];

		if (len && len < sizeof(dir)) {
			memcpy(dir, s, len);
			dir[len] = '\0';
			if (in_dir(dir, "supermin.d", true)) {
				snprintf(e->path, sizeof(e->path), "%s", dir);
				return;
			}
			if (in_dir(dir, "kernel", false) && in_dir(dir, "initrd", false) &&
			    in_dir(dir, "root", false)) {
				snprintf(e->path, sizeof(e->path), "%s", dir);
				e->fixed = true;
				return;
			}
		}
		s += len;
		if (*s == ':')
			s++;
	}
	need(e, GUEST_NEED_APPLIANCE,
	     getenv("LIBGUESTFS_PATH")
		     ? "unset LIBGUESTFS_PATH, or point it at a folder holding supermin.d "
		       "(or a fixed appliance: kernel, initrd, root)"
		     : "reinstall libguestfs's appliance files: apt-get install --reinstall libguestfs0",
	     "no libguestfs appliance in %s%s", *e->path ? e->path : "(an empty search path)",
	     getenv("LIBGUESTFS_PATH") ? " (LIBGUESTFS_PATH)" : "");
}


static bool readable(const char *p)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* As supermin looks: /boot/vmlinu[xz]-VERSION (not a Xen or .hmac file),
 * with /lib/modules/VERSION beside it.  Finds the best candidate even when
 * it does not qualify, so that the message can name it. */
static void find_kernel(struct guest_env *e)
{
	const char *forced = getenv("SUPERMIN_KERNEL");
	char unreadable[512] = "", nomodules[512] = "";
	struct dirent *d;
	DIR *dir;

	if (forced && *forced && is_file(forced) && readable(forced)) {
		const char *mods = getenv("SUPERMIN_MODULES");

		snprintf(e->kernel, sizeof(e->kernel), "%s", forced);
		snprintf(e->modules, sizeof(e->modules), "%s", mods && *mods ? mods : "");
		return;
	}
	/* (supermin falls back to /boot when SUPERMIN_KERNEL is unusable) */
	dir = opendir("/boot");
	while (dir && (d = readdir(dir))) {
		const char *ver;
		char k[512], m[512];
		size_t len = strlen(d->d_name);

		if (strncmp(d->d_name, "vmlinuz-", 8) && strncmp(d->d_name, "vmlinux-", 8))
			continue;
		if (strstr(d->d_name, "xen") || (len > 5 && !strcmp(d->d_name + len - 5, ".hmac")))
			continue;
		ver = d->d_name + 8;
		snprintf(k, sizeof(k), "/boot/%s", d->d_name);
		snprintf(m, sizeof(m), "/lib/modules/%s", ver);
		if (!is_file(k))
			continue;
		if (!is_dir(m)) {
			snprintf(nomodules, sizeof(nomodules), "%s", k);
			continue;
		}
		if (!readable(k)) {
			snprintf(unreadable, sizeof(unreadable), "%s", k);
			continue;
		}
		snprintf(e->kernel, sizeof(e->kernel), "%s", k);
		snprintf(e->modules, sizeof(e->modules), "%s", m);
		break;
	}
	if (dir)
		closedir(dir);
	if (e->kernel[0])
		return;
	if (unreadable[0])
		need(e, GUEST_NEED_KERNEL,
		     "run imager as root, or make the kernel readable: chmod 0644 /boot/vmlinuz-*",
		     "libguestfs builds its appliance from this machine's kernel, and %s is "
		     "readable only by root (Debian keeps kernels 0600)", unreadable);
	else if (nomodules[0])
		need(e, GUEST_NEED_KERNEL,
		     "reinstall that kernel (apt-get install --reinstall linux-image-amd64) or "
		     "install linux-image-amd64",
		     "libguestfs builds its appliance from this machine's kernel, and %s has no "
		     "modules in /lib/modules", nomodules);
	else
		need(e, GUEST_NEED_KERNEL, "apt-get install linux-image-amd64",
		     "libguestfs needs a Linux kernel to build its appliance, and /boot holds none");
}

static void check_cache(struct guest_env *e, guestfs_h *g)
{
	char *cachedir = guestfs_get_cachedir(g), appl[1200];
	struct statvfs vfs;
	char have[32], want[32];

	snprintf(e->cachedir, sizeof(e->cachedir), "%s/.guestfs-%ju", cachedir ? cachedir : "/var/tmp",
		 (uintmax_t)geteuid());
	if (snprintf(appl, sizeof(appl), "%s/appliance.d", e->cachedir) < (int)sizeof(appl))
		e->cached = in_dir(appl, "kernel", false) && in_dir(appl, "initrd", false) &&
			    in_dir(appl, "root", false);
	if (cachedir && statvfs(cachedir, &vfs) == 0)
		e->cache_free = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (!e->cached) {
		const char *base = cachedir ? cachedir : "/var/tmp";

		util_human_size(e->cache_free, have, sizeof(have));
		util_human_size(GUEST_APPLIANCE_BYTES, want, sizeof(want));
		if (!is_dir(base) || access(base, W_OK | X_OK))
			need(e, GUEST_NEED_CACHE,
			     "set LIBGUESTFS_CACHEDIR (or TMPDIR) to a writable folder with room",
			     "libguestfs builds its appliance in %s, which is not a writable folder",
			     base);
		else if (e->cache_free < GUEST_APPLIANCE_BYTES)
			need(e, GUEST_NEED_CACHE,
			     "free space there, or set LIBGUESTFS_CACHEDIR to a folder with room",
			     "libguestfs builds its appliance in %s, which has %s free; it needs "
			     "about %s", base, have, want);
	}
	free(cachedir);
}

int guest_env_check(struct guest_env *e, struct im_err *err)
{
	guestfs_h *g = NULL;
	char *s;

	*e = (struct guest_env){ 0 };
	g = guestfs_create_flags(GUESTFS_CREATE_NO_ENVIRONMENT);
	if (!g)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "cannot create a libguestfs handle");
	guestfs_set_error_handler(g, NULL, NULL);
	if (guestfs_parse_environment(g) == -1) {
		int r = im_errf(err, IM_EXIT_USAGE, -EINVAL, "libguestfs environment: %s",
				guestfs_last_error(g) ? guestfs_last_error(g) : "?");
		guestfs_close(g);
		return r;
	}
	find_appliance(e, guestfs_get_path(g));   /* (owned by the handle) */
	if (!e->fixed && !e->need) {
		if (!util_find_program("supermin", e->supermin, sizeof(e->supermin)) &&
		    !util_find_program("/usr/bin/supermin", e->supermin, sizeof(e->supermin)))
			need(e, GUEST_NEED_SUPERMIN, "apt-get install supermin",
			     "libguestfs builds its appliance with supermin, which is not installed");
		find_kernel(e);
	}
	check_cache(e, g);
	if (e->fixed && e->need == GUEST_NEED_CACHE) {
		/* A fixed appliance is not built: the cache does not matter. */
		e->need = GUEST_NEED_NOTHING;
		e->problem[0] = e->fix[0] = '\0';
	}
	s = guestfs_get_tmpdir(g);
	snprintf(e->tmpdir, sizeof(e->tmpdir), "%s", s ? s : "/tmp");
	free(s);
	if (!is_dir(e->tmpdir) || access(e->tmpdir, W_OK | X_OK))
		need(e, GUEST_NEED_TMPDIR, "set TMPDIR (or LIBGUESTFS_TMPDIR) to a writable folder",
		     "libguestfs's temporary folder %s is not a writable folder", e->tmpdir);
	s = guestfs_get_hv(g);
	if (!s || !util_find_program(s, e->qemu, sizeof(e->qemu)))
		need(e, GUEST_NEED_QEMU,
		     getenv("LIBGUESTFS_HV") ? "unset LIBGUESTFS_HV, or point it at qemu-system-x86_64"
					     : "apt-get install qemu-system-x86",
		     "libguestfs runs its appliance with %s, which cannot be run", s ? s : "qemu");
	if (!e->qemu[0] && s)
		snprintf(e->qemu, sizeof(e->qemu), "%s", s);
	free(s);
	guestfs_close(g);
	return 0;
}
