/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Between backend-qemu.c (the child qemu-nbd) and the drivers that find
 * the disk inside a VM's description (backend-vm.c: OVA, OVF, .vmx). */
#ifndef IMAGER_IO_QEMU_IMG_H
#define IMAGER_IO_QEMU_IMG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "imager/backend.h"
#include "child.h"

/* What qemu is asked to open. */
struct qemu_img {
	const char *format;       /* qemu's driver: "vmdk", "vpc", "vhdx", "vdi" */
	const char *label;        /* for people: "VMDK", "VHD"... */
	char file[4096];          /* the host file */
	bool ranged;              /* the image is [offset, offset+size) of file (a tar member) */
	uint64_t offset, size;
};

/* The private state of every driver served by qemu-nbd. */
struct qemu_state {
	struct bk *nbd;           /* the export, through backend-nbd.c */
	struct child child;       /* qemu-nbd, in its private folder (child.h) */
};
#define QEMU_STATE_SIZE sizeof(struct qemu_state)

/* The calls of those drivers, passed to the export. */
int qemu_pread(struct bk *bk, void *buf, size_t len, uint64_t off);
int qemu_block_status(struct bk *bk, uint64_t off, uint64_t len, uint64_t *pnum);
int qemu_flush(struct bk *bk);
int qemu_close(struct bk *bk);

/* qemu's --image-opts for img (the format always named; a comma in the
 * path doubled).  Returns 0 or -ENAMETOOLONG. */
int qemu_img_opts(const struct qemu_img *img, char *out, size_t len);

/* Start qemu-nbd on img and open its export as bk's (bk's priv is a
 * struct qemu_state: the drivers of backend-qemu.c and backend-vm.c share
 * it).  Sets bk->size.  Returns 0 or -errno: qemu-nbd missing
 * (IM_EXIT_UNSUPP), qemu refusing the image (IM_EXIT_DAMAGED, its reason
 * quoted, bk->name and img->label named), no answer within bk->net's
 * timeout (IM_EXIT_IO). */
int qemu_serve(struct bk *bk, const struct qemu_img *img, struct im_err *err);

/* The probes of the image formats, for the drivers that look inside a tar
 * member: the format (qemu's driver name) whose magic buf starts with, or
 * NULL. */
const char *qemu_format_of(const unsigned char *buf, size_t len, const char **label);

/* A VM description's spec (backend-vm.c) as FILE, a regular file, and
 * the DISK after its '/' (NULL when spec is the file itself).  Returns 0,
 * or -ENOENT when no prefix of spec is a regular file, -ENAMETOOLONG. */
int vm_split_spec(const char *spec, char *file, size_t len, const char **disk);

#endif
