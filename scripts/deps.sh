#!/bin/sh
# Installs the Debian packages the build and the tests need, if missing.
# Sourced by install.sh, test.sh, sanitize.sh and fuzz.sh.  A release
# build (install.sh sets deps_for=build) needs the compiler, meson and
# libibverbs' headers (for the ibverbs backend; without them it is left
# out).  The tests add cmocka; gcc brings the sanitizers' runtimes; the fuzz targets need clang and its
# libFuzzer (libclang-rt-dev: the runtime libraries of Debian's default
# clang).
need=""
command -v meson >/dev/null 2>&1 || need="$need meson"
command -v ninja >/dev/null 2>&1 || need="$need ninja-build"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v cc >/dev/null 2>&1 || need="$need gcc libc6-dev"
command -v python3 >/dev/null 2>&1 || need="$need python3"
[ -f /usr/include/infiniband/verbs.h ] || need="$need libibverbs-dev"
if [ "${deps_for:-test}" = test ]; then
	[ -f /usr/include/cmocka.h ] || need="$need libcmocka-dev"
	command -v clang >/dev/null 2>&1 || need="$need clang"
	fuzzer_lib=libclang_rt.fuzzer-$(uname -m).a
	[ -f "$(clang -print-file-name="$fuzzer_lib" 2>/dev/null)" ] ||
		need="$need libclang-rt-dev"
fi
if [ -n "$need" ]; then
	echo "installing:$need"
	if [ "$(id -u)" = 0 ]; then
		sudo=""
	else
		sudo="sudo"
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq >/dev/null || exit 1
	# shellcheck disable=SC2086
	$sudo apt-get install -y -qq $need >/dev/null || exit 1
fi
