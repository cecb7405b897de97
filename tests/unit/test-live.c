/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The live medium's kernel parameters (boot/params.c): quoting, every kind of repository, actions, ip=, hostile input, and the shell output. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imager/live.h"
#include "unit.h"

/* About 100 KiB: static, not on the stack. */
static struct live_params P;
static char ERR[512];
static char W[LIVE_MAX_WORDS][LIVE_STR];

/* LINE for a failure message: at most 100 characters, control characters
 * as \xNN (the hostile lines would otherwise act on the terminal). */
static const char *shown(const char *line)
{
	static char buf[512];
	size_t n = 0;
	for (; *line && n < 100; line++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
				      (unsigned char)*line < 0x20 || *line == 0x7f ? "\\x%02x" : "%c",
				      (unsigned char)*line);
	buf[n] = '\0';
	return buf;
}

/* live_parse on an exact-size heap copy of LINE, so that ASan reports any
 * read past its terminating NUL. */
static int parse(const char *line)
{
	size_t n = strlen(line) + 1;
	char *copy = malloc(n);
	int rc;

	if (!copy)
		abort();
	memcpy(copy, line, n);
	rc = live_parse(copy, &P, ERR, sizeof(ERR));
	free(copy);
	return rc;
}

/* LINE must be accepted; the fields are then in P. */
static int ok(const char *line)
{
	int rc = parse(line);
	if (rc)
		fprintf(stderr, "  [%s]: refused: %s\n", shown(line), ERR);
	return rc == 0;
}

/* LINE must be refused with -EINVAL and one printable line of message
 * containing WANT (the parameter's name, or the reason). */
static int bad(const char *line, const char *want)
{
	int rc = parse(line);
	if (rc != -EINVAL) {
		fprintf(stderr, "  [%s]: rc %d, expected -EINVAL about '%s'\n", shown(line), rc,
			want);
		return 0;
	}
	for (const char *c = ERR; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f) {
			fprintf(stderr, "  [%s]: control character 0x%02x in the message\n",
				shown(line), (unsigned char)*c);
			return 0;
		}
	if (!strstr(ERR, want)) {
		fprintf(stderr, "  [%s]: message '%s' does not mention '%s'\n", shown(line), ERR,
			want);
		return 0;
	}
	return 1;
}

/* What live_shell_quote or live_print_shell wrote, as a string (freed by
 * the caller). */
static char *quoted(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		abort();
	live_shell_quote(f, s);
	fclose(f);
	return buf;
}

static char *shell_output(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		abort();
	live_print_shell(f, &P);
	fclose(f);
	return buf;
}

/* A string of N copies of C after PREFIX and before SUFFIX (freed by the
 * caller), for the length limits. */
static char *repeat(const char *prefix, char c, size_t n, const char *suffix)
{
	size_t pl = strlen(prefix), sl = strlen(suffix);
	char *s = malloc(pl + n + sl + 1);
	if (!s)
		abort();
	memcpy(s, prefix, pl);
	memset(s + pl, c, n);
	memcpy(s + pl + n, suffix, sl + 1);
	return s;
}

/* The kernel's own parameters are not ours: ignored, and the defaults hold. */
static void test_defaults(void)
{
	CHECK(ok(""));
	CHECK(ok("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet console=ttyS0,115200n8 imager\n"));
	CHECK_EQ_U(P.unattended, 0);
	CHECK_EQ_U(P.repo.kind, LIVE_REPO_NONE);
	CHECK_EQ_U(P.run_argc, 0);
	CHECK_EQ_U(P.post, LIVE_POWEROFF);
	CHECK_EQ_U(P.fail, LIVE_SHELL);
	CHECK_EQ_U(P.ip, LIVE_IP_DHCP);
	CHECK_EQ_U(P.server_port, 0);
	CHECK_STR(P.pre, "");
	/* A repository alone is the menu: a person picks the job. */
	CHECK(ok("quiet imager.repo=dev:LABEL=IMAGES splash"));
	CHECK_EQ_U(P.unattended, 0);
	CHECK(ok("imager.run=info"));
	CHECK_EQ_U(P.unattended, 1);
	CHECK(ok("imager.server=v2v.lab"));
	CHECK_EQ_U(P.unattended, 1);
}

/* The kernel keeps double quotes in /proc/cmdline: they are removed here;
 * single quotes group the words of imager.run. */
static void test_quoting(void)
{
	CHECK(ok("quiet imager.run=\"save vda /images/web 01\" root=/dev/ram0"));
	CHECK_EQ_U(P.run_argc, 4);
	CHECK_STR(P.run_argv[0], "save");
	CHECK_STR(P.run_argv[1], "vda");
	CHECK_STR(P.run_argv[2], "/images/web");
	CHECK_STR(P.run_argv[3], "01");
	CHECK_EQ_U(P.unattended, 1);

	CHECK(ok("imager.run=\"save vda '/images/my dir'\""));
	CHECK_EQ_U(P.run_argc, 3);
	CHECK_STR(P.run_argv[2], "/images/my dir");

	/* A leading "imager" is the program's name, not an argument. */
	CHECK(ok("imager.run=\"imager restore /images/x vda\""));
	CHECK_EQ_U(P.run_argc, 3);
	CHECK_STR(P.run_argv[0], "restore");
	CHECK_STR(P.run_argv[2], "vda");

	/* A double quote may open in the middle of a word, as the kernel allows. */
	CHECK(ok("imager.pre=\"echo hi\" imager.post=sh\" /images/done.sh\""));
	CHECK_STR(P.pre, "echo hi");
	CHECK_STR(P.post_cmd, "sh /images/done.sh");

	CHECK(bad("imager.run=\"save vda /images/x", "double quote"));
	CHECK(bad("imager.run=\"save vda /images/x", "imager.run"));
	CHECK(bad("imager.run=\"save vda '/images/x\"", "single quote"));
	CHECK(bad("imager.run=", "no command"));
	CHECK(bad("imager.run=\"\"", "no command"));
	CHECK(bad("imager.run=\"  \"", "no command"));
	CHECK(bad("imager.run=imager", "no command"));
}

static void test_repo_dev(void)
{
	CHECK(ok("imager.repo=dev:/dev/sdb1"));
	CHECK_EQ_U(P.repo.kind, LIVE_REPO_DEV);
	CHECK_STR(P.repo.dev, "/dev/sdb1");
	CHECK(ok("imager.repo=dev:UUID=2f1c-9a7e"));
	CHECK_STR(P.repo.dev, "UUID=2f1c-9a7e");
	CHECK(ok("imager.repo=dev:LABEL=IMAGES"));
	CHECK_EQ_U(P.repo.kind, LIVE_REPO_DEV);
	CHECK_STR(P.repo.dev, "LABEL=IMAGES");

	CHECK(bad("imager.repo=dev:/etc/passwd", "imager.repo"));
	CHECK(bad("imager.repo=dev:/dev/../x", "imager.repo"));
	CHECK(bad("imager.repo=dev:/dev/", "imager.repo"));
	CHECK(bad("imager.repo=dev:sdb1", "imager.repo"));
	CHECK(bad("imager.repo=dev:UUID=", "needs a value"));
	CHECK(bad("imager.repo=dev:LABEL=", "needs a value"));
	CHECK(bad("imager.repo=ftp://x", "not a repository"));
	CHECK(bad("imager.repo=", "imager.repo"));
}

static void test_repo_nfs(void)
{
	CHECK(ok("imager.repo=nfs://nas.lab/export/images"));
	CHECK_EQ_U(P.repo.kind, LIVE_REPO_NFS);
	CHECK_STR(P.repo.host, "nas.lab");
	CHECK_STR(P.repo.path, "/export/images");
	CHECK(ok("imager.repo=nfs://10.0.0.2/srv"));
	CHECK_STR(P.repo.host, "10.0.0.2");
	CHECK_STR(P.repo.path, "/srv");
	CHECK_EQ_U(P.repo.port, 0);
	CHECK(ok("imager.repo=nfs://10.0.0.2:12049/srv"));
	CHECK_STR(P.repo.host, "10.0.0.2");
	CHECK_EQ_U(P.repo.port, 12049);

	CHECK(bad("imager.repo=nfs://nas.lab", "needs a path"));
	CHECK(bad("imager.repo=nfs://root@nas.lab/srv", "no user"));
	CHECK(bad("imager.repo=nfs://nas.lab:0/srv", "bad port"));
	CHECK(bad("imager.repo=nfs://nas.lab/", "needs a path"));
	CHECK(bad("imager.repo=nfs:///export", "bad host"));
	CHECK(bad("imager.repo=nfs://-nas/export", "bad host"));
	CHECK(bad("imager.repo=nfs://n;as/export", "bad host"));
}

static void test_repo_ssh(void)
{
	CHECK(ok("imager.repo=ssh://backup@store.lab:2222/srv/images"));
	CHECK_EQ_U(P.repo.kind, LIVE_REPO_SSH);
	CHECK_STR(P.repo.user, "backup");
	CHECK_STR(P.repo.host, "store.lab");
	CHECK_EQ_U(P.repo.port, 2222);
	CHECK_STR(P.repo.path, "/srv/images");

	/* root and port 22 unless given. */
	CHECK(ok("imager.repo=ssh://store.lab/srv"));
	CHECK_STR(P.repo.user, "root");
	CHECK_EQ_U(P.repo.port, 22);
	CHECK_STR(P.repo.path, "/srv");

	/* An IPv6 address in brackets: its colons are not the port's. */
	CHECK(ok("imager.repo=ssh://root@[::1]:2200/srv"));
	CHECK_STR(P.repo.host, "[::1]");
	CHECK_EQ_U(P.repo.port, 2200);
	CHECK(ok("imager.repo=ssh://[fe80::1]/srv"));
	CHECK_STR(P.repo.host, "[fe80::1]");
	CHECK_EQ_U(P.repo.port, 22);

	CHECK(bad("imager.repo=ssh://store.lab", "needs a path"));
	CHECK(bad("imager.repo=ssh://root@store.lab:2222", "needs a path"));
	CHECK(bad("imager.repo=ssh://store.lab:0/srv", "bad port"));
	CHECK(bad("imager.repo=ssh://store.lab:70000/srv", "bad port"));
	CHECK(bad("imager.repo=ssh://store.lab:65536/srv", "bad port"));
	CHECK(bad("imager.repo=ssh://store.lab:abc/srv", "bad port"));
	CHECK(bad("imager.repo=ssh://store.lab:/srv", "bad port"));
	CHECK(bad("imager.repo=ssh://store.lab:222222/srv", "bad port"));
	CHECK(bad("imager.repo=ssh://@store.lab/srv", "bad user"));
	CHECK(bad("imager.repo=ssh://ro;ot@store.lab/srv", "bad user"));
	CHECK(bad("imager.repo=ssh://root@/srv", "bad host"));
	CHECK(bad("imager.repo=ssh://[]/srv", "bad host"));
}

static void test_repo_smb(void)
{
	CHECK(ok("imager.repo=smb://alice@fs.lab/share/sub/dir"));
	CHECK_EQ_U(P.repo.kind, LIVE_REPO_SMB);
	CHECK_STR(P.repo.user, "alice");
	CHECK_STR(P.repo.host, "fs.lab");
	CHECK_STR(P.repo.share, "share");
	CHECK_STR(P.repo.path, "/sub/dir");
	CHECK_EQ_U(P.repo.port, 0);

	/* No user: a guest mount; no path: the share's root. */
	CHECK(ok("imager.repo=smb://fs.lab/images"));
	CHECK_STR(P.repo.user, "");
	CHECK_STR(P.repo.share, "images");
	CHECK_STR(P.repo.path, "/");

	CHECK(ok("imager.repo=smb://fs.lab:4450/share"));
	CHECK_EQ_U(P.repo.port, 4450);
	CHECK(bad("imager.repo=smb://fs.lab:x/share", "bad port"));
	CHECK(bad("imager.repo=smb://fs.lab", "needs a share"));
	CHECK(bad("imager.repo=smb://fs.lab/", "needs a share"));
	CHECK(bad("imager.repo=smb://fs.lab//sub", "needs a share"));
	CHECK(bad("imager.repo=smb://fs.lab/sh;are", "bad share"));
}

/* The last imager.repo wins whole: init mounts smb as alice instead of as a
 * guest if the user of an earlier ssh:// repository is left behind. */
static void test_repo_replaced(void)
{
	CHECK(ok("imager.repo=ssh://alice@h1:2222/p imager.repo=smb://srv/share"));
	CHECK_EQ_U(P.repo.kind, LIVE_REPO_SMB);
	CHECK_STR(P.repo.user, "");
	CHECK_EQ_U(P.repo.port, 0);
	CHECK_STR(P.repo.path, "/");
	CHECK(ok("imager.repo=nfs://nas/export imager.repo=dev:/dev/sdb1"));
	CHECK_STR(P.repo.host, "");
	CHECK_STR(P.repo.path, "");
}

static void test_actions(void)
{
	CHECK(ok("imager.post=reboot imager.fail=poweroff"));
	CHECK_EQ_U(P.post, LIVE_REBOOT);
	CHECK_EQ_U(P.fail, LIVE_POWEROFF);
	CHECK(ok("imager.post=shell imager.fail=reboot"));
	CHECK_EQ_U(P.post, LIVE_SHELL);
	CHECK_EQ_U(P.fail, LIVE_REBOOT);
	CHECK(ok("imager.post=poweroff imager.fail=shell"));
	CHECK_EQ_U(P.post, LIVE_POWEROFF);
	CHECK_EQ_U(P.fail, LIVE_SHELL);
	/* Any other post= is a command, kept as written. */
	CHECK(ok("imager.post=\"sh /images/done.sh; echo ok\""));
	CHECK_EQ_U(P.post, LIVE_COMMAND);
	CHECK_STR(P.post_cmd, "sh /images/done.sh; echo ok");

	CHECK(bad("imager.post=", "imager.post"));
	/* fail= runs when something already went wrong: no commands there. */
	CHECK(bad("imager.fail=command", "imager.fail"));
	CHECK(bad("imager.fail=\"sh /images/x\"", "imager.fail"));
	CHECK(bad("imager.fail=", "imager.fail"));
}

static void test_server_key(void)
{
	CHECK(ok("imager.server=v2v@10.0.0.5:2222"));
	CHECK_STR(P.server_user, "v2v");
	CHECK_STR(P.server_host, "10.0.0.5");
	CHECK_EQ_U(P.server_port, 2222);
	CHECK_EQ_U(P.unattended, 1);
	CHECK(ok("imager.server=v2v.lab"));
	CHECK_STR(P.server_user, "root");
	CHECK_EQ_U(P.server_port, 22);

	CHECK(ok("imager.server=v2v.lab imager.key=dev:/dev/sdb1:/keys/id"));
	CHECK_STR(P.key_dev, "/dev/sdb1");
	CHECK_STR(P.key_path, "/keys/id");
	CHECK(ok("imager.repo=ssh://store/srv imager.key=dev:LABEL=KEYS:/id_ed25519 imager.run=info"));
	CHECK_STR(P.key_dev, "LABEL=KEYS");
	CHECK_STR(P.key_path, "/id_ed25519");

	/* A key is only for ssh: without a server or an ssh:// repository it
	 * is a mistake, not something to ignore. */
	CHECK(bad("imager.key=dev:/dev/sdb1:/keys/id", "imager.key"));
	CHECK(bad("imager.repo=nfs://nas/x imager.key=dev:/dev/sdb1:/keys/id", "imager.key"));
	CHECK(ok("imager.repo=smb://nas/images imager.key=dev:LABEL=KEYS:/smb.cred imager.run=info"));
	CHECK(bad("imager.server=h imager.key=/dev/sdb1:/keys/id", "imager.key"));
	CHECK(bad("imager.server=h imager.key=dev:/dev/sdb1", "imager.key"));
	CHECK(bad("imager.server=h imager.key=dev::/keys/id", "imager.key"));
	CHECK(bad("imager.server=h imager.key=dev:", "dev:DEVICE:/PATH"));
	/* "dev:" alone once read past its NUL, into what the word buffer held
	 * before (here ":/keys/id"): the message must still be the format's. */
	CHECK(bad("imager.server=h imager.key=dev:/dev/sdb1:/keys/id imager.key=dev:", "dev:DEVICE:/PATH"));

	CHECK(bad("imager.run=\"save vda /images/x\" imager.server=h", "imager.run and imager.server"));
	CHECK(bad("imager.server=h:0", "bad port"));
	CHECK(bad("imager.server=h:abc", "bad port"));
	CHECK(bad("imager.server=", "imager.server"));
	CHECK(bad("imager.server=a\"|\"b@h", "imager.server"));
}

static void test_names(void)
{
	CHECK(ok("imager.name=web01.lab_2+old imager.disks=sda,sdb imager.pool=default "
		 "imager.connect=qemu+ssh://root@kvm/system"));
	CHECK_STR(P.name, "web01.lab_2+old");
	CHECK_STR(P.disks, "sda,sdb");
	CHECK_STR(P.pool, "default");
	CHECK_STR(P.connect, "qemu+ssh://root@kvm/system");
	CHECK(ok("imager.disks=nvme0n1"));
	CHECK_STR(P.disks, "nvme0n1");

	CHECK(bad("imager.name=-web", "imager.name"));
	CHECK(bad("imager.name=.web", "imager.name"));
	CHECK(bad("imager.name=\"web 01\"", "imager.name"));
	CHECK(bad("imager.name=../web", "imager.name"));
	CHECK(bad("imager.name=", "imager.name"));
	CHECK(bad("imager.disks=sda,,sdb", "imager.disks"));
	CHECK(bad("imager.disks=sda;rm", "imager.disks"));
	CHECK(bad("imager.disks=,sda", "imager.disks"));
	CHECK(bad("imager.disks=sda,", "imager.disks"));
	CHECK(bad("imager.disks=", "imager.disks"));
	CHECK(bad("imager.pool=a/b", "imager.pool"));
	CHECK(bad("imager.pool=", "imager.pool"));
	CHECK(bad("imager.connect=", "imager.connect"));

	/* The new VM's size and the console's keyboard (the menu prints them
	 * for the next machine). */
	CHECK(ok("imager.memory=4G imager.vcpus=2 imager.keymap=de"));
	CHECK_STR(P.memory, "4G");
	CHECK(P.vcpus == 2);
	CHECK_STR(P.keymap, "de");
	CHECK(ok("imager.memory=2048M imager.keymap=fr-latin9"));
	CHECK_STR(P.memory, "2048M");
	CHECK(bad("imager.memory=4", "imager.memory"));
	CHECK(bad("imager.memory=G", "imager.memory"));
	CHECK(bad("imager.memory=04G", "imager.memory"));
	CHECK(bad("imager.memory=4T", "imager.memory"));
	CHECK(bad("imager.memory=4G;x", "imager.memory"));
	CHECK(bad("imager.vcpus=0", "imager.vcpus"));
	CHECK(bad("imager.vcpus=x", "imager.vcpus"));
	CHECK(bad("imager.vcpus=99999", "imager.vcpus"));
	CHECK(bad("imager.keymap=../de", "imager.keymap"));
	CHECK(bad("imager.keymap=", "imager.keymap"));

	/* A typo stops the medium with the reason instead of being ignored. */
	CHECK(bad("imager.foo=1", "unknown parameter"));
	CHECK(bad("imager.foo=1", "imager.foo"));
	CHECK(bad("imager.repos=dev:/dev/sdb1", "unknown parameter"));
	CHECK(bad("imager.run", "needs a value"));
	CHECK(bad("imager.name", "imager.name"));
}

static void test_ip(void)
{
	CHECK(ok("ip=dhcp"));
	CHECK_EQ_U(P.ip, LIVE_IP_DHCP);
	CHECK(ok("ip=off"));
	CHECK_EQ_U(P.ip, LIVE_IP_OFF);
	CHECK(ok("ip=none"));
	CHECK_EQ_U(P.ip, LIVE_IP_OFF);

	CHECK(ok("ip=192.168.1.50::192.168.1.1:255.255.255.0:web01:eth0:off:192.168.1.2:192.168.1.3"));
	CHECK_EQ_U(P.ip, LIVE_IP_STATIC);
	CHECK_STR(P.ip_addr, "192.168.1.50");
	CHECK_STR(P.ip_gw, "192.168.1.1");
	CHECK_STR(P.ip_mask, "255.255.255.0");
	CHECK_STR(P.ip_host, "web01");
	CHECK_STR(P.ip_dev, "eth0");
	CHECK_STR(P.ip_dns[0], "192.168.1.2");
	CHECK_STR(P.ip_dns[1], "192.168.1.3");
	/* The gateway and the rest may be left out. */
	CHECK(ok("ip=10.0.0.9:::255.0.0.0"));
	CHECK_EQ_U(P.ip, LIVE_IP_STATIC);
	CHECK_STR(P.ip_gw, "");
	CHECK_STR(P.ip_dev, "");
	/* The kernel's tenth field (an NTP server) is valid there: checked,
	 * not used. */
	CHECK(ok("ip=10.0.0.9:::255.0.0.0:h:eth0:off:10.0.0.2:10.0.0.3:10.0.0.4"));
	CHECK_STR(P.ip_dns[1], "10.0.0.3");
	CHECK(bad("ip=10.0.0.9:::255.0.0.0:h:eth0:off:10.0.0.2:10.0.0.3:ntp", "NTP"));
	CHECK(bad("ip=10.0.0.9:::255.0.0.0:h:eth0:off:1.1.1.1:1.1.1.2:1.1.1.3:x", "more than"));

	/* No address: DHCP, with a host name and one NIC. */
	CHECK(ok("ip=::::host:eth1:dhcp"));
	CHECK_EQ_U(P.ip, LIVE_IP_DHCP);
	CHECK_STR(P.ip_host, "host");
	CHECK_STR(P.ip_dev, "eth1");
	CHECK_STR(P.ip_addr, "");
	/* The last ip= wins whole: init would DHCP on eth1 only if its
	 * device were left behind. */
	CHECK(ok("ip=::::host:eth1:dhcp ip=dhcp"));
	CHECK_STR(P.ip_dev, "");
	CHECK_STR(P.ip_host, "");
	CHECK(ok("ip=10.0.0.9:::255.0.0.0:h:eth0 ip=off"));
	CHECK_EQ_U(P.ip, LIVE_IP_OFF);
	CHECK_STR(P.ip_addr, "");

	CHECK(bad("ip=192.168.1.50", "netmask"));
	CHECK(bad("ip=192.168.1.50::192.168.1.1::web01:eth0:off", "netmask"));
	CHECK(bad("ip=192.168.1.50:::255.255.255.999", "netmask"));
	CHECK(bad("ip=192.168.1.500:::255.255.255.0", "not an IPv4 address"));
	CHECK(bad("ip=web01:::255.255.255.0", "not an IPv4 address"));
	CHECK(bad("ip=fe80::1", "not an IPv4 address"));
	CHECK(bad("ip=10.0.0.9::10.0.0:255.0.0.0", "gateway"));
	CHECK(bad("ip=10.0.0.9:::255.0.0.0:h:eth0:off:8.8.8", "DNS"));
	CHECK(bad("ip=::::host:eth;0:dhcp", "device"));
	CHECK(bad("ip=::::ho_st:eth0:dhcp", "host name"));
	/* AUTOCONF is a whole word: "d" or "o" is a typo, not dhcp or on. */
	CHECK(bad("ip=::::host:eth1:d", "autoconf"));
	CHECK(bad("ip=::::host:eth1:o", "autoconf"));
	CHECK(bad("ip=::::host:eth1:off", "autoconf"));
}

/* Control characters anywhere in a value are refused, naming the
 * parameter; a message quoting hostile text stays one printable line. */
static void test_control_characters(void)
{
	static const struct {
		const char *line, *what;
	} cases[] = {
		{ "imager.run=\"save\x01 vda\"", "imager.run" },
		{ "imager.run=\"save vda\x7f\"", "imager.run" },
		{ "imager.pre=\"echo\thi\"", "imager.pre" },
		{ "imager.pre=\"echo\x1b[2J\"", "imager.pre" },
		{ "imager.post=\"echo\rdone\"", "imager.post" },
		{ "imager.connect=qemu:///system\x01", "imager.connect" },
		{ "imager.repo=dev:/dev/sd\x01" "b", "imager.repo" },
		{ "imager.repo=dev:LABEL=IM\x7f", "imager.repo" },
		{ "imager.repo=nfs://nas/export\x02", "imager.repo" },
		{ "imager.repo=ssh://store/srv\x1b", "imager.repo" },
		{ "imager.repo=smb://fs/share/d\x01r", "imager.repo" },
		{ "imager.server=h imager.key=dev:/dev/sdb1:/k\x01y", "imager.key" },
		{ "imager.name=web\x01", "imager.name" },
		{ "imager.disks=sda\x7f", "imager.disks" },
		{ "ip=10.0.0.9\x01:::255.0.0.0", "ip=" },
		/* The name of the parameter itself. */
		{ "imager.fo\ro=1", "unknown parameter" },
		{ "imager.ru\x1b[31mn", "needs a value" },
		{ "imager.repo=ftp://\x1b]0;owned\x07", "not a repository" },
		{ "imager.fail=\x1b[2J", "imager.fail" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		CHECK(bad(cases[i].line, cases[i].what));
}

/* Lengths: every limit is an error with a message, never an overflow (ASan
 * watches the san build). */
static void test_lengths(void)
{
	char line[256], *s;

	/* One 10000-character word: more than the parser's word buffer. */
	s = repeat("imager.name=", 'a', 10000, "");
	CHECK(bad(s, "imager.name"));
	CHECK(bad(s, "longer than"));
	free(s);
	s = repeat("quiet imager.run=\"save vda /images/", 'x', 10000, "\"");
	CHECK(bad(s, "imager.run"));
	free(s);

	/* Longer than the field, within the word buffer. */
	s = repeat("imager.name=", 'n', 300, "");
	CHECK(bad(s, "imager.name: too long"));
	free(s);
	s = repeat("imager.name=", 'n', 255, "");
	CHECK(ok(s));
	CHECK_EQ_U(strlen(P.name), 255);
	free(s);
	s = repeat("imager.pre=", 'p', LIVE_STR, "");
	CHECK(bad(s, "imager.pre: too long"));
	free(s);
	s = repeat("imager.pre=", 'p', LIVE_STR - 1, "");
	CHECK(ok(s));
	free(s);
	s = repeat("imager.repo=ssh://", 'h', 300, "/srv");
	CHECK(bad(s, "imager.repo"));
	free(s);
	s = repeat("ip=::::", 'h', 300, ":eth0:dhcp");
	CHECK(bad(s, "ip="));
	free(s);
	s = repeat("ip=::::h:", 'e', 100, ":dhcp");
	CHECK(bad(s, "ip="));
	free(s);
	s = repeat("imager.run=\"save vda ", 'w', LIVE_STR, "\"");
	CHECK(bad(s, "too long"));
	free(s);
	s = repeat("imager.run=\"save vda ", 'w', LIVE_STR - 1, "\"");
	CHECK(ok(s));
	CHECK_EQ_U(strlen(P.run_argv[2]), LIVE_STR - 1);
	free(s);

	/* 64 words fit; 65 do not. */
	strcpy(line, "imager.run=\"w");
	for (int i = 1; i < LIVE_MAX_WORDS; i++)
		strcat(line, " w");
	strcat(line, "\"");
	CHECK(ok(line));
	CHECK_EQ_U(P.run_argc, LIVE_MAX_WORDS);
	strcpy(line + strlen(line) - 1, " w\"");
	CHECK(bad(line, "more than 64 words"));

	/* Many parameters, each fine: no limit on their number. */
	s = malloc(6 * 5000 + 64);
	if (!s)
		abort();
	s[0] = '\0';
	for (int i = 0; i < 5000; i++)
		strcat(s, "quiet ");
	strcat(s, "imager.run=info");
	CHECK(ok(s));
	CHECK_EQ_U(P.run_argc, 1);
	free(s);
}

static void test_split_words(void)
{
	char err[256];

	CHECK_EQ_U(live_split_words("a 'b c'  d\t e", W, LIVE_MAX_WORDS, err, sizeof(err)), 4);
	CHECK_STR(W[0], "a");
	CHECK_STR(W[1], "b c");
	CHECK_STR(W[2], "d");
	CHECK_STR(W[3], "e");
	/* Quotes join with what is beside them; '' is an empty word. */
	CHECK_EQ_U(live_split_words("x'y z'w ''", W, LIVE_MAX_WORDS, err, sizeof(err)), 2);
	CHECK_STR(W[0], "xy zw");
	CHECK_STR(W[1], "");
	/* Nothing but what the shell would see as text. */
	CHECK_EQ_U(live_split_words("$(id) `id` ; * \"x\"", W, LIVE_MAX_WORDS, err, sizeof(err)), 5);
	CHECK_STR(W[0], "$(id)");
	CHECK_STR(W[1], "`id`");
	CHECK_STR(W[2], ";");
	CHECK_STR(W[3], "*");
	CHECK_STR(W[4], "\"x\"");
	CHECK_EQ_U(live_split_words("", W, LIVE_MAX_WORDS, err, sizeof(err)), 0);
	CHECK_EQ_U(live_split_words("  \t ", W, LIVE_MAX_WORDS, err, sizeof(err)), 0);

	CHECK(live_split_words("a b c", W, 2, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "more than 2 words") != NULL);
	CHECK(live_split_words("a 'b c", W, LIVE_MAX_WORDS, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "not closed") != NULL);
	CHECK(live_split_words("a\x01", W, LIVE_MAX_WORDS, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "control character") != NULL);
}

static void test_shell_quote(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "it's", "'it'\\''s'" },
		{ "", "''" },
		{ "plain", "'plain'" },
		{ "''", "''\\'''\\'''" },
		{ "$(touch pwned) `id`; rm * \"x\" \\n", "'$(touch pwned) `id`; rm * \"x\" \\n'" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char *got = quoted(cases[i].in);
		CHECK_STR(got, cases[i].out);
		free(got);
	}
}

/* The whole output for one line: every value single-quoted, LIVE_RUN
 * quoted twice (for `eval "set -- $LIVE_RUN"`), the quote in imager.pre
 * closed and escaped. */
static void test_print_shell(void)
{
	char *out;

	CHECK(ok("imager.repo=ssh://backup@store:2222/srv/images "
		 "imager.run=\"save vda '/images/my dir'\" imager.pre=\"echo 'hi' $(id)\" "
		 "imager.post=reboot "
		 "imager.key=dev:LABEL=KEYS:/id imager.name=web01 "
		 "ip=10.0.0.9::10.0.0.1:255.255.255.0:web01:eth0:off:10.0.0.2:10.0.0.3"));
	out = shell_output();
	CHECK_STR(out, "LIVE_MODE='unattended'\n"
		       "LIVE_REPO_KIND='ssh'\n"
		       "LIVE_REPO_DEV=''\n"
		       "LIVE_REPO_USER='backup'\n"
		       "LIVE_REPO_HOST='store'\n"
		       "LIVE_REPO_PORT='2222'\n"
		       "LIVE_REPO_SHARE=''\n"
		       "LIVE_REPO_PATH='/srv/images'\n"
		       "LIVE_RUN=''\\''save'\\'' '\\''vda'\\'' '\\''/images/my dir'\\'''\n"
		       "LIVE_RUN_TEXT='save vda /images/my dir'\n"
		       "LIVE_PRE='echo '\\''hi'\\'' $(id)'\n"
		       "LIVE_POST='reboot'\n"
		       "LIVE_POST_CMD=''\n"
		       "LIVE_FAIL='shell'\n"
		       "LIVE_SERVER_USER=''\n"
		       "LIVE_SERVER_HOST=''\n"
		       "LIVE_SERVER_PORT=''\n"
		       "LIVE_KEY_DEV='LABEL=KEYS'\n"
		       "LIVE_KEY_PATH='/id'\n"
		       "LIVE_NAME='web01'\n"
		       "LIVE_DISKS=''\n"
		       "LIVE_CONNECT=''\n"
		       "LIVE_POOL=''\n"
		       "LIVE_IP='static'\n"
		       "LIVE_IP_ADDR='10.0.0.9'\n"
		       "LIVE_IP_GW='10.0.0.1'\n"
		       "LIVE_IP_MASK='255.255.255.0'\n"
		       "LIVE_IP_HOST='web01'\n"
		       "LIVE_IP_DEV='eth0'\n"
		       "LIVE_IP_DNS='10.0.0.2 10.0.0.3'\n"
		       "LIVE_MEMORY=''\n"
		       "LIVE_VCPUS=''\n"
		       "LIVE_KEYMAP=''\n");
	free(out);

	/* The menu, nothing given: the ports are empty, not 0. */
	CHECK(ok("quiet"));
	out = shell_output();
	CHECK(out && strstr(out, "LIVE_MODE='menu'\nLIVE_REPO_KIND='none'\n") == out);
	CHECK(out && strstr(out, "\nLIVE_REPO_PORT=''\n"));
	CHECK(out && strstr(out, "\nLIVE_SERVER_PORT=''\n"));
	CHECK(out && strstr(out, "\nLIVE_RUN=''\nLIVE_RUN_TEXT=''\n"));
	CHECK(out && strstr(out, "\nLIVE_POST='poweroff'\n"));
	CHECK(out && strstr(out, "\nLIVE_IP='dhcp'\n"));
	free(out);

	/* A command for post=, and a server. */
	CHECK(ok("imager.server=v2v.lab:2022 imager.post=\"echo it's done\""));
	out = shell_output();
	CHECK(out && strstr(out, "\nLIVE_POST='command'\nLIVE_POST_CMD='echo it'\\''s done'\n"));
	CHECK(out && strstr(out, "\nLIVE_SERVER_USER='root'\nLIVE_SERVER_HOST='v2v.lab'\n"
				 "LIVE_SERVER_PORT='2022'\n"));
	free(out);
}

UNIT_MAIN(UNIT(test_defaults), UNIT(test_quoting), UNIT(test_repo_dev), UNIT(test_repo_nfs),
	  UNIT(test_repo_ssh), UNIT(test_repo_smb), UNIT(test_repo_replaced), UNIT(test_actions),
	  UNIT(test_server_key), UNIT(test_names), UNIT(test_ip), UNIT(test_control_characters),
	  UNIT(test_lengths), UNIT(test_split_words), UNIT(test_shell_quote),
	  UNIT(test_print_shell))
