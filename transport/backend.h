/* The kinds of connection (enum tp_backend) and their ops: the one place
 * that names every backend, for connection setup (connect.c,
 * candidate.c, listen.c), which asks them in priority order and names
 * none.  Nothing below setup includes this. */
#ifndef SYMMEM_TRANSPORT_BACKEND_H
#define SYMMEM_TRANSPORT_BACKEND_H

#include "comm.h"

/* The ops of kind `backend` (enum tp_backend), NULL for any other value. */
const struct tp_ops *backend_ops(int backend);
/* The i-th kind in setup's order (highest tp_ops.priority first), NULL
 * past the last. */
const struct tp_ops *backend_ranked(unsigned i);
/* The kind that moves data over the setup's own TCP socket: what a
 * connection goes on as when its kind's path cannot reach the peer, and
 * what a connector over TCP asking for a kind this build lacks gets. */
const struct tp_ops *backend_plain(void);
/* 1 where opt allows no fallback from the kind it names
 * (NCCL_SYMMEM_BACKEND=ib: no TCP in its place), told to the peer as
 * WIRE_REQUIRED. */
int backend_required(const struct tp_options *opt);
/* A new comm of kind `backend` for what *c was (its end, socket and
 * peer), set up with opt; *c is closed and replaced, also on failure
 * (then by a comm tp_close frees).  A connection whose kind cannot reach
 * the peer goes on as the plain kind over the socket that set it up:
 * nothing was registered or posted on it yet. */
int backend_switch(struct tp_comm **c, int backend, const struct tp_options *opt);

#endif
