#!/bin/sh
# Builds the libFuzzer targets (test/fuzz/) in build-fuzz/ with clang,
# ASan and UBSan, and runs each for FUZZ_SECONDS (default 30) from its
# seed corpus (test/fuzz/corpus/<name>/), FUZZ_JOBS (default: the cores)
# at a time.  The committed corpus is only read: what a run finds goes to
# a scratch directory, and a failing input to build-fuzz/artifacts/.
# Prints one TAP line per target, the results also go to
# build-fuzz/fuzz-results.tap (scripts/count_tests.py reads it), then
# "fuzz targets: N passed, N failed".  Exit status 1 when any failed.
#
# Usage: scripts/fuzz.sh [target...]   (names as in test/fuzz/fuzz_<name>.c)
# Longer runs, reproducing a failure, the seeds: docs/fuzzing.md.
cd "$(dirname "$0")/.." || exit 1
. scripts/deps.sh || exit 1
seconds=${FUZZ_SECONDS:-30}
jobs=${FUZZ_JOBS:-$(nproc)}
dir=build-fuzz

rm -f $dir/fuzz-results.tap	# a failed build leaves none to count
if [ ! -d $dir ]; then
	# Every library instrumented for coverage; the targets link libFuzzer.
	out=$(CC=clang meson setup $dir -Dfuzz=enabled -Dtests=disabled \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fsanitize=fuzzer-no-link 2>&1) || { echo "$out"; exit 1; }
fi
meson compile -C $dir fuzz >$dir/compile.log 2>&1 || { tail -40 $dir/compile.log; exit 1; }

if [ $# -eq 0 ]; then
	for f in test/fuzz/fuzz_*.c; do
		f=${f#test/fuzz/fuzz_}
		set -- "$@" "${f%.c}"
	done
fi
logs=$dir/fuzz-logs
rm -rf "$logs" && mkdir -p "$logs" $dir/artifacts || exit 1
scratch=$(mktemp -d) || exit 1
trap 'rm -rf "$scratch"' EXIT

# A UBSan report ends the run as a crash (by default it only prints), and
# every report of either sanitizer is one libFuzzer keeps the input of.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1

run() {
	name=$1
	mkdir -p "$scratch/$name"
	"$dir/test/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$dir/artifacts/$name-" \
		"$scratch/$name" "test/fuzz/corpus/$name" >"$logs/$name.log" 2>&1
	echo $? >"$logs/$name.rc"
}

running=0
for name in "$@"; do
	if [ ! -x "$dir/test/fuzz/fuzz_$name" ]; then
		echo "no fuzz target '$name'" >"$logs/$name.log"
		echo 2 >"$logs/$name.rc"
		continue
	fi
	run "$name" &
	running=$((running + 1))
	if [ $running -ge "$jobs" ]; then
		wait
		running=0
	fi
done
wait

n=0
passed=0
failed=0
echo "1..$#" >$dir/fuzz-results.tap
for name in "$@"; do
	n=$((n + 1))
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$name.log")
	if [ "$(cat "$logs/$name.rc")" = 0 ]; then
		line="ok $n - fuzz_$name: ${runs:-0} runs in $seconds s"
		passed=$((passed + 1))
	else
		why=$(grep -m1 -E "^==[0-9]+==ERROR|^SUMMARY|broken promise|fake copy engine|ERROR: libFuzzer|deadly signal|no fuzz target" \
			"$logs/$name.log")
		input=$(sed -n 's/.*Test unit written to //p' "$logs/$name.log" | tail -1)
		line="not ok $n - fuzz_$name: ${why:-exit status $(cat "$logs/$name.rc")}${input:+; input: $input} (log: $logs/$name.log)"
		failed=$((failed + 1))
	fi
	printf "%s\n" "$line"
	printf "%s\n" "$line" >>$dir/fuzz-results.tap
done
echo "fuzz targets: $passed passed, $failed failed"
[ $failed -eq 0 ]
