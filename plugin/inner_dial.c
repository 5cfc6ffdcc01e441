/* The inner path's connects in progress (inner_dial.h).  NCCL's proxy
 * threads of several communicators may connect at once; each entry is
 * used by the one thread that connects with its key. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inner_dial.h"
#include "symmem.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct inner_dial *dials;

struct inner_dial *inner_dial_get(const uint8_t key[16], const void *owner)
{
	struct inner_dial *d;

	pthread_mutex_lock(&lock);
	for (d = dials; d; d = d->next)
		if (!memcmp(d->key, key, 16))
			break;
	if (!d && (d = calloc(1, sizeof(*d)))) {
		memcpy(d->key, key, 16);
		d->owner = owner;
		d->since_ns = sm_now_ns();
		d->peer.fd = -1;
		d->next = dials;
		dials = d;
	}
	pthread_mutex_unlock(&lock);
	return d;
}

static void unlink_locked(struct inner_dial *d)
{
	for (struct inner_dial **pp = &dials; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			return;
		}
	}
}

void inner_dial_put(struct inner_dial *d)
{
	pthread_mutex_lock(&lock);
	unlink_locked(d);
	pthread_mutex_unlock(&lock);
	live_dial_free(d->dial);
	live_close(&d->peer, 0);
	free(d);
}

int inner_dial_abandon(const void *owner, void (*close_ic)(void *ic))
{
	struct inner_dial *gone = NULL, *d, *next;
	int n = 0;

	pthread_mutex_lock(&lock);
	for (d = dials; d; d = next) {
		next = d->next;
		if (d->owner != owner)
			continue;
		unlink_locked(d);
		d->next = gone;
		gone = d;
	}
	pthread_mutex_unlock(&lock);
	for (d = gone; d; d = next, n++) {
		next = d->next;
		if (d->ic)
			close_ic(d->ic);
		live_dial_free(d->dial);
		live_close(&d->peer, 0);
		free(d);
	}
	return n;
}
