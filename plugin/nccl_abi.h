/* plugin/: the NCCL plugin, and this header its face to NCCL.
 *
 * Owns: the net, tuner and env tables NCCL loads, the inner net plugin,
 * logging through NCCL's logger, turning a status into an ncclResult_t.
 * Must not touch: how bytes move (transport/ and below do that), the
 * environment (plugin/config/), symmem-info (plugin/info/).
 *
 * The NCCL net, tuner and env plugin ABIs this library exports (net v8-v12,
 * tuner v2-v7, env v1-v2), written from the interface facts in
 * shared/docs/nccl-plugin-abi.md and field-2026.md (member order, types,
 * sizes).  No NCCL header is included: the library must build without NCCL
 * present, and the offsets are pinned by the static asserts at the bottom
 * (test/mp/test_abi_* checks the built tables against NCCL's numbers). */
#ifndef SYMMEM_NCCL_ABI_H
#define SYMMEM_NCCL_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclNumResults = 8
} ncclResult_t;

typedef enum {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

enum {
	NCCL_INIT = 0x1,
	NCCL_NET = 0x10,
	NCCL_TUNING = 0x40,
	NCCL_ENV = 0x80,
	NCCL_BOOTSTRAP = 0x1000,
};
/* Every subsystem: what NCCL's own WARN lines carry. */
#define NCCL_ALL (~0UL)
/* The subsystems NCCL prints without NCCL_DEBUG_SUBSYS. */
#define NCCL_DEFAULT_SUBSYS ((unsigned long)(NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV))

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
				  const char *file, int line, const char *fmt, ...);
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
					       int64_t pluginId, void *extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC 4
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_MAX_NET_SIZE_BYTES (1ULL << 40)

typedef enum {
	NCCL_NET_DEVICE_HOST = 0,
	NCCL_NET_DEVICE_UNPACK = 1
} ncclNetDeviceType;

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v11_t;

typedef struct {
	int trafficClass;
} ncclNetCommConfig_v11_t;

typedef struct {
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	void *handle;
	size_t size;
	int needsProxyProgress;
} ncclNetDeviceHandle_v11_t;

typedef struct {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
	ncclNetCommAttr_v11_t sendCommAttr;
	ncclNetCommAttr_v11_t recvCommAttr;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
} ncclNetAttr_v11_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v11_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
} ncclNetProperties_v11_t;

/* v9 and v10 share one layout: v11 without maxMultiRequestSize. */
typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v11_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
} ncclNetProperties_v10_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_t;

/* v12 (NCCL 2.30): v11 with up to 8 physical devices behind a virtual one
 * and a rail and plane id per device; the other types are v11's. */
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
/* railId / planeId value for "not known": NCCL groups nothing by it. */
#define NCCL_NET_ID_UNDEF (-1)

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v12_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int16_t railId;
	int16_t planeId;
} ncclNetProperties_v12_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
			     ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v11_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
			     ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v12_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, ncclNetCommConfig_v11_t *config, void *handle,
				void **sendComm, ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
} ncclNet_v10_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
} ncclNet_v9_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

/* Tuner ABI. */
typedef enum {
	ncclFuncBroadcast = 0,
	ncclFuncReduce = 1,
	ncclFuncAllGather = 2,
	ncclFuncReduceScatter = 3,
	ncclFuncAllReduce = 4,
	ncclFuncSendRecv = 5,
	ncclFuncSend = 6,
	ncclFuncRecv = 7,
	ncclNumFuncs = 8
} ncclFunc_t;

#define NCCL_NUM_ALGORITHMS 7
#define NCCL_NUM_PROTOCOLS 3
#define NCCL_ALGO_PROTO_IGNORE (-1.0f)
/* Rows and columns of the cost table (the same in NCCL 2.27-2.30). */
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
/* What a v2 tuner leaves in *algorithm, *protocol for NCCL's model to fill. */
#define NCCL_ALGO_UNDEF (-1)
#define NCCL_PROTO_UNDEF (-1)

typedef struct {
	int nNvlDomains;
	int minRanksPerNvlDomain;
	int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

typedef struct {
	double baseLatencies[7][3];
	double hwLatencies[3][7][3];
	double llMaxBws[4][3];
	double perChMaxRingLL128Bws[4][3];
	double perChMaxTreeLL128Bws[4][3];
	double perChMaxTreeBws[4][3];
	double perChMaxNVLSTreeBws[4][3];
} ncclTunerConstants_v5_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
			     ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvlDomainInfo,
			     ncclTunerConstants_v5_t *constants);
	ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
				    float **collCostTable, int numAlgo, int numProto, int regBuff,
				    int *nChannels);
	ncclResult_t (*finalize)(void *ctx);
} ncclTuner_v5_t;

/* v6 (NCCL 2.30): v5 and an optional getChunkSize, which may change the
 * chunk size NCCL computed for a collective (NULL: NCCL's stays). */
typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
			     ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvlDomainInfo,
			     ncclTunerConstants_v5_t *constants);
	ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
				    float **collCostTable, int numAlgo, int numProto, int regBuff,
				    int *nChannels);
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*getChunkSize)(void *ctx, ncclFunc_t collType, size_t nBytes, int algo,
				     int proto, int nChannels, size_t *chunkSize);
} ncclTuner_v6_t;

/* v7 (NCCL 2.32): v6's functions; the tables indexed by compute
 * capability have a fifth row. */
#define NCCL_NUM_COMPCAPS_V7 5

typedef struct {
	double baseLatencies[7][3];
	double hwLatencies[3][7][3];
	double llMaxBws[NCCL_NUM_COMPCAPS_V7][3];
	double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V7][3];
	double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V7][3];
	double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V7][3];
	double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V7][3];
} ncclTunerConstants_v7_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
			     ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvlDomainInfo,
			     ncclTunerConstants_v7_t *constants);
	ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
				    float **collCostTable, int numAlgo, int numProto, int regBuff,
				    int *nChannels);
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*getChunkSize)(void *ctx, ncclFunc_t collType, size_t nBytes, int algo,
				     int proto, int nChannels, size_t *chunkSize);
} ncclTuner_v7_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **ctx);
	ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
				    float **collCostTable, int numAlgo, int numProto, int regBuff,
				    int *nChannels);
	ncclResult_t (*destroy)(void *ctx);
} ncclTuner_v4_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **ctx);
	ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
				    float **collCostTable, int numAlgo, int numProto, int *nChannels);
	ncclResult_t (*destroy)(void *ctx);
} ncclTuner_v3_t;

/* v2 (NCCL 2.21 probes only this; 2.22-2.26 after v3/v4): no cost table,
 * the tuner answers algorithm and protocol itself, before NCCL's model runs
 * (NCCL_ALGO_UNDEF / NCCL_PROTO_UNDEF leave them to the model). */
typedef struct {
	const char *name;
	ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **ctx);
	ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int collNetSupport,
				    int nvlsSupport, int numPipeOps, int *algorithm, int *protocol,
				    int *nChannels);
	ncclResult_t (*destroy)(void *ctx);
} ncclTuner_v2_t;

/* Env plugin ABI (NCCL 2.28.7 and later; v1 in 2.28.9): loaded before NCCL
 * reads any variable, from NCCL_ENV_PLUGIN (a name gets libnccl-env-
 * prefixed); every variable NCCL reads goes through getEnv, whose answer
 * must stay valid until finalize or the next getEnv of that name. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch,
			     const char *suffix);
	ncclResult_t (*finalize)(void);
	const char *(*getEnv)(const char *name);
} ncclEnv_v1_t;

/* v2 (NCCL after 2.28.9, which probes it before v1): init also gets NCCL's
 * logger. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch,
			     const char *suffix, ncclDebugLogger_t logFunction);
	ncclResult_t (*finalize)(void);
	const char *(*getEnv)(const char *name);
} ncclEnv_v2_t;

/* Offsets from the ABI reference (x86-64 LP64). */
_Static_assert(sizeof(ncclNet_v12_t) == 176, "ncclNet_v12_t size");
_Static_assert(sizeof(ncclNet_v11_t) == 176, "ncclNet_v11_t size");
_Static_assert(sizeof(ncclNet_v10_t) == 160, "ncclNet_v10_t size");
_Static_assert(sizeof(ncclNet_v9_t) == 160, "ncclNet_v9_t size");
_Static_assert(sizeof(ncclNet_v8_t) == 152, "ncclNet_v8_t size");
_Static_assert(sizeof(ncclNetProperties_v12_t) == 128, "props v12 size");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104, "props v12 maxP2pBytes");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120, "props v12 mmrs");
_Static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124, "props v12 railId");
_Static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126, "props v12 planeId");
_Static_assert(sizeof(ncclNetProperties_v11_t) == 112, "props v11 size");
_Static_assert(offsetof(ncclNetProperties_v11_t, vProps) == 64, "props v11 vProps");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88, "props v11 maxP2pBytes");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104, "props v11 mmrs");
_Static_assert(sizeof(ncclNetProperties_v10_t) == 104, "props v10 size");
_Static_assert(sizeof(ncclNetProperties_v8_t) == 64, "props v8 size");
_Static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56, "props v8 version");
_Static_assert(sizeof(ncclNetDeviceHandle_v11_t) == 32, "device handle size");
_Static_assert(sizeof(ncclNetAttr_v11_t) == 44, "net attr size");
_Static_assert(sizeof(ncclTunerConstants_v5_t) == 1152, "tuner constants size");
_Static_assert(offsetof(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws) == 1056, "tuner nvls");
_Static_assert(sizeof(ncclTuner_v5_t) == 32, "tuner v5 size");
_Static_assert(sizeof(ncclTuner_v2_t) == 32, "tuner v2 size");
_Static_assert(sizeof(ncclTuner_v6_t) == 40, "tuner v6 size");
_Static_assert(sizeof(ncclTuner_v7_t) == 40, "tuner v7 size");
_Static_assert(sizeof(ncclTunerConstants_v7_t) == 1272, "tuner v7 constants size");
_Static_assert(offsetof(ncclTunerConstants_v7_t, perChMaxRingLL128Bws) == 792, "tuner v7 ll128");
_Static_assert(offsetof(ncclTunerConstants_v7_t, perChMaxNVLSTreeBws) == 1152, "tuner v7 nvls");
_Static_assert(sizeof(ncclEnv_v1_t) == 32, "env v1 size");
_Static_assert(sizeof(ncclEnv_v2_t) == 32, "env v2 size");

#endif
