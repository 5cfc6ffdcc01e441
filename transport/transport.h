/* transport: connections between two processes and the bytes they carry.
 *
 * Owns: the connection handle, connection setup, registrations and their
 * announcements, and the backends that move bytes (shared memory and copy
 * engines, TCP, ibverbs).  Must not touch: NCCL's structs and results,
 * environment variables (plugin/config/ hands it values), plugin/.
 *
 * One connection is one-way: a sender comm and a receiver comm.  Setup is
 * non-blocking on both ends (a NULL comm with SM_OK means "call again"), so
 * one thread may drive both.  On one host the control channel is a Unix
 * socket and the data moves through a shared-memory ring; between hosts (or
 * when forced) the data moves over the TCP control connection itself.
 * Receives and sends match in posting order.  Every function returns an
 * enum sm_status; the message is in sm_last_error().
 *
 * GPU memory: a receiver registers its buffers with tp_register(); on a
 * shared-memory connection that exports the allocation to the sender,
 * which maps it once and then moves each message with one copy-engine copy
 * straight into the receive buffer (no ring, no host bounce). */
#ifndef SYMMEM_TRANSPORT_H
#define SYMMEM_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "symmem.h"

#define TP_HANDLE_SIZE 128
#define TP_MAX_REQUESTS 32
#define TP_OFFER_BYTES 16

enum tp_backend {
	TP_BACKEND_AUTO = 0,
	TP_BACKEND_SHM,
	TP_BACKEND_TCP,
	TP_BACKEND_IB,			/* ibverbs between hosts */
	TP_BACKEND_COUNT
};

struct tp_options {
	int backend;			/* enum tp_backend */
	/* ibverbs between hosts: 0 = never (TCP), 1 = where both ends can
	 * (else TCP), 2 = required (a connection that cannot fails). */
	int ib;
	const char *ib_hca;		/* NCCL_IB_HCA syntax, "" = every device */
	int ib_gid_index;		/* NCCL_IB_GID_INDEX, -1 = chosen per port */
	int ib_timeout;			/* NCCL_IB_TIMEOUT, 0..31 (-1: 20, NCCL's) */
	int ib_retry;			/* NCCL_IB_RETRY_CNT, 0..7 (-1 or unset: 7) */
	int ib_sl;			/* NCCL_IB_SL, 0..15 */
	int ib_tc;			/* NCCL_IB_TC, 0..255 */
	int dev;			/* the plugin's device: picks the RDMA device */
	const char *gpu_pci;		/* its GPU's sysfs path, "" or NULL = unknown */
	uint64_t ring_size;		/* shared-memory data ring per connection */
	uint64_t chunk_size;		/* copy granularity in that ring */
	double connect_timeout;		/* seconds a connect/accept may take */
	const char *ifname;		/* NCCL_SOCKET_IFNAME syntax, or "" */
	int copy_streams;		/* copy-engine streams per sending connection */
	uint64_t split_min;		/* copies this large are split across them (0 = never) */
	int copy_depth;			/* copy helper: copies queued per stream at most */
	int batch;			/* copy helper: copies per copy-engine call at most */
	uint64_t merge_max;		/* copy helper: largest copy merged from consecutive
					 * requests (0 = no merging) */
	uint64_t phase_ns;		/* copy helper: time per destination GPU (0 = off) */
	int landing;			/* copy helper: landings by stream writes, not events */
	double stall_report;		/* seconds without progress before a WARN (0 = never) */
	double copy_timeout;		/* seconds a started copy may take before its
					 * connection fails (0 = COPY_LIMIT_NS) */
	uint64_t trace_ns;		/* log slower messages and longer test pauses (0 = off) */
	int gpu;			/* GPU buffers may come: take the copy engine at setup */
	int no_direct;			/* never export GPU registrations to the peer:
					 * GPU data bounces through the host ring */
	const char *copy_helper;	/* symmem-copyd to run copies in, or NULL */
	int helper_all_gpus;		/* start it without CUDA_VISIBLE_DEVICES */
	int verbose;			/* log each data path a connection takes, once */
	int zero_copy;			/* 0: GPU receives always land in the staging pool */
	int host_in_place;		/* announce exportable host receive buffers too */
	int fault_tolerance;		/* retry unreachable listeners until the deadline */
	int cumem_host;			/* host staging in cuMem host memory, not a memfd */
	struct sm_pool_config pool;	/* that pool's sizes (NCCL_CUMEM_*) */
	const void *owner;		/* who connects (NCCL's context), or NULL: see
					 * tp_connect_abandon() */
};

struct tp_listener;
struct tp_comm;
struct tp_req;
struct tp_region;

enum tp_mem {
	TP_MEM_HOST = 0,
	TP_MEM_CUDA = 1,
};

/* The handle: what a listener publishes and a connector consumes. */
struct tp_handle_info {
	uint64_t host_id;
	uint8_t token[16];
	int dev;
	int pid;
	char uds_name[32];
	int no_tcp;			/* no TCP port: peers of this host only (then
					 * family, port and addr are 0) */
	int family;			/* AF_INET or AF_INET6 */
	uint16_t port;			/* host byte order */
	uint8_t addr[16];
	/* A backend's offer beyond what the sockets carry (tp_ops.offer):
	 * the listener takes that kind too, and a connector needs these
	 * bytes to use it.  The handle has room for one kind's. */
	int offered;
	uint8_t offer[TP_OFFER_BYTES];
};

void tp_handle_encode(const struct tp_handle_info *info, void *handle);
/* Checks magic, version, checksum and every field; never trusts the bytes.
 * Takes the local form too (at the start of TP_HANDLE_SIZE bytes, the rest
 * zero): no_tcp, no RDMA endpoint. */
int tp_handle_decode(const void *handle, struct tp_handle_info *info);
/* SM_OK where the handle names a TCP port, which every kind between hosts
 * sets up over; else the refusal for a connector that was told to use
 * `kind` (its words for the log), or runs on another host. */
int tp_handle_tcp(const struct tp_handle_info *info, const struct tp_options *opt,
		  const char *kind);

/* The local form of a handle tp_listen() wrote: only what a connector on
 * the listener's host needs (host, token, socket name, pid, device), so
 * that NCCL's 128 bytes also hold another net plugin's handle.  A
 * connector elsewhere cannot use it: tp_connect() fails.  Writes
 * TP_HANDLE_LOCAL_SIZE bytes to `local`. */
#define TP_HANDLE_LOCAL_SIZE 48
int tp_handle_shrink(const void *handle, void *local);

/* Compact forms of a handle (the local one, plugin/inner_form.c) keep only
 * the random part of tp_listen()'s socket name: TP_UDS_RANDOM bytes, -1
 * for a name tp_listen() did not make.  unpack writes the whole name. */
#define TP_UDS_RANDOM 8
int tp_uds_pack(const char *name, uint8_t out[TP_UDS_RANDOM]);
void tp_uds_unpack(const uint8_t in[TP_UDS_RANDOM], char *name, size_t len);
/* CRC-32 (IEEE), running: 0 to start, the last result to go on. */
uint32_t tp_crc32(uint32_t crc, const void *p, size_t n);

/* This host's identity for the shared-memory path: a hash of the kernel
 * boot id and this process's network and PID namespaces (hostid.c says
 * why); computed once.  tp_host_id_read() computes it afresh (tests). */
uint64_t tp_host_id(void);
uint64_t tp_host_id_read(void);

int tp_listen(const struct tp_options *opt, int dev, void *handle, struct tp_listener **out);
int tp_accept(struct tp_listener *l, struct tp_comm **out);
void tp_close_listener(struct tp_listener *l);

/* `handle` must hold the same bytes on every call for one connection. */
int tp_connect(const struct tp_options *opt, const void *handle, struct tp_comm **out);
/* Connects in progress in this process (leak checks). */
int tp_pending_connects(void);
/* Of those, how many sent all of their setup and wait for the reply (tests). */
int tp_connects_awaiting_reply(void);
/* Frees the connects in progress that `owner` (tp_options.owner, not
 * NULL) started and never finished: NCCL gives up on a connect after an
 * abort and never calls again with its handle.  Returns how many. */
int tp_connect_abandon(const void *owner);

/* Frees the comm and every request still in flight. */
void tp_close(struct tp_comm *c);

/* Memory used by this connection's sends or receives.  GPU memory on the
 * receiving end of a shared-memory connection is exported to the sender
 * (fails if it cannot be); on a TCP connection it is staged through a host
 * bounce buffer with synchronous driver copies. */
int tp_register(struct tp_comm *c, void *data, size_t size, int mem, struct tp_region **out);
/* GPU memory NCCL hands over as DMA-BUF `fd` (`offset`: where `data` sits in
 * it; NCCL closes the fd once this returns): an ibverbs connection
 * registers the fd with its device, any other connection ignores it and
 * registers as tp_register(TP_MEM_CUDA) does. */
int tp_register_dmabuf(struct tp_comm *c, void *data, size_t size, int fd, uint64_t offset,
		       struct tp_region **out);
/* `c` may be NULL when the connection was closed first (NCCL abort). */
void tp_deregister(struct tp_comm *c, struct tp_region *r);
/* 1 if [data, data + size) lies inside the region. */
int tp_region_covers(const struct tp_region *r, const void *data, size_t size);

/* `reg` is the registration holding the buffer, NULL for unregistered host
 * memory.  *out is NULL when the send cannot start yet (no receive posted,
 * or the peer's registration has not arrived). */
int tp_isend(struct tp_comm *c, const void *data, size_t size, const struct tp_region *reg,
	     struct tp_req **out);
/* `reg` is not const: the first receive into a registration announces it
 * to the sender (registering does not, so it never waits for the sender),
 * and *out is NULL while that cannot be written yet. */
int tp_irecv(struct tp_comm *c, void *data, size_t size, struct tp_region *reg,
	     struct tp_req **out);
/* On done the request is released; *size is the byte count moved. */
int tp_test(struct tp_req *r, int *done, size_t *size);

/* A short description ("shm", "tcp") for log lines. */
const char *tp_comm_backend(const struct tp_comm *c);

/* Where a copy-engine message's time went on a shared-memory connection,
 * per stage (TP_STAGE_RECV_WAIT: every send), for medians in the close line. */
enum tp_stage {
	TP_STAGE_RECV_WAIT = 0,	/* send: first isend try -> the peer's receive was posted */
	TP_STAGE_COPY,		/* send: isend -> this side saw the copy landed */
	TP_STAGE_NOTICE,	/* receive: the sender saw it landed -> this side did */
	TP_STAGE_COUNT
};

/* What a connection did, for NCCL_SM_FREE_VERBOSE / monitor lines. */
struct tp_stats {
	uint64_t messages;
	uint64_t bytes;
	uint64_t direct;	/* messages moved by a copy engine in place */
	uint64_t helper;	/* of those, by the copy helper process */
	uint64_t pooled;	/* receives copied on out of the staging pool */
	uint64_t watched;	/* receives seen landed by the watch word, before the sender */
	uint64_t retries;	/* isend calls answered "not yet" */
	uint64_t slot_copies;	/* TCP: copies to or from the bounce slots */
	uint64_t slot_local;	/* ... of those, in NCCL's process */
	uint64_t lat_ns_sum;	/* post to completion seen by test() */
	uint64_t lat_ns_max;
	struct sm_hist stage[TP_STAGE_COUNT];
};
void tp_get_stats(const struct tp_comm *c, struct tp_stats *out);

/* namelist.c: 1 if NCCL's list syntax `spec` ("[^][=]item,...": prefixes, or
 * exact names after '=', '^' excludes) selects `name`; with port_suffix an
 * item's ":port" is not part of the name, and an exclusion item with a
 * port leaves the device in.  An empty list selects nothing. */
int tp_namelist_selects(const char *spec, const char *name, int port_suffix);
/* namelist.c: the port an inclusion list names for `name` ("mlx5_0:2"
 * gives 2), or 0 where it names none (or is an exclusion list). */
int tp_namelist_port(const char *spec, const char *name);
/* namelist.c: 1 if an exclusion list leaves out port `port` of `name`
 * ("^mlx5_0:1" leaves out port 1, "^mlx5_0" every port). */
int tp_namelist_port_excluded(const char *spec, const char *name, int port);
/* rdma.c: 1 if NCCL_IB_HCA `spec` ("" = all; NCCL's syntax: [^][=]name[:port],...,
 * a prefix match unless '=') selects the RDMA device `name`. */
int tp_hca_selected(const char *spec, const char *name);
/* rdma.c: 1 if this build has the ibverbs backend (libibverbs' headers
 * were there and -Dibverbs was not disabled), else 0. */
int tp_rdma_built(void);
/* This host's RDMA devices (comma-separated in found[]) and those `spec`
 * selects (selected[]); returns how many are selected.  why[] says what
 * is missing when there are none at all. */
int tp_rdma_devices(const char *spec, char *found, size_t flen, char *selected, size_t slen,
		    char *why, size_t wlen);

/* ib.c: 1 if the RDMA device the plugin's device opt->dev would use
 * (opt->ib_hca, opt->gpu_pci, opt->ib_gid_index) registers GPU memory
 * through DMA-BUF: its driver answered the probe that way (asked once per
 * device and process).  desc[] names the device and the answer, or why
 * there is no device. */
int tp_ib_dmabuf(const struct tp_options *opt, char *desc, size_t len);

/* rdma.c: which of n RDMA devices (their sysfs paths, "" = unknown) sits
 * closest to the GPU at sysfs path `gpu` on the PCI tree (most path
 * components in common); equally close ones are handed out by `which`
 * (the plugin's device number) in turn, and so is every device when the
 * GPU's path is unknown. */
int tp_nic_closest(const char *gpu, const char *const *nics, int n, int which);

/* gid_net.c: whether RDMA port address `mine` is on the network of the
 * peer's `peer` (1), is not (0), or cannot be told (-1: a zero address,
 * an IPv4 GID against another kind, or an IPv4 address no interface here
 * holds).  IPv4 GIDs compare under the local interface's netmask, others
 * by their 64-bit subnet prefix. */
int tp_gid_same_net(const uint8_t mine[16], const uint8_t peer[16]);
/* The rule underneath: the first prefix_bits bits agree (-1 as above). */
int tp_gid_net_match(const uint8_t mine[16], const uint8_t peer[16], int prefix_bits);
/* The netmask length of the local interface holding IPv4 address `addr`
 * (network order), -1 when none does. */
int tp_ipv4_prefix_len(const uint8_t addr[4]);

/* Counters for the leak checks: live connections' remote regions. */
int tp_remote_region_count(const struct tp_comm *c);

#endif
