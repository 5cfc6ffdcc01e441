/* Proving the connection token without sending it.
 *
 * Both ends of connection setup hold the handle's 16-byte token.  Each
 * proves it with HMAC-SHA-256 over both ends' fresh nonces, so a process
 * that took over a dead listener's port, or a stranger who connects to a
 * live one, sees only nonces and MACs it cannot use: a proof made for one
 * pair of nonces is worth nothing with the next.  The connector's hello
 * also carries a ticket, a MAC over its own nonce, so that a listener can
 * turn a stranger away at once (wire.h).  libc has no SHA-256, so it is
 * written out here from FIPS 180-4 (HMAC: RFC 2104). */
#include <stddef.h>
#include <string.h>

#include "wire.h"

static const uint32_t sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
	return (x >> n) | (x << (32 - n));
}

static void sha256_block(uint32_t h[8], const uint8_t *p)
{
	uint32_t w[64], s[8];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(s, h, sizeof(s));
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = s[7] + (ror(s[4], 6) ^ ror(s[4], 11) ^ ror(s[4], 25)) +
			      ((s[4] & s[5]) ^ (~s[4] & s[6])) + sha256_k[i] + w[i];
		uint32_t t2 = (ror(s[0], 2) ^ ror(s[0], 13) ^ ror(s[0], 22)) +
			      ((s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]));

		memmove(s + 1, s, 7 * sizeof(s[0]));
		s[4] += t1;
		s[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		h[i] += s[i];
}

void sha256_init(struct sha256 *c)
{
	static const uint32_t iv[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(c->h, iv, sizeof(iv));
	c->len = 0;
}

void sha256_update(struct sha256 *c, const void *data, size_t n)
{
	const uint8_t *p = data;

	while (n) {
		size_t used = c->len % 64, take = 64 - used < n ? 64 - used : n;

		memcpy(c->buf + used, p, take);
		c->len += take;
		p += take;
		n -= take;
		if (c->len % 64 == 0)
			sha256_block(c->h, c->buf);
	}
}

void sha256_final(struct sha256 *c, uint8_t out[SHA256_BYTES])
{
	uint64_t bits = c->len * 8;
	size_t used = c->len % 64;
	/* 0x80, zeros, then the length in bits: the last block ends with it. */
	size_t padlen = used < 56 ? 64 - used : 128 - used;
	uint8_t pad[72] = { 0x80 };

	for (int i = 0; i < 8; i++)
		pad[padlen - 8 + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha256_update(c, pad, padlen);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
}

void hmac_sha256(const uint8_t *key, size_t klen, const void *const *parts, const size_t *lens,
		 int nparts, uint8_t out[SHA256_BYTES])
{
	uint8_t pad[64], inner[SHA256_BYTES];
	struct sha256 c;

	memset(pad, 0, sizeof(pad));
	if (klen > sizeof(pad)) {	/* a key longer than a block is hashed first */
		sha256_init(&c);
		sha256_update(&c, key, klen);
		sha256_final(&c, pad);
	} else {
		memcpy(pad, key, klen);
	}
	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] ^= 0x36;
	sha256_init(&c);
	sha256_update(&c, pad, sizeof(pad));
	for (int i = 0; i < nparts; i++)
		sha256_update(&c, parts[i], lens[i]);
	sha256_final(&c, inner);
	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] ^= 0x36 ^ 0x5c;
	sha256_init(&c);
	sha256_update(&c, pad, sizeof(pad));
	sha256_update(&c, inner, sizeof(inner));
	sha256_final(&c, out);
}

/* Labels of equal length, so neither end's proof can stand for the
 * other's (a listener impostor cannot reflect the connector's nonce),
 * nor a ticket for either. */
static const char label_listener[] = "symmem-L";
static const char label_connector[] = "symmem-C";
static const char label_ticket[] = "symmem-T";
_Static_assert(sizeof(label_listener) == sizeof(label_connector) &&
	       sizeof(label_ticket) == sizeof(label_connector), "labels of one length");

void wire_proof(const uint8_t token[16], int by_listener, const struct wire_hello *hello,
		const uint8_t listener_nonce[WIRE_NONCE], uint8_t out[WIRE_MAC])
{
	const void *parts[] = { by_listener ? label_listener : label_connector, hello,
				listener_nonce };
	const size_t lens[] = { sizeof(label_listener) - 1, sizeof(*hello), WIRE_NONCE };

	hmac_sha256(token, 16, parts, lens, 3, out);
}

void wire_ticket(const uint8_t token[16], const struct wire_hello *hello, uint8_t out[WIRE_MAC])
{
	const void *parts[] = { label_ticket, hello };
	const size_t lens[] = { sizeof(label_ticket) - 1, offsetof(struct wire_hello, ticket) };

	hmac_sha256(token, 16, parts, lens, 2, out);
}

int wire_mac_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t diff = 0;

	for (int i = 0; i < WIRE_MAC; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}
