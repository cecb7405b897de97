/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The disks of other hypervisors, read through qemu's block layer: VMware's
 * VMDK, Hyper-V's VHD and VHDX, VirtualBox's VDI.  qemu reads every one of
 * these formats and is maintained for it; imager does not write a reader of
 * its own.  Opening starts a child `qemu-nbd --read-only --persistent` that
 * serves the image on a Unix socket in a private folder, and the export is
 * then read through backend-nbd.c (the job's --timeout applies: a qemu that
 * stops answering fails the request, it never hangs the job).  Closing
 * stops the child and removes the folder; the child also gets SIGTERM when
 * imager dies (PR_SET_PDEATHSIG).
 *
 * The image is described to qemu with --image-opts: the format is always
 * named (qemu never probes a file imager did not recognise) and, for a disk
 * inside an OVA, the protocol layer is qemu's raw driver with offset= and
 * size=, so the disk is read straight out of the tar.
 *
 * A VMDK is checked before qemu sees it (vmdk_check, vmsource.h): its
 * descriptor and every extent and parent it names must lie in its folder.
 * qemu itself refuses what else is wrong; its message is passed on with the
 * file and the format named (IM_EXIT_DAMAGED: the file looked like that
 * format and is not readable as one).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "imager/backend.h"
#include "imager/vmsource.h"
#include "qemu-img.h"
#include "util.h"

#define QEMU_NBD "qemu-nbd"

/* ---- what qemu is asked to open ---- */

/* Append s to out with qemu's option quoting (a comma doubled). */
static int opt_add(char *out, size_t len, const char *s)
{
	size_t n = strlen(out);

	for (; *s; s++) {
		if (n + 3 > len)
			return -ENAMETOOLONG;
		out[n++] = *s;
		if (*s == ',')
			out[n++] = ',';
	}
	out[n] = '\0';
	return 0;
}

int qemu_img_opts(const struct qemu_img *img, char *out, size_t len)
{
	int r;

	if (img->ranged)
		r = str_printf(out, len,
			       "driver=%s,read-only=on,file.driver=raw,file.offset=%llu,file.size=%llu,"
			       "file.file.driver=file,file.file.filename=",
			       img->format, (unsigned long long)img->offset,
			       (unsigned long long)img->size);
	else
		r = str_printf(out, len, "driver=%s,read-only=on,file.driver=file,file.filename=",
			       img->format);
	return r < 0 ? r : opt_add(out, len, img->file);
}

/* ---- the child ---- */

/* The last line qemu-nbd wrote, without its "qemu-nbd: " and
 * "Failed to blk_new_open '...': " parts (they repeat the options). */
static void child_message(const struct child *c, char *out, size_t len)
{
	char buf[4096];
	char *line = buf;

	child_last_line(c, buf, sizeof(buf));
	if (!strncmp(line, "qemu-nbd: ", 10))
		line += 10;
	char *q = strstr(line, "': ");
	if (!strncmp(line, "Failed to blk_new_open '", 24) && q)
		line = q + 3;
	static const char *const noise[] = { "Disconnect client, due to: ", "Failed to send reply: " };
	for (size_t i = 0; i < 2; i++)
		if (!strncmp(line, noise[i], strlen(noise[i])))
			line += strlen(noise[i]);
	str_copy(out, len, line);
}

/* The child ended with status, before it served: why, as an error. */
static int child_ended(struct qemu_state *s, int status, const char *what, struct im_err *err)
{
	char msg[400];

	child_message(&s->child, msg, sizeof(msg));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOENT,
			       "%s: reading it needs qemu-nbd (Debian package qemu-utils), "
			       "which is not installed", what);
	return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s: qemu cannot read it: %s", what,
		       msg[0] ? msg : "qemu-nbd stopped without a word");
}

/* The child's end as an error, or false when it still runs after 2 s. */
static bool child_gone(struct qemu_state *s, const char *what, struct im_err *err)
{
	int status;

	if (!child_reaped(&s->child, 2000, &status))
		return false;
	child_ended(s, status, what, err);
	return true;
}

int qemu_serve(struct bk *bk, const struct qemu_img *img, struct im_err *err)
{
	struct qemu_state *s = bk->priv;
	char opts[8192], sockopt[700], uri[700], what[700];
	int r, status;

	snprintf(what, sizeof(what), "%s (%s)", bk->name, img->label);
	if (qemu_img_opts(img, opts, sizeof(opts)) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: the path is too long", bk->name);
	/* (the socket's name is known before the child starts: dir/sock) */
	char dir[512];
	FORWARD_ERR(tmp_dir_make("qemu", dir, sizeof(dir), err));
	snprintf(sockopt, sizeof(sockopt), "--socket=%s/sock", dir);
	const char *argv[] = { QEMU_NBD, "--read-only", "--persistent", "--shared=4", sockopt,
			       "--image-opts", opts, NULL };
	r = child_start(&s->child, NULL, dir, argv, CHILD_DIE_WITH_PARENT, err);
	s->child.own_dir = true;
	if (r < 0) {
		rmdir(dir);
		return r;
	}
	r = child_listening(&s->child, bk->net.timeout_s, &status);
	if (r == 1) {
		r = child_ended(s, status, what, err);
		goto fail;
	}
	if (r < 0) {
		r = im_errf(err, IM_EXIT_IO, -ETIMEDOUT,
			    "%s: qemu-nbd did not start serving it within %u s (--timeout)", what,
			    bk->net.timeout_s);
		goto fail;
	}
	/* A local child that dropped the connection did so for a reason
	 * (qemu_failed): connecting again would only meet it again. */
	struct bk_net net = { .given = true, .timeout_s = bk->net.timeout_s, .retries = 0 };
	snprintf(uri, sizeof(uri), "nbd+unix:///?socket=%s", s->child.sock);
	r = bk_open(uri, "nbd", 0, &net, &s->nbd, err);
	if (r < 0) {
		/* qemu-nbd may listen before it opens the image, and drop the
		 * connection when that fails: its own reason then counts. */
		struct im_err later = { 0 };
		if (child_gone(s, what, &later)) {
			*err = later;
			r = later.code;
		} else {
			im_err_prefix(err, "%s: ", what);
		}
		goto fail;
	}
	bk->size = s->nbd->size;
	bk->sector_size = 512;
	return 0;
fail:
	child_stop(&s->child);
	return r;
}

/* ---- the driver calls, passed to the export ---- */

/* qemu-nbd drops the connection when qemu cannot read the image there (a
 * truncated or damaged file): its reason is in the messages, and the
 * failure is the image's (-EBADMSG), not the transport's. */
static int qemu_failed(struct bk *bk, int r)
{
	struct qemu_state *s = bk->priv;
	char msg[sizeof(bk->fail_note) - 40];

	child_message(&s->child, msg, sizeof(msg));
	if (strstr(msg, "reading from file failed")) {
		snprintf(bk->fail_note, sizeof(bk->fail_note), "damaged or truncated (qemu: %s)", msg);
		return -EBADMSG;
	}
	return r;
}

int qemu_pread(struct bk *bk, void *buf, size_t len, uint64_t off)
{
	struct qemu_state *s = bk->priv;
	int r = s->nbd->drv->pread(s->nbd, buf, len, off);
	return r < 0 ? qemu_failed(bk, r) : r;
}

int qemu_block_status(struct bk *bk, uint64_t off, uint64_t len, uint64_t *pnum)
{
	struct qemu_state *s = bk->priv;
	int r = s->nbd->drv->block_status(s->nbd, off, len, pnum);
	return r < 0 ? qemu_failed(bk, r) : r;
}

int qemu_flush(struct bk *bk)
{
	(void)bk;
	return 0;
}

int qemu_close(struct bk *bk)
{
	struct qemu_state *s = bk->priv;
	int r = 0;

	if (s->nbd)
		r = bk_close(s->nbd, NULL);
	s->nbd = NULL;
	child_stop(&s->child);
	return r;
}

/* ---- the image formats: probes and opens ---- */

static int probe_vmdk(const unsigned char *buf, size_t len)
{
	static const char desc[] = "# Disk DescriptorFile";
	size_t i = 0;

	if (len >= 4 && (!memcmp(buf, "KDMV", 4) || !memcmp(buf, "COWD", 4)))
		return 100;
	while (i < len && i < 64 && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' ||
				     buf[i] == '\n'))
		i++;
	return len - i >= sizeof(desc) - 1 && !memcmp(buf + i, desc, sizeof(desc) - 1) ? 100 : 0;
}

static int probe_vhd(const unsigned char *buf, size_t len)
{
	return len >= 8 && !memcmp(buf, "conectix", 8) ? 100 : 0;
}

/* A fixed VHD is the raw disk followed by the 512-byte footer alone. */
static int probe_vhd_tail(const unsigned char *buf, size_t len)
{
	if (len < 512 || memcmp(buf, "conectix", 8))
		return 0;
	uint32_t type = (uint32_t)buf[60] << 24 | (uint32_t)buf[61] << 16 |
			(uint32_t)buf[62] << 8 | buf[63];
	return type == 2 ? 100 : 0;
}

static int probe_vhdx(const unsigned char *buf, size_t len)
{
	return len >= 8 && !memcmp(buf, "vhdxfile", 8) ? 100 : 0;
}

static int probe_vdi(const unsigned char *buf, size_t len)
{
	/* the signature 0xbeda107f, little-endian, after the 64-byte text */
	return len >= 0x44 && buf[0x40] == 0x7f && buf[0x41] == 0x10 && buf[0x42] == 0xda &&
	       buf[0x43] == 0xbe ? 100 : 0;
}

const char *qemu_format_of(const unsigned char *buf, size_t len, const char **label)
{
	static const struct {
		int (*probe)(const unsigned char *, size_t);
		const char *format, *label;
	} f[] = { { probe_vmdk, "vmdk", "VMDK" }, { probe_vhd, "vpc", "VHD" },
		  { probe_vhdx, "vhdx", "VHDX" }, { probe_vdi, "vdi", "VDI" } };

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].probe(buf, len)) {
			*label = f[i].label;
			return f[i].format;
		}
	return NULL;
}

static int open_file(struct bk *bk, const char *path, unsigned flags, const char *format,
		     const char *label, struct im_err *err)
{
	struct qemu_img img = { .format = format, .label = label };

	if (flags & BK_OPEN_WRITE)
		return im_errf(err, IM_EXIT_TARGET, -EROFS,
			       "%s: a %s image is read as a source only; write to a raw or qcow2 disk",
			       path, label);
	if (str_copy(img.file, sizeof(img.file), path) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: the path is too long", path);
	return qemu_serve(bk, &img, err);
}

/* Its descriptor, every extent and every parent checked first: all in
 * its folder, of the sizes it says (vmdk_check). */
static int vmdk_open(struct bk *bk, const char *path, unsigned flags, struct im_err *err)
{
	struct vmdk_desc d;
	unsigned depth;

	FORWARD_ERR(vmdk_check(path, &d, &depth, err));
	if (depth > 1)
		snprintf(bk->detail, sizeof(bk->detail), "%s, a snapshot over %u parent%s",
			 d.create_type, depth - 1, depth > 2 ? "s" : "");
	else
		snprintf(bk->detail, sizeof(bk->detail), "%s", d.create_type);
	return open_file(bk, path, flags, "vmdk", "VMDK", err);
}

/* Fixed (the disk, then the footer) or dynamic: the footer's disk type,
 * which a dynamic VHD copies at its start. */
static int vhd_open(struct bk *bk, const char *path, unsigned flags, struct im_err *err)
{
	unsigned char f[512];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool found = false;

	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= 512) {
		found = util_pread_full(fd, f, 512, 0) == 0 && !memcmp(f, "conectix", 8);
		if (!found)
			found = util_pread_full(fd, f, 512, (uint64_t)st.st_size - 512) == 0 &&
				!memcmp(f, "conectix", 8);
	}
	if (found)
		snprintf(bk->detail, sizeof(bk->detail), "%s",
			 f[63] == 2 ? "fixed" : f[63] == 3 ? "dynamic" : f[63] == 4 ? "differencing" : "");
	if (fd >= 0)
		close(fd);
	return open_file(bk, path, flags, "vpc", "VHD", err);
}

static int vhdx_open(struct bk *bk, const char *path, unsigned flags, struct im_err *err)
{
	return open_file(bk, path, flags, "vhdx", "VHDX", err);
}

static int vdi_open(struct bk *bk, const char *path, unsigned flags, struct im_err *err)
{
	return open_file(bk, path, flags, "vdi", "VDI", err);
}

#define QEMU_DRIVER(NAME, PROBE, TAIL, OPEN) {                           \
	.name = NAME, .priv_size = sizeof(struct qemu_state),            \
	.probe = PROBE, .probe_tail = TAIL, .open = OPEN,                \
	.pread = qemu_pread, .block_status = qemu_block_status,          \
	.flush = qemu_flush, .close = qemu_close }

const struct bk_driver bk_vmdk = QEMU_DRIVER("vmdk", probe_vmdk, NULL, vmdk_open);
const struct bk_driver bk_vhd = QEMU_DRIVER("vhd", probe_vhd, probe_vhd_tail, vhd_open);
const struct bk_driver bk_vhdx = QEMU_DRIVER("vhdx", probe_vhdx, NULL, vhdx_open);
const struct bk_driver bk_vdi = QEMU_DRIVER("vdi", probe_vdi, NULL, vdi_open);

const char *bk_qemu_format(const char *driver)
{
	if (!strcmp(driver, "vhd"))
		return "vpc";
	return driver;
}
