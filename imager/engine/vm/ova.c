/* SPDX-License-Identifier: GPL-2.0-or-later */
/* OVA packages (a tar) and OVF folders: the members' byte ranges, the
 * .ovf, and the manifest's digests (libcrypto's EVP).  Contract:
 * include/imager/vmsource.h.
 *
 * The tar is walked here, header by header with pread, rather than with
 * libarchive: libarchive does not reliably give a member's data offset in
 * the file (archive_read_header_position() is the header's, and pax and
 * GNU long-name headers come before it), and the offset is what qemu's
 * raw driver needs to read a disk straight out of the .ova. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "imager/vmsource.h"
#include "util.h"
#include "vmsource-int.h"

#define TAR_BLOCK 512
#define PAX_MAX   (64u << 10)   /* a pax header or GNU long name: at most 64 KiB */
#define TAR_MAX_HEADERS 4096    /* every header, pax, long names and folders included */

/* An octal field (blanks and NULs around), or base-256 (first byte 0x80). */
static int tar_num(const unsigned char *f, size_t len, uint64_t *v)
{
	uint64_t n = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		if (f[0] != 0x80)
			return -EINVAL;  /* negative, or more than 64 bits */
		for (i = 1; i < len; i++) {
			if (n >> 56)
				return -EINVAL;
			n = n << 8 | f[i];
		}
		*v = n;
		return 0;
	}
	while (i < len && f[i] == ' ')
		i++;
	if (i == len || f[i] < '0' || f[i] > '7')
		return -EINVAL;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (n >> 61)
			return -EINVAL;
		n = n << 3 | (uint64_t)(f[i] - '0');
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -EINVAL;
	*v = n;
	return 0;
}

static bool tar_sum_ok(const unsigned char *h)
{
	uint64_t want;
	unsigned long u = 0;
	long s = 0;

	if (tar_num(h + 148, 8, &want) < 0)
		return false;
	for (int i = 0; i < TAR_BLOCK; i++) {
		unsigned char c = i >= 148 && i < 156 ? ' ' : h[i];
		u += c;
		s += (signed char)c;
	}
	return want == u || (long)want == s;
}

/* A member's name: "./" dropped; absolute, "..", '/' inside refused. */
static int member_name(const char *ova, const char *raw, char *out, size_t outlen,
		       struct im_err *err)
{
	const char *n = raw;

	while (n[0] == '.' && n[1] == '/')
		n += 2;
	if (raw[0] == '/' || strchr(n, '/') || !strcmp(n, "..") || !strcmp(n, ".") || !n[0])
		return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
			       "%s: a tar with a path outside (member \"%.200s\"; an OVA is flat)", ova, raw);
	return vm_str_field(out, outlen, n, strlen(n), "an OVA member's name", err);
}

/* pax records "LEN key=value\n": path and size taken. */
static int pax_parse(const char *ova, const char *p, size_t len, char *path, size_t pathlen,
		     uint64_t *size, bool *has_size, struct im_err *err)
{
	size_t at = 0;

	while (at < len) {
		uint64_t rl;
		size_t i = at, kl;
		const char *k, *eq;
		while (i < len && p[i] >= '0' && p[i] <= '9' && i - at < 8)
			i++;
		if (i == at || i >= len || p[i] != ' ' || vm_parse_u64(p + at, i - at, &rl) < 0 ||
		    rl < (i - at) + 3 || rl > len - at || p[at + rl - 1] != '\n')
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s: a malformed pax header", ova);
		k = p + i + 1;
		eq = memchr(k, '=', (size_t)(p + at + rl - 1 - k));
		if (!eq)
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s: a malformed pax record", ova);
		kl = (size_t)(eq - k);
		{
			const char *v = eq + 1;
			size_t vl = (size_t)(p + at + rl - 1 - v);
			if (kl == 4 && !strncmp(k, "path", 4)) {
				if (vl >= pathlen || memchr(v, '\0', vl))
					return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
						       "%s: a member name of %zu bytes", ova, vl);
				memcpy(path, v, vl);
				path[vl] = '\0';
			} else if (kl == 4 && !strncmp(k, "size", 4)) {
				if (vm_parse_u64(v, vl, size) < 0)
					return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
						       "%s: a pax size that is not a number", ova);
				*has_size = true;
			}
		}
		at += rl;
	}
	return 0;
}

static int walk(int fd, const char *ova, uint64_t fsize, struct ova *o, struct im_err *err)
{
	unsigned char h[TAR_BLOCK];
	char next_name[4096] = "", raw[4096];
	uint64_t off = 0, next_size = 0;
	bool has_next_size = false;

	for (unsigned headers = 0;; headers++) {
		uint64_t size, data, span;
		char type;
		int r;

		if (off == fsize)
			break;  /* no end blocks: taken as the end */
		if (fsize - off < TAR_BLOCK)
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s: the tar is truncated (a part header at byte %llu)",
				       ova, (unsigned long long)off);
		r = util_pread_full(fd, h, TAR_BLOCK, off);
		if (r < 0)
			return im_errf(err, IM_EXIT_IO, r, "reading %s: %s", ova, strerror(-r));
		if (util_buf_is_zero(h, TAR_BLOCK))
			break;
		if (headers == TAR_MAX_HEADERS)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: more than %d tar headers", ova,
				       TAR_MAX_HEADERS);
		if (!tar_sum_ok(h))
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				       "%s: the tar header at byte %llu has a bad checksum", ova,
				       (unsigned long long)off);
		if (tar_num(h + 124, 12, &size) < 0)
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				       "%s: the tar header at byte %llu has a bad size", ova, (unsigned long long)off);
		type = (char)h[156];
		if (has_next_size && type != 'x' && type != 'g' && type != 'L')
			size = next_size;
		data = off + TAR_BLOCK;
		if (size > fsize - data)
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
				       "%s: the tar is truncated (a member of %llu bytes at byte %llu, past its end)",
				       ova, (unsigned long long)size, (unsigned long long)data);
		span = (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
		if (type == 'x' || type == 'L') {
			char *buf;
			if (size > PAX_MAX)
				return im_errf(err, IM_EXIT_SOURCE, -EINVAL,
					       "%s: a tar extended header of %llu bytes", ova, (unsigned long long)size);
			buf = malloc(size + 1);
			if (!buf)
				return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
			r = util_pread_full(fd, buf, size, data);
			if (r < 0) {
				free(buf);
				return im_errf(err, IM_EXIT_IO, r, "reading %s: %s", ova, strerror(-r));
			}
			buf[size] = '\0';
			if (type == 'L') {
				if (strlen(buf) >= sizeof(next_name)) {
					free(buf);
					return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: a member name too long", ova);
				}
				snprintf(next_name, sizeof(next_name), "%s", buf);
				r = 0;
			} else {
				r = pax_parse(ova, buf, size, next_name, sizeof(next_name), &next_size,
					      &has_next_size, err);
			}
			free(buf);
			if (r < 0)
				return r;
			off = data + span;
			continue;
		}
		if (type == 'g') {
			off = data + span;
			continue;
		}
		if (next_name[0]) {
			snprintf(raw, sizeof(raw), "%s", next_name);
		} else {
			char n[101], p[156];
			memcpy(n, h, 100);
			n[100] = '\0';
			memcpy(p, h + 345, 155);
			p[155] = '\0';
			/* POSIX ustar: a prefix; GNU's tar keeps other fields there */
			if (!memcmp(h + 257, "ustar\0", 6) && p[0])
				snprintf(raw, sizeof(raw), "%s/%s", p, n);
			else
				snprintf(raw, sizeof(raw), "%s", n);
		}
		next_name[0] = '\0';
		has_next_size = false;
		if (type == '5') {
			off = data + span;
			continue;
		}
		if (type != '0' && type != '\0' && type != '7')
			return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
				       "%s: tar member \"%.200s\" is not a plain file (type '%c')", ova, raw,
				       isprint((unsigned char)type) ? type : '?');
		if (o->n == OVA_MAX_MEMBERS)
			return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: more than %d members", ova,
				       OVA_MAX_MEMBERS);
		FORWARD_ERR(member_name(ova, raw, o->m[o->n].name, sizeof(o->m[o->n].name), err));
		for (size_t i = 0; i < o->n; i++)
			if (!strcmp(o->m[i].name, o->m[o->n].name))
				return im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s: member %s is in the tar twice",
					       ova, o->m[i].name);
		o->m[o->n].offset = data;
		o->m[o->n].size = size;
		o->n++;
		off = data + span;
		if (off > fsize)
			off = fsize;  /* the last member's padding may be missing */
	}
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcasecmp(s + a - b, suffix);
}

static int read_member(int fd, const char *ova, const struct ova_member *m, uint64_t max,
		       char **buf, struct im_err *err)
{
	int r;

	if (m->size > max)
		return im_errf(err, IM_EXIT_SOURCE, -EFBIG, "%s: %s is %llu bytes, more than %llu", ova,
			       m->name, (unsigned long long)m->size, (unsigned long long)max);
	*buf = malloc(m->size + 1);
	if (!*buf)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	r = util_pread_full(fd, *buf, m->size, m->offset);
	if (r < 0) {
		free(*buf);
		*buf = NULL;
		return im_errf(err, IM_EXIT_IO, r, "reading %s in %s: %s", m->name, ova, strerror(-r));
	}
	(*buf)[m->size] = '\0';
	return 0;
}

int ova_open(const char *path, struct ova *o, struct im_err *err)
{
	uint64_t size;
	char *xml = NULL;
	int fd, r;

	memset(o, 0, sizeof(*o));
	o->ovf = o->mf = -1;
	for (size_t i = 0; i < VM_MAX_DISKS; i++)
		o->disk_member[i] = -1;
	fd = vm_open_file(path, &size, err);
	if (fd < 0)
		return fd;
	r = walk(fd, path, size, o, err);
	for (size_t i = 0; r == 0 && i < o->n; i++) {
		int *slot = ends_with(o->m[i].name, ".ovf") ? &o->ovf :
			    ends_with(o->m[i].name, ".mf") ? &o->mf : NULL;
		if (!slot)
			continue;
		if (*slot >= 0)
			r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s holds two %s files: %s and %s", path,
				    slot == &o->ovf ? ".ovf" : ".mf", o->m[*slot].name, o->m[i].name);
		*slot = (int)i;
	}
	if (r == 0 && o->ovf < 0)
		r = im_errf(err, IM_EXIT_SOURCE, -EINVAL, "%s holds no .ovf file (is it an OVA?)", path);
	if (r == 0)
		r = read_member(fd, path, &o->m[o->ovf], VM_MAX_DESC, &xml, err);
	close(fd);
	if (r == 0) {
		r = vm_ovf_parse(xml, o->m[o->ovf].size, &o->vm, err);
		if (r < 0)
			im_err_prefix(err, "%s: %s: ", path, o->m[o->ovf].name);
	}
	free(xml);
	for (size_t k = 0; r == 0 && k < o->vm.ndisks; k++) {
		for (size_t i = 0; i < o->n; i++)
			if (!strcmp(o->m[i].name, o->vm.disks[k].file))
				o->disk_member[k] = (int)i;
		if (o->disk_member[k] < 0)
			r = im_errf(err, IM_EXIT_SOURCE, -ENOENT, "%s has no member %s (disk %zu of its OVF)",
				    path, o->vm.disks[k].file, k + 1);
	}
	if (r < 0) {
		memset(o, 0, sizeof(*o));
		o->ovf = o->mf = -1;
		for (size_t i = 0; i < VM_MAX_DISKS; i++)
			o->disk_member[i] = -1;
	}
	return r;
}

/* ---- manifests ---- */

#define MF_MAX_LINES 256

struct mf_line {
	char name[256];
	const EVP_MD *md;
	char alg[8];
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	bool used;
};

/* "SHA256(name)= hex" (blanks allowed around "(", ")" and "="). */
static int mf_parse(const char *mf, const char *text, size_t len, struct mf_line *l, size_t *n,
		    struct im_err *err)
{
	unsigned line = 0;

	*n = 0;
	if (memchr(text, '\0', len))
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "manifest %s: a NUL byte", mf);
	for (size_t at = 0; at < len;) {
		const char *s = text + at, *nl = memchr(s, '\n', len - at), *e, *p, *q;
		size_t sl = nl ? (size_t)(nl - s) : len - at, hl;
		struct mf_line *m;
		at += sl + 1;
		line++;
		while (sl && (s[sl - 1] == '\r' || s[sl - 1] == ' ' || s[sl - 1] == '\t'))
			sl--;
		while (sl && (*s == ' ' || *s == '\t'))
			s++, sl--;
		if (!sl)
			continue;
		e = s + sl;
		if (*n == MF_MAX_LINES)
			return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "manifest %s: more than %d lines", mf,
				       MF_MAX_LINES);
		m = &l[*n];
		memset(m, 0, sizeof(*m));
		p = memchr(s, '(', sl);
		q = p ? memchr(p, ')', (size_t)(e - p)) : NULL;
		if (!p || !q)
			goto bad;
		{
			const char *a = p;
			while (a > s && a[-1] == ' ')
				a--;
			if ((size_t)(a - s) == 4 && !strncmp(s, "SHA1", 4))
				m->md = EVP_sha1();
			else if ((size_t)(a - s) == 6 && !strncmp(s, "SHA256", 6))
				m->md = EVP_sha256();
			else if ((size_t)(a - s) == 6 && !strncmp(s, "SHA512", 6))
				m->md = EVP_sha512();
			else
				goto bad;
			memcpy(m->alg, s, (size_t)(a - s));
		}
		if (q - p - 1 <= 0 || (size_t)(q - p - 1) >= sizeof(m->name))
			goto bad;
		memcpy(m->name, p + 1, (size_t)(q - p - 1));
		for (const char *c = m->name; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				goto bad;
		p = q + 1;
		while (p < e && *p == ' ')
			p++;
		if (p == e || *p != '=')
			goto bad;
		p++;
		while (p < e && *p == ' ')
			p++;
		hl = (size_t)(e - p);
		if (hl != 2 * (size_t)EVP_MD_size(m->md))
			goto bad;
		for (size_t i = 0; i < hl; i++) {
			if (!isxdigit((unsigned char)p[i]))
				goto bad;
			m->hex[i] = (char)tolower((unsigned char)p[i]);
		}
		for (size_t i = 0; i < *n; i++)
			if (!strcmp(l[i].name, m->name))
				return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "manifest %s lists %s twice", mf,
					       m->name);
		(*n)++;
		continue;
bad:
		return im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			       "manifest %s: line %u is not \"SHA256(name)= digest\"", mf, line);
	}
	return 0;
}

/* The digest of bytes [off, off+size) of fd, compared with m's. */
static int mf_check(int fd, uint64_t off, uint64_t size, const struct mf_line *m, const char *mf,
		    struct im_err *err)
{
	unsigned char md[EVP_MAX_MD_SIZE], *buf;
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	const size_t chunk = 1u << 20;
	int r = 0;

	buf = malloc(chunk);
	if (!ctx || !buf || EVP_DigestInit_ex(ctx, m->md, NULL) != 1) {
		r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "%s: the digest cannot start", m->alg);
		goto out;
	}
	for (uint64_t done = 0; done < size;) {
		size_t n = size - done < chunk ? (size_t)(size - done) : chunk;
		r = util_pread_full(fd, buf, n, off + done);
		if (r == -EIO) {
			r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "%s is truncated", m->name);
			goto out;
		}
		if (r < 0) {
			r = im_errf(err, IM_EXIT_IO, r, "reading %s: %s", m->name, strerror(-r));
			goto out;
		}
		EVP_DigestUpdate(ctx, buf, n);
		done += n;
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	for (unsigned i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (strcmp(hex, m->hex))
		r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG,
			    "manifest digest of %s does not match (%s %s, the manifest %s says %s)", m->name,
			    m->alg, hex, mf, m->hex);
out:
	free(buf);
	EVP_MD_CTX_free(ctx);
	return r;
}

static struct mf_line *mf_find(struct mf_line *l, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(l[i].name, name))
			return &l[i];
	return NULL;
}

int ova_verify(const char *path, const struct ova *o, int member, bool *had_manifest,
	       struct im_err *err)
{
	struct mf_line *l = NULL;
	char *text = NULL;
	size_t n = 0;
	int fd, r;

	*had_manifest = false;
	if (o->mf < 0)
		return 0;
	*had_manifest = true;
	if (member >= (int)o->n || member < -1 || o->ovf < 0)
		return im_errf(err, IM_EXIT_INTERNAL, -EINVAL, "ova_verify: no member %d", member);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", path, strerror(errno));
	l = calloc(MF_MAX_LINES, sizeof(*l));
	r = l ? read_member(fd, path, &o->m[o->mf], OVA_MAX_MF, &text, err)
	      : im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	if (r == 0)
		r = mf_parse(o->m[o->mf].name, text, o->m[o->mf].size, l, &n, err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		const struct ova_member *m = NULL;
		for (size_t k = 0; k < o->n; k++)
			if (!strcmp(o->m[k].name, l[i].name))
				m = &o->m[k];
		if (!m || m == &o->m[o->mf])
			r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "manifest %s lists %s, which is not in %s",
				    o->m[o->mf].name, l[i].name, path);
	}
	/* the .ovf, then the member(s) asked for */
	for (int k = -1; r == 0 && k < (int)o->n; k++) {
		int idx = k < 0 ? o->ovf : k;
		struct mf_line *m;
		bool must = k < 0 || k == member;
		if (k >= 0 && idx == o->ovf)
			continue;
		if (member == -1 && k >= 0)
			for (size_t dk = 0; dk < o->vm.ndisks; dk++)
				must = must || o->disk_member[dk] == idx;
		m = mf_find(l, n, o->m[idx].name);
		if (!m) {
			if (must)
				r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "manifest %s does not list %s",
					    o->m[o->mf].name, o->m[idx].name);
			continue;
		}
		if (k >= 0 && member >= 0 && k != member)
			continue;
		r = mf_check(fd, o->m[idx].offset, o->m[idx].size, m, o->m[o->mf].name, err);
	}
	close(fd);
	free(text);
	free(l);
	return r;
}

int vm_ovf_folder(const char *ovf_path, struct vm_desc *d, char files[][4096], struct im_err *err)
{
	char dir[PATH_MAX], mf[PATH_MAX];
	struct mf_line *l = NULL;
	unsigned char *buf = NULL;
	size_t len, n = 0;
	int r;

	memset(d, 0, sizeof(*d));
	if (vm_dirname(ovf_path, dir, sizeof(dir)) < 0 || strlen(ovf_path) + 1 >= sizeof(mf))
		return im_errf(err, IM_EXIT_SOURCE, -ENAMETOOLONG, "%s: path too long", ovf_path);
	r = util_read_whole_file(ovf_path, &buf, &len, VM_MAX_DESC);
	if (r < 0)
		return im_errf(err, r == -ENOENT ? IM_EXIT_SOURCE : r == -EFBIG ? IM_EXIT_SOURCE : IM_EXIT_IO,
			       r, "%s: %s", ovf_path, r == -EFBIG ? "too large for an OVF" : strerror(-r));
	r = vm_ovf_parse((const char *)buf, len, d, err);
	free(buf);
	if (r < 0) {
		im_err_prefix(err, "%s: ", ovf_path);
		return r;
	}
	for (size_t k = 0; k < d->ndisks; k++) {
		r = vm_file_in_dir(dir, d->disks[k].file, files[k], 4096, err);
		if (r < 0)
			goto fail;
	}
	snprintf(mf, sizeof(mf), "%s", ovf_path);
	if (ends_with(mf, ".ovf"))
		strcpy(mf + strlen(mf) - 4, ".mf");
	else
		strcat(mf, ".mf");
	if (access(mf, F_OK) < 0)
		return 0;
	r = util_read_whole_file(mf, &buf, &len, OVA_MAX_MF);
	if (r < 0) {
		r = im_errf(err, IM_EXIT_SOURCE, r, "%s: %s", mf, strerror(-r));
		goto fail;
	}
	l = calloc(MF_MAX_LINES, sizeof(*l));
	r = l ? mf_parse(mf, (const char *)buf, len, l, &n, err)
	      : im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	free(buf);
	/* every listed file exists beside it; the .ovf and each disk listed and matching */
	for (size_t i = 0; r == 0 && i < n; i++) {
		char real[PATH_MAX];
		struct im_err e2 = { 0 };
		if (vm_file_in_dir(dir, l[i].name, real, sizeof(real), &e2) < 0)
			r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "manifest %s lists %s, which is not in %s",
				    mf, l[i].name, dir);
	}
	for (size_t k = 0; r == 0 && k <= d->ndisks; k++) {
		const char *file = k == d->ndisks ? ovf_path : files[k];
		const char *name = k == d->ndisks ? vm_basename(ovf_path) : d->disks[k].file;
		struct mf_line *m = mf_find(l, n, name);
		struct stat st;
		int fd;
		if (!m) {
			r = im_errf(err, IM_EXIT_DAMAGED, -EBADMSG, "manifest %s does not list %s", mf, name);
			break;
		}
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0) {
			r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", file, strerror(errno));
			if (fd >= 0)
				close(fd);
			break;
		}
		r = mf_check(fd, 0, (uint64_t)st.st_size, m, mf, err);
		close(fd);
	}
	free(l);
	if (r == 0)
		return 0;
fail:
	memset(d, 0, sizeof(*d));
	return r;
}
