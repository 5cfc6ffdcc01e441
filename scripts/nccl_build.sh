#!/bin/bash
# Builds NCCL from a source tree (the NVIDIA/nccl repository at a tag) for
# Hopper and prints where its library is; with --check it then runs the
# project's GPU check on that NCCL (scripts/gpu_check.sh with
# NCCL_FROM=BUILDDIR), by default its abi mode: which net, tuner and env
# plugin ABI that NCCL took from this library, every op checked, and the
# 1 MiB and 1 GiB ratios (on a host with one GPU: two processes on it,
# posing as two hosts).  bench/results/versions.md collects the answers.
#
# Usage: scripts/nccl_build.sh [--check[=MODE]] SRC [BUILDDIR]
#   SRC        an NCCL source tree (git clone, or git archive of a tag)
#   BUILDDIR   where NCCL builds (default SRC/build): BUILDDIR/lib/libnccl.so
#              and BUILDDIR/include/nccl.h
#   MODE       the gpu_check.sh mode --check runs (default abi)
# Environment:
#   GENCODE    nvcc's target (default -gencode=arch=compute_90,code=sm_90)
#   CUDA_HOME  the toolkit NCCL builds with (default /usr/local/cuda).  Tags
#              before 2.27 do not build with CUDA 13 (its headers dropped
#              the unversioned PFN_cu* types they use): give them a CUDA 12
#              toolkit (NCCL links the CUDA runtime statically, so such a
#              build runs on a CUDA 13 driver).
#   NCCL_MAKE_ARGS  more arguments for NCCL's make (split at spaces)
#   OUT        gpu_check.sh's output folder (default /tmp/symmem-gpu)
set -u
check=
case ${1:-} in
--check) check=abi; shift ;;
--check=?*) check=${1#--check=}; shift ;;
esac
[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n '2,/^set -u/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2; }
src=$(cd "$1" 2>/dev/null && pwd) || { echo "nccl_build: no source tree at $1"; exit 2; }
[ -f "$src/makefiles/version.mk" ] && [ -f "$src/src/include/cudawrap.h" ] ||
	{ echo "nccl_build: $src is not an NCCL source tree (no makefiles/version.mk)"; exit 2; }
build=${2:-$src/build}
mkdir -p "$build" && build=$(cd "$build" && pwd) || { echo "nccl_build: cannot make $build"; exit 2; }
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
repo=$(cd "$(dirname "$0")/.." && pwd)
version=$(awk '/^NCCL_(MAJOR|MINOR|PATCH)/ {v = v (v ? "." : "") $3} END {print v}' \
	"$src/makefiles/version.mk")
cuda=$("$CUDA_HOME/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
[ -n "$cuda" ] || { echo "nccl_build: no nvcc in $CUDA_HOME/bin (set CUDA_HOME)"; exit 2; }
# NCCL before 2.27 names the driver's entry points by their unversioned
# PFN types, which CUDA 13's cudaTypedefs.h no longer has.
if [ "$cuda" -ge 13 ] && grep -q 'DECLARE_CUDA_PFN_EXTERN(symbol)' "$src/src/include/cudawrap.h"; then
	echo "nccl_build: NCCL $version predates CUDA 13, and $CUDA_HOME is CUDA $cuda:" \
		"set CUDA_HOME to a CUDA 12 toolkit"
	exit 2
fi

log=$build/nccl-build.log
echo "== NCCL $version from $src into $build (CUDA $cuda, $(nproc) jobs; log $log)"
# shellcheck disable=SC2086  # NCCL_MAKE_ARGS splits into its words
if ! make -C "$src" -j"$(nproc)" src.build BUILDDIR="$build" \
	NVCC_GENCODE="${GENCODE:--gencode=arch=compute_90,code=sm_90}" ${NCCL_MAKE_ARGS:-} \
	>"$log" 2>&1; then
	grep -m3 -E 'error' "$log"
	tail -5 "$log"
	echo "nccl_build: NCCL $version did not build (log $log)"
	exit 1
fi
lib=$(ls "$build"/lib/libnccl.so.[0-9]*.[0-9]* 2>/dev/null | head -1)
[ -n "$lib" ] && [ -f "$build/include/nccl.h" ] ||
	{ echo "nccl_build: no libnccl.so or nccl.h under $build"; exit 1; }
echo "libnccl: $lib"
echo "nccl.h: $build/include/nccl.h"
[ -n "$check" ] || exit 0

echo "== scripts/gpu_check.sh $check on NCCL $version (NCCL_FROM=$build)"
NCCL_FROM=$build exec bash "$repo/scripts/gpu_check.sh" "$check"
