/* The exported net plugin tables.  The calls are v11's, the properties
 * v12's (net_get_properties_v12); the other tables adapt them to their own
 * layouts and signatures, so one library serves NCCL 2.19 through 2.30 and
 * later.  irecvConsumed is set
 * for an inner net plugin's receives (a no-op on the copy-engine path);
 * getDeviceMr (UNPACK devices, which the plugin refuses) and makeVDevice
 * (NIC fusion) stay NULL: a stub would be called and break a run. */
#include "log.h"
#include "net.h"

#define EXPORT __attribute__((visibility("default")))

/* v12's properties in an older table's layout (11 down to 8). */
static ncclResult_t old_properties(int dev, int version, void *props)
{
	ncclNetProperties_v12_t p;
	ncclResult_t rc;

	if (!props) {
		LOG_WARN("NET/symmem: getProperties called with a NULL struct");
		return ncclInvalidArgument;
	}
	rc = net_get_properties_v12(dev, &p);
	if (rc != ncclSuccess)
		return rc;
	if (p.vProps.ndevs > NCCL_NET_MAX_DEVS_PER_NIC) {
		LOG_WARN("NET/symmem: device %d merges %d devices, more than NCCL's v11 table "
			 "describes (%d)", dev, p.vProps.ndevs, NCCL_NET_MAX_DEVS_PER_NIC);
		return ncclInvalidArgument;
	}
	props_to_old(&p, version, props);
	return ncclSuccess;
}

static ncclResult_t v11_get_properties(int dev, ncclNetProperties_v11_t *props)
{
	return old_properties(dev, 11, props);
}

static ncclResult_t v10_get_properties(int dev, ncclNetProperties_v10_t *props)
{
	return old_properties(dev, 10, props);
}

static ncclResult_t v8_get_properties(int dev, ncclNetProperties_v8_t *props)
{
	return old_properties(dev, 8, props);
}

EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
	.name = PLUGIN_NAME,
	.init = net_init,
	.devices = net_devices,
	.getProperties = v11_get_properties,
	.listen = net_listen,
	.connect = net_connect,
	.accept = net_accept,
	.regMr = net_reg_mr,
	.regMrDmaBuf = net_reg_mr_dma_buf,
	.deregMr = net_dereg_mr,
	.isend = net_isend,
	.irecv = net_irecv,
	.iflush = net_iflush,
	.test = net_test,
	.closeSend = net_close_send,
	.closeRecv = net_close_recv,
	.closeListen = net_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = net_irecv_consumed,
	.makeVDevice = NULL,
	.finalize = net_finalize,
	.setNetAttr = net_set_net_attr,
};

EXPORT ncclNet_v12_t ncclNetPlugin_v12 = {
	.name = PLUGIN_NAME,
	.init = net_init,
	.devices = net_devices,
	.getProperties = net_get_properties_v12,
	.listen = net_listen,
	.connect = net_connect,
	.accept = net_accept,
	.regMr = net_reg_mr,
	.regMrDmaBuf = net_reg_mr_dma_buf,
	.deregMr = net_dereg_mr,
	.isend = net_isend,
	.irecv = net_irecv,
	.iflush = net_iflush,
	.test = net_test,
	.closeSend = net_close_send,
	.closeRecv = net_close_recv,
	.closeListen = net_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = net_irecv_consumed,
	.makeVDevice = NULL,
	.finalize = net_finalize,
	.setNetAttr = net_set_net_attr,
};

/* v10 and older: init runs once per process and there is no context. */
static ncclResult_t v10_init(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction)
{
	return net_init(NULL, 0, NULL, logFunction, profFunction);
}

static ncclResult_t v9_init(ncclDebugLogger_t logFunction)
{
	return net_init(NULL, 0, NULL, logFunction, NULL);
}

static ncclResult_t v9_listen(int dev, void *handle, void **listenComm)
{
	return net_listen(NULL, dev, handle, listenComm);
}

static ncclResult_t v10_connect(int dev, ncclNetCommConfig_v11_t *config, void *handle,
				void **sendComm, ncclNetDeviceHandle_t **sendDevComm)
{
	(void)config;
	return net_connect(NULL, dev, handle, sendComm, sendDevComm);
}

static ncclResult_t v9_connect(int dev, void *handle, void **sendComm,
			       ncclNetDeviceHandle_t **sendDevComm)
{
	return net_connect(NULL, dev, handle, sendComm, sendDevComm);
}

static ncclResult_t v9_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			     void **request)
{
	return net_isend(sendComm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t v9_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			     void **mhandles, void **request)
{
	return net_irecv(recvComm, n, data, sizes, tags, mhandles, NULL, request);
}

static ncclResult_t v8_isend(void *sendComm, void *data, int size, int tag, void *mhandle,
			     void **request)
{
	if (size < 0) {
		*request = NULL;
		LOG_WARN("NET/symmem: isend of a negative size (%d)", size);
		return ncclInvalidArgument;
	}
	return net_isend(sendComm, data, (size_t)size, tag, mhandle, NULL, request);
}

static ncclResult_t v8_irecv(void *recvComm, int n, void **data, int *sizes, int *tags,
			     void **mhandles, void **request)
{
	size_t size[NET_MAX_RECVS];

	/* Grouped receives reach an inner net plugin: every size converted,
	 * none read past n. */
	if (n < 1 || n > NET_MAX_RECVS) {
		*request = NULL;
		LOG_WARN("NET/symmem: irecv of %d buffers (1 to %d taken)", n, NET_MAX_RECVS);
		return ncclInvalidArgument;
	}
	for (int i = 0; i < n; i++) {
		if (sizes[i] < 0) {
			*request = NULL;
			LOG_WARN("NET/symmem: irecv of a negative size (%d)", sizes[i]);
			return ncclInvalidArgument;
		}
		size[i] = (size_t)sizes[i];
	}
	return net_irecv(recvComm, n, data, size, tags, mhandles, NULL, request);
}

EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
	.name = PLUGIN_NAME,
	.init = v10_init,
	.devices = net_devices,
	.getProperties = v10_get_properties,
	.listen = v9_listen,
	.connect = v10_connect,
	.accept = net_accept,
	.regMr = net_reg_mr,
	.regMrDmaBuf = net_reg_mr_dma_buf,
	.deregMr = net_dereg_mr,
	.isend = net_isend,
	.irecv = net_irecv,
	.iflush = net_iflush,
	.test = net_test,
	.closeSend = net_close_send,
	.closeRecv = net_close_recv,
	.closeListen = net_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = net_irecv_consumed,
	.makeVDevice = NULL,
};

EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = PLUGIN_NAME,
	.init = v9_init,
	.devices = net_devices,
	.getProperties = v10_get_properties,
	.listen = v9_listen,
	.connect = v9_connect,
	.accept = net_accept,
	.regMr = net_reg_mr,
	.regMrDmaBuf = net_reg_mr_dma_buf,
	.deregMr = net_dereg_mr,
	.isend = v9_isend,
	.irecv = v9_irecv,
	.iflush = net_iflush,
	.test = net_test,
	.closeSend = net_close_send,
	.closeRecv = net_close_recv,
	.closeListen = net_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = net_irecv_consumed,
	.makeVDevice = NULL,
};

EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = PLUGIN_NAME,
	.init = v9_init,
	.devices = net_devices,
	.getProperties = v8_get_properties,
	.listen = v9_listen,
	.connect = v9_connect,
	.accept = net_accept,
	.regMr = net_reg_mr,
	.regMrDmaBuf = net_reg_mr_dma_buf,
	.deregMr = net_dereg_mr,
	.isend = v8_isend,
	.irecv = v8_irecv,
	.iflush = net_iflush,
	.test = net_test,
	.closeSend = net_close_send,
	.closeRecv = net_close_recv,
	.closeListen = net_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = net_irecv_consumed,
};
