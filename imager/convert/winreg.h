/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Editing Windows registry hives (local files) with libhivex: keys named by
 * backslash paths from the hive's root ("ControlSet001\Services\viostor"),
 * found without regard to case as Windows does, created as needed.  Every
 * value read is treated as hostile: wrong types and sizes read as absent.
 */
#ifndef IMAGER_WINREG_H
#define IMAGER_WINREG_H

#include <hivex.h>
#include <stddef.h>
#include <stdint.h>

#include "convtext.h"

struct reg_val {
	const char *name;             /* "" is the key's default value */
	hive_type type;               /* REG_SZ, REG_EXPAND_SZ, REG_DWORD, REG_MULTI_SZ, REG_BINARY */
	const char *s;                /* SZ, EXPAND_SZ; MULTI_SZ: strings separated by '\n' */
	uint32_t dw;                  /* DWORD */
	const void *bin;              /* BINARY */
	size_t len;
};

#define RV_SZ(n, v)     { .name = (n), .type = hive_t_REG_SZ, .s = (v) }
#define RV_EXPAND(n, v) { .name = (n), .type = hive_t_REG_EXPAND_SZ, .s = (v) }
#define RV_MULTI(n, v)  { .name = (n), .type = hive_t_REG_MULTI_SZ, .s = (v) }
#define RV_DWORD(n, v)  { .name = (n), .type = hive_t_REG_DWORD, .dw = (v) }
#define RV_BIN(n, b, l) { .name = (n), .type = hive_t_REG_BINARY, .bin = (b), .len = (l) }

/* The key at path (NULL or "" is the root); 0 when it does not exist. */
hive_node_h reg_find(hive_h *h, const char *path);
/* Create the missing keys of path; returns the key, 0 with errno set. */
hive_node_h reg_mkpath(hive_h *h, const char *path);
/* Set the n values of the key at path, creating it; when desc is given
 * it gets "Name=value, ..." for people.  Returns 0 or -errno. */
int reg_set(hive_h *h, const char *path, const struct reg_val *v, size_t n, struct sbuf *desc);
/* A string value (SZ or EXPAND_SZ) as UTF-8, malloc'd; NULL when absent or
 * of another type. */
char *reg_get_str(hive_h *h, const char *path, const char *name);
/* A DWORD value; -ENOENT when absent or not a DWORD. */
int reg_get_dword(hive_h *h, const char *path, const char *name, uint32_t *out);
/* A MULTI_SZ value as a NULL-terminated list (free with reg_strv_free);
 * NULL when absent or of another type. */
char **reg_get_multi(hive_h *h, const char *path, const char *name);
void reg_strv_free(char **v);
/* The names of the subkeys of path, NULL-terminated (reg_strv_free). */
char **reg_subkeys(hive_h *h, const char *path);

#endif
