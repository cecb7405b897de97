/* SPDX-License-Identifier: GPL-2.0-or-later */
/* imager: global options, then the command from the table. */
#include <getopt.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "imager/guest.h"
#include "imager/host.h"

/* Set by SIGINT/SIGTERM, read by the engine between frames.  A second
 * signal ends the process at once (the default action).  Options travel
 * in each job's options (threads, --timeout, --retries...); the process-
 * wide state besides this flag is what the libraries impose, each kept
 * beside its reason: libparted's exception handler (its lock, ptable.c),
 * libvirt's event loop (started once, host.c), and the quick appliance
 * kernel found once per process (guest.c). */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = 1;
	signal(sig, SIG_DFL);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: imager [--sysfs-root DIR] [--dev-root DIR] [-v|-q] COMMAND [ARGS]\n"
		"       imager [-v] --version | --help | COMMAND --help\n\n"
		"Disk imaging and P2V, virtio-aware.  Commands:\n");
	for (size_t i = 0; i < ncommands; i++)
		fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fprintf(out,
		"\nA source is a disk (/dev/sda, vda, nvme0n1...), a partition, a raw or qcow2 file,\n"
		"an NBD URI, an image folder (imager's or Clonezilla's), another hypervisor's disk\n"
		"(VMDK, VHD, VHDX, VDI: read through qemu-nbd) or a VM's description (an OVA, an\n"
		".ovf, a .vmx: PATH for its only disk, PATH/N for one of several).\n"
		"\nExit codes: 0 ok, 1 usage, 2 source unusable, 3 image damaged or unfinished,\n"
		"4 target refused, 5 filesystem needs fsck, 6 I/O error, 7 unsupported, 8 internal,\n"
		"9 interrupted, 10 libguestfs's appliance cannot start here,\n"
		"11 complete but with unreadable sectors (--rescue).\n"
		"See imager(1).\n");
}

/* --version; with -v also the libraries and programs a P2V server needs
 * (the live medium's connection test reads these lines). */
static int print_version(bool verbose)
{
	char v[128];
	FILE *p;

	printf("imager %s\n", IMAGER_VERSION);
	if (verbose) {
		host_lib_version(v, sizeof(v));
		printf("libvirt %s\n", v[0] ? v : "unknown");
		guest_lib_version(v, sizeof(v));
		printf("libguestfs %s\n", v[0] ? v : "unknown");
		/* qemu's first line: "QEMU emulator version 7.2.x (Debian ...)" */
		v[0] = '\0';
		p = popen("qemu-system-x86_64 --version 2>/dev/null", "r");
		if (p) {
			if (!fgets(v, sizeof(v), p))
				v[0] = '\0';
			pclose(p);
		}
		v[strcspn(v, "\n")] = '\0';
		printf("qemu %s\n", !strncmp(v, "QEMU emulator version ", 22) ? v + 22 :
		       "missing (qemu-system-x86_64)");
	}
	return cli_finish_stdout(NULL, IM_EXIT_OK);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sysfs-root", required_argument, NULL, 'S' },
		{ "dev-root", required_argument, NULL, 'D' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli cli = { 0 };
	const struct command *cmd;
	bool version = false;
	int c;

	disk_roots_default(&cli.roots);
	{
		struct sigaction sa = { .sa_handler = on_signal };
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESTART;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		cli.interrupted = &interrupted;
	}
	/* '+': stop at the command name; the rest belongs to the command. */
	while ((c = getopt_long(argc, argv, "+vqhV", opts, NULL)) != -1) {
		switch (c) {
		case 'S': snprintf(cli.roots.sysfs, sizeof(cli.roots.sysfs), "%s", optarg); break;
		case 'D': snprintf(cli.roots.dev, sizeof(cli.roots.dev), "%s", optarg); break;
		case 'v': cli.verbose++; break;
		case 'q': cli.verbose = -1; break;
		case 'V': version = true; break;
		case 'h':
			usage(stdout);
			return cli_finish_stdout(NULL, IM_EXIT_OK);
		default:
			usage(stderr);
			return IM_EXIT_USAGE;
		}
	}
	if (version)
		return print_version(cli.verbose > 0);
	if (optind >= argc) {
		usage(stderr);
		return IM_EXIT_USAGE;
	}
	if (!strcmp(argv[optind], "help")) {
		if (optind + 1 < argc && command_find(argv[optind + 1]))
			return cli_finish_stdout(NULL, cli_help(argv[optind + 1], stdout));
		usage(stdout);
		return cli_finish_stdout(NULL, IM_EXIT_OK);
	}
	cmd = command_find(argv[optind]);
	if (!cmd) {
		fprintf(stderr, "imager: '%s' is not a command; see 'imager --help'\n", argv[optind]);
		return IM_EXIT_USAGE;
	}
	for (int i = optind + 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return cli_finish_stdout(cmd->name, cli_help(cmd->name, stdout));
		else if (!strcmp(argv[i], "--"))
			break;
	if ((cmd->flags & CMD_DEVICES) && cli_check_devices(cmd->name, argc - optind - 1,
							     argv + optind + 1, &cli) != 0)
		return IM_EXIT_SOURCE;
	{
		int first = optind;
		optind = 0;   /* getopt starts afresh for the command's own options */
		return cmd->fn(argc - first, argv + first, &cli);
	}
}
