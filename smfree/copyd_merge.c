/* The copy helper's waiting requests, grouped into the copies it will
 * queue: back to back, or as the evenly spaced rows of one 2D copy.
 *
 * Every cuMemcpyAsync costs the copy engine a fixed ~2.5 us on top of the
 * bytes (measured: 2 MiB pieces move 249 GB/s each way when both GPUs
 * push, whole 512 MiB copies 390; bench/results/coalesce.md).  NCCL's
 * pipeline hands the plugin one request per step, 2 MiB with the
 * plugin's defaults.  Consecutive steps of a connection sit next to each
 * other in NCCL's per-connection buffers, and a fixed number of slots
 * apart in its shared send/recv buffers.  A request that continues a
 * waiting copy exactly (same two mappings, the next bytes or the next
 * row on both sides) joins it: the same bytes move with one fixed cost.
 * Copies that do not continue each other (other channels' buffers: other
 * allocations, which no 2D copy may span) still share one batch call
 * (cd_queue_take_batch): the engine then pays its fixed cost about once
 * per call, not per copy (test/probe/ce_shapes.cu). */
#include <string.h>

#include "copyd_proto.h"

/* How many of the newest waiting copies a request looks at for the copy
 * it continues: all of them (a 4-GPU alltoall kept up to 233 waiting,
 * more than the 64 this used to look at). */
#define FIND_WINDOW CD_SLOTS

/* A batch call holds a whole 2D copy's rows. */
_Static_assert(CD_MERGE_MAX <= CD_BATCH_MAX, "a 2D copy's rows must fit one batch call");

void cd_queue_init(struct cd_queue *q, uint64_t merge_max)
{
	memset(q, 0, sizeof(*q));
	q->merge_max = merge_max;
}

/* Where the k-th waiting copy sits in the ring of groups. */
static unsigned slot_of(const struct cd_queue *q, unsigned k)
{
	return (q->head + k) % CD_SLOTS;
}

static struct cd_group *group_at(struct cd_queue *q, unsigned k)
{
	return &q->group[slot_of(q, k)];
}

/* Room for r in g within the caps. */
static int has_room(const struct cd_group *g, const struct cd_pending *r, uint64_t max)
{
	return g->members < CD_MERGE_MAX && g->len < max && r->len <= max - g->len;
}

/* r starts where back-to-back g ends, on both sides. */
static int adjoins(const struct cd_group *g, const struct cd_pending *r)
{
	return !g->width && g->src_off + g->len == r->src_off && g->dst_off + g->len == r->dst_off;
}

/* r is g's next row: the same width, one pitch on from g's last row on
 * both sides.  A single request starts rows with any spacing that keeps
 * rows apart and is at most CD_STRIDE_MAX widths. */
static int next_row(const struct cd_group *g, const struct cd_pending *r)
{
	uint64_t ds, dd;

	if (g->width)
		return r->len == g->width &&
		       r->src_off == g->src_off + (uint64_t)g->members * g->spitch &&
		       r->dst_off == g->dst_off + (uint64_t)g->members * g->dpitch;
	if (g->members != 1 || r->len != g->len || r->src_off <= g->src_off ||
	    r->dst_off <= g->dst_off)
		return 0;
	ds = r->src_off - g->src_off;
	dd = r->dst_off - g->dst_off;
	return ds >= g->len && dd >= g->len && ds / CD_STRIDE_MAX <= g->len &&
	       dd / CD_STRIDE_MAX <= g->len && ds <= CD_PITCH_MAX && dd <= CD_PITCH_MAX;
}

/* Adds r to g as its last member. */
static void join(struct cd_queue *q, struct cd_group *g, const struct cd_pending *r, int row)
{
	if (row && !g->width) {
		g->width = g->len;
		g->spitch = r->src_off - g->src_off;
		g->dpitch = r->dst_off - g->dst_off;
	}
	q->next[g->last] = r->slot;
	g->last = r->slot;
	g->len += r->len;
	g->members++;
}

uint64_t cd_group_src_span(const struct cd_group *g)
{
	return g->width ? (uint64_t)(g->members - 1) * g->spitch + g->width : g->len;
}

uint64_t cd_group_dst_span(const struct cd_group *g)
{
	return g->width ? (uint64_t)(g->members - 1) * g->dpitch + g->width : g->len;
}

void cd_queue_add(struct cd_queue *q, const struct cd_pending *r)
{
	struct cd_group *g;

	q->next[r->slot] = CD_SLOTS;
	q->mlen[r->slot] = r->len;
	for (unsigned k = 0; q->merge_max && k < q->n && k < FIND_WINDOW; k++) {
		g = group_at(q, q->n - 1 - k);
		if (g->src_id != r->src_id || g->dst_id != r->dst_id || !has_room(g, r, q->merge_max))
			continue;
		if (adjoins(g, r)) {
			join(q, g, r, 0);
			return;
		}
		if (next_row(g, r)) {
			join(q, g, r, 1);
			return;
		}
	}
	/* The helper takes at most CD_SLOTS requests at once: room is left. */
	g = group_at(q, q->n++);
	memset(g, 0, sizeof(*g));
	g->lead = r->slot;
	g->last = r->slot;
	g->src_id = r->src_id;
	g->dst_id = r->dst_id;
	g->dst_key = r->dst_key;
	g->src_off = r->src_off;
	g->dst_off = r->dst_off;
	g->len = r->len;
	g->members = 1;
}

const struct cd_group *cd_queue_at(const struct cd_queue *q, int k)
{
	if (k < 0 || (unsigned)k >= q->n)
		return NULL;
	return &q->group[slot_of(q, (unsigned)k)];
}

int cd_queue_pick_key(const struct cd_queue *q, uint32_t key)
{
	if (!q->n)
		return -1;
	for (unsigned k = 0; k < q->n && k < CD_PICK_WINDOW; k++)
		if (q->group[slot_of(q, k)].dst_key == key)
			return (int)k;
	return 0;
}

void cd_queue_remove(struct cd_queue *q, int k)
{
	if (k < 0 || (unsigned)k >= q->n)
		return;
	/* Close the gap from the old end: the copies before k move up one. */
	for (unsigned i = (unsigned)k; i > 0; i--)
		*group_at(q, i) = *group_at(q, i - 1);
	q->head = (q->head + 1) % CD_SLOTS;
	q->n--;
}

int cd_queue_take(struct cd_queue *q, int k, uint64_t max_len, struct cd_group *out)
{
	struct cd_group *g;
	uint32_t cut;
	uint64_t len;
	int members = 1;

	if (k < 0 || (unsigned)k >= q->n)
		return -1;
	g = group_at(q, (unsigned)k);
	/* The members a copy of at most max_len holds: walk the chain. */
	cut = g->lead;
	len = q->mlen[cut];
	while (cut != g->last && len + q->mlen[q->next[cut]] <= max_len) {
		cut = q->next[cut];
		len += q->mlen[cut];
		members++;
	}
	*out = *g;
	if (cut == g->last) {
		cd_queue_remove(q, k);
		return 0;
	}
	out->last = cut;
	out->len = len;
	out->members = members;
	/* The rest starts where the front ends (a row on, when strided). */
	g->lead = q->next[cut];
	g->src_off += g->width ? (uint64_t)members * g->spitch : len;
	g->dst_off += g->width ? (uint64_t)members * g->dpitch : len;
	g->len -= len;
	g->members -= members;
	q->next[cut] = CD_SLOTS;
	return 0;
}

unsigned cd_group_copies(const struct cd_group *g)
{
	return g->width ? (unsigned)g->members : 1;
}

uint64_t cd_small_rows(uint64_t len)
{
	if (len < 2)
		return 0;
	for (uint64_t rows = 2; rows * rows <= len; rows++)
		if (len % rows == 0)
			return rows;
	return len;
}

int cd_queue_take_batch(struct cd_queue *q, uint32_t key, uint64_t max_len, unsigned max_copies,
			struct cd_group *out)
{
	uint64_t bytes = 0;
	unsigned copies = 0;
	int n = 0;

	if (max_copies > CD_BATCH_MAX)
		max_copies = CD_BATCH_MAX;
	while (q->n && (!n || bytes < max_len)) {
		int k = cd_queue_pick_key(q, key);
		const struct cd_group *g = cd_queue_at(q, k);
		uint64_t room = max_len - bytes;

		if (n) {
			if (copies >= max_copies || q->mlen[g->lead] > room)
				break;
			/* A strided copy joins with as many rows as there is room for. */
			if (g->width && room / g->width > max_copies - copies)
				room = (uint64_t)(max_copies - copies) * g->width;
		}
		cd_queue_take(q, k, room, &out[n]);
		if (n)
			q->next[out[n - 1].last] = out[n].lead;
		bytes += out[n].len;
		copies += cd_group_copies(&out[n]);
		n++;
	}
	return n;
}

uint64_t cd_call_limit(uint32_t key, uint64_t phase_room, uint64_t merge_max)
{
	uint64_t max = phase_room;

	if (merge_max && max > merge_max)
		max = merge_max;
	if (key && max > CD_PHASE_CALL_MAX)
		max = CD_PHASE_CALL_MAX;
	return max;
}

int cd_one_destination(const uint64_t *seen_seq, int nkeys, uint64_t seq, uint64_t window)
{
	int seen = 0;

	for (int k = 1; k < nkeys; k++)
		seen += seen_seq[k] && seen_seq[k] <= seq && seq - seen_seq[k] < window;
	return seen <= 1;
}

int cd_phase_target(uint64_t used, int own, uint64_t turn)
{
	int n = __builtin_popcountll(used), p = own;
	uint64_t steps;

	if (own < 0 || own > 63 || !(used >> own & 1) || n < 3)
		return -1;
	steps = 1 + turn % (uint64_t)(n - 1);
	while (steps) {
		p = (p + 1) % 64;
		steps -= used >> p & 1;
	}
	return p;
}
