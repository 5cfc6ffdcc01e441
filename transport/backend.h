/* The kinds of connection (enum tp_backend) and their ops: the one place
 * that names every backend, for connection setup (connect.c,
 * candidate.c, listen.c).  Nothing below setup includes this. */
#ifndef SYMMEM_TRANSPORT_BACKEND_H
#define SYMMEM_TRANSPORT_BACKEND_H

#include "comm.h"

/* The ops of kind `backend` (TP_BACKEND_SHM, _TCP or _IB), NULL for any
 * other value. */
const struct tp_ops *backend_ops(int backend);
/* A new comm of kind `backend` for what *c was (its end, socket and
 * peer), set up with opt; *c is closed and replaced, also on failure
 * (then by a comm tp_close frees).  An ibverbs connection whose ports
 * cannot reach each other goes on as a TCP one over the socket that set
 * it up: nothing was registered or posted on it yet. */
int backend_switch(struct tp_comm **c, int backend, const struct tp_options *opt);

#endif
