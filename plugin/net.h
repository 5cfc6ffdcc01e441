/* The one implementation of the net plugin, in v11 terms (v12 where the
 * two differ).  net_exports.c exports it and adapts it to the other
 * versions' tables. */
#ifndef SYMMEM_PLUGIN_NET_H
#define SYMMEM_PLUGIN_NET_H

#include "nccl_abi.h"

#define PLUGIN_NAME "symmem"
/* The most buffers one grouped irecv through an inner net plugin carries
 * (NCCL's test() sizes array has 64; this plugin's own path takes 1). */
#define NET_MAX_RECVS 64

ncclResult_t net_init(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
		      ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
ncclResult_t net_devices(int *ndev);
/* v12's layout, the native one: the older tables convert it
 * (props_to_old()). */
ncclResult_t net_get_properties_v12(int dev, ncclNetProperties_v12_t *props);
ncclResult_t net_listen(void *ctx, int dev, void *handle, void **listenComm);
ncclResult_t net_connect(void *ctx, int dev, void *handle, void **sendComm,
			 ncclNetDeviceHandle_t **sendDevComm);
ncclResult_t net_accept(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
ncclResult_t net_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr);
ncclResult_t net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t net_reg_mr_dma_buf(void *comm, void *data, size_t size, int type, uint64_t offset,
				int fd, void **mhandle);
ncclResult_t net_dereg_mr(void *comm, void *mhandle);
ncclResult_t net_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
		       void *phandle, void **request);
ncclResult_t net_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
		       void **mhandles, void **phandles, void **request);
ncclResult_t net_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			void **request);
ncclResult_t net_test(void *request, int *done, int *sizes);
ncclResult_t net_close_send(void *sendComm);
ncclResult_t net_close_recv(void *recvComm);
ncclResult_t net_close_listen(void *listenComm);
ncclResult_t net_finalize(void *ctx);

/* The optional slots no exported table points at yet, for an inner net
 * plugin (inner_net.h) that has them: device memory handles, receives
 * consumed, NIC fusion.  Without an inner plugin they do what a host
 * plugin does, or refuse with a WARN (makeVDevice). */
ncclResult_t net_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle);
ncclResult_t net_irecv_consumed(void *recvComm, int n, void *request);
ncclResult_t net_make_vdevice(int *d, ncclNetVDeviceProps_v11_t *props);
ncclResult_t net_make_vdevice_v12(int *d, ncclNetVDeviceProps_v12_t *props);

/* net_props.c: device properties between the layouts of `version` (8 to
 * 11; 9 is 10's) and v12.  props_to_old() copies only as many of vProps'
 * devices as v11 holds: the caller checks that they fit.  props_from_old()
 * gives what an older layout lacks the defaults NCCL's compatibility layer
 * gives it; `dev` is the device a v8 table answered for. */
void props_to_old(const ncclNetProperties_v12_t *in, int version, void *out);
void props_from_old(const void *in, int version, int dev, ncclNetProperties_v12_t *out);

#endif
