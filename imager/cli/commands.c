/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The table of commands, sorted by name (command_find() relies on it, and a
 * test checks it).  Help is generated from it. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"

const struct command commands[] = {
	{ "appliance", cmd_appliance, 0, "[--launch] [--json]",
	  "check that libguestfs can start its appliance here, and with KVM or TCG" },
	{ "cat", cmd_cat, 0, "DIR PARTITION:PATH [--cache SIZE]",
	  "write a file of an image folder's filesystem to stdout, no restore (libguestfs)" },
	{ "clone", cmd_clone, CMD_DEVICES,
	  "SOURCE TARGET [--format raw|qcow2] [--preallocation off|metadata|falloc|full]\n"
	  "        [--cluster-size SIZE] [--size SIZE] [--grow-last|--proportional|--shrink]\n"
	  "        [--source-format raw|qcow2] [--verify] [--rescue [--map FILE] | --resume]\n"
	  "        [--checkpoint SECONDS]\n"
	  "        [--convert [--block virtio-blk|virtio-scsi] [--rebuild-initramfs]\n"
	  "                   [--virtio-win PATH] [--key ID:PASSPHRASE] [--key-file ID:FILE]]\n"
	  "        [--threads N] [--force] [--timeout SECONDS] [--retries N] [--json] [--no-progress]",
	  "copy a disk or image onto a disk or image in one pass, used blocks only" },
	{ "convert", cmd_convert, CMD_DEVICES,
	  "DISK... | DIR --output DISK [--block virtio-blk|virtio-scsi] [--rebuild-initramfs]\n"
	  "        [--virtio-win PATH] [--key ID:PASSPHRASE] [--key-file ID:FILE]\n"
	  "        [--format raw|qcow2] [--size SIZE [--shrink]] [--dry-run] [--json]",
	  "make the Linux or Windows guest on a disk or image boot on virtio" },
	{ "define", cmd_define, 0,
	  "DISK... --name NAME [--memory SIZE] [--vcpus N]\n"
	  "        [--cpu host-model|host-passthrough|maximum|MODEL] [--machine q35|pc]\n"
	  "        [--bus virtio-blk|virtio-scsi|sata|ide] [--nic virtio|e1000] [--mac MAC]\n"
	  "        [--firmware bios|uefi|uefi-secure] [--domain-type kvm|qemu] [--io native|io_uring|threads|auto]\n"
	  "        [--network NAME|--bridge NAME|--user-net] [--serial-log FILE]\n"
	  "        [--inspection FILE|--no-inspect] [--connect URI] [--output FILE] [--force] [--json]",
	  "write a libvirt VM definition tuned for the guest on the disks" },
	{ "get", cmd_get, 0, "DIR PARTITION:PATH DEST [--cache SIZE]",
	  "copy a file or folder out of an image folder's filesystem, no restore (libguestfs)" },
	{ "info", cmd_info, 0, "DIR|DISK [--json]",
	  "describe an image folder, or a disk or image file and its filesystems" },
	{ "list", cmd_list, 0, "[--json]",
	  "list the disks of this machine: bus (virtio or not), size, partitions" },
	{ "ls", cmd_ls, 0, "DIR [PARTITION:[PATH]] [--long] [--cache SIZE]",
	  "list an image folder's partitions, or the files of one, no restore (libguestfs)" },
	{ "migrate", cmd_migrate, 0,
	  "PLAN [--dry-run] [--json] [--state FILE] [--per-host N] [--jobs N] [--start]\n"
	  "        [--timeout SECONDS] [--retries N]",
	  "move the machines of a plan (JSON) onto libvirt hosts, several at once, resumable" },
	{ "mount", cmd_mount, 0, "DIR MOUNTPOINT [--partition N|VG/LV] [--cache SIZE]",
	  "mount an image folder's filesystems read-only (FUSE), no restore; umount undoes it" },
	{ "multicast", cmd_multicast, 0,
	  "DIR [--min-receivers N] [--max-wait SECONDS] [--max-bitrate RATE] [--interface IF]\n"
	  "        [--fec SxR/N] [--portbase PORT] [--retries-until-drop N] [--report-wait SECONDS]\n"
	  "        [--json] [--no-progress]",
	  "send an image folder once to many machines restoring it (udpcast); report each" },
	{ "p2v", cmd_p2v, CMD_DEVICES,
	  "SOURCE... --name NAME [--connect URI]... [--pool auto|NAME] [--probe]\n"
	  "        [--format raw|qcow2] [--preallocation off|metadata|falloc|full]\n"
	  "        [--output DIR] [--start | --instant [--copy-rate RATE] [--resume]] [--force]\n"
	  "        [--no-convert] [--rebuild-initramfs] [--upload]\n"
	  "        [--virtio-win PATH] [--key ID:PASSPHRASE] [--key-file ID:FILE]\n"
	  "        [--facts FILE] [--disk-size SIZE [--shrink]]\n"
	  "        [--memory SIZE] [--vcpus N] [--cpu MODE|MODEL] [--machine q35|pc]\n"
	  "        [--bus virtio-blk|virtio-scsi|sata|ide] [--nic virtio|e1000] [--mac MAC]\n"
	  "        [--firmware bios|uefi|uefi-secure] [--domain-type kvm|qemu] [--io native|io_uring|threads|auto]\n"
	  "        [--network NAME|--bridge NAME|--user-net] [--serial-log FILE]\n"
	  "        [--timeout SECONDS] [--retries N] [--json] [--no-progress]",
	  "move a machine onto a libvirt host: disks into a pool, converted, VM defined" },
	{ "pools", cmd_pools, 0, "[--connect URI] [--probe] [--seconds N] [--size SIZE] [--json]",
	  "list the host's storage pools, measure fsyncs, rank them for a new disk" },
	{ "restore", cmd_restore, CMD_DEVICES,
	  "DIR|multicast:[PORTBASE][:IF] TARGET [--format raw|qcow2] [--preallocation off|metadata|falloc|full]\n"
	  "        [--cluster-size SIZE] [--size SIZE] [--grow-last|--proportional|--shrink]\n"
	  "        [--convert [--block virtio-blk|virtio-scsi] [--rebuild-initramfs]\n"
	  "                   [--virtio-win PATH] [--key ID:PASSPHRASE] [--key-file ID:FILE]]\n"
	  "        [--resume] [--checkpoint SECONDS] [--threads N] [--force] [--timeout SECONDS]\n"
	  "        [--retries N] [--json] [--no-progress]",
	  "write an image folder (imager's or Clonezilla's, or one sent by multicast) onto a disk or image file" },
	{ "run", cmd_run, CMD_DEVICES,
	  "DIR... --name NAME [--connect URI] [--pool auto|NAME] [--probe]\n"
	  "        [--format raw|qcow2] [--preallocation off|metadata|falloc|full]\n"
	  "        [--copy-rate RATE] [--resume | --force] [--no-convert] [--rebuild-initramfs]\n"
	  "        [--virtio-win PATH] [--key ID:PASSPHRASE] [--key-file ID:FILE] [--facts FILE]\n"
	  "        [--memory SIZE] [--vcpus N] [--cpu MODE|MODEL] [--machine q35|pc]\n"
	  "        [--bus virtio-blk|virtio-scsi|sata|ide] [--nic virtio|e1000] [--mac MAC]\n"
	  "        [--firmware bios|uefi|uefi-secure] [--domain-type kvm|qemu] [--io native|io_uring|threads|auto]\n"
	  "        [--network NAME|--bridge NAME|--user-net] [--serial-log FILE]\n"
	  "        [--timeout SECONDS] [--retries N] [--json] [--no-progress]\n"
	  "        (p2v's --instant, --start, --output, --upload, --disk-size and --shrink are\n"
	  "        taken too: --instant and --start are run's own, the others refused with it)",
	  "start a VM from image folders at once (p2v --instant on qemu:///system)" },
	{ "save", cmd_save, CMD_DEVICES,
	  "SOURCE DIR [--format raw|qcow2] [--level N] [--rescue] [--resume] [--threads N] [--force]\n"
	  "        [--timeout SECONDS] [--retries N] [--json] [--no-progress]",
	  "save the used blocks of a disk, partition or image file into a folder" },
	{ "serve", cmd_serve, 0, "DIR [--socket PATH | --port N] [--partition N] [--cache SIZE]\n"
	  "        [--cache-dir DIR]",
	  "serve the disk an image folder holds (imager's or Clonezilla's) over NBD, read-only" },
	{ "umount", cmd_umount, 0, "MOUNTPOINT [--timeout SECONDS]",
	  "unmount what imager mount mounted and stop what it started" },
	{ "verify", cmd_verify, 0, "DIR [--threads N] [--json] [--no-progress]",
	  "check every frame and checksum of an image folder (imager's or Clonezilla's)" },
};
const size_t ncommands = sizeof(commands) / sizeof(commands[0]);

static int by_name(const void *key, const void *elem)
{
	return strcmp(key, ((const struct command *)elem)->name);
}

const struct command *command_find(const char *name)
{
	return bsearch(name, commands, ncommands, sizeof(commands[0]), by_name);
}
