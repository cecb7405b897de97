/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Conversion text work: disk names, remapping, module closures, GRUB menus,
 * newc archives (read back by the real cpio). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convtext.h"
#include "unit.h"

static bool parse(const char *s, struct devref *d) { return devname_parse(s, strlen(s), d); }

static void names(void)
{
	struct devref d;
	CHECK(parse("/dev/sda1", &d) && d.kind == DEV_SD && d.disk == 0 && d.part == 1 && d.len == 9);
	CHECK(parse("/dev/sdb", &d) && d.disk == 1 && d.part == 0);
	CHECK(parse("/dev/sdaa3", &d) && d.disk == 26 && d.part == 3);
	CHECK(parse("/dev/hdc2", &d) && d.kind == DEV_HD && d.disk == 2 && d.part == 2);
	CHECK(parse("/dev/xvda1", &d) && d.kind == DEV_XVD && d.disk == 0 && d.part == 1);
	CHECK(parse("/dev/nvme0n1p2", &d) && d.kind == DEV_NVME && d.disk == 0 && d.part == 2);
	CHECK(parse("/dev/nvme1n1", &d) && d.disk == 1 && d.part == 0);
	CHECK(parse("/dev/cciss/c0d1p3", &d) && d.kind == DEV_CCISS && d.disk == 1 && d.part == 3);
	CHECK(parse("/dev/mmcblk0p1", &d) && d.kind == DEV_MMC && d.disk == 0 && d.part == 1);
	CHECK(parse("/dev/vda1 rest", &d) && d.kind == DEV_VD && d.len == 9);
	CHECK(parse("/dev/sda1,ro", &d) && d.len == 9);
	/* not disk names, or names running into something else */
	CHECK(!parse("/dev/sdab1x", &d));
	CHECK(!parse("/dev/sda1-x", &d));
	CHECK(!parse("/dev/sdaaa", &d));
	CHECK(!parse("/dev/shm", &d));
	CHECK(!parse("/dev/nvme0", &d));
	CHECK(!parse("/dev/nvme0n0", &d));
	CHECK(!parse("/dev/nvme0n1p", &d));
	CHECK(!parse("/dev/sd", &d));
	CHECK(!parse("/dev/", &d));
	CHECK(!parse("/dev/sda99999999", &d));
	CHECK(!parse("/dev/mapper/vg-root", &d));
	CHECK(!devname_parse("/dev/sda1", 4, &d));

	char out[32];
	CHECK(devname_virtio(0, 1, CONV_BUS_VIRTIO_BLK, out, sizeof(out)) == 0);
	CHECK_STR(out, "/dev/vda1");
	CHECK(devname_virtio(27, 0, CONV_BUS_VIRTIO_SCSI, out, sizeof(out)) == 0);
	CHECK_STR(out, "/dev/sdab");
	CHECK(devname_virtio(26 * 27, 0, CONV_BUS_VIRTIO_BLK, out, sizeof(out)) < 0);
}

static bool fake_uuid(void *opaque, unsigned disk, unsigned part, char *uuid, size_t len)
{
	(void)opaque;
	if (disk != 0 || part == 3)
		return false;      /* partition 3 has no filesystem UUID */
	snprintf(uuid, len, "uuid-%u", part);
	return true;
}

static void remap(void)
{
	const char *fstab =
		"# /etc/fstab: /dev/sda1 was the root\n"
		"/dev/sda1 / ext4 errors=remount-ro 0 1\n"
		"/dev/sda2 none swap sw 0 0\n"
		"/dev/sda3 /srv xfs defaults 0 0\n"
		"/dev/sdb1 /data ext4 defaults 0 2\n"
		"tmpfs /dev/shm tmpfs defaults 0 0\n"
		"/dev/vda5 /x ext4 defaults 0 0\n"
		"/mnt/dev/sda1 /y none bind 0 0\n";
	struct sbuf out;
	struct remap_change *ch;
	size_t n;

	CHECK(remap_text(fstab, strlen(fstab), CONV_BUS_VIRTIO_BLK, fake_uuid, NULL, &out, &ch, &n) == 0);
	CHECK_STR(out.p,
		  "# /etc/fstab: /dev/vda1 was the root\n"
		  "UUID=uuid-1 / ext4 errors=remount-ro 0 1\n"
		  "UUID=uuid-2 none swap sw 0 0\n"
		  "/dev/vda3 /srv xfs defaults 0 0\n"
		  "/dev/vdb1 /data ext4 defaults 0 2\n"
		  "tmpfs /dev/shm tmpfs defaults 0 0\n"
		  "/dev/vda5 /x ext4 defaults 0 0\n"
		  "/mnt/dev/sda1 /y none bind 0 0\n");
	CHECK_EQ_U(n, 5);
	CHECK_EQ_U(ch[1].line, 2);
	CHECK_STR(ch[1].from, "/dev/sda1");
	CHECK_STR(ch[1].to, "UUID=uuid-1");
	free(ch);
	sbuf_free(&out);

	const char *grub = "\tlinux /boot/vmlinuz-6.1 root=/dev/nvme0n1p1 ro resume=/dev/nvme0n1p3 quiet\n"
			   "(hd0) /dev/nvme0n1\n";
	CHECK(remap_text(grub, strlen(grub), CONV_BUS_VIRTIO_SCSI, fake_uuid, NULL, &out, NULL, &n) == 0);
	CHECK_STR(out.p, "\tlinux /boot/vmlinuz-6.1 root=UUID=uuid-1 ro resume=/dev/sda3 quiet\n"
			 "(hd0) /dev/sda\n");
	CHECK_EQ_U(n, 3);
	sbuf_free(&out);

	/* sd names stay under virtio-scsi; nothing to do is not an error */
	const char *same = "/dev/sda1 / ext4 defaults 0 1";
	CHECK(remap_text(same, strlen(same), CONV_BUS_VIRTIO_SCSI, NULL, NULL, &out, NULL, &n) == 0);
	CHECK_STR(out.p, same);
	CHECK_EQ_U(n, 0);
	sbuf_free(&out);

	/* a BLS entry's options line: root by UUID, LVM names and rd.lvm.lv kept */
	const char *bls = "title Rocky Linux\nversion 5.14.0\nlinux /vmlinuz-5.14.0\n"
			  "options root=/dev/sda2 ro resume=/dev/mapper/rl-swap rd.lvm.lv=rl/swap "
			  "console=ttyS0\n";
	CHECK(remap_text(bls, strlen(bls), CONV_BUS_VIRTIO_BLK, fake_uuid, NULL, &out, NULL, &n) == 0);
	CHECK_STR(out.p, "title Rocky Linux\nversion 5.14.0\nlinux /vmlinuz-5.14.0\n"
			 "options root=UUID=uuid-2 ro resume=/dev/mapper/rl-swap rd.lvm.lv=rl/swap "
			 "console=ttyS0\n");
	CHECK_EQ_U(n, 1);
	sbuf_free(&out);

	/* hostile: a name at the very end, embedded NULs, a cut name */
	const char bin[] = "x\0/dev/hda1\0/dev/xvd";
	CHECK(remap_text(bin, sizeof(bin) - 1, CONV_BUS_VIRTIO_BLK, NULL, NULL, &out, NULL, &n) == 0);
	CHECK_EQ_U(out.len, sizeof(bin) - 1);
	CHECK(!memcmp(out.p, "x\0/dev/vda1\0/dev/xvd", out.len));
	CHECK_EQ_U(n, 1);
	sbuf_free(&out);
}

static void consoles(void)
{
	const char *cfg = "\tlinux /vmlinuz root=/dev/xvda1 console=hvc0 ro\n"
			  "GRUB_CMDLINE_LINUX=\"console=xvc0 console=tty0\"\n"
			  "# console=hvc1 in a comment is a value too\n"
			  "console=hvc console=hvc0x noconsole=hvc0 myconsole=xvc3 console=hvc12";
	struct sbuf out;
	struct remap_change *ch;
	size_t n;

	CHECK(console_remap(cfg, strlen(cfg), &out, &ch, &n) == 0);
	CHECK_STR(out.p, "\tlinux /vmlinuz root=/dev/xvda1 console=ttyS0 ro\n"
			 "GRUB_CMDLINE_LINUX=\"console=ttyS0 console=tty0\"\n"
			 "# console=ttyS1 in a comment is a value too\n"
			 "console=hvc console=hvc0x noconsole=hvc0 myconsole=xvc3 console=ttyS12");
	CHECK_EQ_U(n, 4);
	CHECK_EQ_U(ch[0].line, 1);
	CHECK_STR(ch[0].from, "console=hvc0");
	CHECK_STR(ch[0].to, "console=ttyS0");
	CHECK_EQ_U(ch[1].line, 2);
	CHECK_STR(ch[1].from, "console=xvc0");
	CHECK_EQ_U(ch[3].line, 4);
	CHECK_STR(ch[3].to, "console=ttyS12");
	free(ch);
	sbuf_free(&out);

	/* hostile: cut at the end, NULs, nothing to do */
	const char bin[] = "console=hvc\0 console=xvc7";
	CHECK(console_remap(bin, sizeof(bin) - 1, &out, NULL, &n) == 0);
	CHECK_EQ_U(out.len, sizeof(bin));
	CHECK(!memcmp(out.p, "console=hvc\0 console=ttyS7", out.len));
	CHECK_EQ_U(n, 1);
	sbuf_free(&out);
	CHECK(console_remap("console=ttyS0", 13, &out, NULL, &n) == 0);
	CHECK_STR(out.p, "console=ttyS0");
	CHECK_EQ_U(n, 0);
	sbuf_free(&out);
}

static void modules(void)
{
	const char *dep =
		"kernel/drivers/virtio/virtio.ko:\n"
		"kernel/drivers/virtio/virtio_ring.ko: kernel/drivers/virtio/virtio.ko\n"
		"kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n"
		"kernel/drivers/virtio/virtio_pci.ko.xz: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n"
		"kernel/drivers/virtio/virtio_pci_legacy_dev.ko:\n"
		"kernel/fs/ext4/ext4.ko: kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko\n";
	const char *builtin = "kernel/drivers/scsi/sd_mod.ko\n";
	const char *want[] = { "virtio_pci", "virtio-blk", "sd_mod" };
	char **p;
	size_t np, nb;
	const char *missing;

	CHECK(module_path_is("kernel/drivers/block/virtio_blk.ko", 34, "virtio-blk"));
	CHECK(!module_path_is("kernel/drivers/block/virtio_blk.ko", 34, "virtio"));
	CHECK(!module_path_is("virtio_blk.kox", 14, "virtio_blk"));
	CHECK(modules_closure(dep, strlen(dep), builtin, strlen(builtin), want, 3, &p, &np, &nb,
			      &missing) == 0);
	CHECK(missing == NULL);
	CHECK_EQ_U(nb, 1);
	CHECK_EQ_U(np, 5);
	if (np == 5) {
		CHECK_STR(p[0], "kernel/drivers/virtio/virtio.ko");
		CHECK_STR(p[1], "kernel/drivers/virtio/virtio_ring.ko");
		CHECK_STR(p[2], "kernel/drivers/virtio/virtio_pci_legacy_dev.ko");
		CHECK_STR(p[3], "kernel/drivers/virtio/virtio_pci.ko.xz");
		CHECK_STR(p[4], "kernel/drivers/block/virtio_blk.ko");
	}
	strv_free(p, np);
	const char *none[] = { "virtio_scsi" };
	CHECK(modules_closure(dep, strlen(dep), NULL, 0, none, 1, &p, &np, &nb, &missing) == 0);
	CHECK_STR(missing, "virtio_scsi");
	CHECK_EQ_U(np, 0);
	strv_free(p, np);
	/* hostile modules.dep: no newline at the end, empty, colons only */
	const char *bad = "::\n:\nkernel/x/virtio_scsi.ko:   ";
	CHECK(modules_closure(bad, strlen(bad), NULL, 0, none, 1, &p, &np, &nb, &missing) == 0);
	CHECK(missing == NULL);
	CHECK_EQ_U(np, 1);
	strv_free(p, np);
}

static void grub(void)
{
	const char *cfg =
		"set default=\"0\"\n"
		"menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-U' {\n"
		"\tlinux\t/boot/vmlinuz-5.10.0-old root=/dev/sda1 ro\n"
		"}\n"
		"submenu 'Advanced options' $menuentry_id_option 'gnulinux-advanced-U' {\n"
		"\tmenuentry 'Debian, with Linux 6.1.0-new' $menuentry_id_option 'gnulinux-6.1.0-new-advanced-U' {\n"
		"\t\tlinux /vmlinuz-6.1.0-new root=/dev/sda1 ro\n"
		"\t\techo 'Loading { ...'\n"
		"\t}\n"
		"\tmenuentry 'Debian, with Linux 5.10.0-old' $menuentry_id_option 'gnulinux-5.10.0-old-advanced-U' {\n"
		"\t\tlinux /boot/vmlinuz-5.10.0-old root=/dev/sda1 ro\n"
		"\t}\n"
		"}\n"
		"menuentry 'Memory test' {\n\tlinux16 /boot/memtest86+.bin\n}\n";
	struct grub_entry e[8];
	char dv[64];
	int n = grub_entries(cfg, strlen(cfg), e, 8, dv, sizeof(dv));

	CHECK_EQ_U(n, 4);
	CHECK_STR(dv, "0");
	if (n == 4) {
		CHECK_STR(e[0].kernel, "5.10.0-old");
		CHECK_STR(e[0].index, "0");
		CHECK_STR(e[1].index, "1>0");
		CHECK_STR(e[1].id, "gnulinux-advanced-U>gnulinux-6.1.0-new-advanced-U");
		CHECK_STR(e[1].kernel, "6.1.0-new");
		CHECK_STR(e[2].index, "1>1");
		CHECK_STR(e[3].index, "2");
		CHECK_STR(e[3].kernel, "");
	}
	CHECK_EQ_U(grub_default_entry(e, 4, "0"), 0);
	CHECK_EQ_U(grub_default_entry(e, 4, "1>0"), 1);
	CHECK_EQ_U(grub_default_entry(e, 4, "gnulinux-advanced-U>gnulinux-6.1.0-new-advanced-U"), 1);
	CHECK_EQ_U(grub_default_entry(e, 4, "Memory test"), 3);
	CHECK(grub_default_entry(e, 4, "saved") < 0);

	struct sbuf out;
	CHECK(set_assignment(cfg, strlen(cfg), "default", "1>0", true, &out) == 0);
	CHECK(!strncmp(out.p, "set default=\"1>0\"\nmenuentry", 26));
	CHECK_EQ_U(out.len, strlen(cfg) + 2);
	sbuf_free(&out);
	const char *def = "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\n";
	CHECK(set_assignment(def, strlen(def), "GRUB_DEFAULT", "x>y", false, &out) == 0);
	CHECK_STR(out.p, "GRUB_DEFAULT=\"x>y\"\nGRUB_TIMEOUT=5\n");
	sbuf_free(&out);
	CHECK(set_assignment("A=1", 3, "GRUB_DEFAULT", "2", false, &out) == 0);
	CHECK_STR(out.p, "A=1\nGRUB_DEFAULT=\"2\"\n");
	sbuf_free(&out);

	/* hostile: unbalanced braces, a nested submenu, nothing */
	CHECK(grub_entries("}}}{{{", 6, e, 8, dv, sizeof(dv)) == 0);
	const char *nest = "submenu a {\nsubmenu b {\n}\n}\n";
	CHECK(grub_entries(nest, strlen(nest), e, 8, dv, sizeof(dv)) < 0);
	CHECK(grub_entries("", 0, e, 8, dv, sizeof(dv)) == 0);
	CHECK_STR(dv, "0");
}

static void cpio(void)
{
	struct sbuf ar = { 0 };
	char dir[] = "/tmp/imager-unit-cpio-XXXXXX", cmd[512], line[256], path[300];
	FILE *f;

	cpio_add(&ar, "usr", S_IFDIR | 0755, 1, 0, NULL, 0);
	cpio_add(&ar, "usr/lib", S_IFDIR | 0755, 2, 0, NULL, 0);
	cpio_add(&ar, "usr/lib/a.ko", S_IFREG | 0644, 3, 0, "hello", 5);
	cpio_add(&ar, "conf", S_IFDIR | 0755, 4, 0, NULL, 0);
	cpio_add(&ar, "conf/modules", S_IFREG | 0644, 5, 0, "virtio_blk\n", 11);
	cpio_finish(&ar, 6);
	CHECK(!ar.oom);
	CHECK_EQ_U(ar.len % 512, 0);
	CHECK(!memcmp(ar.p, "070701", 6));
	if (access("/bin/cpio", X_OK) && access("/usr/bin/cpio", X_OK)) {
		printf("  (cpio not installed: archive not read back)\n");
		sbuf_free(&ar);
		return;
	}
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/a.cpio", dir);
	f = fopen(path, "wb");
	CHECK(f && fwrite(ar.p, 1, ar.len, f) == ar.len);
	if (f)
		fclose(f);
	snprintf(cmd, sizeof(cmd), "cd %s && cpio -idm --quiet < a.cpio 2>&1 && cat usr/lib/a.ko conf/modules", dir);
	f = popen(cmd, "r");
	CHECK(f != NULL);
	size_t got = f ? fread(line, 1, sizeof(line) - 1, f) : 0;
	line[got] = '\0';
	CHECK(f && pclose(f) == 0);
	CHECK_STR(line, "hellovirtio_blk\n");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	sbuf_free(&ar);
}

/* The quick inspection's readers, on real files' shapes and hostile ones. */
static void quick(void)
{
	struct osrel o;
	static const char deb[] = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n"
				  "VERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nID=debian\n"
				  "HOME_URL=\"https://www.debian.org/\"\n";
	osrel_parse(deb, sizeof(deb) - 1, &o);
	CHECK_STR(o.id, "debian");
	CHECK_STR(o.version_id, "12");
	CHECK_STR(o.pretty, "Debian GNU/Linux 12 (bookworm)");
	static const char rh[] = "# comment\r\nID='rhel'\r\nVERSION_ID=9.3  \r\nPRETTY_NAME=\"Red \\\"Hat\\\"\"\r\nIDX=no\n";
	osrel_parse(rh, sizeof(rh) - 1, &o);
	CHECK_STR(o.id, "rhel");
	CHECK_STR(o.version_id, "9.3");
	CHECK_STR(o.pretty, "Red \"Hat\"");
	/* unterminated quote, control bytes, a value far too long, no newline */
	char big[600];
	memset(big, 'x', sizeof(big));
	memcpy(big, "ID=\"a\001", 7);
	osrel_parse(big, sizeof(big), &o);
	CHECK(strlen(o.id) == sizeof(o.id) - 1 && o.id[1] == '?');
	osrel_parse("ID", 2, &o);
	CHECK_STR(o.id, "");

	int ma = -1, mi = -1;
	CHECK(version_parse("12.15\n", 6, &ma, &mi) && ma == 12 && mi == 15);
	CHECK(version_parse("22.04", 5, &ma, &mi) && ma == 22 && mi == 4);
	CHECK(version_parse("9", 1, &ma, &mi) && ma == 9 && mi == 0);
	CHECK(version_parse("7.", 2, &ma, &mi) && ma == 7 && mi == 0);
	CHECK(!version_parse("bookworm/sid", 12, &ma, &mi));
	CHECK(!version_parse("", 0, &ma, &mi));
	CHECK(!version_parse("99999999999999999999", 20, &ma, &mi));

	struct fstab_ent e[4];
	static const char fst[] = "# /etc/fstab\n\n/dev/mapper/vg0-root / ext4 errors=remount-ro 0 1\n"
				  "  UUID=6fa1-ce\t/boot\text4 defaults\n/dev/sr0 /media/cd\\040rom udf,iso9660 user,noauto\n"
				  "onlytwo fields\nLABEL=x /a\\000b ext4\n/dev/sdb1 /srv xfs";
	CHECK_EQ_U(fstab_parse(fst, sizeof(fst) - 1, e, 4), 4);
	CHECK_STR(e[0].spec, "/dev/mapper/vg0-root");
	CHECK_STR(e[0].file, "/");
	CHECK_STR(e[0].type, "ext4");
	CHECK_EQ_U(e[0].line, 3);
	CHECK_STR(e[1].spec, "UUID=6fa1-ce");
	CHECK_STR(e[1].file, "/boot");
	CHECK_STR(e[2].file, "/media/cd rom");
	CHECK_STR(e[3].spec, "/dev/sdb1");
	CHECK_EQ_U(e[3].line, 8);
	CHECK_STR(e[0].opts, "errors=remount-ro");
	CHECK_STR(e[2].opts, "user,noauto");
	CHECK_STR(e[3].opts, "");
	static const char btr[] = "UUID=ab / btrfs defaults 0 0\nUUID=ab /home btrfs subvol=/@/home,compress=zstd 0 0\n";
	CHECK_EQ_U(fstab_parse(btr, sizeof(btr) - 1, e, 4), 2);
	char v[16];
	CHECK(!fstab_opt(e[0].opts, "subvol", v, sizeof(v)));
	CHECK(fstab_opt(e[1].opts, "subvol", v, sizeof(v)));
	CHECK_STR(v, "/@/home");
	CHECK(fstab_opt(e[1].opts, "compress", v, sizeof(v)));
	CHECK_STR(v, "zstd");
	CHECK(!fstab_opt("subvolid=256", "subvol", v, sizeof(v)));
	CHECK(fstab_opt("ro,subvolid=256", "subvolid", v, sizeof(v)));
	CHECK_STR(v, "256");
	CHECK(fstab_opt("noauto", "noauto", v, sizeof(v)));
	CHECK_STR(v, "");
	CHECK(fstab_opt("subvol=/a/very/long/subvolume/name", "subvol", v, 8));
	CHECK_STR(v, "/a/very");
	CHECK(!fstab_opt("", "subvol", v, sizeof(v)));
	CHECK_EQ_U(fstab_parse(fst, sizeof(fst) - 1, e, 0), 4);   /* counted, none stored */
	char longf[400];
	memset(longf, 'a', sizeof(longf));
	memcpy(longf, "/dev/x ", 7);
	CHECK_EQ_U(fstab_parse(longf, sizeof(longf), e, 4), 0);

	unsigned char h[20] = { 0x7f, 'E', 'L', 'F', 2, 1 };
	h[18] = 62;
	CHECK_STR(elf_arch(h, 20), "x86_64");
	h[18] = 183;
	CHECK_STR(elf_arch(h, 20), "aarch64");
	h[4] = 1;
	h[18] = 3;
	CHECK_STR(elf_arch(h, 20), "i386");
	h[4] = 2;
	h[5] = 2;
	h[18] = 0;
	h[19] = 21;
	CHECK_STR(elf_arch(h, 20), "ppc64");
	CHECK(elf_arch(h, 19) == NULL);
	h[0] = 0;
	CHECK(elf_arch(h, 20) == NULL);
	FILE *f = fopen("/bin/sh", "rb");
	unsigned char own[20];
	CHECK(f && fread(own, 1, 20, f) == 20);
	if (f)
		fclose(f);
#if defined(__x86_64__)
	CHECK_STR(elf_arch(own, 20), "x86_64");
#endif
}

/* the old platform's agents and drivers, as the packages name them */
static const char *svc(const char *s) { return old_platform_service(s, strlen(s)); }
static const char *mod(const char *s) { return old_platform_module(s, strlen(s)); }

static void old_platform(void)
{
	/* Debian 12's open-vm-tools and open-vm-tools-desktop: the unit, its
	 * alias, vgauth (RequiredBy=), the vmblock mount, the SysV links */
	CHECK_STR(svc("open-vm-tools.service"), "VMware");
	CHECK_STR(svc("vmtoolsd.service"), "VMware");
	CHECK_STR(svc("vgauth.service"), "VMware");
	CHECK_STR(svc("run-vmblock\\x2dfuse.mount"), "VMware");
	CHECK_STR(svc("S01open-vm-tools"), "VMware");
	CHECK_STR(svc("K01open-vm-tools"), "VMware");
	/* RHEL's and SUSE's open-vm-tools, VMware Tools' installer */
	CHECK_STR(svc("vgauthd.service"), "VMware");
	CHECK_STR(svc("vmblock-fuse.service"), "VMware");
	CHECK_STR(svc("S20vmware-tools"), "VMware");
	CHECK_STR(svc("vmware-tools-thinprint.service"), "VMware");
	/* VirtualBox: Guest Additions, Debian's and Fedora's packages */
	CHECK_STR(svc("vboxadd.service"), "VirtualBox");
	CHECK_STR(svc("vboxadd-service.service"), "VirtualBox");
	CHECK_STR(svc("virtualbox-guest-utils.service"), "VirtualBox");
	CHECK_STR(svc("vboxservice.service"), "VirtualBox");
	/* Hyper-V: Debian's hyperv-daemons (units and SysV), RHEL's, SUSE's */
	CHECK_STR(svc("hv-kvp-daemon.service"), "Hyper-V");
	CHECK_STR(svc("hv-vss-daemon.service"), "Hyper-V");
	CHECK_STR(svc("S01hv-fcopy-daemon"), "Hyper-V");
	CHECK_STR(svc("hypervkvpd.service"), "Hyper-V");
	CHECK_STR(svc("hypervvssd.service"), "Hyper-V");
	CHECK_STR(svc("hypervfcopyd.service"), "Hyper-V");
	CHECK_STR(svc("hv_kvp_daemon.service"), "Hyper-V");
	CHECK_STR(svc("xe-linux-distribution.service"), "Xen");
	/* not theirs: other units, near names, folders, a bare suffix */
	CHECK(!svc("ssh.service"));
	CHECK(!svc("open-vm-tools.service.requires"));
	CHECK(!svc("multi-user.target.wants"));
	CHECK(!svc("open-vm-tools.timer"));
	CHECK(!svc("vmtoolsd-x.service"));
	CHECK(!svc("S1open-vm-tools"));
	CHECK(!svc(".service"));
	CHECK(!svc(""));
	CHECK(!old_platform_service("vgauth.service", 5));   /* "vgaut": a prefix only */

	CHECK_STR(mod("xen-blkfront"), "Xen PV driver");
	CHECK_STR(mod("xen_netfront"), "Xen PV driver");
	CHECK(!mod("xen"));
	CHECK(!mod("xenfs"));
	CHECK(mod("vmw_pvscsi") && strstr(mod("vmw_pvscsi"), "VMware"));
	CHECK(mod("vmw-pvscsi") && strstr(mod("vmw-pvscsi"), "SCSI"));
	CHECK(mod("vmxnet3") && strstr(mod("vmxnet3"), "NIC"));
	CHECK(mod("vmw_balloon") && mod("vmw_vmci") && mod("vmw_vsock_vmci_transport"));
	CHECK(mod("hv_storvsc") && strstr(mod("hv_storvsc"), "Hyper-V"));
	CHECK(mod("hv-netvsc") && mod("hv_vmbus") && mod("hv_utils") && mod("hv_balloon"));
	CHECK(mod("vboxguest") && strstr(mod("vboxguest"), "VirtualBox"));
	CHECK(mod("vboxsf") && mod("vboxvideo"));
	/* virtio's and the generic ones stay */
	CHECK(!mod("vsock"));
	CHECK(!mod("vmw_vsock_virtio_transport"));
	CHECK(!mod("virtio_blk"));
	CHECK(!mod("vmxnet33"));
	CHECK(!mod("ahci"));
	CHECK(old_platform_module("vmxnet3", 6) == mod("vmxnet"));   /* VMware Tools' own */
}

/* grubenv: remapped, then back to its fixed size */
static void grubenv(void)
{
	char blk[1024];
	const char *head = "# GRUB Environment Block\nkernelopts=root=/dev/sda2 ro resume=/dev/sda3\n";
	struct sbuf out;
	size_t n;

	memset(blk, '#', sizeof(blk));
	memcpy(blk, head, strlen(head));
	CHECK(remap_text(blk, sizeof(blk), CONV_BUS_VIRTIO_BLK, fake_uuid, NULL, &out, NULL, &n) == 0);
	CHECK_EQ_U(n, 2);
	CHECK(out.len > sizeof(blk));
	CHECK(grubenv_refit(&out, sizeof(blk)) == 0);
	CHECK_EQ_U(out.len, sizeof(blk));
	CHECK(!strncmp(out.p, "# GRUB Environment Block\nkernelopts=root=UUID=uuid-2 ro resume=/dev/vda3\n###", 76));
	CHECK(out.p[sizeof(blk) - 1] == '#');
	sbuf_free(&out);

	/* shorter: padded out again */
	memset(&out, 0, sizeof(out));
	sbuf_adds(&out, "# GRUB Environment Block\nk=v\n####");
	CHECK(grubenv_refit(&out, 64) == 0);
	CHECK_EQ_U(out.len, 64);
	CHECK(out.p[63] == '#' && out.p[64] == 0);
	/* too long for its padding: unchanged, -ENOSPC */
	CHECK(grubenv_refit(&out, 20) == -ENOSPC);
	CHECK_EQ_U(out.len, 64);
	sbuf_free(&out);

	/* not an environment block: no padding after the last line, or only '#' */
	memset(&out, 0, sizeof(out));
	sbuf_adds(&out, "k=v");
	CHECK(grubenv_refit(&out, 16) == -EINVAL);
	sbuf_free(&out);
	memset(&out, 0, sizeof(out));
	sbuf_adds(&out, "####");
	CHECK(grubenv_refit(&out, 16) == -EINVAL);
	sbuf_free(&out);
}

UNIT_MAIN(UNIT(names), UNIT(remap), UNIT(consoles), UNIT(grubenv), UNIT(modules), UNIT(grub), UNIT(cpio), UNIT(quick),
	  UNIT(old_platform))
