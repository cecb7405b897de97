/* SPDX-License-Identifier: GPL-2.0-or-later */
/* An image folder as one tar stream, written and read back (imgtar.h). */
#include "imgtar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* What a manifest, a boot area or an index may be at most when received:
 * they are kept in a temporary folder (RAM on the live medium). */
#define TAR_SMALL_MAX (256ull << 20)
#define TAR_BUF (1u << 20)

/* ---- sending ---- */

static int send_err(struct archive *a, const char *name, struct im_err *err)
{
	int e = archive_errno(a);
	return im_errf(err, IM_EXIT_IO, e > 0 ? -e : -EIO, "sending %s: %s", name,
		       e == EPIPE ? "the receiving end closed" : archive_error_string(a));
}

static int send_file(struct archive *a, const char *dir, const char *name, unsigned char *buf,
		     const struct im_progress *pr, uint64_t *done, uint64_t total,
		     struct im_err *err)
{
	char path[4200];
	struct stat st;
	int fd, r = 0;

	if ((r = path_join_err(path, sizeof(path), dir, name, err)) < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		return im_errf(err, IM_EXIT_DAMAGED, r, "%s: %s", path, strerror(-r));
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, st.st_size);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_mtime(e, st.st_mtime, 0);
	if (archive_write_header(a, e) != ARCHIVE_OK)
		r = send_err(a, name, err);
	archive_entry_free(e);
	for (uint64_t left = (uint64_t)st.st_size; r == 0 && left;) {
		ssize_t n = read(fd, buf, left < TAR_BUF ? left : TAR_BUF);
		if (n <= 0) {
			r = im_errf(err, IM_EXIT_IO, n < 0 ? -errno : -EIO, "%s: %s", path,
				    n < 0 ? strerror(errno) : "shorter than when it was opened");
			break;
		}
		if (archive_write_data(a, buf, (size_t)n) != n) {
			r = send_err(a, name, err);
			break;
		}
		left -= (uint64_t)n;
		if (pr && pr->fn) {
			*done += (uint64_t)n;
			pr->fn(pr->opaque, "send", *done, total);
		}
		if (pr && pr->cancel && *pr->cancel)
			r = im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "interrupted");
	}
	close(fd);
	return r;
}

int img_tar_send(const char *dir, const struct img_manifest *m, int fd,
		 const struct im_progress *pr, uint64_t *sent, struct im_err *err)
{
	struct archive *a = archive_write_new();
	unsigned char *buf = malloc(TAR_BUF);
	uint64_t done = 0, total = 0;
	int r = 0;

	if (!a || !buf) {
		free(buf);
		if (a)
			archive_write_free(a);
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < m->nparts; i++)
		total += m->parts[i].stream_size;
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
	    archive_write_open_fd(a, fd) != ARCHIVE_OK)
		r = send_err(a, "the image", err);
	if (r == 0)
		r = send_file(a, dir, IMG_MANIFEST, buf, NULL, NULL, 0, err);
	for (size_t i = 0; r == 0 && i < m->nareas; i++)
		r = send_file(a, dir, m->areas[i].file, buf, NULL, NULL, 0, err);
	for (size_t i = 0; r == 0 && i < m->nparts; i++)
		r = send_file(a, dir, m->parts[i].index, buf, NULL, NULL, 0, err);
	for (size_t i = 0; r == 0 && i < m->nparts; i++)
		r = send_file(a, dir, m->parts[i].stream, buf, pr, &done, total, err);
	if (r == 0 && archive_write_close(a) != ARCHIVE_OK)
		r = send_err(a, "the end of the image", err);
	*sent = (uint64_t)archive_filter_bytes(a, -1);
	archive_write_free(a);
	free(buf);
	return r;
}

/* ---- receiving ---- */

static int recv_err(struct archive *a, const char *what, struct im_err *err)
{
	return im_errf(err, IM_EXIT_DAMAGED, -EIO, "receiving %s: %s", what,
		       archive_error_string(a) ? archive_error_string(a) : "the stream ended");
}

int img_tar_expect(struct archive *ar, const char *name, uint64_t size, struct im_err *err)
{
	struct archive_entry *e;
	int r = archive_read_next_header(ar, &e);

	if (r == ARCHIVE_EOF)
		return im_errf(err, IM_EXIT_DAMAGED, -EIO,
			       "the image stream ended where %s should come (truncated)", name);
	if (r != ARCHIVE_OK)
		return recv_err(ar, name, err);
	const char *got = archive_entry_pathname(e);
	if (!got || strcmp(got, name) || archive_entry_filetype(e) != AE_IFREG)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "the image stream has \"%.64s\" where %s should come: not an image that imager sent",
			       got ? got : "(no name)", name);
	if (!archive_entry_size_is_set(e) || (uint64_t)archive_entry_size(e) != size)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "the image stream's %s is %lld bytes, the manifest says %llu", name,
			       (long long)archive_entry_size(e), (unsigned long long)size);
	return 0;
}

int img_tar_expect_end(struct archive *ar, struct im_err *err)
{
	struct archive_entry *e;
	int r = archive_read_next_header(ar, &e);

	if (r == ARCHIVE_EOF)
		return 0;
	if (r != ARCHIVE_OK)
		return recv_err(ar, "the image stream's end", err);
	return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
		       "the image stream goes on after the last partition (\"%.64s\")",
		       archive_entry_pathname(e) ? archive_entry_pathname(e) : "");
}

/* The current entry's size bytes into DIR/NAME. */
static int save_entry(struct archive *ar, const char *dir, const char *name, uint64_t size,
		      struct im_err *err)
{
	char path[4200];
	unsigned char *buf;
	int fd, r = 0;

	if (size > TAR_SMALL_MAX)
		return im_errf(err, IM_EXIT_DAMAGED, -EFBIG,
			       "the image stream's %s is %llu bytes: more than a manifest, boot area or index may be",
			       name, (unsigned long long)size);
	if ((r = path_join_err(path, sizeof(path), dir, name, err)) < 0)
		return r;
	if (!(buf = malloc(TAR_BUF)))
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
		free(buf);
		return r;
	}
	while (r == 0 && size) {
		la_ssize_t n = archive_read_data(ar, buf, size < TAR_BUF ? size : TAR_BUF);
		if (n <= 0)
			r = n == 0 ? im_errf(err, IM_EXIT_DAMAGED, -EIO,
					     "the image stream ends inside %s (truncated)", name) :
				     recv_err(ar, name, err);
		else if ((r = util_write_full(fd, buf, (size_t)n)) < 0)
			im_errf(err, IM_EXIT_IO, r, "%s: %s", path, strerror(-r));
		else
			size -= (uint64_t)n;
	}
	close(fd);
	free(buf);
	return r;
}

static int receive_file(struct archive *ar, const char *dir, const char *name, uint64_t size,
			struct im_err *err)
{
	int r = img_tar_expect(ar, name, size, err);
	return r < 0 ? r : save_entry(ar, dir, name, size, err);
}

int img_tar_receive_head(struct archive *ar, const char *dir, struct img_manifest *m,
			 struct im_err *err)
{
	struct archive_entry *e;
	int r = archive_read_next_header(ar, &e);

	if (r == ARCHIVE_EOF)
		return im_errf(err, IM_EXIT_DAMAGED, -EIO, "the image stream is empty");
	if (r != ARCHIVE_OK)
		return recv_err(ar, IMG_MANIFEST, err);
	if (!archive_entry_pathname(e) || strcmp(archive_entry_pathname(e), IMG_MANIFEST) ||
	    archive_entry_filetype(e) != AE_IFREG || !archive_entry_size_is_set(e) ||
	    archive_entry_size(e) < 0)
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "the image stream does not begin with %s: not an image that imager sent (a Clonezilla image is not sent by multicast)",
			       IMG_MANIFEST);
	if ((r = save_entry(ar, dir, IMG_MANIFEST, (uint64_t)archive_entry_size(e), err)) < 0 ||
	    (r = img_manifest_read(m, dir, err)) < 0)
		return r;
	for (size_t i = 0; r == 0 && i < m->nareas; i++)
		r = receive_file(ar, dir, m->areas[i].file, m->areas[i].length, err);
	for (size_t i = 0; r == 0 && i < m->nparts; i++)
		r = receive_file(ar, dir, m->parts[i].index, m->parts[i].index_size, err);
	if (r < 0)
		img_manifest_free(m);
	return r;
}
