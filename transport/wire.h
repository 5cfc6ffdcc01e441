/* The setup protocol between a connector and a listener (connect.c,
 * candidate.c) and the proofs that guard it (auth.c).  Backends fill in
 * their part of the setup and the reply; nothing here knows how data
 * moves. */
#ifndef SYMMEM_TRANSPORT_WIRE_H
#define SYMMEM_TRANSPORT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h"

#define WIRE_MAGIC 0x45524957u		/* "WIRE" */
#define WIRE_VERSION 8		/* 8: the hello carries a ticket */

/* Bytes of the setup and the reply that belong to the connection's
 * backend (ib.h's struct ib_wire): opaque to setup, which only carries
 * them. */
#define WIRE_PART_BYTES 40

/* Connection setup, four messages before data moves: the connector's
 * hello (a fresh nonce, and a ticket: its MAC under the token), the
 * listener's challenge (its nonce and its proof of the token over both),
 * the connector's setup (its proof, then what its data path needs; on
 * one host the ring's memfd rides along), the listener's reply.
 *
 * The ticket lets a listener tell the token's holder from a stranger
 * before it keeps anything for a connection: a stranger is turned away
 * at its hello, and can never hold a place a connector needs (listen.h).
 * It is bound to the connector's own nonce only, so a copy of a hello
 * earns a challenge at most, once (the listener takes each nonce once),
 * never a connection: that takes the proof over the listener's nonce.
 * Apart from the ticket neither end sends anything derived from the
 * token before the other sent a fresh nonce, and the connector sends its
 * proof and ring only to a listener that proved itself (auth.c). */
#define WIRE_NONCE 16
#define WIRE_MAC 32

struct wire_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t backend;		/* the kind the connector picked (enum tp_backend) */
	uint32_t pid;			/* for log lines only: the peer says it */
	uint32_t flags;			/* WIRE_REQUIRED */
	uint8_t nonce[WIRE_NONCE];
	uint8_t ticket[WIRE_MAC];	/* wire_ticket(token, the fields above) */
};
_Static_assert(sizeof(struct wire_hello) == 64, "the proofs hash the hello as sent");
/* A listener reads this much of a hello before it checks its magic and
 * version: an older connector's shorter hello is answered, not waited on. */
#define WIRE_HELLO_HEAD offsetof(struct wire_hello, backend)

/* The sender's side allows no fallback from the kind it asked for
 * (backend_required: NCCL_SYMMEM_BACKEND=ib). */
#define WIRE_REQUIRED 0x1u

/* status != 0: a refusal before anyone proved anything (reason says
 * why, unauthenticated); no nonce or proof then. */
struct wire_challenge {
	uint32_t magic;
	int32_t status;
	uint8_t nonce[WIRE_NONCE];
	uint8_t proof[WIRE_MAC];	/* wire_proof(token, listener, hello, nonce) */
	char reason[128];
};

struct wire_setup {
	uint32_t magic;
	uint32_t pad;
	uint8_t proof[WIRE_MAC];	/* wire_proof(token, connector, hello, nonce) */
	uint64_t seg_size;		/* SHM: size of the passed segment */
	_Alignas(8) uint8_t part[WIRE_PART_BYTES];	/* the backend's own */
};

/* The listener's answer. */
struct wire_reply {
	uint32_t magic;
	int32_t status;			/* 0 or an enum sm_status */
	char reason[256];
	int32_t backend;		/* what the listener settled on: the kind asked
					 * for, or the plain one (backend_plain) when
					 * that kind cannot reach the connector */
	uint32_t flags;			/* WIRE_REQUIRED */
	_Alignas(8) uint8_t part[WIRE_PART_BYTES];	/* the backend's own */
};

/* The connector's last word on the socket before data moves, for a kind
 * with a last step (ops->connect_join: ibverbs' probe write). */
enum wire_verdict {
	VERDICT_NONE = 0,		/* not decided yet */
	VERDICT_JOINED = 'R',		/* both ends ready, and they reach each other */
	VERDICT_PLAIN = 'T',		/* they do not: go on over this socket (backend_plain) */
	VERDICT_FAIL = 'X',		/* they do not and that kind was required */
};

/* auth.c: SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104) over the
 * concatenation of `nparts` pieces, for the setup proofs. */
#define SHA256_BYTES 32
struct sha256 {
	uint32_t h[8];
	uint64_t len;
	uint8_t buf[64];
};
void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *data, size_t n);
void sha256_final(struct sha256 *c, uint8_t out[SHA256_BYTES]);
void hmac_sha256(const uint8_t *key, size_t klen, const void *const *parts, const size_t *lens,
		 int nparts, uint8_t out[SHA256_BYTES]);
/* One end's proof that it holds `token`, over the hello and the
 * listener's nonce; by_listener picks whose (they differ). */
void wire_proof(const uint8_t token[16], int by_listener, const struct wire_hello *hello,
		const uint8_t listener_nonce[WIRE_NONCE], uint8_t out[WIRE_MAC]);
/* The connector's ticket: its MAC over the hello up to the ticket, under
 * a label of its own (no proof can stand for it, nor it for a proof). */
void wire_ticket(const uint8_t token[16], const struct wire_hello *hello, uint8_t out[WIRE_MAC]);
/* 1 if two proofs match, in time that does not depend on where they differ. */
int wire_mac_equal(const uint8_t *a, const uint8_t *b);

#endif
