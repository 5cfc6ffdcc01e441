/* Whether the peer process of a connection through the inner net plugin
 * is alive, known without the inner plugin.
 *
 * A vendor's plugin may wait forever on a peer that died (aws-ofi-nccl
 * does: its receive neither completes nor fails).  So each such
 * connection also gets a small TCP connection of this plugin's own, from
 * the connector to the listener's address in the handle (inner_form.h),
 * set up as the plugin's own connections are: both ends prove the
 * handle's token with fresh nonces (HMAC-SHA-256, transport/auth.c).
 * Nothing moves on it afterwards: the kernel closes it when the process
 * dies, however it dies, and the end that is left sees the hang-up.  A
 * comm closed in order says so first ("bye"), so that its peer does not
 * take the close for a death. */
#ifndef SYMMEM_PLUGIN_INNER_LIVE_H
#define SYMMEM_PLUGIN_INNER_LIVE_H

#include <stdint.h>

/* The other end, once proven. */
struct live_peer {
	int fd;				/* -1: none (no liveness check) */
	int pid;			/* its process, as it says */
	char host[48];			/* its address, for log lines */
};

enum live_state {
	LIVE_UP = 0,			/* nothing heard: alive */
	LIVE_GONE,			/* hung up without a bye: the process died */
	LIVE_CLOSED,			/* its comm was closed in order */
};

struct live_listener;
struct live_dial;

/* A listener on the IPv4 address NCCL_SOCKET_IFNAME picks (`ifname`, that
 * syntax).  0 with *out NULL and *port 0 where there is no IPv4 address:
 * connections then go without a check (said once, as an INFO line).  An
 * SM_ status on failure. */
int live_listen(const char *ifname, struct live_listener **out, uint8_t addr[4],
		uint16_t *port);
/* Takes the connector's proof, never blocking: 1 when one proved
 * `token` (*peer filled in), 0 not yet, an SM_ status on failure.
 * Strangers are turned away and not counted. */
int live_accept(struct live_listener *l, const uint8_t token[16], struct live_peer *peer);
void live_close_listener(struct live_listener *l);

/* The connector's side: started once, then stepped until 1 (*peer filled
 * in) or an SM_ status; 0: not yet. */
int live_dial_start(const uint8_t addr[4], uint16_t port, const uint8_t token[16],
		    struct live_dial **out);
int live_dial_step(struct live_dial *d, struct live_peer *peer);
/* 1 once the hello went: from then on the listener knows this process
 * without this thread's help. */
int live_dial_sent(const struct live_dial *d);
/* The comm closes in order before the listener's answer came: the bye
 * goes behind the hello, so that the listener takes the hang-up that
 * follows for a close, not a death. */
void live_dial_bye(struct live_dial *d);
void live_dial_free(struct live_dial *d);

/* One non-blocking look at the connection: enum live_state. */
int live_check(struct live_peer *p);
/* `orderly`: this comm was closed by NCCL, so the peer is told first. */
void live_close(struct live_peer *p, int orderly);

#endif
