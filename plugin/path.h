/* The path a connection takes, chosen once: one table of calls per path,
 * the way aws-ofi-nccl dispatches through its comm objects.
 *
 * Two paths exist: this plugin's transport (path_local.c), and with
 * NCCL_SYMMEM_INNER_NET the inner net plugin for other hosts beside this
 * plugin's transport inside the host (path_inner.c).  The process's path,
 * net_path(), answers NCCL's device, listen and connect calls; every comm,
 * memory handle and listener it makes carries the path that serves it, so
 * net.c forwards each later call through one pointer and never asks which
 * path it is on.  A request's path is the path whose request it is
 * (net_path_of_request): the inner path's are wrappers it allocates. */
#ifndef SYMMEM_PLUGIN_PATH_H
#define SYMMEM_PLUGIN_PATH_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "conn_hints.h"
#include "nccl_abi.h"

struct net_path;
struct tp_comm;
struct tp_listener;

/* What NCCL holds as a net context (v11 init, one per communicator). */
struct net_ctx {
	const struct net_path *path;	/* the process's, when it was made */
	uint64_t comm_id;
	int traffic_class;
	int path_live;			/* the path's init ran for it */
	void *path_ctx;			/* ... and gave this context */
};

/* The start of every listen comm; the path's own part follows. */
struct net_listen {
	const struct net_path *path;
	int dev;
};

/* The start of every send and receive comm; the path's own part follows.
 * Freed by registry_retire(), so one allocation. */
struct net_comm {
	const struct net_path *path;	/* chosen once, when the connection was made */
	int dev;			/* NCCL's device */
	int is_send;
	enum conn_kind kind;		/* from NCCL's hint when it was made */
	struct staging_alloc staging;	/* ring connections: NCCL's own buffers */
};

/* What NCCL holds as an mhandle: the comm it was registered on, that
 * comm's path, and the path's own handle (a tp_region, or the inner
 * plugin's mhandle). */
struct net_mr {
	struct net_comm *comm;
	const struct net_path *path;
	void *handle;
};

/* Every call that differs between the paths.  Setup and device calls are
 * made on the process's path; the others on the comm's or handle's own.
 * Failures are WARNed by the path, as the call named `what` where given. */
struct net_path {
	const char *name;
	/* For the init line: what carries connections to other hosts. */
	const char *between_hosts;
	/* 1: this plugin's own transport reaches other hosts (its RDMA
	 * devices are worth announcing). */
	int own_remote;

	/* ---- process: init, devices ------------------------------------ */
	/* 1 after one WARN when the configuration contradicts this path. */
	int (*refuses)(const struct config *cfg);
	/* `ctx` NULL: NCCL v10 and older, one init for the process. */
	ncclResult_t (*init)(const struct config *cfg, struct net_ctx *ctx, uint64_t comm_id,
			     ncclNetCommConfig_v11_t *config, ncclDebugLogger_t log,
			     ncclProfilerCallback_t prof);
	ncclResult_t (*finalize)(struct net_ctx *ctx);
	/* Connects `owner` started and NCCL gave up; how many were freed. */
	int (*abandon)(const void *owner);
	int (*device_count)(void);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*get_properties)(int dev, ncclNetProperties_v12_t *props);
	ncclResult_t (*make_vdevice)(int *d, ncclNetVDeviceProps_v12_t *props);
	ncclResult_t (*set_net_attr)(struct net_ctx *ctx, ncclNetAttr_v11_t *attr);

	/* ---- setup: listen comms and new comms ------------------------- */
	/* A listen comm (its base filled in) and NCCL's 128-byte handle. */
	ncclResult_t (*listen)(const struct config *cfg, struct net_ctx *ctx, int dev,
			       void *handle, struct net_listen **out);
	/* A comm, or *out NULL: call again (NCCL's non-blocking setup). */
	ncclResult_t (*connect)(const struct config *cfg, struct net_ctx *ctx, int dev,
				void *handle, struct net_comm **out,
				ncclNetDeviceHandle_t **dev_comm);
	ncclResult_t (*accept)(struct net_listen *l, struct net_comm **out,
			       ncclNetDeviceHandle_t **dev_comm);
	/* Closes what `l` holds; the caller frees `l`. */
	ncclResult_t (*close_listen)(struct net_listen *l);

	/* ---- one comm ---------------------------------------------------- */
	/* The comm is NCCL's now: what the path logs and starts for it. */
	void (*opened)(const struct config *cfg, struct net_comm *c);
	/* `fd` >= 0: NCCL's DMA-BUF.  *handle is the path's own. */
	ncclResult_t (*reg)(struct net_comm *c, void *data, size_t size, int type, int fd,
			    uint64_t offset, void **handle, const char *what);
	/* `c` NULL: its comm is closed already. */
	ncclResult_t (*dereg)(struct net_comm *c, void *handle);
	ncclResult_t (*get_device_mr)(struct net_comm *c, void *handle, void **dptr_mhandle);
	/* mhandles are NCCL's (struct net_mr); net_mr_handle() reads them. */
	ncclResult_t (*isend)(struct net_comm *c, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(struct net_comm *c, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(struct net_comm *c, int n, void **data, int *sizes,
			       void **mhandles, void **request);
	ncclResult_t (*irecv_consumed)(struct net_comm *c, int n, void *request);
	/* Closes the connection; `quiet` when NCCL never saw the comm (no
	 * line, nothing but the close).  The caller frees `c`. */
	ncclResult_t (*close)(struct net_comm *c, int quiet);

	/* ---- requests --------------------------------------------------- */
	/* 1 if `request` is one of this path's, by its address alone. */
	int (*owns_request)(const void *request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
};

extern const struct net_path path_local;
extern const struct net_path path_inner;

/* The process's path: the inner plugin's with NCCL_SYMMEM_INNER_NET set,
 * else this plugin's transport alone (also when the configuration did not
 * load, so that NCCL still gets answers). */
const struct net_path *net_path(const struct config *cfg);
/* The path that made `request`. */
const struct net_path *net_path_of_request(const void *request);

/* ---- path_local.c's parts the inner path builds on ------------------ */

/* This plugin's listener on NCCL's device `dev`.  Alone it writes the
 * whole handle; `beside` an inner plugin only its local form
 * (TP_HANDLE_LOCAL_SIZE bytes at `handle`), and it keeps to this host.
 * Returns an enum sm_status. */
int local_listen(const struct config *cfg, int beside, int dev, void *handle,
		 struct tp_listener **out);
/* A connect to this plugin's listener (`handle` as local_listen wrote it). */
ncclResult_t local_connect(const struct config *cfg, int beside, struct net_ctx *ctx, int dev,
			   void *handle, struct net_comm **out);
/* A connection of this plugin's transport as a comm of path_local; *out
 * NULL after one WARN (the connection closed) when out of memory. */
/* `beside`: made for the inner path, whose devices advertise the inner
 * plugin's grouping, so the comm takes grouped receives (recv_group.h). */
ncclResult_t local_adopt(struct tp_comm *tp, int dev, int is_send, int beside,
			 struct net_comm **out);

/* `mhandle`'s own handle for `path`, NULL when it has none or is another
 * path's: an mhandle serves only the path it was registered on. */
static inline void *net_mr_handle(const void *mhandle, const struct net_path *path)
{
	const struct net_mr *mr = mhandle;

	return mr && mr->path == path ? mr->handle : NULL;
}

#endif
