#!/bin/sh
# Builds everything in build-test/ and runs every test with meson; ends with
# "N passed, N failed, N skipped" counted over the individual test cases.
cd "$(dirname "$0")/.." || exit 1
. scripts/deps.sh || exit 1
# The rdma suite's VM: packages and kernel are fetched here, never inside
# a test; where that fails its tests skip and say why.
sh scripts/rdma_vm.sh --prepare || echo "test.sh: the rdma suite will skip (see above)"
if [ ! -d build-test ]; then
	meson setup build-test -Dtests=enabled >build-test.log 2>&1 || { cat build-test.log; exit 1; }
fi
meson compile -C build-test || exit 1
meson test -C build-test --print-errorlogs "$@"
rc=$?
python3 scripts/count_tests.py build-test/meson-logs/testlog.json || exit 1
exit $rc
