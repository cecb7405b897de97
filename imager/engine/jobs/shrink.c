/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Restore and clone onto a target smaller than the source disk (--shrink).
 *
 * The layout is planned first from what each partition holds (the image's
 * manifest, or the source's filesystems): a partition whose filesystem can
 * shrink needs its used bytes plus a margin (10% of them, at least
 * 256 MiB), any other keeps its size, and the partitions after a shrunk one
 * move down (layout_plan_shrink()).  Nothing is written before the plan
 * fits.  Then the copy job (copyjob.c) runs three legs; this file does the
 * planning and the second (shrink_filesystems()):
 *
 *   1. the source is copied as it is into a sparse raw file
 *      under $TMPDIR (default /var/tmp): it costs only the used data, and
 *      its free space is checked first;
 *   2. each filesystem that must shrink is shrunk there by its own tool,
 *      on the partition copied out sparsely into a file of its own (resize2fs
 *      truncates a regular file it shrinks), then copied back: e2fsck -f and
 *      resize2fs for ext2/3/4, ntfsresize for NTFS, resize.f2fs for F2FS,
 *      btrfs filesystem resize for btrfs (loop-mounted: root only);
 *      swap gets a fresh header for its new size with its UUID and label;
 *      an LVM PV gives up extents of its LV with the most free space in an
 *      ext2/3/4 (e2fsck and resize2fs on the LV's extents), the LVs after
 *      it move down and the metadata is rewritten (lvmfmt.h; no
 *      device-mapper needed), its free extents kept; FAT is made anew at
 *      its new size (mkfs.fat with its type, volume ID and label) and its
 *      files copied in with mtools, attributes and times kept;
 *   3. that copy is cloned onto the target with the new layout (writer.c:
 *      the table rebuilt, the GPT backup at the new end, the partition
 *      heads written last), and the copy is removed.
 *
 * NTFS keeps its partition's start in its boot sector (hidden sectors),
 * which Windows' boot needs: it is set to the new start in both boot
 * sectors.  UUIDs and labels are kept, so fstab and grub stay valid.  The
 * first partition keeps its start and the others follow it packed, so on
 * the usual Windows layouts (System Reserved or EFI first, then C:) the
 * Windows partition does not move and its BCD entries (disk signature and
 * partition offset) stay right.
 */
#include "imager/job.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "imager/lvmfmt.h"
#include "imager/swapfmt.h"
#include "shrink.h"
#include "source.h"
#include "writer.h"
#include "tool.h"
#include "util.h"

#define MIB (1ull << 20)
#define MARGIN_MIN (256ull << 20)

enum how { KEEP, RESIZE2FS, NTFSRESIZE, RESIZEF2FS, BTRFS, SWAP, LVMPV, FATCOPY };

static bool is_ext(const char *fs)
{
	return !strcmp(fs, "ext2") || !strcmp(fs, "ext3") || !strcmp(fs, "ext4");
}

static uint64_t with_margin(uint64_t used)
{
	uint64_t m = used + (used / 10 > MARGIN_MIN ? used / 10 : MARGIN_MIN);
	return (m + MIB - 1) / MIB * MIB;
}

/* The LV of an LVM PV that shrinks: the ext2/3/4 one with the most free
 * space, when it can give some up; *lv_min is what it keeps at least. */
static const struct fs_volume *lvm_pick(const struct shrink_part *p, uint64_t *lv_min)
{
	const struct fs_volume *best = NULL;

	for (size_t i = 0; i < p->nvols; i++) {
		const struct fs_volume *v = &p->vols[i];
		if (!is_ext(v->type) || !strcmp(v->plugin, "whole") || v->used_bytes > v->size ||
		    with_margin(v->used_bytes) >= v->size)
			continue;
		if (!best || v->size - v->used_bytes > best->size - best->used_bytes)
			best = v;
	}
	if (best)
		*lv_min = with_margin(best->used_bytes);
	return best;
}

static enum how how_to_shrink(const struct shrink_part *p, const char **why)
{
	const char *fs = p->fs;
	uint64_t lv_min;

	*why = NULL;
	if (fs && !strcmp(fs, "LVM2_member")) {
		if (lvm_pick(p, &lv_min))
			return LVMPV;
		*why = p->vols ? "no ext2/3/4 LV in it with room to give up" : "its LVs are not known";
		return KEEP;
	}
	if (!fs || !fs[0]) {
		*why = "no filesystem imager knows: kept whole";
		return KEEP;
	}
	if (is_ext(fs))
		return RESIZE2FS;
	if (!strcmp(fs, "ntfs"))
		return NTFSRESIZE;
	if (!strcmp(fs, "f2fs"))
		return RESIZEF2FS;
	if (!strcmp(fs, "btrfs")) {
		if (geteuid() == 0)
			return BTRFS;
		*why = "shrinking btrfs needs root (it shrinks only mounted)";
		return KEEP;
	}
	if (!strcmp(fs, "swap"))
		return SWAP;
	if (!strcmp(fs, "vfat"))
		return FATCOPY;
	if (!strcmp(fs, "xfs"))
		*why = "XFS cannot shrink";
	else
		*why = "imager does not shrink this filesystem";
	return KEEP;
}

/* The smallest size partition i may take. */
static uint64_t min_size(const struct shrink_part *p)
{
	const char *why;
	enum how h = how_to_shrink(p, &why);
	uint64_t m, lv_min;

	if (h == KEEP)
		return p->lp.old_size;
	if (h == SWAP) {
		m = 64 * MIB;   /* holds nothing across a restore */
	} else if (h == LVMPV) {
		/* the PV less what its LV gives up, and an extent or two of
		 * rounding (lvm_pv_find_lv() makes the exact count) */
		const struct fs_volume *v = lvm_pick(p, &lv_min);
		m = p->lp.old_size - (v->size - lv_min) + 8 * MIB;
		m = (m + MIB - 1) / MIB * MIB;
	} else {
		m = with_margin(p->used);
	}
	return m < p->lp.old_size ? m : p->lp.old_size;
}

/* One line per partition that shrinks or moves, into note[i]. */
static void describe(const struct shrink_part *in, const struct layout_part *lp, size_t n,
		     char (*note)[SHRINK_NOTE])
{
	for (size_t i = 0; i < n; i++) {
		char o[32], s[32], u[32];
		const char *why;
		char moved[64] = "";

		note[i][0] = '\0';
		if (lp[i].new_start != lp[i].old_start)
			snprintf(moved, sizeof(moved), ", moves down by %llu MiB",
				 (unsigned long long)((lp[i].old_start - lp[i].new_start) >> 20));
		util_human_size(lp[i].old_size, o, sizeof(o));
		util_human_size(lp[i].new_size, s, sizeof(s));
		util_human_size(in[i].used, u, sizeof(u));
		if (lp[i].new_size != lp[i].old_size && how_to_shrink(&in[i], &why) == LVMPV) {
			uint64_t lv_min;
			const struct fs_volume *v = lvm_pick(&in[i], &lv_min);
			snprintf(note[i], sizeof(note[i]), "partition %u %s: %s -> %s (%s used; LV %.40s shrinks, the LVs after it move down)",
				 lp[i].number, in[i].fs, o, s, u, v->name);
		} else if (lp[i].new_size != lp[i].old_size)
			snprintf(note[i], sizeof(note[i]), "partition %u %s: %s -> %s (%s used)",
				 lp[i].number, in[i].fs, o, s, u);
		else if (how_to_shrink(&in[i], &why) == KEEP && why && lp[i].old_size > 64 * MIB)
			snprintf(note[i], sizeof(note[i]), "partition %u %s: keeps %s (%s)%s",
				 lp[i].number, in[i].fs[0] ? in[i].fs : "(unknown)", o, why, moved);
		else if (moved[0])
			snprintf(note[i], sizeof(note[i]), "partition %u %s: %s%s", lp[i].number,
				 in[i].fs[0] ? in[i].fs : "(unknown)", o, moved);
	}
}

void shrink_part_set(struct shrink_part *sp, const char *fs, uint64_t used,
		     const struct fs_volume *vols, size_t nvols)
{
	snprintf(sp->fs, sizeof(sp->fs), "%s", fs);
	sp->used = used;
	sp->vols = vols;
	sp->nvols = nvols;
}

int shrink_plan(const char *table, unsigned lss, uint64_t new_disk, const struct shrink_part *in,
		size_t n, struct layout_part *out, char (*note)[SHRINK_NOTE], struct im_err *err)
{
	uint64_t mins[PT_MAX_PARTS], needed;
	int r;

	if (n > PT_MAX_PARTS)
		return im_errf(err, IM_EXIT_UNSUPP, -E2BIG, "too many partitions");
	for (size_t i = 0; i < n; i++) {
		out[i] = in[i].lp;
		mins[i] = min_size(&in[i]);
	}
	r = layout_plan_shrink(table, lss, new_disk, out, mins, n, &needed, err);
	if (r == -ENOSPC && err->exit_class == IM_EXIT_TARGET) {
		/* Say what holds the room. */
		char need[32], have[32], list[600] = "";
		size_t len = 0;
		util_human_size(needed, need, sizeof(need));
		util_human_size(new_disk, have, sizeof(have));
		for (size_t i = 0; i < n && len < sizeof(list) - 1; i++) {
			char sz[32], u[32];
			const char *why;
			util_human_size(mins[i], sz, sizeof(sz));
			util_human_size(in[i].used, u, sizeof(u));
			if (how_to_shrink(&in[i], &why) == KEEP)
				len += (size_t)snprintf(list + len, sizeof(list) - len, "; partition %u %s %s%s%s", in[i].lp.number,
							in[i].fs[0] ? in[i].fs : "(unknown)", sz,
							why ? ": " : "", why ? why : "");
			else
				len += (size_t)snprintf(list + len, sizeof(list) - len, "; partition %u %s at least %s (%s used)",
							in[i].lp.number, in[i].fs, sz, u);
		}
		memset(err, 0, sizeof(*err));
		return im_errf(err, IM_EXIT_TARGET, -ENOSPC,
			       "the data does not fit even shrunk: it needs a disk of %s, the target has %s%s",
			       need, have, list);
	}
	if (r == 0 && note)
		describe(in, out, n, note);
	return r;
}

int shrink_refuse(const char *target, uint64_t tsize, uint64_t source_size, const char *table,
		  unsigned lss, const struct shrink_part *in, size_t n, struct im_err *err)
{
	struct layout_part lp[PT_MAX_PARTS];
	char note[PT_MAX_PARTS][SHRINK_NOTE], t[32], s[32], plan[1200] = "";
	struct im_err e = { 0 };
	size_t len = 0;
	int r = shrink_plan(table, lss, tsize, in, n, lp, note, &e);

	util_human_size(tsize, t, sizeof(t));
	util_human_size(source_size, s, sizeof(s));
	for (size_t i = 0; r == 0 && i < n && len < sizeof(plan) - 1; i++)
		if (note[i][0])
			len += (size_t)snprintf(plan + len, sizeof(plan) - len, "%s%s",
						len ? "; " : "", note[i]);
	if (r == 0)
		return im_errf(err, IM_EXIT_TARGET, -ENOSPC,
			       "%s is too small: %s (%llu bytes), the source disk has %s; with --shrink it fits: %s",
			       target, t, (unsigned long long)tsize, s, plan);
	return im_errf(err, IM_EXIT_TARGET, -ENOSPC,
		       "%s is too small: %s (%llu bytes), the source disk has %s; --shrink cannot help: %s",
		       target, t, (unsigned long long)tsize, s, e.msg);
}

/* ---- the job ---- */

/* Copy [off, off+len) of src to dst at dst_off, data only (holes stay
 * holes): a sparse copy costs the used bytes. */
static int sparse_copy(int src, uint64_t off, uint64_t len, int dst, uint64_t dst_off,
		       struct im_err *err)
{
	static unsigned char buf[1 << 20];
	uint64_t pos = off, end = off + len;

	while (pos < end) {
		off_t d = lseek(src, (off_t)pos, SEEK_DATA), h;
		if (d < 0 || (uint64_t)d >= end)
			break;
		h = lseek(src, d, SEEK_HOLE);
		if (h < 0 || (uint64_t)h > end)
			h = (off_t)end;
		for (uint64_t p = (uint64_t)d; p < (uint64_t)h;) {
			size_t n = (uint64_t)h - p < sizeof(buf) ? (size_t)((uint64_t)h - p) : sizeof(buf);
			int r = util_pread_full(src, buf, n, p);
			if (r == 0)
				r = util_pwrite_full(dst, buf, n, p - off + dst_off);
			if (r < 0)
				return im_errf(err, IM_EXIT_IO, r, "copying a partition: %s",
					       strerror(-r));
			p += n;
		}
		pos = (uint64_t)h;
	}
	return 0;
}

static int run_tool(const char *what, unsigned number, const char *const argv[], int ok_max,
		    struct im_err *err)
{
	char out[1024];
	int st = tool_run(argv, out, sizeof(out));

	if (st >= 0 && st <= ok_max)
		return 0;
	{
		char *nl;
		while ((nl = strrchr(out, '\n')) && nl[1] == '\0')
			*nl = '\0';
		nl = strrchr(out, '\n');
		return im_errf(err, IM_EXIT_IO, -EIO,
			       "partition %u: %s failed (%s %d): %s", number, what,
			       st < 0 ? "error" : "exit", st < 0 ? -st : st, nl ? nl + 1 : out);
	}
}

/* NTFS's boot sector names the partition's first sector ("hidden
 * sectors", at 0x1C), which Windows' boot needs, and the volume's sectors
 * (0x28); its copy is the sector after the volume, which ntfsfix and Linux
 * look for in the partition's last sector.  For a partition of new_size
 * bytes at new_lba: the volume given every sector but the last, as mkntfs
 * does (the same clusters: ntfsresize shrank it to whole clusters below
 * that), and both copies written. */
static int ntfs_fix_boot(int fd, uint64_t at, uint64_t new_size, uint64_t new_lba,
			 struct im_err *err)
{
	unsigned char b[512];
	uint64_t sectors, bps, spc, want;
	int r = util_pread_full(fd, b, sizeof(b), at);

	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "reading a boot sector: %s", strerror(-r));
	if (memcmp(b + 3, "NTFS    ", 8) || b[510] != 0x55 || b[511] != 0xAA)
		return 0;
	bps = le16(b + 11);
	spc = b[13] <= 0x80 ? b[13] : 1ull << (256 - b[13]);
	sectors = le64(b + 0x28);
	if ((bps != 512 && bps != 1024 && bps != 2048 && bps != 4096) || !spc)
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "an NTFS boot sector with %llu-byte sectors",
			       (unsigned long long)bps);
	want = new_size / bps - 1;
	if (want / spc == sectors / spc)
		sectors = want;
	else if (sectors > want)
		return im_errf(err, IM_EXIT_INTERNAL, -ENOSPC,
			       "the NTFS volume (%llu sectors) does not fit its new partition",
			       (unsigned long long)sectors);
	put_le64(b + 0x28, sectors);
	put_le32(b + 0x1C, new_lba > 0xFFFFFFFFull ? 0xFFFFFFFFu : (uint32_t)new_lba);
	r = util_pwrite_full(fd, b, sizeof(b), at);
	if (r == 0)
		r = util_pwrite_full(fd, b, sizeof(b), at + sectors * bps);
	return r < 0 ? im_errf(err, IM_EXIT_IO, r, "writing a boot sector: %s", strerror(-r)) : 0;
}

/* Partition lp copied out of the temporary disk into a sparse file of its
 * own (resize2fs truncates a regular file it shrinks, which would cut off
 * the partitions after it), shrunk there by tool, and its new extent copied
 * back. */
static int shrink_in_file(int fd, const char *tmpdir, const struct layout_part *lp,
			  const char *what, const char *const *argv, int ok_max, int path_arg,
			  struct im_err *err)
{
	char path[4200];
	const char *args[12];
	int pfd, r, i;

	snprintf(path, sizeof(path), "%s/part%u.raw", tmpdir, lp->number);
	for (i = 0; argv[i] && i < 11; i++)
		args[i] = i == path_arg ? path : argv[i];
	args[i] = NULL;
	pfd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (pfd < 0)
		return im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
	r = ftruncate(pfd, (off_t)lp->old_size) < 0
		    ? im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno))
		    : sparse_copy(fd, lp->old_start, lp->old_size, pfd, 0, err);
	if (r == 0)
		r = run_tool(what, lp->number, args, ok_max, err);
	if (r == 0 && ftruncate(pfd, (off_t)lp->old_size) < 0)   /* (after resize2fs) */
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
	if (r == 0)
		r = sparse_copy(pfd, 0, lp->new_size, fd, lp->old_start, err);
	close(pfd);
	unlink(path);
	return r;
}

/* FAT: no tool shrinks it in place, so a new one is made at the new size
 * with the old one's FAT type, sector size, FAT count, volume ID and label
 * (mkfs.fat, its hidden sectors the partition's new start), and the files
 * are copied into it with mtools (names, long names, times, then the
 * attributes the copy did not set: hidden, system, read-only, archive). */
static const char fat_script[] =
	"set -e -o pipefail; old=$1 new=$2 kib=$3; shift 3\n"
	"export MTOOLS_SKIP_CHECK=1\n"
	"d=$(mktemp -d \"${old%/*}/fat.XXXXXX\")\n"
	"trap 'rm -rf \"$d\"' EXIT\n"
	"mkfs.fat -C \"$@\" \"$new\" \"$kib\" >/dev/null\n"
	"mcopy -s -p -m -i \"$old\" ::/ \"$d/\"\n"
	"files=()\n"
	"for f in \"$d\"/* \"$d\"/.[!.]* \"$d\"/..?*; do [ -e \"$f\" ] && files+=(\"$f\"); done\n"
	"[ ${#files[@]} = 0 ] || mcopy -s -p -m -i \"$new\" \"${files[@]}\" ::/\n"
	"mattrib -/ -i \"$old\" ::/ >\"$d.a\"; mattrib -/ -i \"$new\" ::/ >\"$d.b\"\n"
	"trap 'rm -rf \"$d\" \"$d.a\" \"$d.b\"' EXIT\n"
	"grep -vxF -f \"$d.b\" \"$d.a\" | while IFS= read -r l; do\n"
	"  p=${l#*::}; [ \"$p\" = / ] && continue; a=${l:0:12}; set --\n"
	"  [ \"${a:2:1}\" = A ] && set -- +a || set -- -a\n"
	"  [ \"${a:5:1}\" = S ] && set -- \"$@\" +s || set -- \"$@\" -s\n"
	"  [ \"${a:6:1}\" = H ] && set -- \"$@\" +h || set -- \"$@\" -h\n"
	"  [ \"${a:7:1}\" = R ] && set -- \"$@\" +r || set -- \"$@\" -r\n"
	"  mattrib -i \"$new\" \"$@\" \"::$p\"\n"
	"done\n";

static int shrink_fat(int fd, const char *tmpdir, const struct layout_part *lp, unsigned lss,
		      struct im_err *err)
{
	unsigned char b[512];
	char oldp[4200], newp[4200], kib[32], bits[8], bps[16], nfats[8], volid[16], hidden[32];
	char label[12] = "";
	const char *argv[24];
	unsigned fsz16, off, n = 0;
	int r = util_pread_full(fd, b, sizeof(b), lp->old_start), ofd, nfd;

	if (r < 0)
		return im_errf(err, IM_EXIT_IO, r, "partition %u: %s", lp->number, strerror(-r));
	fsz16 = le16(b + 22);
	off = fsz16 ? 0x24 : 0x40;   /* where the extended boot record is */
	if (b[510] != 0x55 || b[511] != 0xAA || !b[13] || !b[16] ||
	    (le16(b + 11) != 512 && le16(b + 11) != 1024 && le16(b + 11) != 2048 &&
	     le16(b + 11) != 4096))
		return im_errf(err, IM_EXIT_DAMAGED, -EINVAL, "partition %u: not a FAT boot sector",
			       lp->number);
	snprintf(bits, sizeof(bits), "%s",
		 !fsz16 ? "32" : !memcmp(b + 0x36, "FAT12", 5) ? "12" : "16");
	snprintf(bps, sizeof(bps), "%u", le16(b + 11));
	snprintf(nfats, sizeof(nfats), "%u", b[16]);
	snprintf(kib, sizeof(kib), "%llu", (unsigned long long)(lp->new_size >> 10));
	snprintf(hidden, sizeof(hidden), "%llu", (unsigned long long)(lp->new_start / lss));
	snprintf(oldp, sizeof(oldp), "%s/part%u.raw", tmpdir, lp->number);
	snprintf(newp, sizeof(newp), "%s/part%u.new", tmpdir, lp->number);
	argv[n++] = "bash";
	argv[n++] = "-c";
	argv[n++] = fat_script;
	argv[n++] = "bash";
	argv[n++] = oldp;
	argv[n++] = newp;
	argv[n++] = kib;
	argv[n++] = "-F";
	argv[n++] = bits;
	argv[n++] = "-S";
	argv[n++] = bps;
	argv[n++] = "-f";
	argv[n++] = nfats;
	argv[n++] = "-h";
	argv[n++] = hidden;
	if (b[off + 2] == 0x29) {
		size_t k;
		snprintf(volid, sizeof(volid), "%08X", le32(b + off + 3));
		argv[n++] = "-i";
		argv[n++] = volid;
		memcpy(label, b + off + 7, 11);
		for (k = 11; k && label[k - 1] == ' '; k--)
			label[k - 1] = '\0';
		for (size_t i = 0; i < k; i++)
			if ((unsigned char)label[i] < 0x20 || label[i] == '"')
				label[0] = '\0';   /* a hostile label is not passed on */
		if (label[0] && strcmp(label, "NO NAME")) {
			argv[n++] = "-n";
			argv[n++] = label;
		}
	}
	argv[n] = NULL;
	ofd = open(oldp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (ofd < 0)
		return im_errf(err, IM_EXIT_IO, -errno, "%s: %s", oldp, strerror(errno));
	unlink(newp);
	r = ftruncate(ofd, (off_t)lp->old_size) < 0
		    ? im_errf(err, IM_EXIT_IO, -errno, "%s: %s", oldp, strerror(errno))
		    : sparse_copy(fd, lp->old_start, lp->old_size, ofd, 0, err);
	close(ofd);
	if (r == 0)
		r = run_tool("mkfs.fat and mcopy (FAT copied into a smaller one)", lp->number, argv, 0,
			     err);
	if (r == 0) {
		nfd = open(newp, O_RDONLY | O_CLOEXEC);
		if (nfd < 0)
			r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", newp, strerror(errno));
		else {
			/* the new FAT over the old one's place, emptied first (a
			 * hole: the copy stays sparse) */
			if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      (off_t)lp->old_start, (off_t)lp->new_size) < 0)
				r = im_errf(err, IM_EXIT_IO, -errno, "partition %u: %s", lp->number,
					    strerror(errno));
			if (r == 0)
				r = sparse_copy(nfd, 0, lp->new_size, fd, lp->old_start, err);
			close(nfd);
		}
	}
	unlink(oldp);
	unlink(newp);
	return r;
}

/* An LVM PV: its LV with the most free space shrunk with its filesystem
 * (e2fsck and resize2fs on the LV's extents), then the PV
 * (lvm_pv_shrink(): the LVs after it move down, the metadata rewritten). */
static int shrink_lvm(int fd, const char *tmpdir, const struct shrink_part *in,
		      const struct layout_part *lp, struct im_err *err)
{
	uint64_t lv_min;
	const struct fs_volume *v = lvm_pick(in, &lv_min);
	struct lvm_pv_lv pl;
	struct im_err e = { 0 };
	char size[32];
	int r;

	if (lvm_pv_find_lv(fd, lp->old_start, lp->old_size, v->name, lp->new_size, &pl, &e) < 0)
		return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "partition %u: LVM: %s", lp->number,
			       e.msg);
	if (pl.new_size < pl.size) {
		struct layout_part lvp = { .number = lp->number, .old_start = lp->old_start + pl.offset,
					   .old_size = pl.size, .new_size = pl.new_size };
		const char *fsck[] = { "e2fsck", "-fy", "PART", NULL };
		const char *rs[] = { "resize2fs", "PART", size, NULL };
		snprintf(size, sizeof(size), "%lluK", (unsigned long long)(pl.new_size >> 10));
		r = shrink_in_file(fd, tmpdir, &lvp, "e2fsck before resize2fs", fsck, 1, 2, err);
		if (r == 0)
			r = shrink_in_file(fd, tmpdir, &lvp, "resize2fs", rs, 0, 1, err);
		if (r < 0) {
			im_err_prefix(err, "LV %s: ", v->name);
			return r;
		}
	}
	if (lvm_pv_shrink(fd, lp->old_start, lp->old_size, v->name, lp->new_size, &e) < 0)
		return im_errf(err, IM_EXIT_IO, -EIO, "partition %u: LVM: %s", lp->number, e.msg);
	return 0;
}

static int shrink_one(int fd, const char *tmpdir, const struct shrink_part *in,
		      const struct layout_part *lp, unsigned lss, struct im_err *err)
{
	const char *why;
	enum how h = how_to_shrink(in, &why);
	char size[32];
	int r = 0;

	if (lp->new_size >= lp->old_size) {
		/* only moved */
	} else if (h == RESIZE2FS) {
		const char *fsck[] = { "e2fsck", "-fy", "PART", NULL };
		const char *rs[] = { "resize2fs", "PART", size, NULL };
		snprintf(size, sizeof(size), "%lluK", (unsigned long long)(lp->new_size >> 10));
		/* e2fsck first (resize2fs asks for it); its fixes stay on the copy. */
		r = shrink_in_file(fd, tmpdir, lp, "e2fsck before resize2fs", fsck, 1, 2, err);
		if (r == 0)
			r = shrink_in_file(fd, tmpdir, lp, "resize2fs", rs, 0, 1, err);
	} else if (h == NTFSRESIZE) {
		/* ntfsresize shrinks to whole clusters below the size given; the
		 * backup boot sector takes the last sector. */
		const char *rs[] = { "ntfsresize", "--force", "--no-progress-bar", "-s", size, "PART",
				     NULL };
		snprintf(size, sizeof(size), "%llu", (unsigned long long)(lp->new_size - lss));
		r = shrink_in_file(fd, tmpdir, lp, "ntfsresize", rs, 0, 5, err);
	} else if (h == RESIZEF2FS) {
		/* -t: the new size in 512-byte sectors; -s: safe (checkpointed) */
		const char *rs[] = { "resize.f2fs", "-s", "-t", size, "PART", NULL };
		snprintf(size, sizeof(size), "%llu", (unsigned long long)(lp->new_size >> 9));
		r = shrink_in_file(fd, tmpdir, lp, "resize.f2fs", rs, 0, 4, err);
	} else if (h == BTRFS) {
		/* btrfs shrinks only mounted: a loop mount of the partition's
		 * file, private to this job. */
		static const char script[] =
			"set -e; d=$(mktemp -d); "
			"trap 'umount \"$d\" 2>/dev/null || true; rmdir \"$d\"' EXIT; "
			"mount -t btrfs -o loop \"$1\" \"$d\"; btrfs filesystem resize \"$2\" \"$d\"; "
			"umount \"$d\"";
		const char *rs[] = { "sh", "-c", script, "sh", "PART", size, NULL };
		snprintf(size, sizeof(size), "%llu", (unsigned long long)lp->new_size);
		r = shrink_in_file(fd, tmpdir, lp, "btrfs filesystem resize", rs, 0, 4, err);
	} else if (h == LVMPV) {
		r = shrink_lvm(fd, tmpdir, in, lp, err);
	} else if (h == FATCOPY) {
		r = shrink_fat(fd, tmpdir, lp, lss, err);
	} else if (h == SWAP) {
		unsigned char page[4096], uuid[16];
		char label[SWAP_LABEL_LEN + 1] = "";
		r = util_pread_full(fd, page, sizeof(page), lp->old_start);
		if (r == 0 && !memcmp(page + 4096 - SWAP_MAGIC_LEN, SWAP_MAGIC_V1, SWAP_MAGIC_LEN)) {
			memcpy(uuid, page + SWAP_UUID_OFF, 16);
			memcpy(label, page + SWAP_LABEL_OFF, SWAP_LABEL_LEN);
			swap_header_make(page, lp->new_size, uuid, label);
			r = util_pwrite_full(fd, page, sizeof(page), lp->old_start);
		}
		if (r < 0)
			r = im_errf(err, IM_EXIT_IO, r, "partition %u: swap header: %s", lp->number,
				    strerror(-r));
	}
	if (r == 0 && h == NTFSRESIZE)
		r = ntfs_fix_boot(fd, lp->old_start, lp->new_size, lp->new_start / lss, err);
	return r;
}

/* A temporary folder with room for the used data. */
int shrink_tmpdir(char *dir, size_t len, uint64_t need, struct im_err *err)
{
	const char *base = tmp_base();
	struct statvfs sv;

	if (statvfs(base, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < need) {
		char n[32], h[32];
		util_human_size(need, n, sizeof(n));
		util_human_size((uint64_t)sv.f_bavail * sv.f_frsize, h, sizeof(h));
		return im_errf(err, IM_EXIT_IO, -ENOSPC,
			       "shrinking needs %s of temporary space in %s (set TMPDIR), and it has %s",
			       n, base, h);
	}
	return tmp_dir_make("shrink", dir, len, err);
}

int shrink_filesystems(const char *path, const char *tmpdir, const struct shrink_part *in,
		       const struct layout_part *lp, size_t n, unsigned lss,
		       const struct im_progress *progress, struct im_err *err)
{
	int r = 0, fd = open(path, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (progress->note && (lp[i].new_size != lp[i].old_size)) {
			char line[200];
			snprintf(line, sizeof(line), "shrinking partition %u (%s)", lp[i].number,
				 in[i].fs);
			progress->note(progress->opaque, line);
		}
		r = shrink_one(fd, tmpdir, &in[i], &lp[i], lss, err);
	}
	if (fsync(fd) < 0 && r == 0)
		r = im_errf(err, IM_EXIT_IO, -errno, "%s: %s", path, strerror(errno));
	close(fd);
	return r;
}
