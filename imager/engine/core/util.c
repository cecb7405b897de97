/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int util_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

int util_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENOSPC;
		done += (size_t)n;
	}
	return 0;
}

#define DIO_ALIGN 4096u
#define HUGE_BYTES (2u << 20)   /* a transparent huge page */
#define DIO_MIN (64u << 10)
#define DIO_BOUNCE (1u << 20)

void dio_open(struct dio *d, const char *path)
{
	d->bounce = NULL;
	d->fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
	d->on = d->fd >= 0;
}

void dio_close(struct dio *d)
{
	if (d->on)
		close(d->fd);
	d->on = false;
	d->fd = -1;
	free(d->bounce);
	d->bounce = NULL;
}

void *dio_alloc(size_t len)
{
	void *p = NULL;
	bool huge = len >= HUGE_BYTES;

	if (posix_memalign(&p, huge ? HUGE_BYTES : DIO_ALIGN, len ? len : 1) != 0)
		return NULL;
	if (huge)
		madvise(p, len & ~(size_t)(HUGE_BYTES - 1), MADV_HUGEPAGE);
	return p;
}

/* The aligned middle: straight from buf when it is aligned, else through
 * the bounce buffer.  -EINVAL: the descriptor refused (caller falls back). */
static int dio_middle(struct dio *d, const unsigned char *buf, size_t len, uint64_t off)
{
	if (((uintptr_t)buf & (DIO_ALIGN - 1)) == 0)
		return util_pwrite_full(d->fd, buf, len, off);
	if (!d->bounce && !(d->bounce = dio_alloc(DIO_BOUNCE)))
		return -EINVAL;
	for (size_t done = 0; done < len;) {
		size_t n = len - done < DIO_BOUNCE ? len - done : DIO_BOUNCE;
		int r;
		memcpy(d->bounce, buf + done, n);
		if ((r = util_pwrite_full(d->fd, d->bounce, n, off + done)) < 0)
			return r;
		done += n;
	}
	return 0;
}

int dio_pwrite(struct dio *d, int fd, const void *buf, size_t len, uint64_t off)
{
	const unsigned char *p = buf;
	size_t head, mid;
	int r;

	if (!d->on || len < DIO_MIN)
		return util_pwrite_full(fd, buf, len, off);
	head = (size_t)((DIO_ALIGN - off % DIO_ALIGN) % DIO_ALIGN);
	mid = (len - head) & ~(size_t)(DIO_ALIGN - 1);
	if (head && (r = util_pwrite_full(fd, p, head, off)) < 0)
		return r;
	r = dio_middle(d, p + head, mid, off + head);
	if (r == -EINVAL) {
		/* (A device with larger logical blocks, a file system that
		 * takes the open but not the write.) */
		dio_close(d);
		r = util_pwrite_full(fd, p + head, mid, off + head);
	}
	if (r < 0)
		return r;
	if (len - head - mid)
		r = util_pwrite_full(fd, p + head + mid, len - head - mid, off + head + mid);
	return r;
}

void util_write_behind(int fd, uint64_t *started, uint64_t end)
{
	if (end < *started || end - *started < WRITE_BEHIND)
		return;
	sync_file_range(fd, (off_t)*started, (off_t)(end - *started), SYNC_FILE_RANGE_WRITE);
	*started = end;
}

long long util_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int util_write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, (const char *)buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENOSPC;
		done += (size_t)n;
	}
	return 0;
}

int util_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

int str_printf(char *out, size_t outlen, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, outlen, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int str_copy(char *out, size_t outlen, const char *s)
{
	return str_printf(out, outlen, "%s", s);
}

int path_join(char *out, size_t outlen, const char *dir, const char *name)
{
	return str_printf(out, outlen, "%s/%s", dir, name);
}

int path_join_err(char *out, size_t outlen, const char *dir, const char *name,
		  struct im_err *err)
{
	if (path_join(out, outlen, dir, name) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG,
			       "%s/%s: path too long (imager takes up to %zu bytes)", dir, name,
			       outlen - 1);
	return 0;
}

const char *tmp_base(void)
{
	const char *t = getenv("TMPDIR");

	return t && *t ? t : "/var/tmp";
}

/* BASE/imager-PREFIX-XXXXXX into out, for mkdtemp or mkstemp. */
static int tmp_name(const char *prefix, const char *what, char *out, size_t len,
		    struct im_err *err)
{
	const char *base = tmp_base();
	int n = snprintf(out, len, "%s/imager-%s-XXXXXX", base, prefix);

	if (n < 0 || (size_t)n >= len)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG,
			       "TMPDIR %s: too long for a temporary %s's name", base, what);
	return 0;
}

static int tmp_fail(const char *what, struct im_err *err)
{
	int r = -errno;

	return im_errf(err, IM_EXIT_IO, r, "a temporary %s in %s (TMPDIR): %s", what, tmp_base(),
		       strerror(-r));
}

int tmp_dir_make(const char *prefix, char *out, size_t len, struct im_err *err)
{
	int r = tmp_name(prefix, "folder", out, len, err);

	if (r == 0 && !mkdtemp(out))
		r = tmp_fail("folder", err);
	return r;
}

int tmp_file_name(const char *prefix, char *out, size_t len, struct im_err *err)
{
	int fd, r = tmp_name(prefix, "file", out, len, err);

	if (r < 0)
		return r;
	if ((fd = mkstemp(out)) < 0)
		return tmp_fail("file", err);
	close(fd);
	unlink(out);
	return 0;
}

int util_write_file_atomic(const char *path, const void *buf, size_t len)
{
	char tmp[4096], dir[4096];
	char *slash;
	int fd, r;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	r = util_write_full(fd, buf, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		strcpy(dir, ".");
	return util_fsync_dir(dir);
}

int util_read_whole_file(const char *path, unsigned char **buf, size_t *len, uint64_t max)
{
	struct stat st;
	unsigned char *b;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		r = S_ISREG(st.st_mode) ? -errno : -EINVAL;
		close(fd);
		return r;
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return -EFBIG;
	}
	b = malloc((size_t)st.st_size + 1);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	r = util_pread_full(fd, b, (size_t)st.st_size, 0);
	close(fd);
	if (r < 0) {
		free(b);
		return r;
	}
	b[st.st_size] = '\0';
	*buf = b;
	*len = (size_t)st.st_size;
	return 0;
}

int util_buf_is_zero(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	const uint64_t *w;
	size_t n;

	while (len && ((uintptr_t)p & 7)) {
		if (*p++)
			return 0;
		len--;
	}
	w = (const uint64_t *)(const void *)p;
	for (n = len / 8; n >= 4; n -= 4, w += 4)
		if (w[0] | w[1] | w[2] | w[3])
			return 0;
	for (; n; n--, w++)
		if (*w)
			return 0;
	p = (const unsigned char *)w;
	for (len &= 7; len; len--)
		if (*p++)
			return 0;
	return 1;
}

int util_fd_geometry(int fd, uint64_t *size, unsigned *lss)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		unsigned long long bytes;
		int ss = 512;
		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
			return -errno;
		if (ioctl(fd, BLKSSZGET, &ss) < 0 || ss < 512)
			ss = 512;
		*size = bytes;
		*lss = (unsigned)ss;
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return -ENOTBLK;
	*size = (uint64_t)st.st_size;
	*lss = 512;
	return 0;
}

void util_human_size(uint64_t bytes, char *out, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	size_t u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(out, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

void util_slot_vprintf(char *slots, size_t n, size_t len, const char *fmt, va_list ap)
{
	for (size_t i = 0; i < n; i++, slots += len) {
		if (slots[0])
			continue;
		vsnprintf(slots, len, fmt, ap);
		return;
	}
}

int util_mkdir_p(const char *path)
{
	char p[4200];

	if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

void util_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000 * 1000 };
	nanosleep(&ts, NULL);
}

static bool is_regular(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

bool util_find_program(const char *prog, char *out, size_t len)
{
	const char *path = getenv("PATH");

	if (strchr(prog, '/'))
		return str_copy(out, len, prog) == 0 && access(prog, X_OK) == 0 && is_regular(prog);
	if (!path || !*path)
		path = "/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		char p[1200];

		if (n && n < 512 && str_printf(p, sizeof(p), "%.*s/%s", (int)n, path, prog) == 0 &&
		    access(p, X_OK) == 0 && is_regular(p) && str_copy(out, len, p) == 0)
			return true;
		path += n;
		if (*path == ':')
			path++;
	}
	return false;
}
