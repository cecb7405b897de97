/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Small helpers shared inside the engine (not part of the public API).
 * Each name says its family (dio_, path_lock, str_, path_join, tmp_);
 * the others carry util_. */
#ifndef IMAGER_UTIL_H
#define IMAGER_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "imager/bytes.h"   /* le16/le32/le64, be16/be32/be64, put_le32/64 */
#include "imager/error.h"

/* pread/pwrite the whole length, retrying short transfers and EINTR.
 * Return 0, -EIO at end of file, or -errno. */
int util_pread_full(int fd, void *buf, size_t len, uint64_t off);
int util_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
/* Direct writes beside a file's buffered descriptor.  Writing through the
 * page cache costs a kernel copy of every byte (on this class of machine
 * buffered writes reach a third of the disk's durable rate), so the large
 * aligned middle of each big write goes with O_DIRECT; small writes, and
 * the unaligned head and tail of big ones, stay buffered (they never share
 * a 4 KiB page with a direct write, and the kernel keeps the two coherent).
 * on is false when the file system refuses O_DIRECT (tmpfs) or a direct
 * write once failed with EINVAL: everything is then buffered.  A zeroed
 * struct dio is closed. */
struct dio {
	bool on;                /* fd is open for direct writes */
	int fd;
	unsigned char *bounce;  /* 1 MiB, aligned, for data in unaligned memory */
};
/* Opens path for direct writes (never fails: d->on stays false when it
 * cannot). */
void dio_open(struct dio *d, const char *path);
void dio_close(struct dio *d);
/* util_pwrite_full(fd, ...) with the middle through d.  Returns 0 or -errno. */
int dio_pwrite(struct dio *d, int fd, const void *buf, size_t len, uint64_t off);
/* A buffer whose start suits direct I/O (4 KiB aligned); free() it.  One
 * of 2 MiB or more starts on a 2 MiB boundary and is advised to be made of
 * transparent huge pages: the kernel then hands a direct write of it to
 * the disk in fewer pieces, and a compressor's matches cost fewer TLB
 * misses. */
void *dio_alloc(size_t len);
/* A job's hold on a folder, image file or block device it writes (lock.c):
 * an exclusive flock() on a descriptor of its own, a block device opened
 * O_EXCL as well when excl (not with --force).  A zeroed struct path_lock
 * holds nothing. */
struct path_lock {
	bool on;
	int fd;
};
/* Returns 0, or -EBUSY with *holder the PID of the imager job holding it
 * (0 when the kernel refused the O_EXCL open for a mount or another
 * program), or -errno.  Where the filesystem has no flock for it (NFS for
 * a descriptor not open for writing, some CIFS servers), 0 and no lock. */
int path_lock(struct path_lock *l, const char *path, bool excl, pid_t *holder);
void path_unlock(struct path_lock *l);
/* The PID of the job holding path's lock, 0 when none. */
pid_t path_lock_holder(const char *path);
/* The refusal's message (IM_EXIT_TARGET): "PATH is in use by PID N". */
int path_lock_err(struct im_err *err, const char *path, int r, pid_t holder);
/* write() the whole length to a stream position. */
int util_write_full(int fd, const void *buf, size_t len);
/* Write-behind for a file written through the page cache: once END is
 * WRITE_BEHIND bytes past *started, start the write-out of everything
 * between (sync_file_range(2), without waiting) and move *started to END.
 * Without it, on a machine with much memory the kernel holds the whole
 * output dirty until the final fsync, which then writes it all while
 * nothing else runs.  Best effort: a file that refuses is left to the
 * kernel. */
#define WRITE_BEHIND (8u << 20)
void util_write_behind(int fd, uint64_t *started, uint64_t end);
/* CLOCK_MONOTONIC in milliseconds. */
long long util_mono_ms(void);
/* An executable regular file named prog: prog itself when it has a slash,
 * else the first on $PATH (/usr/bin:/bin when unset), into out (a path
 * that does not fit is not taken, never cut).  false when there is none. */
bool util_find_program(const char *prog, char *out, size_t len);

/* Write a file atomically: path.tmp, fsync, rename over path, fsync the
 * folder.  Returns 0 or -errno. */
int util_write_file_atomic(const char *path, const void *buf, size_t len);
/* fsync the folder holding entries we created or renamed. */
int util_fsync_dir(const char *dir);
/* Read a whole file of at most max bytes (-EFBIG beyond).  *buf is
 * malloc'ed (NUL-terminated for convenience).  Returns 0 or -errno. */
int util_read_whole_file(const char *path, unsigned char **buf, size_t *len, uint64_t max);
/* mkdir -p path, each missing folder 0755: 0 or -errno (-ENAMETOOLONG). */
int util_mkdir_p(const char *path);
/* Sleep ms milliseconds. */
void util_sleep_ms(unsigned ms);
/* Is the buffer all zero bytes? */
int util_buf_is_zero(const void *buf, size_t len);
/* Checked text: snprintf and a string copy that return 0, or
 * -ENAMETOOLONG when the text did not fit (out then holds a cut copy that
 * must not be used). */
int str_printf(char *out, size_t outlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int str_copy(char *out, size_t outlen, const char *s);
/* Join dir and name into out.  Returns 0 or -ENAMETOOLONG. */
int path_join(char *out, size_t outlen, const char *dir, const char *name);
/* The same, with the error recorded (a path too long: exit 1, the path
 * named). */
int path_join_err(char *out, size_t outlen, const char *dir, const char *name,
		  struct im_err *err);

/* Temporary folders, chosen one way everywhere: under $TMPDIR when it is
 * set and not empty, else /var/tmp (on disk where /tmp may be a small
 * tmpfs: the shrink copy and extracted drivers can be large).
 * tmp_base() is that folder; tmp_dir_make makes BASE/imager-PREFIX-XXXXXX
 * (mkdtemp) into out, or fills err naming the folder (IM_EXIT_IO; a
 * too-long $TMPDIR is IM_EXIT_USAGE). */
const char *tmp_base(void);
int tmp_dir_make(const char *prefix, char *out, size_t len, struct im_err *err);
/* A name for a new temporary file there (BASE/imager-PREFIX-XXXXXX, made by
 * mkstemp and removed again: the job that writes it creates it). */
int tmp_file_name(const char *prefix, char *out, size_t len, struct im_err *err);

/* Size in bytes and logical sector size of an open fd (block device or
 * file; -ENOTBLK for anything else). */
int util_fd_geometry(int fd, uint64_t *size, unsigned *lss);
/* "1.5 GiB", "512 B": binary units, one decimal above bytes. */
void util_human_size(uint64_t bytes, char *out, size_t len);
/* Format into the first empty one of n strings of len bytes each (slots
 * laid out one after another, as char s[n][len]); nothing when all are
 * taken.  For short fixed lists of warnings. */
void util_slot_vprintf(char *slots, size_t n, size_t len, const char *fmt, va_list ap);
#endif
