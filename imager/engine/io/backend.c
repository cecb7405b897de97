/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The container framework: choosing a driver, owning its state, and
 * checking every range before a driver sees it. */
#include "imager/backend.h"
#include "qemu-img.h"
#include "rescue.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Probing order; raw last (it scores 1 for anything). */
static const struct bk_driver *const probe_order[] = { &bk_qcow2, &bk_vmdk, &bk_vhd, &bk_vhdx,
							&bk_vdi, &bk_ova, &bk_ovf, &bk_vmx,
							&bk_raw };

const char *bk_prealloc_name(enum bk_prealloc p)
{
	switch (p) {
	case BK_PREALLOC_OFF: return "off";
	case BK_PREALLOC_METADATA: return "metadata";
	case BK_PREALLOC_FALLOC: return "falloc";
	case BK_PREALLOC_FULL: return "full";
	}
	return "?";
}

int bk_prealloc_parse(const char *s, enum bk_prealloc *out)
{
	for (int p = BK_PREALLOC_OFF; p <= BK_PREALLOC_FULL; p++)
		if (!strcmp(s, bk_prealloc_name((enum bk_prealloc)p))) {
			*out = (enum bk_prealloc)p;
			return 0;
		}
	return -EINVAL;
}

bool bk_is_uri(const char *spec)
{
	return !strncmp(spec, "nbd://", 6) || !strncmp(spec, "nbd+unix://", 11) ||
	       !strncmp(spec, "nbds://", 7) || !strncmp(spec, "nbds+unix://", 12);
}

const struct bk_driver *bk_driver_by_name(const char *name)
{
	if (!strcmp(name, "raw"))
		return &bk_raw;
	if (!strcmp(name, "qcow2"))
		return &bk_qcow2;
	if (!strcmp(name, "nbd"))
		return &bk_nbd;
	for (size_t i = 0; i < sizeof(probe_order) / sizeof(*probe_order); i++)
		if (!strcmp(name, probe_order[i]->name))
			return probe_order[i];
	return NULL;
}

const char *bk_format_from_name(const char *path)
{
	const char *dot = strrchr(path, '.');

	if (!dot || strchr(dot, '/'))
		return NULL;
	if (!strcasecmp(dot, ".qcow2") || !strcasecmp(dot, ".qcow"))
		return "qcow2";
	if (!strcasecmp(dot, ".img") || !strcasecmp(dot, ".raw") || !strcasecmp(dot, ".bin"))
		return "raw";
	return NULL;
}

static struct bk *bk_alloc(const struct bk_driver *drv, const char *spec)
{
	struct bk *bk = calloc(1, sizeof(*bk));

	if (!bk)
		return NULL;
	bk->drv = drv;
	if (drv->priv_size && !(bk->priv = calloc(1, drv->priv_size))) {
		free(bk);
		return NULL;
	}
	bk->sector_size = 512;
	snprintf(bk->name, sizeof(bk->name), "%s", spec);
	return bk;
}

static void bk_free(struct bk *bk)
{
	if (bk) {
		free(bk->priv);
		free(bk);
	}
}

/* The formats told by their last 512 bytes (a fixed VHD), for a regular
 * file that no probe of its start claimed. */
static void probe_tail(int fd, const struct bk_driver **drv, int *best)
{
	unsigned char buf[512];
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 1024 ||
	    pread(fd, buf, sizeof(buf), st.st_size - 512) != 512)
		return;
	for (size_t i = 0; i < sizeof(probe_order) / sizeof(*probe_order); i++) {
		int score = probe_order[i]->probe_tail ? probe_order[i]->probe_tail(buf, 512) : 0;
		if (score > *best) {
			*best = score;
			*drv = probe_order[i];
		}
	}
}

static int probe_driver(const char *spec, const struct bk_driver **out, struct im_err *err);

/* PATH/DISK: a disk inside a VM's description (backend-vm.c), whose
 * driver is the description's. */
static int probe_vm_disk(const char *spec, const struct bk_driver **out, struct im_err *err)
{
	char file[600];
	const char *disk;

	if (vm_split_spec(spec, file, sizeof(file), &disk) < 0 || !disk)
		return im_errf(err, IM_EXIT_SOURCE, -ENOTDIR, "%s: %s", spec, strerror(ENOTDIR));
	FORWARD_ERR(probe_driver(file, out, err));
	if (*out != &bk_ova && *out != &bk_ovf && *out != &bk_vmx)
		return im_errf(err, IM_EXIT_SOURCE, -ENOTDIR,
			       "%s: %s is a %s file, not a VM's description (OVA, OVF, .vmx) with "
			       "disks inside", spec, file, (*out)->name);
	return 0;
}

/* The driver whose probe scores highest on the first 4 KiB (raw when none). */
static int probe_driver(const char *spec, const struct bk_driver **out, struct im_err *err)
{
	const struct bk_driver *drv = NULL;
	unsigned char buf[4096];
	ssize_t n;
	int best = 0, fd;

	if (bk_is_uri(spec)) {
		*out = &bk_nbd;
		return 0;
	}
	fd = open(spec, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOTDIR)
		return probe_vm_disk(spec, out, err);
	if (fd < 0)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", spec, strerror(errno));
	n = pread(fd, buf, sizeof(buf), 0);
	if (n < 0) {
		close(fd);
		return im_errf(err, IM_EXIT_IO, -errno, "%s: %s", spec, strerror(errno));
	}
	for (size_t i = 0; i < sizeof(probe_order) / sizeof(*probe_order); i++) {
		int score = probe_order[i]->probe ? probe_order[i]->probe(buf, (size_t)n) : 0;
		if (score > best) {
			best = score;
			drv = probe_order[i];
		}
	}
	if (best <= 1)
		probe_tail(fd, &drv, &best);
	close(fd);
	*out = drv ? drv : &bk_raw;
	return 0;
}

int bk_probe_format(const char *spec, const char **format, struct im_err *err)
{
	const struct bk_driver *drv;

	FORWARD_ERR(probe_driver(spec, &drv, err));
	*format = drv->name;
	return 0;
}

struct bk_net bk_net_get(const struct bk_net *n)
{
	if (n && n->given)
		return *n;
	return (struct bk_net){ .given = true, .timeout_s = 60, .retries = 3 };
}

int bk_open(const char *spec, const char *format, unsigned flags, const struct bk_net *net,
	    struct bk **out, struct im_err *err)
{
	const struct bk_driver *drv = NULL;
	struct bk *bk;
	int r;

	*out = NULL;
	if (format) {
		drv = bk_driver_by_name(format);
		if (!drv)
			return im_errf(err, IM_EXIT_USAGE, -EINVAL, "unknown format \"%s\"", format);
	} else {
		FORWARD_ERR(probe_driver(spec, &drv, err));
	}
	if (!drv->open)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "%s: the %s driver cannot open", spec,
			       drv->name);
	bk = bk_alloc(drv, spec);
	if (!bk)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	bk->writable = flags & BK_OPEN_WRITE;
	bk->net = bk_net_get(net);
	r = drv->open(bk, spec, flags, err);
	if (r < 0) {
		if (!err->exit_class)
			im_errf(err, r == -ENOTSUP ? IM_EXIT_UNSUPP : r == -EBADMSG ? IM_EXIT_SOURCE :
				IM_EXIT_IO, r, "%s: %s", spec, strerror(-r));
		bk_free(bk);
		return r;
	}
	*out = bk;
	return 0;
}

int bk_create(const char *spec, const char *format, const struct bk_create_opts *o,
	      struct bk **out, struct im_err *err)
{
	const struct bk_driver *drv;
	struct bk *bk;
	int r;

	*out = NULL;
	if (!format)
		format = bk_is_uri(spec) ? "nbd" : bk_format_from_name(spec);
	drv = bk_driver_by_name(format ? format : "raw");
	if (!drv)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL, "unknown format \"%s\"", format);
	if (!drv->create)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "%s: the %s driver cannot create", spec,
			       drv->name);
	if (o->size == 0 || o->size % 512)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL, "%s: size %llu is not a multiple of 512",
			       spec, (unsigned long long)o->size);
	bk = bk_alloc(drv, spec);
	if (!bk)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	bk->writable = true;
	bk->net = bk_net_get(&o->net);
	r = drv->create(bk, spec, o, err);
	if (r < 0) {
		if (!err->exit_class)
			im_errf(err, r == -ENOTSUP ? IM_EXIT_UNSUPP : IM_EXIT_TARGET, r, "%s: %s", spec,
				strerror(-r));
		bk_free(bk);
		return r;
	}
	*out = bk;
	return 0;
}

static int check_range(struct bk *bk, uint64_t off, uint64_t len, struct im_err *err)
{
	if (off > bk->size || len > bk->size - off)
		return im_errf(err, IM_EXIT_INTERNAL, -EINVAL,
			       "%s: range %llu+%llu is beyond its %llu bytes", bk->name,
			       (unsigned long long)off, (unsigned long long)len,
			       (unsigned long long)bk->size);
	return 0;
}

static int io_error(struct bk *bk, int r, const char *what, uint64_t off, uint64_t len,
		    struct im_err *err)
{
	int cls = r == -EBADMSG ? IM_EXIT_SOURCE : r == -ENOTSUP ? IM_EXIT_UNSUPP : IM_EXIT_IO;

	if (r == -ETIMEDOUT)
		return im_errf(err, IM_EXIT_IO, r,
			       "%s: %s %llu bytes at %llu: no answer within %u s (--timeout): the server stalled",
			       bk->name, what, (unsigned long long)len, (unsigned long long)off,
			       bk->net.timeout_s);
	return im_errf(err, cls, r, "%s: %s %llu bytes at %llu: %s%s%s", bk->name, what,
		       (unsigned long long)len, (unsigned long long)off,
		       r == -EBADMSG ? "corrupt image metadata" : strerror(-r),
		       bk->fail_note[0] ? ": " : "", bk->fail_note);
}

int bk_pread(struct bk *bk, void *buf, size_t len, uint64_t off, struct im_err *err)
{
	int r = check_range(bk, off, len, err);

	if (r < 0 || !len)
		return r;
	r = bk->drv->pread(bk, buf, len, off);
	if (bk->rescue) {
		if (r < 0 && rescue_media_error(r))
			r = rescue_read(bk, buf, len, off);
		if (r == 0)
			rescue_note_read(bk, off, len);
	}
	if (r < 0 && rescue_media_error(r) && !bk->rescue)
		return im_errf(err, IM_EXIT_IO, r,
			       "%s: reading %llu bytes at %llu: %s (unreadable sectors: --rescue "
			       "copies around them)", bk->name, (unsigned long long)len,
			       (unsigned long long)off, strerror(-r));
	if (r < 0)
		return io_error(bk, r, "reading", off, len, err);
	return r;
}

int bk_pwrite(struct bk *bk, const void *buf, size_t len, uint64_t off, struct im_err *err)
{
	int r = check_range(bk, off, len, err);
	if (r == 0 && !bk->writable)
		r = im_errf(err, IM_EXIT_INTERNAL, -EBADF, "%s: not open for writing", bk->name);
	if (r == 0 && len && (r = bk->drv->pwrite(bk, buf, len, off)) < 0)
		return io_error(bk, r, "writing", off, len, err);
	return r;
}

int bk_zero(struct bk *bk, uint64_t off, uint64_t len, struct im_err *err)
{
	static const unsigned char zeros[65536];
	int r = check_range(bk, off, len, err);

	if (r == 0 && !bk->writable)
		r = im_errf(err, IM_EXIT_INTERNAL, -EBADF, "%s: not open for writing", bk->name);
	if (r < 0 || !len)
		return r;
	if (bk->drv->pwrite_zeroes) {
		r = bk->drv->pwrite_zeroes(bk, off, len);
		if (r != -ENOTSUP)
			return r < 0 ? io_error(bk, r, "zeroing", off, len, err) : 0;
	}
	while (len) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
		r = bk->drv->pwrite(bk, zeros, n, off);
		if (r < 0)
			return io_error(bk, r, "zeroing", off, n, err);
		off += n;
		len -= n;
	}
	return 0;
}

int bk_block_status(struct bk *bk, uint64_t off, uint64_t len, uint64_t *pnum,
		    struct im_err *err)
{
	int r = check_range(bk, off, len, err);

	if (r < 0)
		return r;
	if (!bk->drv->block_status) {
		*pnum = len;
		return BK_STATUS_DATA;
	}
	r = bk->drv->block_status(bk, off, len, pnum);
	if (r < 0)
		return io_error(bk, r, "status of", off, len, err);
	if (*pnum == 0 || *pnum > len)
		return im_errf(err, IM_EXIT_INTERNAL, -EIO, "%s: block status out of range", bk->name);
	return r;
}

void bk_prefetch(struct bk *bk, uint64_t off, uint64_t len)
{
	if (bk->drv->prefetch && off <= bk->size && len <= bk->size - off)
		bk->drv->prefetch(bk, off, len);
}

void bk_drop(struct bk *bk, uint64_t off, uint64_t len)
{
	if (bk->drv->drop && off <= bk->size && len <= bk->size - off)
		bk->drv->drop(bk, off, len);
}

int bk_flush(struct bk *bk, struct im_err *err)
{
	int r = bk->drv->flush ? bk->drv->flush(bk) : 0;
	if (r == -ETIMEDOUT)
		return im_errf(err, IM_EXIT_IO, r, "%s: flushing: no answer within %u s (--timeout)",
			       bk->name, bk->net.timeout_s);
	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "%s: flushing: %s", bk->name, strerror(-r));
	return 0;
}

int bk_close(struct bk *bk, struct im_err *err)
{
	int r = 0;

	if (!bk)
		return 0;
	if (bk->drv->close)
		r = bk->drv->close(bk);
	if (r < 0)
		im_errf(err, IM_EXIT_IO, r, "%s: closing: %s", bk->name, strerror(-r));
	rescue_free(bk->rescue);
	bk_free(bk);
	return r;
}
