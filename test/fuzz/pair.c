/* What the fuzz targets share (fuzz.h): real connections in one process. */
#include <string.h>

#include "fuzz.h"
#include "symmem.h"

/* How long a pair may take to connect: both ends are in this process, so
 * anything slower is a hang. */
#define PAIR_LIMIT_NS (2ull * 1000 * 1000 * 1000)

struct tp_options fz_options(int backend)
{
	struct tp_options o = {
		.backend = backend,
		.ring_size = 64 << 10,
		.chunk_size = 16 << 10,
		.connect_timeout = 2,
		.copy_timeout = 1,
		.ifname = "",
		.zero_copy = 1,
		.ib_gid_index = -1,
		.ib_timeout = -1,
		.ib_retry = -1,
	};
	return o;
}

int fz_pair(const struct tp_options *lo, const struct tp_options *co, struct tp_comm **s,
	    struct tp_comm **r)
{
	uint64_t end = sm_now_ns() + PAIR_LIMIT_NS;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	int rc;

	*s = *r = NULL;
	rc = tp_listen(lo, 0, h, &l);
	if (rc)
		return rc;
	while ((!*s || !*r) && !rc && sm_now_ns() < end) {
		if (!*s)
			rc = tp_connect(co, h, s);
		if (!*r && !rc)
			rc = tp_accept(l, r);
	}
	tp_close_listener(l);
	if (!rc && (!*s || !*r))
		rc = sm_fail(SM_ERR_INTERNAL, "a pair in one process did not connect in time");
	if (rc) {
		if (*s)
			tp_close(*s);
		if (*r)
			tp_close(*r);
		*s = *r = NULL;
	}
	return rc;
}
