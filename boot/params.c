/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The live medium's kernel parameters: the contract is in
 * include/imager/live.h.  /proc/cmdline is whatever the boot loader or a
 * PXE script was given, so every value is checked here and nothing is
 * trusted: lengths are bounded, control characters refused, addresses
 * parsed with inet_pton, names limited to the characters they may have. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imager/live.h"

#define WORD_MAX 8192

/* The message quotes parts of the command line: a control character in
 * them (a carriage return, an escape sequence) becomes '?' so that the
 * message stays one printable line on the console. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	for (size_t i = 0; err && i < errlen && err[i]; i++)
		if ((unsigned char)err[i] < 0x20 || err[i] == 0x7f)
			err[i] = '?';
	return -EINVAL;
}

/* Copy src (n bytes) into dst[size]; refuses what does not fit and
 * control characters. */
static int put(char *dst, size_t size, const char *src, size_t n, const char *what, char *err,
	       size_t errlen)
{
	if (n >= size)
		return fail(err, errlen, "%s: too long (at most %zu characters)", what, size - 1);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)src[i] < 0x20 || src[i] == 0x7f)
			return fail(err, errlen, "%s: control character in the value", what);
	memcpy(dst, src, n);
	dst[n] = '\0';
	return 0;
}

static int only(const char *s, size_t n, const char *extra)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      (c && strchr(extra, c))))
			return 0;
	}
	return n > 0;
}

/* A host name, an IPv4 address, or an IPv6 address in brackets. */
static int host_ok(const char *s, size_t n)
{
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']')
		return only(s + 1, n - 2, ":.");
	return only(s, n, ".-_") && s[0] != '-' && s[0] != '.';
}

static int port_parse(const char *s, size_t n, unsigned *port)
{
	unsigned v = 0;
	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -1;
	*port = v;
	return 0;
}

/* [user@]host[:port] of n bytes: the user may be empty (caller's
 * default), the port is left alone when not given. */
static int user_host_port(const char *s, size_t n, char *user, size_t usize, char *host,
			  size_t hsize, unsigned *port, const char *what, char *err, size_t errlen)
{
	const char *at = memchr(s, '@', n), *h = s, *colon;
	size_t hn;
	if (at) {
		if (!only(s, (size_t)(at - s), "._-"))
			return fail(err, errlen, "%s: bad user name", what);
		if (put(user, usize, s, (size_t)(at - s), what, err, errlen))
			return -EINVAL;
		h = at + 1;
	}
	hn = n - (size_t)(h - s);
	colon = NULL;
	for (const char *c = h + hn; c > h; c--)
		if (c[-1] == ':' || c[-1] == ']') {
			if (c[-1] == ':')
				colon = c - 1;
			break;
		}
	if (colon) {
		if (port_parse(colon + 1, (size_t)(h + hn - colon - 1), port))
			return fail(err, errlen, "%s: bad port (1 to 65535)", what);
		hn = (size_t)(colon - h);
	}
	if (!host_ok(h, hn))
		return fail(err, errlen, "%s: bad host name", what);
	return put(host, hsize, h, hn, what, err, errlen);
}

/* A local device as dev: names it: /dev/NAME, UUID=... or LABEL=... */
static int dev_spec_check(const char *spec, size_t n, const char *what, char *err, size_t errlen)
{
	if ((n >= 5 && !strncmp(spec, "UUID=", 5)) || (n >= 6 && !strncmp(spec, "LABEL=", 6))) {
		if (n == 5 + (spec[0] == 'L'))
			return fail(err, errlen, "%s: %.*s needs a value", what, (int)n, spec);
		return 0;
	}
	if (n > 5 && !strncmp(spec, "/dev/", 5) && !memmem(spec, n, "..", 2))
		return 0;
	return fail(err, errlen, "%s: dev: takes /dev/NAME, UUID=... or LABEL=... (with a value)",
		    what);
}

static int parse_repo(const char *v, struct live_repo *r, char *err, size_t errlen)
{
	const char *what = "imager.repo";
	const char *slash;
	/* A later imager.repo replaces an earlier one whole (no user or port
	 * of an ssh:// repository left behind in an smb:// one). */
	memset(r, 0, sizeof(*r));
	if (!strncmp(v, "dev:", 4)) {
		const char *spec = v + 4;
		if (dev_spec_check(spec, strlen(spec), what, err, errlen))
			return -EINVAL;
		r->kind = LIVE_REPO_DEV;
		return put(r->dev, sizeof(r->dev), spec, strlen(spec), what, err, errlen);
	}
	if (!strncmp(v, "nfs://", 6)) {
		char user[8] = "";
		v += 6;
		slash = strchr(v, '/');
		if (!slash || !slash[1])
			return fail(err, errlen, "%s: nfs://HOST[:PORT]/EXPORT/PATH needs a path", what);
		if (memchr(v, '@', (size_t)(slash - v)))
			return fail(err, errlen, "%s: nfs:// takes no user", what);
		r->kind = LIVE_REPO_NFS;
		if (user_host_port(v, (size_t)(slash - v), user, sizeof(user), r->host,
				   sizeof(r->host), &r->port, what, err, errlen))
			return -EINVAL;
		return put(r->path, sizeof(r->path), slash, strlen(slash), what, err, errlen);
	}
	if (!strncmp(v, "ssh://", 6)) {
		v += 6;
		slash = strchr(v, '/');
		if (!slash)
			return fail(err, errlen, "%s: ssh://USER@HOST[:PORT]/PATH needs a path",
				    what);
		r->kind = LIVE_REPO_SSH;
		r->port = 22;
		strcpy(r->user, "root");
		if (user_host_port(v, (size_t)(slash - v), r->user, sizeof(r->user), r->host,
				   sizeof(r->host), &r->port, what, err, errlen))
			return -EINVAL;
		return put(r->path, sizeof(r->path), slash, strlen(slash), what, err, errlen);
	}
	if (!strncmp(v, "smb://", 6)) {
		const char *share, *path;
		v += 6;
		slash = strchr(v, '/');
		if (!slash || !slash[1] || slash[1] == '/')
			return fail(err, errlen, "%s: smb://[USER@]HOST[:PORT]/SHARE[/PATH] needs a share",
				    what);
		r->kind = LIVE_REPO_SMB;
		if (user_host_port(v, (size_t)(slash - v), r->user, sizeof(r->user), r->host,
				   sizeof(r->host), &r->port, what, err, errlen))
			return -EINVAL;
		share = slash + 1;
		path = strchr(share, '/');
		if (!path)
			path = share + strlen(share);
		if (!only(share, (size_t)(path - share), "._-$ "))
			return fail(err, errlen, "%s: bad share name", what);
		if (put(r->share, sizeof(r->share), share, (size_t)(path - share), what, err,
			errlen))
			return -EINVAL;
		if (!*path)
			path = "/";
		return put(r->path, sizeof(r->path), path, strlen(path), what, err, errlen);
	}
	return fail(err, errlen,
		    "%s: '%.40s' is not a repository (dev:, nfs://, ssh:// or smb://)", what, v);
}

int live_split_words(const char *s, char words[][LIVE_STR], int max, char *err, size_t errlen)
{
	int n = 0;
	while (*s) {
		size_t len = 0;
		int quoted = 0, any = 0;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			break;
		if (n == max)
			return fail(err, errlen, "imager.run: more than %d words", max);
		while (*s && (quoted || (*s != ' ' && *s != '\t'))) {
			if (*s == '\'') {
				quoted = !quoted;
				any = 1;
				s++;
				continue;
			}
			if ((unsigned char)*s < 0x20 || *s == 0x7f)
				return fail(err, errlen, "imager.run: control character in the value");
			if (len + 1 >= LIVE_STR)
				return fail(err, errlen, "imager.run: a word is too long");
			words[n][len++] = *s++;
			any = 1;
		}
		if (quoted)
			return fail(err, errlen, "imager.run: a single quote is not closed");
		words[n][len] = '\0';
		if (any)
			n++;
	}
	return n;
}

static int parse_action(const char *v, enum live_action *a, int command_ok)
{
	if (!strcmp(v, "poweroff"))
		*a = LIVE_POWEROFF;
	else if (!strcmp(v, "reboot"))
		*a = LIVE_REBOOT;
	else if (!strcmp(v, "shell"))
		*a = LIVE_SHELL;
	else if (command_ok && *v)
		*a = LIVE_COMMAND;
	else
		return -1;
	return 0;
}

static int ipv4(const char *s, size_t n, char *dst, size_t size)
{
	char tmp[64];
	struct in_addr a;
	if (n == 0 || n >= sizeof(tmp) || n >= size)
		return -1;
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	if (inet_pton(AF_INET, tmp, &a) != 1)
		return -1;
	strcpy(dst, tmp);
	return 0;
}

/* An AUTOCONF field that asks for DHCP (the whole word, not a prefix). */
static int autoconf_dhcp(const char *s, size_t n)
{
	static const char *const names[] = { "dhcp", "on", "any", "both" };
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (n == strlen(names[i]) && !strncmp(s, names[i], n))
			return 1;
	return 0;
}

/* ip= as the kernel's nfsroot.rst defines it (the fields past DEVICE and
 * AUTOCONF: two DNS servers, then an NTP server, checked but not used). */
static int parse_ip(const char *v, struct live_params *p, char *err, size_t errlen)
{
	const char *f[10] = { 0 };
	size_t fl[10] = { 0 };
	char ntp[64];
	int nf = 0;
	/* A later ip= replaces an earlier one whole (no device or address
	 * left behind). */
	p->ip_addr[0] = p->ip_gw[0] = p->ip_mask[0] = p->ip_host[0] = p->ip_dev[0] = '\0';
	p->ip_dns[0][0] = p->ip_dns[1][0] = '\0';
	if (!strcmp(v, "dhcp") || !strcmp(v, "on") || !strcmp(v, "any") || !strcmp(v, "both")) {
		p->ip = LIVE_IP_DHCP;
		return 0;
	}
	if (!strcmp(v, "off") || !strcmp(v, "none")) {
		p->ip = LIVE_IP_OFF;
		return 0;
	}
	for (const char *s = v;; nf++) {
		const char *c = strchr(s, ':');
		if (nf == 10)
			return fail(err, errlen, "ip=: more than 10 fields");
		f[nf] = s;
		fl[nf] = c ? (size_t)(c - s) : strlen(s);
		if (!c) {
			nf++;
			break;
		}
		s = c + 1;
	}
	if (fl[5] && !only(f[5], fl[5], "._-"))
		return fail(err, errlen, "ip=: bad device name");
	if (fl[5] && put(p->ip_dev, sizeof(p->ip_dev), f[5], fl[5], "ip=", err, errlen))
		return -EINVAL;
	if (fl[4] && (!only(f[4], fl[4], ".-") ||
		      put(p->ip_host, sizeof(p->ip_host), f[4], fl[4], "ip=", err, errlen)))
		return fail(err, errlen, "ip=: bad host name");
	if (fl[0] == 0) {
		if (fl[6] && !autoconf_dhcp(f[6], fl[6]))
			return fail(err, errlen, "ip=: no address, and autoconf is not dhcp");
		p->ip = LIVE_IP_DHCP;
		return 0;
	}
	if (ipv4(f[0], fl[0], p->ip_addr, sizeof(p->ip_addr)))
		return fail(err, errlen, "ip=: '%.*s' is not an IPv4 address", (int)fl[0], f[0]);
	if (ipv4(f[3], fl[3], p->ip_mask, sizeof(p->ip_mask)))
		return fail(err, errlen, "ip=: a static address needs a netmask (field 4)");
	if (fl[2] && ipv4(f[2], fl[2], p->ip_gw, sizeof(p->ip_gw)))
		return fail(err, errlen, "ip=: bad gateway");
	for (int i = 0; i < 2; i++)
		if (fl[7 + i] && ipv4(f[7 + i], fl[7 + i], p->ip_dns[i], sizeof(p->ip_dns[i])))
			return fail(err, errlen, "ip=: bad DNS server");
	if (fl[9] && ipv4(f[9], fl[9], ntp, sizeof(ntp)))
		return fail(err, errlen, "ip=: bad NTP server");
	p->ip = LIVE_IP_STATIC;
	return 0;
}

static int parse_one(const char *key, const char *v, struct live_params *p, char *err,
		     size_t errlen)
{
	char what[64];
	snprintf(what, sizeof(what), "imager.%.40s", key);
	if (!strcmp(key, "repo"))
		return parse_repo(v, &p->repo, err, errlen);
	if (!strcmp(key, "run")) {
		int n = live_split_words(v, p->run_argv, LIVE_MAX_WORDS, err, errlen);
		if (n < 0)
			return n;
		if (n > 0 && !strcmp(p->run_argv[0], "imager")) {
			memmove(p->run_argv[0], p->run_argv[1], (size_t)(n - 1) * LIVE_STR);
			n--;
		}
		if (n == 0)
			return fail(err, errlen, "imager.run: no command");
		p->run_argc = n;
		return 0;
	}
	if (!strcmp(key, "pre"))
		return put(p->pre, sizeof(p->pre), v, strlen(v), what, err, errlen);
	if (!strcmp(key, "post")) {
		if (parse_action(v, &p->post, 1))
			return fail(err, errlen, "imager.post: empty (poweroff, reboot, shell or a command)");
		return p->post == LIVE_COMMAND
			       ? put(p->post_cmd, sizeof(p->post_cmd), v, strlen(v), what, err, errlen)
			       : 0;
	}
	if (!strcmp(key, "fail")) {
		if (parse_action(v, &p->fail, 0))
			return fail(err, errlen, "imager.fail: '%.40s' (shell, poweroff or reboot)", v);
		return 0;
	}
	if (!strcmp(key, "server")) {
		strcpy(p->server_user, "root");
		p->server_port = 22;
		return user_host_port(v, strlen(v), p->server_user, sizeof(p->server_user),
				      p->server_host, sizeof(p->server_host), &p->server_port, what,
				      err, errlen);
	}
	if (!strcmp(key, "key")) {
		const char *sep;
		/* v[4]: "dev:" alone must not send strstr past the value's end. */
		if (strncmp(v, "dev:", 4) || !v[4] || !(sep = strstr(v + 5, ":/")))
			return fail(err, errlen, "imager.key: takes dev:DEVICE:/PATH");
		if (dev_spec_check(v + 4, (size_t)(sep - v - 4), what, err, errlen))
			return -EINVAL;
		if (put(p->key_dev, sizeof(p->key_dev), v + 4, (size_t)(sep - v - 4), what, err, errlen))
			return -EINVAL;
		return put(p->key_path, sizeof(p->key_path), sep + 1, strlen(sep + 1), what, err,
			   errlen);
	}
	if (!strcmp(key, "name")) {
		if (!only(v, strlen(v), "._+-") || v[0] == '.' || v[0] == '-')
			return fail(err, errlen, "imager.name: letters, digits and . _ + - only");
		return put(p->name, sizeof(p->name), v, strlen(v), what, err, errlen);
	}
	if (!strcmp(key, "disks")) {
		if (!only(v, strlen(v), ",_-") || v[0] == ',' || strstr(v, ",,") ||
		    v[strlen(v) - 1] == ',')
			return fail(err, errlen, "imager.disks: a comma-separated list of disk names");
		return put(p->disks, sizeof(p->disks), v, strlen(v), what, err, errlen);
	}
	if (!strcmp(key, "connect")) {
		if (!*v)
			return fail(err, errlen, "imager.connect: empty");
		return put(p->connect, sizeof(p->connect), v, strlen(v), what, err, errlen);
	}
	if (!strcmp(key, "pool")) {
		if (!only(v, strlen(v), "._-"))
			return fail(err, errlen, "imager.pool: letters, digits and . _ - only");
		return put(p->pool, sizeof(p->pool), v, strlen(v), what, err, errlen);
	}
	if (!strcmp(key, "memory")) {
		/* imager p2v --memory: a size with a unit (4G, 2048M) */
		size_t n = strlen(v);
		if (n < 2 || n > 12 || strspn(v, "0123456789") != n - 1 ||
		    !strchr("MGmg", v[n - 1]) || v[0] == '0')
			return fail(err, errlen, "imager.memory: a size such as 4G or 2048M");
		return put(p->memory, sizeof(p->memory), v, n, what, err, errlen);
	}
	if (!strcmp(key, "vcpus")) {
		unsigned n;
		if (port_parse(v, strlen(v), &n) || n > 4096)
			return fail(err, errlen, "imager.vcpus: a number from 1 to 4096");
		p->vcpus = n;
		return 0;
	}
	if (!strcmp(key, "keymap")) {
		/* a keyboard layout the medium carries (boot/build.sh KEYMAPS) */
		if (!only(v, strlen(v), "_-") || strlen(v) > 32)
			return fail(err, errlen, "imager.keymap: a layout name such as us, de or fr");
		return put(p->keymap, sizeof(p->keymap), v, strlen(v), what, err, errlen);
	}
	return fail(err, errlen, "imager.%.40s: unknown parameter", key);
}

/* The name of the parameter a word sets (before '=', at most 48
 * characters), for the messages about the word itself. */
static size_t name_len(const char *word)
{
	size_t n = strcspn(word, "=");
	return n > 48 ? 48 : n;
}

int live_parse(const char *cmdline, struct live_params *p, char *err, size_t errlen)
{
	char word[WORD_MAX];
	const char *s = cmdline;
	memset(p, 0, sizeof(*p));
	p->post = LIVE_POWEROFF;
	p->fail = LIVE_SHELL;
	p->ip = LIVE_IP_DHCP;
	if (err && errlen)
		err[0] = '\0';
	while (*s) {
		size_t len = 0;
		int quoted = 0;
		char *eq;
		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		if (!*s)
			break;
		while (*s && (quoted || (*s != ' ' && *s != '\t' && *s != '\n'))) {
			if (*s == '"') {
				quoted = !quoted;
				s++;
				continue;
			}
			if (len + 1 >= sizeof(word)) {
				word[len] = '\0';
				return fail(err, errlen, "%.*s: longer than %d characters",
					    (int)name_len(word), word, WORD_MAX - 1);
			}
			word[len++] = *s++;
		}
		word[len] = '\0';
		if (quoted)
			return fail(err, errlen, "%.*s: a double quote is not closed",
				    (int)name_len(word), word);
		if (!strncmp(word, "ip=", 3)) {
			if (parse_ip(word + 3, p, err, errlen))
				return -EINVAL;
			continue;
		}
		if (strncmp(word, "imager.", 7))
			continue;
		eq = strchr(word, '=');
		if (!eq)
			return fail(err, errlen, "%.48s: needs a value (%.48s=...)", word, word);
		*eq = '\0';
		if (parse_one(word + 7, eq + 1, p, err, errlen))
			return -EINVAL;
	}
	p->unattended = p->run_argc > 0 || p->server_port > 0;
	if (p->run_argc && p->server_port)
		return fail(err, errlen, "imager.run and imager.server: give one of them");
	if (p->key_dev[0] && !p->server_port && p->repo.kind != LIVE_REPO_SSH &&
	    p->repo.kind != LIVE_REPO_SMB)
		return fail(err, errlen,
			    "imager.key: only used with imager.server, an ssh:// or an smb:// repository");
	return 0;
}

void live_shell_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	}
	fputc('\'', f);
}

static void var(FILE *f, const char *name, const char *value)
{
	fprintf(f, "%s=", name);
	live_shell_quote(f, value);
	fputc('\n', f);
}

void live_print_shell(FILE *f, const struct live_params *p)
{
	static const char *const kinds[] = { "none", "dev", "nfs", "ssh", "smb" };
	static const char *const actions[] = { "poweroff", "reboot", "shell", "command" };
	static const char *const ips[] = { "dhcp", "static", "off" };
	char num[16], words[LIVE_MAX_WORDS * (LIVE_STR + 8)], text[LIVE_MAX_WORDS * (LIVE_STR + 1)];
	FILE *w;
	size_t tl = 0;

	var(f, "LIVE_MODE", p->unattended ? "unattended" : "menu");
	var(f, "LIVE_REPO_KIND", kinds[p->repo.kind]);
	var(f, "LIVE_REPO_DEV", p->repo.dev);
	var(f, "LIVE_REPO_USER", p->repo.user);
	var(f, "LIVE_REPO_HOST", p->repo.host);
	snprintf(num, sizeof(num), "%u", p->repo.port);
	var(f, "LIVE_REPO_PORT", p->repo.port ? num : "");
	var(f, "LIVE_REPO_SHARE", p->repo.share);
	var(f, "LIVE_REPO_PATH", p->repo.path);

	/* LIVE_RUN holds the words quoted once more, for `eval "set -- $LIVE_RUN"`. */
	words[0] = text[0] = '\0';
	w = fmemopen(words, sizeof(words), "w");
	for (int i = 0; w && i < p->run_argc; i++) {
		size_t n = strlen(p->run_argv[i]);
		if (i)
			fputc(' ', w);
		live_shell_quote(w, p->run_argv[i]);
		if (tl + n + 2 < sizeof(text)) {
			if (i)
				text[tl++] = ' ';
			memcpy(text + tl, p->run_argv[i], n + 1);
			tl += n;
		}
	}
	if (w)
		fclose(w);
	var(f, "LIVE_RUN", words);
	var(f, "LIVE_RUN_TEXT", text);
	var(f, "LIVE_PRE", p->pre);
	var(f, "LIVE_POST", actions[p->post]);
	var(f, "LIVE_POST_CMD", p->post_cmd);
	var(f, "LIVE_FAIL", actions[p->fail]);
	var(f, "LIVE_SERVER_USER", p->server_user);
	var(f, "LIVE_SERVER_HOST", p->server_host);
	snprintf(num, sizeof(num), "%u", p->server_port);
	var(f, "LIVE_SERVER_PORT", p->server_port ? num : "");
	var(f, "LIVE_KEY_DEV", p->key_dev);
	var(f, "LIVE_KEY_PATH", p->key_path);
	var(f, "LIVE_NAME", p->name);
	var(f, "LIVE_DISKS", p->disks);
	var(f, "LIVE_CONNECT", p->connect);
	var(f, "LIVE_POOL", p->pool);
	var(f, "LIVE_IP", ips[p->ip]);
	var(f, "LIVE_IP_ADDR", p->ip_addr);
	var(f, "LIVE_IP_GW", p->ip_gw);
	var(f, "LIVE_IP_MASK", p->ip_mask);
	var(f, "LIVE_IP_HOST", p->ip_host);
	var(f, "LIVE_IP_DEV", p->ip_dev);
	snprintf(text, sizeof(text), "%s%s%s", p->ip_dns[0], p->ip_dns[1][0] ? " " : "",
		 p->ip_dns[1]);
	var(f, "LIVE_IP_DNS", text);
	var(f, "LIVE_MEMORY", p->memory);
	snprintf(num, sizeof(num), "%u", p->vcpus);
	var(f, "LIVE_VCPUS", p->vcpus ? num : "");
	var(f, "LIVE_KEYMAP", p->keymap);
}
