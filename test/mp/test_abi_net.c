/* Every net table the built library exports, read through the layouts
 * NCCL declares (abi_layouts.h), never through the plugin's own header.
 * Per version: which slots are set, init, devices, getProperties writing
 * exactly that version's struct (canary bytes around it, every field
 * written) with the documented values, the same device seen the same way
 * through every version, and one connection with one message through the
 * version's own signatures.  A member the plugin declares at the wrong
 * place or with the wrong type fails here. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "abi_layouts.h"

#define MAX_DEVS 8
#define CANARY 64	/* bytes checked on either side of a struct */
#define WAIT_S 10.0

static void *lib;
static int warns;

/* Counts WARN lines, and the INFO "again: ..." lines the plugin writes in
 * place of a WARN it gave within the last minute. */
static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt,
		   ...)
{
	char text[512];
	va_list ap;

	(void)flags;
	(void)file;
	(void)line;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	warns += level == ABI_LOG_WARN || !strncmp(text, "again: ", 7);
}

/* The test keeps its own clock: it includes nothing that declares the
 * plugin's ABI (test/mp/harness.h brings plugin/nccl_abi.h). */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- what a version says about a device, in common terms -------------- */

struct seen {
	const char *name, *pci;
	uint64_t guid;
	long ptr, reg_global, flush, speed, port, max_comms, max_recvs, type, version;
	float latency;
	long vndevs, vdev0, vrest;	/* vrest: devs[1..] that are not 0 */
	uint64_t p2p, coll;
	long mmrs, rail, plane;
};

#define ABSENT (-100)	/* a field this version does not have */

#define SEEN_COMMON(s, p)                                                                     \
	do {                                                                                  \
		(s)->name = (p)->name;                                                        \
		(s)->pci = (p)->pciPath;                                                      \
		(s)->guid = (p)->guid;                                                        \
		(s)->ptr = (p)->ptrSupport;                                                   \
		(s)->reg_global = (p)->regIsGlobal;                                           \
		(s)->speed = (p)->speed;                                                      \
		(s)->port = (p)->port;                                                        \
		(s)->latency = (p)->latency;                                                  \
		(s)->max_comms = (p)->maxComms;                                               \
		(s)->max_recvs = (p)->maxRecvs;                                               \
		(s)->type = (p)->netDeviceType;                                               \
		(s)->version = (p)->netDeviceVersion;                                         \
		(s)->flush = (s)->vndevs = (s)->vdev0 = (s)->vrest = ABSENT;                  \
		(s)->mmrs = (s)->rail = (s)->plane = ABSENT;                                  \
		(s)->p2p = (s)->coll = ABSENT;                                                \
	} while (0)

#define SEEN_V9(s, p)                                                                         \
	do {                                                                                  \
		(s)->flush = (p)->forceFlush;                                                 \
		(s)->vndevs = (p)->vProps.ndevs;                                              \
		(s)->vdev0 = (p)->vProps.devs[0];                                             \
		(s)->vrest = 0;                                                               \
		for (size_t i = 1; i < sizeof((p)->vProps.devs) / sizeof(int); i++)           \
			(s)->vrest += (p)->vProps.devs[i] != 0;                               \
		(s)->p2p = (p)->maxP2pBytes;                                                  \
		(s)->coll = (p)->maxCollBytes;                                                \
	} while (0)

static void seen_v8(const void *buf, struct seen *s)
{
	const struct abi_props_v8 *p = buf;

	SEEN_COMMON(s, p);
}

static void seen_v9(const void *buf, struct seen *s)
{
	const struct abi_props_v9 *p = buf;

	SEEN_COMMON(s, p);
	SEEN_V9(s, p);
}

static void seen_v11(const void *buf, struct seen *s)
{
	const struct abi_props_v11 *p = buf;

	SEEN_COMMON(s, p);
	SEEN_V9(s, p);
	s->mmrs = p->maxMultiRequestSize;
}

static void seen_v12(const void *buf, struct seen *s)
{
	const struct abi_props_v12 *p = buf;

	SEEN_COMMON(s, p);
	SEEN_V9(s, p);
	s->mmrs = p->maxMultiRequestSize;
	s->rail = p->railId;
	s->plane = p->planeId;
}

/* ---- each member of each version's properties -------------------------- */

struct field {
	const char *name;
	size_t off, size;
};

#define F(t, m) { #m, offsetof(t, m), sizeof(((t *)0)->m) }
#define FIELDS_COMMON(t)                                                                      \
	F(t, name), F(t, pciPath), F(t, guid), F(t, ptrSupport), F(t, regIsGlobal),           \
	F(t, speed), F(t, port), F(t, latency), F(t, maxComms), F(t, maxRecvs),               \
	F(t, netDeviceType), F(t, netDeviceVersion)
#define FIELDS_V9(t) F(t, forceFlush), F(t, vProps), F(t, maxP2pBytes), F(t, maxCollBytes)

static const struct field fields_v8[] = { FIELDS_COMMON(struct abi_props_v8), { NULL, 0, 0 } };
static const struct field fields_v9[] = { FIELDS_COMMON(struct abi_props_v9),
					  FIELDS_V9(struct abi_props_v9), { NULL, 0, 0 } };
static const struct field fields_v11[] = { FIELDS_COMMON(struct abi_props_v11),
					   FIELDS_V9(struct abi_props_v11),
					   F(struct abi_props_v11, maxMultiRequestSize),
					   { NULL, 0, 0 } };
static const struct field fields_v12[] = { FIELDS_COMMON(struct abi_props_v12),
					   FIELDS_V9(struct abi_props_v12),
					   F(struct abi_props_v12, maxMultiRequestSize),
					   F(struct abi_props_v12, railId),
					   F(struct abi_props_v12, planeId), { NULL, 0, 0 } };

/* ---- the slots: set, NULL, or either ----------------------------------- */

enum { SET, UNSET, EITHER };

struct slot {
	const char *name;
	size_t off;
	int want;
};

#define S(t, m, w) { #m, offsetof(t, m), w }
/* NULL where the plugin has no device offload or NIC fusion: NCCL calls
 * any of them that is set.  irecvConsumed is set: an inner net plugin's
 * receives need it.  regMrDmaBuf is checked against ptrSupport. */
#define SLOTS_COMMON(t)                                                                       \
	S(t, init, SET), S(t, devices, SET), S(t, getProperties, SET), S(t, listen, SET),     \
	S(t, connect, SET), S(t, accept, SET), S(t, regMr, SET), S(t, regMrDmaBuf, EITHER),   \
	S(t, deregMr, SET), S(t, isend, SET), S(t, irecv, SET), S(t, iflush, SET),            \
	S(t, test, SET), S(t, closeSend, SET), S(t, closeRecv, SET), S(t, closeListen, SET),  \
	S(t, getDeviceMr, UNSET), S(t, irecvConsumed, SET)
/* finalize: NCCL 2.28 on calls it unconditionally. */
#define SLOTS_V11(t) S(t, makeVDevice, UNSET), S(t, finalize, SET), S(t, setNetAttr, EITHER)

static const struct slot slots_v8[] = { SLOTS_COMMON(struct abi_net_v8), { NULL, 0, 0 } };
static const struct slot slots_v9[] = { SLOTS_COMMON(struct abi_net_v9),
					S(struct abi_net_v9, makeVDevice, UNSET), { NULL, 0, 0 } };
static const struct slot slots_v10[] = { SLOTS_COMMON(struct abi_net_v10),
					 S(struct abi_net_v10, makeVDevice, UNSET),
					 { NULL, 0, 0 } };
static const struct slot slots_v11[] = { SLOTS_COMMON(struct abi_net_v11),
					 SLOTS_V11(struct abi_net_v11), { NULL, 0, 0 } };
static const struct slot slots_v12[] = { SLOTS_COMMON(struct abi_net_v12),
					 SLOTS_V11(struct abi_net_v12), { NULL, 0, 0 } };

/* ---- calls through each version's own signatures ----------------------- */

/* The slots whose signature is the same in v8-v12, and one adapter per
 * call whose signature is not; `t` is the version's table. */
struct calls {
	abi_rc (*devices)(int *ndev);
	abi_rc (*accept)(void *listenComm, void **recvComm, void **recvDevComm);
	abi_rc (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	abi_rc (*deregMr)(void *comm, void *mhandle);
	abi_rc (*test)(void *request, int *done, int *sizes);
	abi_rc (*closeSend)(void *comm);
	abi_rc (*closeRecv)(void *comm);
	abi_rc (*closeListen)(void *comm);
	abi_rc (*init)(const void *t, void **ctx);
	abi_rc (*props)(const void *t, int dev, void *buf);
	abi_rc (*listen)(const void *t, void *ctx, void *handle, void **lc);
	abi_rc (*connect)(const void *t, void *ctx, void *handle, void **sc);
	abi_rc (*isend)(const void *t, void *sc, void *data, size_t n, void *mh, void **req);
	abi_rc (*irecv)(const void *t, void *rc, void *data, size_t cap, void *mh, void **req);
	abi_rc (*finalize)(const void *t, void *ctx);	/* NULL before v11 */
};

#define CALLS_COMMON(T)                                                                       \
	static void T##_common(const void *t, struct calls *c)                                \
	{                                                                                     \
		const struct abi_net_##T *n = t;                                              \
                                                                                              \
		c->devices = n->devices;                                                      \
		c->accept = n->accept;                                                        \
		c->regMr = n->regMr;                                                          \
		c->deregMr = n->deregMr;                                                      \
		c->test = n->test;                                                            \
		c->closeSend = n->closeSend;                                                  \
		c->closeRecv = n->closeRecv;                                                  \
		c->closeListen = n->closeListen;                                              \
	}

CALLS_COMMON(v8)
CALLS_COMMON(v9)
CALLS_COMMON(v10)
CALLS_COMMON(v11)
CALLS_COMMON(v12)

/* The tag NCCL passes: the sender's rank. */
#define TAG 3

static abi_rc v8_init(const void *t, void **ctx)
{
	*ctx = NULL;
	return ((const struct abi_net_v8 *)t)->init(logger);
}

static abi_rc v8_props(const void *t, int dev, void *buf)
{
	return ((const struct abi_net_v8 *)t)->getProperties(dev, buf);
}

static abi_rc v8_listen(const void *t, void *ctx, void *handle, void **lc)
{
	(void)ctx;
	return ((const struct abi_net_v8 *)t)->listen(0, handle, lc);
}

static abi_rc v8_connect(const void *t, void *ctx, void *handle, void **sc)
{
	void *dev_comm = NULL;

	(void)ctx;
	return ((const struct abi_net_v8 *)t)->connect(0, handle, sc, &dev_comm);
}

static abi_rc v8_isend(const void *t, void *sc, void *data, size_t n, void *mh, void **req)
{
	return ((const struct abi_net_v8 *)t)->isend(sc, data, (int)n, TAG, mh, req);
}

static abi_rc v8_irecv(const void *t, void *rc, void *data, size_t cap, void *mh, void **req)
{
	int size = (int)cap, tag = TAG;

	return ((const struct abi_net_v8 *)t)->irecv(rc, 1, &data, &size, &tag, &mh, req);
}

static abi_rc v9_init(const void *t, void **ctx)
{
	*ctx = NULL;
	return ((const struct abi_net_v9 *)t)->init(logger);
}

static abi_rc v9_props(const void *t, int dev, void *buf)
{
	return ((const struct abi_net_v9 *)t)->getProperties(dev, buf);
}

static abi_rc v9_listen(const void *t, void *ctx, void *handle, void **lc)
{
	(void)ctx;
	return ((const struct abi_net_v9 *)t)->listen(0, handle, lc);
}

static abi_rc v9_connect(const void *t, void *ctx, void *handle, void **sc)
{
	void *dev_comm = NULL;

	(void)ctx;
	return ((const struct abi_net_v9 *)t)->connect(0, handle, sc, &dev_comm);
}

static abi_rc v9_isend(const void *t, void *sc, void *data, size_t n, void *mh, void **req)
{
	return ((const struct abi_net_v9 *)t)->isend(sc, data, n, TAG, mh, req);
}

static abi_rc v9_irecv(const void *t, void *rc, void *data, size_t cap, void *mh, void **req)
{
	int tag = TAG;

	return ((const struct abi_net_v9 *)t)->irecv(rc, 1, &data, &cap, &tag, &mh, req);
}

static abi_rc v10_init(const void *t, void **ctx)
{
	*ctx = NULL;
	return ((const struct abi_net_v10 *)t)->init(logger, NULL);
}

static abi_rc v10_props(const void *t, int dev, void *buf)
{
	return ((const struct abi_net_v10 *)t)->getProperties(dev, buf);
}

static abi_rc v10_listen(const void *t, void *ctx, void *handle, void **lc)
{
	(void)ctx;
	return ((const struct abi_net_v10 *)t)->listen(0, handle, lc);
}

static abi_rc v10_connect(const void *t, void *ctx, void *handle, void **sc)
{
	struct abi_comm_config config = { .trafficClass = -1 };
	void *dev_comm = NULL;

	(void)ctx;
	return ((const struct abi_net_v10 *)t)->connect(0, &config, handle, sc, &dev_comm);
}

static abi_rc v10_isend(const void *t, void *sc, void *data, size_t n, void *mh, void **req)
{
	return ((const struct abi_net_v10 *)t)->isend(sc, data, n, TAG, mh, NULL, req);
}

static abi_rc v10_irecv(const void *t, void *rc, void *data, size_t cap, void *mh, void **req)
{
	void *phandle = NULL;
	int tag = TAG;

	return ((const struct abi_net_v10 *)t)->irecv(rc, 1, &data, &cap, &tag, &mh, &phandle,
						     req);
}

/* v11 and v12 share every signature but getProperties'. */
#define CALLS_V11_LIKE(T)                                                                     \
	static abi_rc T##_init(const void *t, void **ctx)                                     \
	{                                                                                     \
		struct abi_comm_config config = { .trafficClass = -1 };                       \
                                                                                              \
		*ctx = NULL;                                                                  \
		return ((const struct abi_net_##T *)t)->init(ctx, 42, &config, logger, NULL); \
	}                                                                                     \
	static abi_rc T##_props(const void *t, int dev, void *buf)                            \
	{                                                                                     \
		return ((const struct abi_net_##T *)t)->getProperties(dev, buf);              \
	}                                                                                     \
	static abi_rc T##_listen(const void *t, void *ctx, void *handle, void **lc)           \
	{                                                                                     \
		return ((const struct abi_net_##T *)t)->listen(ctx, 0, handle, lc);           \
	}                                                                                     \
	static abi_rc T##_connect(const void *t, void *ctx, void *handle, void **sc)          \
	{                                                                                     \
		void *dev_comm = NULL;                                                        \
                                                                                              \
		return ((const struct abi_net_##T *)t)->connect(ctx, 0, handle, sc, &dev_comm); \
	}                                                                                     \
	static abi_rc T##_isend(const void *t, void *sc, void *data, size_t n, void *mh,      \
				void **req)                                                   \
	{                                                                                     \
		return ((const struct abi_net_##T *)t)->isend(sc, data, n, TAG, mh, NULL, req); \
	}                                                                                     \
	static abi_rc T##_irecv(const void *t, void *rc, void *data, size_t cap, void *mh,    \
				void **req)                                                   \
	{                                                                                     \
		void *phandle = NULL;                                                         \
		int tag = TAG;                                                                \
                                                                                              \
		return ((const struct abi_net_##T *)t)->irecv(rc, 1, &data, &cap, &tag, &mh,  \
							      &phandle, req);                 \
	}                                                                                     \
	static abi_rc T##_finalize(const void *t, void *ctx)                                  \
	{                                                                                     \
		return ((const struct abi_net_##T *)t)->finalize(ctx);                        \
	}

CALLS_V11_LIKE(v11)
CALLS_V11_LIKE(v12)

/* ---- the versions ------------------------------------------------------ */

struct version {
	int v;
	size_t props_size;
	const struct field *fields;
	const struct slot *slots;
	void (*seen)(const void *buf, struct seen *s);
	void (*common)(const void *t, struct calls *c);
	struct calls calls;
	/* Filled as the tests run: */
	const void *table;
	int ndev;
	struct seen dev[MAX_DEVS];
};

#define VERSION(T, N, props_t, fields_t, seen_f, fin)                                         \
	{ .v = N, .props_size = sizeof(props_t), .fields = fields_t, .slots = slots_##T,      \
	  .seen = seen_f, .common = T##_common,                                               \
	  .calls = { .init = T##_init, .props = T##_props, .listen = T##_listen,              \
		     .connect = T##_connect, .isend = T##_isend, .irecv = T##_irecv,          \
		     .finalize = fin } }

static struct version versions[] = {
	VERSION(v12, 12, struct abi_props_v12, fields_v12, seen_v12, v12_finalize),
	VERSION(v11, 11, struct abi_props_v11, fields_v11, seen_v11, v11_finalize),
	VERSION(v10, 10, struct abi_props_v9, fields_v9, seen_v9, NULL),
	VERSION(v9, 9, struct abi_props_v9, fields_v9, seen_v9, NULL),
	VERSION(v8, 8, struct abi_props_v8, fields_v8, seen_v8, NULL),
};
#define NVERSIONS (sizeof(versions) / sizeof(versions[0]))

static struct version *find_version(int v)
{
	for (size_t i = 0; i < NVERSIONS; i++)
		if (versions[i].v == v)
			return &versions[i];
	return NULL;
}

/* Every ncclNetPlugin_vN the library exports is one this test has NCCL's
 * layout for, and v12 (NCCL 2.30's) is among them. */
static void exported_tables(void **state)
{
	int found = 0;

	(void)state;
	for (int v = 1; v <= 32; v++) {
		char sym[32];
		const void *t;

		snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
		t = dlsym(lib, sym);
		if (!t)
			continue;
		if (!find_version(v))
			fail_msg("%s is exported, but this test has no layout for it", sym);
		find_version(v)->table = t;
		found++;
	}
	assert_true(found > 0);
	assert_non_null(find_version(12)->table);
}

static void *slot_value(const void *table, size_t off)
{
	void *p;

	memcpy(&p, (const char *)table + off, sizeof(p));
	return p;
}

static void *slot_named(const struct version *ver, const char *name)
{
	for (const struct slot *s = ver->slots; s->name; s++)
		if (!strcmp(s->name, name))
			return slot_value(ver->table, s->off);
	fail_msg("v%d has no slot %s", ver->v, name);
	return NULL;
}

static void check_slots(const struct version *ver)
{
	for (const struct slot *s = ver->slots; s->name; s++) {
		void *p = slot_value(ver->table, s->off);

		if (s->want == SET && !p)
			fail_msg("v%d: %s is NULL", ver->v, s->name);
		if (s->want == UNSET && p)
			fail_msg("v%d: %s is set; NCCL would call it", ver->v, s->name);
	}
	assert_string_equal(*(const char *const *)ver->table, "symmem");
}

/* getProperties(dev) into a buffer of canary bytes, twice with different
 * bytes where the struct goes: the canaries around it stay, and each field
 * reads the same both times, so it was written (padding is not looked at). */
static void read_props(struct version *ver, int dev)
{
	_Alignas(16) unsigned char a[CANARY + 256 + CANARY], b[sizeof(a)];
	unsigned char *pa = a + CANARY, *pb = b + CANARY;
	size_t size = ver->props_size;

	memset(a, 0xc3, sizeof(a));
	memset(b, 0xc3, sizeof(b));
	memset(pb, 0x3c, size);
	assert_int_equal(ver->calls.props(ver->table, dev, pa), ABI_OK);
	assert_int_equal(ver->calls.props(ver->table, dev, pb), ABI_OK);
	for (size_t i = 0; i < sizeof(a); i++) {
		if (i >= CANARY && i < CANARY + size)
			continue;
		if (a[i] != 0xc3 || b[i] != 0xc3)
			fail_msg("v%d getProperties(%d) wrote byte %zd of a %zu-byte struct", ver->v,
				 dev, (ssize_t)i - CANARY, size);
	}
	for (const struct field *f = ver->fields; f->name; f++)
		if (memcmp(pa + f->off, pb + f->off, f->size))
			fail_msg("v%d getProperties(%d) left %s unwritten", ver->v, dev, f->name);
	ver->seen(pa, &ver->dev[dev]);
}

/* The values NCCL needs (shared/docs/nccl-plugin-abi.md §3.2, §9). */
static void check_values(const struct version *ver, int dev, const struct seen *s)
{
	printf("# v%d dev %d: %s, speed %ld, ptrSupport 0x%lx", ver->v, dev,
	       s->name ? s->name : "(null)", s->speed, s->ptr);
	if (ver->v >= 9)
		printf(", maxP2pBytes %llu", (unsigned long long)s->p2p);
	if (ver->v >= 12)
		printf(", railId %ld, planeId %ld", s->rail, s->plane);
	printf("\n");
	assert_non_null(s->name);
	assert_true(strlen(s->name) > 0);
	assert_true(s->ptr & ABI_PTR_HOST);
	assert_int_equal(s->ptr & ~(long)(ABI_PTR_HOST | ABI_PTR_CUDA | ABI_PTR_DMABUF), 0);
	assert_true(s->reg_global == 0 || s->reg_global == 1);
	assert_true(s->speed > 0);
	assert_true(s->port >= 0);
	assert_true(isfinite(s->latency) && s->latency >= 0.0f);
	assert_true(s->max_comms > 0);
	assert_int_equal(s->max_recvs, 1);
	assert_int_equal(s->type, 0);		/* host, no device offload */
	assert_int_equal(s->version, 0);
	if (ver->v >= 9) {
		assert_true(s->flush == 0 || s->flush == 1);
		assert_int_equal(s->vndevs, 1);
		assert_int_equal(s->vdev0, dev);
		assert_int_equal(s->vrest, 0);
		assert_true(s->p2p > 0 && s->p2p <= ABI_MAX_NET_BYTES);
		assert_true(s->coll > 0 && s->coll <= ABI_MAX_NET_BYTES);
	}
	if (ver->v >= 11)
		assert_int_equal(s->mmrs, 1);
	if (ver->v >= 12) {
		assert_int_equal(s->rail, -1);	/* NCCL_NET_ID_UNDEF: on no rail */
		assert_int_equal(s->plane, -1);
	}
	/* DMA-BUF advertised only with the call that takes it. */
	if (s->ptr & ABI_PTR_DMABUF)
		assert_non_null(slot_named(ver, "regMrDmaBuf"));
}

/* listen, connect and accept until both ends exist (neither may block),
 * then one message received into a larger buffer, as NCCL's proxy does. */
static void one_message(const struct version *ver, void *ctx)
{
	const struct calls *c = &ver->calls;
	char handle[ABI_HANDLE_BYTES];
	unsigned char src[1000], dst[1500];
	void *lc = NULL, *sc = NULL, *rc = NULL, *smh = NULL, *rmh = NULL, *dev_comm = NULL;
	void *sreq = NULL, *rreq = NULL;
	int sdone = 0, rdone = 0, sizes[64] = { 0 };
	double end = now() + WAIT_S;

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i * 7 + (size_t)ver->v);
	memset(dst, 0, sizeof(dst));
	assert_int_equal(c->listen(ver->table, ctx, handle, &lc), ABI_OK);
	assert_non_null(lc);
	while ((!sc || !rc) && now() < end) {
		if (!sc)
			assert_int_equal(c->connect(ver->table, ctx, handle, &sc), ABI_OK);
		if (!rc)
			assert_int_equal(c->accept(lc, &rc, &dev_comm), ABI_OK);
	}
	assert_int_equal(c->closeListen(lc), ABI_OK);
	assert_non_null(sc);
	assert_non_null(rc);
	assert_int_equal(c->regMr(sc, src, sizeof(src), ABI_PTR_HOST, &smh), ABI_OK);
	assert_int_equal(c->regMr(rc, dst, sizeof(dst), ABI_PTR_HOST, &rmh), ABI_OK);
	while ((!rreq || !sreq) && now() < end) {
		if (!rreq)
			assert_int_equal(c->irecv(ver->table, rc, dst, sizeof(dst), rmh, &rreq),
					 ABI_OK);
		if (!sreq)
			assert_int_equal(c->isend(ver->table, sc, src, sizeof(src), smh, &sreq),
					 ABI_OK);
	}
	assert_non_null(rreq);
	assert_non_null(sreq);
	while ((!sdone || !rdone) && now() < end) {
		int one = 0;

		if (!sdone)
			assert_int_equal(c->test(sreq, &sdone, &one), ABI_OK);
		if (!rdone)
			assert_int_equal(c->test(rreq, &rdone, sizes), ABI_OK);
	}
	assert_true(sdone && rdone);
	assert_int_equal(sizes[0], (int)sizeof(src));
	assert_memory_equal(dst, src, sizeof(src));
	assert_int_equal(c->deregMr(sc, smh), ABI_OK);
	assert_int_equal(c->deregMr(rc, rmh), ABI_OK);
	assert_int_equal(c->closeSend(sc), ABI_OK);
	assert_int_equal(c->closeRecv(rc), ABI_OK);
}

static void one_version(void **state)
{
	struct version *ver = *state;
	_Alignas(16) unsigned char buf[CANARY + 256 + CANARY];
	unsigned char untouched[sizeof(buf)];
	void *ctx = NULL;

	if (!ver->table)
		skip();		/* not exported */
	ver->common(ver->table, &ver->calls);
	check_slots(ver);
	warns = 0;
	assert_int_equal(ver->calls.init(ver->table, &ctx), ABI_OK);
	if (ver->calls.finalize)
		assert_non_null(ctx);	/* a per-communicator context from v11 on */
	assert_int_equal(ver->calls.devices(&ver->ndev), ABI_OK);
	assert_true(ver->ndev >= 1 && ver->ndev <= MAX_DEVS);
	for (int dev = 0; dev < ver->ndev; dev++) {
		read_props(ver, dev);
		check_values(ver, dev, &ver->dev[dev]);
	}
	assert_int_equal(warns, 0);
	/* A device it does not have: an error, one WARN, nothing written. */
	memset(buf, 0xc3, sizeof(buf));
	memcpy(untouched, buf, sizeof(buf));
	assert_int_not_equal(ver->calls.props(ver->table, ver->ndev, buf + CANARY), ABI_OK);
	assert_memory_equal(buf, untouched, sizeof(buf));
	assert_int_equal(warns, 1);
	warns = 0;
	one_message(ver, ctx);
	if (ver->calls.finalize)
		assert_int_equal(ver->calls.finalize(ver->table, ctx), ABI_OK);
	assert_int_equal(warns, 0);
}

/* Every version describes each device with the same values. */
static void same_devices(void **state)
{
	const struct version *ref = NULL;
	int compared = 0;

	(void)state;
	for (size_t i = 0; i < NVERSIONS; i++) {
		const struct version *ver = &versions[i];

		if (!ver->table || !ver->ndev)
			continue;
		if (!ref) {
			ref = ver;
			continue;
		}
		assert_int_equal(ver->ndev, ref->ndev);
		for (int d = 0; d < ver->ndev; d++) {
			const struct seen *a = &ref->dev[d], *b = &ver->dev[d];

			assert_string_equal(b->name, a->name);
			assert_true(b->pci == a->pci || (b->pci && a->pci && !strcmp(b->pci, a->pci)));
			assert_true(b->guid == a->guid);
			assert_int_equal(b->ptr, a->ptr);
			assert_int_equal(b->reg_global, a->reg_global);
			assert_int_equal(b->speed, a->speed);
			assert_int_equal(b->port, a->port);
			assert_true(b->latency == a->latency);
			assert_int_equal(b->max_comms, a->max_comms);
			if (ver->v >= 9) {
				assert_int_equal(b->flush, a->flush);
				assert_true(b->p2p == a->p2p && b->coll == a->coll);
			}
			if (ver->v >= 11)
				assert_int_equal(b->mmrs, a->mmrs);
		}
		compared++;
	}
	assert_true(compared > 0);
}

int main(void)
{
	const char *path = getenv("SYMMEM_PLUGIN");
	struct CMUnitTest tests[2 + NVERSIONS];
	size_t n = 0;

	lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!lib) {
		fprintf(stderr, "SYMMEM_PLUGIN: %s\n", path ? dlerror() : "not set");
		return 1;
	}
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(exported_tables);
	for (size_t i = 0; i < NVERSIONS; i++) {
		static char names[NVERSIONS][32];

		snprintf(names[i], sizeof(names[i]), "ncclNetPlugin_v%d", versions[i].v);
		tests[n++] = (struct CMUnitTest){ .name = names[i], .test_func = one_version,
						   .initial_state = &versions[i] };
	}
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(same_devices);
	return _cmocka_run_group_tests("net ABI", tests, n, NULL, NULL);
}
