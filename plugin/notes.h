/* What the net plugin tells the user once per process (notes.c): the
 * configuration and the data path at init, the RDMA devices, the NCCL
 * defaults it set, and the warnings that fire at the first connection or
 * registration they concern.  All their once-only state is one struct. */
#ifndef SYMMEM_PLUGIN_NOTES_H
#define SYMMEM_PLUGIN_NOTES_H

#include "config.h"
#include "conn_hints.h"

struct net_path;
struct tp_comm;

/* At init, after NCCL gave its logger: the configuration, the CUDA
 * driver, the data path `path` gives. */
void notes_announce(const struct config *cfg, const struct net_path *path);
/* NCCL called the v11 init (with a per-comm context): NCCL 2.28 on, which
 * says through setNetAttr which connections are rings, so ring
 * registrations can be declined (conn_hints.c).  Set before the devices
 * are built, which read it once. */
void notes_set_rings_hinted(void);
int notes_rings_hinted(void);
/* With P2P off, what becomes of user buffers on ring connections. */
void notes_hints(const struct config *cfg);
/* What NCCL_IB_HCA selects on this host, where `path` reaches other
 * hosts itself; after the devices are built. */
void notes_rdma(const struct config *cfg, const struct net_path *path);
/* The plugin's NCCL defaults and its advice (devices.c, once). */
void notes_nccl_defaults(const struct config *cfg);
/* A connection to another host over TCP though RDMA devices are there. */
void notes_rdma_passed_over(const struct config *cfg, const struct tp_comm *tp);
/* A connection NCCL made without a hint in a job that hints the others. */
void notes_unhinted(const struct config *cfg, enum conn_kind kind);
/* A user buffer on a ring connection declined (the first time only). */
void notes_declined(void);
/* Contexts live: at the last one's finalize, what NCCL does next. */
void notes_context_opened(void);
void notes_context_closed(void);

#endif
