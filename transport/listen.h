/* The listener's state, private to listen.c (its sockets, and taking
 * new connections), room.c (who gets a place in a table) and
 * candidate.c (one connection's setup). */
#ifndef SYMMEM_TRANSPORT_LISTEN_H
#define SYMMEM_TRANSPORT_LISTEN_H

#include <stdint.h>

#include "comm.h"

/* Connections served side by side, at most, in each of two tables: one
 * for the Unix socket (this user's processes only), one for TCP, so that
 * strangers over TCP never take a place a connector of this host needs.
 * At most CAND_PER_PEER in a table come from one peer (a process on the
 * Unix socket, an address over TCP). */
#define CAND_MAX 16
#define CAND_PER_PEER 4

/* A connection that has not proved the token by then is dropped. */
#define CANDIDATE_PATIENCE_NS (5ull * 1000 * 1000 * 1000)

/* How long a connection keeps its place against newcomers that got no
 * further than it did (room.c): time for a connector to say hello after
 * its connect, or to answer its challenge. */
#define CAND_GRACE_NS (100ull * 1000 * 1000)

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
	CAND_VERDICT,		/* waiting for the connector's verdict (ops->connect_join) */
};

struct cand {
	int fd;			/* -1: a free slot */
	int uds;
	int state;		/* enum cand_state */
	struct cand_peer peer;
	uint64_t since_ns;	/* got where it is then (accepted, or its ticket
				 * checked): its grace counts from there */
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
	void *held[TP_BACKEND_COUNT];	/* what each kind's offer holds while listening */
	struct cand cand[CAND_MAX];	/* TCP connections */
	struct cand local[CAND_MAX];	/* Unix-socket ones, of this user */
	uint8_t nonces[CAND_NONCES][WIRE_NONCE];	/* of good hellos, a ring */
	unsigned nnonces;
};

/* candidate.c: counts a connection turned away; the first one is logged. */
void listen_note_refusal(struct tp_listener *l, const char *why);

/* room.c: a free slot of `table` for newcomer `n` (its hello read if it
 * came with it), made by dropping a connection that got less far, or as
 * far but has had its grace there; NULL when none may go. */
struct cand *cand_make_room(struct tp_listener *l, struct cand *table, const struct cand *n,
			    uint64_t now);
/* An empty slot, `fd` -1. */
void cand_init(struct cand *c);
void cand_start(struct cand *c, int fd, int uds, const struct cand_peer *peer, uint64_t now);
/* Moves c's setup on without blocking.  *out is set once it is done;
 * a connection that fails before proving the token is dropped (SM_OK),
 * after that its failure is the accept's. */
int cand_step(struct tp_listener *l, struct cand *c, uint64_t now, struct tp_comm **out);
/* Closes what c holds and frees its slot; a free slot is left alone. */
void cand_drop(struct cand *c);

#endif
