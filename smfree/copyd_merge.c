/* Which waiting requests the copy helper turns into one copy.
 *
 * Every cuMemcpyAsync costs the copy engine a fixed ~2.5 us on top of the
 * bytes (measured, bench/results/coalesce.md: 2 MiB pieces reach 249 GB/s
 * each way when both GPUs push, whole 512 MiB copies 390).  NCCL's
 * pipeline hands the plugin one request per step, 2 MiB with the plugin's
 * defaults, and consecutive steps of a connection sit next to each other
 * in both NCCL buffers.  When several are waiting, one copy of their union
 * moves exactly the same bytes with one fixed cost. */
#include "copyd_proto.h"

static int continues(const struct cd_pending *a, uint64_t src_end, uint64_t dst_end,
		     const struct cd_pending *b)
{
	return b->src_id == a->src_id && b->dst_id == a->dst_id && b->src_off == src_end &&
	       b->dst_off == dst_end;
}

int cd_merge(const struct cd_pending *p, int n, uint64_t max_len, int *member, uint64_t *len)
{
	uint64_t src_end, dst_end, total;
	uint8_t taken[CD_MERGE_WINDOW] = { 0 };
	int count = 1, grew = 1;

	if (n <= 0)
		return 0;
	if (n > CD_MERGE_WINDOW)
		n = CD_MERGE_WINDOW;	/* younger requests wait for a later copy */
	member[0] = 0;
	taken[0] = 1;
	total = p[0].len;
	src_end = p[0].src_off + p[0].len;
	dst_end = p[0].dst_off + p[0].len;
	/* A chain can arrive out of order; a pass per member finds it. */
	while (grew && count < CD_MERGE_MAX) {
		grew = 0;
		for (int j = 1; j < n && count < CD_MERGE_MAX; j++) {
			if (taken[j] || !continues(&p[0], src_end, dst_end, &p[j]) ||
			    total >= max_len || p[j].len > max_len - total)
				continue;
			taken[j] = 1;
			member[count++] = j;
			total += p[j].len;
			src_end += p[j].len;
			dst_end += p[j].len;
			grew = 1;
		}
	}
	*len = total;
	return count;
}
