/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inside guest conversion (convert.c, convert-linux.c): a plan of actions
 * made while inspecting, applied only when the whole plan could be made.
 */
#ifndef IMAGER_CONVERT_INT_H
#define IMAGER_CONVERT_INT_H

#include <guestfs.h>
#include <hivex.h>

#include "convtext.h"
#include "imager/convert.h"

enum act_kind {
	ACT_WRITE = 1,       /* replace path's content with data */
	ACT_REMOVE,          /* remove path (file or link) */
	ACT_MKDIR,           /* mkdir -p path */
	ACT_APPEND_INITRD,   /* path = base (+ zero padding to 4) + data; base kept */
	ACT_REBUILD,         /* run argv (writing path.imager-new), then move it to path */
	ACT_UPLOAD,          /* path = the local file named by data (via path.imager-new) */
};

struct conv_action {
	enum act_kind kind;
	char *path;
	char *data;
	size_t len;
	char **argv;
	size_t argc;
	size_t change;       /* index in the report's changes */
};

/* A file as the plan leaves it: read once, edited in the plan. */
struct conv_file {
	char *path;
	char *data;          /* NULL: the file does not exist */
	size_t len;
	size_t action;       /* index + 1 of its ACT_WRITE, 0 none yet */
};

struct conv_ctx {
	guestfs_h *g;
	const struct conv_opts *o;
	struct conv_report *rep;
	struct im_err *err;
	char **devices;      /* the appliance's disks, in the order added */
	size_t ndevices;
	struct conv_action *acts;
	size_t nacts;
	struct conv_file *files;
	size_t nfiles;
	struct win_state *win;  /* Windows: what lives until the plan is applied */
	char locked[512];       /* encrypted volumes left closed: "/dev/sda2 (LUKS), ..." */
	unsigned nlocked_luks, nlocked_bitlk;
};

/* crypt.c: open the guest's encrypted volumes that have a key (convert.h,
 * struct conv_key), then scan LVM; the others are noted in c->locked.
 * 0, or a negative errno with c->err filled (a key that opens nothing). */
int conv_unlock(struct conv_ctx *c);
/* When volumes stayed closed: the refusal naming them (-ENOKEY), else 0. */
int conv_locked_refusal(struct conv_ctx *c);

/* Record a change in the report; returns its index or -ENOMEM. */
int conv_change(struct conv_ctx *c, const char *path, const char *action, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Plan an action (data and argv are taken over on success and on failure). */
int conv_act(struct conv_ctx *c, enum act_kind kind, const char *path, char *data, size_t len,
	     char **argv, size_t argc, const char *action, const char *detail);
/* The content of path as the plan leaves it so far: *data NULL when the
 * file does not exist (or is not a regular file).  Returns 0, or a
 * negative errno when reading failed (with err filled). */
int conv_read(struct conv_ctx *c, const char *path, const char **data, size_t *len);
/* Plan new content for an existing or new file; detail is added to the
 * file's one change line.  new is taken over. */
int conv_edit(struct conv_ctx *c, const char *path, struct sbuf *new, const char *detail);

/* Copy a malloc'd string (libguestfs's answers; NULL is "") into a fixed
 * buffer and free it. */
void conv_copy_str(char *dst, size_t len, char *src);

/* guestfs helpers that never fail loudly (errors are off on the handle). */
bool gx_is_file(guestfs_h *g, const char *path);     /* regular file, not a link */
bool gx_is_dir(guestfs_h *g, const char *path);      /* following links */
bool gx_is_link(guestfs_h *g, const char *path);
bool gx_exists(guestfs_h *g, const char *path);
/* A regular file's content (following links) with a NUL after it, in
 * pread chunks (far faster than guestfs_read_file under TCG); NULL when it
 * cannot be read or is over 256 MiB; then *why (when why is not NULL) says
 * which: libguestfs's message, or the size. */
char *gx_read(guestfs_h *g, const char *path, size_t *len, const char **why);
/* Free a NULL-terminated list libguestfs returned (NULL is fine). */
void gx_strings_free(char **v);
/* The last libguestfs error message, or "unknown error". */
const char *gx_error(guestfs_h *g);

/* The quick inspection (inspect.c): 1 with the Linux root's device in
 * *root and its mount points in *mp (mount point, device, ..., NULL; both
 * malloc'ed) and the report's os_type, distro, product, major and minor
 * filled; 0 when the guest needs guestfs_inspect_os() (nothing filled);
 * -errno with err filled.  Nothing is left mounted. */
int conv_quick_inspect(struct conv_ctx *c, char **root, char ***mp);
/* rep->arch from the ELF header of the guest's shell or init (the guest's
 * filesystems mounted); left "" when none can be read. */
void conv_guess_arch(struct conv_ctx *c);

/* rep->firmware: "uefi" when a GPT disk has an EFI system partition and
 * no BIOS boot partition, else "bios". */
void conv_find_firmware(struct conv_ctx *c);

/*
 * A converter: one operating system's part, as a descriptor (as the
 * backends and plugins are), listed in convert.c's ordered table.
 *   matches  is the inspected guest (rep->os_type, distro...) this one's?
 *   plan     plan every change for the inspected root (mounted read-only):
 *            nothing is written; conv_act()/conv_edit() record the actions,
 *            conv_change() the report's lines.  Returns 0 or -errno with
 *            c->err filled; a refusal leaves the guest untouched.
 *   apply    NULL: convert.c applies the planned actions in order (the only
 *            way today); a converter with writes of its own would do them here.
 *   free     release what plan kept for apply (may be NULL).
 * Converters use the plan API above (plan.c) and never call convert.c.
 */
struct converter {
	const char *name;
	bool (*matches)(const struct conv_report *rep);
	int (*plan)(struct conv_ctx *c, const char *root);
	int (*apply)(struct conv_ctx *c);
	void (*free)(struct conv_ctx *c);
};
extern const struct converter conv_linux;    /* convert-linux.c */
extern const struct converter conv_windows;  /* convert-windows.c */

/* The registry half of the Windows plan, on hives opened here (libhivex),
 * kept apart from libguestfs so that it can be tested on its own. */
struct win_reg_in {
	const char *cs;              /* current control set: "ControlSet001" */
	int major, minor;            /* NT version */
	const char *block;           /* "viostor", "vioscsi" */
	bool firstboot;              /* register the first-boot service */
};
struct win_reg_line {
	char *hive;                  /* "HKLM\\SYSTEM", "HKLM\\SOFTWARE" */
	char *key;
	char *detail;
};
struct win_reg_out {
	char *old_devicepath;        /* SOFTWARE's DevicePath before */
	char *new_devicepath;        /* after (NULL: unchanged) */
	bool devicepath_ours;        /* imager's entry is in it (added now or before) */
	char disabled[512];          /* services disabled, comma separated */
	struct win_reg_line *lines;  /* every change, in order */
	size_t nlines;
};
#define WIN_DRIVER_DIR "%SystemRoot%\\Drivers\\VirtIO"
#define WIN_FIRSTBOOT_DIR "%SystemRoot%\\imager-firstboot"
#define WIN_FIRSTBOOT_SERVICE "imager-firstboot"
/* Returns 0, or -errno with err filled (IM_EXIT_DAMAGED when the control
 * set is missing). */
int win_registry_plan(hive_h *system, hive_h *software, const struct win_reg_in *in,
		      struct win_reg_out *out, struct im_err *err);
void win_reg_out_free(struct win_reg_out *out);
/* The first-boot script (CRLF lines) for what win_registry_plan did;
 * agent is the guest agent installer's file name or NULL. */
void win_firstboot_script(const struct win_reg_in *in, const struct win_reg_out *out,
			  const char *agent, struct sbuf *b);
/* The PCI IDs the boot driver is bound to: legacy with and without the
 * subsystem, modern with and without. */
#define WIN_PCI_IDS 4
void win_pci_ids(const char *block, const char *ids[WIN_PCI_IDS]);

#endif
