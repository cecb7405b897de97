/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A job's hold on what it writes (util.h, struct path_lock): flock() on a
 * descriptor of its own, so that a second imager job writing the same
 * image folder, image file or device is refused with the first one's PID
 * instead of both writing.  Block devices are also opened O_EXCL, which
 * the kernel refuses while the device or one of its partitions is mounted
 * or held by another exclusive opener (and which keeps them from being
 * mounted while the job writes).  The holder's PID comes from /proc/locks
 * (its lines name the PID and the locked inode as MAJ:MIN:INODE, the
 * device numbers in hex, fs/locks.c).
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The PID holding a flock() on st's inode, 0 when none is seen. */
static pid_t flock_holder(const struct stat *st)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	pid_t pid = 0;

	if (!f)
		return 0;
	while (!pid && fgets(line, sizeof(line), f)) {
		char type[16];
		int p;
		unsigned ma, mi;
		unsigned long long ino;
		/* "1: FLOCK  ADVISORY  WRITE 1234 fd:01:56789 0 EOF"; the
		 * waiters' lines read "1: -> FLOCK ..." and are skipped. */
		if (sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%llu", type, &p, &ma, &mi, &ino) == 5 &&
		    !strcmp(type, "FLOCK") && p > 0 && ma == major(st->st_dev) &&
		    mi == minor(st->st_dev) && ino == (unsigned long long)st->st_ino)
			pid = p;
	}
	fclose(f);
	return pid;
}

int path_lock(struct path_lock *l, const char *path, bool excl, pid_t *holder)
{
	struct stat st;
	int fd;

	*holder = 0;
	l->on = false;
	if (stat(path, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else if (S_ISBLK(st.st_mode) && excl)
		fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
	else
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == EBUSY)
			*holder = flock_holder(&st);
		return -e;
	}
	/* A held lock is asked again for up to a second before the job is
	 * refused: a job that just ended (killed: its descriptors are
	 * released a moment after, and /proc/locks may still name it) lets
	 * go of it by then; a running one does not. */
	for (int tries = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; tries++) {
		int e = errno;
		if (e == EWOULDBLOCK && tries < 20) {
			usleep(50000);
			continue;
		}
		if (e != EWOULDBLOCK) {
			/* A filesystem without flock for this descriptor (NFS
			 * takes exclusive locks only on files open for writing,
			 * some CIFS servers none): the job goes on unlocked, as
			 * before locks existed; a block device keeps its O_EXCL. */
			if (S_ISBLK(st.st_mode) && excl) {
				l->fd = fd;
				l->on = true;
			} else {
				close(fd);
			}
			return 0;
		}
		*holder = flock_holder(&st);
		close(fd);
		return -EBUSY;
	}
	l->fd = fd;
	l->on = true;
	return 0;
}

pid_t path_lock_holder(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? flock_holder(&st) : 0;
}

void path_unlock(struct path_lock *l)
{
	if (l->on)
		close(l->fd);
	l->on = false;
}

int path_lock_err(struct im_err *err, const char *path, int r, pid_t holder)
{
	if (r == -EBUSY && holder > 0)
		return im_errf(err, IM_EXIT_TARGET, r,
			       "%s is in use by PID %d (another imager job writes it); wait for it to end",
			       path, (int)holder);
	if (r == -EBUSY)
		return im_errf(err, IM_EXIT_TARGET, r,
			       "%s is in use (mounted, or held by LVM, RAID or another program)", path);
	return im_errf(err, IM_EXIT_TARGET, r, "%s: cannot lock it: %s", path, strerror(-r));
}
