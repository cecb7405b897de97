/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The virtio-win driver collection (contract in include/imager/virtiowin.h).
 * A folder is walked here; an ISO image is read with libarchive, which
 * knows ISO 9660 with its Rock Ridge and Joliet names, and only the picked
 * files are extracted.
 */
#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imager/virtiowin.h"
#include "convtext.h"
#include "util.h"

#define VW_MAX_FILES 100000
#define VW_MAX_DEPTH 8

/* ---- names ---- */

/* Older collections' names for the same folders. */
static const char *const os_alias[][2] = {
	{ "winxp", "xp" },     { "win2003", "2k3" },   { "win2008", "2k8" },
	{ "win7", "w7" },      { "win2008r2", "2k8r2" }, { "win8", "w8" },
	{ "win2012", "2k12" }, { "win8.1", "w8.1" },   { "win2012r2", "2k12r2" },
	{ "win10", "w10" },    { "win11", "w11" },     { "win2016", "2k16" },
	{ "win2019", "2k19" }, { "win2022", "2k22" },  { "win2025", "2k25" },
};
static const char *const os_names[] = { "xp",   "2k3",    "vista", "2k8", "w7",   "2k8r2",
					"w8",   "2k12",   "w8.1",  "2k12r2", "w10", "w11",
					"2k16", "2k19",   "2k22",  "2k25" };

/* The canonical folder name for a path element, or NULL. */
static const char *os_canon(const char *elem)
{
	for (size_t i = 0; i < sizeof(os_names) / sizeof(os_names[0]); i++)
		if (!strcasecmp(elem, os_names[i]))
			return os_names[i];
	for (size_t i = 0; i < sizeof(os_alias) / sizeof(os_alias[0]); i++)
		if (!strcasecmp(elem, os_alias[i][0]))
			return os_alias[i][1];
	return NULL;
}

static const char *arch_canon(const char *elem)
{
	if (!strcasecmp(elem, "amd64"))
		return "amd64";
	if (!strcasecmp(elem, "x86") || !strcasecmp(elem, "i386"))
		return "x86";
	if (!strcasecmp(elem, "arm64"))
		return "ARM64";
	return NULL;
}

const char *vw_arch_dir(const char *arch)
{
	if (!arch)
		return NULL;
	if (!strcmp(arch, "x86_64"))
		return "amd64";
	if (!strcmp(arch, "i386") || !strcmp(arch, "i686"))
		return "x86";
	if (!strcmp(arch, "aarch64"))
		return "ARM64";
	return NULL;
}

size_t vw_os_candidates(int major, int minor, bool server, int build, const char **out)
{
	size_t n = 0;
#define ADD(s) (out[n++] = (s))
	if (major == 5 && minor == 1) {
		ADD("xp");
	} else if (major == 5 && minor == 2) {
		ADD("2k3");            /* Server 2003, and XP x64 (same kernel) */
		if (!server)
			ADD("xp");
	} else if (major == 6 && minor == 0) {
		if (!server)
			ADD("vista");
		ADD("2k8");
	} else if (major == 6 && minor == 1) {
		ADD(server ? "2k8r2" : "w7");
	} else if (major == 6 && minor == 2) {
		ADD(server ? "2k12" : "w8");
	} else if (major == 6 && minor == 3) {
		ADD(server ? "2k12r2" : "w8.1");
	} else if (major == 10 && minor == 0) {
		if (!server) {
			if (build >= 22000)
				ADD("w11");
			ADD("w10");
		} else {
			if (build >= 26100)
				ADD("2k25");
			if (build >= 20348)
				ADD("2k22");
			if (build >= 17763)
				ADD("2k19");
			ADD("2k16");
		}
	}
#undef ADD
	return n;
}

/* ---- picking ---- */

/* Split a relative path into at most max elements (in buf). */
static size_t split_path(const char *path, char *buf, size_t len, char **el, size_t max)
{
	size_t n = 0;
	char *save = NULL, *tok;

	snprintf(buf, len, "%s", path);
	for (tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		if (!strcmp(tok, "."))
			continue;
		if (n == max)
			return max + 1;
		el[n++] = tok;
	}
	return n;
}

/* Does the folder of path hold drivers, and for which OS and arch? */
static bool driver_dir(const char *path, const char **os, const char **arch)
{
	char buf[4096], *el[32];
	size_t n = split_path(path, buf, sizeof(buf), el, 32);

	if (n < 4 || n > 32)
		return false;
	/* by OS: .../by-os/ARCH/OS/FILE */
	if (!strcasecmp(el[n - 4], "by-os") && (*arch = arch_canon(el[n - 3])) &&
	    (*os = os_canon(el[n - 2])))
		return true;
	/* by driver: .../DRIVER/OS/ARCH/FILE */
	if ((*os = os_canon(el[n - 3])) && (*arch = arch_canon(el[n - 2])))
		return true;
	return false;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static bool has_ext(const char *name, const char *ext)
{
	size_t a = strlen(name), b = strlen(ext);
	return a > b && !strcasecmp(name + a - b, ext);
}

static char *lower_dup(const char *s)
{
	char *d = strdup(s);
	for (char *p = d; p && *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return d;
}

/* A name that can become a file name in the guest as it is: letters,
 * digits, '.', '_', '-', not starting with '.' (names on an ISO are
 * hostile: "..", "a\\b", control characters). */
static bool safe_name(const char *s)
{
	if (!*s || *s == '.' || strlen(s) > 128)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' && *s != '-')
			return false;
	return true;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool agent_name(const char *name, const char *arch)
{
	static const char *const x64[] = { "qemu-ga-x86_64.msi", "qemu-ga-x64.msi", "rhev-qga64.msi" };
	static const char *const x86[] = { "qemu-ga-i386.msi", "qemu-ga-x86.msi", "rhev-qga.msi" };
	const char *const *l = !strcmp(arch, "amd64") ? x64 : !strcmp(arch, "x86") ? x86 : NULL;
	for (size_t i = 0; l && i < 3; i++)
		if (!strcasecmp(name, l[i]))
			return true;
	return false;
}

void vw_set_free(struct vw_set *set)
{
	for (size_t i = 0; i < set->nfiles; i++) {
		free(set->files[i].rel);
		free(set->files[i].name);
		free(set->files[i].local);
	}
	free(set->files);
	free(set->agent.rel);
	free(set->agent.name);
	free(set->agent.local);
	memset(set, 0, sizeof(*set));
}

const struct vw_file *vw_set_find(const struct vw_set *set, const char *name)
{
	for (size_t i = 0; i < set->nfiles; i++)
		if (!strcmp(set->files[i].name, name))
			return &set->files[i];
	return NULL;
}

static int add_file(struct vw_set *set, const char *rel)
{
	char *name = lower_dup(base_name(rel));
	struct vw_file *f;

	if (!name)
		return -ENOMEM;
	if (vw_set_find(set, name)) {   /* the first (sorted) path wins */
		free(name);
		return 0;
	}
	if (!(f = realloc(set->files, (set->nfiles + 1) * sizeof(*f)))) {
		free(name);
		return -ENOMEM;
	}
	set->files = f;
	f = &set->files[set->nfiles];
	memset(f, 0, sizeof(*f));
	f->name = name;
	if (!(f->rel = strdup(rel)))
		return -ENOMEM;
	set->nfiles++;
	return 0;
}

static int not_virtio_win(const char *src, struct im_err *err)
{
	return im_errf(err, IM_EXIT_SOURCE, -ENOENT,
		       "%s is not virtio-win: it has no viostor or vioscsi driver folder "
		       "(DRIVER/OS/ARCH/ or drivers/by-os/ARCH/OS/)", src);
}

int vw_check(const char *path, struct im_err *err)
{
	struct vw_source s;
	bool is_vw = false;
	int r;

	FORWARD_ERR(vw_open(path, &s, err));
	for (size_t i = 0; i < s.npaths && !is_vw; i++) {
		const char *b = base_name(s.paths[i]), *os, *a;
		is_vw = driver_dir(s.paths[i], &os, &a) &&
			(!strcasecmp(b, "viostor.sys") || !strcasecmp(b, "vioscsi.sys"));
	}
	r = is_vw ? 0 : not_virtio_win(path, err);
	vw_close(&s);
	return r;
}

#define NOS (sizeof(os_names) / sizeof(os_names[0]))

/* Which OS folder to take: the first of cand[] that holds the boot driver
 * for this architecture (ncand when none); have[] lists the folders that
 * do, for the message.  *is_vw: a viostor or vioscsi driver is anywhere. */
static size_t pick_folder(char *const *paths, size_t n, const char *want, const char *needsys,
			  const char *const *cand, size_t ncand, bool *is_vw, char *have, size_t hlen)
{
	bool seen[NOS] = { false };
	size_t pick = ncand;
	const char *os, *a;

	*is_vw = false;
	for (size_t i = 0; i < n; i++) {
		const char *b = base_name(paths[i]);
		if (!driver_dir(paths[i], &os, &a))
			continue;
		if (!strcasecmp(b, "viostor.sys") || !strcasecmp(b, "vioscsi.sys"))
			*is_vw = true;
		if (want && !strcmp(a, want) && !strcasecmp(b, needsys)) {
			for (size_t k = 0; k < NOS; k++)
				if (!strcmp(os, os_names[k]))
					seen[k] = true;
			for (size_t k = 0; k < pick; k++)
				if (!strcmp(os, cand[k]))
					pick = k;
		}
	}
	have[0] = '\0';
	for (size_t k = 0; k < NOS; k++)
		if (seen[k])
			snprintf(have + strlen(have), hlen - strlen(have), " %s", os_names[k]);
	return pick;
}

/* Every file of the picked folder (no .pdb), and the agent installer,
 * taken in sorted order so the choice is stable.  Returns 0 or -ENOMEM. */
static int collect_files(char *const *paths, size_t n, struct vw_set *set)
{
	const char *os, *a;
	char **sorted;
	int r = 0;

	if (!(sorted = malloc((n ? n : 1) * sizeof(*sorted))))
		return -ENOMEM;
	memcpy(sorted, paths, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_str);
	for (size_t i = 0; i < n && !r; i++) {
		const char *b = base_name(sorted[i]);
		if (!safe_name(b))
			continue;
		if (agent_name(b, set->arch) && !set->agent.rel) {
			if (!(set->agent.rel = strdup(sorted[i])) || !(set->agent.name = lower_dup(b)))
				r = -ENOMEM;
			continue;
		}
		if (!driver_dir(sorted[i], &os, &a) || strcmp(os, set->os) || strcmp(a, set->arch))
			continue;
		if (has_ext(b, ".pdb"))
			continue;
		r = add_file(set, sorted[i]);
	}
	free(sorted);
	return r;
}

/* fwcfg drives the fw_cfg device; qemufwcfg is only a stub and the two
 * conflict: keep fwcfg. */
static void drop_qemufwcfg(struct vw_set *set)
{
	if (!vw_set_find(set, "fwcfg.inf"))
		return;
	for (size_t i = 0; i < set->nfiles;) {
		if (!strncmp(set->files[i].name, "qemufwcfg.", 10)) {
			free(set->files[i].rel);
			free(set->files[i].name);
			free(set->files[i].local);
			memmove(&set->files[i], &set->files[i + 1],
				(set->nfiles - i - 1) * sizeof(set->files[0]));
			set->nfiles--;
		} else {
			i++;
		}
	}
}

/* set->drivers: the packages (.inf names), sorted, comma separated. */
static void list_packages(struct vw_set *set)
{
	char **infs = calloc(set->nfiles + 1, sizeof(*infs));
	size_t ninf = 0;

	for (size_t i = 0; infs && i < set->nfiles; i++)
		if (has_ext(set->files[i].name, ".inf"))
			infs[ninf++] = set->files[i].name;
	if (infs)
		qsort(infs, ninf, sizeof(*infs), cmp_str);
	for (size_t i = 0; i < ninf; i++) {
		size_t l = strlen(infs[i]), used = strlen(set->drivers);
		if (used + l + 2 > sizeof(set->drivers))
			break;
		snprintf(set->drivers + used, sizeof(set->drivers) - used, "%s%.*s", used ? "," : "",
			 (int)(l - 4), infs[i]);
	}
	free(infs);
}

/* Why no folder fits: the message names what was looked for and what is there. */
static int no_folder(const char *src, const char *need, int major, int minor, bool server,
		     int build, const char *const *cand, size_t ncand, const char *want,
		     const char *needsys, const char *have, struct im_err *err)
{
	char list[96] = "";

	for (size_t k = 0; k < ncand; k++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", k ? " or " : "",
			 cand[k]);
	return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
		       "%s has no %s driver for this Windows (NT %d.%d%s, build %d: folder %s, "
		       "%s); it has %s for %s:%s", src, need, major, minor,
		       server ? " server" : "", build, list, want, needsys, want,
		       have[0] ? have : " nothing");
}

int vw_select(char *const *paths, size_t n, const char *src, const char *arch, int major,
	      int minor, bool server, int build, const char *need, struct vw_set *set,
	      struct im_err *err)
{
	const char *cand[VW_MAX_CANDIDATES], *want = vw_arch_dir(arch);
	char have[256], needsys[32], needinf[32];
	size_t ncand = vw_os_candidates(major, minor, server, build, cand), pick;
	bool is_vw;
	int r;

	memset(set, 0, sizeof(*set));
	snprintf(needsys, sizeof(needsys), "%s.sys", need);
	snprintf(needinf, sizeof(needinf), "%s.inf", need);
	pick = pick_folder(paths, n, want, needsys, cand, ncand, &is_vw, have, sizeof(have));
	if (!is_vw)
		return not_virtio_win(src, err);
	if (!want)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "virtio-win has no drivers for the %s architecture", arch);
	if (!ncand)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP,
			       "Windows NT %d.%d is older than any virtio-win driver", major, minor);
	if (pick == ncand)
		return no_folder(src, need, major, minor, server, build, cand, ncand, want, needsys,
				 have, err);
	snprintf(set->os, sizeof(set->os), "%s", cand[pick]);
	snprintf(set->arch, sizeof(set->arch), "%s", want);
	set->fallback = pick > 0;
	if ((r = collect_files(paths, n, set)) < 0) {
		vw_set_free(set);
		return im_errf(err, IM_EXIT_INTERNAL, r, "out of memory");
	}
	drop_qemufwcfg(set);
	if (!vw_set_find(set, needsys) || !vw_set_find(set, needinf)) {
		r = im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "%s: %s/%s for %s lacks %s", src, set->os,
			    want, need, vw_set_find(set, needsys) ? needinf : needsys);
		vw_set_free(set);
		return r;
	}
	list_packages(set);
	return 0;
}

/* ---- sources ---- */

static int push_path(struct vw_source *s, const char *rel)
{
	char **p;
	if (s->npaths >= VW_MAX_FILES)
		return -EMFILE;
	if (!(p = realloc(s->paths, (s->npaths + 1) * sizeof(*p))))
		return -ENOMEM;
	s->paths = p;
	if (!(p[s->npaths] = strdup(rel)))
		return -ENOMEM;
	s->npaths++;
	return 0;
}

/* Walk a folder, following links (the package links its by-os files to the
 * by-driver ones), to a bounded depth. */
static int walk(struct vw_source *s, const char *top, const char *rel, int depth)
{
	char dir[4096], sub[4096], full[4096];
	struct dirent *d;
	DIR *dh;
	int r = 0;

	if (depth > VW_MAX_DEPTH)
		return -EMFILE;
	snprintf(dir, sizeof(dir), "%s%s%s", top, rel[0] ? "/" : "", rel);
	if (!(dh = opendir(dir)))
		return -errno;
	while (!r && (d = readdir(dh))) {
		struct stat st;
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", d->d_name) >=
			    sizeof(sub) ||
		    (size_t)snprintf(full, sizeof(full), "%s/%s", top, sub) >= sizeof(full))
			continue;
		if (stat(full, &st))
			continue;          /* a dangling link */
		if (S_ISDIR(st.st_mode))
			r = walk(s, top, sub, depth + 1);
		else if (S_ISREG(st.st_mode))
			r = push_path(s, sub);
	}
	closedir(dh);
	return r;
}

static struct archive *iso_open(const char *path)
{
	struct archive *a = archive_read_new();
	if (!a)
		return NULL;
	archive_read_support_format_iso9660(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		archive_read_free(a);
		return NULL;
	}
	return a;
}

static const char *entry_rel(struct archive_entry *e)
{
	const char *p = archive_entry_pathname(e);
	while (p && (p[0] == '.' && p[1] == '/'))
		p += 2;
	while (p && *p == '/')
		p++;
	return p;
}

/* The primary volume descriptor's volume id (offset 0x8028, 32 bytes). */
static void iso_label(const char *path, char *out, size_t len)
{
	unsigned char pvd[2048];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n;

	out[0] = '\0';
	if (fd < 0)
		return;
	if (util_pread_full(fd, pvd, sizeof(pvd), 0x8000) == 0 && pvd[0] == 1 &&
	    !memcmp(pvd + 1, "CD001", 5)) {
		for (n = 32; n > 0 && pvd[40 + n - 1] == ' '; n--)
			;
		for (size_t i = 0; i < n && i + 1 < len; i++)
			out[i] = isprint(pvd[40 + i]) ? (char)pvd[40 + i] : '?';
		out[n < len ? n : len - 1] = '\0';
	}
	close(fd);
}

void vw_close(struct vw_source *s)
{
	if (s->tmp) {
		/* Files are flat in tmp (see vw_fetch): remove them, then it. */
		DIR *d = opendir(s->tmp);
		struct dirent *e;
		char p[4096];
		while (d && (e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
			    (size_t)snprintf(p, sizeof(p), "%s/%s", s->tmp, e->d_name) < sizeof(p))
				unlink(p);
		if (d)
			closedir(d);
		rmdir(s->tmp);
		free(s->tmp);
	}
	strv_free(s->paths, s->npaths);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

int vw_open(const char *path, struct vw_source *s, struct im_err *err)
{
	struct stat st;
	int r = 0;

	memset(s, 0, sizeof(*s));
	if (stat(path, &st))
		return im_errf(err, IM_EXIT_SOURCE, -ENOENT, "virtio-win %s: %s", path, strerror(errno));
	if (!(s->path = strdup(path)))
		return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	if (S_ISDIR(st.st_mode)) {
		r = walk(s, path, "", 0);
	} else if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
		struct archive *a = iso_open(path);
		struct archive_entry *e;
		int ar;
		s->iso = true;
		if (!a) {
			vw_close(s);
			return im_errf(err, IM_EXIT_SOURCE, -ENOENT,
				       "virtio-win %s is neither a folder nor an ISO image", path);
		}
		while (!r && (ar = archive_read_next_header(a, &e)) == ARCHIVE_OK)
			if (archive_entry_filetype(e) == AE_IFREG && entry_rel(e) && *entry_rel(e))
				r = push_path(s, entry_rel(e));
		if (!r && ar != ARCHIVE_EOF)
			r = s->npaths ? -EIO : -ENOENT;
		if (r == -EIO || r == -ENOENT)
			im_errf(err, IM_EXIT_SOURCE, r,
				"virtio-win %s: %s", path,
				r == -ENOENT ? "not an ISO image" : archive_error_string(a));
		archive_read_free(a);
		if (r == -EIO || r == -ENOENT) {
			vw_close(s);
			return r;
		}
		iso_label(path, s->label, sizeof(s->label));
	} else {
		r = -ENOENT;
	}
	if (r) {
		vw_close(s);
		if (r == -EMFILE)
			return im_errf(err, IM_EXIT_SOURCE, r,
				       "virtio-win %s: more than %d files or %d levels: not virtio-win",
				       path, VW_MAX_FILES, VW_MAX_DEPTH);
		if (r == -ENOMEM)
			return im_errf(err, IM_EXIT_INTERNAL, r, "out of memory");
		return im_errf(err, IM_EXIT_SOURCE, r, "virtio-win %s: %s", path,
			       r == -ENOENT ? "neither a folder nor an ISO image" : strerror(-r));
	}
	return 0;
}

static struct vw_file *wanted(struct vw_set *set, const char *rel)
{
	for (size_t i = 0; i < set->nfiles; i++)
		if (!set->files[i].local && !strcmp(set->files[i].rel, rel))
			return &set->files[i];
	if (set->agent.rel && !set->agent.local && !strcmp(set->agent.rel, rel))
		return &set->agent;
	return NULL;
}

int vw_fetch(struct vw_source *s, struct vw_set *set, struct im_err *err)
{
	struct archive *a;
	struct archive_entry *e;
	char p[4096];
	size_t k = 0;
	int ar, r = 0;

	if (!s->iso) {
		for (size_t i = 0; i <= set->nfiles; i++) {
			struct vw_file *f = i < set->nfiles ? &set->files[i] : &set->agent;
			if (!f->rel)
				continue;
			FORWARD_ERR(path_join_err(p, sizeof(p), s->path, f->rel, err));
			free(f->local);
			if (!(f->local = strdup(p)))
				return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
		}
		return 0;
	}
	if (!s->tmp) {
		if ((r = tmp_dir_make("virtio-win", p, sizeof(p), err)) < 0)
			return r;
		if (!(s->tmp = strdup(p)))
			return im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	if (!(a = iso_open(s->path)))
		return im_errf(err, IM_EXIT_SOURCE, -EIO, "virtio-win %s: cannot read it again", s->path);
	while (!r && (ar = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		struct vw_file *f;
		const void *buf;
		size_t len;
		la_int64_t off;
		int fd;
		if (archive_entry_filetype(e) != AE_IFREG || !entry_rel(e) || !(f = wanted(set, entry_rel(e))))
			continue;
		/* Flat, numbered: names on the ISO never become paths here. */
		snprintf(p, sizeof(p), "%s/%zu", s->tmp, k++);
		if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
			r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", p, strerror(errno));
			break;
		}
		while ((ar = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
			if (off < 0 || util_pwrite_full(fd, buf, len, (uint64_t)off) < 0) {
				r = im_errf(err, IM_EXIT_IO, -EIO, "%s: writing %s", s->path, p);
				break;
			}
		}
		if (!r && ar != ARCHIVE_EOF)
			r = im_errf(err, IM_EXIT_SOURCE, -EIO, "virtio-win %s: %s: %s", s->path,
				    f->rel, archive_error_string(a));
		if (close(fd) && !r)
			r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", p, strerror(errno));
		if (!r && !(f->local = strdup(p)))
			r = im_errf(err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory");
	}
	archive_read_free(a);
	for (size_t i = 0; !r && i <= set->nfiles; i++) {
		struct vw_file *f = i < set->nfiles ? &set->files[i] : &set->agent;
		if (f->rel && !f->local)
			r = im_errf(err, IM_EXIT_SOURCE, -EIO, "virtio-win %s: %s could not be read",
				    s->path, f->rel);
	}
	return r;
}
