/* RDMA port addresses (GIDs) as plain data, for the handle's checks
 * (handle.c) and the ibverbs backend's choice of port (gid_net.c; the
 * comparisons themselves are public, transport.h). */
#ifndef SYMMEM_TRANSPORT_GID_H
#define SYMMEM_TRANSPORT_GID_H

#include <stdint.h>

/* An all-zero GID (no address), an IPv4-mapped one (::ffff:a.b.c.d). */
int tp_gid_zero(const uint8_t g[16]);
int tp_gid_ipv4(const uint8_t g[16]);

#endif
