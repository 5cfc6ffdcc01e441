/* The 128-byte connection handle, and its 48-byte local form.
 *
 * NCCL ships these bytes from the receiver to the sender untouched, but a
 * bug or a mismatched library version elsewhere can hand connect() anything,
 * so decoding checks every field and a CRC before any of it is used.  The
 * handle holds no pointers: only names, addresses and a random token.
 *
 * The local form carries what a connector on the listener's host needs and
 * nothing for other hosts; it leaves room in NCCL's 128 bytes for another
 * net plugin's handle (plugin/inner_net.h). */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "symmem.h"
#include "transport.h"

#define HANDLE_MAGIC 0x4d4d5953u	/* "SYMM" */
#define HANDLE_VERSION 4	/* 4: HANDLE_NO_TCP */

/* Byte layout (little endian host order; both ends are the same library). */
#define HANDLE_OFFER 1u		/* a backend's offer follows (tp_handle_info.offer) */
#define HANDLE_NO_TCP 2u	/* nor any from other hosts: no TCP port */

enum {
	OFF_MAGIC = 0,		/* u32 */
	OFF_VERSION = 4,	/* u16 */
	OFF_FAMILY = 6,		/* u16 */
	OFF_HOST = 8,		/* u64 */
	OFF_TOKEN = 16,		/* 16 bytes */
	OFF_DEV = 32,		/* i32 */
	OFF_PID = 36,		/* i32 */
	OFF_UDS = 40,		/* 32 bytes, NUL-terminated */
	OFF_PORT = 72,		/* u16 */
	OFF_ADDR = 74,		/* 16 bytes */
	OFF_FLAGS = 92,		/* u32: HANDLE_OFFER, HANDLE_NO_TCP */
	OFF_OFFER = 96,		/* TP_OFFER_BYTES: the offer (ibverbs: the RDMA port's address) */
	OFF_CRC = 112,		/* u32 over bytes [0, OFF_CRC) */
	HANDLE_USED = 116,	/* the rest stays zero */
};

/* The local form: a magic of its own, so neither form passes for the
 * other. */
#define LOCAL_MAGIC 0x4c4d5953u	/* "SYML" */
#define LOCAL_VERSION 1
/* tp_listen's Unix sockets are named "symmem-" and 16 hex digits (sock.c);
 * the local form keeps the 8 bytes behind the digits. */
#define UDS_PREFIX "symmem-"
#define UDS_PREFIX_LEN 7

enum {
	LOFF_MAGIC = 0,		/* u32 */
	LOFF_VERSION = 4,	/* u16 */
	LOFF_DEV = 6,		/* u16 */
	LOFF_HOST = 8,		/* u64 */
	LOFF_TOKEN = 16,	/* 16 bytes */
	LOFF_PID = 32,		/* i32 */
	LOFF_UDS = 36,		/* 8 bytes: the socket name's random part */
	LOFF_CRC = 44,		/* u32 over bytes [0, LOFF_CRC) */
};
_Static_assert(LOFF_CRC + 4 == TP_HANDLE_LOCAL_SIZE, "the local form's size");

uint32_t tp_crc32(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;

	crc = ~crc;
	for (size_t i = 0; i < n; i++) {
		crc ^= b[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return ~crc;
}

static void put(uint8_t *h, size_t off, const void *v, size_t n)
{
	memcpy(h + off, v, n);
}

static void get(const uint8_t *h, size_t off, void *v, size_t n)
{
	memcpy(v, h + off, n);
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int tp_uds_pack(const char *name, uint8_t out[TP_UDS_RANDOM])
{
	if (strncmp(name, UDS_PREFIX, UDS_PREFIX_LEN) != 0 ||
	    strlen(name) != UDS_PREFIX_LEN + 2 * TP_UDS_RANDOM)
		return -1;
	for (int i = 0; i < TP_UDS_RANDOM; i++) {
		int hi = hex_digit(name[UDS_PREFIX_LEN + 2 * i]);
		int lo = hex_digit(name[UDS_PREFIX_LEN + 2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

void tp_uds_unpack(const uint8_t in[TP_UDS_RANDOM], char *name, size_t len)
{
	int n = snprintf(name, len, UDS_PREFIX);

	for (int i = 0; i < TP_UDS_RANDOM && n > 0 && (size_t)n < len; i++)
		n += snprintf(name + n, len - (size_t)n, "%02x", in[i]);
}

int tp_handle_shrink(const void *handle, void *local)
{
	struct tp_handle_info info;
	uint8_t *h = local, rnd[TP_UDS_RANDOM];
	uint32_t magic = LOCAL_MAGIC, crc;
	uint16_t version = LOCAL_VERSION, dev;
	int32_t pid;
	int rc = tp_handle_decode(handle, &info);

	if (rc)
		return rc;
	if (info.dev > UINT16_MAX)
		return sm_fail(SM_ERR_INVALID, "device %d does not fit a local handle", info.dev);
	if (tp_uds_pack(info.uds_name, rnd))
		return sm_fail(SM_ERR_INTERNAL, "socket name @%s does not fit a local handle",
			       info.uds_name);
	dev = (uint16_t)info.dev;
	pid = info.pid;
	memset(h, 0, TP_HANDLE_LOCAL_SIZE);
	put(h, LOFF_MAGIC, &magic, 4);
	put(h, LOFF_VERSION, &version, 2);
	put(h, LOFF_DEV, &dev, 2);
	put(h, LOFF_HOST, &info.host_id, 8);
	put(h, LOFF_TOKEN, info.token, 16);
	put(h, LOFF_PID, &pid, 4);
	put(h, LOFF_UDS, rnd, TP_UDS_RANDOM);
	crc = tp_crc32(0, h, LOFF_CRC);
	put(h, LOFF_CRC, &crc, 4);
	return SM_OK;
}

/* The local form at the start of a TP_HANDLE_SIZE buffer: no TCP or RDMA
 * endpoint (no_tcp), so only a connector on the listener's host can use
 * it (tp_connect refuses any other). */
static int decode_local(const uint8_t *h, struct tp_handle_info *info)
{
	uint8_t rnd[TP_UDS_RANDOM];
	uint16_t version, dev;
	uint32_t crc;
	int32_t pid;

	get(h, LOFF_VERSION, &version, 2);
	if (version != LOCAL_VERSION)
		return sm_fail(SM_ERR_INVALID, "local connection handle version %u, this library "
			       "speaks %u (mixed plugin versions?)", version, LOCAL_VERSION);
	get(h, LOFF_CRC, &crc, 4);
	if (crc != tp_crc32(0, h, LOFF_CRC))
		return sm_fail(SM_ERR_INVALID, "local connection handle checksum mismatch "
			       "(corrupted in transit)");
	for (size_t i = TP_HANDLE_LOCAL_SIZE; i < TP_HANDLE_SIZE; i++)
		if (h[i])
			return sm_fail(SM_ERR_INVALID, "local connection handle has data past its "
				       "%d bytes", TP_HANDLE_LOCAL_SIZE);
	memset(info, 0, sizeof(*info));
	get(h, LOFF_DEV, &dev, 2);
	get(h, LOFF_HOST, &info->host_id, 8);
	get(h, LOFF_TOKEN, info->token, 16);
	get(h, LOFF_PID, &pid, 4);
	get(h, LOFF_UDS, rnd, TP_UDS_RANDOM);
	tp_uds_unpack(rnd, info->uds_name, sizeof(info->uds_name));
	info->dev = dev;
	info->pid = pid;
	info->no_tcp = 1;
	return SM_OK;
}

void tp_handle_encode(const struct tp_handle_info *info, void *handle)
{
	uint8_t *h = handle;
	uint32_t magic = HANDLE_MAGIC, crc;
	uint16_t version = HANDLE_VERSION, family = (uint16_t)info->family;
	int32_t dev = info->dev, pid = info->pid;
	uint32_t flags = (info->offered ? HANDLE_OFFER : 0) | (info->no_tcp ? HANDLE_NO_TCP : 0);

	memset(h, 0, TP_HANDLE_SIZE);
	put(h, OFF_MAGIC, &magic, 4);
	put(h, OFF_VERSION, &version, 2);
	put(h, OFF_FAMILY, &family, 2);
	put(h, OFF_HOST, &info->host_id, 8);
	put(h, OFF_TOKEN, info->token, 16);
	put(h, OFF_DEV, &dev, 4);
	put(h, OFF_PID, &pid, 4);
	memcpy(h + OFF_UDS, info->uds_name, strnlen(info->uds_name, 31));
	put(h, OFF_PORT, &info->port, 2);
	put(h, OFF_ADDR, info->addr, 16);
	put(h, OFF_FLAGS, &flags, 4);
	if (info->offered)
		put(h, OFF_OFFER, info->offer, TP_OFFER_BYTES);
	crc = tp_crc32(0, h, OFF_CRC);
	put(h, OFF_CRC, &crc, 4);
}

static const uint8_t zero_offer[TP_OFFER_BYTES];

int tp_handle_decode(const void *handle, struct tp_handle_info *info)
{
	const uint8_t *h = handle;
	uint32_t magic, crc, flags;
	uint16_t version, family;
	int32_t dev, pid;

	if (!handle)
		return sm_fail(SM_ERR_INVALID, "connection handle is NULL");
	get(h, OFF_MAGIC, &magic, 4);
	if (magic == LOCAL_MAGIC)
		return decode_local(h, info);
	if (magic != HANDLE_MAGIC)
		return sm_fail(SM_ERR_INVALID,
			       "connection handle has magic 0x%08x, not a symmem handle (0x%08x)",
			       magic, HANDLE_MAGIC);
	get(h, OFF_VERSION, &version, 2);
	if (version != HANDLE_VERSION)
		return sm_fail(SM_ERR_INVALID,
			       "connection handle version %u, this library speaks %u (mixed plugin versions?)",
			       version, HANDLE_VERSION);
	get(h, OFF_CRC, &crc, 4);
	if (crc != tp_crc32(0, h, OFF_CRC))
		return sm_fail(SM_ERR_INVALID, "connection handle checksum mismatch (corrupted in transit)");
	for (size_t i = HANDLE_USED; i < TP_HANDLE_SIZE; i++)
		if (h[i])
			return sm_fail(SM_ERR_INVALID, "connection handle has data in its reserved tail");

	memset(info, 0, sizeof(*info));
	get(h, OFF_FAMILY, &family, 2);
	get(h, OFF_HOST, &info->host_id, 8);
	get(h, OFF_TOKEN, info->token, 16);
	get(h, OFF_DEV, &dev, 4);
	get(h, OFF_PID, &pid, 4);
	get(h, OFF_UDS, info->uds_name, 32);
	get(h, OFF_PORT, &info->port, 2);
	get(h, OFF_ADDR, info->addr, 16);
	get(h, OFF_FLAGS, &flags, 4);
	get(h, OFF_OFFER, info->offer, TP_OFFER_BYTES);
	info->family = family;
	info->dev = dev;
	info->pid = pid;

	if (info->uds_name[31] != '\0' || info->uds_name[0] == '\0')
		return sm_fail(SM_ERR_INVALID, "connection handle carries a malformed socket name");
	if (flags & ~(HANDLE_OFFER | HANDLE_NO_TCP))
		return sm_fail(SM_ERR_INVALID, "connection handle has unknown flags 0x%x", flags);
	info->no_tcp = (flags & HANDLE_NO_TCP) != 0;
	if (info->no_tcp) {
		static const uint8_t zero[16];

		if (family != 0 || info->port != 0 || memcmp(info->addr, zero, 16))
			return sm_fail(SM_ERR_INVALID, "connection handle has a TCP address but "
				       "says it has none");
	} else if (family != AF_INET && family != AF_INET6) {
		return sm_fail(SM_ERR_INVALID, "connection handle has address family %u", family);
	} else if (info->port == 0) {
		return sm_fail(SM_ERR_INVALID, "connection handle has TCP port 0");
	}
	if (dev < 0)
		return sm_fail(SM_ERR_INVALID, "connection handle names device %d", dev);
	info->offered = (flags & HANDLE_OFFER) != 0;
	if (!info->offered && memcmp(info->offer, zero_offer, TP_OFFER_BYTES))
		return sm_fail(SM_ERR_INVALID, "connection handle has an offer's bytes (an RDMA "
			       "address) but no offer");
	return SM_OK;
}

int tp_handle_tcp(const struct tp_handle_info *info, const struct tp_options *opt,
		  const char *kind)
{
	if (!info->no_tcp)
		return SM_OK;
	return sm_fail(SM_ERR_USAGE, "the listener (pid %d) takes connections from its own "
		       "host only (NCCL_SYMMEM_BACKEND=shm there), but this connector is on "
		       "another host or was told to use %s: set one NCCL_SYMMEM_BACKEND on every "
		       "rank", info->pid, opt->backend == TP_BACKEND_AUTO ? "TCP" : kind);
}
