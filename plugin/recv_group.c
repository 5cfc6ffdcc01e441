/* The grouped receives' requests (recv_group.h), from one array that
 * never moves: test() tells them from the transport's requests by
 * address, without reading behind the pointer, and pays nothing until a
 * group was first made. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "recv_group.h"

/* NCCL keeps at most 16 grouped receives per shared comm in flight. */
#define GROUPS 8192

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct recv_group *_Atomic groups;
static struct recv_group *free_list;

struct recv_group *recv_group_get(void)
{
	struct recv_group *g = NULL, *all;

	pthread_mutex_lock(&lock);
	all = atomic_load(&groups);
	if (!all && (all = calloc(GROUPS, sizeof(*all)))) {
		for (int i = GROUPS - 1; i >= 0; i--) {
			all[i].next = free_list;
			free_list = &all[i];
		}
		atomic_store(&groups, all);
	}
	if (free_list) {
		g = free_list;
		free_list = g->next;
		*g = (struct recv_group){ 0 };
	}
	pthread_mutex_unlock(&lock);
	return g;
}

void recv_group_put(struct recv_group *g)
{
	pthread_mutex_lock(&lock);
	g->next = free_list;
	free_list = g;
	pthread_mutex_unlock(&lock);
}

int recv_group_owned(const void *p)
{
	uintptr_t base = (uintptr_t)atomic_load_explicit(&groups, memory_order_acquire);
	uintptr_t a = (uintptr_t)p;

	return base && a >= base && a - base < GROUPS * sizeof(struct recv_group) &&
	       (a - base) % sizeof(struct recv_group) == 0;
}
