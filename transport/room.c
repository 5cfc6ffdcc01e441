/* Who gets a place in a listener's table when it is full (listen.h).
 *
 * A connection is at one of three steps: silent (its hello not read yet),
 * vouched for (its hello's ticket holds: the token's holder, or a copy of
 * its hello), proved (it answered the challenge).  A stranger without the
 * token never gets past silent: it is turned away at its hello.  So a
 * newcomer takes the place of a connection at an earlier step, or of one
 * at its own step that has had CAND_GRACE_NS there, and is turned away
 * when no such one is left: a flood can fill the table with silent
 * connections, but cannot push out a connector that said hello, nor one
 * that connected just now and is about to.  A proved one never goes. */
#include <string.h>

#include "listen.h"

enum { SILENT, VOUCHED, PROVED };

static int step_of(const struct cand *c)
{
	if (c->state == CAND_HELLO)
		return SILENT;
	return c->state <= CAND_SETUP ? VOUCHED : PROVED;
}

static int same_peer(const struct cand_peer *a, const struct cand_peer *b)
{
	return a->family == b->family && !memcmp(a->addr, b->addr, sizeof(a->addr));
}

static int peer_count(const struct cand *table, const struct cand_peer *peer)
{
	int n = 0;

	for (int i = 0; i < CAND_MAX; i++)
		n += table[i].fd >= 0 && same_peer(&table[i].peer, peer);
	return n;
}

/* Whether c may give its place to newcomer n. */
static int yields_to(const struct cand *c, const struct cand *n, uint64_t now)
{
	if (c->fd < 0 || step_of(c) == PROVED)
		return 0;
	if (step_of(c) != step_of(n))
		return step_of(c) < step_of(n);
	return now - c->since_ns >= CAND_GRACE_NS;
}

/* Whether a should go before b: the peer holding more places first
 * (`busiest`), then the one at an earlier step, then the one there
 * longer. */
static int goes_first(const struct cand *table, const struct cand *a, const struct cand *b,
		      int busiest)
{
	int na = busiest ? peer_count(table, &a->peer) : 0;
	int nb = busiest ? peer_count(table, &b->peer) : 0;

	if (na != nb)
		return na > nb;
	if (step_of(a) != step_of(b))
		return step_of(a) < step_of(b);
	return a->since_ns < b->since_ns;
}

/* The connection to drop for n: one of n's own peer (`own`), or of any. */
static struct cand *victim(struct cand *table, const struct cand *n, int own, uint64_t now)
{
	struct cand *best = NULL;

	for (int i = 0; i < CAND_MAX; i++) {
		struct cand *c = &table[i];

		if (!yields_to(c, n, now) || (own && !same_peer(&c->peer, &n->peer)))
			continue;
		if (!best || goes_first(table, c, best, !own))
			best = c;
	}
	return best;
}

struct cand *cand_make_room(struct tp_listener *l, struct cand *table, const struct cand *n,
			    uint64_t now)
{
	struct cand *c = NULL;

	if (peer_count(table, &n->peer) >= CAND_PER_PEER) {
		c = victim(table, n, 1, now);
	} else {
		for (int i = 0; i < CAND_MAX && !c; i++)
			if (table[i].fd < 0)
				c = &table[i];
		if (!c)
			c = victim(table, n, 0, now);
	}
	if (c && c->fd >= 0) {
		listen_note_refusal(l, "dropped a connection still to prove the token to make "
				    "room for one as far or further along");
		cand_drop(c);
	}
	return c;
}
