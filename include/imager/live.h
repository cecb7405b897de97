/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The live medium's kernel parameters (boot/params.c).
 *
 * The live system's init reads /proc/cmdline once and hands it to
 * live_parse(); `imager-live --shell` prints the result as shell
 * assignments that init evaluates.  Nothing else in the medium reads the
 * command line, so this is the one place that defines the parameters:
 *
 *   imager.repo=URI       dev:/dev/sdb1 | dev:UUID=... | dev:LABEL=... |
 *                         nfs://host[:port]/export/path |
 *                         ssh://user@host[:port]/path | smb://[user@]host[:port]/share/path
 *   imager.run="ARGS"     one imager command line (words split at blanks;
 *                         single quotes group words, as the kernel keeps
 *                         only double quotes for itself); a leading
 *                         "imager" word is dropped
 *   imager.pre="CMD"      a shell command run before the job
 *   imager.post=ACTION    poweroff | reboot | shell | any other text: a
 *                         shell command (default poweroff)
 *   imager.fail=ACTION    shell | poweroff | reboot (default shell)
 *   imager.server=user@host[:port]   P2V straight to a server
 *   imager.key=dev:SPEC:PATH         a file on a local disk: the ssh key, or for an
 *                                    smb:// repository a credentials file
 *                                    (username=, password=, domain= lines)
 *   imager.name= imager.disks=a,b imager.connect=URI imager.pool=POOL
 *   imager.memory=SIZE (4G, 2048M) imager.vcpus=N   the new VM's (imager p2v)
 *   imager.keymap=LAYOUT  the console's keyboard: us, uk, de, fr, es, it...
 *                         (what boot/build.sh put in; unknown ones are
 *                         reported by init, and us stays)
 *   ip=dhcp | ip=off | ip=CLIENT:SERVER:GATEWAY:NETMASK:HOSTNAME:DEVICE:AUTOCONF[:DNS0[:DNS1]]
 *
 * Quotes follow the kernel: a double quote starts or ends a quoted part
 * of a word (the kernel passes them through in /proc/cmdline; they are
 * removed here).  Every value is checked: an unknown imager.* parameter,
 * a malformed URI or address, or a value with a control character is an
 * error with a message, so a typo on a lab's PXE line stops the medium
 * with the reason instead of doing something else.  Parameters that are
 * not imager.* or ip= are the kernel's and are ignored.
 *
 * The mode is "unattended" when imager.run or imager.server is given, and
 * "menu" otherwise (a person at the console). */
#ifndef IMAGER_LIVE_H
#define IMAGER_LIVE_H

#include <stddef.h>
#include <stdio.h>

#define LIVE_MAX_WORDS 64
#define LIVE_STR 1024

enum live_repo_kind { LIVE_REPO_NONE, LIVE_REPO_DEV, LIVE_REPO_NFS, LIVE_REPO_SSH, LIVE_REPO_SMB };
enum live_action { LIVE_POWEROFF, LIVE_REBOOT, LIVE_SHELL, LIVE_COMMAND };
enum live_ip { LIVE_IP_DHCP, LIVE_IP_STATIC, LIVE_IP_OFF };

struct live_repo {
	enum live_repo_kind kind;
	char dev[LIVE_STR];   /* dev: "/dev/sdb1", "UUID=...", "LABEL=..." */
	char user[256];       /* ssh, smb (may be empty for smb) */
	char host[256];       /* nfs, ssh, smb */
	unsigned port;        /* ssh: 22 unless given; nfs, smb: 0 (the default) unless given */
	char share[256];      /* smb */
	char path[LIVE_STR];  /* nfs: export path; ssh: remote path; smb: path in the share ("/" at least) */
};

struct live_params {
	struct live_repo repo;
	int run_argc;                       /* 0: no imager.run */
	char run_argv[LIVE_MAX_WORDS][LIVE_STR];
	char pre[LIVE_STR];
	enum live_action post, fail;
	char post_cmd[LIVE_STR];            /* post == LIVE_COMMAND */
	char server_user[256], server_host[256];
	unsigned server_port;               /* 0: no imager.server */
	char key_dev[LIVE_STR], key_path[LIVE_STR];
	char name[256], disks[LIVE_STR], connect[LIVE_STR], pool[256];
	char memory[16];                    /* "" or imager.memory's value */
	unsigned vcpus;                     /* 0: not given */
	char keymap[40];
	enum live_ip ip;
	char ip_addr[64], ip_gw[64], ip_mask[64], ip_host[256], ip_dev[64], ip_dns[2][64];
	int unattended;
};

/* Parse a kernel command line into *p (cleared first).  0 on success;
 * -EINVAL with a message in err (one line, naming the parameter) when a
 * parameter is malformed.  Never reads past cmdline's terminating NUL. */
int live_parse(const char *cmdline, struct live_params *p, char *err, size_t errlen);

/* Split one imager.run value into words (blanks separate, single quotes
 * group).  Returns the number of words, or -EINVAL with a message. */
int live_split_words(const char *s, char words[][LIVE_STR], int max, char *err, size_t errlen);

/* Write s to f as one single-quoted shell word (safe for eval). */
void live_shell_quote(FILE *f, const char *s);

/* Print *p as shell assignments (LIVE_MODE=..., LIVE_REPO_KIND=..., one
 * per line, every value single-quoted), for init to eval. */
void live_print_shell(FILE *f, const struct live_params *p);

#endif
