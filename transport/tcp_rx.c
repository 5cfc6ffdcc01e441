/* The TCP receiver's read-ahead: one read takes a small message's header
 * and payload (and whatever follows) where two exact reads would cost two
 * system calls; large payloads go straight to their buffers. */
#include <string.h>

#include "tcp.h"

ssize_t tcp_recv(struct tp_comm *c, void *dst, size_t len)
{
	struct tcp_comm *t = tcp_of(c);
	size_t n;

	if (!len)
		return 0;
	if (!t->rx_len) {
		ssize_t got;

		if (len >= sizeof(t->rx))
			return sm_recv_some(c->fd, dst, len, NULL);
		got = sm_recv_some(c->fd, t->rx, sizeof(t->rx), NULL);
		if (got <= 0)
			return got;
		t->rx_head = 0;
		t->rx_len = (size_t)got;
	}
	n = len < t->rx_len ? len : t->rx_len;
	memcpy(dst, t->rx + t->rx_head, n);
	t->rx_head += n;
	t->rx_len -= n;
	return (ssize_t)n;
}
