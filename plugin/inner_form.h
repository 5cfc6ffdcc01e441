/* The 48 bytes this plugin keeps behind the inner net plugin's handle.
 *
 * transport/'s local form (tp_handle_shrink) fills them with what a
 * connector on this host needs.  A connector on another host needs one
 * more thing: where to open the liveness connection (inner_live.h), an
 * IPv4 address and port.  This form carries both in the same 48 bytes by
 * folding the local form's magic, version and checksum into 4 bytes. */
#ifndef SYMMEM_PLUGIN_INNER_FORM_H
#define SYMMEM_PLUGIN_INNER_FORM_H

#include <stdint.h>

#include "transport.h"

#define INNER_FORM_SIZE TP_HANDLE_LOCAL_SIZE

struct inner_form {
	struct tp_handle_info local;	/* no_tcp: this host's connectors only */
	uint8_t live_addr[4];		/* the liveness listener, IPv4 */
	uint16_t live_port;		/* 0: the listener has none */
};

/* `local`: the local form transport/ wrote; the liveness endpoint is
 * added.  Writes INNER_FORM_SIZE bytes to `out`; an SM_ status. */
int inner_form_encode(const void *local, const uint8_t addr[4], uint16_t port, void *out);
/* Checks every field; an SM_ status (with sm_fail's message). */
int inner_form_decode(const void *in, struct inner_form *f);

#endif
