/* A stand-in for the copy engine (smfree/copy_engine.c) for tests of the
 * transport's copy bookkeeping on hosts without a GPU.  It links in place
 * of smfree's library: a copy is a memcpy made when a later test finds it
 * landed, events come from a pool of the test's size, and starts or
 * landings can be held back on cue.  The sockets, threads and transport
 * code around it are the real ones. */
#ifndef TEST_ENGINE_STANDIN_H
#define TEST_ENGINE_STANDIN_H

struct standin_engine {
	int pool;		/* events in the pool (copies in flight at most) */
	int lag;		/* a copy lands on one of its first lag + 1 tests */
	int refuse_pct;		/* starts refused although an event is free */
	const void *hold_dst;	/* copies into [hold_dst, + hold_len) do not land */
	size_t hold_len;
	int hold_nth;		/* the copy started n-th (from 1) does not land while set */
	int out;		/* events taken now */
	int starts;		/* copies started, ever */
	int refs;		/* references to the engine held now (get, hold, put) */
	/* A copy helper: ranges named by smf_range_add (host memfds mapped
	 * here, other shares by their address in this process). */
	int helper;		/* smf_engine_helper_pid() reports one */
	int ranges;		/* ranges named now */
	int range_starts;	/* copies started between two ranges, ever */
	/* Watch words (smf_copy_start_watched): written when the copy lands,
	 * or with watch_at_once the copy lands and its word is written as it
	 * starts, before the sender ever tests it. */
	int watch_at_once;
	int watches;		/* watch words written, ever */
};

extern struct standin_engine standin_engine;

/* Back to a large pool, no lag, no refusals, no hold, counters zero;
 * `seed` seeds the lag and refusal choices. */
void standin_engine_reset(unsigned seed);

#endif
