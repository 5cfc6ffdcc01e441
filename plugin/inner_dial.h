/* Connects to another host through the inner path in progress: the inner
 * net plugin's comm once it has one, and the liveness connection
 * (inner_live.h), which finish in either order over NCCL's repeated
 * connect calls.  Keyed by the listener's token, as NCCL hands the same
 * handle to every call of one connect. */
#ifndef SYMMEM_PLUGIN_INNER_DIAL_H
#define SYMMEM_PLUGIN_INNER_DIAL_H

#include <stdint.h>

#include "inner_live.h"

struct inner_dial {
	struct inner_dial *next;
	uint8_t key[16];
	const void *owner;		/* NCCL's context, for its finalize */
	uint64_t since_ns;
	void *ic;			/* the inner plugin's send comm, once made */
	struct live_dial *dial;		/* the liveness connection being set up */
	struct live_peer peer;		/* ... proven before the inner plugin was done */
};

/* The connect `key` names, made on its first call; NULL when out of memory. */
struct inner_dial *inner_dial_get(const uint8_t key[16], const void *owner);
/* Done with it (what it held was taken or closed). */
void inner_dial_put(struct inner_dial *d);
/* Frees every connect `owner` started and NCCL gave up, closing what
 * each held with `close_ic`; how many. */
int inner_dial_abandon(const void *owner, void (*close_ic)(void *ic));

#endif
