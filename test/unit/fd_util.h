/* Descriptors and mappings in tests: send several descriptors with one
 * message, as no sender of ours does but anyone who can connect may; tell
 * whether every copy of a pipe's write end is closed; count the bytes
 * waiting on a socket, this process's open descriptors and its mappings
 * of a shared segment (these three fail the test when they cannot be
 * read). */
#ifndef SYMMEM_TEST_FD_UTIL_H
#define SYMMEM_TEST_FD_UTIL_H

#include <stddef.h>
#include <sys/types.h>

/* sendmsg of buf with `nfds` descriptors attached (SCM_RIGHTS). */
ssize_t send_with_fds(int sock, const void *buf, size_t len, const int *fds, int nfds);

/* `n` pipes: read ends in rd[], write ends in wr[]; 0, or -1 on failure. */
int make_pipes(int *rd, int *wr, int n);

/* 1 when the read end `rd` sees every write end closed within `ms`. */
int writers_gone(int rd, int ms);

/* Bytes waiting to be read on socket `fd`. */
int unread(int fd);

/* Descriptors this process has open. */
int open_fds(void);

/* Live mappings of this process whose line in /proc/self/maps holds
 * `name` (a memfd's name). */
int mappings_named(const char *name);

#endif
