/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Growing filesystems into partitions that were laid out larger.
 *
 * On a block device the kernel has partition nodes for, the host's own
 * tools do it: e2fsck + resize2fs, ntfsresize, and for XFS and btrfs (which
 * grow only while mounted) a mount in a mount namespace of its own,
 * xfs_growfs or btrfs filesystem resize, and an unmount.  An LVM physical volume, and everything on image
 * files, goes through the grow hook (job.h): libguestfs, which the
 * conversion layer offers, since the engine does not link it; its appliance
 * has device-mapper, which pvresize + lvextend need, and mounts what the
 * host may not.  A filesystem that cannot grow (FAT, swap, unknown) keeps its
 * size: the partition grows, and the report says why the filesystem did not.
 */
#include "grow.h"
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool.h"
#include "util.h"

static bool is_ext(const char *t)
{
	return !strcmp(t, "ext2") || !strcmp(t, "ext3") || !strcmp(t, "ext4");
}

/* What can be grown, and how the report words what cannot. */
static const char *why_not(const char *t)
{
	if (!t || !*t)
		return "unknown contents: the filesystem keeps its size";
	if (is_ext(t) || !strcmp(t, "ntfs") || !strcmp(t, "xfs") || !strcmp(t, "btrfs") ||
	    !strcmp(t, "LVM2_member"))
		return NULL;
	if (!strcmp(t, "vfat"))
		return "FAT keeps its size (imager does not resize FAT)";
	if (!strcmp(t, "swap"))
		return "swap keeps its size (mkswap inside the guest makes it use the partition)";
	return "imager does not grow this filesystem: it keeps its size";
}

static int run_checked(const char *const argv[], const char *dev, int ok_max, int cls,
		       struct im_err *err)
{
	char out[2048];
	int st = tool_run(argv, out, sizeof(out));

	if (st < 0 || st > ok_max)
		return im_errf(err, cls, st < 0 ? st : -EIO, "%s %s failed (status %d): %s", argv[0],
			       dev, st, out);
	return 0;
}

/* XFS and btrfs grow while mounted: a mount point of its own, the tool,
 * then the unmount; all of it in a child process with a mount namespace of
 * its own (private propagation).  A mount in the host's namespace would be
 * copied into any namespace created meanwhile (a libvirt guest starting,
 * a service with a private /tmp): there it would stay mounted after our
 * unmount, its log dirty and its device busy, while the restore reported
 * it done.  In a namespace of its own no one else can hold it. */
static int grow_mounted_here(const char *dev, const char *type, struct im_err *err)
{
	char dir[4096];
	int r;

	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return im_errf(err, IM_EXIT_IO, -errno, "a mount namespace to grow %s in: %s", dev,
			       strerror(errno));
	if ((r = tmp_dir_make("grow", dir, sizeof(dir), err)) < 0) {
		im_err_prefix(err, "a mount point for %s: ", dev);
		return r;
	}
	if (mount(dev, dir, type, MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
		r = im_errf(err, IM_EXIT_IO, -errno, "mounting %s (%s) to grow it: %s", dev, type,
			    strerror(errno));
		rmdir(dir);
		return r;
	}
	if (!strcmp(type, "xfs")) {
		const char *argv[] = { "xfs_growfs", dir, NULL };
		r = run_checked(argv, dev, 0, IM_EXIT_IO, err);
	} else {
		const char *argv[] = { "btrfs", "filesystem", "resize", "max", dir, NULL };
		r = run_checked(argv, dev, 0, IM_EXIT_IO, err);
	}
	if (umount2(dir, 0) != 0 && r == 0)
		r = im_errf(err, IM_EXIT_IO, -errno, "unmounting %s after growing it: %s", dev,
			    strerror(errno));
	rmdir(dir);
	return r;
}

/* The child's verdict comes back whole through a pipe (struct im_err is
 * smaller than PIPE_BUF, so one write). */
static int grow_mounted(const char *dev, const char *type, struct im_err *err)
{
	struct im_err child = { 0 };
	int fds[2], st;
	pid_t pid;
	ssize_t n;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return im_errf(err, IM_EXIT_IO, -errno, "growing %s: pipe: %s", dev, strerror(errno));
	pid = fork();
	if (pid < 0) {
		int e = errno;
		close(fds[0]);
		close(fds[1]);
		return im_errf(err, IM_EXIT_IO, -e, "growing %s: fork: %s", dev, strerror(e));
	}
	if (pid == 0) {
		close(fds[0]);
		int r = grow_mounted_here(dev, type, &child);
		if (r != 0 && child.exit_class == 0)
			im_errf(&child, IM_EXIT_IO, r, "growing %s failed", dev);
		if (write(fds[1], &child, sizeof(child)) != (ssize_t)sizeof(child))
			_exit(2);
		_exit(r != 0);
	}
	close(fds[1]);
	do
		n = read(fds[0], &child, sizeof(child));
	while (n < 0 && errno == EINTR);
	close(fds[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return im_errf(err, IM_EXIT_IO, -errno, "growing %s: waitpid: %s", dev,
				       strerror(errno));
	if (n != (ssize_t)sizeof(child) || !WIFEXITED(st) || WEXITSTATUS(st) > 1)
		return im_errf(err, IM_EXIT_IO, -EIO, "growing %s: its process ended without a verdict",
			       dev);
	if (WEXITSTATUS(st) == 0)
		return 0;
	child.msg[sizeof(child.msg) - 1] = 0;
	return im_errf(err, child.exit_class ? child.exit_class : IM_EXIT_IO,
		       child.code < 0 ? child.code : -EIO, "%s", child.msg);
}

/* One filesystem on a partition device the kernel made. */
static int grow_on_device(const char *dev, const char *type, struct im_err *err)
{
	if (is_ext(type)) {
		/* -p: repair only what is safe to repair unattended; 1 = corrected */
		const char *fsck[] = { "e2fsck", "-f", "-p", dev, NULL };
		const char *resize[] = { "resize2fs", dev, NULL };
		FORWARD_ERR(run_checked(fsck, dev, 1, IM_EXIT_FSCK, err));
		return run_checked(resize, dev, 0, IM_EXIT_IO, err);
	}
	if (!strcmp(type, "ntfs")) {
		/* no size: to the partition's; -f: no questions (stdin is /dev/null) */
		const char *resize[] = { "ntfsresize", "-f", "-P", dev, NULL };
		return run_checked(resize, dev, 0, IM_EXIT_IO, err);
	}
	return grow_mounted(dev, type, err);
}

/* The partition's node under roots->dev, when the kernel made one. */
static bool partition_node(const struct disk_roots *roots, const char *disk, unsigned number,
			   char *path, size_t len)
{
	char name[64];
	struct stat st;

	/* (a name that does not fit is no node of ours: the guest grows it) */
	return disk_partition_name(disk, number, name, sizeof(name)) == 0 &&
	       path_join(path, len, roots->dev, name) == 0 && stat(path, &st) == 0 &&
	       S_ISBLK(st.st_mode);
}

/* Through the hook: the partitions numbered nums[0..n-1] of the image. */
static int grow_in_image(const struct im_grow_hook *hook, const char *path, const char *format,
			 const unsigned *nums, const struct grow_fs *const *fs, size_t n, bool *grown,
			 struct im_err *err)
{
	const char *lvs[PT_MAX_PARTS];

	for (size_t k = 0; k < n; k++)
		lvs[k] = fs[k]->last_lv;
	return hook->grow_in_image(hook->opaque, path, format, nums, lvs, n, grown, err);
}

static int grow_all(const struct disk_roots *roots, const struct target_info *t,
		    const struct im_grow_hook *hook, struct grow_report *rep,
		    const struct grow_fs *fs, struct im_err *err)
{
	const char *format = t->format;
	unsigned nums[PT_MAX_PARTS], guest_nums[PT_MAX_PARTS];
	const struct grow_fs *pfs[PT_MAX_PARTS], *guest_fs[PT_MAX_PARTS];
	size_t idx[PT_MAX_PARTS], guest_idx[PT_MAX_PARTS];
	bool grown[PT_MAX_PARTS];
	size_t n = 0, ng = 0;
	int r;

	for (size_t i = 0; i < rep->nparts; i++) {
		const char *why;

		if (rep->parts[i].new_size <= rep->parts[i].old_size)
			continue;
		why = why_not(fs[i].type);
		if (why) {
			snprintf(rep->note[i], sizeof(rep->note[i]), "%s", why);
			continue;
		}
		nums[n] = rep->parts[i].number;
		pfs[n] = &fs[i];
		idx[n++] = i;
	}
	if (!n)
		return 0;
	if (bk_is_uri(t->path))
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "the partitions were laid out again, but growing filesystems on an NBD target is not supported; grow them inside the guest");
	if (t->block_device) {
		/* The kernel re-read the table when the target was closed. */
		for (size_t k = 0; k < n; k++) {
			char path[700];

			if (strcmp(pfs[k]->type, "LVM2_member") &&
			    partition_node(roots, t->disk_name, nums[k], path, sizeof(path))) {
				FORWARD_ERR(grow_on_device(path, pfs[k]->type, err));
				snprintf(rep->grown_fs[idx[k]], sizeof(rep->grown_fs[0]), "%s", pfs[k]->type);
			} else {
				guest_nums[ng] = nums[k];
				guest_fs[ng] = pfs[k];
				guest_idx[ng++] = idx[k];
			}
		}
		format = "raw";
	} else {
		memcpy(guest_nums, nums, n * sizeof(nums[0]));
		memcpy(guest_fs, pfs, n * sizeof(pfs[0]));
		memcpy(guest_idx, idx, n * sizeof(idx[0]));
		ng = n;
	}
	if (!ng)
		return 0;
	if (!hook || !hook->grow_in_image) {
		for (size_t k = 0; k < ng; k++)
			snprintf(rep->note[guest_idx[k]], sizeof(rep->note[0]),
				 "growing it here needs libguestfs, which this job was not given: it keeps its size");
		return 0;
	}
	r = grow_in_image(hook, t->path, format, guest_nums, guest_fs, ng, grown, err);
	if (r < 0)
		return r;
	for (size_t k = 0; k < ng; k++)
		if (grown[k])
			snprintf(rep->grown_fs[guest_idx[k]], sizeof(rep->grown_fs[0]), "%s",
				 guest_fs[k]->type);
		else
			snprintf(rep->note[guest_idx[k]], sizeof(rep->note[0]),
				 "its filesystem was not found there: it keeps its size");
	return 0;
}

int grow_filesystems(const struct disk_roots *roots, const struct target_info *t,
		     const struct im_grow_hook *hook, struct grow_report *rep,
		     const struct grow_fs *fs, struct im_err *err)
{
	int r = grow_all(roots, t, hook, rep, fs, err);
	if (r < 0)
		im_err_prefix(err, "the disk is complete and its partitions laid out anew, but its filesystems were not grown: ");
	return r;
}

void grow_fs_set(struct grow_fs *g, const char *type, const struct fs_volume *v, size_t n)
{
	uint64_t end = 0;

	memset(g, 0, sizeof(*g));
	g->type = type;
	for (size_t k = 0; k < n; k++)
		if (v[k].end > end) {
			end = v[k].end;
			/* an LV kept whole (striped, spread over PVs) is not extended */
			g->last_lv = strcmp(v[k].plugin, "whole") ? v[k].name : NULL;
		}
}
