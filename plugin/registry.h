/* Which objects the plugin has handed to NCCL and not yet taken back.
 * Lets close/deregister calls on a stale or foreign pointer (double close,
 * a comm of the wrong kind) fail with a WARN instead of freeing twice. */
#ifndef SYMMEM_PLUGIN_REGISTRY_H
#define SYMMEM_PLUGIN_REGISTRY_H

enum obj_kind {
	OBJ_CTX = 1,
	OBJ_LISTEN,
	OBJ_SEND,
	OBJ_RECV,
	OBJ_MR,
	OBJ_TUNER,
};

int registry_add(void *p, int kind);		/* 0, or -1 when out of memory */
int registry_remove(void *p, int kind);		/* 0, or -1 when p is not live as kind */
/* registry_remove() for a call named `what` ("closeSend"): on failure it
 * WARNs that p is not a live object of that kind (a double close). */
int registry_take(void *p, int kind, const char *what);
int registry_has(void *p, int kind);		/* 1 if p is live as kind */
/* free() for an object taken back: the memory is kept until 1024 later
 * objects were retired (or none is live), so that its address is not
 * reused at once and a second close of it still fails. */
void registry_retire(void *p);

#endif
