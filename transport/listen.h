/* The listener's state, private to listen.c (its sockets, and admission
 * of new connections) and candidate.c (one connection's setup). */
#ifndef SYMMEM_TRANSPORT_LISTEN_H
#define SYMMEM_TRANSPORT_LISTEN_H

#include <stdint.h>

#include "comm.h"

/* Connections served side by side, at most, and at most from one peer
 * (a process on the Unix socket, an address over TCP): a flood of idle
 * ones holds a few slots, and is shed before a newcomer is refused. */
#define CAND_MAX 16
#define CAND_PER_PEER 4

/* A connection that has not proved the token by then is dropped. */
#define CANDIDATE_PATIENCE_NS (5ull * 1000 * 1000 * 1000)

/* Nonces of the hellos with a good ticket a listener remembers: a hello
 * seen before is a copy, and turned away. */
#define CAND_NONCES 64

struct cand_peer {
	int family;		/* AF_UNIX (addr holds the pid), AF_INET or AF_INET6 */
	uint8_t addr[16];
	int pid;		/* Unix socket: the kernel's word (SO_PEERCRED), else 0 */
};

enum cand_state {
	CAND_HELLO,		/* reading the connector's hello */
	CAND_CHALLENGE,		/* sending our nonce and proof */
	CAND_SETUP,		/* reading its proof (and ring) */
	CAND_REPLY,		/* proved: sending the reply */
	CAND_VERDICT,		/* ibverbs: waiting for the connector's verdict */
};

struct cand {
	int fd;			/* -1: a free slot */
	int uds;
	int state;		/* enum cand_state */
	struct cand_peer peer;
	uint64_t since_ns;	/* accepted then: the oldest unproven one goes first */
	uint64_t deadline_ns;	/* to prove the token */
	size_t done;		/* bytes of the current message moved */
	int memfd;		/* the connector's ring, with its setup */
	struct wire_hello hello;
	struct wire_challenge chal;
	struct wire_setup setup;
	struct wire_reply reply;
	struct tp_comm *comm;	/* once proved */
};

struct tp_listener {
	int uds_fd;
	int tcp_fd;		/* -1: peers of this host only */
	int uid;
	uint8_t token[16];
	uint64_t deadline_ns;
	unsigned refused;	/* connections turned away */
	struct tp_options opt;	/* applied to each accepted connection */
	void *ib_held;		/* the RDMA device offered, held while listening */
	struct cand cand[CAND_MAX];
	uint8_t nonces[CAND_NONCES][WIRE_NONCE];	/* of good hellos, a ring */
	unsigned nnonces;
};

/* candidate.c: counts a connection turned away; the first one is logged. */
void listen_note_refusal(struct tp_listener *l, const char *why);

/* A free slot for a newcomer from `peer`, made by dropping the oldest
 * unproven connection of the same peer when it has CAND_PER_PEER, else of
 * the peer holding most when the table is full; NULL when none can go. */
struct cand *cand_make_room(struct tp_listener *l, const struct cand_peer *peer);
void cand_start(struct cand *c, int fd, int uds, const struct cand_peer *peer, uint64_t now);
/* Moves c's setup on without blocking.  *out is set once it is done;
 * a connection that fails before proving the token is dropped (SM_OK),
 * after that its failure is the accept's. */
int cand_step(struct tp_listener *l, struct cand *c, uint64_t now, struct tp_comm **out);
/* Closes what c holds and frees its slot; a free slot is left alone. */
void cand_drop(struct cand *c);

#endif
