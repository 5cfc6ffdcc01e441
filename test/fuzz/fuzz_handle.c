/* The 128-byte connection handle (transport/handle.c): NCCL hands the
 * connector whatever bytes it was given, so decoding must refuse anything
 * malformed, and what it accepts must be what the connector relies on.
 *
 * Input: one mode byte, then the handle's bytes (zero-filled to 128).
 * Mode bit 0 set: the checksum is made right first, so the fuzzer gets
 * past it to the fields.  Where the checksum sits, and that it is the
 * usual CRC-32, is found from a handle tp_handle_encode() wrote; a layout
 * where it is not found leaves the handle as it came. */
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "symmem.h"

static int crc_at = -1;

static uint32_t crc32(const uint8_t *p, size_t n)
{
	uint32_t crc = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return ~crc;
}

static void find_crc(void)
{
	struct tp_handle_info info = { .family = AF_INET, .port = 1, .uds_name = "x" };
	uint8_t h[TP_HANDLE_SIZE];

	tp_handle_encode(&info, h);
	for (int k = 4; k + 4 <= TP_HANDLE_SIZE; k++) {
		uint32_t v;

		memcpy(&v, h + k, 4);
		if (v == crc32(h, (size_t)k)) {
			crc_at = k;
			return;
		}
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	find_crc();
	return 0;
}

/* Two decodings of one handle agree on everything a connector uses. */
static void same_info(const struct tp_handle_info *a, const struct tp_handle_info *b)
{
	FZ_CHECK(a->host_id == b->host_id && a->dev == b->dev && a->pid == b->pid);
	FZ_CHECK(!memcmp(a->token, b->token, sizeof(a->token)));
	FZ_CHECK(!strcmp(a->uds_name, b->uds_name));
	FZ_CHECK(a->family == b->family && a->port == b->port);
	FZ_CHECK(!memcmp(a->addr, b->addr, sizeof(a->addr)));
	FZ_CHECK(a->offered == b->offered && !memcmp(a->offer, b->offer, sizeof(a->offer)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	struct tp_handle_info info, again;
	uint8_t h[TP_HANDLE_SIZE], h2[TP_HANDLE_SIZE];
	uint8_t mode = fz_u8(&in);

	fz_take(&in, h, sizeof(h));
	if ((mode & 1) && crc_at >= 0) {
		uint32_t crc = crc32(h, (size_t)crc_at);

		memcpy(h + crc_at, &crc, 4);
	}
	if (tp_handle_decode(h, &info) != SM_OK) {
		FZ_CHECK(sm_last_error()[0] != '\0');
		return 0;
	}
	/* What the connector relies on: a socket name it can use as a
	 * string, a device, and a TCP endpoint it can dial where the handle
	 * names one (a listener for this host's peers only may name none). */
	FZ_CHECK(info.uds_name[0] != '\0');
	FZ_CHECK(memchr(info.uds_name, '\0', sizeof(info.uds_name)) != NULL);
	FZ_CHECK(info.dev >= 0);
	if (info.family || info.port)
		FZ_CHECK((info.family == AF_INET || info.family == AF_INET6) && info.port != 0);
	FZ_CHECK(info.offered == 0 || info.offered == 1);
	/* What was accepted survives a trip through the encoder. */
	tp_handle_encode(&info, h2);
	FZ_CHECK(tp_handle_decode(h2, &again) == SM_OK);
	same_info(&info, &again);
	return 0;
}
