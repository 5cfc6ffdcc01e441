/* The plugin ABIs as NCCL declares them, declared again here without the
 * plugin's own header (plugin/nccl_abi.h): the ABI tests read the built
 * library's tables through these, so a wrong member order, type or size
 * in the plugin shows up as wrong bytes.  Every size and offset below is
 * pinned to the number NCCL's headers give on x86-64 (net_v8.h-net_v12.h
 * and tuner_v2.h-tuner_v6.h of v2.30.7-1, tuner_v7.h of NCCL 2.32,
 * env_v1.h and env_v2.h). */
#ifndef SYMMEM_TEST_ABI_LAYOUTS_H
#define SYMMEM_TEST_ABI_LAYOUTS_H

#include <stddef.h>
#include <stdint.h>

typedef int abi_rc;	/* ncclResult_t: a 4-byte enum, 0 is success */
#define ABI_OK 0
#define ABI_LOG_WARN 2	/* ncclDebugLogLevel */
#define ABI_PTR_HOST 0x1
#define ABI_PTR_CUDA 0x2
#define ABI_PTR_DMABUF 0x4
#define ABI_HANDLE_BYTES 128	/* NCCL_NET_HANDLE_MAXSIZE */
#define ABI_MAX_NET_BYTES (1ull << 40)	/* NCCL_MAX_NET_SIZE_BYTES */

typedef void (*abi_logger)(int level, unsigned long flags, const char *file, int line,
			   const char *fmt, ...);
typedef abi_rc (*abi_prof_cb)(void **event, int type, void *parent, int64_t plugin_id,
			      void *ext);

/* ---- net: device properties ------------------------------------------- */

struct abi_vprops4 {		/* v9-v11: up to 4 devices behind a virtual one */
	int ndevs;
	int devs[4];
};

struct abi_vprops8 {		/* v12: up to 8 */
	int ndevs;
	int devs[8];
};

struct abi_props_v8 {
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
	int netDeviceType;
	int netDeviceVersion;
};

/* v9 and v10 */
struct abi_props_v9 {
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
	int netDeviceType;
	int netDeviceVersion;
	struct abi_vprops4 vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
};

struct abi_props_v11 {
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
	int netDeviceType;
	int netDeviceVersion;
	struct abi_vprops4 vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
};

struct abi_props_v12 {
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
	int netDeviceType;
	int netDeviceVersion;
	struct abi_vprops8 vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int16_t railId;
	int16_t planeId;
};

_Static_assert(sizeof(struct abi_props_v8) == 64, "props v8");
_Static_assert(offsetof(struct abi_props_v8, regIsGlobal) == 28, "v8 regIsGlobal");
_Static_assert(offsetof(struct abi_props_v8, speed) == 32, "v8 speed");
_Static_assert(offsetof(struct abi_props_v8, latency) == 40, "v8 latency");
_Static_assert(offsetof(struct abi_props_v8, maxRecvs) == 48, "v8 maxRecvs");
_Static_assert(offsetof(struct abi_props_v8, netDeviceType) == 52, "v8 netDeviceType");
_Static_assert(offsetof(struct abi_props_v8, netDeviceVersion) == 56, "v8 netDeviceVersion");
_Static_assert(sizeof(struct abi_props_v9) == 104, "props v9/v10");
_Static_assert(offsetof(struct abi_props_v9, forceFlush) == 32, "v9 forceFlush");
_Static_assert(offsetof(struct abi_props_v9, speed) == 36, "v9 speed");
_Static_assert(offsetof(struct abi_props_v9, maxRecvs) == 52, "v9 maxRecvs");
_Static_assert(offsetof(struct abi_props_v9, netDeviceVersion) == 60, "v9 netDeviceVersion");
_Static_assert(offsetof(struct abi_props_v9, vProps) == 64, "v9 vProps");
_Static_assert(offsetof(struct abi_props_v9, maxP2pBytes) == 88, "v9 maxP2pBytes");
_Static_assert(offsetof(struct abi_props_v9, maxCollBytes) == 96, "v9 maxCollBytes");
_Static_assert(sizeof(struct abi_props_v11) == 112, "props v11");
_Static_assert(offsetof(struct abi_props_v11, maxMultiRequestSize) == 104, "v11 mmrs");
_Static_assert(sizeof(struct abi_props_v12) == 128, "props v12");
_Static_assert(sizeof(struct abi_vprops8) == 36, "v12 vProps");
_Static_assert(offsetof(struct abi_props_v12, vProps) == 64, "v12 vProps");
_Static_assert(offsetof(struct abi_props_v12, maxP2pBytes) == 104, "v12 maxP2pBytes");
_Static_assert(offsetof(struct abi_props_v12, maxCollBytes) == 112, "v12 maxCollBytes");
_Static_assert(offsetof(struct abi_props_v12, maxMultiRequestSize) == 120, "v12 mmrs");
_Static_assert(offsetof(struct abi_props_v12, railId) == 124, "v12 railId");
_Static_assert(offsetof(struct abi_props_v12, planeId) == 126, "v12 planeId");

/* ---- net: the tables --------------------------------------------------- */

struct abi_comm_config {	/* ncclNetCommConfig_v10..v12 */
	int trafficClass;
};

/* Slots 7-9 and 12-16 have one signature in v8-v12. */
#define ABI_NET_COMMON_TAIL                                                                   \
	abi_rc (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,     \
			 void **request);                                                     \
	abi_rc (*test)(void *request, int *done, int *sizes);                                 \
	abi_rc (*closeSend)(void *sendComm);                                                  \
	abi_rc (*closeRecv)(void *recvComm);                                                  \
	abi_rc (*closeListen)(void *listenComm);                                              \
	abi_rc (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);                \
	abi_rc (*irecvConsumed)(void *recvComm, int n, void *request)

#define ABI_NET_REG                                                                           \
	abi_rc (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);       \
	abi_rc (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,                  \
			      uint64_t offset, int fd, void **mhandle);                       \
	abi_rc (*deregMr)(void *comm, void *mhandle)

struct abi_net_v8 {
	const char *name;
	abi_rc (*init)(abi_logger log);
	abi_rc (*devices)(int *ndev);
	abi_rc (*getProperties)(int dev, struct abi_props_v8 *props);
	abi_rc (*listen)(int dev, void *handle, void **listenComm);
	abi_rc (*connect)(int dev, void *handle, void **sendComm, void **sendDevComm);
	abi_rc (*accept)(void *listenComm, void **recvComm, void **recvDevComm);
	ABI_NET_REG;
	abi_rc (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			void **request);
	abi_rc (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			void **mhandles, void **request);
	ABI_NET_COMMON_TAIL;
};

struct abi_net_v9 {
	const char *name;
	abi_rc (*init)(abi_logger log);
	abi_rc (*devices)(int *ndev);
	abi_rc (*getProperties)(int dev, struct abi_props_v9 *props);
	abi_rc (*listen)(int dev, void *handle, void **listenComm);
	abi_rc (*connect)(int dev, void *handle, void **sendComm, void **sendDevComm);
	abi_rc (*accept)(void *listenComm, void **recvComm, void **recvDevComm);
	ABI_NET_REG;
	abi_rc (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			void **request);
	abi_rc (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			void **mhandles, void **request);
	ABI_NET_COMMON_TAIL;
	abi_rc (*makeVDevice)(int *d, struct abi_vprops4 *props);
};

struct abi_net_v10 {
	const char *name;
	abi_rc (*init)(abi_logger log, abi_prof_cb prof);
	abi_rc (*devices)(int *ndev);
	abi_rc (*getProperties)(int dev, struct abi_props_v9 *props);
	abi_rc (*listen)(int dev, void *handle, void **listenComm);
	abi_rc (*connect)(int dev, struct abi_comm_config *config, void *handle, void **sendComm,
			  void **sendDevComm);
	abi_rc (*accept)(void *listenComm, void **recvComm, void **recvDevComm);
	ABI_NET_REG;
	abi_rc (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			void *phandle, void **request);
	abi_rc (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			void **mhandles, void **phandles, void **request);
	ABI_NET_COMMON_TAIL;
	abi_rc (*makeVDevice)(int *d, struct abi_vprops4 *props);
};

/* v11 and v12 differ in their properties and vProps only. */
#define ABI_NET_V11_LIKE(props_t, vprops_t)                                                   \
	const char *name;                                                                     \
	abi_rc (*init)(void **ctx, uint64_t commId, struct abi_comm_config *config,           \
		       abi_logger log, abi_prof_cb prof);                                     \
	abi_rc (*devices)(int *ndev);                                                         \
	abi_rc (*getProperties)(int dev, props_t *props);                                     \
	abi_rc (*listen)(void *ctx, int dev, void *handle, void **listenComm);                \
	abi_rc (*connect)(void *ctx, int dev, void *handle, void **sendComm,                  \
			  void **sendDevComm);                                                \
	abi_rc (*accept)(void *listenComm, void **recvComm, void **recvDevComm);              \
	ABI_NET_REG;                                                                          \
	abi_rc (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,      \
			void *phandle, void **request);                                       \
	abi_rc (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,         \
			void **mhandles, void **phandles, void **request);                    \
	ABI_NET_COMMON_TAIL;                                                                  \
	abi_rc (*makeVDevice)(int *d, vprops_t *props);                                       \
	abi_rc (*finalize)(void *ctx);                                                        \
	abi_rc (*setNetAttr)(void *ctx, void *attr)

struct abi_net_v11 {
	ABI_NET_V11_LIKE(struct abi_props_v11, struct abi_vprops4);
};

struct abi_net_v12 {
	ABI_NET_V11_LIKE(struct abi_props_v12, struct abi_vprops8);
};

_Static_assert(sizeof(struct abi_net_v8) == 152, "net v8");
_Static_assert(offsetof(struct abi_net_v8, isend) == 80, "net v8 isend");
_Static_assert(offsetof(struct abi_net_v8, irecvConsumed) == 144, "net v8 irecvConsumed");
_Static_assert(sizeof(struct abi_net_v9) == 160, "net v9");
_Static_assert(sizeof(struct abi_net_v10) == 160, "net v10");
_Static_assert(offsetof(struct abi_net_v10, makeVDevice) == 152, "net v10 makeVDevice");
_Static_assert(sizeof(struct abi_net_v11) == 176, "net v11");
_Static_assert(sizeof(struct abi_net_v12) == 176, "net v12");
_Static_assert(offsetof(struct abi_net_v12, regMrDmaBuf) == 64, "net v12 regMrDmaBuf");
_Static_assert(offsetof(struct abi_net_v12, test) == 104, "net v12 test");
_Static_assert(offsetof(struct abi_net_v12, finalize) == 160, "net v12 finalize");
_Static_assert(offsetof(struct abi_net_v12, setNetAttr) == 168, "net v12 setNetAttr");

/* ---- tuner ------------------------------------------------------------- */

#define ABI_NUM_ALGOS 7
#define ABI_NUM_PROTOS 3
#define ABI_CELL_IGNORE (-1.0f)	/* NCCL_ALGO_PROTO_IGNORE */

struct abi_nvl_info {		/* ncclNvlDomainInfo_v5 (v6, v7 the same) */
	int nNvlDomains;
	int minRanksPerNvlDomain;
	int maxRanksPerNvlDomain;
};

/* The constants, with `caps` rows per compute-capability table: 4 in v5
 * and v6, 5 in v7. */
#define ABI_TUNER_CONSTANTS(caps)                                                             \
	double baseLatencies[7][3];                                                           \
	double hwLatencies[3][7][3];                                                          \
	double llMaxBws[caps][3];                                                             \
	double perChMaxRingLL128Bws[caps][3];                                                 \
	double perChMaxTreeLL128Bws[caps][3];                                                 \
	double perChMaxTreeBws[caps][3];                                                      \
	double perChMaxNVLSTreeBws[caps][3]

struct abi_tuner_constants_v5 {
	ABI_TUNER_CONSTANTS(4);
};

struct abi_tuner_constants_v7 {
	ABI_TUNER_CONSTANTS(5);
};

#define ABI_COLL_INFO_V4                                                                      \
	abi_rc (*getCollInfo)(void *ctx, int collType, size_t nBytes, int numPipeOps,         \
			      float **costTable, int numAlgo, int numProto, int regBuff,      \
			      int *nChannels)

/* v2 answers algorithm and protocol itself (-1: NCCL's model picks). */
#define ABI_ALGO_UNDEF (-1)
#define ABI_PROTO_UNDEF (-1)

struct abi_tuner_v2 {
	const char *name;
	abi_rc (*init)(size_t nRanks, size_t nNodes, abi_logger log, void **ctx);
	abi_rc (*getCollInfo)(void *ctx, int collType, size_t nBytes, int collNetSupport,
			      int nvlsSupport, int numPipeOps, int *algorithm, int *protocol,
			      int *nChannels);
	abi_rc (*destroy)(void *ctx);
};

struct abi_tuner_v3 {
	const char *name;
	abi_rc (*init)(size_t nRanks, size_t nNodes, abi_logger log, void **ctx);
	abi_rc (*getCollInfo)(void *ctx, int collType, size_t nBytes, int numPipeOps,
			      float **costTable, int numAlgo, int numProto, int *nChannels);
	abi_rc (*destroy)(void *ctx);
};

struct abi_tuner_v4 {
	const char *name;
	abi_rc (*init)(size_t nRanks, size_t nNodes, abi_logger log, void **ctx);
	ABI_COLL_INFO_V4;
	abi_rc (*destroy)(void *ctx);
};

struct abi_tuner_v5 {
	const char *name;
	abi_rc (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes, abi_logger log,
		       struct abi_nvl_info *nvl, struct abi_tuner_constants_v5 *constants);
	ABI_COLL_INFO_V4;
	abi_rc (*finalize)(void *ctx);
};

#define ABI_CHUNK_SIZE                                                                        \
	abi_rc (*getChunkSize)(void *ctx, int collType, size_t nBytes, int algo, int proto,   \
			       int nChannels, size_t *chunkSize)

struct abi_tuner_v6 {
	const char *name;
	abi_rc (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes, abi_logger log,
		       struct abi_nvl_info *nvl, struct abi_tuner_constants_v5 *constants);
	ABI_COLL_INFO_V4;
	abi_rc (*finalize)(void *ctx);
	ABI_CHUNK_SIZE;
};

struct abi_tuner_v7 {
	const char *name;
	abi_rc (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes, abi_logger log,
		       struct abi_nvl_info *nvl, struct abi_tuner_constants_v7 *constants);
	ABI_COLL_INFO_V4;
	abi_rc (*finalize)(void *ctx);
	ABI_CHUNK_SIZE;
};

_Static_assert(sizeof(struct abi_nvl_info) == 12, "nvl domain info");
_Static_assert(sizeof(struct abi_tuner_constants_v5) == 1152, "tuner constants v5");
_Static_assert(offsetof(struct abi_tuner_constants_v5, hwLatencies) == 168, "v5 hwLatencies");
_Static_assert(offsetof(struct abi_tuner_constants_v5, llMaxBws) == 672, "v5 llMaxBws");
_Static_assert(offsetof(struct abi_tuner_constants_v5, perChMaxNVLSTreeBws) == 1056, "v5 nvls");
_Static_assert(sizeof(struct abi_tuner_constants_v7) == 1272, "tuner constants v7");
_Static_assert(offsetof(struct abi_tuner_constants_v7, perChMaxRingLL128Bws) == 792, "v7 ll128");
_Static_assert(offsetof(struct abi_tuner_constants_v7, perChMaxTreeLL128Bws) == 912, "v7 tree");
_Static_assert(offsetof(struct abi_tuner_constants_v7, perChMaxTreeBws) == 1032, "v7 tree bw");
_Static_assert(offsetof(struct abi_tuner_constants_v7, perChMaxNVLSTreeBws) == 1152, "v7 nvls");
_Static_assert(sizeof(struct abi_tuner_v2) == 32, "tuner v2");
_Static_assert(offsetof(struct abi_tuner_v2, getCollInfo) == 16, "tuner v2 getCollInfo");
_Static_assert(offsetof(struct abi_tuner_v2, destroy) == 24, "tuner v2 destroy");
_Static_assert(sizeof(struct abi_tuner_v3) == 32, "tuner v3");
_Static_assert(sizeof(struct abi_tuner_v4) == 32, "tuner v4");
_Static_assert(sizeof(struct abi_tuner_v5) == 32, "tuner v5");
_Static_assert(sizeof(struct abi_tuner_v6) == 40, "tuner v6");
_Static_assert(offsetof(struct abi_tuner_v6, getChunkSize) == 32, "tuner v6 getChunkSize");
_Static_assert(sizeof(struct abi_tuner_v7) == 40, "tuner v7");
_Static_assert(offsetof(struct abi_tuner_v7, getChunkSize) == 32, "tuner v7 getChunkSize");

/* ---- env --------------------------------------------------------------- */

struct abi_env_v1 {
	const char *name;
	abi_rc (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix);
	abi_rc (*finalize)(void);
	const char *(*getEnv)(const char *name);
};

struct abi_env_v2 {
	const char *name;
	abi_rc (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix,
		       abi_logger log);
	abi_rc (*finalize)(void);
	const char *(*getEnv)(const char *name);
};

_Static_assert(sizeof(struct abi_env_v1) == 32, "env v1");
_Static_assert(sizeof(struct abi_env_v2) == 32, "env v2");
_Static_assert(offsetof(struct abi_env_v2, getEnv) == 24, "env v2 getEnv");

#endif
