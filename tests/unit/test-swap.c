/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The swap plugin on swap areas made by mkswap, each page size mkswap can
 * write, and on damaged headers.  A copy holding only the kept page must be
 * the same swap area to libblkid (type, UUID, label).
 */
#include "unit-fs.h"

extern const struct fs_plugin fs_plugin_swap;

#define TEST_UUID  "3c6f1c1e-6f3c-4a57-9a0a-2d5c3e0f5b11"
#define TEST_LABEL "imager-swap"

static char img[64];

/* A fresh, empty temporary file of `bytes` bytes. */
static bool make_file(uint64_t bytes)
{
	int fd;

	/* Not a skip: util-linux is in `make deps`, and a missing tool must
	 * not look like a pass. */
	if (!need_tools("mkswap blkid", "mkswap and blkid (util-linux)"))
		return false;

	snprintf(img, sizeof(img), "/tmp/imager-test-swap-XXXXXX");
	fd = mkstemp(img);
	if (fd < 0) {
		img[0] = '\0';
		return false;
	}
	if (ftruncate(fd, (off_t)bytes) < 0) {
		close(fd);
		return false;
	}
	return close(fd) == 0;
}

static void remove_file(void)
{
	if (img[0])
		unlink(img);
	img[0] = '\0';
}

/* mkswap on a new file; extra: options and the optional size argument. */
static bool make_swap(uint64_t bytes, const char *opts, const char *size_arg)
{
	return make_file(bytes) &&
	       sh("mkswap %s -U %s -L %s %s %s >/dev/null 2>&1", opts, TEST_UUID,
		  TEST_LABEL, img, size_arg) == 0;
}

static int examine(const char *path, bool with_plugin, struct fs_info *info,
		   struct im_err *err)
{
	return examine_path(with_plugin ? &fs_plugin_swap : NULL, path, false, info, err);
}

static void check_page_size(uint32_t page_size)
{
	char opts[32], copy[64];
	struct fs_info info;
	struct im_err err;
	int r, fd;

	snprintf(opts, sizeof(opts), "-p %u", page_size);
	CHECK(make_swap(4u << 20, opts, ""));
	r = examine(img, true, &info, &err);
	CHECK_EQ_U(r, 0);
	CHECK_EQ_U(info.block_size, page_size);
	CHECK_EQ_U(info.block_count, (4u << 20) / page_size);
	CHECK_EQ_U(info.used_blocks, 1);
	CHECK(bitmap_test(&info.used, 0));

	/* Only the first page, and libblkid sees the same swap area. */
	snprintf(copy, sizeof(copy), "/tmp/imager-test-swap-copy-XXXXXX");
	fd = mkstemp(copy);
	CHECK(fd >= 0);
	if (fd >= 0 && r == 0) {
		close(fd);
		CHECK(copy_used(img, &info, copy, false));
		CHECK_EQ_U(sh("blkid -p -o export %s | grep -qx 'UUID=%s' && "
			      "blkid -p -o export %s | grep -qx 'LABEL=%s' && "
			      "blkid -p -o export %s | grep -qx 'TYPE=swap'",
			      copy, TEST_UUID, copy, TEST_LABEL, copy), 0);
		CHECK_EQ_U(sh("cmp -s -n %u %s %s", page_size, img, copy), 0);
	}
	if (fd >= 0)
		unlink(copy);
	fs_info_free(&info);

	/* Found by libblkid, run through the registry. */
	r = examine(img, false, &info, &err);
	CHECK_EQ_U(r, 0);
	CHECK(info.plugin == &fs_plugin_swap);
	CHECK_STR(info.type, "swap");
	CHECK_STR(info.uuid, TEST_UUID);
	CHECK_STR(info.label, TEST_LABEL);
	CHECK_EQ_U(info.block_size, page_size);
	fs_info_free(&info);
	remove_file();
}

static void test_swap_4k(void) { check_page_size(4096); }
static void test_swap_8k(void) { check_page_size(8192); }
static void test_swap_16k(void) { check_page_size(16384); }
static void test_swap_64k(void) { check_page_size(65536); }

/* An area smaller than the device is fine: the rest is unused anyway. */
static void test_swap_smaller_than_device(void)
{
	struct fs_info info;
	struct im_err err;

	CHECK(make_swap(1u << 20, "", "64"));   /* 64 KiB of a 1 MiB file */
	CHECK_EQ_U(examine(img, true, &info, &err), 0);
	CHECK_EQ_U(info.block_count, 256);
	CHECK_EQ_U(info.used_blocks, 1);
	fs_info_free(&info);
	remove_file();
}

/* A header written by a big-endian machine. */
static void test_swap_byte_swapped(void)
{
	struct fs_info info;
	struct im_err err;

	CHECK(make_swap(1u << 20, "", ""));
	CHECK(patch_be(img, 1024, 4, 1));
	CHECK(patch_be(img, 1028, 4, 255));
	CHECK_EQ_U(examine(img, true, &info, &err), 0);
	CHECK_EQ_U(info.used_blocks, 1);
	fs_info_free(&info);
	/* Swapped version, but a last_page that makes no sense swapped. */
	CHECK(patch_le(img, 1028, 4, 255));
	CHECK_EQ_U(examine(img, true, &info, &err), -EINVAL);
	fs_info_free(&info);
	remove_file();
}

/* A header field (32 bits at off) set to v, and the refusal it must get. */
struct refusal {
	const char *what;
	uint64_t off;
	uint32_t v;
	int code, exit_class;
};

/* Patch a healthy 1 MiB swap area and expect the plugin to refuse it. */
static void check_refused(const char *what, uint64_t off, uint32_t v, int code,
			  int exit_class)
{
	struct fs_info info;
	struct im_err err;
	int r, before = unit_failures;

	CHECK(make_swap(1u << 20, "", ""));
	CHECK_EQ_U(examine(img, true, &info, &err), 0);
	fs_info_free(&info);
	CHECK(patch_le(img, off, 4, v));
	r = examine(img, true, &info, &err);
	CHECK_EQ_U(r, code);
	CHECK_EQ_U(err.exit_class, exit_class);
	CHECK(err.msg[0] != '\0');
	fs_info_free(&info);
	/* Through fs_examine(): never the swap plugin's bitmap of one page. */
	r = examine(img, false, &info, &err);
	CHECK(r < 0 || info.plugin == &fs_plugin_raw);
	fs_info_free(&info);
	say_case(before, what, &err);
	remove_file();
}

static void test_swap_hostile(void)
{
	static const struct refusal cases[] = {
		{ "version 2", 1024, 2, -EINVAL, IM_EXIT_SOURCE },
		{ "version 0", 1024, 0, -EINVAL, IM_EXIT_SOURCE },
		{ "last_page = device pages", 1028, 256, -EINVAL, IM_EXIT_SOURCE },
		{ "last_page 2^32-1", 1028, 0xFFFFFFFFu, -EINVAL, IM_EXIT_SOURCE },
		{ "last_page 0", 1028, 0, -EINVAL, IM_EXIT_SOURCE },
		{ "nr_badpages 2^31", 1032, 0x80000000u, -EINVAL, IM_EXIT_SOURCE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_refused(cases[i].what, cases[i].off, cases[i].v, cases[i].code,
			      cases[i].exit_class);
}

/* Made for a larger device than the one it is on (a truncated copy). */
static void test_swap_truncated(void)
{
	struct fs_info info;
	struct im_err err;

	CHECK(make_swap(1u << 20, "", ""));
	CHECK_EQ_U(sh("truncate -s 64K %s", img), 0);
	CHECK_EQ_U(examine(img, true, &info, &err), -EINVAL);
	CHECK(strstr(err.msg, "does not fit") != NULL);
	fs_info_free(&info);
	remove_file();
}

static void test_swap_v0_and_none(void)
{
	struct fs_info info;
	struct im_err err;

	/* The pre-2.5 format: recognised, and refused as unsupported. */
	CHECK(make_file(1u << 20));
	CHECK(write_at(img, 4096 - 10, "SWAP-SPACE", 10));
	CHECK_EQ_U(examine(img, true, &info, &err), -ENOTSUP);
	CHECK_EQ_U(err.exit_class, IM_EXIT_UNSUPP);
	fs_info_free(&info);
	remove_file();

	/* No signature at all. */
	CHECK(make_file(1u << 20));
	CHECK_EQ_U(examine(img, true, &info, &err), -EINVAL);
	CHECK_EQ_U(err.exit_class, IM_EXIT_SOURCE);
	fs_info_free(&info);
	/* Smaller than any swap area. */
	CHECK_EQ_U(sh("truncate -s 4096 %s", img), 0);
	CHECK(write_at(img, 4096 - 10, "SWAPSPACE2", 10));
	CHECK(examine(img, true, &info, &err) < 0);
	fs_info_free(&info);
	remove_file();
}

UNIT_MAIN(UNIT(test_swap_4k), UNIT(test_swap_8k), UNIT(test_swap_16k),
	  UNIT(test_swap_64k), UNIT(test_swap_smaller_than_device),
	  UNIT(test_swap_byte_swapped), UNIT(test_swap_hostile),
	  UNIT(test_swap_truncated), UNIT(test_swap_v0_and_none))
