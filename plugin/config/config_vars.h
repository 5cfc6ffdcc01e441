/* Every variable the plugin reads into struct config, one row each, in
 * the order config_describe() lists them.
 *
 * An X-macro: CONFIG_VARS(X) calls X(name, kind, field, default, min, max,
 * owner) once per row.
 *  - kind: BOOL, TRISTATE (-1 auto, 0 off, 1 on), INT, SIZE (bytes),
 *    FACTOR (decimal, min..max), SECONDS (decimal, 0 < x <= max), BACKEND
 *    (enum config_backend), HCA_LIST and IFNAME_LIST (NCCL's device list
 *    syntax), PATH (an absolute file name), LIBRARY (a library name or file
 *    name, as dlopen takes it); the accepted form of each is
 *    config_parse.c's, and its error messages say it.
 *  - field: where the value lives in struct config (its type must fit
 *    the kind: config.c checks at compile time).
 *  - min, max: the accepted range (INT, SIZE, FACTOR, SECONDS); 0 where
 *    the kind has none.  The lists, PATH and LIBRARY default to "" (unset).
 *  - owner: OWN, the plugin's (a malformed value fails init), or NCCL,
 *    NCCL's own (read as NCCL reads it, never refused: config_parse.h).
 * The comment above each row says what it does; docs/env.md says it at
 * length (test/unit/test_config_docs.c checks every row is there), and
 * docs/performance.md gives the figures behind the defaults. */
#ifndef SYMMEM_PLUGIN_CONFIG_VARS_H
#define SYMMEM_PLUGIN_CONFIG_VARS_H

#include <stdint.h>

#include "config.h"

#define SZ_KIB (1ULL << 10)
#define SZ_MIB (1ULL << 20)
#define SZ_GIB (1ULL << 30)

#define CONFIG_VARS(X) \
	/* 1: SM-saving mode, the tuner caps NCCL's collective channels */ \
	X(NCCL_PASS_SM, BOOL, pass_sm, 0, 0, 0, OWN) \
	/* NCCL's cuMem (1) or cudaMalloc (0) buffers; the plugin's pool follows */ \
	X(NCCL_CUMEM_ENABLE, TRISTATE, cumem_enable, CONFIG_AUTO, 0, 0, NCCL) \
	/* 1: host staging in cuMem host memory, else a shared memfd */ \
	X(NCCL_CUMEM_HOST_ENABLE, TRISTATE, cumem_host_enable, CONFIG_AUTO, 0, 0, NCCL) \
	/* the staging pool's first segment */ \
	X(NCCL_CUMEM_POOL_SIZE, SIZE, pool_size, 64 * SZ_MIB, 0, UINT64_MAX, OWN) \
	/* 1: the first segment is made when the first receiving connection opens */ \
	X(NCCL_CUMEM_PREALLOC, BOOL, pool_prealloc, 0, 0, 0, OWN) \
	/* each further pool segment is this many times the one before */ \
	X(NCCL_CUMEM_GROWTH_FACTOR, FACTOR, pool_growth, 2.0, 1.0, 16.0, OWN) \
	/* the pool's cap, every segment together (>= NCCL_CUMEM_POOL_SIZE) */ \
	X(NCCL_CUMEM_MAX_SIZE, SIZE, pool_max, 4 * SZ_GIB, 0, UINT64_MAX, OWN) \
	/* whole idle segments are given back while more than this is idle */ \
	X(NCCL_CUMEM_TRIM_THRESHOLD, SIZE, pool_trim, 256 * SZ_MIB, 0, UINT64_MAX, OWN) \
	/* 1: connections and pools log their traffic and use */ \
	X(NCCL_CUMEM_MONITOR, BOOL, monitor, 0, 0, 0, OWN) \
	/* seconds between two such lines per connection */ \
	X(NCCL_CUMEM_MONITOR_INTERVAL, SECONDS, monitor_interval, 10.0, 0, 86400.0, OWN) \
	/* 1: log every variable and each connection's path and totals */ \
	X(NCCL_SM_FREE_VERBOSE, BOOL, verbose, 0, 0, 0, OWN) \
	/* 0: every GPU receive goes through a staging-pool piece (two copies) */ \
	X(NCCL_ZERO_COPY, BOOL, zero_copy, 1, 0, 0, OWN) \
	/* 0: host memory only, one device (NCCL_PTR_HOST) */ \
	X(NCCL_DMA_ENABLE, BOOL, dma_enable, 1, 0, 0, OWN) \
	/* 0: GPU data bounces through the connection's shared-memory ring */ \
	X(NCCL_DIRECT_PATH, BOOL, direct_path, 1, 0, 0, OWN) \
	/* 1: an unreachable listener is tried again until the connect timeout */ \
	X(NCCL_ENABLE_FAULT_TOLERANCE, BOOL, fault_tolerance, 0, 0, 0, OWN) \
	/* the RDMA devices (and ports) the ibverbs backend may use */ \
	X(NCCL_IB_HCA, HCA_LIST, ib_hca, 0, 0, 0, NCCL) \
	/* the GID the queue pairs use; -1: chosen per port (RoCE v2 and IPv4 first) */ \
	X(NCCL_IB_GID_INDEX, INT, ib_gid_index, -1, -1, 255, NCCL) \
	/* queue-pair retry timeout, 4.096 us x 2^n; 0: no retry timer (ibverbs') */ \
	X(NCCL_IB_TIMEOUT, INT, ib_timeout, 20, 0, 31, NCCL) \
	/* queue-pair retries */ \
	X(NCCL_IB_RETRY_CNT, INT, ib_retry, 7, 0, 7, NCCL) \
	/* queue-pair service level */ \
	X(NCCL_IB_SL, INT, ib_sl, 0, 0, 15, NCCL) \
	/* queue-pair traffic class */ \
	X(NCCL_IB_TC, INT, ib_tc, 0, 0, 255, NCCL) \
	/* the interfaces whose address the TCP listener publishes */ \
	X(NCCL_SOCKET_IFNAME, IFNAME_LIST, socket_ifname, 0, 0, 0, NCCL) \
	/* copy-engine streams per GPU and process; one keeps the helpers' phases true */ \
	X(NCCL_SYMMEM_STREAMS, INT, streams, 1, 1, 16, OWN) \
	/* copy granularity of the host-memory ring */ \
	X(NCCL_SYMMEM_CHUNK_SIZE, SIZE, chunk_size, 512 * SZ_KIB, 4 * SZ_KIB, SZ_GIB, OWN) \
	/* in-process copies this large are cut over the streams; 0: never */ \
	X(NCCL_SYMMEM_SPLIT_SIZE, SIZE, split_min, 0, 0, SZ_GIB, OWN) \
	/* copies the helper queues per stream; two: the one running and the next */ \
	X(NCCL_SYMMEM_COPY_DEPTH, INT, copy_depth, 2, 1, 1024, OWN) \
	/* the largest copy the helper makes of requests that continue each other; 0: none */ \
	X(NCCL_SYMMEM_MERGE_SIZE, SIZE, merge_max, 64 * SZ_MIB, 0, SZ_GIB, OWN) \
	/* copies one batch call carries, paying the engine's fixed cost once; 1: a call each */ \
	X(NCCL_SYMMEM_BATCH, INT, batch, 16, 1, 64, OWN) \
	/* with three GPUs or more, helpers serve one destination this long in turn; 0: off */ \
	X(NCCL_SYMMEM_PHASE_US, INT, phase_us, 200, 0, 100000, OWN) \
	/* 1: the helper reports each copy's landing by stream writes the sender and the receiver \
	 * poll (landing and watch words); 0: events */ \
	X(NCCL_SYMMEM_LANDING_WORDS, BOOL, landing_words, 1, 0, 0, OWN) \
	/* 1: a GPU sender writes exportable host receive buffers in place, not via the ring */ \
	X(NCCL_SYMMEM_HOST_IN_PLACE, BOOL, host_in_place, 0, 0, 0, OWN) \
	/* the shared-memory ring per connection for host buffers (>= the chunk size) */ \
	X(NCCL_SYMMEM_HOST_RING_SIZE, SIZE, host_ring_size, 4 * SZ_MIB, 64 * SZ_KIB, SZ_GIB, OWN) \
	/* seconds a connect or accept may take */ \
	X(NCCL_SYMMEM_CONNECT_TIMEOUT, SECONDS, connect_timeout, 120.0, 0, 86400.0, OWN) \
	/* seconds a connection may wait without progress before it is reported */ \
	X(NCCL_SYMMEM_STALL_REPORT, SECONDS, stall_report, 60.0, 0, 86400.0, OWN) \
	/* seconds a copy may take to land before its connection fails: an error beats a hang */ \
	X(NCCL_SYMMEM_COPY_TIMEOUT, SECONDS, copy_timeout, 60.0, 0, 86400.0, OWN) \
	/* debugging: messages and pauses slower than this many us are logged; 0: off */ \
	X(NCCL_SYMMEM_TRACE_US, INT, trace_us, 0, 0, 60000000, OWN) \
	/* auto, shm (one host only), tcp or ib (also on one host) */ \
	X(NCCL_SYMMEM_BACKEND, BACKEND, backend, CONFIG_BACKEND_AUTO, 0, 0, OWN) \
	/* NCCL_PASS_SM's cap on a collective's channels */ \
	X(NCCL_SYMMEM_PASS_SM_CHANNELS, INT, pass_sm_channels, 16, 1, 64, OWN) \
	/* share per rank and channel up to which the tuner runs Ring LL128 for Simple */ \
	X(NCCL_SYMMEM_LL128_CHUNK, SIZE, ll128_chunk, 512 * SZ_KIB, 0, SZ_GIB, OWN) \
	/* between hosts, the largest all_reduce or broadcast the tuner leaves on LL */ \
	X(NCCL_SYMMEM_LL_MAX, SIZE, ll_max, 32 * SZ_KIB, 0, SZ_GIB, OWN) \
	/* 0: the plugin sets none of NCCL's variables, bar the env plugin's routing */ \
	X(NCCL_SYMMEM_NCCL_DEFAULTS, BOOL, nccl_defaults, 1, 0, 0, OWN) \
	/* 1: copies run in symmem-copyd, a helper process per GPU */ \
	X(NCCL_SYMMEM_COPY_HELPER, BOOL, copy_helper, 1, 0, 0, OWN) \
	/* where symmem-copyd is; unset: next to the library, then libexec */ \
	X(NCCL_SYMMEM_COPY_HELPER_PATH, PATH, copy_helper_path, 0, 0, 0, OWN) \
	/* 1: the helper runs without a CUDA_VISIBLE_DEVICES that hides its peers */ \
	X(NCCL_SYMMEM_HELPER_ALL_GPUS, BOOL, helper_all_gpus, 1, 0, 0, OWN) \
	/* register user buffers on ring and tree connections; auto: with NCCL_PASS_SM */ \
	X(NCCL_SYMMEM_COLL_REGISTER, TRISTATE, coll_register, CONFIG_AUTO, 0, 0, OWN) \
	/* another net plugin, carrying every connection to another host */ \
	X(NCCL_SYMMEM_INNER_NET, LIBRARY, inner_net, 0, 0, 0, OWN)

#endif
