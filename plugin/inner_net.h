/* The inner net plugin (NCCL_SYMMEM_INNER_NET): another NCCL net plugin,
 * such as the cluster's libnccl-net.so, that carries every connection to
 * another host, while connections inside the host keep the copy engines.
 * NCCL uses one net per communicator, so with NCCL_NET=symmem it is this
 * plugin that hands such connections on.
 *
 * This module loads the library, adapts whichever table it exports (v12
 * down to v8) to v12's calls, and forwards each call with its semantics
 * intact; path_inner.c decides which connection goes where.  Every failure is
 * the inner plugin's error code (or ours, for what we refuse) plus one
 * WARN naming the plugin.  Its GIN, RMA and collnet tables are never
 * looked up, so NCCL cannot reach them through this plugin. */
#ifndef SYMMEM_PLUGIN_INNER_NET_H
#define SYMMEM_PLUGIN_INNER_NET_H

#include <stddef.h>
#include <stdint.h>

#include "inner_live.h"
#include "nccl_abi.h"

/* One connection through the inner plugin; path_inner.c embeds it in its comm. */
struct inner_comm {
	void *comm;			/* the inner plugin's send or receive comm */
	const void *nccl;		/* NCCL's comm, for log lines */
	int is_send;
	uint64_t messages;		/* completed through it */
	uint64_t bytes;
	struct live_peer live;		/* the peer process (inner_live.h); fd -1: unchecked */
	/* The liveness connection's setup, finished while tests wait: the
	 * connector's side, or the listener's with the token to prove. */
	struct live_dial *dial;
	struct live_listener *lis;
	uint8_t token[16];
	uint64_t stall_ns;		/* NCCL_SYMMEM_STALL_REPORT (0 = never) */
	uint64_t wait_since_ns;		/* a test found nothing done since then (0 = none) */
	uint64_t checked_ns;		/* the liveness connection was last looked at */
	int stall_reported;
	int dead;			/* the peer died: every call fails */
	int inflight;			/* requests the inner plugin holds */
};

/* Loads the plugin `spec` names (once; later calls count references),
 * calls its init for one communicator and, the first time, checks its
 * devices.  `config` and `prof` are passed on; `*ictx` is its context. */
ncclResult_t inner_init(const char *spec, void **ictx, uint64_t commId,
			ncclNetCommConfig_v11_t *config, ncclDebugLogger_t log,
			ncclProfilerCallback_t prof);
/* Its finalize for that context, then the reference goes. */
ncclResult_t inner_finalize(void *ictx);
/* "name (vN)" of the loaded plugin, for log lines; "" when none. */
const char *inner_describe(void);

int inner_device_count(void);
ncclResult_t inner_devices(int *ndev);
ncclResult_t inner_get_properties(int dev, ncclNetProperties_v12_t *props);
ncclResult_t inner_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props);
ncclResult_t inner_set_net_attr(void *ictx, ncclNetAttr_v11_t *attr);

/* The inner plugin's handle takes bytes [0, room) of NCCL's 128; listen
 * zeroes them all and fails, with one WARN naming the sizes, where the
 * plugin wrote past `room`.  connect hands it NCCL's own buffer on every
 * call (it may keep state there) and fails where it wrote past `room`. */
ncclResult_t inner_listen(void *ictx, int dev, void *handle, size_t room, void **listenComm);
/* `key` names the connection (the listener's token) and `owner` the
 * context that connects: a connect the plugin has not finished within
 * `timeout` seconds fails, since NCCL would call it forever. */
ncclResult_t inner_connect(void *ictx, int dev, void *handle, size_t room, const uint8_t key[16],
			   const void *owner, double timeout, void **sendComm,
			   ncclNetDeviceHandle_t **sendDevComm);
/* Forgets the connects `owner` started and NCCL gave up (at its
 * finalize); returns how many. */
int inner_connect_abandon(const void *owner);
ncclResult_t inner_accept(void *listenComm, void **recvComm,
			  ncclNetDeviceHandle_t **recvDevComm);
ncclResult_t inner_close_listen(void *listenComm);

ncclResult_t inner_reg_mr(struct inner_comm *c, void *data, size_t size, int type,
			  void **mhandle);
ncclResult_t inner_reg_mr_dma_buf(struct inner_comm *c, void *data, size_t size, int type,
				  uint64_t offset, int fd, void **mhandle);
ncclResult_t inner_dereg_mr(struct inner_comm *c, void *mhandle);
ncclResult_t inner_get_device_mr(struct inner_comm *c, void *mhandle, void **dptr_mhandle);

/* mhandles are the inner plugin's own.  *request becomes a wrapper that
 * only inner_test() and inner_irecv_consumed() take. */
ncclResult_t inner_isend(struct inner_comm *c, void *data, size_t size, int tag, void *mhandle,
			 void *phandle, void **request);
ncclResult_t inner_irecv(struct inner_comm *c, int n, void **data, size_t *sizes, int *tags,
			 void **mhandles, void **phandles, void **request);
ncclResult_t inner_iflush(struct inner_comm *c, int n, void **data, int *sizes, void **mhandles,
			  void **request);
/* 1 if `request` came from inner_isend/irecv/iflush (by address). */
int inner_owns_request(const void *request);
ncclResult_t inner_test(void *request, int *done, int *sizes);
ncclResult_t inner_irecv_consumed(struct inner_comm *c, int n, void *request);
/* closeSend or closeRecv, and every wrapper still held for it; the
 * liveness connection is told and closed.  Where the peer died with
 * requests in flight the inner plugin's close is not called: a plugin
 * that waits for its requests would wait forever, and NCCL would hang
 * in its abort. */
ncclResult_t inner_close(struct inner_comm *c);

#endif
