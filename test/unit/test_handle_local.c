/* The handle's local form (tp_handle_shrink): what it keeps, what
 * tp_handle_decode refuses in it, and a real connection made from it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "symmem.h"
#include "tp_pair.h"
#include "transport.h"

/* A zeroed handle-sized buffer holding the local form of `info`. */
static void shrunk(const struct tp_handle_info *info, uint8_t out[TP_HANDLE_SIZE])
{
	uint8_t full[TP_HANDLE_SIZE];

	tp_handle_encode(info, full);
	memset(out, 0, TP_HANDLE_SIZE);
	assert_int_equal(tp_handle_shrink(full, out), SM_OK);
}

/* Everything a connector on this host needs comes back; no TCP or RDMA
 * endpoint does. */
static void test_fields_kept(void **state)
{
	struct tp_handle_info info, back;
	uint8_t local[TP_HANDLE_SIZE];

	(void)state;
	sample_handle_info(&info);
	info.offered = 1;
	memset(info.offer, 0x5a, sizeof(info.offer));
	shrunk(&info, local);
	assert_int_equal(tp_handle_decode(local, &back), SM_OK);
	assert_true(back.host_id == info.host_id);
	assert_memory_equal(back.token, info.token, 16);
	assert_int_equal(back.dev, 3);
	assert_int_equal(back.pid, 4242);
	assert_string_equal(back.uds_name, info.uds_name);
	assert_int_equal(back.no_tcp, 1);
	assert_int_equal(back.family, 0);
	assert_int_equal(back.port, 0);
	assert_int_equal(back.offered, 0);
}

static void test_damage_refused(void **state)
{
	struct tp_handle_info info, back;
	uint8_t local[TP_HANDLE_SIZE], bad[TP_HANDLE_SIZE];

	(void)state;
	sample_handle_info(&info);
	shrunk(&info, local);
	for (size_t i = 0; i < TP_HANDLE_LOCAL_SIZE; i++) {
		memcpy(bad, local, sizeof(bad));
		bad[i] ^= 0x40;
		assert_int_not_equal(tp_handle_decode(bad, &back), SM_OK);
	}
	memcpy(bad, local, sizeof(bad));
	bad[TP_HANDLE_LOCAL_SIZE] = 1;
	assert_int_equal(tp_handle_decode(bad, &back), SM_ERR_INVALID);
	assert_non_null(strstr(sm_last_error(), "past its 48 bytes"));
}

/* Only socket names tp_listen makes fit; anything else is an error, not
 * a name that would connect elsewhere. */
static void test_foreign_socket_name(void **state)
{
	static const char *const names[] = { "symmem-00ff10ab9c3d7e0", "symmem-00ff10ab9c3d7e011",
					     "symmem-00FF10AB9C3D7E01", "other-00ff10ab9c3d7e01" };
	struct tp_handle_info info;
	uint8_t full[TP_HANDLE_SIZE], local[TP_HANDLE_LOCAL_SIZE];

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		sample_handle_info(&info);
		strcpy(info.uds_name, names[i]);
		tp_handle_encode(&info, full);
		assert_int_not_equal(tp_handle_shrink(full, local), SM_OK);
	}
}

/* A listener's handle, shrunk, connects on this host like the full one. */
static void test_connects_on_this_host(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 64 << 10);
	uint8_t full[TP_HANDLE_SIZE], local[TP_HANDLE_SIZE] = { 0 };
	struct tp_listener *l;
	struct tp_comm *s, *r;
	struct tp_req *sr, *rr;
	char out[64] = "local form", in[64] = { 0 };

	(void)state;
	assert_int_equal(tp_listen(&o, 0, full, &l), SM_OK);
	assert_int_equal(tp_handle_shrink(full, local), SM_OK);
	assert_int_equal(drive_pair(&o, l, local, &s, &r), SM_OK);
	tp_close_listener(l);
	assert_int_equal(tp_irecv(r, in, sizeof(in), NULL, &rr), SM_OK);
	sr = isend_when_posted(s, out, sizeof(out), NULL, now() + 10);
	assert_int_equal(complete_both(sr, rr, now() + 10), sizeof(out));
	assert_string_equal(in, out);
	assert_string_equal(tp_comm_backend(s), "shm");
	tp_close(s);
	tp_close(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fields_kept),
		cmocka_unit_test(test_damage_refused),
		cmocka_unit_test(test_foreign_socket_name),
		cmocka_unit_test(test_connects_on_this_host),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
