/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Volumes in a libvirt storage pool.  See include/imager/volume.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libvirt/virterror.h>
#include <libxml/xmlwriter.h>

#include "imager/pools.h"
#include "imager/volume.h"

bool vol_pool_is_block(const char *t)
{
	static const char *const block[] = { "logical", "disk", "iscsi", "iscsi-direct", "scsi",
					     "mpath", "rbd", "sheepdog", "gluster", "vstorage", NULL };

	for (const char *const *b = block; *b; b++)
		if (!strcmp(t, *b))
			return true;
	return false;
}

/* The volume's XML, written with libxml2 (the name is escaped). */
static char *vol_xml(const char *name, uint64_t capacity, uint64_t allocation, const char *format)
{
	xmlBufferPtr buf = xmlBufferCreate();
	xmlTextWriterPtr w = buf ? xmlNewTextWriterMemory(buf, 0) : NULL;
	char cap[32], alloc[32];
	char *out = NULL;
	int r = 0;

	if (!w) {
		if (buf)
			xmlBufferFree(buf);
		return NULL;
	}
	snprintf(cap, sizeof(cap), "%" PRIu64, capacity);
	snprintf(alloc, sizeof(alloc), "%" PRIu64, allocation);
	r |= xmlTextWriterStartElement(w, BAD_CAST "volume");
	r |= xmlTextWriterWriteElement(w, BAD_CAST "name", BAD_CAST name);
	r |= xmlTextWriterStartElement(w, BAD_CAST "capacity");
	r |= xmlTextWriterWriteAttribute(w, BAD_CAST "unit", BAD_CAST "bytes");
	r |= xmlTextWriterWriteString(w, BAD_CAST cap);
	r |= xmlTextWriterEndElement(w);
	r |= xmlTextWriterStartElement(w, BAD_CAST "allocation");
	r |= xmlTextWriterWriteAttribute(w, BAD_CAST "unit", BAD_CAST "bytes");
	r |= xmlTextWriterWriteString(w, BAD_CAST alloc);
	r |= xmlTextWriterEndElement(w);
	if (format) {
		r |= xmlTextWriterStartElement(w, BAD_CAST "target");
		r |= xmlTextWriterStartElement(w, BAD_CAST "format");
		r |= xmlTextWriterWriteAttribute(w, BAD_CAST "type", BAD_CAST format);
		r |= xmlTextWriterEndElement(w);
		r |= xmlTextWriterEndElement(w);
	}
	r |= xmlTextWriterEndDocument(w);
	xmlFreeTextWriter(w);
	if (r >= 0)
		out = strdup((const char *)xmlBufferContent(buf));
	xmlBufferFree(buf);
	return out;
}

int vol_create(virStoragePoolPtr pool, const char *type, const char *name, uint64_t capacity,
	       const char *format, enum bk_prealloc prealloc, bool replace, virStorageVolPtr *out,
	       struct im_err *err)
{
	virStoragePoolInfo info;
	virStorageVolPtr old;
	unsigned flags = 0;
	uint64_t allocation = 0;
	char *xml;
	bool block;

	*out = NULL;
	/* (libvirt refuses a refresh while another volume of the pool is
	 * being made, a parallel job's: imager migrate; what it last knew is
	 * taken then) */
	(void)virStoragePoolRefresh(pool, 0);
	if (virStoragePoolGetInfo(pool, &info) < 0) {
		char why[512];

		/* (the message first: any libvirt call, GetName too, resets it) */
		snprintf(why, sizeof(why), "%s", host_last_error());
		return im_errf(err, IM_EXIT_TARGET, -EIO, "pool %s: %s", virStoragePoolGetName(pool),
			       why);
	}
	block = vol_pool_is_block(type);
	RETURN_IF(block && strcmp(format, "raw"), err, IM_EXIT_USAGE, -EINVAL,
		  "pool %s is a %s pool: its volumes are raw (--format raw)",
		  virStoragePoolGetName(pool), type);
	RETURN_IF(prealloc == BK_PREALLOC_METADATA && strcmp(format, "qcow2"), err, IM_EXIT_USAGE,
		  -EINVAL, "preallocation metadata is for qcow2");
	if ((old = virStorageVolLookupByName(pool, name))) {
		if (!replace) {
			virStorageVolFree(old);
			return im_errf(err, IM_EXIT_TARGET, -EEXIST,
				       "volume %s exists in pool %s (--force replaces it)", name,
				       virStoragePoolGetName(pool));
		}
		if (virStorageVolDelete(old, 0) < 0) {
			virStorageVolFree(old);
			return im_errf(err, IM_EXIT_TARGET, -EIO, "deleting the old volume %s: %s",
				       name, host_last_error());
		}
		virStorageVolFree(old);
		(void)virStoragePoolRefresh(pool, 0);
		(void)virStoragePoolGetInfo(pool, &info);
	}
	/* qcow2's tables take a little more than the capacity when full. */
	RETURN_IF(capacity + (strcmp(format, "qcow2") ? 0 : capacity / 512) > info.available,
		  err, IM_EXIT_TARGET, -ENOSPC,
		  "pool %s has %" PRIu64 " MiB available; the volume %s needs %" PRIu64 " MiB",
		  virStoragePoolGetName(pool), (uint64_t)(info.available >> 20), name,
		  capacity >> 20);
	if (block || prealloc == BK_PREALLOC_FALLOC || prealloc == BK_PREALLOC_FULL)
		allocation = capacity;
	else if (prealloc == BK_PREALLOC_METADATA)
		flags |= VIR_STORAGE_VOL_CREATE_PREALLOC_METADATA;
	if (!(xml = vol_xml(name, capacity, allocation, block ? NULL : format)))
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "writing the volume XML");
	*out = virStorageVolCreateXML(pool, xml, flags);
	free(xml);
	if (!*out) {
		char why[512];

		snprintf(why, sizeof(why), "%s", host_last_error());
		return im_errf(err, IM_EXIT_TARGET, -EIO, "creating volume %s in pool %s: %s", name,
			       virStoragePoolGetName(pool), why);
	}
	return 0;
}

struct upload {
	int fd;
	off_t size;
	const volatile sig_atomic_t *cancel;
	int err;
};

static int upload_chunk(virStreamPtr st, char *data, size_t n, void *opaque)
{
	struct upload *u = opaque;
	ssize_t r;

	(void)st;
	if (u->cancel && *u->cancel) {
		u->err = -EINTR;
		return -1;
	}
	r = read(u->fd, data, n);
	if (r < 0)
		u->err = -errno;
	return (int)r;
}

/* Sparse streams: where the file's next data or hole section is, by
 * SEEK_DATA / SEEK_HOLE (the position is left where it was). */
static int upload_in_data(virStreamPtr st, int *in_data, long long *length, void *opaque)
{
	struct upload *u = opaque;
	off_t cur = lseek(u->fd, 0, SEEK_CUR), data, hole;

	(void)st;
	if (cur < 0)
		goto bad;
	if (cur >= u->size) {
		*in_data = 0;
		*length = 0;
		return 0;
	}
	data = lseek(u->fd, cur, SEEK_DATA);
	if (data < 0 && errno == ENXIO) {           /* a hole up to the end */
		*in_data = 0;
		*length = u->size - cur;
	} else if (data < 0) {
		goto bad;
	} else if (data > cur) {
		*in_data = 0;
		*length = data - cur;
	} else {
		hole = lseek(u->fd, cur, SEEK_HOLE);
		if (hole < 0)
			goto bad;
		*in_data = 1;
		*length = (hole > u->size ? u->size : hole) - cur;
	}
	if (lseek(u->fd, cur, SEEK_SET) < 0)
		goto bad;
	return 0;
bad:
	u->err = -errno;
	return -1;
}

static int upload_skip(virStreamPtr st, long long length, void *opaque)
{
	struct upload *u = opaque;

	(void)st;
	if (lseek(u->fd, (off_t)length, SEEK_CUR) < 0) {
		u->err = -errno;
		return -1;
	}
	return 0;
}

int vol_upload(virConnectPtr conn, virStorageVolPtr vol, const char *path,
	       const volatile sig_atomic_t *cancel, struct im_err *err)
{
	struct upload u = { open(path, O_RDONLY | O_CLOEXEC), 0, cancel, 0 };
	virStreamPtr st;
	off_t size;
	int r;

	if (u.fd < 0)
		return im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
	size = u.size = lseek(u.fd, 0, SEEK_END);
	if (size < 0 || lseek(u.fd, 0, SEEK_SET) < 0) {
		r = -errno;
		close(u.fd);
		return im_errf(err, IM_EXIT_IO, r, "%s: %s", path, strerror(-r));
	}
	if (!(st = virStreamNew(conn, 0))) {
		close(u.fd);
		return im_errf(err, IM_EXIT_IO, -EIO, "upload stream: %s", host_last_error());
	}
	if (virStorageVolUpload(vol, st, 0, (unsigned long long)size,
				VIR_STORAGE_VOL_UPLOAD_SPARSE_STREAM) < 0 ||
	    virStreamSparseSendAll(st, upload_chunk, upload_in_data, upload_skip, &u) < 0 ||
	    virStreamFinish(st) < 0) {
		char m[512];

		snprintf(m, sizeof(m), "%s", host_last_error());
		(void)virStreamAbort(st);
		virStreamFree(st);
		close(u.fd);
		if (u.err == -EINTR)
			return im_errf(err, IM_EXIT_INTERRUPTED, -EINTR, "upload interrupted");
		if (!host_alive(conn))
			return im_errf(err, IM_EXIT_IO, -ETIMEDOUT,
				       "uploading %s to %s: libvirt stopped answering, or the connection "
				       "was lost (no answer to its keepalive within --timeout): %s",
				       path, virStorageVolGetName(vol), m);
		return im_errf(err, IM_EXIT_IO, u.err ? u.err : -EIO, "uploading %s to %s: %s", path,
			       virStorageVolGetName(vol), u.err ? strerror(-u.err) : m);
	}
	virStreamFree(st);
	close(u.fd);
	return 0;
}
