/* The inner path's 48 bytes (inner_form.h).  NCCL ships them from the
 * receiver to the sender untouched, but a mismatched library elsewhere can
 * hand connect anything: every field is checked before any is used. */
#include <string.h>

#include "inner_form.h"
#include "symmem.h"

/* "I1": the form and its version in one; the local form's own magic
 * ("SYML") can never read as it. */
#define FORM_MAGIC 0x3149u

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

/* CRC-32's low half over every byte but its own two. */
static uint16_t check_of(const uint8_t *h)
{
	uint32_t crc = tp_crc32(0, h, FOFF_CHECK);

	crc = tp_crc32(crc, h + FOFF_CHECK + 2, INNER_FORM_SIZE - FOFF_CHECK - 2);
	return (uint16_t)crc;
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
	memset(h, 0, INNER_FORM_SIZE);
	if (info.dev < 0 || info.dev > UINT16_MAX || tp_uds_pack(info.uds_name, h + FOFF_UDS))
		return sm_fail(SM_ERR_INTERNAL, "listener (device %d, socket @%s) does not fit "
			       "the inner path's handle", info.dev, info.uds_name);
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
	tp_uds_unpack(h + FOFF_UDS, f->local.uds_name, sizeof(f->local.uds_name));
	f->local.dev = dev;
	f->local.pid = pid;
	f->local.no_tcp = 1;
	return SM_OK;
}
