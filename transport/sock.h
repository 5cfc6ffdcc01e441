/* Socket helpers private to transport/: non-blocking Unix and TCP sockets,
 * partial sends and receives, and file-descriptor passing. */
#ifndef SYMMEM_TRANSPORT_SOCK_H
#define SYMMEM_TRANSPORT_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transport.h"

int sock_random(void *buf, size_t len);

/* Listening sockets; both non-blocking. The names and addresses filled in
 * go into the handle. */
int sock_uds_listen(char name[32], int *fd);
int sock_tcp_listen(const char *ifname, struct tp_handle_info *info, int *fd);

/* Starts a connection. *fd is set; *pending = 1 while it is in progress. */
int sock_uds_connect(const char *name, int *fd);
int sock_tcp_connect(const struct tp_handle_info *info, int *fd, int *pending);
/* 1 when a pending TCP connect finished, 0 while still pending. */
int sock_connect_done(int fd);

/* 1 if the peer has hung up or the socket failed, 0 if it looks alive.
 * Never consumes data. */
int sock_peer_gone(int fd);

/* pid and uid of the process at the other end of a Unix socket (for a
 * listening socket: the one that made it); -1 and both -1 when unknown. */
int sock_peer_cred(int fd, int *pid, int *uid);

void sock_enable_nodelay(int fd);

#endif
