/* Whether two RDMA port addresses (GIDs) sit on one network.
 *
 * Rail-optimised clusters give each NIC of a host its own fabric or
 * subnet: NIC k of one host reaches NIC k of the others and nothing else.
 * NCCL sees the plugin's devices as GPUs, not NICs, so it cannot route
 * around that (no PXN), and a connection between GPUs on different rails
 * would fall back to TCP.  The connector instead looks for one of its own
 * ports on the listener's network, by address:
 *
 * - RoCE with IPv4 GIDs (::ffff:a.b.c.d): the same IPv4 subnet, with the
 *   netmask of the local interface that holds the address;
 * - other GIDs (InfiniBand, RoCE with IPv6): the same 64-bit subnet
 *   prefix.  Ports on one default InfiniBand subnet all share fe80::/64,
 *   so there this finds no difference and nothing changes.
 *
 * The answer is a preference only: the probe write at setup still decides
 * whether the two ports reach each other. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

#include "gid.h"
#include "transport.h"

static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

int tp_gid_zero(const uint8_t g[16])
{
	static const uint8_t zero[16];

	return memcmp(g, zero, 16) == 0;
}

int tp_gid_ipv4(const uint8_t g[16])
{
	return memcmp(g, v4_mapped, 12) == 0;
}

int tp_ipv4_prefix_len(const uint8_t addr[4])
{
	struct ifaddrs *list, *ifa;
	int bits = -1;

	if (getifaddrs(&list))
		return -1;
	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ifa->ifa_addr;
		const struct sockaddr_in *m = (const struct sockaddr_in *)ifa->ifa_netmask;

		if (!a || !m || a->sin_family != AF_INET)
			continue;
		if (memcmp(&a->sin_addr, addr, 4))
			continue;
		bits = __builtin_popcount(m->sin_addr.s_addr);
		break;
	}
	freeifaddrs(list);
	return bits;
}

int tp_gid_net_match(const uint8_t mine[16], const uint8_t peer[16], int prefix_bits)
{
	int whole, rest;

	if (tp_gid_zero(mine) || tp_gid_zero(peer) || prefix_bits < 0 || prefix_bits > 128)
		return -1;
	whole = prefix_bits / 8;
	rest = prefix_bits % 8;
	if (memcmp(mine, peer, (size_t)whole))
		return 0;
	if (rest && ((mine[whole] ^ peer[whole]) & (uint8_t)(0xff << (8 - rest))))
		return 0;
	return 1;
}

int tp_gid_same_net(const uint8_t mine[16], const uint8_t peer[16])
{
	int bits;

	if (tp_gid_zero(mine) || tp_gid_zero(peer))
		return -1;
	if (tp_gid_ipv4(mine) != tp_gid_ipv4(peer))
		return -1;	/* an IPv4 GID against another kind: no common rule */
	if (!tp_gid_ipv4(mine))
		return tp_gid_net_match(mine, peer, 64);
	bits = tp_ipv4_prefix_len(mine + 12);
	if (bits < 0)
		return -1;	/* no local interface holds it: the mask is unknown */
	return tp_gid_net_match(mine, peer, 96 + bits);
}
