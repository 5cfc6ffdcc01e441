/* Device properties between the net ABI versions' layouts, both ways:
 * this plugin's own v12 answer for NCCL's older tables (net_exports.c),
 * and an older inner plugin's answer for the v12 calls the rest of the
 * plugin makes (inner_load.c).  The layouts grew by appending, so each
 * version's fields are its predecessor's plus a few. */
#include <string.h>

#include "net.h"

/* What NCCL's compatibility layer gives v8 plugins (nccl-plugin-abi.md
 * section 3.3). */
#define V8_MAX_P2P_BYTES (1ull << 30)
#define V8_MAX_COLL_BYTES (512ull << 20)

/* The fields every layout from v8 on has, under the same names. */
#define COPY_V8_FIELDS(out, in)                                                                   \
	do {                                                                                      \
		(out)->name = (in)->name;                                                         \
		(out)->pciPath = (in)->pciPath;                                                   \
		(out)->guid = (in)->guid;                                                         \
		(out)->ptrSupport = (in)->ptrSupport;                                             \
		(out)->regIsGlobal = (in)->regIsGlobal;                                           \
		(out)->speed = (in)->speed;                                                       \
		(out)->port = (in)->port;                                                         \
		(out)->latency = (in)->latency;                                                   \
		(out)->maxComms = (in)->maxComms;                                                 \
		(out)->maxRecvs = (in)->maxRecvs;                                                 \
		(out)->netDeviceType = (in)->netDeviceType;                                       \
		(out)->netDeviceVersion = (in)->netDeviceVersion;                                 \
	} while (0)

/* What v9 and v10 added.  v12's vProps holds more devices than v11's:
 * only v11's share is copied, which the caller made sure is enough. */
#define COPY_V10_FIELDS(out, in)                                                                  \
	do {                                                                                      \
		(out)->forceFlush = (in)->forceFlush;                                             \
		(out)->vProps.ndevs = (in)->vProps.ndevs;                                         \
		memcpy((out)->vProps.devs, (in)->vProps.devs,                                     \
		       NCCL_NET_MAX_DEVS_PER_NIC * sizeof(int));                                  \
		(out)->maxP2pBytes = (in)->maxP2pBytes;                                           \
		(out)->maxCollBytes = (in)->maxCollBytes;                                         \
	} while (0)

void props_to_old(const ncclNetProperties_v12_t *in, int version, void *out)
{
	if (version >= 11) {
		ncclNetProperties_v11_t *o = out;

		memset(o, 0, sizeof(*o));
		COPY_V8_FIELDS(o, in);
		COPY_V10_FIELDS(o, in);
		o->maxMultiRequestSize = in->maxMultiRequestSize;
	} else if (version >= 9) {
		ncclNetProperties_v10_t *o = out;

		memset(o, 0, sizeof(*o));
		COPY_V8_FIELDS(o, in);
		COPY_V10_FIELDS(o, in);
	} else {
		ncclNetProperties_v8_t *o = out;

		memset(o, 0, sizeof(*o));
		COPY_V8_FIELDS(o, in);
	}
}

void props_from_old(const void *in, int version, int dev, ncclNetProperties_v12_t *out)
{
	memset(out, 0, sizeof(*out));
	out->maxMultiRequestSize = 1;
	out->railId = NCCL_NET_ID_UNDEF;
	out->planeId = NCCL_NET_ID_UNDEF;
	if (version >= 11) {
		const ncclNetProperties_v11_t *p = in;

		COPY_V8_FIELDS(out, p);
		COPY_V10_FIELDS(out, p);
		out->maxMultiRequestSize = p->maxMultiRequestSize;
	} else if (version >= 9) {
		const ncclNetProperties_v10_t *p = in;

		COPY_V8_FIELDS(out, p);
		COPY_V10_FIELDS(out, p);
	} else {
		const ncclNetProperties_v8_t *p = in;

		COPY_V8_FIELDS(out, p);
		out->vProps.ndevs = 1;
		out->vProps.devs[0] = dev;
		out->maxP2pBytes = V8_MAX_P2P_BYTES;
		out->maxCollBytes = V8_MAX_COLL_BYTES;
	}
}
