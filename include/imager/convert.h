/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest conversion: make the operating system on a disk boot on virtio.
 *
 * im_convert() opens the disks in one libguestfs appliance (acceleration
 * chosen as guest.h says: TCG when KVM cannot run a guest), inspects them,
 * plans every change, and only then applies the plan.  A guest it cannot
 * convert is refused before anything is written.  With dry_run the disks
 * are opened read-only (libguestfs puts a throwaway overlay on top) and the
 * plan is reported, not applied: not one byte of the disks changes.
 *
 * Linux (convert-linux.c), in this order:
 *   1. inspection: distribution, version, root and mount points, kernels
 *      (/lib/modules/VER with /boot/vmlinuz-VER), bootloader (GRUB 2, GRUB
 *      legacy, extlinux), initramfs tool (initramfs-tools, dracut,
 *      mkinitcpio, SUSE mkinitrd), firmware (BIOS or UEFI);
 *   2. kernels: those with virtio (virtio_pci and the block driver as
 *      modules in modules.dep, built in per modules.builtin, or set in
 *      /boot/config-VER); none: refused (IM_EXIT_UNSUPP).  When GRUB 2's
 *      default entry boots a kernel without virtio, the newest entry whose
 *      kernel has it becomes the default (grub.cfg and GRUB_DEFAULT);
 *   3. initramfs of every kernel with virtio, the original kept beside it
 *      as NAME.imager-orig (an existing .imager-orig is the base of a second
 *      conversion, so converting twice appends once):
 *        fast (default, initramfs-tools and dracut): a newc archive is
 *        appended (the kernel unpacks concatenated archives in order) that
 *        holds virtio_pci, virtio_blk, virtio_scsi, virtio_net, sd_mod and
 *        the root filesystem's module, with everything they depend on from
 *        modules.dep, the kernel's module indexes, and what makes the
 *        initramfs load them before it looks for root (initramfs-tools:
 *        conf/modules; dracut: rd.driver.pre in etc/cmdline.d and
 *        etc/modules-load.d);
 *        full (rebuild_initramfs, and always for mkinitcpio and SUSE
 *        mkinitrd): the distribution's own tool runs inside the appliance;
 *      either way the modules are recorded in the distribution's
 *      configuration (/etc/initramfs-tools/modules, /etc/dracut.conf.d/,
 *      mkinitcpio's MODULES) so the guest's own rebuilds keep them;
 *   4. device names in /etc/fstab, /etc/crypttab, GRUB's files (grub.cfg,
 *      /etc/default/grub, device.map, menu.lst), extlinux.conf and the
 *      resume configuration: sd/hd/xvd/nvme/cciss/mmcblk names become
 *      UUID= where the filesystem has a UUID and the name is a value on its
 *      own, else the virtio name (vdX; sdX under virtio-scsi); in kernel
 *      command lines, console=hvcN and console=xvcN (Xen's console) become
 *      console=ttySN;
 *   5. the old platform: VMware tools, open-vm-tools, VirtualBox additions
 *      services disabled (their systemd links and SysV rc links removed),
 *      Xen PV modules removed from initramfs and module-load
 *      configuration; device caches removed (blkid.tab, LVM's cache and
 *      devices file).
 *
 * Windows (convert-windows.c; a hibernated one, hiberfil.sys starting
 * "hibr", is refused: it would resume over the changes), from the drivers of a virtio-win folder or
 * ISO (virtio_win, else $VIRTIO_WIN, else /usr/share/virtio-win/virtio-win.iso
 * or /usr/share/virtio-win; see virtiowin.h for the layouts and how the
 * version's folder is picked):
 *   1. inspection: version (NT major.minor, build from the SOFTWARE hive),
 *      product and edition, client or server, architecture, system root,
 *      the current control set (SYSTEM's Select\Current);
 *   2. the boot-critical driver (viostor for virtio-blk, vioscsi for
 *      virtio-scsi) is copied to system32\drivers and registered in the
 *      current control set as a boot-start service (Type 1, Start 0, Group
 *      "SCSI miniport", ErrorControl 1, ImagePath system32\drivers\NAME.sys),
 *      bound to its PCI IDs (VEN_1AF4, legacy DEV_1001/DEV_1004 REV_00 and
 *      modern DEV_1042/DEV_1048 REV_01) where that version looks at boot:
 *      Control\CriticalDeviceDatabase before Windows 8, a temporary package
 *      in the DriverDatabase from 8 on;
 *   3. every driver of the picked folder goes to %SystemRoot%\Drivers\VirtIO,
 *      which is added to SOFTWARE's DevicePath (PnP looks there for new
 *      devices); from Vista on a first-boot service (imager-firstboot,
 *      %SystemRoot%\imager-firstboot\firstboot.cmd, run once as SYSTEM)
 *      installs them all with pnputil and the guest agent when virtio-win
 *      has its installer, then removes the temporary DriverDatabase
 *      package, restores DevicePath and deletes the folder and itself (a
 *      log stays in %SystemRoot%\Temp\imager-firstboot.log); when the boot
 *      driver does not install it keeps what boots the disk;
 *   4. the old platform: services of VMware Tools, VirtualBox additions,
 *      Xen PV drivers and Hyper-V integration are disabled (Start 4) and
 *      taken out of device class filter lists (a filter that no longer
 *      loads would stop its class: for the disk class, the boot).
 * The hives are edited in copies here (libhivex) and written back last, so
 * a failure while copying files leaves the registry as it was.
 * Other systems are refused with IM_EXIT_UNSUPP.
 */
#ifndef IMAGER_CONVERT_H
#define IMAGER_CONVERT_H
/* The conversion (libguestfs) layer's header: only that layer and those above it include it
 * (the Makefile sets IMAGER_LAYER for each layer's sources). */
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 2
#error "a lower layer may not use the conversion (libguestfs) layer"
#endif


#include <stdbool.h>
#include <stddef.h>

#include "imager/error.h"
#include "imager/job.h"

enum conv_block { CONV_BLOCK_VIRTIO_BLK = 1, CONV_BLOCK_VIRTIO_SCSI = 2 };

/*
 * A key for an encrypted volume of the guest (--key, --key-file).  Before
 * inspection every LUKS volume (libblkid's crypto_LUKS) and BitLocker
 * volume is looked for: one with a key is opened inside the appliance
 * (cryptsetup; LUKS as /dev/mapper/luks-UUID, the name RHEL's crypttab
 * gives it, BitLocker by its recovery key or password) and its LVM
 * scanned, so the guest inside is inspected and converted as any other.
 * A key that does not open its volume is refused (IM_EXIT_USAGE) before
 * anything is written.  A volume without a key stays closed; when no
 * operating system is found outside the closed volumes, the conversion is
 * refused (-ENOKEY, IM_EXIT_UNSUPP) with the volumes named and what to do:
 * LUKS, give --key or --key-file; BitLocker, suspend it on the machine
 * first, or give the recovery key.
 */
struct conv_key {
	const char *id;               /* the volume as the appliance names the guest's disks
				       * ("/dev/sda2"), its UUID, or "all" */
	const char *passphrase;       /* NUL-terminated; never printed */
};
#define CONV_MAX_KEYS 16
/* With keys, the appliance's memory at least (MiB): a LUKS2 keyslot made
 * by cryptsetup's defaults on a large machine needs 1 GiB to open. */
#define CONV_KEY_MEMSIZE_MB 2560

struct conv_opts {
	enum conv_block block;        /* 0: virtio-blk */
	bool rebuild_initramfs;       /* run the guest's own initramfs tool */
	bool dry_run;                 /* report the plan; change nothing */
	const char *virtio_win;       /* Windows: virtio-win folder or ISO; NULL: see above */
	const struct conv_key *keys;  /* encrypted volumes' keys (above); may be NULL */
	size_t nkeys;
	/* Called with a short phase name ("launching", "inspecting",
	 * "applying") as the work goes on; may be NULL. */
	void (*phase)(void *opaque, const char *what);
	void *opaque;
};

struct conv_kernel {
	char version[128];
	bool virtio;                  /* virtio_pci and the block driver */
	bool has_initramfs;
	bool is_default;              /* what the bootloader boots now */
};

/* A filesystem the guest mounts (from its fstab, as inspection resolved it). */
struct conv_mount {
	char path[256];               /* "/boot" */
	char device[64];              /* appliance name: "/dev/sda2", "/dev/vg0/root" */
};

/* One change, in the order it is (or would be) made. */
struct conv_change {
	char *path;                   /* in the guest; "" when none */
	char *action;                 /* "edit", "append-initramfs", "rebuild-initramfs",
				       * "copy", "remove", "disable", "set-default-kernel" */
	char *detail;                 /* one line for people */
};

struct conv_report {
	/* What inspection found. */
	char os_type[16];             /* "linux", "windows", ... */
	char distro[32];              /* "debian", "fedora", ... */
	char product[128];
	int major, minor;
	char arch[16];
	char root[64];                /* appliance name of the root filesystem */
	char inspection[16];          /* "quick" (Linux, inspect.c) or "libguestfs" */
	struct conv_mount *mounts;    /* shortest mount point first */
	size_t nmounts;
	char bootloader[16];          /* "grub2", "grub-legacy", "extlinux", "" */
	char initramfs_tool[24];      /* "initramfs-tools", "dracut", "mkinitcpio", "suse-mkinitrd", "" */
	char initramfs_tool_from[16]; /* how that was told: "image" (the names in the default
				       * kernel's initramfs), "packages" (dpkg's database),
				       * "programs" (which tools exist), "" */
	char firmware[8];             /* "bios", "uefi" */
	char block[16];               /* "virtio-blk", "virtio-scsi" */
	char method[16];              /* "append", "rebuild" */
	struct conv_kernel *kernels;
	size_t nkernels;
	char default_kernel[128];     /* the one that boots after conversion */
	bool virtio_net;              /* the default kernel has virtio_net */
	/* What was (or, dry_run, would be) done. */
	struct conv_change *changes;
	size_t nchanges;
	bool dry_run;
	double seconds;
	char accel[8];                /* "kvm", "tcg" */
	/* Windows */
	char variant[16];             /* "Client", "Server" */
	char edition[48];             /* EditionID: "Professional", "ServerStandard" */
	int build;                    /* CurrentBuildNumber; 0 unknown */
	char systemroot[64];          /* "/Windows" */
	char control_set[32];         /* "ControlSet001" */
	char virtio_win[256];         /* the driver source used (path, and the ISO's label) */
	char drivers_os[16];          /* its folder picked: "w10" */
	char drivers[256];            /* driver packages copied: "balloon,netkvm,viostor" */
	bool guest_agent;             /* its installer is run at first boot */
	bool firstboot;               /* a first-boot step was set up */
};

/*
 * Convert the guest on disks[0..n-1] (formats[i] required: "raw", "qcow2";
 * a block device is "raw").  rep is filled in every case where inspection
 * got that far (free it with conv_report_free() whatever the result).
 * Returns 0; -EINVAL for bad options and keys that open nothing
 * (IM_EXIT_USAGE); -ENOKEY when no operating system is found outside
 * encrypted volumes without a key (IM_EXIT_UNSUPP, the volumes named);
 * -ENOENT when no operating system is found and -EOPNOTSUPP for one that cannot be converted
 * (no kernel with virtio, an unknown initramfs layout, several roots, a
 * system neither Linux nor Windows, a Windows without drivers in virtio-win),
 * both with the disks untouched (IM_EXIT_UNSUPP); for Windows also -ENOENT
 * (IM_EXIT_SOURCE) when virtio-win is missing or is not virtio-win, and
 * -EUCLEAN (IM_EXIT_DAMAGED) when a hive is damaged, untouched; -EIO for a
 * failure while applying (IM_EXIT_IO: the report lists what was done); the
 * errors of guest_open().
 */
int im_convert(const char *const *disks, const char *const *formats, size_t n,
	       const struct conv_opts *o, struct conv_report *rep, struct im_err *err);
void conv_report_free(struct conv_report *rep);

/* ---- conversion as a step of restore and clone ---- */

/* The hook the engine's restore and clone grow filesystems inside image
 * files through (job.h: struct im_grow_hook): libguestfs (guest.h). */
struct im_grow_hook conv_grow_hook(void);

/* A conversion after a restore or clone: the options in, its outcome out. */
struct conv_step {
	const struct conv_opts *opts;  /* NULL: no conversion */
	bool ran;                      /* the restore or clone succeeded, so it ran */
	int r;                         /* im_convert()'s result */
	struct conv_report rep;        /* free with conv_report_free() when ran */
	struct im_err err;             /* its error when r < 0 */
};

/* im_restore() / im_clone() with the grow hook set (unless the caller set
 * one), then, when step->opts is given and the job succeeded, im_convert()
 * of the target it wrote: its path and format come from the job's
 * struct target_info (resolved once by the writer, never probed again).
 * Returns the restore's or clone's result (err: its error); the
 * conversion's result is in *step, and a failed conversion leaves the disk
 * as restored. */
int conv_restore(const struct disk_roots *roots, const char *dir, const char *target,
		 const struct restore_opts *opts, struct restore_stats *stats,
		 struct conv_step *step, struct im_err *err);
int conv_clone(const struct disk_roots *roots, const char *source, const char *target,
	       const struct clone_opts *opts, struct clone_stats *stats, struct conv_step *step,
	       struct im_err *err);

/* `imager convert DIR`: an image folder restored and converted in one job.
 * With output, the folder is restored onto it (format: opts->target.format,
 * NULL: from its name) and converted (step->opts).  Without output, only a
 * dry run is allowed (else -EINVAL, IM_EXIT_USAGE): the folder is restored
 * onto a temporary sparse qcow2 under $TMPDIR (else /tmp) that is removed
 * again, also after a failure.  target (tlen bytes) gets the path used.
 * Returns as conv_restore(). */
int conv_folder(const struct disk_roots *roots, const char *dir, const char *output,
		const struct restore_opts *opts, struct restore_stats *stats,
		struct conv_step *step, char *target, size_t tlen, struct im_err *err);

const char *conv_block_name(enum conv_block b);    /* "virtio-blk", "virtio-scsi" */
/* "virtio-blk" / "virtio-scsi" (also "blk", "scsi") → enum; 0 when unknown. */
enum conv_block conv_block_parse(const char *s);

#endif
