/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The target journal of restore and clone --resume (tjournal.h). */
#include "tjournal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "imager/backend.h"
#include "util.h"

static const char *const magic[] = { [TJNL_RESTORE] = "IMGRJNL\1", [TJNL_CLONE] = "IMGCJNL\1" };
static const char *const job[] = { [TJNL_RESTORE] = "restore", [TJNL_CLONE] = "clone" };

bool tjournal_path(const char *target, char *out, size_t n)
{
	struct stat st;
	const char *base = strrchr(target, '/');

	if (bk_is_uri(target))
		return false;
	if (stat(target, &st) == 0 && S_ISBLK(st.st_mode)) {
		mkdir("/var/lib/imager", 0755);
		mkdir("/var/lib/imager/resume", 0755);
		snprintf(out, n, "/var/lib/imager/resume/%s.jnl", base ? base + 1 : target);
		return true;
	}
	snprintf(out, n, "%s.imager-resume", target);
	return true;
}

int tjournal_write(struct tjournal *jn, uint32_t part, uint64_t pos, uint64_t bytes)
{
	unsigned char rec[TJNL_SIZE] = { 0 };

	memcpy(rec, magic[jn->kind], 8);
	put_le64(rec + 8, jn->identity);
	put_le64(rec + 16, jn->target_size);
	put_le32(rec + 24, part);
	put_le64(rec + 32, pos);
	put_le64(rec + 40, bytes);
	put_le64(rec + 56, XXH3_64bits(rec, 56));
	jn->mine = true;
	jn->written_ms = util_mono_ms();
	return util_write_file_atomic(jn->path, rec, sizeof(rec));
}

int tjournal_parse(struct tjournal *jn, const unsigned char *rec, size_t len, uint32_t nparts,
		   struct im_err *err)
{
	enum tjnl_kind other = jn->kind == TJNL_RESTORE ? TJNL_CLONE : TJNL_RESTORE;

	if (len != TJNL_SIZE || le64(rec + 56) != XXH3_64bits(rec, 56) || le32(rec + 28) ||
	    le64(rec + 48))
		return im_errf(err, IM_EXIT_TARGET, -EBADMSG, "not a %s journal, or damaged",
			       job[jn->kind]);
	if (!memcmp(rec, magic[other], 8))
		return im_errf(err, IM_EXIT_TARGET, -ESTALE,
			       "the interrupted job was a %s, not a %s; carry it on with imager %s --resume",
			       job[other], job[jn->kind], job[other]);
	if (memcmp(rec, magic[jn->kind], 8) || le32(rec + 24) > nparts)
		return im_errf(err, IM_EXIT_TARGET, -EBADMSG, "not a %s journal, or damaged",
			       job[jn->kind]);
	if (le64(rec + 8) != jn->identity)
		return im_errf(err, IM_EXIT_TARGET, -ESTALE, "the interrupted %s was of another %s",
			       job[jn->kind], jn->kind == TJNL_RESTORE ? "image"
			       : "source, or the source has changed since");
	jn->target_size = le64(rec + 16);
	jn->part = le32(rec + 24);
	jn->pos = le64(rec + 32);
	jn->bytes = le64(rec + 40);
	return 0;
}

int tjournal_read(struct tjournal *jn, uint32_t nparts, struct im_err *err)
{
	unsigned char *rec = NULL;
	size_t len = 0;
	int r = util_read_whole_file(jn->path, &rec, &len, 4096);

	if (r == -EFBIG)
		return im_errf(err, IM_EXIT_TARGET, -EBADMSG, "%s: not a %s journal, or damaged",
			       jn->path, job[jn->kind]);
	if (r < 0)
		return im_errf(err, IM_EXIT_TARGET, r,
			       "%s: %s: no interrupted %s to resume (%s without --resume)", jn->path,
			       strerror(-r), job[jn->kind], job[jn->kind]);
	r = tjournal_parse(jn, rec, len, nparts, err);
	free(rec);
	if (r < 0)
		im_err_prefix(err, "%s: ", jn->path);
	return r;
}

int tjournal_start(struct tjournal *jn, bool resume, const char *target, const char *format,
		   uint64_t size, struct im_err *err)
{
	if (strcmp(format, "raw")) {
		/* (a qcow2's tables are written when it closes: nothing to carry on) */
		jn->on = false;
		if (resume)
			return im_errf(err, IM_EXIT_TARGET, -ENOTSUP,
				       "%s: a %s target cannot be resumed, only a raw one", target,
				       format);
		return 0;
	}
	if (resume && jn->target_size != size)
		return im_errf(err, IM_EXIT_TARGET, -ESTALE,
			       "%s is not the target the interrupted %s wrote (%llu bytes, not %llu)",
			       target, job[jn->kind], (unsigned long long)size,
			       (unsigned long long)jn->target_size);
	if (jn->on && !resume) {
		jn->target_size = size;
		if (tjournal_write(jn, 0, 0, 0) < 0) {   /* (no journal: no resume) */
			jn->on = false;
			unlink(jn->path);
		}
	}
	return 0;
}
