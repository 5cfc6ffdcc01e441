/* NCCL_CUMEM_MONITOR and the close-time statistics of NCCL_SM_FREE_VERBOSE.
 * Lines go to NCCL's log at INFO; nothing here changes what moves. */

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "log.h"
#include "monitor.h"
#include "smfree.h"
#include "symmem.h"

static double mib(uint64_t bytes)
{
	return (double)bytes / 1048576.0;
}

/* Bytes per nanosecond are GB/s. */
static double gbps(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / (double)ns : 0.0;
}

/* Staging pools: size, use and peak per GPU. */
static void monitor_pools(const char *when)
{
	char pools[512];

	sm_pool_gpu_describe(pools, sizeof(pools));
	LOG_INFO("NET/symmem monitor: staging pools %s: %s", when, pools);
}

/* The pools are the process's, not a connection's: one line per interval
 * however many connections tick in it. */
static void monitor_pools_tick(uint64_t now, uint64_t interval_ns)
{
	static _Atomic uint64_t last_ns;
	uint64_t last = atomic_load(&last_ns);

	if (now - last < interval_ns || !atomic_compare_exchange_strong(&last_ns, &last, now))
		return;
	monitor_pools("now");
}

void monitor_open(struct monitor_state *m)
{
	const struct config *cfg = config_get();

	/* Read once here: monitor_tick runs for every message. */
	m->interval_ns = cfg && cfg->monitor ? (uint64_t)(cfg->monitor_interval * 1e9) : 0;
	m->start_ns = sm_now_ns();
	m->last_ns = m->start_ns;
	m->last = (struct tp_stats){ 0 };
}

void monitor_tick(struct monitor_state *m, const struct tp_comm *tp, const void *who,
		  int is_send, int dev)
{
	struct tp_stats st;
	uint64_t now;

	if (!m->interval_ns)
		return;
	now = sm_now_ns();
	if (now - m->last_ns < m->interval_ns)
		return;
	tp_get_stats(tp, &st);
	LOG_INFO("NET/symmem monitor: %s comm %p on device %d (%s): last %.2f s %llu messages, "
		 "%.1f MiB, %.2f GB/s, %llu by copy engine in place; since open %llu messages, "
		 "%.1f MiB", is_send ? "send" : "receive", who, dev, tp_comm_backend(tp),
		 (double)(now - m->last_ns) / 1e9,
		 (unsigned long long)(st.messages - m->last.messages),
		 mib(st.bytes - m->last.bytes), gbps(st.bytes - m->last.bytes, now - m->last_ns),
		 (unsigned long long)(st.direct - m->last.direct), (unsigned long long)st.messages,
		 mib(st.bytes));
	m->last = st;
	m->last_ns = now;
	monitor_pools_tick(now, m->interval_ns);
}

/* " name N us" for a stage with messages, "" for one without. */
static void stage_text(char *buf, size_t len, const char *name, const struct sm_hist *h)
{
	double med = sm_hist_median(h);

	if (med < 0)
		snprintf(buf, len, "%s", "");
	else if (med >= SM_HIST_BUCKETS)
		snprintf(buf, len, ", %s median > %d us", name, SM_HIST_BUCKETS - 1);
	else
		snprintf(buf, len, ", %s median %.1f us", name, med);
}

void monitor_close(const struct monitor_state *m, const struct tp_comm *tp, const void *who,
		   int is_send, int dev)
{
	const struct config *cfg = config_get();
	char wait[80], copy[80], notice[80], slots[80] = "", watched[80] = "";
	struct tp_stats st;

	if (!cfg || (!cfg->verbose && !cfg->monitor))
		return;
	tp_get_stats(tp, &st);
	/* Where a small message's time goes: waiting for the peer's receive,
	 * the copy engine (isend to landed), and the hop to the receiver. */
	stage_text(wait, sizeof(wait), "waited for the receive", &st.stage[TP_STAGE_RECV_WAIT]);
	stage_text(copy, sizeof(copy), "isend to copy landed", &st.stage[TP_STAGE_COPY]);
	stage_text(notice, sizeof(notice), "landed to seen here", &st.stage[TP_STAGE_NOTICE]);
	/* Over TCP: copies left in NCCL's process can deadlock against queued
	 * CUDA-graph replays (transport/tcp_bounce.c). */
	if (st.slot_copies)
		snprintf(slots, sizeof(slots), ", %llu TCP slot copies (%llu in NCCL's process)",
			 (unsigned long long)st.slot_copies, (unsigned long long)st.slot_local);
	/* Receives the watch word ended before the sender saw them land. */
	if (!is_send && st.direct)
		snprintf(watched, sizeof(watched), ", %llu seen by watch word",
			 (unsigned long long)st.watched);
	LOG_INFO("NET/symmem %s comm %p on device %d closed: %llu messages (%llu by copy engine "
		 "in place, %llu of them in the copy helper, %llu through the staging pool), %.1f MiB, "
		 "%.2f GB/s over its life, post-to-done mean %.1f us max %.1f us, %llu isend "
		 "retries%s%s%s%s%s", is_send ? "send" : "receive", who, dev,
		 (unsigned long long)st.messages, (unsigned long long)st.direct,
		 (unsigned long long)st.helper, (unsigned long long)st.pooled, mib(st.bytes),
		 gbps(st.bytes, sm_now_ns() - m->start_ns),
		 st.messages ? (double)st.lat_ns_sum / (double)st.messages / 1e3 : 0.0,
		 (double)st.lat_ns_max / 1e3, (unsigned long long)st.retries, wait, copy, notice,
		 watched, slots);
}

void monitor_finalize(void)
{
	const struct config *cfg = config_get();

	if (!cfg || (!cfg->verbose && !cfg->monitor))
		return;
	LOG_INFO("NET/symmem monitor: at finalize %d copy engine(s), %d exported allocation(s), "
		 "%d peer mapping(s), %d connect(s) in progress, %d staging pool(s) live in this "
		 "process (0 each once every communicator is destroyed)", smf_engine_count(),
		 sm_export_count(), sm_import_count(), tp_pending_connects(), sm_pool_gpu_count());
	monitor_pools("at finalize");
}
