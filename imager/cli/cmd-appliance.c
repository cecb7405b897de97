/* SPDX-License-Identifier: GPL-2.0-or-later */
/* imager appliance: can libguestfs start its appliance here, with KVM or TCG? */
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "imager/guest.h"

static json_object *str_or_null(const char *s)
{
	return s && *s ? json_object_new_string(s) : NULL;
}

static void print_report_json(const struct guest_env *e, const struct guest_accel_choice *a,
			      const struct guest_quick *q, bool launched, double seconds,
			      const struct im_err *launch_err)
{
	json_object *o = json_object_new_object(), *ac = json_object_new_object();
	json_object *qk = json_object_new_object();

	json_object_object_add(o, "ok", json_object_new_boolean(!e->need && !launch_err));
	json_object_object_add(o, "appliance", str_or_null(e->path));
	json_object_object_add(o, "fixed", json_object_new_boolean(e->fixed));
	json_object_object_add(o, "supermin", str_or_null(e->supermin));
	json_object_object_add(o, "kernel", str_or_null(e->kernel));
	json_object_object_add(o, "modules", str_or_null(e->modules));
	json_object_object_add(o, "cachedir", str_or_null(e->cachedir));
	json_object_object_add(o, "cached", json_object_new_boolean(e->cached));
	json_object_object_add(o, "cache_free", json_object_new_uint64(e->cache_free));
	json_object_object_add(o, "tmpdir", str_or_null(e->tmpdir));
	json_object_object_add(o, "qemu", str_or_null(e->qemu));
	json_object_object_add(ac, "accel", json_object_new_string(guest_accel_name(a->accel)));
	json_object_object_add(ac, "why", json_object_new_string(guest_accel_why_name(a->why)));
	json_object_object_add(ac, "probe_seconds", json_object_new_double(a->probe_seconds));
	json_object_object_add(o, "accel", ac);
	json_object_object_add(qk, "on", json_object_new_boolean(q->on));
	json_object_object_add(qk, "vmlinux", q->on ? str_or_null(q->vmlinux) : NULL);
	json_object_object_add(qk, "cachedir", q->on ? str_or_null(q->cachedir) : NULL);
	json_object_object_add(qk, "modules", q->on ? str_or_null(q->modules) : NULL);
	json_object_object_add(qk, "version", q->on ? str_or_null(q->version) : NULL);
	json_object_object_add(qk, "why", q->on ? NULL : str_or_null(q->why));
	json_object_object_add(o, "quick_kernel", qk);
	if (e->need) {
		json_object *p = json_object_new_object();
		json_object_object_add(p, "need", json_object_new_string(guest_env_need_name(e->need)));
		json_object_object_add(p, "problem", json_object_new_string(e->problem));
		json_object_object_add(p, "fix", json_object_new_string(e->fix));
		json_object_object_add(o, "problem", p);
	} else {
		json_object_object_add(o, "problem", NULL);
	}
	if (launched) {
		json_object *l = json_object_new_object();
		json_object_object_add(l, "ok", json_object_new_boolean(!launch_err));
		json_object_object_add(l, "seconds", json_object_new_double(seconds));
		json_object_object_add(l, "error", launch_err ? json_object_new_string(launch_err->msg) : NULL);
		json_object_object_add(o, "launch", l);
	}
	cli_print_json(o);
}

static void print_text(const struct guest_env *e, const struct guest_accel_choice *a,
		       const struct guest_quick *q)
{
	char free_s[32];

	cli_human(e->cache_free, free_s, sizeof(free_s));
	printf("%-10s %s%s\n", "appliance", e->path[0] ? e->path : "-",
	       e->fixed ? " (fixed)" : e->need == GUEST_NEED_APPLIANCE ? "" : " (supermin)");
	if (!e->fixed) {
		printf("%-10s %s\n", "supermin", e->supermin[0] ? e->supermin : "missing");
		printf("%-10s %s%s%s%s\n", "kernel", e->kernel[0] ? e->kernel : "none",
		       e->modules[0] ? " (modules " : "", e->modules, e->modules[0] ? ")" : "");
		printf("%-10s %s: %s, %s free\n", "cache", e->cachedir,
		       e->cached ? "built" : "not built yet", free_s);
	}
	printf("%-10s %s\n", "tmpdir", e->tmpdir);
	printf("%-10s %s\n", "qemu", e->qemu[0] ? e->qemu : "missing");
	printf("%-10s %s (%s", "accel", guest_accel_name(a->accel), guest_accel_why_name(a->why));
	if (a->probe_seconds > 0)
		printf(", %.1f s", a->probe_seconds);
	printf(")\n");
	printf("%-10s %s%s\n", "quick", q->on ? q->vmlinux : "off: ", q->on ? "" : q->why);
}

int cmd_appliance(int argc, char **argv, struct cli *cli)
{
	static const struct option opts[] = {
		{ "launch", no_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct guest_accel_choice accel = { 0 };
	struct im_err err = { 0 }, launch_err = { 0 };
	struct guest_env env;
	struct guest_quick quick = { 0 };
	bool json = false, launch = false, launched = false;
	double seconds = 0;
	int c, rc = IM_EXIT_OK;

	(void)cli;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'j')
			json = true;
		else if (c == 'l')
			launch = true;
		else
			return cli_usage("appliance", "unknown option");
	}
	if (optind < argc)
		return cli_usage("appliance", "unexpected argument '%s'", argv[optind]);
	if (guest_env_check(&env, &err) < 0 || guest_accel_current(&accel, &err) < 0)
		return cli_fail("appliance", &err);
	/* Under TCG the appliance boots the quick kernel: prepared here, and
	 * then the environment says what a launch uses. */
	if (accel.accel == GUEST_ACCEL_TCG && !env.need) {
		char kernel[sizeof(env.kernel)];

		snprintf(kernel, sizeof(kernel), "%s", env.kernel);
		guest_quick_current(&quick);
		if (quick.on && guest_env_check(&env, &err) < 0)
			return cli_fail("appliance", &err);
		/* (kernel: the machine's, that the quick one is unpacked from) */
		if (quick.on)
			snprintf(env.kernel, sizeof(env.kernel), "%s", kernel);
	} else {
		snprintf(quick.why, sizeof(quick.why), "%s",
			 env.need ? "the appliance cannot start here"
				  : "KVM: a kernel unpacks itself in a moment");
	}
	if (env.need)
		rc = IM_EXIT_APPLIANCE;
	else if (launch) {
		launched = true;
		if (guest_launch_test(&seconds, &launch_err) < 0)
			rc = im_err_exit(&launch_err);
	}
	if (json) {
		print_report_json(&env, &accel, &quick, launched, seconds, launched && rc ? &launch_err : NULL);
	} else {
		print_text(&env, &accel, &quick);
		if (launched && !rc)
			printf("%-10s started and shut down in %.1f s\n", "launch", seconds);
	}
	if (env.need)
		cli_error("appliance", "%s. Fix: %s", env.problem, env.fix);
	else if (launched && rc)
		cli_fail("appliance", &launch_err);
	return cli_finish_stdout("appliance", rc);
}
