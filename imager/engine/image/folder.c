// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What a folder is: imager's image, an unfinished save, Clonezilla's
 * image, a repository of images, or none of these (image.h).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imager/image.h"
#include "util.h"

bool img_own_file(const char *n)
{
	size_t len = strlen(n);
	char base[256];

	if (len >= sizeof(base))
		return false;
	memcpy(base, n, len + 1);
	if (len > 4 && !strcmp(base + len - 4, ".tmp")) {
		base[len -= 4] = '\0';
		if (!strcmp(base, IMG_MANIFEST))
			return true;
	}
	if (!strncmp(base, "boot-", 5) && len > 4 && !strcmp(base + len - 4, ".bin"))
		return true;
	if (!strncmp(base, "part", 4) && len > 4 &&
	    (!strcmp(base + len - 4, ".zst") || !strcmp(base + len - 4, ".idx") ||
	     !strcmp(base + len - 4, ".jnl")))
		return true;
	return !strcmp(base, IMG_RESCUE_MAP);
}

bool img_is_clonezilla(const char *dir)
{
	char p[4200];
	struct stat st;

	snprintf(p, sizeof(p), "%s/manifest.json", dir);
	if (stat(p, &st) == 0)
		return false;
	snprintf(p, sizeof(p), "%s/disk", dir);
	if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
		return true;
	snprintf(p, sizeof(p), "%s/parts", dir);
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* DIR/NAME is a regular file. */
static bool has_file(const char *dir, const char *name)
{
	char p[4200];
	struct stat st;

	return path_join(p, sizeof(p), dir, name) == 0 && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The kind of DIR itself, without looking into its subfolders. */
static enum img_folder_kind kind_of(const char *dir)
{
	if (has_file(dir, IMG_MANIFEST))
		return IMG_FOLDER_IMAGE;
	if (img_is_clonezilla(dir))
		return IMG_FOLDER_CLONEZILLA;
	return IMG_FOLDER_OTHER;
}

static int add_entry(struct img_folder *f, const char *name, enum img_folder_kind kind)
{
	struct img_folder_entry *e;

	if (strlen(name) >= sizeof(e->name))
		return 0;
	e = realloc(f->entries, (f->nentries + 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	f->entries = e;
	e += f->nentries++;
	memcpy(e->name, name, strlen(name) + 1);
	e->kind = kind;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct img_folder_entry *)a)->name,
		      ((const struct img_folder_entry *)b)->name);
}

/* The folder's entries: our files (an unfinished save) and the subfolders
 * that are images (a repository). */
static int scan(const char *dir, struct img_folder *f, struct im_err *err)
{
	DIR *dh = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!dh)
		return im_errf(err, IM_EXIT_SOURCE, -errno, "%s: %s", dir, strerror(errno));
	while (r == 0 && (de = readdir(dh))) {
		char sub[4200];
		struct stat st;
		enum img_folder_kind k;

		if (de->d_name[0] == '.')
			continue;
		f->empty = false;
		if (img_own_file(de->d_name)) {
			f->own_files++;
			/* (an example is a name whole: one too long is not taken) */
			if ((!f->own_example[0] || strcmp(de->d_name, f->own_example) < 0) &&
			    strlen(de->d_name) < sizeof(f->own_example))
				memcpy(f->own_example, de->d_name, strlen(de->d_name) + 1);
			continue;
		}
		if (path_join(sub, sizeof(sub), dir, de->d_name) < 0 || stat(sub, &st) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		k = kind_of(sub);
		if (k != IMG_FOLDER_OTHER)
			r = add_entry(f, de->d_name, k);
	}
	closedir(dh);
	if (r < 0)
		return im_errf(err, IM_EXIT_INTERNAL, r, "out of memory");
	if (f->nentries > 1)
		qsort(f->entries, f->nentries, sizeof(*f->entries), by_name);
	return 0;
}

int img_folder_probe(const char *dir, struct img_folder *f, struct im_err *err)
{
	struct stat st;
	int r;

	memset(f, 0, sizeof(*f));
	f->empty = true;
	if (stat(dir, &st) < 0) {
		f->kind = IMG_FOLDER_MISSING;
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		f->kind = IMG_FOLDER_OTHER;
		f->empty = false;
		return 0;
	}
	f->kind = kind_of(dir);
	if (f->kind != IMG_FOLDER_OTHER)
		return 0;
	r = scan(dir, f, err);
	if (r < 0)
		return r;
	if (f->own_files)
		f->kind = IMG_FOLDER_UNFINISHED;
	else if (f->nentries)
		f->kind = IMG_FOLDER_REPOSITORY;
	return 0;
}

void img_folder_free(struct img_folder *f)
{
	free(f->entries);
	f->entries = NULL;
	f->nentries = 0;
}

/* "a, b and 3 more" of the repository's images, into out. */
static void list_names(const struct img_folder *f, char *out, size_t len)
{
	size_t at = 0, shown = 0;

	out[0] = '\0';
	for (size_t i = 0; i < f->nentries && at < len; i++) {
		size_t room = len - at;
		int n;
		if (shown == 8) {
			snprintf(out + at, room, " and %zu more", f->nentries - shown);
			return;
		}
		n = snprintf(out + at, room, "%s%s (%s)", shown ? ", " : "", f->entries[i].name,
			     f->entries[i].kind == IMG_FOLDER_IMAGE ? "imager" : "Clonezilla");
		if (n < 0 || (size_t)n >= room) {   /* (the message says fewer names) */
			out[at] = '\0';
			return;
		}
		at += (size_t)n;
		shown++;
	}
}

int img_folder_refuse(const struct img_folder *f, const char *dir, struct im_err *err)
{
	char names[600];

	switch (f->kind) {
	case IMG_FOLDER_MISSING:
		return im_errf(err, IM_EXIT_SOURCE, -ENOENT, "%s: no such image folder", dir);
	case IMG_FOLDER_UNFINISHED:
		return im_errf(err, IM_EXIT_DAMAGED, -ENOENT,
			       "%s: unfinished image (no %s: the save did not complete; "
			       "%zu of a save's files are there, %s among them)", dir, IMG_MANIFEST,
			       f->own_files, f->own_example);
	case IMG_FOLDER_REPOSITORY:
		list_names(f, names, sizeof(names));
		return im_errf(err, IM_EXIT_SOURCE, -EISDIR,
			       "%s is a folder of %zu image%s, not an image: give one of them: %s",
			       dir, f->nentries, f->nentries == 1 ? "" : "s", names);
	case IMG_FOLDER_CLONEZILLA:
		return im_errf(err, IM_EXIT_SOURCE, -ENOENT,
			       "%s: a Clonezilla image folder, not imager's (no %s)", dir, IMG_MANIFEST);
	case IMG_FOLDER_OTHER:
		return im_errf(err, IM_EXIT_SOURCE, -ENOENT,
			       "%s: not an image folder (%s): looked for imager's %s and "
			       "Clonezilla's \"disk\" or \"parts\" file", dir,
			       f->empty ? "it is empty" : "neither imager's nor Clonezilla's files",
			       IMG_MANIFEST);
	case IMG_FOLDER_IMAGE:
		break;
	}
	return 0;
}
