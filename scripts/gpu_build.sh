#!/bin/bash
# Sourced by the GPU scripts: builds the plugin (build-gpu/) and the GPU
# drivers that are not part of the meson build because they need NCCL's
# header and library, or cuBLAS, which CI machines lack.  Logs go to $1.

# NCCL_FROM=wheel: the drivers link PyTorch's NCCL (the nvidia-nccl wheel
# under /opt/torch, 2.28.9 there) instead of the system's (2.28.3).
# NCCL_FROM=DIR: an NCCL built into DIR (scripts/nccl_build.sh: DIR/include,
# DIR/lib), first on the loader path too, so every process loads it.
gpu_nccl_paths() {
	NCCL_H=$(ls /usr/include/nccl.h 2>/dev/null || find /opt/torch -name nccl.h 2>/dev/null | head -1)
	NCCL_SO=$(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2 2>/dev/null ||
		find /opt/torch -name 'libnccl.so.2' 2>/dev/null | head -1)
	[ "${NCCL_FROM:-}" = wheel ] && NCCL_SO=$(find /opt/torch -name 'libnccl.so.2' 2>/dev/null | head -1)
	case ${NCCL_FROM:-} in /*)
		NCCL_H=$NCCL_FROM/include/nccl.h NCCL_SO=$NCCL_FROM/lib/libnccl.so.2
		[ -f "$NCCL_H" ] && [ -f "$NCCL_SO" ] || echo "NCCL_FROM=$NCCL_FROM: no include/nccl.h or lib/libnccl.so.2"
		export LD_LIBRARY_PATH="$NCCL_FROM/lib:${LD_LIBRARY_PATH:-}" ;;
	esac
	GPU_CC="gcc -std=c11 -O2 -D_GNU_SOURCE -I$(dirname "$NCCL_H") -I/usr/local/cuda/include"
	# nccl.h before 2.26 declares ncclBfloat16 only after cuda_bf16.h,
	# which the drivers (C) do not include; the library has it either way.
	grep -q __CUDA_BF16_TYPES_EXIST__ "$NCCL_H" && GPU_CC="$GPU_CC -D__CUDA_BF16_TYPES_EXIST__"
	GPU_LD="$NCCL_SO -L/usr/local/cuda/lib64 -Wl,-rpath,$(dirname "$NCCL_SO"):/usr/local/cuda/lib64"
}

# gpu_build_plugin DIR LOG: the plugin and its helper of the tree in DIR
# into DIR/build-gpu (no unit tests: the GPU hosts lack cmocka).
gpu_build_plugin() {
	(cd "$1" && meson setup build-gpu -Dtests=disabled --buildtype=release -Dwerror=false &&
		ninja -C build-gpu) >"$2" 2>&1 || { tail -30 "$2"; return 1; }
}

# The plugin and nccl_bench.
gpu_build() {
	local log=$1
	gpu_build_plugin . "$log" || return 1
	gpu_nccl_paths
	echo "== nccl.h: $NCCL_H  libnccl: $NCCL_SO"
	$GPU_CC test/nccl/bench_*.c $GPU_LD -lcudart -lm -o build-gpu/nccl_bench >>"$log" 2>&1 ||
		{ tail -30 "$log"; return 1; }
	# The plugin through its exported table, no NCCL (plugin/nccl_abi.h).
	$GPU_CC -Iplugin test/nccl/dereg_inflight.c test/mp/harness.c $GPU_LD -lcudart -ldl \
		-o build-gpu/dereg_inflight >>"$log" 2>&1 || { tail -30 "$log"; return 1; }
	# Registered send/recv through the exported table, no NCCL:
	# cudaMalloc against cuMem buffers (bench/results/coalesce.md).
	$GPU_CC -Iplugin test/nccl/reg_bw.c test/mp/harness.c $GPU_LD -lcudart \
		-L/usr/local/cuda/lib64/stubs -lcuda -ldl -o build-gpu/reg_bw >>"$log" 2>&1 ||
		{ tail -30 "$log"; return 1; }
	# The copy-engine hop against the driver's floors (test/mp/bench_hop.c):
	# no NCCL, the plugin's table, the driver through the plugin's loader.
	gcc -std=c11 -O2 -D_GNU_SOURCE -Iplugin -Isymmem -I/usr/local/cuda/include test/mp/bench_hop.c \
		test/mp/helper_stop.c test/mp/hop_mem.c test/mp/hop_floor.c test/mp/hop_hog.c \
		test/mp/hop_stats.c \
		test/mp/harness.c build-gpu/symmem/libsymmem.a -ldl -lpthread \
		-o build-gpu/bench_hop >>"$log" 2>&1 || { tail -30 "$log"; return 1; }
	# The helper's own share of a hop on this host's CPUs: the real helper
	# over the driver without GPU (test/fakedriver/, its own folder, so
	# only what names it loads it; test/mp/bench_helper_cpu.c).
	mkdir -p build-gpu/fakedriver
	gcc -std=c11 -O2 -D_GNU_SOURCE -shared -fPIC -fvisibility=hidden -I/usr/local/cuda/include \
		test/fakedriver/fake_*.c -lpthread -o build-gpu/fakedriver/libcuda.so.1 >>"$log" 2>&1 ||
		{ tail -30 "$log"; return 1; }
	gcc -std=c11 -O2 -D_GNU_SOURCE -Isymmem -Ismfree -I/usr/local/cuda/include \
		test/mp/bench_helper_cpu.c test/mp/helper_stop.c test/mp/hop_stats.c \
		build-gpu/smfree/libsmfree.a \
		build-gpu/symmem/libsymmem.a -ldl -lpthread -o build-gpu/bench_helper_cpu >>"$log" 2>&1 ||
		{ tail -30 "$log"; return 1; }
	# A rank killed mid-collective (its own main, nccl_bench's fork and ops);
	# it needs ncclCommShrink, which NCCL before 2.27 lacks.
	if grep -q ncclCommShrink "$NCCL_H"; then
		$GPU_CC test/nccl/rank_death.c test/nccl/bench_data.c test/nccl/bench_issue.c \
			test/nccl/bench_fork.c $GPU_LD -lcudart -lm -o build-gpu/rank_death >>"$log" 2>&1 ||
			{ tail -30 "$log"; return 1; }
	else
		echo "== no ncclCommShrink in $NCCL_H: rank_death not built"
	fi
	export LD_LIBRARY_PATH="$PWD/build-gpu:${LD_LIBRARY_PATH:-}"
}

# nccl_overlap (cuBLAS), after gpu_build.
gpu_build_overlap() {
	local log=$1
	$GPU_CC test/nccl/overlap.c test/nccl/bench_data.c test/nccl/bench_issue.c \
		test/nccl/bench_fork.c $GPU_LD \
		-lcublas -lcudart -lm -o build-gpu/nccl_overlap >>"$log" 2>&1 ||
		{ tail -30 "$log"; return 1; }
}

# gemm_ce (cuBLAS, no NCCL): the copy-engine floor beside a GEMM.
gpu_build_gemm_ce() {
	local log=$1
	mkdir -p build-gpu
	nvcc -O2 -arch=sm_90 test/probe/gemm_ce.cu -o build-gpu/gemm_ce -lcublas >>"$log" 2>&1 ||
		{ tail -30 "$log"; return 1; }
}
