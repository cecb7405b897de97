/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A minimal unit-test harness: CHECK() records failures with their place;
 * UNIT_MAIN() runs the listed test functions and prints one line per test
 * ("ok NAME" / "not ok NAME") and exits 1 when any failed, else 77 when
 * any part was skipped (unit_skip(): a tool, root or a loop device is
 * missing; the reason is printed), else 0. */
#ifndef IMAGER_UNIT_H
#define IMAGER_UNIT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failures;
static int unit_skips;

/* A part of a test that cannot run here: why ("SKIP: ...") is printed. */
static inline void unit_skip(const char *why)
{
	unit_skips++;
	printf("%s\n", why);
}

#define CHECK(cond) do { if (!(cond)) { unit_failures++; \
	fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_EQ_U(a, b) do { unsigned long long _a = (a), _b = (b); if (_a != _b) { unit_failures++; \
	fprintf(stderr, "  %s:%d: %s == %llu, expected %llu\n", __FILE__, __LINE__, #a, _a, _b); } } while (0)
#define CHECK_STR(a, b) do { const char *_a = (a), *_b = (b); \
	if (!_a || !_b || strcmp(_a, _b)) { unit_failures++; \
	fprintf(stderr, "  %s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, \
		_a ? _a : "(null)", _b ? _b : "(null)"); } } while (0)

/* A deterministic pseudo-random sequence (xorshift64): the next number of
 * the state *s (never 0). */
static inline uint64_t unit_xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

typedef void (*unit_fn)(void);
struct unit_case { const char *name; unit_fn fn; };
#define UNIT(fn) { #fn, fn }

static inline int unit_run(const char *prog, const struct unit_case *cases, size_t n)
{
	int failed = 0;
	for (size_t i = 0; i < n; i++) {
		int before = unit_failures;
		cases[i].fn();
		if (unit_failures != before)
			failed++;
		printf("%s %s: %s\n", unit_failures != before ? "not ok" : "ok", prog, cases[i].name);
	}
	if (!failed && unit_skips)
		printf("%s: %d part(s) skipped (see SKIP above)\n", prog, unit_skips);
	return failed ? 1 : unit_skips ? 77 : 0;
}

#define UNIT_MAIN(...) int main(int argc, char **argv) { \
	static const struct unit_case cases[] = { __VA_ARGS__ }; \
	const char *p = strrchr(argv[0], '/'); (void)argc; \
	return unit_run(p ? p + 1 : argv[0], cases, sizeof(cases) / sizeof(cases[0])); }

#endif
