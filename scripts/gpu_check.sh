#!/bin/bash
# One command on a GPU host: build the plugin and the NCCL driver, run the
# driver's matrix natively and through the plugin (same invocation, ratios),
# and prove from NCCL's own logs that every plugin run went via NET/symmem
# with GPUDirect.  Fails if any element is wrong or any log shows other
# traffic.  Logs and tables go to $OUT (default /tmp/symmem-gpu).
#
# Usage: scripts/gpu_check.sh [quick|full|debug|perf|probe|paths|leak|helper|chan|chan2|tuned|pool|pool-speed|peer|hostmem|dig|merge-sweep|table|floor|a2a4|big|a2a-why|a2a-chan|phase|plan|coll4|layout|batch|bcast|bcast-iter|bcast-stall|iter-trace|sweep|a2a-depth|shallow|streams|strided]   (full: sizes to 1 GiB;
#        debug: only the runs that hung before, short deadlines, stacks;
#        perf: step sizes (unregistered), helper streams (registered),
#        small-message latency per protocol;
#        probe: graph replays with a sync between, registered sendrecv statistics;
#        paths: five ops on each data path (DMA_ENABLE=0, DIRECT_PATH=0,
#        CUMEM_ENABLE=0); leak: CYCLES (200) communicator create/destroy cycles;
#        helper: back-to-back graph replays, registered and default to 1 GiB;
#        chan, chan2: channel counts and step sizes against collective bandwidth;
#        tuned: the full op list with TUNE's settings, native in the same run;
#        pool: NCCL_ZERO_COPY=0, the pool's sizing rules, a cap that must fail;
#        pool-speed: NCCL_ZERO_COPY=0 and LL bandwidth/latency with native;
#        peer: sendrecv/alltoall with NCCL_NCHANNELS_PER_NET_PEER=16;
#        hostmem: where LL's host sends go with NCCL_CUMEM_HOST_ENABLE=0 and 1;
#        dig: 1 GiB send/recv and collectives with the copy helpers' busy time;
#        merge-sweep: NCCL_SYMMEM_MERGE_SIZE x NCCL_SYMMEM_COPY_DEPTH;
#        table: every op to 1 GiB, registered cudaMalloc and ncclMemAlloc buffers;
#        floor: small-message latency natively, through the plugin, NCCL's Socket net,
#        host memory only and in-process copies);
#        plan, a2a-depth, shallow, streams: 4-GPU alltoall against the helper's
#        phase planning (OLD_TREE=dir: an older tree beside it), queue depth,
#        NCCL_NET_SHARED_BUFFERS=0, streams x depth (also ring ops, 2 GPUs);
#        coll4: 4-GPU ring collectives against channels and buffer size;
#        layout: the addresses of the buffers the copy helper maps;
#        batch: copies per batch call, 16 (default) against 1 and 64;
#        bcast-iter, bcast-stall, iter-trace: iterations timed alone or back
#        to back with NCCL_SYMMEM_TRACE_US, every rank's lines on one clock;
#        sweep: any VARIANTS of settings against the defaults)
#        NRANKS=n uses the first n GPUs (default: all).
#        SKIP_GRAPH=1 leaves out the CUDA-graph runs.
#        PHASE_TIMEOUT (s) per phase; a phase past it has its ranks' stacks
#        taken (cuda-gdb) into its log folder before they are killed.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/symmem-gpu}
MODE=${1:-full}
mkdir -p "$OUT/logs"
# NVLink multicast stays off on shared hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
fail=0
note() { echo "== $*"; }

nvidia-smi -L | tee "$OUT/logs/gpus.txt"
nvidia-smi topo -m >"$OUT/logs/topo.txt" 2>&1
. scripts/gpu_build.sh
# SKIP_BUILD=1: another invocation built build-gpu already (two modes run
# side by side on different GPUs must not rebuild under each other).
if [ -n "${SKIP_BUILD:-}" ]; then
	gpu_nccl_paths
	export LD_LIBRARY_PATH="$PWD/build-gpu:${LD_LIBRARY_PATH:-}"
else
	gpu_build "$OUT/logs/build.log" || exit 1
fi

# bench NAME [nccl_bench args...]: one invocation, both phases; the plugin
# phase logs NCCL's INIT/NET lines per process for prove().
bench() {
	local name=$1
	shift
	mkdir -p "$OUT/logs/$name"
	note "$name: nccl_bench $* ($(date +%T))"
	if ! timeout 580 ./build-gpu/nccl_bench ${NRANKS:+-n $NRANKS} -t "${PHASE_TIMEOUT:-240}" -S "$OUT/logs/$name" "$@" \
		-E NCCL_SYMMEM_STALL_REPORT="${STALL_REPORT:-20}" -E NCCL_DEBUG=INFO \
		-E NCCL_DEBUG_SUBSYS="${SUBSYS:-INIT,ENV,NET}" -E "NCCL_DEBUG_FILE=$OUT/logs/$name/nccl.%p.log" \
		>"$OUT/logs/$name/table.txt" 2>"$OUT/logs/$name/stderr.txt"; then
		echo "FAILED: $name"; tail -5 "$OUT/logs/$name/stderr.txt"; fail=1
	fi
	{ echo "## $name: nccl_bench $*"; cat "$OUT/logs/$name/table.txt"; echo; } >>"$OUT/tables.txt"
	grep -E 'nccl_bench:|^leak' "$OUT/logs/$name/table.txt"
	prove "$name" "${PROVE:-gdr}"
}

# Every plugin process: the plugin in use, channels via NET/symmem with
# GDRDMA (unless the run is host-memory only: prove NAME nogdr), nothing via
# P2P/SHM/another net, and a copy helper (unless copies stay in NCCL's
# process on purpose: prove NAME inproc).
prove() {
	local dir="$OUT/logs/$1" gdr=${2:-gdr} n=0
	[ "$gdr" = none ] && return	# a native-only run: nothing to prove
	for log in "$dir"/nccl.*.log; do
		[ -e "$log" ] || continue
		grep -q 'Using network symmem' "$log" || continue
		n=$((n + 1))
		if grep -E 'via (P2P|SHM)|via NET/(Socket|IB)' "$log" | head -2 | grep .; then
			echo "traffic outside NET/symmem in $log"; fail=1
		fi
		if [ "$gdr" != nogdr ] && grep 'via NET/symmem' "$log" | grep -vq 'GDRDMA'; then
			echo "a channel without GPUDirect in $log:"; grep 'via NET/symmem' "$log" | grep -v GDRDMA | head -2
			fail=1
		fi
	done
	[ "$n" -gt 0 ] || { echo "no plugin log says 'Using network symmem' in $1"; fail=1; }
	# GPU runs: the copies ran in symmem-copyd, not in NCCL's process.
	if [ "$gdr" = gdr ] && ! grep -qh 'copy helper .* drives GPU' "$dir"/nccl.*.log; then
		echo "no copy helper started in $1"; fail=1
	fi
	grep -h -m1 'via NET/symmem' "$dir"/nccl.*.log 2>/dev/null | head -1
}

# expect_fail NAME PATTERN [nccl_bench args...]: the plugin run must fail,
# well before its deadline (no hang), with PATTERN in a WARN line.
expect_fail() {
	local name=$1 pattern=$2 t0 took
	shift 2
	mkdir -p "$OUT/logs/$name"
	note "$name (must fail with a WARN matching '$pattern'): nccl_bench -m plugin $*"
	t0=$(date +%s)
	if timeout 300 ./build-gpu/nccl_bench ${NRANKS:+-n $NRANKS} -t "${PHASE_TIMEOUT:-240}" -m plugin "$@" \
		-E NCCL_DEBUG=INFO -E NCCL_DEBUG_SUBSYS=INIT,NET \
		-E "NCCL_DEBUG_FILE=$OUT/logs/$name/nccl.%p.log" \
		>"$OUT/logs/$name/table.txt" 2>"$OUT/logs/$name/stderr.txt"; then
		echo "FAILED: $name succeeded but must fail"; fail=1
	fi
	took=$(($(date +%s) - t0))
	echo "$name: failed after $took s"
	[ "$took" -lt "${PHASE_TIMEOUT:-240}" ] || { echo "FAILED: $name ran into its deadline"; fail=1; }
	if ! grep -h "WARN.*$pattern" "$OUT/logs/$name"/nccl.*.log | sed 's/.*NCCL WARN //' | sort -u | head -2 | grep .; then
		echo "FAILED: $name: no WARN matching '$pattern'"; fail=1
	fi
}

# bench_old NAME [nccl_bench args...]: the same through the plugin of
# OLD_TREE (an older checkout, built once into OLD_TREE/build-gpu), for
# an A/B in one call; nothing without OLD_TREE.
old_built=
bench_old() {
	[ -n "${OLD_TREE:-}" ] && [ "$old_built" != failed ] || return 0
	if [ -z "$old_built" ]; then
		note "building $OLD_TREE"
		if ! (cd "$OLD_TREE" && meson setup build-gpu -Dtests=disabled --buildtype=release \
			-Dwerror=false && ninja -C build-gpu) >"$OUT/logs/old-build.log" 2>&1; then
			tail -20 "$OUT/logs/old-build.log"; fail=1; old_built=failed; return 0
		fi
		old_built=1
	fi
	LD_LIBRARY_PATH="$PWD/$OLD_TREE/build-gpu:$LD_LIBRARY_PATH" bench "$@"
}

# helper_lines PREFIX N: the copy helpers' stop lines (copies, copy-engine
# calls, GB/s while busy) of the first N processes of each run PREFIX*.
helper_lines() {
	local d
	for d in "$OUT"/logs/"$1"*; do
		[ -d "$d" ] || continue
		grep -h "copy helper (pid [0-9]*): " "$d"/nccl.*.log 2>/dev/null |
			sed 's/.*NCCL INFO //' | sed "s|^|${d##*/}: |" | head -"$2"
	done
}

finish() {
	# The device tool brings back at most 8 files: the tables stay, logs are packed.
	tar -C "$OUT" -czf "$OUT/logs.tgz" logs 2>/dev/null && rm -rf "$OUT/logs"
	note "result: $([ $fail = 0 ] && echo PASS || echo FAIL)"
	exit $fail
}

if [ "$MODE" = debug ]; then
	bench graph -G -o all_reduce,sendrecv -b 8 -e 4194304 -f 8 -c none -i 5
	bench chan16 -E NCCL_MIN_NCHANNELS=16 -o all_reduce -b 65536 -e 1048576 -c none -i 5
	bench registered-graph -R -G -o sendrecv,alltoall -b 1048576 -e 16777216 -c none -i 5
	bench tcp -E NCCL_SYMMEM_BACKEND=tcp -o all_reduce,sendrecv -b 8 -e 16777216 -c none -i 3
	finish
fi

# Issue 5: the same five ops on every data path, and communicator cycles.
if [ "$MODE" = paths ]; then
	P="-o all_reduce,all_gather,reduce_scatter,alltoall,sendrecv -b 8 -e 268435456 -c none -i 10"
	bench path-default $P
	PROVE=nogdr bench path-dma0 $P -E NCCL_DMA_ENABLE=0
	bench path-direct0 $P -E NCCL_DIRECT_PATH=0
	bench path-cumem0 $P -E NCCL_CUMEM_ENABLE=0
	finish
fi

# Issue 5: the staging pool.  NCCL_ZERO_COPY=0 puts every GPU receive
# through it (five ops, every element checked, pool lines from the
# monitor); small sizes show growth, trim and prealloc; a cap below one
# NCCL buffer must fail cleanly.
if [ "$MODE" = pool ]; then
	bench pool-rules -m plugin -R -o sendrecv,alltoall -b 1048576 -e 67108864 -f 4 -c none -i 3 \
		-E NCCL_ZERO_COPY=0 -E NCCL_CUMEM_POOL_SIZE=8M -E NCCL_CUMEM_GROWTH_FACTOR=1.5 \
		-E NCCL_CUMEM_TRIM_THRESHOLD=0 -E NCCL_CUMEM_PREALLOC=1 -E NCCL_CUMEM_MONITOR=1
	# Each segment made or given back, and each pool's life at release.
	grep -h "staging pool of GPU" "$OUT"/logs/pool-rules/nccl.*.log | sed 's/.*NCCL INFO //' |
		sed 's/[0-9.]* MiB in [0-9]* segment/N MiB in K segment/' | sort | uniq -c | sort -rn | head -12
	grep -h "staging pool of GPU 0" "$OUT"/logs/pool-rules/nccl.*.log | sed 's/.*NCCL INFO //' | head -12
	expect_fail pool-cap "staging pool.*exhausted" -o all_reduce -b 1048576 -e 1048576 -c none -i 1 \
		-E NCCL_ZERO_COPY=0 -E NCCL_CUMEM_POOL_SIZE=1M -E NCCL_CUMEM_MAX_SIZE=1M
	# NCCL_CUMEM_ENABLE=0: the pool follows NCCL (cudaMalloc segments, legacy IPC).
	bench pool-legacy -m plugin -o all_reduce,sendrecv -b 8 -e 16777216 -c none -i 3 \
		-E NCCL_ZERO_COPY=0 -E NCCL_CUMEM_ENABLE=0
	grep -h "staging pool of GPU 0 (cudaMalloc)" "$OUT"/logs/pool-legacy/nccl.*.log |
		sed 's/.*NCCL INFO //' | head -3
	grep -q "staging pool of GPU 0 (cudaMalloc): new" "$OUT"/logs/pool-legacy/nccl.*.log ||
		{ echo "FAILED: pool-legacy made no cudaMalloc segment"; fail=1; }
	finish
fi

# Issue 5 again, without the sizing rules: NCCL_ZERO_COPY=0's bandwidth and
# LL's latency through the copy helper (both copies the driver could run as
# a kernel, now asked of a copy engine).
if [ "$MODE" = pool-speed ]; then
	bench path-zerocopy0 -o all_reduce,all_gather,reduce_scatter,alltoall,sendrecv -b 8 \
		-e 268435456 -c none -i 10 -E NCCL_ZERO_COPY=0
	bench lat-ll -o all_reduce,sendrecv -b 8 -e 1048576 -f 8 -c none -i 20 -E NCCL_PROTO=LL
	finish
fi

# Issue 5: NCCL_CUMEM_HOST_ENABLE.  LL keeps its send buffers in host
# memory NCCL 2.28 allocates with cudaHostAlloc, which the helper cannot
# map: sends go through the plugin's host staging, a shared memfd (0) or
# cuMem host memory (1).  The path and staging lines say which.
if [ "$MODE" = hostmem ]; then
	for v in 0 1; do
		bench "hostmem$v" -m plugin -o all_reduce,sendrecv -b 8 -e 1048576 -f 32 -c none -i 5 \
			-E NCCL_PROTO=LL -E NCCL_CUMEM_HOST_ENABLE=$v -E NCCL_SM_FREE_VERBOSE=1
		printf 'NCCL_CUMEM_HOST_ENABLE=%s: %s sending connections started from host staging (%s in cuMem host memory, %s in memfd memory), %s straight from NCCL buffers by the helper\n' "$v" \
			"$(grep -h "first moved from host staging" "$OUT"/logs/hostmem$v/nccl.*.log | wc -l)" \
			"$(grep -h "host staging for the copy helper: .* cuMem host memory" "$OUT"/logs/hostmem$v/nccl.*.log | wc -l)" \
			"$(grep -h "host staging for the copy helper: .* shared memfd memory" "$OUT"/logs/hostmem$v/nccl.*.log | wc -l)" \
			"$(grep -h "first moved by copy engine into the receiver's buffer, issued by the copy helper" "$OUT"/logs/hostmem$v/nccl.*.log | wc -l)"
	done
	grep -h "host staging in cuMem host memory unavailable" "$OUT"/logs/hostmem1/nccl.*.log | head -2
	finish
fi

# Issue 3: send/recv and alltoall with the channels per peer the user sets
# (NCCL reads NCCL_NCHANNELS_PER_NET_PEER before the plugin can set it).
if [ "$MODE" = peer ]; then
	bench peer16 -o sendrecv,alltoall -b 16 -e 1073741824 -f 4 -c none -i 8 \
		-E NCCL_NCHANNELS_PER_NET_PEER=16
	bench peer16-registered -R -o sendrecv,alltoall -b 16 -e 1073741824 -f 4 -c none -i 8 \
		-E NCCL_NCHANNELS_PER_NET_PEER=16
	finish
fi

# Issue 3, session 6: where send/recv's time goes at 1 GiB.  Each copy
# helper's stop line says how long its copies were in flight and how fast
# bytes moved while they were (copy engine slow, or starved by the
# pipeline in front of it?).
if [ "$MODE" = dig ]; then
	S="-o sendrecv,alltoall -b 1073741824 -e 1073741824 -c none -i 8"
	bench sr-peer16 $S -E NCCL_NCHANNELS_PER_NET_PEER=16
	bench sr-peer32 -m plugin $S -E NCCL_NCHANNELS_PER_NET_PEER=32
	bench sr-peer32-b32 -m plugin $S -E NCCL_NCHANNELS_PER_NET_PEER=32 \
		-E NCCL_BUFFSIZE=33554432 -E NCCL_P2P_NET_CHUNKSIZE=4194304
	bench reg-sr -R $S -E NCCL_NCHANNELS_PER_NET_PEER=16
	bench reg-sr-s1 -m plugin -R $S -E NCCL_NCHANNELS_PER_NET_PEER=16 -E NCCL_SYMMEM_STREAMS=1
	bench reg-sr-s4 -m plugin -R $S -E NCCL_NCHANNELS_PER_NET_PEER=16 -E NCCL_SYMMEM_STREAMS=4
	C="-o all_reduce,all_gather,broadcast -b 1073741824 -e 1073741824 -c none -i 8"
	bench coll $C
	bench coll-b32 -m plugin $C -E NCCL_BUFFSIZE=33554432
	bench lat -o sendrecv,all_reduce -b 8 -e 8 -c none -i 200 -E NCCL_SM_FREE_VERBOSE=1
	helper_lines "" 4
	grep -h "closed:" "$OUT"/logs/lat/nccl.*.log | sed 's/.*NCCL INFO //' | head -6
	finish
fi

# Issue 3: where small-message latency goes.  The same 8 B-64 KiB ops
# natively, through the plugin, through NCCL's own Socket net forced the
# same way (NCCL's proxy path with no copy engine), through the plugin on
# host memory only (NCCL_DMA_ENABLE=0: a CPU copy in the shared ring) and
# with copies in NCCL's process; then native and plugin with
# NCCL_PROTO=Simple (the plugin's default keeps LL off).
if [ "$MODE" = floor ]; then
	L="-o sendrecv,all_reduce,all_gather -b 8 -e 65536 -f 8 -c none -i 200"
	bench floor-plugin $L -E NCCL_SM_FREE_VERBOSE=1
	PROVE=none bench floor-socket -m plugin $L -E NCCL_NET=Socket
	PROVE=nogdr bench floor-dma0 -m plugin $L -E NCCL_DMA_ENABLE=0
	PROVE=inproc bench floor-inproc -m plugin $L -E NCCL_SYMMEM_COPY_HELPER=0 -E NCCL_SM_FREE_VERBOSE=1
	NCCL_PROTO=Simple bench floor-simple $L
	helper_lines floor-plugin 2
	# Per connection: stage medians (wait for the receive, isend to landed,
	# landed to seen by the receiver) from the close lines.
	grep -h "closed:" "$OUT"/logs/floor-plugin/nccl.*.log "$OUT"/logs/floor-inproc/nccl.*.log |
		sed 's/.*NCCL INFO //' | grep median | head -12
	finish
fi

# Issue 3, session 7: alltoall on 4 GPUs (0.57 of native in session 6).
# Registered ncclMemAlloc buffers take NCCL's pipeline out of it (one copy
# per peer and channel); the helper's stream count decides how many peers
# one GPU's copies reach at once.
if [ "$MODE" = a2a4 ]; then
	A="-o alltoall -b 268435456 -e 1073741824 -f 4 -c none -i 5 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench a2a-reg-s2 -R -A $A
	bench a2a-reg-s1 -m plugin -R -A $A -E NCCL_SYMMEM_STREAMS=1
	bench a2a-reg-s4 -m plugin -R -A $A -E NCCL_SYMMEM_STREAMS=4
	bench a2a-reg-d1024 -m plugin -R -A $A -E NCCL_SYMMEM_COPY_DEPTH=1024
	PROVE=inproc bench a2a-reg-inproc -m plugin -R -A $A -E NCCL_SYMMEM_COPY_HELPER=0
	bench a2a-s2 -m plugin $A
	helper_lines a2a- 4
	finish
fi

# Issue 3, short form of 'table': the six ops at 256 MiB and 1 GiB, and
# registered (ncclMemAlloc) alltoall and send/recv, native in the same runs.
if [ "$MODE" = big ]; then
	P16="-E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench big-all -o all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv \
		-b 268435456 -e 1073741824 -f 4 -c none -i 5 $P16
	bench big-regmem -R -A -o alltoall,sendrecv -b 268435456 -e 1073741824 -f 4 -c none -i 5 $P16
	helper_lines big- 4
	finish
fi

# Issue 3, session 9: 4-GPU broadcast at 256 MiB swings between 0.13 and
# 0.94 of native from one invocation to the next.  The same op after the
# small sizes (as in quick) twice, alone twice, and with NCCL_PROTO=Simple,
# with the algorithm and protocol NCCL picked (TUNING) for 256 MiB.
if [ "$MODE" = bcast ]; then
	export SUBSYS=INIT,ENV,NET,TUNING
	for i in 1 2; do
		bench "bcast-sweep-$i" -o all_reduce,broadcast -b 0 -e 268435456 -c none
		bench "bcast-alone-$i" -m plugin -o broadcast -b 268435456 -e 268435456 -c none -i 20
	done
	bench bcast-simple -m plugin -o all_reduce,broadcast -b 0 -e 268435456 -c none -E NCCL_PROTO=Simple
	# Where a step's time goes, per rank (stage medians of every connection).
	for i in 1 2; do
		bench "bcast-why-$i" -m plugin -o broadcast -b 268435456 -e 268435456 -c none -i 20 \
			-E NCCL_SM_FREE_VERBOSE=1
		for log in "$OUT/logs/bcast-why-$i"/nccl.*.log; do
			echo "bcast-why-$i ${log##*/}:" \
				"$(grep -h 'send comm.*closed:' "$log" | grep -o 'waited for the receive median [^,]*' | sort | uniq -c | tr -s ' ' | tr '\n' ';')" \
				"$(grep -h 'send comm.*closed:' "$log" | grep -o 'isend to copy landed median [^,]*' | sort | uniq -c | tr -s ' ' | tr '\n' ';')" \
				"$(grep -h 'receive comm.*closed:' "$log" | grep -o 'landed to seen here median [^,]*' | sort | uniq -c | tr -s ' ' | tr '\n' ';')" \
				"send $(grep -h 'send comm.*closed:' "$log" | grep -o 'post-to-done mean [0-9.]* us' | awk '{s+=$3; n++} END {if (n) printf "post-to-done mean %.0f us (%d comms)", s/n, n}')" \
				"receive $(grep -h 'receive comm.*closed:' "$log" | grep -o 'post-to-done mean [0-9.]* us' | awk '{s+=$3; n++} END {if (n) printf "post-to-done mean %.0f us (%d comms)", s/n, n}')"
		done
		helper_lines "bcast-why-$i" 4
	done
	for d in "$OUT"/logs/bcast-*; do
		echo "${d##*/}: $(grep -h 'Broadcast: 268435456 Bytes' "$d"/nccl.*.log | sed 's/.*-> //' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
	done
	grep -h -m2 'Broadcast' "$OUT"/logs/bcast-sweep-1/nccl.*.log | head -2
	finish
fi

# traces NAME: every NCCL_SYMMEM_TRACE_US line of run NAME, all ranks, in
# time order, each with its process, into $OUT/trace-NAME.txt.
traces() {
	local d="$OUT/logs/$1" log
	for log in "$d"/nccl.*.log; do
		[ -e "$log" ] || continue
		grep -h 'trace [0-9.]* ms:' "$log" | sed "s|^|${log##*/nccl.} |"
	done | sed 's/^\([0-9]*\)\.log \(.*\)trace \([0-9.]*\) ms:/\3 pid \1:/' |
		sort -n >"$OUT/trace-$1.txt"
	echo "$1: $(wc -l <"$OUT/trace-$1.txt") trace lines"
}

# The same broadcast with each iteration timed alone (nccl_bench -T: every
# rank starts each iteration together and prints its times): one stall or
# every iteration slow?  Without warmup (does a stall follow the op
# count?), with the copies in NCCL's process (is it the copy helper?), and
# with NCCL_SYMMEM_TRACE_US (TRACE, default 3000): which connection waited,
# for what, and when, on one clock for every rank.  OPS: default broadcast.
if [ "$MODE" = bcast-iter ]; then
	T="-T -o ${OPS:-broadcast} -b 268435456 -e 268435456 -c none -i 20"
	TR="-E NCCL_SYMMEM_TRACE_US=${TRACE:-3000}"
	bench bcast-iter-plugin -m plugin $T $TR
	bench bcast-iter-nowarmup -m plugin $T -w 0 $TR
	PROVE=inproc bench bcast-iter-inproc -m plugin $T -w 0 $TR -E NCCL_SYMMEM_COPY_HELPER=0
	PROVE=none bench bcast-iter-native -m native $T
	for run in plugin nowarmup inproc native; do
		echo "$run:"; grep -h 'us per iteration' "$OUT/logs/bcast-iter-$run/stderr.txt" | sort
		[ $run = native ] || traces "bcast-iter-$run"
		grep -h 'copy helper (pid [0-9]*): longest' "$OUT/logs/bcast-iter-$run"/nccl.*.log |
			sed 's/.*NCCL INFO //'
	done
	finish
fi

# Each iteration alone (-T), every message traced (TRACE, default 1 us: all
# of them), native in the same call: OPS (default all_gather), SIZE
# (default 64 MiB), ITERS (default 5).  The per-hop times of a pipeline.
if [ "$MODE" = iter-trace ]; then
	T="-T -o ${OPS:-all_gather} -b ${SIZE:-67108864} -e ${SIZE:-67108864} -c none -i ${ITERS:-5}"
	bench iter-trace-plugin -m plugin $T -E NCCL_SYMMEM_TRACE_US=${TRACE:-1}
	PROVE=none bench iter-trace-native -m native $T
	for run in plugin native; do
		echo "$run:"; grep -h 'us per iteration' "$OUT/logs/iter-trace-$run/stderr.txt" | sort
	done
	traces iter-trace-plugin
	finish
fi

# The same 256 MiB broadcast back to back, as nccl_bench times it (no
# barrier between iterations), traced: where the stalls of one op in three
# go (session 9).
if [ "$MODE" = bcast-stall ]; then
	bench bcast-stall -o broadcast -b 268435456 -e 268435456 -c none -i 20 \
		-E NCCL_SYMMEM_TRACE_US=${TRACE:-3000}
	traces bcast-stall
	grep -h 'copy helper (pid [0-9]*): longest' "$OUT/logs/bcast-stall"/nccl.*.log |
		sed 's/.*NCCL INFO //'
	finish
fi

# Any plugin settings against the defaults, native in the same call:
# VARIANTS holds space-separated variants, each a comma-separated list of
# NAME=VALUE (e.g. "NCCL_BUFFSIZE=8388608 NCCL_BUFFSIZE=4194304"); OPS the
# ops (default: the four ring collectives), SIZES nccl_bench's size flags
# (default 64 MiB to 1 GiB), ITERS, and P16=1 adds
# NCCL_NCHANNELS_PER_NET_PEER=16 to every run.
if [ "$MODE" = sweep ]; then
	S="-o ${OPS:-all_reduce,all_gather,reduce_scatter,broadcast} ${SIZES:--b 67108864 -e 1073741824 -f 4} -c none -i ${ITERS:-10}"
	[ -n "${P16:-}" ] && S="$S -E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench sweep-def $S
	n=0
	for v in ${VARIANTS:?VARIANTS names the settings to compare}; do
		n=$((n + 1))
		E=""
		for kv in ${v//,/ }; do E="$E -E $kv"; done
		bench "sweep-$n" -m plugin $S $E
	done
	helper_lines sweep- 4
	finish
fi

# Issue 3, session 9: copies of different connections in one
# cuMemcpyBatchAsync (NCCL_SYMMEM_BATCH) against other counts and call
# sizes: VARIANTS holds BATCH:MERGE_SIZE pairs (default "1:16MiB 64:16MiB";
# 1 = one call per copy, the session-8 helper), OPS the ops (default: all
# six), native in the first invocation.  NOREG=1 leaves out the registered
# runs; EXTRA (nccl_bench -E options) goes to every variant.
if [ "$MODE" = batch ]; then
	P16="-E NCCL_NCHANNELS_PER_NET_PEER=16"
	B="-o ${OPS:-all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv} -b 268435456 -e 1073741824 -f 4 -c none -i ${ITERS:-5} $P16"
	bench batch-def $B
	for v in ${VARIANTS:-1:16MiB 64:16MiB}; do
		bench "batch-${v%%:*}-${v##*:}" -m plugin $B -E NCCL_SYMMEM_BATCH=${v%%:*} \
			-E NCCL_SYMMEM_MERGE_SIZE=${v##*:} ${EXTRA:-}
	done
	if [ -z "${NOREG:-}" ]; then
		R="-R -A -o alltoall,sendrecv -b 1073741824 -e 1073741824 -c none -i 5 $P16"
		bench batch-reg $R
		bench batch-reg-1 -m plugin $R -E NCCL_SYMMEM_BATCH=1
	fi
	helper_lines batch- 4
	finish
fi

# Issue 3: 4-GPU alltoall on registered buffers with the stage medians of
# every connection: do senders wait for receives, or copies for the engine?
if [ "$MODE" = a2a-why ]; then
	bench a2a-why -m plugin -R -A -o alltoall -b 1073741824 -e 1073741824 -c none -i 5 \
		-E NCCL_NCHANNELS_PER_NET_PEER=16 -E NCCL_SM_FREE_VERBOSE=1
	grep -h "send comm.*closed:" "$OUT"/logs/a2a-why/nccl.*.log | grep -o "waited for the receive median[^,]*" | sort | uniq -c
	grep -h "send comm.*closed:" "$OUT"/logs/a2a-why/nccl.*.log | grep -o "isend to copy landed median[^,]*" | sort | uniq -c
	grep -h "receive comm.*closed:" "$OUT"/logs/a2a-why/nccl.*.log | grep -o "landed to seen here median[^,]*" | sort | uniq -c
	helper_lines a2a-why 4
	finish
fi

# Issue 3: 4-GPU registered alltoall against the channels per peer (how
# many copies each peer's share is cut into, and how many are in flight).
if [ "$MODE" = a2a-chan ]; then
	A="-R -A -o alltoall -b 1073741824 -e 1073741824 -c none -i 5"
	bench a2a-p16 $A -E NCCL_NCHANNELS_PER_NET_PEER=16
	for p in 1 4 32; do
		bench "a2a-p$p" -m plugin $A -E NCCL_NCHANNELS_PER_NET_PEER=$p
	done
	helper_lines a2a-p 1
	finish
fi

# Issue 3, session 7: the helpers' phase length (NCCL_SYMMEM_PHASE_US; 0 =
# copies in NCCL's order) against 4-GPU alltoall and all_gather at 1 GiB.
if [ "$MODE" = phase ]; then
	A="-o alltoall,all_gather -b 1073741824 -e 1073741824 -c none -i 5 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	R="-R -A -o alltoall -b 1073741824 -e 1073741824 -c none -i 5 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench ph-200 $A
	for p in 0 50 1000; do
		bench "ph-$p" -m plugin $A -E NCCL_SYMMEM_PHASE_US=$p
	done
	bench ph-reg-200 $R
	bench ph-reg-0 -m plugin $R -E NCCL_SYMMEM_PHASE_US=0
	finish
fi

# Issue 3, session 8: 4-GPU alltoall with each copy planned for the phase
# it will run in, at three phase lengths, and (OLD_TREE=dir holding an
# older checkout) that tree's helper in the same call, native beside.
if [ "$MODE" = plan ]; then
	A="-o alltoall -b 1073741824 -e 1073741824 -c none -i 5 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench plan-200 $A
	bench plan-reg-200 -R -A $A
	for p in 100 400; do
		bench "plan-$p" -m plugin $A -E NCCL_SYMMEM_PHASE_US=$p
	done
	bench_old plan-old-200 -m plugin $A
	bench_old plan-old-reg-200 -m plugin -R -A $A
	helper_lines plan- 8 | grep phases
	finish
fi

# Issue 3, session 8: 4-GPU alltoall against how far ahead the helper
# queues copies (streams x copies per stream), since a copy's phase is
# planned from the bytes queued before it; native in the first invocations.
if [ "$MODE" = a2a-depth ]; then
	A="-o alltoall -b 1073741824 -e 1073741824 -c none -i 5 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench dep-s2-d2 $A
	bench dep-reg-s2-d2 -R -A $A
	for sd in 1,2 1,1 2,1 1,3; do
		st=${sd%,*} dp=${sd#*,}
		E="-E NCCL_SYMMEM_STREAMS=$st -E NCCL_SYMMEM_COPY_DEPTH=$dp"
		bench "dep-s$st-d$dp" -m plugin $A $E
		bench "dep-reg-s$st-d$dp" -m plugin -R -A $A $E
	done
	helper_lines dep- 8 | cut -c1-200
	finish
fi

# Issue 3, session 8: a shallow helper queue (1 stream, 2 copies) and
# NCCL's shared p2p buffers off (NCCL_NET_SHARED_BUFFERS=0: each connection
# its own ring, so consecutive steps are adjacent and merge), on 4 GPUs and
# (-n 2) on 2; native in each first invocation.
if [ "$MODE" = shallow ]; then
	P16="-E NCCL_NCHANNELS_PER_NET_PEER=16"
	A="-o alltoall -b 1073741824 -e 1073741824 -c none -i 5 $P16"
	S="-E NCCL_SYMMEM_STREAMS=1 -E NCCL_SYMMEM_COPY_DEPTH=2"
	NS="-E NCCL_NET_SHARED_BUFFERS=0"
	bench sh-a2a-ns $A $S $NS
	bench sh-a2a -m plugin $A $S
	bench sh-a2a-ns-s2d2 -m plugin $A $NS
	for p in 100 400; do
		bench "sh-reg-p$p" -m plugin -R -A $A $S -E NCCL_SYMMEM_PHASE_US=$p
	done
	C="-o all_reduce,all_gather,reduce_scatter,sendrecv -b 1073741824 -e 1073741824 -c none -i 5 $P16"
	bench sh-coll $C $S $NS
	bench sh-coll-s2d2 -m plugin $C
	T="-n 2 -o alltoall,sendrecv -b 1073741824 -e 1073741824 -c none -i 5 $P16"
	bench sh2-ns $T $NS
	bench sh2-ns-s1d2 -m plugin $T $NS $S
	bench sh2 -m plugin $T
	helper_lines sh 4 | cut -c1-120
	finish
fi

# Issue 3, session 8: the helper's streams x copies per stream for the
# ring collectives and alltoall, on 4 GPUs and (-n 2) on 2; native in each
# first invocation (the defaults: 1 stream, 2 copies).
if [ "$MODE" = streams ]; then
	P16="-E NCCL_NCHANNELS_PER_NET_PEER=16"
	C="-o broadcast,all_reduce,all_gather,alltoall -b 1073741824 -e 1073741824 -c none -i 5 $P16"
	R="-R -A -o alltoall -b 1073741824 -e 1073741824 -c none -i 5 $P16"
	T="-n 2 -o broadcast,all_reduce,sendrecv,alltoall -b 1073741824 -e 1073741824 -c none -i 5 $P16"
	bench st-s1d2 $C
	bench st2-s1d2 $T
	bench st-reg-s1d2 -m plugin $R
	for sd in 2,1 2,2; do
		E="-E NCCL_SYMMEM_STREAMS=${sd%,*} -E NCCL_SYMMEM_COPY_DEPTH=${sd#*,}"
		bench "st-s${sd%,*}d${sd#*,}" -m plugin $C $E
		bench "st2-s${sd%,*}d${sd#*,}" -m plugin $T $E
		bench "st-reg-s${sd%,*}d${sd#*,}" -m plugin $R $E
	done
	finish
fi

# Issue 3, session 8: evenly spaced send/recv steps as 2D copies, against
# OLD_TREE (the tree before them) in the same call: unregistered alltoall
# and send/recv on 4 and (-n 2) 2 GPUs, native in the first invocations.
if [ "$MODE" = strided ]; then
	A="-o alltoall,sendrecv -b 268435456 -e 1073741824 -f 4 -c none -i 5 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench str4 $A
	bench str2 -n 2 $A
	bench_old str4-old -m plugin $A
	bench_old str2-old -m plugin -n 2 $A
	helper_lines str 2 | cut -c1-100
	helper_lines str 2 | grep -o "at most.*"
	finish
fi

# Issue 3: 4-GPU all_reduce, all_gather, reduce_scatter at 1 GiB against
# the ring channels and step size the plugin sets (32 channels, 16 MiB
# buffers), native in the first invocation.
# Issue 3, session 9: where NCCL's per-channel buffers sit in each process
# (the copy helper's ranges, NCCL_SM_FREE_VERBOSE=1): evenly spaced buffers
# could go as the rows of one 2D copy.
if [ "$MODE" = layout ]; then
	bench layout -o all_gather,all_reduce -b 1073741824 -e 1073741824 -c none -i 3 \
		-E NCCL_SM_FREE_VERBOSE=1
	for log in "$OUT"/logs/layout/nccl.*.log; do
		grep -h 'copy helper range' "$log" | sed 's/.*NCCL INFO //' | head -80
		break
	done >"$OUT/layout.txt"
	helper_lines layout 8
	finish
fi

if [ "$MODE" = coll4 ]; then
	C="-o all_reduce,all_gather,reduce_scatter -b 1073741824 -e 1073741824 -c none -i 5"
	bench coll-32 $C
	for n in 16 24; do
		bench "coll-$n" -m plugin $C -E NCCL_MIN_NCHANNELS=$n -E NCCL_MAX_NCHANNELS=$n
	done
	bench coll-buf32 -m plugin $C -E NCCL_BUFFSIZE=33554432
	bench coll-buf8 -m plugin $C -E NCCL_BUFFSIZE=8388608
	finish
fi

# Issue 3: the bandwidth table with the plugin's defaults and the README's
# NCCL_NCHANNELS_PER_NET_PEER=16, native in the same invocations: every op
# 16 B - 1 GiB, then registered buffers from cudaMalloc (legacy IPC) and
# from ncclMemAlloc (cuMem).
if [ "$MODE" = table ]; then
	P16="-E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench table-all -o all_reduce,broadcast,reduce,all_gather,reduce_scatter,alltoall,sendrecv \
		-b 16 -e 1073741824 -f 4 -c none -i 8 $P16
	bench table-reg -R -o sendrecv,alltoall -b 1048576 -e 1073741824 -f 8 -c none -i 8 $P16
	bench table-regmem -R -A -o sendrecv,alltoall -b 1048576 -e 1073741824 -f 8 -c none -i 8 $P16
	helper_lines table- 4
	finish
fi

# Issue 3, session 6: the helper's merge size and copies per stream,
# against no merging with every copy queued at once (the session-5
# helper).  Native in the first invocation only.
if [ "$MODE" = merge-sweep ]; then
	U="-o all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv -b 8 -e 1073741824 -f 8192 -c none -i 8 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench ms-off $U -E NCCL_SYMMEM_MERGE_SIZE=0 -E NCCL_SYMMEM_COPY_DEPTH=1024
	for cfg in ${MERGE_SWEEP:-"16M,2" "16M,4" "4M,2" "64M,2" "16M,1" "0,2"}; do
		bench "ms-${cfg%,*}-d${cfg#*,}" -m plugin $U -E NCCL_SYMMEM_MERGE_SIZE=${cfg%,*} \
			-E NCCL_SYMMEM_COPY_DEPTH=${cfg#*,}
	done
	helper_lines ms- 2
	finish
fi

# Issue 3: the best channel/step settings from 'chan', with NCCL natively
# in the same invocation; TUNE holds the -E flags.
if [ "$MODE" = tuned ]; then
	# TUNE= (empty): the plugin's own NCCL defaults, nothing added.
	T=${TUNE-"-E NCCL_MIN_NCHANNELS=16 -E NCCL_NCHANNELS_PER_NET_PEER=8 -E NCCL_BUFFSIZE=16777216 -E NCCL_P2P_NET_CHUNKSIZE=2097152"}
	bench tuned $T -o all_reduce,broadcast,reduce,all_gather,reduce_scatter,alltoall,sendrecv \
		-b 16 -e 1073741824 -f 4 -c none -i 8
	bench tuned-registered -R $T -o sendrecv,alltoall,all_gather -b 8 -e 1073741824 -f 16 -c none -i 8
	grep -h "set by environment to\|p2p channels per peer" "$OUT"/logs/tuned/nccl.*.log |
		sed 's/.*NCCL INFO //' | sort | uniq -c
	finish
fi

# Issue 3, second round: channels, channels per net peer and step size together.
if [ "$MODE" = chan2 ]; then
	U="-o all_reduce,all_gather,reduce_scatter,alltoall,sendrecv -b 268435456 -e 1073741824 -f 4 -c none -i 8"
	bench c16-p8-b16 -m plugin $U -E NCCL_MIN_NCHANNELS=16 -E NCCL_NCHANNELS_PER_NET_PEER=8 \
		-E NCCL_BUFFSIZE=16777216 -E NCCL_P2P_NET_CHUNKSIZE=2097152
	bench c16-p8-b32 -m plugin $U -E NCCL_MIN_NCHANNELS=16 -E NCCL_NCHANNELS_PER_NET_PEER=8 \
		-E NCCL_BUFFSIZE=33554432 -E NCCL_P2P_NET_CHUNKSIZE=4194304
	bench c32-p16-b16 -m plugin $U -E NCCL_MIN_NCHANNELS=32 -E NCCL_NCHANNELS_PER_NET_PEER=16 \
		-E NCCL_BUFFSIZE=16777216 -E NCCL_P2P_NET_CHUNKSIZE=2097152
	bench reg-c16-p8 -m plugin -R -o sendrecv,alltoall -b 268435456 -e 1073741824 -f 4 -c none -i 8 \
		-E NCCL_MIN_NCHANNELS=16 -E NCCL_NCHANNELS_PER_NET_PEER=8
	for d in "$OUT"/logs/c* "$OUT"/logs/reg-c*; do
		printf '%s: ' "${d##*/}"
		grep -h -m1 -o '[0-9]* coll channels, .* p2p channels per peer' "$d"/nccl.*.log | head -1
	done
	finish
fi

# Issue 5: CYCLES (200) communicators split off, used and destroyed in one
# process, through the plugin only (both phases took longer than one device
# call in session 4); device free memory and RSS after cycle 1 and the last.
if [ "$MODE" = leak ]; then
	# LEAK_PHASE=native: the same cycles without the plugin, for comparison.
	[ "${LEAK_PHASE:-plugin}" = native ] && PROVE=none
	bench leak -m "${LEAK_PHASE:-plugin}" -L "${CYCLES:-200}" -o all_reduce,sendrecv -b 1048576 \
		-e 1048576 -c none -E NCCL_CUMEM_MONITOR=1
	grep -h "at finalize" "$OUT"/logs/leak/nccl.*.log | tail -4
	finish
fi

# The copy helper: the CUDA-graph replays that deadlocked with in-process
# copies (session 3), and the registered and default paths at full size.
if [ "$MODE" = helper ]; then
	bench graph -G -b 0 -e 268435456 -c none -E NCCL_SM_FREE_VERBOSE=1
	bench registered-graph -R -G -o sendrecv,alltoall -b 1048576 -e 268435456 -c none \
		-E NCCL_SM_FREE_VERBOSE=1
	# Copies by the helper vs in this process, from the connections' close lines.
	grep -h "closed:" "$OUT"/logs/*graph/nccl.*.log |
		sed -n 's/.*(\([0-9]*\) by copy engine in place, \([0-9]*\) of them in the copy helper).*/\1 \2/p' |
		awk '{d += $1; h += $2} END {print "graph runs: " d " in-place copies, " h " by the copy helper"}'
	bench registered -R -o sendrecv,alltoall,all_gather -b 8 -e 1073741824 -c none -i 10
	bench default -o all_reduce,all_gather,sendrecv -b 8 -e 1073741824 -c none -i 10
	grep -h "copy helper" "$OUT"/logs/*/nccl.*.log | sed 's/.*NCCL INFO //' | sort | uniq -c | head -5
	finish
fi

if [ "$MODE" = probe ]; then
	bench graph-sync -G -Y -o all_reduce,sendrecv -b 67108864 -e 268435456 -f 4 -c none -i 5
	bench reg-stats -R -m plugin -o sendrecv -b 1073741824 -e 1073741824 -c none -i 3 \
		-E NCCL_SM_FREE_VERBOSE=1
	grep -h "closed:" "$OUT"/logs/reg-stats/nccl.*.log | head -20
	finish
fi

# The open performance questions with the copy helper: NCCL's step sizes
# on the unregistered path, the helper's stream count on the registered
# one, and small-message latency per protocol.
if [ "$MODE" = perf ]; then
	U="-o sendrecv,alltoall,all_reduce,all_gather -b 67108864 -e 1073741824 -f 4 -c none -i 10"
	bench steps-default $U
	bench steps-16m -m plugin $U -E NCCL_BUFFSIZE=16777216 -E NCCL_P2P_NET_CHUNKSIZE=2097152
	bench steps-64m -m plugin $U -E NCCL_BUFFSIZE=67108864 -E NCCL_P2P_NET_CHUNKSIZE=8388608
	R="-R -o sendrecv,alltoall -b 67108864 -e 1073741824 -f 4 -c none -i 10"
	bench reg-streams1 -m plugin $R -E NCCL_SYMMEM_STREAMS=1
	bench reg-streams2 $R
	bench reg-streams4 -m plugin $R -E NCCL_SYMMEM_STREAMS=4
	L="-o all_reduce,all_gather,sendrecv -b 8 -e 1048576 -f 8 -c none -i 20"
	bench lat-default $L
	bench lat-ll128 -m plugin $L -E NCCL_PROTO=LL128
	bench lat-simple -m plugin $L -E NCCL_PROTO=Simple
	finish
fi

# Issue 3: where the collective bandwidth goes.  On one host with P2P and
# SHM off NCCL sizes its rings from the GPU-CPU-GPU path, not from the
# plugin's speed, so collectives get few channels and send/recv gets
# NCCL_NCHANNELS_PER_NET_PEER (2) per peer.  One row per lever, 256 MiB and
# 1 GiB, every element checked; native once for the ratios.
if [ "$MODE" = chan ]; then
	U="-o all_reduce,all_gather,reduce_scatter,alltoall,sendrecv -b 268435456 -e 1073741824 -f 4 -c none -i 8"
	bench chan-default $U
	bench chan-min16 -m plugin $U -E NCCL_MIN_NCHANNELS=16
	bench chan-min32 -m plugin $U -E NCCL_MIN_NCHANNELS=32
	bench chan-min16-buf16m -m plugin $U -E NCCL_MIN_NCHANNELS=16 -E NCCL_BUFFSIZE=16777216 \
		-E NCCL_P2P_NET_CHUNKSIZE=2097152
	P="-o sendrecv,alltoall -b 268435456 -e 1073741824 -f 4 -c none -i 8"
	bench peer8 -m plugin $P -E NCCL_NCHANNELS_PER_NET_PEER=8
	bench reg-peer2 -R $P
	bench reg-peer8 -m plugin -R $P -E NCCL_NCHANNELS_PER_NET_PEER=8
	bench reg-peer16 -m plugin -R $P -E NCCL_NCHANNELS_PER_NET_PEER=16
	# Channels NCCL actually built, from its INIT lines.
	for d in "$OUT"/logs/chan-* "$OUT"/logs/*peer*; do
		printf '%s: ' "${d##*/}"
		grep -h -m1 -o '[0-9]* coll channels, [0-9]* collnet channels, [0-9]* nvls channels, [0-9]* p2p channels, [0-9]* p2p channels per peer' \
			"$d"/nccl.*.log 2>/dev/null | head -1 || echo "(no channel line)"
		echo
	done
	finish
fi

MAX=1073741824
[ "$MODE" = quick ] && MAX=268435456
bench default -b 0 -e $MAX
for proto in Simple LL LL128; do
	NCCL_PROTO=$proto bench "proto-$proto" -b 0 -e 67108864 -c none -i 5
done
[ -z "${SKIP_GRAPH:-}" ] && bench graph -G -b 0 -e $MAX -c none
bench registered -R -b 8 -e $MAX -c none
[ -z "${SKIP_GRAPH:-}" ] && bench registered-graph -R -G -o sendrecv,alltoall -b 1048576 -e $MAX -c none
bench tcp -E NCCL_SYMMEM_BACKEND=tcp -E NCCL_IB_HCA=mlx5 -o all_reduce,sendrecv -b 8 -e 16777216 -c none -i 3
grep -h -m1 "RDMA devices" "$OUT"/logs/tcp/nccl.*.log | sed 's/.*NCCL INFO //' | head -1
# NCCL's buffers from cudaMalloc: exported as legacy CUDA IPC handles.
bench cumem0 -E NCCL_CUMEM_ENABLE=0 -o all_reduce,all_gather,reduce_scatter,alltoall,sendrecv \
	-b 8 -e $((MAX / 4)) -c none -i 5

note "pytorch all_reduce through the plugin"
PY=$(command -v python3)
[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
mkdir -p "$OUT/logs/torch"
if ! env NCCL_NET_PLUGIN=symmem NCCL_NET=symmem NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
	NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET NCCL_DEBUG_FILE="$OUT/logs/torch/nccl.%p.log" \
	timeout 300 "$PY" scripts/torch_allreduce.py >"$OUT/logs/torch/out.txt" 2>&1; then
	echo "FAILED: torch"; tail -20 "$OUT/logs/torch/out.txt"; fail=1
fi
grep -E 'all_reduce over|WRONG' "$OUT/logs/torch/out.txt"
prove torch

finish
