#!/bin/bash
# Builds NCCL from source for Hopper (sm_90 only), several versions at once
# sharing one job budget, and prints where each libnccl.so is; with
# --check it then runs the project's GPU check on each (scripts/gpu_check.sh
# with NCCL_FROM=BUILD), by default its abi mode: which net, tuner and env
# plugin ABI that NCCL took from this library, every op checked, and the
# 1 MiB and 1 GiB ratios (on a host with one GPU: two processes on it,
# posing as two hosts).  bench/results/versions.md collects the answers.
#
# Usage: scripts/nccl_build.sh [--check[=MODE]] [--host-only|--export] [-j N] WHAT...
#   WHAT         an NVIDIA/nccl tag (v2.21.5-1): its source is nccl-src/TAG
#                of this repository (git-ignored), exported there from the
#                clone $NCCL_GIT with git archive if absent; or the path of
#                an NCCL source tree (any argument with a /)
#   -j N         jobs for all the builds together (default: nproc); they
#                share them through make's jobserver, so while one build
#                links or generates, the others compile
#   --host-only  compile NCCL's host sources only, no library: a quick
#                check on a machine without GPU that a tree builds with
#                this toolkit
#   --export     only export the tags' sources into nccl-src/ (on a
#                machine with the clone, for a host without it)
#   MODE         the gpu_check.sh mode --check runs (default abi), one NCCL
#                after another, each with OUT=$OUT/NAME
# Each builds into nccl-build/NAME of this repository (git-ignored; NAME:
# the tag or the tree's folder name), or $NCCL_BUILD/NAME: lib/libnccl.so
# and include/nccl.h, the log in nccl-build.log there.
# Environment:
#   GENCODE    nvcc's target (default -gencode=arch=compute_90,code=sm_90)
#   CUDA_HOME  the toolkit NCCL builds with (default /usr/local/cuda).  With
#              CUDA 13, trees before 2.27 get scripts/nccl_cuda13.h (it says
#              why), copied into their source: CUDA 13 dropped the
#              unversioned PFN_cu* types and the graph-capture calls they
#              use.  NCCL links the CUDA runtime statically, so the
#              library runs on any driver of CUDA 13 or newer.
#   NCCL_GIT   the NVIDIA/nccl clone tags are exported from (default ~/nccl)
#   NCCL_BUILD where builds go (default nccl-build of this repository)
#   NCCL_MAKE_ARGS  more arguments for NCCL's make (split at spaces)
#   OUT        gpu_check.sh's output folder (default /tmp/symmem-gpu)
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
self=$repo/scripts/nccl_build.sh

# ---- one build, run by the jobserver's make below ----------------------

# Makes a tree before 2.27 build with CUDA 13: C++17 and CUDA 13's own
# folder of CCCL headers (<cuda/atomic>, from 2.23 on), as 2.27 has them;
# the compatibility header beside cudawrap.h, included right after
# cudaTypedefs.h; the entry point loader asking for the versions the
# header pins.  Each file is touched only where it still needs the edit:
# a new mtime would make NCCL's make rebuild every object again.
patch_cuda13() {
	local src=$1 mk=$1/makefiles/common.mk wrap=$1/src/include/cudawrap.h
	local loader=$1/src/misc/cudawrap.cc

	if grep -q -e '-std=c++11 ' "$mk"; then
		sed -i 's/-std=c++11 /-std=c++17 /' "$mk"
	fi
	if ! grep -q 'CUDA_INC)/cccl' "$mk"; then
		sed -i 's|^\( *-I \$(CUDA_INC)\) \\$|\1 -I $(CUDA_INC)/cccl \\|' "$mk"
	fi
	if ! cmp -s "$repo/scripts/nccl_cuda13.h" "$src/src/include/nccl_cuda13.h"; then
		cp "$repo/scripts/nccl_cuda13.h" "$src/src/include/nccl_cuda13.h" || return 1
	fi
	if ! grep -q '"nccl_cuda13.h"' "$wrap"; then
		sed -i 's|^#include <cudaTypedefs.h>$|&\n#include "nccl_cuda13.h"|' "$wrap"
	fi
	if grep -q 'cudaGetDriverEntryPoint(#symbol, .*&driverStatus)' "$loader"; then
		sed -i 's/cudaGetDriverEntryPoint(#symbol, \(.*&driverStatus)\)/ncclCuda13EntryPoint(#symbol, \1/' \
			"$loader"
	fi
	# An edit missing would leave a build that compiles but loads the
	# wrong driver ABIs, or one that does not compile: say which.
	if ! grep -q '"nccl_cuda13.h"' "$wrap" || ! grep -q 'ncclCuda13EntryPoint(#symbol' "$loader" ||
		[ "$(grep -c -e '-std=c++17 ' -e 'CUDA_INC)/cccl' "$mk")" -ne 3 ]; then
		echo "nccl_build: $src: common.mk, cudawrap.h or cudawrap.cc is not as in NCCL" \
			"2.21-2.26, scripts/nccl_build.sh's edits for CUDA 13 do not fit it"
		return 1
	fi
}

# one SRC BUILD: builds SRC into BUILD, its log there; prints one summary
# line, and exits 0 only with a library (with --host-only: every object).
one() {
	local src=$1 build=$2 host_only=$3 log=$2/nccl-build.log start rc lib version cuda goal

	start=$(date +%s)
	version=$(awk '/^NCCL_(MAJOR|MINOR|PATCH)/ {v = v (v ? "." : "") $3} END {print v}' \
		"$src/makefiles/version.mk")
	cuda=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
	mkdir -p "$build"
	: >"$log"
	# Sources before 2.27 name the driver's entry points by their
	# unversioned PFN types (DECLARE_CUDA_PFN_EXTERN takes one argument).
	if [ "$cuda" -ge 13 ] && grep -q 'DECLARE_CUDA_PFN_EXTERN(symbol)' "$src/src/include/cudawrap.h"; then
		patch_cuda13 "$src" >>"$log" 2>&1 || { echo "FAIL NCCL $version: patch ($log)"; return 1; }
		echo "nccl_build: CUDA $cuda, NCCL $version: scripts/nccl_cuda13.h applied" >>"$log"
	fi
	# The host objects only: a goal NCCL's src/Makefile lacks, added by a
	# second makefile that names its object list.
	goal=lib
	if [ "$host_only" = 1 ]; then
		printf 'hostobjs: $(LIBOBJ)\n' >"$build/hostobjs.mk"
		goal="-f Makefile -f $build/hostobjs.mk hostobjs"
	fi
	# No -j here: the jobserver of the make that runs this hands out jobs.
	# shellcheck disable=SC2086  # goal and NCCL_MAKE_ARGS split into words
	make -C "$src/src" $goal BUILDDIR="$build" \
		NVCC_GENCODE="${GENCODE:--gencode=arch=compute_90,code=sm_90}" ${NCCL_MAKE_ARGS:-} \
		>>"$log" 2>&1
	rc=$?
	local took=$(($(date +%s) - start))
	if [ $rc -ne 0 ]; then
		echo "FAIL NCCL $version ($((took / 60))m$((took % 60))s): $(grep -m1 -E 'error' "$log")"
		echo "     log $log"
		return 1
	fi
	if [ "$host_only" = 1 ]; then
		echo "OK   NCCL $version host objects ($((took / 60))m$((took % 60))s): $build/obj"
		return 0
	fi
	lib=$(ls "$build"/lib/libnccl.so.[0-9]*.[0-9]* 2>/dev/null | head -1)
	[ -n "$lib" ] && [ -f "$build/include/nccl.h" ] ||
		{ echo "FAIL NCCL $version: no libnccl.so or nccl.h under $build"; return 1; }
	echo "OK   NCCL $version ($((took / 60))m$((took % 60))s): libnccl $lib" \
		"nccl.h $build/include/nccl.h NCCL_FROM=$build"
}

if [ "${1:-}" = --one ]; then
	shift
	export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
	mkdir -p "$2" || exit 1
	one "$@" >"$2/summary" 2>&1
	rc=$?
	cat "$2/summary"
	exit $rc
fi

# ---- the arguments, the sources ----------------------------------------

usage() { sed -n '2,/^set -u/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2; }
check='' host_only=0 export_only=0 jobs=$(nproc)
while [ $# -gt 0 ]; do
	case $1 in
	--check) check=abi ;;
	--check=?*) check=${1#--check=} ;;
	--host-only) host_only=1 ;;
	--export) export_only=1 ;;
	-j) [ $# -ge 2 ] || usage; jobs=$2; shift ;;
	-j[0-9]*) jobs=${1#-j} ;;
	-*) usage ;;
	*) break ;;
	esac
	shift
done
[ $# -ge 1 ] || usage
[ "$jobs" -ge 1 ] 2>/dev/null || usage
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[ -x "$CUDA_HOME/bin/nvcc" ] || { echo "nccl_build: no nvcc in $CUDA_HOME/bin (set CUDA_HOME)"; exit 2; }
builds=${NCCL_BUILD:-$repo/nccl-build}
git_dir=${NCCL_GIT:-$HOME/nccl}

srcs=() names=()
for what in "$@"; do
	case $what in
	*/*)
		src=$(cd "$what" 2>/dev/null && pwd) || { echo "nccl_build: no source tree at $what"; exit 2; }
		name=$(basename "$src") ;;
	*)
		src=$repo/nccl-src/$what name=$what
		if [ ! -f "$src/makefiles/version.mk" ]; then
			git -C "$git_dir" rev-parse -q --verify "$what^{commit}" >/dev/null 2>&1 || {
				echo "nccl_build: no nccl-src/$what, and no tag $what in NCCL_GIT=$git_dir"
				exit 2
			}
			mkdir -p "$src" && git -C "$git_dir" archive "$what" | tar -x -C "$src" || exit 1
		fi ;;
	esac
	[ -f "$src/makefiles/version.mk" ] && [ -f "$src/src/include/cudawrap.h" ] ||
		{ echo "nccl_build: $src is not an NCCL source tree (no makefiles/version.mk)"; exit 2; }
	srcs+=("$src") names+=("$name")
done

[ "$export_only" = 0 ] || { printf '%s\n' "${srcs[@]}"; exit 0; }

# ---- the builds: one make, its jobserver shared by all ------------------

mkdir -p "$builds" || exit 1
plan=$(mktemp) && trap 'rm -f "$plan"' EXIT
echo "all: ${names[*]}" >"$plan"
for i in "${!names[@]}"; do
	# `+`: a recursive make, so it and NCCL's makes below take jobs from
	# this one; `-`: one failed build leaves the others going.
	printf '%s:\n\t-+@%q --one %q %q %s\n' "${names[$i]}" "$self" "${srcs[$i]}" \
		"$builds/${names[$i]}" "$host_only" >>"$plan"
done
echo "== NCCL ${names[*]} with $CUDA_HOME ($("$CUDA_HOME/bin/nvcc" --version |
	sed -n 's/.*release \([0-9.]*\),.*/CUDA \1/p')), $jobs jobs in all, into $builds"
start=$(date +%s)
make -s -f "$plan" -j"$jobs" all
took=$(($(date +%s) - start))
echo "== summary (${#names[@]} builds, $((took / 60))m$((took % 60))s in all)"
ok=()
for name in "${names[@]}"; do
	cat "$builds/$name/summary" 2>/dev/null || echo "FAIL $name: no summary"
	grep -q '^OK' "$builds/$name/summary" 2>/dev/null && ok+=("$name")
done
[ ${#ok[@]} -eq ${#names[@]} ] && status=0 || status=1
[ -n "$check" ] && [ "$host_only" = 0 ] || exit $status

for name in "${ok[@]}"; do
	echo "== scripts/gpu_check.sh $check on $name (NCCL_FROM=$builds/$name)"
	NCCL_FROM=$builds/$name OUT=${OUT:-/tmp/symmem-gpu}/$name \
		bash "$repo/scripts/gpu_check.sh" "$check" || status=1
done
exit $status
