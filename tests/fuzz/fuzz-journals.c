/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The journals of --resume: save's partN.jnl replayed against its stream
 * (sjournal_replay, sjournal.h), and the one record of restore's and clone's
 * target journal (tjournal_parse, tjournal.h).
 *
 * Byte 0: bit 0 picks the target journal (1) or save's (0); bit 1 has the
 * harness make the checksums agree with the input (as a journal written by
 * imager would), so that mutations reach the checks behind them.
 *
 * Target journal: bit 2 of byte 0 the kind (clone, restore); byte 1 the
 * image's or source's partition count; the rest the record, whose
 * identity field is taken as the expected one when bit 3 is set.
 *
 * Save's journal: byte 1 the block size (512 << byte % 4), bytes 2-3 the
 * block count - 1 (LE), byte 4 the used bitmap (0: all used; else block b
 * is used when bit (b >> (byte % 6)) & 1 is 0, or byte >= 128), bytes 5-8
 * the journal's length (LE, cut at the input's end): the journal (after
 * the header the harness writes for that filesystem when bit 1 is set),
 * then the stream.  What the replay keeps is checked against what it
 * returns: a kept frame must follow the last, and the reader must go on
 * from the block after the last kept extent.
 */
#include "fuzz.h"

#include <xxhash.h>

#include "imager/bitmap.h"
#include "imager/image.h"
#include "sjournal.h"
#include "tjournal.h"
#include "util.h"

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int target_journal(const uint8_t *data, size_t size)
{
	struct tjournal jn = { .kind = data[0] & 4 ? TJNL_CLONE : TJNL_RESTORE,
			       .identity = 0x1234567890abcdefull };
	unsigned char rec[TJNL_SIZE + 16];
	size_t len = size - 2 < sizeof(rec) ? size - 2 : sizeof(rec);
	struct im_err err = { 0 };

	memcpy(rec, data + 2, len);
	if (len >= TJNL_SIZE && (data[0] & 2))
		put_le64(rec + 56, XXH3_64bits(rec, 56));
	if (len >= 16 && (data[0] & 8))
		jn.identity = le64(rec + 8);
	if (tjournal_parse(&jn, rec, len, data[1], &err) == 0 &&
	    (len != TJNL_SIZE || jn.part > data[1]))
		abort();   /* (accepted what it must refuse) */
	return 0;
}

/* The record checksums and each frame's stream checksum made right. */
static void fix_records(unsigned char *j, size_t jlen, const unsigned char *st, size_t slen)
{
	size_t off = SJOURNAL_HEADER;

	while (off + SJOURNAL_RECORD <= jlen) {
		unsigned char *rec = j + off;
		uint64_t co = le64(rec), cs = le32(rec + 8);
		uint64_t elen = (uint64_t)le32(rec + 16) * IMG_INDEX_EXTENT + 8;
		if (elen > jlen - off - SJOURNAL_RECORD)
			break;
		if (co <= slen && cs <= slen - co)
			put_le64(rec + 32, XXH3_64bits(st + co, cs));
		put_le64(rec + SJOURNAL_RECORD + elen - 8, XXH3_64bits(rec, SJOURNAL_RECORD + elen - 8));
		off += SJOURNAL_RECORD + elen;
	}
}

static int save_journal(const uint8_t *data, size_t size)
{
	struct fs_info fs;
	struct img_index ix;
	struct sjournal_kept k;
	XXH3_state_t *h = NULL;
	uint64_t count, want_bytes = 0, want_stream = 0;
	const uint8_t *jin, *st;
	size_t jin_len, slen, jlen;
	bool fix = data[0] & 2;
	unsigned char *j = NULL;
	int jfd = -1, sfd = -1, r;

	if (size < 9)
		return 0;
	memset(&fs, 0, sizeof(fs));
	fs.block_size = 512u << (data[1] % 4);
	count = 1 + ((uint64_t)data[2] | (uint64_t)data[3] << 8);
	fs.block_count = count;
	if (bitmap_init(&fs.used, count) < 0)
		return 0;
	for (uint64_t b = 0; b < count; b++)
		if (!data[4] || data[4] >= 128 || !((b >> (data[4] % 6)) & 1))
			bitmap_set_range(&fs.used, b, 1);
	fs.used_blocks = bitmap_count(&fs.used);
	jin = data + 9;
	jin_len = get32(data + 5) < size - 9 ? get32(data + 5) : size - 9;
	st = jin + jin_len;
	slen = size - 9 - jin_len;
	/* the journal: the header of this filesystem first when fixing */
	jlen = jin_len + (fix ? SJOURNAL_HEADER : 0);
	j = malloc(jlen + 1);
	h = XXH3_createState();
	if (!j || !h)
		goto out;
	if (fix)
		sjournal_header(j, &fs);
	memcpy(j + (fix ? SJOURNAL_HEADER : 0), jin, jin_len);
	if (fix)
		fix_records(j, jlen, st, slen);
	jfd = memfd_create("jnl", MFD_CLOEXEC);
	sfd = memfd_create("stream", MFD_CLOEXEC);
	if (jfd < 0 || sfd < 0 || util_write_full(jfd, j, jlen) < 0 || util_write_full(sfd, st, slen) < 0)
		goto out;
	img_index_init(&ix, fs.block_size);
	XXH3_64bits_reset(h);
	r = sjournal_replay(jfd, sfd, &fs, &ix, h, &k);
	if (r < 0 && r != -ENOMEM)
		abort();
	/* what it says it kept is what is in the index */
	for (uint64_t f = 0; f < ix.nframes; f++) {
		const struct img_frame *fr = &ix.frames[f];
		if (fr->comp_offset != want_stream)
			abort();
		want_stream += fr->comp_size;
		for (uint32_t e = 0; e < fr->nextents; e++)
			want_bytes += (uint64_t)ix.extents[fr->first_extent + e].count * fs.block_size;
	}
	if (r == 1) {
		const struct img_extent *last = &ix.extents[ix.nextents - 1];
		if (!ix.nframes || k.stream_len != want_stream || k.bytes != want_bytes ||
		    k.next_block != last->start + last->count || k.next_block > count ||
		    k.jnl_len > jlen || k.stream_len > slen)
			abort();
	} else if (r == 0 && (ix.nframes || k.stream_len || k.bytes || k.next_block)) {
		abort();
	}
	img_index_free(&ix);
out:
	if (jfd >= 0)
		close(jfd);
	if (sfd >= 0)
		close(sfd);
	XXH3_freeState(h);
	free(j);
	bitmap_free(&fs.used);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	return data[0] & 1 ? target_journal(data, size) : save_journal(data, size);
}
