/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The imager command: one file per subcommand, one sorted table.
 *
 * Add-a-command checklist (as git's builtin.h):
 *  1. Write imager/cmd-NAME.c with
 *       int cmd_NAME(int argc, char **argv, struct cli *cli);
 *     It parses its own options (getopt_long, argv[0] is the command name),
 *     calls the engine, cleans up through a single exit path and returns an
 *     exit code from enum im_exit (include/imager/error.h).
 *  2. Declare it below.
 *  3. Add its row to the table in commands.c (sorted by name): handler,
 *     flags for shared preconditions, usage line, one-line summary.  `imager
 *     --help` and `imager NAME --help` are generated from the row.
 *  4. Document it in README.md (with an example) and imager.1.
 *  5. Test it under tests/ts/.
 *  The engine never prints and never exits: all output is made here.
 */
#ifndef IMAGER_COMMANDS_H
#define IMAGER_COMMANDS_H
/* The command line layer's header: only that layer and those above it include it
 * (the Makefile sets IMAGER_LAYER for each layer's sources). */
#if defined(IMAGER_LAYER) && IMAGER_LAYER < 4
#error "a lower layer may not use the command line layer"
#endif


#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "imager/convert.h"
#include "imager/disk.h"
#include "imager/error.h"
#include "imager/job.h"

/* Settings from the global options, shared by all commands. */
struct cli {
	struct disk_roots roots;
	int verbose;               /* -v: more detail on stderr; -q: errors only (-1) */
	const volatile sig_atomic_t *interrupted;   /* set by SIGINT/SIGTERM */
};

struct command {
	const char *name;
	int (*fn)(int argc, char **argv, struct cli *cli);
	unsigned flags;
	const char *usage;         /* after "imager NAME " */
	const char *summary;
};
/* The command reads or writes the disks it is given: before it runs, every
 * argument that names a block device (a path, or a kernel name under the
 * dev root) must be readable and writable by this user, else exit 2 with
 * what to do (run as root).  See cli_check_devices(). */
#define CMD_DEVICES 1u

extern const struct command commands[];
extern const size_t ncommands;
const struct command *command_find(const char *name);

int cmd_appliance(int argc, char **argv, struct cli *cli);
int cmd_clone(int argc, char **argv, struct cli *cli);
int cmd_convert(int argc, char **argv, struct cli *cli);
int cmd_define(int argc, char **argv, struct cli *cli);
int cmd_info(int argc, char **argv, struct cli *cli);
int cmd_list(int argc, char **argv, struct cli *cli);
int cmd_pools(int argc, char **argv, struct cli *cli);
int cmd_p2v(int argc, char **argv, struct cli *cli);
int cmd_migrate(int argc, char **argv, struct cli *cli);
int cmd_run(int argc, char **argv, struct cli *cli);
int cmd_restore(int argc, char **argv, struct cli *cli);
int cmd_save(int argc, char **argv, struct cli *cli);
int cmd_serve(int argc, char **argv, struct cli *cli);
int cmd_ls(int argc, char **argv, struct cli *cli);
int cmd_cat(int argc, char **argv, struct cli *cli);
int cmd_get(int argc, char **argv, struct cli *cli);
int cmd_mount(int argc, char **argv, struct cli *cli);
int cmd_multicast(int argc, char **argv, struct cli *cli);
int cmd_umount(int argc, char **argv, struct cli *cli);
int cmd_verify(int argc, char **argv, struct cli *cli);

struct img_server;
/* ---- browsing an image folder (cmd-browse.c: ls, cat, get, mount) ---- */
struct browse;
/* The folder dir checked as restore checks it (its exit codes), and name,
 * when it is a partition number, checked against its manifest (exit 1, as
 * serve --partition).  Returns an exit code (said). */
int browse_check_folder(const char *cmd, const char *dir, const char *name);
/* dir checked (browse_check_folder), served in the background
 * (img_serve_start; cache: the plugin's frame cache, 0 its default) and one
 * libguestfs appliance launched over it (browse_open).  Returns an exit
 * code (said); 9 when interrupted meanwhile. */
struct browse_session {
	struct img_server *srv;       /* imgserve.h */
	struct browse *b;
};
int browse_session_open(const char *cmd, const char *dir, const char *name, uint64_t cache,
			struct browse_session *s, struct cli *cli);
/* The appliance shut down, the server stopped, its folder removed. */
void browse_session_close(struct browse_session *s);
/* "NAME:PATH" into name and path ("/" when empty; a leading / added);
 * exit 1 (said) when arg is not of that form. */
int browse_split_spec(const char *cmd, const char *arg, char *name, size_t nlen, char *path,
		      size_t plen);

/* ---- imager mount's state (cmd-mount.c), read by umount ---- */
#define MOUNTS_DIR "/run/imager/mounts"
struct mount_state {
	char mountpoint[4096], dir[4096], sock[108], tmpdir[4096];
	long pid, nbdkit;                          /* the daemon, its nbdkit */
	unsigned long long start, nbdkit_start;    /* their start times */
};
/* A process's start time (clock ticks since boot), 0 when it is gone
 * (or a zombie). */
unsigned long long mount_proc_start(long pid);
/* The mount point's absolute path into out (PATH_MAX): realpath, or, for
 * a FUSE mount whose server died, its parent's and its name. */
int mount_point_path(const char *cmd, const char *mp, char *out);
/* MOUNTS_DIR/HASH.EXT of mount point mp (EXT: "state" or "log"). */
void mount_state_path(const char *mp, const char *ext, char *out, size_t len);
/* 1 when a state of mp is there (*st filled), else 0. */
int mount_state_read(const char *mp, struct mount_state *st);
/* The state and log of mp removed. */
void mount_state_remove(const char *mp);
/* Whether path is a mount point (/proc/self/mountinfo). */
bool mount_is_mounted(const char *path);

/* ---- helpers for command code (cli.c) ---- */

/* Print "imager NAME: message" to stderr. */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Report an engine error and return its exit code. */
int cli_fail(const char *cmd, const struct im_err *err);
/* Every CLI helper that can fail returns an exit code (enum im_exit):
 * IM_EXIT_OK, or the code of the failure after saying why on stderr.  The
 * option takers (cli_*_option) return CLI_NOT_MINE besides, for an option
 * that is not one of theirs (nothing said). */
#define CLI_NOT_MINE (-1)
/* Usage error: message, a hint, and IM_EXIT_USAGE. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print the command's help from its table row. */
int cli_help(const char *cmd, FILE *out);
/* Flush stdout and report a write failure (a closed pipe must not pass for
 * success).  Returns rc, or IM_EXIT_IO when stdout could not be written. */
int cli_finish_stdout(const char *cmd, int rc);
/* Parse "8G", "512MiB", "1000000" (bytes).  Returns 0 or -EINVAL. */
int cli_parse_size(const char *s, uint64_t *out);
/* Parse an unsigned integer within [min, max].  Returns 0 or -EINVAL. */
int cli_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);
/* "1.5 GiB" */
void cli_human(uint64_t bytes, char *out, size_t len);

/* The keys of encrypted volumes (convert.h, struct conv_key), from
 * --key ID:PASSPHRASE and --key-file ID:FILE (the file's first line, its
 * newline left out).  ID is the volume as the conversion names the
 * guest's disks (/dev/sda2), its UUID, or all.  A passphrase given on the
 * command line is copied and overwritten in argv, so that ps shows x's (it
 * stays in the shell's history: --key-file is the better way). */
struct cli_keys {
	struct conv_key k[CONV_MAX_KEYS];
	char *owned[2 * CONV_MAX_KEYS];   /* what k's strings point into */
	size_t n, nowned;
};
#define CLI_OPT_KEY      0x306
#define CLI_OPT_KEY_FILE 0x307
#define CLI_KEY_OPTIONS \
	{ "key", required_argument, NULL, CLI_OPT_KEY }, \
	{ "key-file", required_argument, NULL, CLI_OPT_KEY_FILE }
/* Take --key or --key-file (arg is writable: argv's); a file that cannot
 * be read is a bad value (IM_EXIT_USAGE).  CLI_NOT_MINE convention. */
int cli_key_option(const char *cmd, int c, char *arg, struct cli_keys *k);
/* Wipe and free the passphrases. */
void cli_keys_free(struct cli_keys *k);

/* Options shared by the commands that write a target (restore, clone). */
struct cli_target {
	struct target_opts o;      /* format, preallocation, cluster size, size, growing */
	bool convert;              /* --convert: make the guest boot on virtio afterwards */
	int block;                 /* --block (enum conv_block), 0: virtio-blk */
	bool rebuild_initramfs;    /* --rebuild-initramfs */
	const char *virtio_win;    /* --virtio-win PATH (Windows guests) */
	struct cli_keys keys;      /* --key, --key-file (encrypted volumes) */
};
#define CLI_TARGET_OPTIONS \
	CLI_KEY_OPTIONS, \
	{ "convert", no_argument, NULL, 'C' }, \
	{ "block", required_argument, NULL, 'b' }, \
	{ "rebuild-initramfs", no_argument, NULL, 'I' }, \
	{ "virtio-win", required_argument, NULL, 'W' }, \
	{ "format", required_argument, NULL, 'F' }, \
	{ "preallocation", required_argument, NULL, 'p' }, \
	{ "cluster-size", required_argument, NULL, 'c' }, \
	{ "size", required_argument, NULL, 's' }, \
	{ "grow-last", no_argument, NULL, 'G' }, \
	{ "proportional", no_argument, NULL, 'R' }, \
	{ "shrink", no_argument, NULL, 'H' }
/* Take one of CLI_TARGET_OPTIONS (CLI_NOT_MINE convention). */
int cli_target_option(const char *cmd, int c, char *arg, struct cli_target *t);

/* The options of every imaging job (save, restore, clone): --threads N,
 * --force, --json, --no-progress, and for NBD exports --timeout SECONDS and
 * --retries N (into net, which the command puts in the job's options). */
struct cli_job {
	unsigned threads;       /* 0: all cores */
	bool force, json, progress;
	struct bk_net net;      /* --timeout, --retries */
};
#define CLI_OPT_TIMEOUT 0x300
#define CLI_OPT_RETRIES 0x301
#define CLI_OPT_RESCUE  0x302
#define CLI_OPT_MAP     0x303
#define CLI_OPT_RESUME  0x304
#define CLI_OPT_CHECKPOINT 0x305
/* The journal's checkpoints of restore and clone: every 5 s unless
 * --checkpoint SECONDS (0..3600; 0: after every frame or run). */
#define CLI_CHECKPOINT_MS 5000u
/* --checkpoint's value into *ms (IM_EXIT_OK, or said and IM_EXIT_USAGE). */
int cli_checkpoint_option(const char *cmd, const char *arg, unsigned *ms);
#define CLI_JOB_OPTIONS \
	{ "threads", required_argument, NULL, 't' }, \
	{ "force", no_argument, NULL, 'f' }, \
	{ "json", no_argument, NULL, 'j' }, \
	{ "no-progress", no_argument, NULL, 'P' }, \
	{ "timeout", required_argument, NULL, CLI_OPT_TIMEOUT }, \
	{ "retries", required_argument, NULL, CLI_OPT_RETRIES }
/* An option of a job's command line that the command does not take itself:
 * one of CLI_JOB_OPTIONS, else (t given) one of CLI_TARGET_OPTIONS, else an
 * unknown option (said).  Returns IM_EXIT_OK when taken, else the exit code
 * of a bad command line (said). */
int cli_job_option(const char *cmd, int c, char *arg, struct cli_job *j,
		   struct cli_target *t);
/* --timeout SECONDS (1..86400) and --retries N (0..100) into *net (the
 * job's options carry it; CLI_NOT_MINE convention). */
int cli_net_option(const char *cmd, int c, const char *arg, struct bk_net *net);

/* --rescue (save, clone): o gets on, the retries (net: --retries) and the
 * command line for the map's header (argv joined into line, len bytes,
 * the caller's; ending in " ..." when it does not fit). */
void cli_rescue_opts(struct rescue_opts *o, const struct bk_net *net, int argc, char **argv,
		     char *line, size_t len);
/* Tell what a rescue could not read (stderr: "complete with unreadable
 * areas: ..."), each partition's part, and the map; json: add an
 * "unreadable" object.  Returns IM_EXIT_RESCUED when something was
 * unreadable, else IM_EXIT_OK. */
struct json_object;
struct img_manifest;
/* An image whose save met unreadable sectors (m->unreadable.bytes): lines
 * on f, each starting with lead: the total, then each listed range with
 * the partition it lies in and that partition's blocks, and under it the
 * files it hits when they were looked up (an ext2/3/4 saved from a local
 * source).  Nothing when the image has none. */
void cli_unreadable_lines(FILE *f, const char *lead, const char *dir,
			  const struct img_manifest *m);
/* The same as JSON: {bytes, ranges, map, partitions: [{number, filesystem,
 * bytes}], list: [{offset, length, partition, first_block, last_block,
 * and when its files were looked up: files, no_file_blocks,
 * files_partial}]}. */
struct json_object *cli_unreadable_json(const char *dir, const struct img_manifest *m);
int cli_rescue_report(const char *cmd, const struct rescue_report *rep,
		      const unsigned *numbers, const char *const *filesystems,
		      const uint64_t *bytes, size_t n, struct json_object *json, bool quiet);

/* The conversion's phases on stderr with -v (its progress callback;
 * opaque: the struct cli). */
void cli_convert_phase(void *opaque, const char *what);
/* The format of an existing disk or image ("raw", "qcow2"), probed.  A
 * folder is refused with a hint (restore --convert). */
int cli_disk_format(const char *path, const char **format, struct im_err *err);
/* Run a conversion and print its report (text, or JSON on stdout when json;
 * or, json_out non-NULL, hand the JSON object to the caller and print
 * nothing).  Returns an exit code. */
struct conv_opts;
struct json_object;
int cli_convert(const char *cmd, const char *const *disks, const char *const *formats, size_t n,
		const struct conv_opts *o, bool json, struct cli *cli, struct json_object **json_out);

/* A conversion report as text lines (guest, kernels, changes) or as the
 * JSON object `imager convert --json` prints (err: the failure, or NULL). */
struct conv_report;
void cli_convert_text(const struct conv_report *r, FILE *out);
struct json_object *cli_convert_json(const struct conv_report *r, const struct im_err *err);

/* The conversion options of --convert (t->convert), with the CLI's phase
 * messages; NULL when --convert was not given. */
const struct conv_opts *cli_target_conv(const struct cli_target *t, struct cli *cli,
					struct conv_opts *o);
/* Print a conversion's outcome (report and r/err, as im_convert() left
 * them) for disks[0..n-1]: its JSON to *json_out when json_out is given,
 * else on stdout with json, else as text.  Returns an exit code. */
int cli_convert_print(const char *cmd, const struct conv_report *rep, int r,
		      const struct im_err *err, const char *const *disks, size_t n, bool json,
		      struct cli *cli, struct json_object **json_out);
/* Print a JSON object on stdout, pretty, and release it. */
void cli_print_json(struct json_object *o);
/* CMD_DEVICES: every one of args[0..n-1] naming a block device (a path, or
 * a name under cli->roots.dev) must be open-able read-write by this user;
 * else an error naming it and how to fix it, and -1. */
int cli_check_devices(const char *cmd, int n, char **args, struct cli *cli);

/* What --grow-last / --proportional did, as lines on stdout or JSON. */
void cli_print_grow(const struct grow_report *g);
struct json_object;
struct json_object *cli_grow_json(const struct grow_report *g);
/* After a restore or clone into target: the grow report (text), then the
 * conversion step's report when it ran (text; or with json, its object
 * into *conv).  Frees the step's report.  Returns the conversion's exit
 * code (IM_EXIT_OK when it did not run). */
struct conv_step;
int cli_target_done(const char *cmd, const char *target, const struct grow_report *g,
		    struct conv_step *step, bool json, struct cli *cli, struct json_object **conv);

/* ---- the VM definition (cli-domain.c), shared by define and p2v ---- */
#include "imager/domain.h"
enum {
	DO_NAME = 300, DO_MEMORY, DO_VCPUS, DO_CPU, DO_MACHINE, DO_BUS, DO_NIC, DO_MAC,
	DO_FIRMWARE, DO_TYPE, DO_IO, DO_NETWORK, DO_BRIDGE, DO_USER_NET, DO_SERIAL_LOG,
};
#define CLI_DOMAIN_OPTIONS \
	{ "name", required_argument, NULL, DO_NAME }, \
	{ "memory", required_argument, NULL, DO_MEMORY }, \
	{ "vcpus", required_argument, NULL, DO_VCPUS }, \
	{ "cpu", required_argument, NULL, DO_CPU }, \
	{ "machine", required_argument, NULL, DO_MACHINE }, \
	{ "bus", required_argument, NULL, DO_BUS }, \
	{ "nic", required_argument, NULL, DO_NIC }, \
	{ "mac", required_argument, NULL, DO_MAC }, \
	{ "firmware", required_argument, NULL, DO_FIRMWARE }, \
	{ "domain-type", required_argument, NULL, DO_TYPE }, \
	{ "io", required_argument, NULL, DO_IO }, \
	{ "network", required_argument, NULL, DO_NETWORK }, \
	{ "bridge", required_argument, NULL, DO_BRIDGE }, \
	{ "user-net", no_argument, NULL, DO_USER_NET }, \
	{ "serial-log", required_argument, NULL, DO_SERIAL_LOG }
struct cli_domain {
	struct dom_opts o;          /* disks are filled in by the command */
	char net[80], mac[18];
};
/* Take one of CLI_DOMAIN_OPTIONS (CLI_NOT_MINE convention). */
int cli_domain_option(const char *cmd, int c, const char *arg, struct cli_domain *d);
/* The choices (unless -q) and every warning of a plan, on stderr. */
void cli_domain_print_plan(const char *cmd, const struct dom_plan *plan, const struct cli *cli);
struct json_object *cli_domain_json(const struct dom_plan *plan);

/* Progress on stderr: on when stderr is a terminal and not disabled; at
 * most a few redraws a second, with bytes, rate and ETA. */
struct cli_progress {
	bool enabled;
	bool notes;                /* the job's notes shown on stderr (not -q) */
	double start, last_draw;
	bool drawn;
};
void cli_progress_init(struct cli_progress *p, bool allowed);
/* The progress of a job: p drawn when allowed (and not -q), out wired to
 * it and to the interrupt flag. */
void cli_progress_job(struct cli_progress *p, bool allowed, const struct cli *cli,
		      struct im_progress *out);
void cli_progress_cb(void *opaque, const char *phase, uint64_t done, uint64_t total);
/* A job's note (im_progress.note): "imager: LINE" on stderr unless -q. */
void cli_progress_note(void *opaque, const char *line);
void cli_progress_end(struct cli_progress *p);
double cli_now(void);

#endif
