/* SPDX-License-Identifier: GPL-2.0-or-later */
/* raw: a disk image file or a block device, byte for byte. */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imager/backend.h"
#include "util.h"

struct raw_state {
	int fd;
	struct dio dio;           /* writable: big aligned writes go direct */
	enum bk_prealloc prealloc;
	bool created;
	int rfd;                  /* rescue reads: O_DIRECT, opened at first use */
	bool rfd_tried;
};

/* Anything can be raw; this is the lowest positive score. */
static int raw_probe(const unsigned char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return 1;
}

static int raw_open(struct bk *bk, const char *path, unsigned flags, struct im_err *err)
{
	struct raw_state *s = bk->priv;
	struct stat st;
	uint64_t size;
	unsigned lss;
	int r;

	s->fd = open(path, ((flags & BK_OPEN_WRITE) ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (s->fd < 0 && (flags & BK_OPEN_WRITE) &&
	    (errno == EACCES || errno == EPERM || errno == EROFS || errno == ETXTBSY))
		return im_errf(err, IM_EXIT_TARGET, -errno, "%s: cannot write to it: %s", path,
			       strerror(errno));
	if (s->fd < 0)
		return im_errf(err, errno == ENOENT ? IM_EXIT_SOURCE : IM_EXIT_IO, -errno, "%s: %s",
			       path, strerror(errno));
	r = util_fd_geometry(s->fd, &size, &lss);
	if (r < 0) {
		close(s->fd);
		return im_errf(err, IM_EXIT_SOURCE, r, "%s: %s", path,
			       r == -ENOTBLK ? "neither a disk image file nor a block device" : strerror(-r));
	}
	fstat(s->fd, &st);
	bk->is_block_device = S_ISBLK(st.st_mode);
	/* Sources are read in runs of used blocks, and the reader announces
	 * the runs ahead (prefetch): the kernel's own readahead past a run's
	 * end would read free blocks for nothing. */
	if (!(flags & BK_OPEN_WRITE))
		posix_fadvise(s->fd, 0, 0, POSIX_FADV_RANDOM);
	else
		dio_open(&s->dio, path);
	bk->size = size;
	bk->sector_size = lss;
	snprintf(bk->raw_path, sizeof(bk->raw_path), "%s", path);
	return 0;
}

static int write_zero_bufs(int fd, uint64_t off, uint64_t len)
{
	static const unsigned char zeros[1 << 20];

	while (len) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
		int r = util_pwrite_full(fd, zeros, n, off);
		if (r < 0)
			return r;
		off += n;
		len -= n;
	}
	return 0;
}

static int zero_keep_layout(int fd, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;

	while (off < end) {
		off_t data = lseek(fd, (off_t)off, SEEK_DATA), hole;
		uint64_t n;

		if (data < 0 && errno == ENXIO)
			return 0;                    /* holes up to the end of the file */
		if (data < 0)
			return write_zero_bufs(fd, off, end - off);
		if ((uint64_t)data >= end)
			return 0;
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			return write_zero_bufs(fd, (uint64_t)data, end - (uint64_t)data);
		n = ((uint64_t)hole < end ? (uint64_t)hole : end) - (uint64_t)data;
		if (fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, data, (off_t)n) < 0) {
			int r = write_zero_bufs(fd, (uint64_t)data, n);
			if (r < 0)
				return r;
		}
		off = (uint64_t)data + n;
	}
	return 0;
}

static int raw_create(struct bk *bk, const char *path, const struct bk_create_opts *o,
		      struct im_err *err)
{
	struct raw_state *s = bk->priv;
	struct stat st;
	int r = 0;

	if (stat(path, &st) == 0 && S_ISBLK(st.st_mode)) {
		/* A device is used as it is: it must be large enough. */
		r = raw_open(bk, path, BK_OPEN_WRITE, err);
		if (r < 0)
			return r;
		if (bk->size < o->size) {
			dio_close(&s->dio);
			close(s->fd);
			return im_errf(err, IM_EXIT_TARGET, -ENOSPC, "%s is too small: %llu bytes, %llu needed",
				       path, (unsigned long long)bk->size, (unsigned long long)o->size);
		}
		return 0;
	}
	/* metadata: a raw file has none, so it is the same as off. */
	if (o->cluster_size)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL, "--cluster-size applies to qcow2, not raw");
	s->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (s->fd < 0)
		return im_errf(err, IM_EXIT_TARGET, -errno, "cannot create %s: %s", path, strerror(errno));
	s->created = true;
	s->prealloc = o->prealloc;
	if (ftruncate(s->fd, (off_t)o->size) < 0)
		r = -errno;
	if (r == 0 && o->prealloc == BK_PREALLOC_FALLOC && fallocate(s->fd, 0, 0, (off_t)o->size) < 0)
		r = errno == EOPNOTSUPP ? write_zero_bufs(s->fd, 0, o->size) : -errno;
	if (r == 0 && o->prealloc == BK_PREALLOC_FULL)
		r = write_zero_bufs(s->fd, 0, o->size);
	if (r < 0) {
		close(s->fd);
		unlink(path);
		return im_errf(err, r == -ENOSPC ? IM_EXIT_TARGET : IM_EXIT_IO, r,
			       "%s: cannot make it %llu bytes: %s", path,
			       (unsigned long long)o->size, strerror(-r));
	}
	dio_open(&s->dio, path);
	bk->size = o->size;
	bk->sector_size = 512;
	bk->zero_init = true;
	snprintf(bk->raw_path, sizeof(bk->raw_path), "%s", path);
	return 0;
}

static int raw_pread(struct bk *bk, void *buf, size_t len, uint64_t off)
{
	struct raw_state *s = bk->priv;
	return util_pread_full(s->fd, buf, len, off);
}

/* Rescue reads: the sectors asked for, read with O_DIRECT (a buffered
 * read of a block device fails its whole page when one of its sectors is
 * bad) through an aligned buffer; buffered where O_DIRECT is refused. */
static int raw_pread_direct(struct bk *bk, void *buf, size_t len, uint64_t off)
{
	struct raw_state *s = bk->priv;
	uint64_t g = bk->sector_size >= 512 ? bk->sector_size : 512, a, b;
	unsigned char *bounce;
	int r;

	if (!s->rfd_tried) {
		s->rfd_tried = true;
		s->rfd = open(bk->raw_path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	}
	a = off / g * g;
	b = (off + len + g - 1) / g * g;
	if (b > bk->size)
		b = bk->size;
	if (s->rfd < 0 || (b - a) % g || !(bounce = dio_alloc(b - a)))
		return util_pread_full(s->fd, buf, len, off);
	r = util_pread_full(s->rfd, bounce, b - a, a);
	if (r == -EINVAL)   /* refused after all: buffered */
		r = util_pread_full(s->fd, bounce, b - a, a);
	if (r == 0)
		memcpy(buf, bounce + (off - a), len);
	free(bounce);
	return r;
}

static int raw_pwrite(struct bk *bk, const void *buf, size_t len, uint64_t off)
{
	struct raw_state *s = bk->priv;
	return dio_pwrite(&s->dio, s->fd, buf, len, off);
}

static int raw_pwrite_zeroes(struct bk *bk, uint64_t off, uint64_t len)
{
	struct raw_state *s = bk->priv;

	if (bk->is_block_device) {
		uint64_t range[2] = { off, len };
		if (ioctl(s->fd, BLKZEROOUT, range) == 0)
			return 0;
	} else if (!s->created) {
		/* A file that existed (a volume made by libvirt, say): keep its
		 * layout.  Holes already read as zeros; allocated ranges are
		 * zeroed in place and stay allocated. */
		return zero_keep_layout(s->fd, off, len);
	} else {
		/* Keep the allocation the target was created with. */
		int mode = s->prealloc == BK_PREALLOC_OFF || s->prealloc == BK_PREALLOC_METADATA ?
			   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE :
			   FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
		if (fallocate(s->fd, mode, (off_t)off, (off_t)len) == 0)
			return 0;
	}
	return write_zero_bufs(s->fd, off, len);
}

static int raw_block_status(struct bk *bk, uint64_t off, uint64_t len, uint64_t *pnum)
{
	struct raw_state *s = bk->priv;
	off_t data, hole;

	*pnum = len;
	if (bk->is_block_device)
		return BK_STATUS_DATA;
	data = lseek(s->fd, (off_t)off, SEEK_DATA);
	if (data < 0) {
		if (errno == ENXIO)   /* nothing but a hole up to the end */
			return BK_STATUS_ZERO;
		return BK_STATUS_DATA;   /* the filesystem cannot tell: assume data */
	}
	if ((uint64_t)data > off) {
		*pnum = (uint64_t)data - off < len ? (uint64_t)data - off : len;
		return BK_STATUS_ZERO;
	}
	hole = lseek(s->fd, (off_t)off, SEEK_HOLE);
	if (hole > (off_t)off && (uint64_t)hole - off < len)
		*pnum = (uint64_t)hole - off;
	return BK_STATUS_DATA;
}

static void raw_prefetch(struct bk *bk, uint64_t off, uint64_t len)
{
	struct raw_state *s = bk->priv;
	posix_fadvise(s->fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
}

static void raw_drop(struct bk *bk, uint64_t off, uint64_t len)
{
	struct raw_state *s = bk->priv;
	posix_fadvise(s->fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
}

static int raw_flush(struct bk *bk)
{
	struct raw_state *s = bk->priv;
	return fsync(s->fd) < 0 ? -errno : 0;
}

static int raw_close(struct bk *bk)
{
	struct raw_state *s = bk->priv;
	if (bk->is_block_device && bk->writable)
		ioctl(s->fd, BLKRRPART);   /* best effort: have the kernel read the new table */
	dio_close(&s->dio);
	if (s->rfd_tried && s->rfd >= 0)
		close(s->rfd);
	return close(s->fd) < 0 ? -errno : 0;
}

const struct bk_driver bk_raw = {
	.name = "raw",
	.priv_size = sizeof(struct raw_state),
	.probe = raw_probe,
	.create = raw_create,
	.open = raw_open,
	.pread = raw_pread,
	.pread_direct = raw_pread_direct,
	.pwrite = raw_pwrite,
	.pwrite_zeroes = raw_pwrite_zeroes,
	.block_status = raw_block_status,
	.prefetch = raw_prefetch,
	.drop = raw_drop,
	.flush = raw_flush,
	.close = raw_close,
};
