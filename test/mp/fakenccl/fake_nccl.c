/* An NCCL for symmem-info's test (test_info.sh), built as libnccl.so.2
 * alone in a directory per release it plays: its version, and the plugin
 * table names its binary holds, as the real library's do (NCCL looks its
 * plugins' tables up by these names).  FAKE_NCCL_VERSION and
 * FAKE_NCCL_TABLES come from the build. */
#define EXPORT __attribute__((visibility("default")))

/* Kept in the binary although nothing reads them here. */
__attribute__((used)) static const char *const tables[] = { FAKE_NCCL_TABLES };

EXPORT int ncclGetVersion(int *version)
{
	*version = FAKE_NCCL_VERSION;
	return 0;
}
