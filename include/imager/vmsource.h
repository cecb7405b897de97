/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Virtual machines as sources: the descriptions other hypervisors write,
 * read as hostile input before qemu is let near the disks they name
 * (issue 35).  Pure parsers and file checks; no disk data is read here
 * beyond the headers named below.
 *
 *   OVF 1.0 and 2.0 (vmdesc.c, with libxml2: XML_PARSE_NONET, no entity
 *     substitution, no DTD loading): the one VirtualSystem's memory
 *     (ResourceType 4), vCPUs (3), NICs (10: rasd:Address the MAC,
 *     ResourceSubType the model; VirtualBox's vbox:Machine
 *     Hardware/Network/Adapter MACAddress="080027AABBCC" fill the MACs the
 *     items lack, enabled adapters in slot order), disks (17: HostResource
 *     "ovf:/disk/ID", "ovf://disk/ID" or "/disk/ID" -> DiskSection Disk ovf:fileRef ->
 *     References File ovf:href, ovf:compression; Parent -> the controller
 *     item: 6 SCSI, 5 IDE, 20 SATA (NVMe when its ResourceSubType says
 *     nvme); the controller's rasd:Address the bus, AddressOnParent the
 *     unit), in the hardware section's order; firmware from VMware's
 *     <vmw:Config vmw:key="firmware" vmw:value="efi|bios"/> or
 *     VirtualBox's vbox:Machine Hardware/Firmware type="EFI|BIOS"
 *     (VirtualBox keeps secure boot in its NVRAM file, not in the OVF:
 *     only vmw:key="bootOptions.efiSecureBootEnabled" sets secure_boot);
 *     the guest OS from vmw:osType, else vbox:OSType, else the
 *     OperatingSystemSection's Description, else its ovf:id.  Items may
 *     be Item, StorageItem (sasd:) or EthernetPortItem (epasd:) (OVF 2.0).
 *   .vmx (vmdesc.c): `key = "value"` lines (keys case-insensitive, |XX
 *     hex escapes in values, # comments); memsize, numvcpus, firmware,
 *     uefi.secureBoot.enabled, guestOS, displayName; the disks of
 *     scsiN:M, sataN:M, ideN:M, nvmeN:M (.present TRUE, .fileName,
 *     .deviceType: CD-ROMs skipped), sorted by controller kind (scsi,
 *     sata, nvme, ide), bus and unit; the NICs ethernetN (.present TRUE,
 *     .virtualDev, .address when .addressType is "static", else
 *     .generatedAddress), in N's order.
 *   VMDK descriptors (vmdk.c): the text file or the one embedded in a
 *     sparse extent, whose 512-byte header (VMware's "Virtual Disk
 *     Format 1.1", little-endian) is:
 *        0 magic "KDMV"  4 version  8 flags  12 capacity (sectors, u64)
 *       20 grainSize  28 descriptorOffset (sectors)  36 descriptorSize
 *       (sectors)  44 numGTEsPerGT  48 rgdOffset  56 gdOffset
 *       64 overHead  72 uncleanShutdown  73 four line-end check bytes
 *       77 compressAlgorithm (u16)
 *     ESX's "COWD" sparse extents (VMFSSPARSE) hold their capacity as a
 *     u32 at 12, seSparse ones (SESPARSE, magic 0xcafebabe as a u64) as a
 *     u64 at 16.
 *   OVA (ova.c): a tar walked header by header (ustar, pax 'x', GNU 'L'),
 *     each member's byte range in the .ova given so that qemu's raw driver
 *     reads a disk straight out of it (offset=, size=); the manifest's
 *     SHA1/SHA256/SHA512 digests checked with libcrypto.
 *
 * Limits (every field hostile; more or longer is refused by name, never
 * cut): memory 16 MiB..16 TiB, vCPUs 1..4096, MACs six hex octets,
 * unicast, not all zero; at most VM_MAX_DISKS disks and VM_MAX_NICS NICs;
 * strings without control characters and within their field.  A
 * description with no disk is refused.  memory_mib and vcpus are 0 when
 * the description does not say.
 *
 * Every function returns 0 or a negative errno and fills err
 * (im_errf(): the file, the field or the line named); none prints or
 * exits.  Classes: -EINVAL / -ENOENT / -EFBIG IM_EXIT_SOURCE (a lying or
 * unusable description, a file missing), -EBADMSG IM_EXIT_DAMAGED (a file
 * shorter than described, a digest that does not match, a truncated
 * tar), -ENOTSUP IM_EXIT_UNSUPP (what imager does not take: raw device
 * mappings, several virtual systems, tar links), -ENOMEM
 * IM_EXIT_INTERNAL, other -errno of a read IM_EXIT_IO.
 */
#ifndef IMAGER_VMSOURCE_H
#define IMAGER_VMSOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/error.h"

#define VM_MAX_DISKS 16
#define VM_MAX_NICS  8
#define VM_MIN_MEMORY_MIB 16ull
#define VM_MAX_MEMORY_MIB (16ull << 20)   /* 16 TiB */
#define VM_MAX_VCPUS 4096u
#define VM_MAX_DESC (16u << 20)           /* an .ovf or .vmx read whole: at most 16 MiB */

enum vm_firmware { VM_FW_UNKNOWN, VM_FW_BIOS, VM_FW_EFI };

struct vm_nic {
	char mac[18];       /* "52:54:00:12:34:56", lowercase; "" when none */
	char model[32];     /* as the source names it: vmxnet3, e1000, E1000, VmxNet3, virtio... */
};

struct vm_disk {
	char file[256];     /* as the description names it (OVF: the File's ovf:href; vmx: fileName) */
	char controller[16];/* "scsi", "sata", "ide", "nvme", "virtio" or "" (unknown) */
	unsigned bus, unit;
	uint64_t capacity;  /* bytes, 0 unknown */
	bool gzip;          /* OVF ovf:compression="gzip" */
};

struct vm_desc {
	char name[128];
	uint64_t memory_mib;        /* 0: not said */
	unsigned vcpus;             /* 0: not said */
	enum vm_firmware firmware;
	bool secure_boot;
	char guest_os[64];
	struct vm_disk disks[VM_MAX_DISKS];
	size_t ndisks;
	struct vm_nic nics[VM_MAX_NICS];
	size_t nnics;
};

/* An OVF descriptor (1.0 or 2.0), xml[0..len) (no NUL needed), into *d
 * (zeroed first).  Returns 0; -EINVAL (IM_EXIT_SOURCE) for XML that does
 * not parse, a DOCTYPE, a value out of its limits (the value named:
 * "memory of 1000000000 MegaBytes is more than 16 TiB"), a disk item
 * naming no Disk or a Disk naming no File, no disk at all; -ENOTSUP
 * (IM_EXIT_UNSUPP) for several VirtualSystems, a disk without a file
 * (a blank disk), an allocation unit it does not know; -ENOMEM. */
int vm_ovf_parse(const char *xml, size_t len, struct vm_desc *d, struct im_err *err);

/* A .vmx file's text[0..len) into *d (zeroed first; firmware BIOS when
 * it does not say, as VMware does).  Returns 0, or -EINVAL
 * (IM_EXIT_SOURCE) naming the line or key: a NUL, a line over 64 KiB,
 * a line that is not `key = "value"`, a key given twice, a value
 * out of its limits, an unknown firmware, a disk without fileName, no
 * disk; -ENOMEM. */
int vm_vmx_parse(const char *text, size_t len, struct vm_desc *d, struct im_err *err);

/* A file named by a .vmx or a descriptor, resolved inside dir: a relative
 * name (no ".." component, no NUL, no control character) joined to dir;
 * a "/vmfs/volumes/DATASTORE/.../NAME" path taken as NAME in dir; any
 * other absolute path refused.  The result must exist, be a regular file
 * and, with every symbolic link resolved (realpath), lie inside dir
 * (itself resolved).  out gets that resolved path.  Returns 0; -EINVAL
 * (IM_EXIT_SOURCE) for a refused name ("... names X, outside DIR"),
 * -ENOENT (IM_EXIT_SOURCE) for a file that is not there, both naming
 * name; -ENAMETOOLONG (IM_EXIT_SOURCE) when out is too short. */
int vm_file_in_dir(const char *dir, const char *name, char *out, size_t outlen,
		   struct im_err *err);

/* ---- VMDK ---- */
#define VMDK_MAX_EXTENTS 64
#define VMDK_MAX_CHAIN   16                 /* a delta disk's parents, itself included */
#define VMDK_MAX_DESC    (1u << 20)         /* a descriptor: at most 1 MiB */
#define VMDK_NO_PARENT   0xffffffffu

struct vmdk_extent {
	char access[12];    /* RW, RDONLY, NOACCESS */
	uint64_t sectors;   /* 512-byte sectors */
	char type[16];      /* FLAT, SPARSE, ZERO, VMFS, VMFSSPARSE, SESPARSE, VMFSRDM, VMFSRAW */
	char file[256];     /* "" for ZERO */
	uint64_t offset;    /* sectors into a FLAT/VMFS file */
};

struct vmdk_desc {
	char create_type[40];
	uint32_t cid, parent_cid;      /* parent_cid VMDK_NO_PARENT: no parent */
	char parent_hint[256];         /* parentFileNameHint, "" when none */
	struct vmdk_extent ext[VMDK_MAX_EXTENTS];
	size_t next;
	uint64_t sectors;              /* the extents' sum */
};

/* A descriptor's text[0..len) (no NUL inside; the caller cuts an
 * embedded one at its first NUL) into *d (zeroed first).  Lines:
 * comments, `key=value` (CID, parentCID: 8 hex digits; createType,
 * parentFileNameHint quoted; ddb.* and others ignored) and extents
 * `ACCESS SECTORS TYPE ["FILE" [OFFSET]]`.  Returns 0, or -EINVAL
 * (IM_EXIT_SOURCE) naming the line: over VMDK_MAX_DESC, a line that is
 * none of these, a bad number, an unknown access or extent type, a
 * missing file name, a sum of sectors that overflows, no createType, no
 * extent, more than VMDK_MAX_EXTENTS. */
int vmdk_desc_parse(const char *text, size_t len, struct vmdk_desc *d, struct im_err *err);

/* Check the VMDK at path before qemu reads it: its descriptor (a text
 * file, or embedded in a sparse extent: the header's capacity must equal
 * the extent's sectors, and that extent is the file itself); every other
 * extent resolved with vm_file_in_dir() against path's folder (never the
 * descriptor itself, no file twice); FLAT/VMFS extents at least
 * (offset + sectors) * 512 bytes long; SPARSE/VMFSSPARSE/SESPARSE
 * extents' own header capacity equal to their sectors; VMFSRDM/VMFSRAW
 * refused by name.  A delta disk (parentCID not ffffffff) has its chain
 * followed through parentFileNameHint the same way (at most
 * VMDK_MAX_CHAIN deep, no file twice: "snapshot chain loop at NAME"),
 * each parent's CID equal to its child's parentCID ("snapshot chain
 * broken at NAME").  Fills *d (path's own descriptor) and *depth (the
 * chain's length, 1 without a parent) and returns 0, or -errno with the
 * file named: -EINVAL/-ENOENT IM_EXIT_SOURCE, -EBADMSG IM_EXIT_DAMAGED,
 * -ENOTSUP IM_EXIT_UNSUPP, other -errno IM_EXIT_IO. */
int vmdk_check(const char *path, struct vmdk_desc *d, unsigned *depth, struct im_err *err);

/* ---- OVA and OVF folders ---- */
#define OVA_MAX_MEMBERS 64
#define OVA_MAX_MF (1u << 20)               /* a manifest: at most 1 MiB */

struct ova_member {
	char name[256];
	uint64_t offset, size;  /* the member's data: bytes [offset, offset+size) of the .ova */
};

struct ova {
	struct ova_member m[OVA_MAX_MEMBERS];
	size_t n;
	int ovf, mf;                    /* member indexes, -1 none */
	struct vm_desc vm;              /* the .ovf, parsed */
	int disk_member[VM_MAX_DISKS];  /* vm.disks[i]'s member */
};

/* Walk the tar at path (the 512-byte headers read with pread: libarchive
 * gives no reliable data offsets, and these are what qemu needs): each
 * header's checksum verified, sizes octal or base-256, pax 'x' headers
 * (path, size) and GNU 'L' long names taken for the next member, 'g'
 * ignored, directories ignored, every other type (links, devices,
 * sparse files) refused; names that are absolute, hold a ".." component
 * or a '/' (OVAs are flat; a leading "./" is dropped) refused ("a tar
 * with a path outside"), names twice refused; data past the file's end
 * refused as truncated; at most OVA_MAX_MEMBERS members and 4096 headers;
 * a tar that ends without its two zero blocks ends where its last member
 * does (the padding of that member may be missing).  Then the single .ovf
 * (none or two refused) read and parsed with vm_ovf_parse(), each disk's
 * file mapped to its member (a missing one refused by name), and the
 * .mf noted (two refused).  Fills *o and returns 0; -EINVAL / -ENOENT
 * IM_EXIT_SOURCE, -EBADMSG IM_EXIT_DAMAGED (checksum, truncation),
 * -ENOTSUP IM_EXIT_UNSUPP (member types), else as vm_ovf_parse(). */
int ova_open(const char *path, struct ova *o, struct im_err *err);

/* Check the manifest (lines "SHA256(name)= hex", also SHA1 and SHA512,
 * blanks allowed around the parentheses and '=') of an opened OVA: the
 * .ovf's digest, and member `member`'s (-1: every member the manifest
 * lists, and each disk's member must be listed).  A listed file not in
 * the tar, a name listed twice, a malformed line, the .ovf or the member
 * asked for not listed, or a digest that does not match ("manifest
 * digest of X does not match"): -EBADMSG IM_EXIT_DAMAGED naming the
 * file.  Without a manifest: 0 and *had_manifest false.  A failing read
 * is IM_EXIT_IO. */
int ova_verify(const char *path, const struct ova *o, int member, bool *had_manifest,
	       struct im_err *err);

/* An OVF folder: the .ovf at ovf_path read and parsed into *d, each
 * disk's file resolved with vm_file_in_dir() in its folder into files[i]
 * (the caller gives VM_MAX_DISKS of them), and the manifest beside it
 * (the same name with .mf instead of .ovf), when there is one, checked
 * as ova_verify() does with -1 (the .ovf and every disk listed and
 * matching).  Returns 0 or -errno as vm_ovf_parse(), vm_file_in_dir()
 * and ova_verify(). */
int vm_ovf_folder(const char *ovf_path, struct vm_desc *d, char files[][4096],
		  struct im_err *err);

#endif
