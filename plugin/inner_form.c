/* The inner path's 48 bytes (inner_form.h).  NCCL ships them from the
 * receiver to the sender untouched, but a mismatched library elsewhere can
 * hand connect anything: every field is checked before any is used. */
#include <stdio.h>
#include <string.h>

#include "inner_form.h"
#include "symmem.h"

/* "I1": the form and its version in one; the local form's own magic
 * ("SYML") can never read as it. */
#define FORM_MAGIC 0x3149u
#define UDS_PREFIX "symmem-"
#define UDS_PREFIX_LEN 7
#define UDS_RANDOM 8

enum {
	FOFF_MAGIC = 0,		/* u16 */
	FOFF_DEV = 2,		/* u16 */
	FOFF_PORT = 4,		/* u16: the liveness listener's, 0 = none */
	FOFF_CHECK = 6,		/* u16: CRC-32's low half over every other byte */
	FOFF_HOST = 8,		/* u64 */
	FOFF_TOKEN = 16,	/* 16 bytes */
	FOFF_PID = 32,		/* i32 */
	FOFF_UDS = 36,		/* 8 bytes: the socket name's random part */
	FOFF_ADDR = 44,		/* 4 bytes: the liveness listener's IPv4 address */
};
_Static_assert(FOFF_ADDR + 4 == INNER_FORM_SIZE, "the inner form's size");

static uint16_t check_of(const uint8_t *h)
{
	uint32_t crc = 0xffffffffu;

	for (size_t i = 0; i < INNER_FORM_SIZE; i++) {
		if (i == FOFF_CHECK || i == FOFF_CHECK + 1)
			continue;
		crc ^= h[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return (uint16_t)~crc;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int inner_form_encode(const void *local, const uint8_t addr[4], uint16_t port, void *out)
{
	struct tp_handle_info info;
	uint8_t *h = out;
	uint16_t magic = FORM_MAGIC, dev, check;
	int32_t pid;
	int rc = tp_handle_decode(local, &info);

	if (rc)
		return rc;
	if (info.dev < 0 || info.dev > UINT16_MAX || strlen(info.uds_name) !=
	    UDS_PREFIX_LEN + 2 * UDS_RANDOM || strncmp(info.uds_name, UDS_PREFIX, UDS_PREFIX_LEN))
		return sm_fail(SM_ERR_INTERNAL, "listener (device %d, socket @%s) does not fit "
			       "the inner path's handle", info.dev, info.uds_name);
	memset(h, 0, INNER_FORM_SIZE);
	for (int i = 0; i < UDS_RANDOM; i++) {
		int hi = hex_digit(info.uds_name[UDS_PREFIX_LEN + 2 * i]);
		int lo = hex_digit(info.uds_name[UDS_PREFIX_LEN + 2 * i + 1]);

		if (hi < 0 || lo < 0)
			return sm_fail(SM_ERR_INTERNAL, "socket name @%s does not fit the inner "
				       "path's handle", info.uds_name);
		h[FOFF_UDS + i] = (uint8_t)(hi << 4 | lo);
	}
	dev = (uint16_t)info.dev;
	pid = info.pid;
	memcpy(h + FOFF_MAGIC, &magic, 2);
	memcpy(h + FOFF_DEV, &dev, 2);
	memcpy(h + FOFF_PORT, &port, 2);
	memcpy(h + FOFF_HOST, &info.host_id, 8);
	memcpy(h + FOFF_TOKEN, info.token, 16);
	memcpy(h + FOFF_PID, &pid, 4);
	memcpy(h + FOFF_ADDR, addr, 4);
	check = check_of(h);
	memcpy(h + FOFF_CHECK, &check, 2);
	return SM_OK;
}

int inner_form_decode(const void *in, struct inner_form *f)
{
	const uint8_t *h = in;
	uint16_t magic, dev, check;
	int32_t pid;
	int n;

	memcpy(&magic, h + FOFF_MAGIC, 2);
	if (magic != FORM_MAGIC)
		return sm_fail(SM_ERR_INVALID, "the handle's part of this plugin has magic 0x%04x, "
			       "not the inner path's (0x%04x)", magic, FORM_MAGIC);
	memcpy(&check, h + FOFF_CHECK, 2);
	if (check != check_of(h))
		return sm_fail(SM_ERR_INVALID, "the handle's part of this plugin fails its check "
			       "(corrupted in transit)");
	memset(f, 0, sizeof(*f));
	memcpy(&dev, h + FOFF_DEV, 2);
	memcpy(&f->live_port, h + FOFF_PORT, 2);
	memcpy(&f->local.host_id, h + FOFF_HOST, 8);
	memcpy(f->local.token, h + FOFF_TOKEN, 16);
	memcpy(&pid, h + FOFF_PID, 4);
	memcpy(f->live_addr, h + FOFF_ADDR, 4);
	if (pid <= 0)
		return sm_fail(SM_ERR_INVALID, "the handle's part of this plugin names process %d",
			       pid);
	n = snprintf(f->local.uds_name, sizeof(f->local.uds_name), UDS_PREFIX);
	for (int i = 0; i < UDS_RANDOM; i++)
		n += snprintf(f->local.uds_name + n, sizeof(f->local.uds_name) - (size_t)n, "%02x",
			      h[FOFF_UDS + i]);
	f->local.dev = dev;
	f->local.pid = pid;
	f->local.no_tcp = 1;
	return SM_OK;
}
