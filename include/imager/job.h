/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The main jobs of the engine: save a disk to an image folder, restore an
 * image folder to a disk, verify an image folder, describe a disk. */
#ifndef IMAGER_JOB_H
#define IMAGER_JOB_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "imager/backend.h"
#include "imager/disk.h"
#include "imager/error.h"
#include "imager/image.h"
#include "imager/layout.h"
#include "imager/pipeline.h"
#include "imager/ptable.h"

struct save_opts {
	const char *format;        /* source container format; NULL = probe */
	int level;                 /* zstd level, 1..19 */
	unsigned threads;          /* compression workers; 0 = all cores */
	bool force;                /* copy unclean or inconsistent filesystems */
	/* Carry on from an interrupted save in DIR (no manifest yet): each
	 * partition keeps what its journal and stream prove was written for
	 * this same source, and reads on from there; the rest is saved anew. */
	bool resume;
	struct rescue_opts rescue;
	struct bk_net net;         /* an NBD source: --timeout, --retries */
	struct im_progress progress;
};

/* Warnings a job's report holds: one per partition a table can have (its
 * plugin's), and a few of the job's own. */
#define IM_MAX_WARNINGS (PT_MAX_PARTS + 4)

struct save_stats {
	uint64_t bytes_read;       /* from the source */
	uint64_t image_bytes;      /* written into the folder */
	char warnings[IM_MAX_WARNINGS][600];   /* plugin warnings worth telling */
	size_t nwarnings;
	struct rescue_report rescue;  /* also in the manifest ("unreadable") */
	uint64_t resumed_bytes;       /* --resume: used bytes kept from before */
};

/* Save SOURCE (a disk, a partition or an image file) into DIR (created; an
 * existing DIR must be empty, or an unfinished image, which is replaced, or
 * with opts->resume carried on).  The manifest is written last; on failure
 * the files written are removed and no manifest exists, except when
 * interrupted (IM_EXIT_INTERRUPTED): the unfinished folder stays, for
 * --resume.  On success *m holds
 * the manifest (free with img_manifest_free). */
int im_save(const struct disk_roots *roots, const char *source, const char *dir,
	    const struct save_opts *opts, struct img_manifest *m, struct save_stats *stats,
	    struct im_err *err);

/* Growing filesystems inside an image file (and an LVM PV anywhere) needs
 * libguestfs, which the engine does not link: the conversion layer offers it
 * through this hook (conv_grow_hook()).  grow_in_image grows the
 * partitions numbered numbers[0..n-1] of the image at path (format given)
 * to fill them, extending last_lvs[k] inside a PV (NULL: none), and sets
 * grown[k]; it returns 0 or a negative errno with err filled.  Without a
 * hook (fn NULL) those partitions keep their filesystems' sizes, with a
 * note in the report. */
struct im_grow_hook {
	int (*grow_in_image)(void *opaque, const char *path, const char *format,
			     const unsigned *numbers, const char *const *last_lvs, size_t n,
			     bool *grown, struct im_err *err);
	void *opaque;
};

/* Where restore and clone write: one set of options for both. */
struct target_opts {
	const char *format;        /* target format: raw, qcow2; NULL = from the name */
	enum bk_prealloc prealloc; /* for a new image file */
	uint32_t cluster_size;     /* qcow2; 0 = 64 KiB */
	uint64_t size;             /* size of a new image file; 0 = the source disk's */
	enum grow_mode grow;       /* on a larger target: grow the last, or all */
	bool force;                /* write to a target that is in use */
	struct im_grow_hook grow_hook;
	bool shrink;               /* onto a smaller target: shrink filesystems (shrink.c) */
	struct bk_net net;         /* an NBD target: --timeout, --retries */
	/* An explicit new layout (set by the shrink job, not by users): the
	 * partitions by number with their new starts and sizes, on a disk of
	 * layout_disk bytes.  The data of each must end within its new size. */
	const struct layout_part *layout;
	size_t nlayout;
	uint64_t layout_disk;
};

/* The target a job wrote, resolved once (writer_open) and handed to the
 * steps after it: growing, converting, defining a VM. */
struct target_info {
	char path[600];            /* the file or device (resolved), or the NBD URI */
	char format[16];           /* the container it holds: raw, qcow2, nbd */
	bool block_device;         /* a whole-disk block device */
	char disk_name[256];       /* its kernel name ("vdb"), for partition nodes */
	bool created;              /* a new file: removed if the job failed */
	uint64_t size;
};

struct restore_opts {
	struct target_opts target;
	unsigned threads;
	/* Carry on from an interrupted restore onto the same raw target (its
	 * journal: TARGET.imager-resume beside a file, or
	 * /var/lib/imager/resume/NAME.jnl for a device): the frames it says
	 * are on the target are not written again. */
	bool resume;
	/* Keep that journal while the restore runs, so that an interrupted one
	 * can be resumed (the restore command; not the restores other jobs
	 * make into pools and temporary files). */
	bool journal;
	/* The least time between two checkpoints of that journal, in ms (0:
	 * after every frame).  Each flushes the target, which costs disk time:
	 * after every 32 frames, restores onto this machine's disk ran a tenth
	 * slower; every 5 s (the command's default) costs a resume at most 5 s
	 * of work done again. */
	unsigned checkpoint_ms;
	struct im_progress progress;
};

/* Partitions laid out again and filesystems grown, for reporting. */
struct grow_report {
	size_t nparts;
	struct layout_part parts[PT_MAX_PARTS];
	char grown_fs[PT_MAX_PARTS][16];   /* "ext4" when its filesystem was grown, "" */
	char note[PT_MAX_PARTS][128];      /* why a grown partition's filesystem kept its size */
};

struct restore_stats {
	uint64_t bytes_written;    /* onto the target: the data, and zeros where the target
				    * was not known to read as zeros already */
	struct target_info target;
	struct grow_report grow;
	uint64_t resumed_bytes;    /* --resume: used bytes already on the target */
};

/* Restore DIR onto TARGET (block device or image file, created when absent).
 * Everything that can be checked before writing is (manifest, indexes,
 * stream sizes, boot areas, target size and use).  While data is written the
 * target holds no partition table and no superblocks: those are written
 * last, so a failed restore never looks complete.  A file created here is
 * removed on failure. */
int im_restore(const struct disk_roots *roots, const char *dir, const char *target,
	       const struct restore_opts *opts, struct restore_stats *stats, struct im_err *err);
/* The same from an image folder sent as one tar stream on fd (what
 * `imager multicast` sends, image/imgtar.h: the manifest, boot areas and
 * indexes first, then each partition's stream), read once, in order: the
 * small files are kept in a temporary folder, each stream is restored as it
 * arrives (frames checked, shrink and grow as im_restore).  name is what
 * messages call the stream.  Not with resume (IM_EXIT_USAGE).  A stream that
 * is not one, ends early or differs from its manifest: IM_EXIT_DAMAGED,
 * with the table held back as above.  fd is read to the archive's end on
 * success, left where it stopped otherwise. */
int im_restore_stream(const struct disk_roots *roots, int fd, const char *name,
		      const char *target, const struct restore_opts *opts,
		      struct restore_stats *stats, struct im_err *err);

struct clone_opts {
	const char *source_format;  /* NULL = probe */
	struct target_opts target;
	bool force_fs;              /* copy unclean or inconsistent filesystems */
	bool verify;                /* read back and compare after the copy */
	unsigned threads;
	struct rescue_opts rescue;
	struct bk_net net;          /* an NBD source (the target's: target.net) */
	/* Carry on from an interrupted clone onto the same raw target, from
	 * the source unchanged (its journal, as restore's: TARGET.imager-resume
	 * beside a file, /var/lib/imager/resume/NAME.jnl for a device): the used
	 * blocks it says are on the target are not copied again.  Not with
	 * --rescue or --shrink. */
	bool resume;
	/* Keep that journal while the clone runs (the clone command; not the
	 * clones other jobs make into pools and temporary files). */
	bool journal;
	unsigned checkpoint_ms;     /* as restore's */
	struct im_progress progress;
};

struct clone_stats {
	uint64_t bytes_read, bytes_written, verified_bytes;
	uint64_t resumed_bytes;     /* --resume: used bytes already on the target */
	struct target_info target;
	struct grow_report grow;
	char warnings[IM_MAX_WARNINGS][600];
	size_t nwarnings;
	struct rescue_report rescue;
	/* per source partition: its number and unreadable bytes */
	size_t nrescued;
	struct { unsigned number; char filesystem[32]; uint64_t bytes; } rescued[PT_MAX_PARTS];
};

/* Copy SOURCE (disk, partition, image file, NBD export) onto TARGET in one
 * pass: used blocks only, the table and superblocks written last. */
int im_clone(const struct disk_roots *roots, const char *source, const char *target,
	     const struct clone_opts *opts, struct clone_stats *stats, struct im_err *err);

struct verify_damage {
	unsigned partition;
	char file[64];
	int64_t frame;             /* -1 when not about one frame */
	uint64_t disk_offset, length;
	char what[160];
};

struct verify_report {
	uint64_t frames_checked;
	size_t ndamage;
	struct verify_damage *damage;
};

/* Check every boot area, index and frame of DIR.  Damage is reported in
 * *rep, not as an error: the call fails only when the image cannot be
 * examined at all (no manifest: IM_EXIT_DAMAGED). */
int im_verify(const char *dir, unsigned threads, const struct im_progress *progress,
	      struct verify_report *rep, struct im_err *err);
void verify_report_free(struct verify_report *rep);

/* What is on a disk or image file: its table, and for each partition the
 * filesystem and, when a plugin can tell, the used blocks. */
struct disk_part_info {
	struct pt_part part;
	char fstype[32], uuid[64], label[256], plugin[16];
	uint32_t block_size;
	uint64_t used_blocks;
	char error[sizeof(((struct im_err *)0)->msg)];   /* the examination's message */
	char container[128];       /* an LVM PV: its VG */
	size_t nvolumes;
	struct fs_volume *volumes; /* owned; im_disk_info_free() */
};
struct disk_info {
	char path[600];
	char format[16];           /* the container: raw, qcow2, nbd, vmdk, vhd, vhdx, vdi,
				    * ova, ovf, vmx (backend.h) */
	char format_detail[128];   /* what the container's header says ("" none): a
				    * VMDK's createType, "fixed" VHD, "OVA disk 1, ..." */
	uint64_t size;
	unsigned lss;
	char table[16];
	size_t nparts;
	struct disk_part_info parts[PT_MAX_PARTS];
};
int im_disk_info(const struct disk_roots *roots, const char *name, struct disk_info *info,
		 struct im_err *err);
/* Release what im_disk_info() allocated inside info (not info itself). */
void im_disk_info_free(struct disk_info *info);


/* ---- reading an image folder without a restore (imager serve) ----
 *
 * A Clonezilla folder's partclone streams are compressed as a whole
 * (gzip, zstd, xz, bzip2, lz4, lzo or none, maybe split into .aa .ab
 * pieces): a byte in the middle can only be reached by decompressing
 * everything before it.  So the first open makes an index: the restore's
 * own pass over the folder (its parsing of the folder, the partition
 * table files, the partclone headers, bitmaps and checksums, the PVs,
 * LVs, swap headers and EBRs it makes: jobs/clonezilla-restore.c) written
 * not onto a disk but as an imager image folder of the restored disk
 * (jobs/czindex.c): each partition's bytes cut into independent zstd
 * frames of 4 MiB (level IM_CZINDEX_LEVEL) with a frame index, all-zero
 * 4 KiB chunks left out, and the boot areas as the writer finishes them
 * (a GPT's backup made from its primary).  img_reader (imgread.h) reads
 * that folder as any other: the served bytes are the restore's.
 *
 * The index is a cache, never inside the image folder (which is never
 * written): CACHE_DIR/IDENTITY/, IDENTITY the XXH3-64 of the folder's
 * files' names, sizes, modification times and first 64 KiB each, so a
 * changed folder gets a new index; the entry is built under
 * CACHE_DIR/.build-IDENTITY-PID and renamed into place when complete (an
 * interrupted build leaves nothing that looks complete; leftovers of dead
 * builds are removed), reused at the next open (its modification time
 * touched), and rebuilt when its files fail the reader's checks.  After
 * a build, older entries made from the same folder path are removed, then
 * the least recently used others while the cache holds more than
 * max_bytes. */
#define IM_CZINDEX_DIR_DEFAULT "/var/cache/imager/czindex"
#define IM_CZINDEX_MAX_DEFAULT (64ull << 30)
#define IM_CZINDEX_LEVEL 1

struct im_czindex_opts {
	const char *cache_dir;     /* NULL: IM_CZINDEX_DIR_DEFAULT */
	uint64_t max_bytes;        /* 0: IM_CZINDEX_MAX_DEFAULT */
	struct im_progress progress;   /* phase "index": bytes of the restore's total */
};
struct im_czindex_report {
	bool built;                /* false: an index already there was reused */
	char path[4200];           /* the entry: an imager image folder */
	uint64_t ms;               /* the time taken */
	uint64_t bytes;            /* the entry's size on disk */
};
/* The index of the Clonezilla folder DIR, found or built.  Damage in the
 * folder fails as a restore fails (IM_EXIT_DAMAGED, the stream's file and
 * what is wrong named; nothing left in the cache); a cache that cannot be
 * written is IM_EXIT_IO, naming it.  0 or negative errno. */
int im_czindex(const char *dir, const struct im_czindex_opts *o, struct im_czindex_report *rep,
	       struct im_err *err);
/* img_reader_open() (imgread.h) of DIR, an imager folder, or of a
 * Clonezilla folder through its index (im_czindex, co: NULL the
 * defaults); rep (may be NULL) says what the index cost. */
struct img_reader;
struct img_reader_opts;
int im_reader_open(const char *dir, const struct img_reader_opts *ro,
		   const struct im_czindex_opts *co, struct img_reader **out,
		   struct im_czindex_report *rep, struct im_err *err);
/* The imager image folder that serves DIR (imgserve.h serves only those):
 * DIR itself, or a Clonezilla folder's index, found or built (im_czindex;
 * co NULL: the cache $IMAGER_CZINDEX_DIR, else the default), into out.
 * 0 or negative errno (im_czindex's errors; -ENAMETOOLONG). */
int im_serve_folder(const char *dir, const struct im_czindex_opts *co, char *out, size_t len,
		    struct im_err *err);

#endif
