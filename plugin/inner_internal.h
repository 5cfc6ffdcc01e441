/* Shared by the inner net plugin's files (inner_load.c, inner_req.c,
 * inner_net.c); the rest of the plugin includes inner_net.h only. */
#ifndef SYMMEM_PLUGIN_INNER_INTERNAL_H
#define SYMMEM_PLUGIN_INNER_INTERNAL_H

#include <stddef.h>

#include "inner_net.h"
#include "nccl_abi.h"

/* ---- inner_load.c: the library and its table -------------------------- */

struct inner_lib {
	const char *name;		/* its table's name field */
	char path[256];			/* the file the loader opened */
	int version;			/* 8..12: the table it exports */
	ncclNet_v12_t ops;		/* its calls in v12 form, whatever it exports */
};

/* Opens the library `spec` names (as NCCL opens NCCL_NET_PLUGIN: as
 * given, then libnccl-net-<spec>.so), picks its newest table v12..v8 and
 * adapts it; later calls count references to it.  NULL after one WARN. */
const struct inner_lib *inner_lib_get(const char *spec);
/* Drops a reference; the last one closes the library. */
void inner_lib_put(void);
/* The library while a reference is held, else NULL. */
const struct inner_lib *inner_lib_current(void);

/* ---- inner_req.c: what NCCL holds as an inner plugin's request -------- */

enum inner_req_kind {
	INNER_REQ_SEND = 1,
	INNER_REQ_RECV,
	INNER_REQ_FLUSH,
};

/* NCCL gets a wrapper, never the inner plugin's own request: test() must
 * tell the two paths' requests apart, which inner_req_owned() does by
 * address alone, without reading what a pointer points to. */
struct inner_req {
	void *req;			/* the inner plugin's */
	struct inner_comm *comm;	/* posted on; NULL while free */
	int kind;			/* enum inner_req_kind */
	int n;				/* receives: buffers */
	size_t size;			/* sends: bytes */
	int done;			/* test() said so; kept for irecvConsumed */
	struct inner_req *next;		/* free list */
};

/* A free wrapper for `comm`, or NULL when memory or the cap ran out. */
struct inner_req *inner_req_get(struct inner_comm *comm, int kind);
void inner_req_put(struct inner_req *r);
/* 1 if `p` is a wrapper inner_req_get() handed out (free or not). */
int inner_req_owned(const void *p);
/* Frees every wrapper still held for `comm` (at its close). */
void inner_req_drop(const struct inner_comm *comm);
/* Gives the wrappers' memory back; none may be held (the library's
 * last reference went). */
void inner_req_reset(void);

/* ---- inner_watch.c: stalls and dead peers ----------------------------- */

/* A test found its request not done: the stall report, and the peer's
 * liveness; ncclRemoteError (one WARN per peer) once it died. */
ncclResult_t inner_watch_wait(struct inner_comm *c);
/* The peer died: ncclRemoteError, WARNed the first time. */
ncclResult_t inner_watch_dead(struct inner_comm *c);
/* A request of `c` completed. */
void inner_watch_progress(struct inner_comm *c);
/* 1 when the peer died with requests in flight: the inner plugin's
 * close may wait for them forever. */
int inner_watch_dead_at_close(struct inner_comm *c);
/* Frees the liveness connection's setup, where it never finished. */
void inner_watch_free(struct inner_comm *c);
/* An orderly close: the peer is told (bye), whatever of the setup was
 * done, and the liveness connection goes. */
void inner_watch_close(struct inner_comm *c);

#endif
