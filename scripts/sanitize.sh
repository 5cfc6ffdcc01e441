#!/bin/sh
# Builds the tests under sanitizers and runs them (never the rdma or package suites):
# every unit and multi-process test under AddressSanitizer and UBSan in
# build-asan/, and those whose programs start threads
# (scripts/threaded_tests.py) under ThreadSanitizer in build-tsan/.  Any
# report fails the run, also one from a forked child or the copy helper
# whose exit status no test reads: reports go to files, which must stay
# absent, and none may appear in the tests' output.  Each build's verdict
# on reports is one TAP line in build-{asan,tsan}/sanitizer-reports.tap
# (scripts/count_tests.py reads it with the builds' testlog.json).  Ends
# with "sanitizers: N passed, N failed, N skipped"; exit status 1 when
# anything failed.
#
# Usage: scripts/sanitize.sh [asan] [tsan]   (default: both)
cd "$(dirname "$0")/.." || exit 1
. scripts/deps.sh || exit 1
[ $# -gt 0 ] || set -- asan tsan
status=0
counted=""

# setup DIR SANITIZERS: configures DIR once (shared libraries stay
# unresolved against the runtime: -Db_lundef=false) and builds it.
setup() {
	if [ ! -d "$1" ]; then
		out=$(meson setup "$1" -Dtests=enabled -Db_sanitize="$2" -Db_lundef=false 2>&1) ||
			{ echo "$out"; return 1; }
	fi
	meson compile -C "$1" >"$1/compile.log" 2>&1 || { tail -40 "$1/compile.log"; return 1; }
}

# verdict DIR NAME: one TAP line on the reports: files in DIR/reports, and
# report lines in the tests' output (gcc's UBSan beside ASan ignores
# log_path and prints to the process's stderr, which meson keeps).
verdict() {
	reports=$(ls "$1/reports" 2>/dev/null)
	printed=$(grep -c -E "runtime error: |ERROR: AddressSanitizer|WARNING: ThreadSanitizer" \
		"$1/meson-logs/testlog.json" 2>/dev/null)
	if [ -z "$reports" ] && [ "${printed:-0}" = 0 ]; then
		line="ok 1 - no $2 report"
	else
		line="not ok 1 - $2 reports: files in $1/reports: $(echo "$reports" | tr '\n' ' ')"
		line="$line; tests whose output holds one: ${printed:-0} ($1/meson-logs/testlog.txt)"
		for f in $reports; do
			echo "== $1/reports/$f"
			head -40 "$1/reports/$f"
		done
		status=1
	fi
	printf '1..1\n%s\n' "$line" >"$1/sanitizer-reports.tap"
	echo "$line"
}

# A build that fails leaves no results behind to be counted as its own.
clean() {
	rm -rf "$1/reports" "$1/sanitizer-reports.tap" "$1/meson-logs/testlog.json"
}

for which in "$@"; do
	case $which in
	asan)
		dir=build-asan
		clean $dir
		counted="$counted $dir/meson-logs/testlog.json --tap $dir/sanitizer-reports.tap"
		setup $dir address,undefined || { status=1; continue; }
		mkdir -p $dir/reports
		ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:log_path=$PWD/$dir/reports/asan" \
		UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$PWD/$dir/reports/ubsan" \
			meson test -C $dir --no-suite rdma --no-suite package --print-errorlogs || status=1
		verdict $dir "AddressSanitizer or UBSan"
		;;
	tsan)
		dir=build-tsan
		clean $dir
		counted="$counted $dir/meson-logs/testlog.json --tap $dir/sanitizer-reports.tap"
		setup $dir thread || { status=1; continue; }
		mkdir -p $dir/reports
		tests=$(python3 scripts/threaded_tests.py $dir) || { status=1; continue; }
		# shellcheck disable=SC2086
		TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 log_path=$PWD/$dir/reports/tsan" \
			meson test -C $dir --print-errorlogs $tests || status=1
		verdict $dir "ThreadSanitizer"
		;;
	*)
		echo "usage: $0 [asan] [tsan]" >&2
		exit 2
		;;
	esac
done
# shellcheck disable=SC2086
echo "sanitizers: $(python3 scripts/count_tests.py $counted)"
exit $status
