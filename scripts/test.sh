#!/bin/sh
# CI (.ci/run) and the README's test command.  Builds everything in
# build-test/ and runs every test with meson (arguments go to that meson
# test, e.g. --no-suite rdma), then the unit and multi-process suites
# under sanitizers (scripts/sanitize.sh) and every fuzz target for
# FUZZ_SECONDS, 30 by default (scripts/fuzz.sh).  Ends with
# "N passed, N failed, N skipped" counted over the individual test cases
# of all of them; exit status 1 when anything failed.
cd "$(dirname "$0")/.." || exit 1
. scripts/deps.sh || exit 1
# The rdma suite's VM: packages and kernel are fetched here, never inside
# a test; where that fails its tests skip and say why.
sh scripts/rdma_vm.sh --prepare || echo "test.sh: the rdma suite will skip (see above)"
status=0
rm -f build-test/meson-logs/testlog.json	# a failed build leaves none to count
if [ ! -d build-test ]; then
	meson setup build-test -Dtests=enabled >build-test.log 2>&1 || { cat build-test.log; exit 1; }
fi
if meson compile -C build-test; then
	meson test -C build-test --print-errorlogs "$@" || status=1
else
	status=1
fi
sh scripts/sanitize.sh || status=1
sh scripts/fuzz.sh || status=1
python3 scripts/count_tests.py build-test/meson-logs/testlog.json \
	build-asan/meson-logs/testlog.json --tap build-asan/sanitizer-reports.tap \
	build-tsan/meson-logs/testlog.json --tap build-tsan/sanitizer-reports.tap \
	--tap build-fuzz/fuzz-results.tap
exit $status
