/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Linux guests: plan what makes them boot on virtio (see
 * include/imager/convert.h for the whole list).  Nothing is written here:
 * every change goes into the plan that convert.c applies.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <zlib.h>

#include "convert-int.h"
#include "util.h"

/* What every converted initramfs gets, block driver first. */
static const char *const virtio_modules[] = {
	"virtio_pci", "virtio_blk", "virtio_scsi", "virtio_net", "sd_mod",
};
#define NVIRTIO (sizeof(virtio_modules) / sizeof(virtio_modules[0]))

/* The kernel's module indexes that modprobe (libkmod) reads: the binary
 * ones, and the text files that have no binary form. */
static const char *const module_indexes[] = {
	"modules.dep.bin", "modules.alias.bin", "modules.softdep", "modules.symbols.bin",
	"modules.builtin", "modules.builtin.bin", "modules.builtin.alias.bin",
	"modules.builtin.modinfo", "modules.devname",
};

static const char *const device_caches[] = {
	"/etc/blkid.tab", "/etc/blkid/blkid.tab", "/etc/lvm/cache/.cache",
	"/etc/lvm/devices/system.devices",
};

/* Files that name disks. */
static const char *const name_files[] = {
	"/etc/fstab", "/etc/crypttab", "/boot/grub/grub.cfg", "/boot/grub2/grub.cfg",
	"/etc/default/grub", "/boot/grub/device.map", "/boot/grub2/device.map",
	"/boot/grub/menu.lst", "/boot/grub/grub.conf", "/boot/extlinux/extlinux.conf",
	"/boot/extlinux.conf", "/boot/syslinux/syslinux.cfg", "/etc/initramfs-tools/conf.d/resume",
	"/etc/uswsusp.conf", "/etc/sysconfig/grub", "/etc/kernel/cmdline",
};

#define MAX_ESP_INITRDS 4
struct lkernel {
	char version[128];
	char initrd[256];     /* "" when none */
	/* Copies of its initramfs on the ESP that Boot Loader Specification
	 * entries boot (systemd-boot reads kernels from the ESP only:
	 * /boot/efi/MACHINE-ID/VER/initrd.img-VER, as kernel-install puts
	 * them); each gets the same treatment as initrd. */
	char esp_initrd[MAX_ESP_INITRDS][320];
	size_t nesp;
	bool virtio, net, scsi;
	char *dep, *builtin;  /* modules.dep, modules.builtin text (may be NULL) */
	size_t deplen, builtinlen;
};

struct lx {
	struct conv_ctx *c;
	char moddir[32];      /* "/lib/modules" or "/usr/lib/modules" */
	bool merged_usr;      /* /lib is a link: archives write usr/lib/... */
	char tool[24];
	char rootfs[16];      /* the root filesystem's type */
	struct lkernel *k;
	size_t nk;
};

static int oom(struct conv_ctx *c) { return im_errf(c->err, IM_EXIT_INTERNAL, -ENOMEM, "out of memory"); }

static const char *block_module(const struct conv_ctx *c)
{
	return c->o->block == CONV_BLOCK_VIRTIO_SCSI ? "virtio_scsi" : "virtio_blk";
}

static char *read_opt(guestfs_h *g, const char *path, size_t *len)
{
	*len = 0;
	if (!gx_is_file(g, path))
		return NULL;
	return gx_read(g, path, len, NULL);
}

/* ---- kernels ---- */

static bool config_has(const char *cfg, size_t len, const char *opt)
{
	size_t ol = strlen(opt);
	for (size_t i = 0; cfg && i + ol + 2 <= len; i++)
		if ((i == 0 || cfg[i - 1] == '\n') && !memcmp(cfg + i, opt, ol) && cfg[i + ol] == '=' &&
		    (cfg[i + ol + 1] == 'y' || cfg[i + ol + 1] == 'm'))
			return true;
	return false;
}

static bool kernel_has(const struct lkernel *k, const char *mod)
{
	char **paths = NULL;
	size_t np = 0, nb = 0;
	const char *missing = NULL;
	if (!k->dep)
		return false;
	if (modules_closure(k->dep, k->deplen, k->builtin, k->builtinlen, &mod, 1, &paths, &np, &nb,
			    &missing) < 0)
		return false;
	strv_free(paths, np);
	return !missing;
}

static int cmp_kernel(const void *a, const void *b)
{
	const struct lkernel *x = a, *y = b;
	return -strverscmp(x->version, y->version);   /* newest first */
}

static int find_kernels(struct lx *l)
{
	struct conv_ctx *c = l->c;
	guestfs_h *g = c->g;
	char **vers;

	snprintf(l->moddir, sizeof(l->moddir), "%s",
		 gx_is_dir(g, "/lib/modules") ? "/lib/modules" : "/usr/lib/modules");
	l->merged_usr = gx_is_link(g, "/lib");
	if (!gx_is_dir(g, l->moddir) || !(vers = guestfs_ls(g, l->moddir)))
		return 0;
	size_t i;
	for (i = 0; vers[i]; i++) {
		static const char *const initrds[] = { "/boot/initrd.img-%s", "/boot/initramfs-%s.img",
						       "/boot/initrd-%s", "/boot/initrd-%s.img" };
		struct lkernel k = { 0 };
		char path[512];
		snprintf(path, sizeof(path), "/boot/vmlinuz-%s", vers[i]);
		if (strlen(vers[i]) >= sizeof(k.version) || !gx_is_file(g, path))
			continue;
		snprintf(k.version, sizeof(k.version), "%s", vers[i]);
		for (size_t j = 0; j < sizeof(initrds) / sizeof(initrds[0]); j++) {
			snprintf(path, sizeof(path), initrds[j], vers[i]);
			/* (a name that does not fit k.initrd is not taken) */
			if (gx_is_file(g, path) && str_copy(k.initrd, sizeof(k.initrd), path) == 0)
				break;
			k.initrd[0] = '\0';
		}
		/* (they fit: moddir 31, version 127 bytes at most) */
		if (str_printf(path, sizeof(path), "%s/%s/modules.dep", l->moddir, vers[i]) == 0)
			k.dep = read_opt(g, path, &k.deplen);
		if (str_printf(path, sizeof(path), "%s/%s/modules.builtin", l->moddir, vers[i]) == 0)
			k.builtin = read_opt(g, path, &k.builtinlen);
		if (k.dep) {
			k.virtio = kernel_has(&k, "virtio_pci") && kernel_has(&k, block_module(c));
			k.net = kernel_has(&k, "virtio_pci") && kernel_has(&k, "virtio_net");
		} else {
			/* No module index: the kernel's configuration says. */
			size_t cl;
			char *cfg;
			snprintf(path, sizeof(path), "/boot/config-%s", vers[i]);
			cfg = read_opt(g, path, &cl);
			k.virtio = config_has(cfg, cl, "CONFIG_VIRTIO_PCI") &&
				   config_has(cfg, cl, c->o->block == CONV_BLOCK_VIRTIO_SCSI
							       ? "CONFIG_SCSI_VIRTIO" : "CONFIG_VIRTIO_BLK");
			k.net = config_has(cfg, cl, "CONFIG_VIRTIO_NET");
			free(cfg);
		}
		struct lkernel *p = realloc(l->k, (l->nk + 1) * sizeof(*p));
		if (!p) {
			free(k.dep);
			free(k.builtin);
			break;
		}
		l->k = p;
		l->k[l->nk++] = k;
	}
	bool short_of_memory = vers[i] != NULL;
	for (size_t j = 0; vers[j]; j++)
		free(vers[j]);
	free(vers);
	if (short_of_memory)
		return oom(c);
	qsort(l->k, l->nk, sizeof(*l->k), cmp_kernel);
	struct conv_kernel *rk = calloc(l->nk ? l->nk : 1, sizeof(*rk));
	if (!rk)
		return oom(c);
	for (i = 0; i < l->nk; i++) {
		snprintf(rk[i].version, sizeof(rk[i].version), "%s", l->k[i].version);
		rk[i].virtio = l->k[i].virtio;
		rk[i].has_initramfs = l->k[i].initrd[0] != 0;
	}
	c->rep->kernels = rk;
	c->rep->nkernels = l->nk;
	return 0;
}

static struct lkernel *kernel_find(struct lx *l, const char *ver)
{
	for (size_t i = 0; i < l->nk; i++)
		if (!strcmp(l->k[i].version, ver))
			return &l->k[i];
	return NULL;
}

/* ---- bootloader, initramfs tool, firmware ---- */

static const char *grub_cfg_path(guestfs_h *g)
{
	static const char *const p[] = { "/boot/grub/grub.cfg", "/boot/grub2/grub.cfg" };
	for (size_t i = 0; i < 2; i++)
		if (gx_is_file(g, p[i]))
			return p[i];
	return NULL;
}

static void find_bootloader(struct lx *l)
{
	guestfs_h *g = l->c->g;
	const char *b = "";
	if (grub_cfg_path(g))
		b = "grub2";
	else if (gx_is_file(g, "/boot/grub/menu.lst") || gx_is_file(g, "/boot/grub/grub.conf"))
		b = "grub-legacy";
	else if (gx_is_file(g, "/boot/extlinux/extlinux.conf") || gx_is_file(g, "/boot/extlinux.conf") ||
		 gx_is_file(g, "/boot/syslinux/syslinux.cfg"))
		b = "extlinux";
	snprintf(l->c->rep->bootloader, sizeof(l->c->rep->bootloader), "%s", b);
}

static bool any_file(guestfs_h *g, const char *const *paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (gx_is_file(g, paths[i]) || (gx_is_link(g, paths[i]) && gx_exists(g, paths[i])))
			return true;
	return false;
}

/* Which tool made the initramfs, the strongest evidence first: the image
 * the default kernel boots (the names it holds, initrd.c), then Debian's
 * package database (which of dracut and initramfs-tools is installed),
 * then which programs exist.  The programs alone can name the wrong tool:
 * a Debian guest switched to dracut keeps /etc/initramfs-tools and
 * mkinitramfs, and virtio written into initramfs-tools' lists would be
 * lost at its next `dracut -f`. */
static int find_initramfs_tool(struct lx *l, const struct lkernel *def)
{
	static const char *const itools[] = { "/usr/sbin/mkinitramfs", "/sbin/mkinitramfs" };
	static const char *const dracut[] = { "/usr/bin/dracut", "/usr/sbin/dracut", "/sbin/dracut" };
	static const char *const cpio[] = { "/usr/bin/mkinitcpio" };
	static const char *const suse[] = { "/sbin/mkinitrd", "/usr/sbin/mkinitrd" };
	struct conv_ctx *c = l->c;
	guestfs_h *g = c->g;
	const char *t = "", *from = "";
	const struct lkernel *k = def && def->initrd[0] ? def : NULL;

	for (size_t i = 0; !k && i < l->nk; i++)
		if (l->k[i].initrd[0])
			k = &l->k[i];
	if (k) {
		size_t len;
		char *img = gx_read(g, k->initrd, &len, NULL);
		struct initrd_scan s = { 0 };
		int m = img ? initrd_maker(img, len, &s) : -EIO;
		free(img);
		if (m > 0) {
			t = initrd_maker_name(m);
			from = "image";
		} else {
			const char *why = m == IRD_UNKNOWN ? "it holds no known tool's files"
					: m == -E2BIG ? "it is too large to read through"
					: m == -EIO ? "it could not be read"
					: m == -ENOMEM ? "out of memory"
					: "it is damaged, or packed in a way not read here "
					  "(gzip, zstd, xz, lzma, lz4, bzip2 are)";
			FORWARD_ERR(conv_change(c, k->initrd, "note", "which tool made this initramfs "
						"is not known from the image: %s", why));
		}
	}
	if (!*t && gx_is_file(g, "/var/lib/dpkg/status")) {
		size_t len;
		char *st = gx_read(g, "/var/lib/dpkg/status", &len, NULL);
		if (st && (dpkg_installed(st, len, "dracut") || dpkg_installed(st, len, "dracut-core")))
			t = "dracut", from = "packages";
		else if (st && dpkg_installed(st, len, "initramfs-tools"))
			t = "initramfs-tools", from = "packages";
		free(st);
	}
	if (!*t) {
		from = "programs";
		if (gx_is_dir(g, "/etc/initramfs-tools") && any_file(g, itools, 2))
			t = "initramfs-tools";
		else if (any_file(g, dracut, 3))
			t = "dracut";
		else if (any_file(g, cpio, 1))
			t = "mkinitcpio";
		else if (any_file(g, suse, 2) && (strstr(c->rep->distro, "suse") || strstr(c->rep->distro, "sles")))
			t = "suse-mkinitrd";
		else
			from = "";
	}
	snprintf(l->tool, sizeof(l->tool), "%s", t);
	snprintf(c->rep->initramfs_tool, sizeof(c->rep->initramfs_tool), "%s", t);
	snprintf(c->rep->initramfs_tool_from, sizeof(c->rep->initramfs_tool_from), "%s", from);
	return 0;
}

/* ---- default kernel (GRUB 2) ---- */

static int choose_default(struct lx *l, struct lkernel **chosen)
{
	struct conv_ctx *c = l->c;
	const char *cfgpath = grub_cfg_path(c->g), *text;
	struct grub_entry e[64];
	char dv[256];
	size_t len;
	int n = 0, d = -1;

	*chosen = NULL;
	if (cfgpath) {
		FORWARD_ERR(conv_read(c, cfgpath, &text, &len));
		n = text ? grub_entries(text, len, e, 64, dv, sizeof(dv)) : 0;
		if (n < 0)
			n = 0;
		if (n > 64)
			n = 64;
		d = grub_default_entry(e, (size_t)n, dv);
	}
	struct lkernel *cur = d >= 0 && e[d].kernel[0] ? kernel_find(l, e[d].kernel) : NULL;
	if (!cur && d < 0 && l->nk)
		cur = &l->k[0];   /* no GRUB 2 menu understood: the newest */
	for (size_t i = 0; i < l->nk && cur; i++)
		if (&l->k[i] == cur)
			c->rep->kernels[i].is_default = true;
	if (cur && cur->virtio) {
		*chosen = cur;
		return 0;
	}
	/* The default boots a kernel without virtio (or one we do not know):
	 * the newest GRUB entry whose kernel has it. */
	for (size_t k = 0; k < l->nk; k++) {
		if (!l->k[k].virtio)
			continue;
		for (int i = 0; i < n; i++) {
			if (strcmp(e[i].kernel, l->k[k].version))
				continue;
			const char *val = e[i].id[0] ? e[i].id : e[i].index;
			struct sbuf nb = { 0 };
			char detail[512];
			snprintf(detail, sizeof(detail), "default entry \"%s\" (kernel %s) instead of %s",
				 e[i].title, l->k[k].version, cur ? cur->version : dv);
			FORWARD_ERR(conv_read(c, cfgpath, &text, &len));
			if (set_assignment(text, len, "default", val, true, &nb) < 0)
				return oom(c);
			FORWARD_ERR(conv_edit(c, cfgpath, &nb, detail));
			if (!conv_read(c, "/etc/default/grub", &text, &len) && text) {
				if (set_assignment(text, len, "GRUB_DEFAULT", val, false, &nb) < 0)
					return oom(c);
				FORWARD_ERR(conv_edit(c, "/etc/default/grub", &nb, detail));
			}
			*chosen = &l->k[k];
			return 0;
		}
	}
	if (!cur && n == 0) {
		for (size_t k = 0; k < l->nk; k++)
			if (l->k[k].virtio) {
				*chosen = &l->k[k];
				return 0;
			}
	}
	if (!l->nk)
		return im_errf(c->err, IM_EXIT_UNSUPP, -EOPNOTSUPP,
			       "no kernel found (/lib/modules/VERSION with /boot/vmlinuz-VERSION); "
			       "nothing changed");
	return im_errf(c->err, IM_EXIT_UNSUPP, -EOPNOTSUPP,
		       "no installed kernel with a boot entry can boot from %s (virtio_pci and %s "
		       "are neither modules nor built in); nothing changed",
		       conv_block_name(c->o->block), block_module(c));
}

/* ---- the fast way: an archive appended to the initramfs ---- */

static int gzip_buffer(const char *in, size_t len, struct sbuf *out)
{
	z_stream z = { 0 };
	int r;

	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	size_t cap = deflateBound(&z, (uLong)len);
	out->p = malloc(cap + 1);
	if (!out->p) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	out->cap = cap + 1;
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out->p;
	z.avail_out = (uInt)cap;
	r = deflate(&z, Z_FINISH);
	out->len = cap - z.avail_out;
	deflateEnd(&z);
	if (r != Z_STREAM_END) {
		sbuf_free(out);
		return -ENOMEM;
	}
	out->p[out->len] = '\0';
	return 0;
}

/* A path from modules.dep (hostile): relative, no "..", no empty or "."
 * component, printable. */
static bool safe_relative(const char *p)
{
	if (!*p || *p == '/' || strlen(p) > 400)
		return false;
	for (const char *s = p; *s; s++)
		if ((unsigned char)*s < 0x21 || *s == 0x7f)
			return false;
	for (const char *s = p; s; s = strchr(s, '/')) {
		if (*s == '/')
			s++;
		size_t l = strcspn(s, "/");
		if (l == 0 || (l == 1 && s[0] == '.') || (l == 2 && s[0] == '.' && s[1] == '.'))
			return false;
	}
	return true;
}

/* "a/b/c" adds "a", "a/b" as directories (once each). */
static void cpio_parents(struct sbuf *ar, char ***dirs, size_t *nd, const char *path, uint32_t *ino)
{
	for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
		size_t l = (size_t)(s - path);
		bool seen = false;
		for (size_t i = 0; i < *nd && !seen; i++)
			seen = strlen((*dirs)[i]) == l && !memcmp((*dirs)[i], path, l);
		if (seen)
			continue;
		char **p = realloc(*dirs, (*nd + 1) * sizeof(*p));
		if (!p || !(p[*nd] = strndup(path, l))) {
			if (p)
				*dirs = p;
			ar->oom = true;
			return;
		}
		*dirs = p;
		cpio_add(ar, p[*nd], S_IFDIR | 0755, (*ino)++, 0, NULL, 0);
		(*nd)++;
	}
}

/* One line of a module list: [start, end) without the newline; word is
 * the first word (after blanks), [word, word_end). */
struct mline { size_t start, end, word, word_end; };

static bool next_mline(const char *text, size_t len, size_t *pos, struct mline *m)
{
	if (!text || *pos >= len)
		return false;
	m->start = m->end = *pos;
	while (m->end < len && text[m->end] != '\n')
		m->end++;
	m->word = m->start;
	while (m->word < m->end && (text[m->word] == ' ' || text[m->word] == '\t'))
		m->word++;
	m->word_end = m->word;
	while (m->word_end < m->end && text[m->word_end] != ' ' && text[m->word_end] != '\t')
		m->word_end++;
	*pos = m->end + 1;
	return true;
}

/* Lines "module args" of initramfs-tools' module lists (what mkinitramfs
 * put into conf/modules), without comments; the old platform's modules
 * (old_platform_module: Xen PV, VMware, Hyper-V, VirtualBox) left out. */
static void module_lines(const char *text, size_t len, struct sbuf *out)
{
	struct mline m;
	size_t pos = 0;
	while (next_mline(text, len, &pos, &m))
		if (m.word < m.end && text[m.word] != '#' &&
		    !old_platform_module(text + m.word, m.word_end - m.word)) {
			sbuf_add(out, text + m.word, m.end - m.word);
			sbuf_add(out, "\n", 1);
		}
}

static bool lists_module(const char *text, size_t len, const char *mod)
{
	struct mline m;
	size_t pos = 0, ml = strlen(mod);
	while (next_mline(text, len, &pos, &m))
		if (m.word_end - m.word == ml && !memcmp(text + m.word, mod, ml))
			return true;
	return false;
}

/* The appended archive as it is built: the newc stream, the folders
 * already in it, the next inode number, and where the modules go. */
struct appendix {
	struct sbuf ar;
	char **dirs;
	size_t nd;
	uint32_t ino;
	char prefix[200];            /* [usr/]lib/modules/VERSION */
};

static void appendix_file(struct appendix *a, const char *dst, const char *data, size_t len)
{
	cpio_parents(&a->ar, &a->dirs, &a->nd, dst, &a->ino);
	cpio_add(&a->ar, dst, S_IFREG | 0644, a->ino++, 0, data, len);
}

/* The modules to load: the virtio ones the kernel has, and the root
 * filesystem's (a machine that booted from another kind of disk may have
 * had it built into its initramfs differently, and it is small). */
static size_t append_module_names(const struct lx *l, const struct lkernel *k,
				  const char *names[NVIRTIO + 1], char fsmod[16])
{
	size_t nn = 0;

	for (size_t i = 0; i < NVIRTIO; i++)
		if (kernel_has(k, virtio_modules[i]))
			names[nn++] = virtio_modules[i];
	snprintf(fsmod, 16, "%s",
		 !strcmp(l->rootfs, "ext2") || !strcmp(l->rootfs, "ext3") ? "ext4" : l->rootfs);
	if (fsmod[0] && kernel_has(k, fsmod))
		names[nn++] = fsmod;
	return nn;
}

/* The module files (the closure modules.dep gives), each checked to be a
 * path inside the module tree. */
static int append_modules(struct lx *l, struct lkernel *k, char **paths, size_t np,
			  struct appendix *a)
{
	guestfs_h *g = l->c->g;
	char src[600], dst[600];

	for (size_t i = 0; i < np; i++) {
		size_t len;
		char *data;

		if (!safe_relative(paths[i]))
			return im_errf(l->c->err, IM_EXIT_UNSUPP, -EOPNOTSUPP,
				       "kernel %s: modules.dep names \"%.100s\", which is not a path "
				       "inside the module tree; nothing changed", k->version, paths[i]);
		if (str_printf(src, sizeof(src), "%s/%s/%s", l->moddir, k->version, paths[i]) < 0 ||
		    path_join(dst, sizeof(dst), a->prefix, paths[i]) < 0)
			return im_errf(l->c->err, IM_EXIT_UNSUPP, -ENAMETOOLONG,
				       "kernel %s: modules.dep names \"%.100s...\", a path too long; "
				       "nothing changed", k->version, paths[i]);
		const char *why;
		if (!(data = gx_read(g, src, &len, &why)))
			return im_errf(l->c->err, IM_EXIT_UNSUPP, -EOPNOTSUPP,
				       "kernel %s: %s is named in modules.dep but cannot be read (%s); "
				       "nothing changed", k->version, src, why);
		appendix_file(a, dst, data, len);
		free(data);
	}
	return 0;
}

/* The kernel's own indexes: every module of the system is known, the ones
 * added here load, the others stay absent as before. */
static void append_indexes(struct lx *l, struct lkernel *k, struct appendix *a)
{
	char src[600], dst[600];

	for (size_t i = 0; i < sizeof(module_indexes) / sizeof(module_indexes[0]); i++) {
		size_t len;
		char *data;

		/* (they fit: short names, a version of 127 bytes at most) */
		if (str_printf(src, sizeof(src), "%s/%s/%s", l->moddir, k->version,
			       module_indexes[i]) < 0 ||
		    path_join(dst, sizeof(dst), a->prefix, module_indexes[i]) < 0 ||
		    !(data = read_opt(l->c->g, src, &len)))
			continue;
		appendix_file(a, dst, data, len);
		free(data);
	}
}

/* initramfs-tools: init runs modprobe for every line of conf/modules before
 * it looks for the root: what mkinitramfs wrote there, plus ours. */
static void append_initramfs_tools_conf(struct lx *l, const char *const *names, size_t nn,
					struct appendix *a)
{
	guestfs_h *g = l->c->g;
	char **extra = guestfs_ls(g, "/usr/share/initramfs-tools/modules.d");
	struct sbuf list = { 0 };
	char src[600], *d;
	size_t tl;

	for (size_t i = 0; extra && extra[i]; i++) {
		snprintf(src, sizeof(src), "/usr/share/initramfs-tools/modules.d/%s", extra[i]);
		d = read_opt(g, src, &tl);
		module_lines(d, tl, &list);
		free(d);
	}
	for (size_t i = 0; extra && extra[i]; i++)
		free(extra[i]);
	free(extra);
	/* the original list, not the one this plan edits */
	d = read_opt(g, "/etc/initramfs-tools/modules", &tl);
	module_lines(d, tl, &list);
	free(d);
	for (size_t i = 0; i < nn; i++)
		if (!lists_module(list.p, list.len, names[i]))
			sbuf_addf(&list, "%s\n", names[i]);
	cpio_add(&a->ar, "conf", S_IFDIR | 0755, a->ino++, 0, NULL, 0);
	cpio_add(&a->ar, "conf/modules", S_IFREG | 0644, a->ino++, 0, list.p, list.len);
	sbuf_free(&list);
}

/* dracut: rd.driver.pre loads before the root is looked for;
 * modules-load.d for systemd in the initramfs. */
static void append_dracut_conf(const char *const *names, size_t nn, struct appendix *a)
{
	struct sbuf pre = { 0 }, list = { 0 };

	sbuf_adds(&list, "rd.driver.pre=");
	for (size_t i = 0; i < nn; i++) {
		sbuf_addf(&list, "%s%s", i ? "," : "", names[i]);
		sbuf_addf(&pre, "%s\n", names[i]);
	}
	sbuf_adds(&list, "\n");
	cpio_add(&a->ar, "etc", S_IFDIR | 0755, a->ino++, 0, NULL, 0);
	cpio_add(&a->ar, "etc/cmdline.d", S_IFDIR | 0755, a->ino++, 0, NULL, 0);
	cpio_add(&a->ar, "etc/cmdline.d/90imager-virtio.conf", S_IFREG | 0644, a->ino++, 0, list.p,
		 list.len);
	cpio_add(&a->ar, "etc/modules-load.d", S_IFDIR | 0755, a->ino++, 0, NULL, 0);
	cpio_add(&a->ar, "etc/modules-load.d/90imager-virtio.conf", S_IFREG | 0644, a->ino++, 0,
		 pre.p, pre.len);
	sbuf_free(&pre);
	sbuf_free(&list);
}

/* The archive gzipped (every kernel that takes an initramfs unpacks it),
 * planned as an append to the kernel's initramfs. */
static int plan_appendix(struct lx *l, struct lkernel *k, const char *initrd, struct appendix *a,
			 size_t nmodules)
{
	struct conv_ctx *c = l->c;
	struct sbuf gz = { 0 };
	char orig[600], detail[1400];
	size_t cpio_len = a->ar.len;
	int r;

	if (str_printf(orig, sizeof(orig), "%s.imager-orig", initrd) < 0)
		return im_errf(c->err, IM_EXIT_UNSUPP, -ENAMETOOLONG, "%s: path too long", initrd);
	r = gzip_buffer(a->ar.p, a->ar.len, &gz);
	if (r < 0)
		return oom(c);
	snprintf(detail, sizeof(detail),
		 "kernel %s: appended %zu modules (a gzip archive of %zu KiB, %zu KiB unpacked, %s) "
		 "to %s; the original is kept as %s", k->version, nmodules, gz.len / 1024,
		 cpio_len / 1024, conv_block_name(c->o->block),
		 gx_exists(c->g, orig) ? "the original kept from an earlier conversion" : "the initramfs",
		 orig);
	return conv_act(c, ACT_APPEND_INITRD, initrd, gz.p, gz.len, NULL, 0, "append-initramfs",
			detail);
}

/* The fast way for the initramfs at initrd (k->initrd, or a copy of it on
 * the ESP). */
static int plan_append(struct lx *l, struct lkernel *k, const char *initrd)
{
	const char *names[NVIRTIO + 1], *missing;
	struct appendix a = { .ino = 1000 };
	size_t nn, np = 0, nb = 0;
	char **paths = NULL, fsmod[16];
	int r;

	nn = append_module_names(l, k, names, fsmod);
	if (modules_closure(k->dep, k->deplen, k->builtin, k->builtinlen, names, nn, &paths, &np, &nb,
			    &missing) < 0)
		return oom(l->c);
	snprintf(a.prefix, sizeof(a.prefix), "%slib/modules/%s", l->merged_usr ? "usr/" : "",
		 k->version);
	r = append_modules(l, k, paths, np, &a);
	if (!r) {
		append_indexes(l, k, &a);
		if (!strcmp(l->tool, "initramfs-tools"))
			append_initramfs_tools_conf(l, names, nn, &a);
		else
			append_dracut_conf(names, nn, &a);
	}
	cpio_finish(&a.ar, a.ino++);
	strv_free(paths, np);
	strv_free(a.dirs, a.nd);
	if (!r && a.ar.oom)
		r = oom(l->c);
	if (!r)
		r = plan_appendix(l, k, initrd, &a, np);
	sbuf_free(&a.ar);
	return r;
}

/* ---- the full way: the distribution's own tool ---- */

static int plan_rebuild(struct lx *l, struct lkernel *k)
{
	struct conv_ctx *c = l->c;
	char tmp[300], kimg[300], drivers[200] = "", detail[1024];
	char *v[12] = { 0 };
	size_t n = 0;

	snprintf(tmp, sizeof(tmp), "%s.imager-new", k->initrd);
	for (size_t i = 0; i < NVIRTIO; i++)
		if (kernel_has(k, virtio_modules[i]))
			snprintf(drivers + strlen(drivers), sizeof(drivers) - strlen(drivers), "%s%s",
				 drivers[0] ? " " : "", virtio_modules[i]);
	if (!strcmp(l->tool, "initramfs-tools")) {
		v[n++] = strdup("mkinitramfs");
		v[n++] = strdup("-o");
		v[n++] = strdup(tmp);
		v[n++] = strdup(k->version);
	} else if (!strcmp(l->tool, "dracut")) {
		v[n++] = strdup("dracut");
		v[n++] = strdup("--force");
		v[n++] = strdup("--add-drivers");
		v[n++] = strdup(drivers);
		v[n++] = strdup(tmp);
		v[n++] = strdup(k->version);
	} else if (!strcmp(l->tool, "mkinitcpio")) {
		v[n++] = strdup("mkinitcpio");
		v[n++] = strdup("-k");
		v[n++] = strdup(k->version);
		v[n++] = strdup("-g");
		v[n++] = strdup(tmp);
	} else {
		snprintf(kimg, sizeof(kimg), "/boot/vmlinuz-%s", k->version);
		v[n++] = strdup("mkinitrd");
		v[n++] = strdup("-k");
		v[n++] = strdup(kimg);
		v[n++] = strdup("-i");
		v[n++] = strdup(tmp);
	}
	char **argv = calloc(n + 1, sizeof(*argv));
	for (size_t i = 0; i < n; i++)
		if (!v[i])
			argv = (free(argv), NULL);
	if (!argv) {
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		return oom(c);
	}
	memcpy(argv, v, n * sizeof(*argv));
	snprintf(detail, sizeof(detail), "kernel %s: rebuilt with %s inside the appliance (%s); the "
		 "original is kept as %s.imager-orig", k->version, argv[0], drivers, k->initrd);
	return conv_act(c, ACT_REBUILD, k->initrd, NULL, 0, argv, n, "rebuild-initramfs", detail);
}

/* ---- the distribution's configuration keeps the modules ---- */

/* Add words to a list assignment KEY=(a b) or KEY="a b" on its own line. */
static int add_to_list_assignment(struct conv_ctx *c, const char *path, const char *key,
				  const char *const *mods, size_t n)
{
	const char *text;
	size_t len, kl = strlen(key);
	struct sbuf nb = { 0 }, added = { 0 };
	bool done = false;

	FORWARD_ERR(conv_read(c, path, &text, &len));
	if (!text)
		return 0;
	for (size_t i = 0; i < len;) {
		size_t e = i;
		while (e < len && text[e] != '\n')
			e++;
		if (!done && e - i > kl + 1 && !memcmp(text + i, key, kl) && text[i + kl] == '=' &&
		    (text[i + kl + 1] == '(' || text[i + kl + 1] == '"')) {
			char close = text[i + kl + 1] == '(' ? ')' : '"';
			size_t q = e;
			while (q > i + kl + 2 && text[q - 1] != close)
				q--;
			if (q > i + kl + 2 || (q == i + kl + 2 && text[q - 1] == close)) {
				size_t end = q - 1;      /* the closing character */
				sbuf_add(&nb, text + i, end - i);
				for (size_t m = 0; m < n; m++) {
					/* already there? */
					char *inside = strndup(text + i + kl + 2, end - (i + kl + 2));
					bool has = inside && strstr(inside, mods[m]);
					free(inside);
					if (!has) {
						bool space = nb.len && nb.p[nb.len - 1] != ' ' &&
							     nb.p[nb.len - 1] != '(' && nb.p[nb.len - 1] != '"';
						sbuf_addf(&nb, "%s%s", space ? " " : "", mods[m]);
						sbuf_addf(&added, " %s", mods[m]);
					}
				}
				sbuf_add(&nb, text + end, e - end);
				done = true;
				goto next;
			}
		}
		sbuf_add(&nb, text + i, e - i);
	next:
		if (e < len)
			sbuf_add(&nb, "\n", 1);
		i = e + 1;
	}
	char detail[300];
	snprintf(detail, sizeof(detail), "%s gains%s", key, added.len ? added.p : " nothing");
	sbuf_free(&added);
	if (!done) {
		sbuf_free(&nb);
		return 0;
	}
	return conv_edit(c, path, &nb, detail);
}

static int plan_config(struct lx *l, const struct lkernel *k)
{
	struct conv_ctx *c = l->c;
	const char *mods[NVIRTIO];
	size_t n = 0;

	for (size_t i = 0; i < NVIRTIO; i++)
		if (kernel_has(k, virtio_modules[i]) && strcmp(virtio_modules[i], "sd_mod"))
			mods[n++] = virtio_modules[i];
	if (!strcmp(l->tool, "initramfs-tools")) {
		const char *text;
		size_t len;
		struct sbuf nb = { 0 }, added = { 0 };
		FORWARD_ERR(conv_read(c, "/etc/initramfs-tools/modules", &text, &len));
		if (text)
			sbuf_add(&nb, text, len);
		if (nb.len && nb.p[nb.len - 1] != '\n')
			sbuf_add(&nb, "\n", 1);
		bool header = false;
		for (size_t i = 0; i < n; i++) {
			if (lists_module(text, len, mods[i]))
				continue;
			if (!header)
				sbuf_adds(&nb, "# Added by imager convert: boot on virtio.\n");
			header = true;
			sbuf_addf(&nb, "%s\n", mods[i]);
			sbuf_addf(&added, " %s", mods[i]);
		}
		char detail[300];
		snprintf(detail, sizeof(detail), "lists%s for the next initramfs rebuild", added.p ? added.p : " them already");
		sbuf_free(&added);
		return conv_edit(c, "/etc/initramfs-tools/modules", &nb, detail);
	}
	if (!strcmp(l->tool, "dracut") || !strcmp(l->tool, "suse-mkinitrd")) {
		struct sbuf nb = { 0 };
		sbuf_adds(&nb, "# Added by imager convert: boot on virtio.\nadd_drivers+=\"");
		for (size_t i = 0; i < n; i++)
			sbuf_addf(&nb, " %s", mods[i]);
		sbuf_adds(&nb, " \"\n");
		if (!strcmp(l->tool, "suse-mkinitrd"))
			FORWARD_ERR(add_to_list_assignment(c, "/etc/sysconfig/kernel", "INITRD_MODULES", mods, n));
		if (!gx_is_dir(c->g, "/etc/dracut.conf.d")) {
			if (!strcmp(l->tool, "suse-mkinitrd")) {
				sbuf_free(&nb);
				return 0;
			}
			FORWARD_ERR(conv_act(c, ACT_MKDIR, "/etc/dracut.conf.d", NULL, 0, NULL, 0, "create",
					     "folder for dracut's settings"));
		}
		return conv_edit(c, "/etc/dracut.conf.d/90-imager-virtio.conf", &nb,
				 "add_drivers for the next initramfs rebuild");
	}
	if (!strcmp(l->tool, "mkinitcpio"))
		return add_to_list_assignment(c, "/etc/mkinitcpio.conf", "MODULES", mods, n);
	return 0;
}

/* ---- device names ---- */

static bool uuid_of(void *opaque, unsigned disk, unsigned part, char *uuid, size_t len)
{
	struct conv_ctx *c = opaque;
	char dev[96];
	char *u;

	if (disk >= c->ndevices)
		return false;
	snprintf(dev, sizeof(dev), "%s%u", c->devices[disk], part);
	u = guestfs_vfs_uuid(c->g, dev);
	if (!u || !*u) {
		free(u);
		return false;
	}
	snprintf(uuid, len, "%s", u);
	free(u);
	return true;
}

/* guestfs_ls's answer freed (NULL too) */
static void free_ls(char **ents)
{
	for (size_t i = 0; ents && ents[i]; i++)
		free(ents[i]);
	free(ents);
}

/* One file's disk names remapped (grubenv: kept at its fixed size). */
/* Does path hold kernel command lines (GRUB's files, BLS entries,
 * extlinux, /etc/kernel/cmdline, grubenv), not only device names? */
static bool holds_cmdline(const char *path)
{
	static const char *const not[] = { "/etc/fstab", "/etc/crypttab", "/etc/uswsusp.conf",
					   "/etc/initramfs-tools/conf.d/resume" };
	size_t n = strlen(path);

	for (size_t i = 0; i < sizeof(not) / sizeof(not[0]); i++)
		if (!strcmp(path, not[i]))
			return false;
	return !(n >= 10 && !strcmp(path + n - 10, "device.map"));
}

static int remap_file(struct lx *l, const char *path, enum conv_bus bus, bool grubenv)
{
	struct conv_ctx *c = l->c;
	const char *text;
	size_t len, nch = 0, ncc = 0;
	struct remap_change *ch = NULL, *cch = NULL;
	struct sbuf nb, cb;
	char detail[900];
	int r = 0;

	if (gx_is_link(c->g, path))
		return 0;   /* edited through the file it points to */
	FORWARD_ERR(conv_read(c, path, &text, &len));
	if (!text)
		return 0;
	if (remap_text(text, len, bus, uuid_of, c, &nb, &ch, &nch) < 0)
		return oom(c);
	/* and in kernel command lines, Xen's console becomes the serial port */
	if (holds_cmdline(path)) {
		if (console_remap(nb.p, nb.len, &cb, &cch, &ncc) < 0)
			r = -ENOMEM;
		else {
			sbuf_free(&nb);
			nb = cb;
		}
	}
	if (!r && nch + ncc && grubenv)
		r = grubenv_refit(&nb, len);
	if (r < 0 || !(nch + ncc)) {
		sbuf_free(&nb);
		free(ch);
		free(cch);
		if (r == -ENOMEM)
			return oom(c);
		if (r < 0)   /* the kernel's options would keep the old names: refused,
			      * before anything is written */
			return im_errf(c->err, IM_EXIT_UNSUPP, r,
				       "%s names disks by their old names, and %s: run grub2-editenv "
				       "on the machine to name them by UUID, then convert again",
				       path, r == -ENOSPC ? "the new names do not fit in its fixed size"
							  : "it is not a GRUB environment block");
		return 0;
	}
	size_t o = (size_t)snprintf(detail, sizeof(detail), "device names:");
	for (size_t i = 0; i < nch + ncc && o < sizeof(detail) - 1; i++) {
		const struct remap_change *x = i < nch ? &ch[i] : &cch[i - nch];
		o += (size_t)snprintf(detail + o, sizeof(detail) - o, "%s line %u %s -> %s",
				      i ? "," : "", x->line, x->from, x->to);
	}
	free(ch);
	free(cch);
	return conv_edit(c, path, &nb, detail);
}

/* Boot Loader Specification type 1 entries (systemd-boot, and Fedora's and
 * RHEL's GRUB through blscfg): each *.conf file's options line. */
static const char *const bls_dirs[] = {
	"/boot/loader/entries", "/boot/efi/loader/entries", "/efi/loader/entries",
};
/* where GRUB keeps its environment block (RHEL 8's kernelopts=) */
static const char *const grubenv_files[] = {
	"/boot/grub2/grubenv", "/boot/grub/grubenv",
};

/* A path a BLS entry names on the ESP ("/MID/VER/initrd.img-VER"): absolute,
 * printable, no "." or ".." component, short. */
static bool esp_path_ok(const char *v, size_t n)
{
	if (n < 2 || n > 200 || v[0] != '/')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] <= ' ' || v[i] == 0x7f || v[i] == '\\')
			return false;
	for (size_t i = 0; i < n; i++)
		if (v[i] == '/' && v[i + 1] == '.' &&
		    (i + 2 == n || v[i + 2] == '/' || (v[i + 2] == '.' && (i + 3 == n || v[i + 3] == '/'))))
			return false;
	return true;
}

/* One entry's text: which kernel it boots (its version line, else a known
 * version in its linux path) and the initramfs files it names, added to
 * that kernel's esp_initrd (ESP paths as the guest mounts them). */
static void esp_entry(struct lx *l, const char *esp, const char *text, size_t len)
{
	char version[128] = "", linux_path[256] = "", initrds[MAX_ESP_INITRDS][256];
	size_t ni = 0;
	struct lkernel *k = NULL;

	for (size_t i = 0; i < len;) {
		size_t e = i, ks, ke, vs, ve;
		while (e < len && text[e] != '\n')
			e++;
		for (ks = i; ks < e && (text[ks] == ' ' || text[ks] == '\t'); ks++)
			;
		for (ke = ks; ke < e && text[ke] != ' ' && text[ke] != '\t'; ke++)
			;
		for (vs = ke; vs < e && (text[vs] == ' ' || text[vs] == '\t'); vs++)
			;
		for (ve = e; ve > vs && (text[ve - 1] == ' ' || text[ve - 1] == '\t' || text[ve - 1] == '\r'); ve--)
			;
		size_t kl = ke - ks, vl = ve - vs;
#define KEY(w) (kl == sizeof(w) - 1 && !memcmp(text + ks, w, kl))
		if (KEY("version") && vl < sizeof(version))
			snprintf(version, sizeof(version), "%.*s", (int)vl, text + vs);
		else if (KEY("linux") && vl < sizeof(linux_path))
			snprintf(linux_path, sizeof(linux_path), "%.*s", (int)vl, text + vs);
		else if (KEY("initrd") && ni < MAX_ESP_INITRDS && esp_path_ok(text + vs, vl))
			snprintf(initrds[ni++], sizeof(initrds[0]), "%.*s", (int)vl, text + vs);
#undef KEY
		i = e + 1;
	}
	for (size_t j = 0; j < l->nk && !k; j++)
		if (!strcmp(version, l->k[j].version))
			k = &l->k[j];
	for (size_t j = 0; j < l->nk && !k && linux_path[0]; j++)
		if (strstr(linux_path, l->k[j].version))
			k = &l->k[j];
	for (size_t j = 0; k && j < ni; j++) {
		char path[320];
		bool seen = false;
		if ((size_t)snprintf(path, sizeof(path), "%s%s", esp, initrds[j]) >= sizeof(path) ||
		    !strcmp(path, k->initrd) || !gx_is_file(l->c->g, path))
			continue;
		for (size_t m = 0; m < k->nesp; m++)
			seen |= !strcmp(k->esp_initrd[m], path);
		if (!seen && k->nesp < MAX_ESP_INITRDS)
			snprintf(k->esp_initrd[k->nesp++], sizeof(k->esp_initrd[0]), "%s", path);
	}
}

/* The initramfs copies that systemd-boot's entries on the ESP boot. */
static void find_esp_initrds(struct lx *l)
{
	static const char *const esps[] = { "/boot/efi", "/efi" };

	for (size_t d = 0; d < sizeof(esps) / sizeof(esps[0]); d++) {
		char dir[64], path[512];
		snprintf(dir, sizeof(dir), "%s/loader/entries", esps[d]);
		char **ents = gx_is_dir(l->c->g, dir) ? guestfs_ls(l->c->g, dir) : NULL;
		for (size_t i = 0; ents && ents[i]; i++) {
			size_t n = strlen(ents[i]), len;
			char *text;
			if (n < 6 || strcmp(ents[i] + n - 5, ".conf") ||
			    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, ents[i]) >= sizeof(path) ||
			    !gx_is_file(l->c->g, path))
				continue;
			if ((text = gx_read(l->c->g, path, &len, NULL)) && len <= 65536)
				esp_entry(l, esps[d], text, len);
			free(text);
		}
		free_ls(ents);
	}
}

static int plan_names(struct lx *l)
{
	struct conv_ctx *c = l->c;
	enum conv_bus bus = c->o->block == CONV_BLOCK_VIRTIO_SCSI ? CONV_BUS_VIRTIO_SCSI : CONV_BUS_VIRTIO_BLK;

	for (size_t f = 0; f < sizeof(name_files) / sizeof(name_files[0]); f++)
		FORWARD_ERR(remap_file(l, name_files[f], bus, false));
	for (size_t f = 0; f < sizeof(grubenv_files) / sizeof(grubenv_files[0]); f++)
		FORWARD_ERR(remap_file(l, grubenv_files[f], bus, true));
	for (size_t d = 0; d < sizeof(bls_dirs) / sizeof(bls_dirs[0]); d++) {
		char **ents = gx_is_dir(c->g, bls_dirs[d]) ? guestfs_ls(c->g, bls_dirs[d]) : NULL;
		int r = 0;

		for (size_t i = 0; ents && ents[i] && r == 0; i++) {
			size_t n = strlen(ents[i]);
			char path[512];

			if (n < 6 || strcmp(ents[i] + n - 5, ".conf") ||
			    (size_t)snprintf(path, sizeof(path), "%s/%s", bls_dirs[d], ents[i]) >= sizeof(path))
				continue;
			r = remap_file(l, path, bus, false);
		}
		free_ls(ents);
		FORWARD_ERR(r);
	}
	return 0;
}

/* ---- UEFI: the removable-media loader ---- */

/* A copied disk starts under a new NVRAM that has none of the machine's
 * boot entries; OVMF then boots \EFI\BOOT\BOOTX64.EFI, the path firmware
 * tries on any disk.  Distributions that install only their own folder
 * (Debian: \EFI\debian) leave that path empty, and the guest would stop
 * in the firmware.  So, when it is missing, the distribution's loader goes
 * there, as grub-install --removable lays it out: shim as BOOTX64.EFI with
 * GRUB (grubx64.efi), MokManager and grub.cfg beside it (shim loads GRUB
 * from its own folder, the signed GRUB reads grub.cfg from its own); GRUB
 * alone as BOOTX64.EFI when there is no shim.  shim's fallback (fbx64.efi)
 * is not copied: without its BOOTX64.CSV it would reset the machine. */
static int copy_esp_file(struct lx *l, const char *from, const char *to)
{
	struct conv_ctx *c = l->c;
	const char *data;
	size_t len;
	struct sbuf nb = { 0 };
	char detail[320];

	FORWARD_ERR(conv_read(c, from, &data, &len));
	if (!data)
		return 0;
	sbuf_add(&nb, data, len);
	snprintf(detail, sizeof(detail), "UEFI removable-media loader: a copy of %s", from);
	return conv_edit(c, to, &nb, detail);
}

static int plan_uefi_fallback(struct lx *l)
{
	struct conv_ctx *c = l->c;
	static const char *const esp = "/boot/efi/EFI";
	char dir[300] = "", path[400], **ents;
	bool shim = false;

	if (strcmp(c->rep->firmware, "uefi") || !gx_is_dir(c->g, esp))
		return 0;
	/* (FAT: the lookup ignores case, so this finds efi/boot/bootx64.efi too) */
	if (gx_exists(c->g, "/boot/efi/EFI/BOOT/BOOTX64.EFI"))
		return 0;
	if (!(ents = guestfs_ls(c->g, esp)))
		return 0;
	for (size_t i = 0; ents[i]; i++) {
		char d[300];
		bool s;

		if (!strcasecmp(ents[i], "BOOT") || strchr(ents[i], '/') ||
		    (size_t)snprintf(d, sizeof(d), "%s/%s", esp, ents[i]) >= sizeof(d))
			continue;
		snprintf(path, sizeof(path), "%s/shimx64.efi", d);
		s = gx_is_file(c->g, path);
		snprintf(path, sizeof(path), "%s/grubx64.efi", d);
		/* the first folder with a loader; one with shim over one without */
		if ((s || gx_is_file(c->g, path)) && (!dir[0] || (s && !shim))) {
			snprintf(dir, sizeof(dir), "%s", d);
			shim = s;
		}
	}
	free_ls(ents);
	if (!dir[0]) {
		conv_change(c, "/boot/efi/EFI/BOOT/BOOTX64.EFI", "note",
			    "UEFI: no removable-media loader, and no shimx64.efi or grubx64.efi "
			    "in any folder of the ESP to put there: the guest boots only from a "
			    "boot entry in the new machine's NVRAM");
		return 0;
	}
	FORWARD_ERR(conv_act(c, ACT_MKDIR, "/boot/efi/EFI/BOOT", NULL, 0, NULL, 0, "mkdir",
			     "UEFI removable-media folder"));
	FORWARD_ERR(path_join_err(path, sizeof(path), dir, shim ? "shimx64.efi" : "grubx64.efi",
				  c->err));
	FORWARD_ERR(copy_esp_file(l, path, "/boot/efi/EFI/BOOT/BOOTX64.EFI"));
	static const char *const beside[] = { "grubx64.efi", "mmx64.efi", "grub.cfg" };
	for (size_t i = shim ? 0 : 2; i < sizeof(beside) / sizeof(beside[0]); i++) {
		char to[64];
		FORWARD_ERR(path_join_err(path, sizeof(path), dir, beside[i], c->err));
		snprintf(to, sizeof(to), "/boot/efi/EFI/BOOT/%s", beside[i]);
		if (gx_is_file(c->g, path))
			FORWARD_ERR(copy_esp_file(l, path, to));
	}
	return 0;
}

/* ---- the old platform ---- */

/* A link to /dev/null: a masked unit, which stays masked. */
static bool masked(guestfs_h *g, const char *path)
{
	char *t = guestfs_readlink(g, path);
	bool m = t && !strcmp(t, "/dev/null");
	free(t);
	return m;
}

/* The links in dir (an enabling folder, /etc/systemd/system's aliases, a
 * runlevel's start links) to the old platform's services, removed. */
static int disable_in(struct conv_ctx *c, const char *dir)
{
	char **ents = gx_is_dir(c->g, dir) ? guestfs_ls(c->g, dir) : NULL;
	int r = 0;

	for (size_t i = 0; ents && ents[i] && !r; i++) {
		char path[600];
		r = path_join_err(path, sizeof(path), dir, ents[i], c->err);
		const char *what = old_platform_service(ents[i], strlen(ents[i]));
		if (r == 0 && what && gx_is_link(c->g, path) && !masked(c->g, path)) {
			char detail[120];
			snprintf(detail, sizeof(detail),
				 "service of the old platform (%s) no longer started", what);
			r = conv_act(c, ACT_REMOVE, path, NULL, 0, NULL, 0, "disable", detail);
		}
	}
	free_ls(ents);
	return r;
}

static int plan_old_platform(struct lx *l)
{
	struct conv_ctx *c = l->c;
	char **ents;
	static const char *const rc[] = { "/etc/rc0.d", "/etc/rc1.d", "/etc/rc2.d", "/etc/rc3.d",
					  "/etc/rc4.d", "/etc/rc5.d", "/etc/rc6.d", "/etc/rcS.d",
					  "/etc/rc.d/rc3.d", "/etc/rc.d/rc5.d" };

	if ((ents = gx_is_dir(c->g, "/etc/systemd/system") ? guestfs_ls(c->g, "/etc/systemd/system")
							   : NULL)) {
		int r = 0;
		for (size_t i = 0; ents[i] && !r; i++) {
			size_t n = strlen(ents[i]);
			char dir[400];
			/* WantedBy= and RequiredBy= (vgauth.service is in
			 * open-vm-tools.service.requires) */
			if ((n > 6 && !strcmp(ents[i] + n - 6, ".wants")) ||
			    (n > 9 && !strcmp(ents[i] + n - 9, ".requires"))) {
				snprintf(dir, sizeof(dir), "/etc/systemd/system/%s", ents[i]);
				r = disable_in(c, dir);
			}
		}
		free_ls(ents);
		FORWARD_ERR(r);
		/* Alias= links (vmtoolsd.service to open-vm-tools.service) */
		FORWARD_ERR(disable_in(c, "/etc/systemd/system"));
	}
	for (size_t i = 0; i < sizeof(rc) / sizeof(rc[0]); i++)
		FORWARD_ERR(disable_in(c, rc[i]));
	/* The old platform's drivers in the module lists (Xen PV, VMware,
	 * Hyper-V, VirtualBox): not needed on virtio; each named with what it
	 * drove. */
	static const char *const lists[] = { "/etc/initramfs-tools/modules", "/etc/modules" };
	for (size_t i = 0; i < 2; i++) {
		const char *text, *what;
		size_t len;
		struct sbuf nb = { 0 }, why = { 0 };
		FORWARD_ERR(conv_read(c, lists[i], &text, &len));
		struct mline m;
		size_t pos = 0;
		while (next_mline(text, len, &pos, &m)) {
			size_t wl = m.word_end - m.word;
			if ((what = old_platform_module(text + m.word, wl)))
				sbuf_addf(&why, "%s%.*s (%s)", why.len ? ", " : "", (int)wl,
					  text + m.word, what);
			else
				sbuf_add(&nb, text + m.start, m.end - m.start + (m.end < len));
		}
		if (why.len) {
			char detail[1000];
			snprintf(detail, sizeof(detail), "drivers of the old platform no longer loaded, "
				 "not needed on virtio: %s", why.p);
			if (why.oom)
				nb.oom = true;
			sbuf_free(&why);
			FORWARD_ERR(conv_edit(c, lists[i], &nb, detail));
		} else {
			sbuf_free(&nb);
			sbuf_free(&why);
		}
	}
	for (size_t i = 0; i < sizeof(device_caches) / sizeof(device_caches[0]); i++)
		if (gx_is_file(c->g, device_caches[i]))
			FORWARD_ERR(conv_act(c, ACT_REMOVE, device_caches[i], NULL, 0, NULL, 0, "remove",
					     "cache of the old machine's devices"));
	return 0;
}

/* ---- the whole Linux plan ---- */

static int linux_plan(struct conv_ctx *c, const char *root)
{
	struct lx l = { .c = c };
	struct lkernel *def = NULL;
	char *fs;
	int r;

	if (c->o->phase)
		c->o->phase(c->o->opaque, "planning");
	fs = guestfs_vfs_type(c->g, root);
	snprintf(l.rootfs, sizeof(l.rootfs), "%s", fs ? fs : "");
	free(fs);
	find_bootloader(&l);
	conv_find_firmware(l.c);
	if ((r = find_kernels(&l)) < 0)
		goto out;
	if ((r = choose_default(&l, &def)) < 0)
		goto out;
	if ((r = find_initramfs_tool(&l, def)) < 0)
		goto out;
	snprintf(c->rep->default_kernel, sizeof(c->rep->default_kernel), "%s", def->version);
	c->rep->virtio_net = def->net;
	bool rebuild = c->o->rebuild_initramfs;
	bool any_initrd = false;
	find_esp_initrds(&l);
	for (size_t i = 0; i < l.nk; i++)
		any_initrd |= l.k[i].virtio && (l.k[i].initrd[0] || l.k[i].nesp);
	if (any_initrd && !l.tool[0]) {
		r = im_errf(c->err, IM_EXIT_UNSUPP, -EOPNOTSUPP,
			    "the guest boots from an initramfs, but no known tool made it "
			    "(initramfs-tools, dracut, mkinitcpio, SUSE mkinitrd); nothing changed");
		goto out;
	}
	if (!rebuild && (!strcmp(l.tool, "mkinitcpio") || !strcmp(l.tool, "suse-mkinitrd"))) {
		rebuild = true;   /* their initramfs has no place for an appended list */
		conv_change(c, "", "note", "%s: the initramfs is rebuilt with the guest's own tool "
			    "(the fast way covers initramfs-tools and dracut)", l.tool);
	}
	snprintf(c->rep->method, sizeof(c->rep->method), "%s", rebuild ? "rebuild" : "append");
	/* Configuration first, so that a rebuild sees it. */
	if (l.tool[0] && (r = plan_config(&l, def)) < 0)
		goto out;
	if ((r = plan_names(&l)) < 0)
		goto out;
	if ((r = plan_uefi_fallback(&l)) < 0)
		goto out;
	if ((r = plan_old_platform(&l)) < 0)
		goto out;
	for (size_t i = 0; i < l.nk && !r; i++) {
		if (!l.k[i].virtio)
			continue;
		if (l.k[i].initrd[0])
			r = rebuild ? plan_rebuild(&l, &l.k[i]) : plan_append(&l, &l.k[i], l.k[i].initrd);
		/* (the ESP's copies get the archive either way: a rebuild's
		 * image is made in /boot, which systemd-boot does not read) */
		for (size_t j = 0; j < l.k[i].nesp && !r; j++)
			r = plan_append(&l, &l.k[i], l.k[i].esp_initrd[j]);
	}
out:
	for (size_t i = 0; i < l.nk; i++) {
		free(l.k[i].dep);
		free(l.k[i].builtin);
	}
	free(l.k);
	return r;
}

static bool linux_matches(const struct conv_report *rep)
{
	return !strcmp(rep->os_type, "linux");
}

const struct converter conv_linux = {
	.name = "linux",
	.matches = linux_matches,
	.plan = linux_plan,
	.apply = NULL,
	.free = NULL,
};
