/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The disks of a virtual machine's description: an OVA (a tar holding an
 * .ovf, a manifest and the disks), an OVF folder (the .ovf beside its
 * disks) and VMware's .vmx (a VM's folder).  The description is read by
 * vmsource.h's hostile-input parsers; the disk it names is then read
 * through qemu (backend-qemu.c), straight out of the tar for an OVA.
 *
 * A spec names the description, which stands for its only disk, or one
 * disk in it as PATH/DISK: DISK is the disk's file as the description
 * names it (its last component will do) or its number, from 1 in the
 * description's order ("guest.ova/guest-disk2.vmdk", "vm.vmx/1").
 *
 * Checked before qemu sees anything: the OVA's manifest digests of the
 * .ovf and of the disk read (a digest that does not match is refused,
 * IM_EXIT_DAMAGED); every file a .vmx or an OVF folder names lies in its
 * folder, and every VMDK's extents and parents too (vmdk_check); a VMDK
 * inside an OVA must be a sparse one holding its own descriptor (a text
 * descriptor would name extent files outside the tar) and not a delta
 * disk.  A disk stored gzip-compressed in an OVA (ovf:compression) cannot
 * be read in place: it is inflated once into a temporary file
 * ($TMPDIR, else /var/tmp), removed at the close.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "imager/backend.h"
#include "imager/vmsource.h"
#include "qemu-img.h"
#include "util.h"

/* ---- the spec: the description, and which disk ---- */

int vm_split_spec(const char *spec, char *file, size_t len, const char **disk)
{
	struct stat st;

	if (str_copy(file, len, spec) < 0)
		return -ENAMETOOLONG;
	*disk = NULL;
	if (stat(file, &st) == 0)
		return S_ISREG(st.st_mode) ? 0 : -ENOENT;
	for (char *slash = strrchr(file, '/'); slash && slash > file; slash = strrchr(file, '/')) {
		*slash = '\0';
		if (stat(file, &st) == 0) {
			if (!S_ISREG(st.st_mode))
				return -ENOENT;
			*disk = spec + (slash - file) + 1;
			return 0;
		}
	}
	return -ENOENT;
}

static const char *last_part(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Which of d's disks spec's DISK names (NULL: the only one). */
static int pick_disk(const char *file, const struct vm_desc *d, const char *disk, size_t *out,
		     struct im_err *err)
{
	char list[600] = "";

	if (!disk || !*disk) {
		if (d->ndisks == 1) {
			*out = 0;
			return 0;
		}
	} else {
		char *end;
		unsigned long n = strtoul(disk, &end, 10);
		if (*disk >= '1' && *disk <= '9' && !*end && n <= d->ndisks) {
			*out = n - 1;
			return 0;
		}
		for (size_t i = 0; i < d->ndisks; i++)
			if (!strcmp(disk, d->disks[i].file) || !strcmp(disk, last_part(d->disks[i].file))) {
				*out = i;
				return 0;
			}
	}
	for (size_t i = 0; i < d->ndisks && strlen(list) < sizeof(list) - 300; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s/%zu (%s)",
			 i ? ", " : "", last_part(file), i + 1, last_part(d->disks[i].file));
	if (!disk || !*disk)
		return im_errf(err, IM_EXIT_USAGE, -EINVAL,
			       "%s holds %zu disks: name one, as %s", file, d->ndisks, list);
	return im_errf(err, IM_EXIT_SOURCE, -ENOENT, "%s has no disk \"%s\": it holds %s", file,
		       disk, list);
}

/* ---- probes ---- */

/* A tar (ustar or GNU) whose first member is an .ovf, or starts with a
 * pax or long-name header (the .ovf's name then comes in it). */
static int probe_ova(const unsigned char *buf, size_t len)
{
	if (len < 512 || memcmp(buf + 257, "ustar", 5))
		return 0;
	size_t n = strnlen((const char *)buf, 100);
	if (n > 4 && !strncasecmp((const char *)buf + n - 4, ".ovf", 4))
		return 100;
	return buf[156] == 'x' || buf[156] == 'L' ? 60 : 0;
}

/* Text of the first len bytes, NUL-terminated into out (NULL when the
 * bytes hold a NUL: not text). */
static const char *as_text(const unsigned char *buf, size_t len, char *out, size_t outlen)
{
	size_t n = len < outlen - 1 ? len : outlen - 1;

	if (memchr(buf, 0, n))
		return NULL;
	memcpy(out, buf, n);
	out[n] = '\0';
	return out;
}

static int probe_ovf(const unsigned char *buf, size_t len)
{
	char text[4097];
	const char *t = as_text(buf, len, text, sizeof(text));

	if (!t)
		return 0;
	t += strspn(t, " \t\r\n");
	if (!strncmp(t, "\xef\xbb\xbf", 3))
		t += 3;
	if (strncmp(t, "<?xml", 5) && strncmp(t, "<Envelope", 9) && strncmp(t, "<ovf:Envelope", 13))
		return 0;
	return strstr(t, "Envelope") && strstr(t, "schemas.dmtf.org/ovf/envelope") ? 100 : 0;
}

static int probe_vmx(const unsigned char *buf, size_t len)
{
	char text[4097];
	const char *t = as_text(buf, len, text, sizeof(text));

	return t && (strstr(t, "virtualHW.version") || strstr(t, "config.version")) &&
	       strstr(t, " = \"") ? 100 : 0;
}

/* ---- opening the disk ---- */

/* The VMDK embedded in a sparse extent at [off, off+size) of fd: its
 * descriptor, for the create type and a parent. */
static int embedded_desc(int fd, uint64_t off, uint64_t size, struct vmdk_desc *d,
			 const char *what, struct im_err *err)
{
	unsigned char h[512];
	int r = util_pread_full(fd, h, sizeof(h), off);

	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "%s: %s", what, strerror(-r));
	uint64_t doff = 0, dsize = 0;
	for (int i = 7; i >= 0; i--) {
		doff = doff << 8 | h[28 + i];
		dsize = dsize << 8 | h[36 + i];
	}
	if (!doff || !dsize || dsize > VMDK_MAX_DESC / 512 || doff > size / 512 ||
	    dsize > size / 512 - doff)
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "%s: a sparse VMDK without a descriptor of its own inside it", what);
	char *text = malloc(dsize * 512 + 1);
	if (!text)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = util_pread_full(fd, text, dsize * 512, off + doff * 512);
	if (r == 0) {
		text[dsize * 512] = '\0';
		r = vmdk_desc_parse(text, strlen(text), d, err);
		if (r < 0)
			im_err_prefix(err, "%s: ", what);
	} else {
		r = im_errf(err, IM_EXIT_IO, r, "%s: %s", what, strerror(-r));
	}
	free(text);
	return r;
}

/* A disk file named by a description (already inside its folder). */
static int open_disk_file(struct bk *bk, const char *path, struct im_err *err)
{
	struct qemu_img img = { 0 };
	const char *format;

	FORWARD_ERR(bk_probe_format(path, &format, err));
	const struct bk_driver *drv = bk_driver_by_name(format);
	if (drv != &bk_vmdk && drv != &bk_vhd && drv != &bk_vhdx && drv != &bk_vdi)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "%s: a %s disk in a VM's description is not read through it: "
			       "give the disk file itself", path, format);
	if (drv == &bk_vmdk) {
		struct vmdk_desc d;
		unsigned depth;
		FORWARD_ERR(vmdk_check(path, &d, &depth, err));
		snprintf(bk->detail, sizeof(bk->detail), "%s", d.create_type);
	}
	img.format = bk_qemu_format(drv->name);
	img.label = drv->name;
	if (str_copy(img.file, sizeof(img.file), path) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: path too long", path);
	return qemu_serve(bk, &img, err);
}

/* Inflate [off, off+len) of fd (a gzip stream) into a new temporary file
 * out, at most max bytes. */
static int inflate_member(int fd, uint64_t off, uint64_t len, uint64_t max, const char *what,
			  char *out, size_t outlen, struct im_err *err)
{
	enum { IN = 1 << 20, OUT = 4 << 20 };
	unsigned char *in = malloc(IN), *buf = malloc(OUT);
	z_stream z = { 0 };
	uint64_t done = 0, written = 0;
	int ofd = -1, r = 0, zr = Z_OK;

	if (!in || !buf || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		goto out;
	}
	if ((r = tmp_file_name("ova-disk", out, outlen, err)) < 0)
		goto end;
	ofd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (ofd < 0) {
		r = im_errf(err, IM_EXIT_TARGET, -errno, "%s: %s", out, strerror(errno));
		goto end;
	}
	while (zr != Z_STREAM_END && r == 0) {
		size_t n = len - done < IN ? (size_t)(len - done) : IN;
		if (n == 0) {
			r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s: the gzip stream ends early", what);
			break;
		}
		if ((r = util_pread_full(fd, in, n, off + done)) < 0) {
			r = im_errf(err, IM_EXIT_IO, r, "%s: %s", what, strerror(-r));
			break;
		}
		done += n;
		z.next_in = in;
		z.avail_in = (uInt)n;
		do {
			z.next_out = buf;
			z.avail_out = OUT;
			zr = inflate(&z, Z_NO_FLUSH);
			if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
				r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s: not a valid gzip stream",
					    what);
				break;
			}
			size_t got = OUT - z.avail_out;
			if ((written += got) > max) {
				r = im_errf(err, IM_EXIT_SOURCE, -EFBIG,
					    "%s: inflates to more than %llu bytes, beyond what its disk "
					    "can hold", what, (unsigned long long)max);
				break;
			}
			if (got && (r = util_write_full(ofd, buf, got)) < 0)
				r = im_errf(err, IM_EXIT_TARGET, r, "%s: %s", out, strerror(-r));
		} while (r == 0 && z.avail_out == 0 && zr != Z_STREAM_END);
	}
end:
	inflateEnd(&z);
	if (ofd >= 0 && close(ofd) < 0 && r == 0)
		r = im_errf(err, IM_EXIT_TARGET, -errno, "%s: %s", out, strerror(errno));
	if (r < 0 && out[0])
		unlink(out);
out:
	free(in);
	free(buf);
	return r;
}

/* The disk of an OVA: member m, straight out of the tar. */
static int ova_disk(struct bk *bk, const char *file, const struct ova *o, size_t i,
		    struct im_err *err)
{
	const struct ova_member *m = &o->m[o->disk_member[i]];
	struct qemu_img img = { .ranged = true, .offset = m->offset, .size = m->size };
	unsigned char head[4096];
	char what[900];
	bool had_manifest;
	int fd, r;

	snprintf(what, sizeof(what), "%s/%s", file, m->name);
	if ((r = ova_verify(file, o, o->disk_member[i], &had_manifest, err)) < 0) {
		im_err_prefix(err, "%s: ", file);
		return r;
	}
	if (str_copy(img.file, sizeof(img.file), file) < 0)
		return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: path too long", file);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", file, strerror(errno));
	if (o->vm.disks[i].gzip) {
		uint64_t cap = o->vm.disks[i].capacity;
		uint64_t max = cap ? cap + cap / 8 + (64u << 20) : m->size * 64;
		r = inflate_member(fd, m->offset, m->size, max, what, img.file, sizeof(img.file), err);
		close(fd);
		if (r < 0)
			return r;
		snprintf(bk->detail, sizeof(bk->detail), "OVA disk %zu, gzip-inflated%s", i + 1,
			 had_manifest ? "" : ", no manifest");
		img.ranged = false;
		r = open_disk_file(bk, img.file, err);
		unlink(img.file);        /* qemu-nbd holds it open */
		return r;
	}
	memset(head, 0, sizeof(head));
	r = util_pread_full(fd, head, m->size < sizeof(head) ? m->size : sizeof(head), m->offset);
	if (r < 0) {
		close(fd);
		return im_errf(err, IM_EXIT_IO, r, "%s: %s", what, strerror(-r));
	}
	img.format = qemu_format_of(head, sizeof(head), &img.label);
	r = 0;
	if (!img.format)
		r = im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			    "%s: not a disk image imager reads in an OVA (VMDK, VHD, VHDX, VDI)", what);
	else if (!strcmp(img.format, "vmdk") && memcmp(head, "KDMV", 4))
		r = im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			    "%s: a VMDK descriptor file: its extents would be files outside the "
			    "OVA (unpack it with tar and open the .ovf)", what);
	else if (!strcmp(img.format, "vmdk")) {
		struct vmdk_desc d;
		r = embedded_desc(fd, m->offset, m->size, &d, what, err);
		if (r == 0 && d.parent_cid != VMDK_NO_PARENT)
			r = im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				    "%s: a snapshot (delta disk) whose parent is outside the OVA", what);
		if (r == 0)
			snprintf(bk->detail, sizeof(bk->detail), "OVA disk %zu, VMDK %s%s", i + 1,
				 d.create_type, had_manifest ? "" : ", no manifest");
	}
	close(fd);
	return r < 0 ? r : qemu_serve(bk, &img, err);
}

/* The description's file and the disk named after it (NULL: none). */
static int vm_spec(const char *spec, unsigned flags, const char *kind, char *file, size_t len,
		   const char **disk, struct im_err *err)
{
	if (flags & BK_OPEN_WRITE)
		return im_errf(err, IM_EXIT_TARGET, -EROFS,
			       "%s: %s is read as a source only; write to a raw or qcow2 disk", spec,
			       kind);
	if (vm_split_spec(spec, file, len, disk) < 0)
		return im_errf(err, IM_EXIT_SOURCE, -ENOENT, "%s: no such file", spec);
	return 0;
}

static int ova_open_bk(struct bk *bk, const char *spec, unsigned flags, struct im_err *err)
{
	char file[600];
	const char *disk;
	struct ova *o;
	size_t i;
	int r;

	FORWARD_ERR(vm_spec(spec, flags, "an OVA", file, sizeof(file), &disk, err));
	if (!(o = calloc(1, sizeof(*o))))
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = ova_open(file, o, err);
	if (r == 0)
		r = pick_disk(file, &o->vm, disk, &i, err);
	if (r == 0)
		r = ova_disk(bk, file, o, i, err);
	free(o);
	return r;
}

static int ovf_open_bk(struct bk *bk, const char *spec, unsigned flags, struct im_err *err)
{
	char file[600], (*files)[4096] = NULL;
	const char *disk;
	struct vm_desc *d = NULL;
	size_t i;
	int r;

	FORWARD_ERR(vm_spec(spec, flags, "an OVF", file, sizeof(file), &disk, err));
	files = calloc(VM_MAX_DISKS, sizeof(*files));
	d = calloc(1, sizeof(*d));
	if (!files || !d)
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	else
		r = vm_ovf_folder(file, d, files, err);
	if (r == 0)
		r = pick_disk(file, d, disk, &i, err);
	if (r == 0)
		r = open_disk_file(bk, files[i], err);
	free(files);
	free(d);
	return r;
}

static int read_vmx(const char *file, struct vm_desc *d, struct im_err *err)
{
	unsigned char *text;
	size_t len;
	int r = util_read_whole_file(file, &text, &len, VM_MAX_DESC);

	if (r < 0)
		return im_errf(err, r == -EFBIG ? IM_EXIT_SOURCE : IM_EXIT_IO, r, "%s: %s", file,
			       r == -EFBIG ? "too large for a .vmx" : strerror(-r));
	r = vm_vmx_parse((const char *)text, len, d, err);
	if (r < 0)
		im_err_prefix(err, "%s: ", file);
	free(text);
	return r;
}

static int vmx_open_bk(struct bk *bk, const char *spec, unsigned flags, struct im_err *err)
{
	char file[600], dir[600], path[4096];
	const char *disk;
	struct vm_desc *d;
	size_t i;
	int r;

	FORWARD_ERR(vm_spec(spec, flags, "a .vmx", file, sizeof(file), &disk, err));
	str_copy(dir, sizeof(dir), file);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		str_copy(dir, sizeof(dir), ".");
	if (!(d = calloc(1, sizeof(*d))))
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = read_vmx(file, d, err);
	if (r == 0)
		r = pick_disk(file, d, disk, &i, err);
	if (r == 0 && (r = vm_file_in_dir(dir, d->disks[i].file, path, sizeof(path), err)) < 0)
		im_err_prefix(err, "%s: ", file);
	if (r == 0)
		r = open_disk_file(bk, path, err);
	free(d);
	return r;
}

#define VM_DRIVER(NAME, PROBE, OPEN) {                                   \
	.name = NAME, .priv_size = QEMU_STATE_SIZE, .probe = PROBE,      \
	.open = OPEN, .pread = qemu_pread, .block_status = qemu_block_status, \
	.flush = qemu_flush, .close = qemu_close }

const struct bk_driver bk_ova = VM_DRIVER("ova", probe_ova, ova_open_bk);
const struct bk_driver bk_ovf = VM_DRIVER("ovf", probe_ovf, ovf_open_bk);
const struct bk_driver bk_vmx = VM_DRIVER("vmx", probe_vmx, vmx_open_bk);

/* ---- the whole description, for p2v ---- */

int bk_vm_describe(const char *spec, struct vm_desc *d, char specs[][600], size_t *n,
		   struct im_err *err)
{
	const struct bk_driver *drv;
	char file[600];
	const char *disk;
	const char *format;

	*n = 0;
	if (bk_is_uri(spec) || vm_split_spec(spec, file, sizeof(file), &disk) < 0 || disk)
		return 0;
	FORWARD_ERR(bk_probe_format(spec, &format, err));
	drv = bk_driver_by_name(format);
	if (drv == &bk_ova) {
		struct ova *o = calloc(1, sizeof(*o));
		int r = o ? ova_open(file, o, err) : im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		if (r == 0)
			*d = o->vm;
		free(o);
		FORWARD_ERR(r);
	} else if (drv == &bk_ovf) {
		char (*files)[4096] = calloc(VM_MAX_DISKS, sizeof(*files));
		int r = files ? vm_ovf_folder(file, d, files, err)
			      : im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		free(files);
		FORWARD_ERR(r);
	} else if (drv == &bk_vmx) {
		FORWARD_ERR(read_vmx(file, d, err));
	} else {
		return 0;
	}
	for (size_t i = 0; i < d->ndisks; i++)
		if (str_printf(specs[i], 600, "%s/%zu", file, i + 1) < 0)
			return im_errf(err, IM_EXIT_USAGE, -ENAMETOOLONG, "%s: path too long", file);
	*n = d->ndisks;
	return 1;
}
