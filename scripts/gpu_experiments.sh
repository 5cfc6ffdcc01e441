#!/bin/bash
# The GPU experiments of past sessions, each a mode that answers one
# question with nccl_bench runs (native in the same invocation) and prints
# what answers it; bench/results names the mode behind each number.  The
# correctness checks are scripts/gpu_check.sh, which hands these modes on.
#
# Usage: scripts/gpu_experiments.sh MODE
#        table: the README's table: every op at 64 MiB-1 GiB with the
#        defaults, with NCCL_NCHANNELS_PER_NET_PEER=16 and with
#        NCCL_ENV_PLUGIN=symmem alone, registered cuMem
#        send/recv and alltoall, 8-byte latency;
#        abort: where ncclCommAbort's time goes after a rank died or got
#        stuck: default, without the copy helper, the helper's exit time;
#        setup: what the plugin adds to ncclCommInitRank and to each op's first
#        call (connections), 4 and 2 ranks, copy engines and TCP;
#        chan, chan2: channel counts and step sizes against collective bandwidth;
#        tuned: the full op list with TUNE's settings, native in the same run;
#        pool-speed: NCCL_ZERO_COPY=0 and LL bandwidth/latency with native;
#        peer: sendrecv/alltoall with NCCL_NCHANNELS_PER_NET_PEER=16;
#        hostmem: where LL's host sends go with NCCL_CUMEM_HOST_ENABLE=0 and 1;
#        dig: 1 GiB send/recv and collectives with the copy helpers' busy time;
#        merge-sweep: NCCL_SYMMEM_MERGE_SIZE x NCCL_SYMMEM_COPY_DEPTH;
#        a2a4, big, a2a-why, a2a-chan, phase: 4-GPU alltoall (session 7);
#        plan, a2a-depth, shallow, streams, strided: 4-GPU alltoall against the
#        helper's phase planning (OLD_TREE=dir: an older tree beside it), queue
#        depth, NCCL_NET_SHARED_BUFFERS=0, streams x depth (also ring ops,
#        2 GPUs), 2D copies;
#        coll4: 4-GPU ring collectives against channels and buffer size;
#        layout: the addresses of the buffers the copy helper maps;
#        batch: copies per batch call, 16 (default) against 1 and 64;
#        bcast: 256 MiB broadcast swings (session 9);
#        bcast-iter, bcast-stall, iter-trace: iterations timed alone or back
#        to back with NCCL_SYMMEM_TRACE_US, every rank's lines on one clock;
#        torch-p2p: PyTorch send/recv and all_to_all with its allocator's
#        registration, natively and through the plugin (issue 4);
#        trees: ARGS through older checkouts (TREES) and VARIANTS, a bisection;
#        part-host: alltoall on 3 of the host's GPUs, ranks that see one GPU
#        each (-V) against ranks that see the 3, OLD_TREE=dir beside it;
#        lists: ranks that see their own GPU and the next (-W), OLD_TREE beside;
#        env-plugin: NCCL_ENV_PLUGIN=symmem alone against the Quick start
#        without and with NCCL_NCHANNELS_PER_NET_PEER=16;
#        ctas: a user's NCCL_MAX_CTAS / NCCL_MAX_NCHANNELS against the
#        plugin's NCCL_MIN_NCHANNELS (session 16);
#        hosts: a job across hosts posed on one (nccl_bench -H 2: NCCL's P2P
#        inside each half, the network between), natively NCCL's Socket net,
#        through the plugin its copy engines and NCCL_SYMMEM_BACKEND=tcp;
#        small sizes with NCCL's own protocols against NCCL_PROTO=^LL;
#        hosts-stage: the same over TCP, NCCL staging in host memory (the
#        default between hosts) against GPU buffers through the plugin's
#        slots (NCCL_NET_GDR_LEVEL=SYS), registered buffers, OLD_TREE beside;
#        tcp-replays: CUDA-graph replays queued back to back over TCP;
#        tcp: GPU buffers between "hosts" over TCP (two GPUs forced through
#        NCCL_SYMMEM_BACKEND=tcp) against NCCL's own Socket net, OLD_TREE
#        beside, registered buffers and CUDA graphs (session 18);
#        reg-bw: registered send/recv between GPU 0 and 1 through the
#        plugin's table without NCCL (test/nccl/reg_bw.c), cudaMalloc against
#        cuMem buffers, REG_BW_ARGS ("16 8 5 1": piece MiB, depth, passes,
#        connections each way; NCCL with 16 channels per peer: "16 8 5 16";
#        then optionally KiB allocated past the 1 GiB and which buffers get
#        them, both|send|recv: "16 8 3 16 4 send", session 27);
#        torch-gap: PyTorch's 4-GPU send/recv below nccl_bench's (0.86-0.88
#        against 1.04, session 27): both on one machine with the stage
#        medians of every connection, the CPUs each process and thread may
#        run on, the phases off, and PyTorch on 2 of the GPUs (session 29);
#        RUNS picks PyTorch runs ([native|plugin][-pool][-warm][-nophase]
#        [-2gpu][-old: through OLD_TREE's plugin]), ITERS their timed calls (20);
#        alloc-size: which cudaMalloc sizes copy slowly (session 28):
#        reg_bw with the allocations 0-128 KiB past 1 GiB, then ce_probe's
#        ipc-bidir (legacy IPC without the plugin) and bidir (one process,
#        peer access, no IPC) with 0, 4, 60 and 64 KiB past;
#        sweep: any VARIANTS of settings against the defaults (variants apart
#        by spaces, settings by commas before NCCL_, '+' for a space inside a
#        value).
#        NRANKS, PHASE_TIMEOUT, SKIP_BUILD: as in scripts/gpu_lib.sh.
MODE=${1:-}
case " table env-plugin abort setup hosts hosts-stage tcp tcp-replays ctas trees part-host lists torch-p2p pool-speed hostmem peer dig a2a4 big bcast bcast-iter iter-trace bcast-stall sweep batch a2a-why a2a-chan phase plan a2a-depth shallow streams strided layout coll4 merge-sweep tuned chan2 chan reg-bw alloc-size torch-gap " in
*" $MODE "*) ;;
*)
	echo "usage: $0 MODE (one of: table env-plugin abort setup hosts hosts-stage tcp tcp-replays ctas trees part-host lists torch-p2p pool-speed hostmem peer dig a2a4 big bcast bcast-iter iter-trace bcast-stall sweep batch a2a-why a2a-chan phase plan a2a-depth shallow streams strided layout coll4 merge-sweep tuned chan2 chan reg-bw alloc-size torch-gap)" >&2
	exit 2
	;;
esac
set -u
cd "$(dirname "$0")/.."
. scripts/gpu_lib.sh

# torch_p2p_run NAME: scripts/torch_p2p.py with the settings in $E, NCCL's
# log under $OUT/logs/NAME; prints its result lines (torch-p2p, torch-gap).
torch_p2p_run() {
	local d="$OUT/logs/$1"

	mkdir -p "$d"
	note "$1: $(echo $E)"
	if ! env $E NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET,REG NCCL_DEBUG_FILE="$d/nccl.%p.log" \
		timeout 300 "$PY" scripts/torch_p2p.py >"$d/out.txt" 2>&1; then
		echo "FAILED: $1"; tail -20 "$d/out.txt"; fail=1
	fi
	grep -E '^torch' "$d/out.txt"
}

# Session 24: the README's table from one tree: the defaults, the README's
# one variable, registered ncclMemAlloc buffers, and 8-byte latency.
if [ "$MODE" = table ]; then
	S="-b 67108864 -e 1073741824 -f 4 -i ${ITERS:-10}"
	ALL="-o all_reduce,all_gather,reduce_scatter,broadcast,reduce,sendrecv,alltoall"
	bench table-default $ALL $S
	bench table-p16 $ALL $S -E NCCL_NCHANNELS_PER_NET_PEER=16
	bench table-env -Z $ALL $S
	expect_env_plugin table-env
	bench table-reg -R -A -o sendrecv,alltoall $S -c none -E NCCL_NCHANNELS_PER_NET_PEER=16
	bench table-8b -o all_reduce,all_gather,sendrecv -b 8 -e 8 -i 200 -c none \
		-E NCCL_NCHANNELS_PER_NET_PEER=16
	finish
fi

# Session 30: NCCL_ENV_PLUGIN=symmem alone against the Quick start's
# variables without and with NCCL_NCHANNELS_PER_NET_PEER=16, native in
# each invocation.
if [ "$MODE" = env-plugin ]; then
	S="-b 67108864 -e 1073741824 -f 4 -i ${ITERS:-10}"
	ALL="-o all_reduce,all_gather,reduce_scatter,broadcast,reduce,sendrecv,alltoall"
	bench env-none -o sendrecv,alltoall $S -c none
	bench env-plugin -Z $ALL $S
	expect_env_plugin env-plugin
	bench env-p16 -o sendrecv,alltoall $S -c none -E NCCL_NCHANNELS_PER_NET_PEER=16
	finish
fi

# Session 26: registered cudaMalloc send/recv runs at 0.70 of native inside
# NCCL; this is the plugin's part alone, both kinds, every byte checked.
if [ "$MODE" = reg-bw ]; then
	note "reg_bw ${REG_BW_ARGS:-16 8 5 1}"
	SYMMEM_PLUGIN=build-gpu/libnccl-net-symmem.so timeout 300 ./build-gpu/reg_bw \
		${REG_BW_ARGS:-16 8 5 1} || { echo "FAILED: reg_bw"; fail=1; }
	finish
fi

# Session 27 measured registered cudaMalloc allocations of 1 GiB + 4, 60
# and 68 KiB slow and + 0, 64, 128 KiB fast; this fills the gaps between
# and asks whether IPC and the plugin have a part in it.
if [ "$MODE" = alloc-size ]; then
	for x in ${EXTRAS:-0 4 8 16 32 48 60 64 96 128}; do
		note "reg_bw 16 8 3 1 $x both"
		SYMMEM_PLUGIN=build-gpu/libnccl-net-symmem.so timeout 120 ./build-gpu/reg_bw \
			16 8 3 1 "$x" both || { echo "FAILED: reg_bw $x"; fail=1; }
	done
	nvcc -O2 -arch=sm_90 test/probe/ce_probe.cu -o build-gpu/ce_probe \
		-L/usr/local/cuda/lib64/stubs -lcuda || { echo "FAILED: ce_probe build"; finish; }
	for x in 0 4 60 64; do
		note "ce_probe ipc-bidir, BIPC_EXTRA_KiB=$x"
		BIPC_EXTRA_KiB=$x timeout 120 ./build-gpu/ce_probe ipc-bidir || fail=1
		note "ce_probe bidir, BIDIR_EXTRA_KiB=$x"
		BIDIR_EXTRA_KiB=$x timeout 120 ./build-gpu/ce_probe bidir || fail=1
	done
	finish
fi

# Session 24: ncclCommAbort took 0.6-0.9 s through the plugin against
# 0.5 s natively (bench/results/failures.md).  The same killed and stuck
# ranks, with INFO logs for the copy helper's exit time, and without the
# helper (NCCL_SYMMEM_COPY_HELPER=0) for what is left.
if [ "$MODE" = abort ]; then
	for v in kill kill-nohelper stuck stuck-nohelper; do
		a="-o all_reduce"
		case $v in stuck*) a="$a -s -t 5" ;; esac
		case $v in *nohelper) a="$a -m plugin -E NCCL_SYMMEM_COPY_HELPER=0" ;; esac
		mkdir -p "$OUT/logs/abort-$v"
		echo "== abort-$v: rank_death $a"
		timeout 300 ./build-gpu/rank_death ${NRANKS:+-n $NRANKS} $a -E NCCL_DEBUG=INFO \
			-E NCCL_DEBUG_SUBSYS=INIT,NET -E "NCCL_DEBUG_FILE=$OUT/logs/abort-$v/nccl.%p.log" \
			2>"$OUT/logs/abort-$v/stderr.txt" || { echo "FAILED: abort-$v"; fail=1; }
		grep -h "copy helper (pid .*) exited" "$OUT/logs/abort-$v"/nccl.*.log 2>/dev/null |
			sed 's/.*exited/exited/'
	done
	finish
fi

# Session 23: setup cost.  nccl_bench times ncclCommInitRank and each op's
# first call (NCCL connects at first use) on every rank started together,
# natively and through the plugin; twice each, then on 2 ranks.
if [ "$MODE" = setup ]; then
	S="-o all_reduce,all_gather,alltoall,sendrecv -b 1024 -e 1024 -c none -i 2"
	bench setup-a $S
	bench setup-b $S
	bench setup-tcp -m plugin $S -E NCCL_SYMMEM_BACKEND=tcp
	NRANKS=2 bench setup-2 $S
	for d in setup-a setup-b setup-tcp setup-2; do
		echo "== $d"; sed -n '/# setup/,/^$/p' "$OUT/logs/$d/table.txt"
	done
	grep -h "copy helper .* drives GPU" "$OUT"/logs/setup-*/nccl.*.log | sed 's/.*NCCL INFO //' |
		sed 's/.*started in/started in/' | sort | uniq -c
	finish
fi

# Session 20: a job across hosts, posed on this one.  Ranks 0..n/2-1 and
# n/2..n-1 get different NCCL_HOSTIDs (nccl_bench -H 2), so NCCL joins the
# GPUs of each half with its own P2P and the halves over the network:
# natively NCCL's Socket net, through the plugin its copy engines (the
# plugin sees one host) or, with NCCL_SYMMEM_BACKEND=tcp, its path between
# hosts.  Such jobs keep P2P on, so the plugin no longer sets NCCL_PROTO
# for them; the small and mid sizes compare, in the same call, the default
# (NCCL's protocols, the tuner's Simple past NCCL_SYMMEM_LL_MAX), NCCL's
# choice alone (NCCL_SYMMEM_LL_MAX=0) and the old default, ^LL (TUNING
# lines say what NCCL picked).
if [ "$MODE" = hosts ]; then
	PROVE=hosts bench hosts-ce -H 2 -b 0 -e 67108864 -f 4 -i 10
	PROVE=hosts bench hosts-tcp -H 2 -b 0 -e 67108864 -f 4 -i 10 -E NCCL_SYMMEM_BACKEND=tcp
	S="-o all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv -b 8 -e 4194304 -f 4 -c none -i 30"
	for b in ce tcp; do
		E=""
		[ $b = tcp ] && E="-E NCCL_SYMMEM_BACKEND=tcp"
		SUBSYS=INIT,ENV,NET,TUNING PROVE=hosts bench small-$b -H 2 $S $E
		SUBSYS=INIT,ENV,NET,TUNING PROVE=hosts bench small-$b-nccl -m plugin -H 2 $S $E \
			-E NCCL_SYMMEM_LL_MAX=0
		SUBSYS=INIT,ENV,NET,TUNING PROVE=hosts bench small-$b-noLL -m plugin -H 2 $S $E \
			-E NCCL_PROTO=^LL
		for v in small-$b small-$b-nccl small-$b-noLL; do
			printf '%s: all_reduce protocols NCCL took on one rank through the plugin:' "$v"
			grep -l 'Using network symmem' "$OUT"/logs/$v/nccl.*.log | head -1 |
				xargs grep -h 'AllReduce: .* Bytes -> Algo' | sed 's/.*AllReduce: \([0-9]*\) Bytes -> Algo \([A-Z_]*\) proto \([A-Za-z0-9]*\).*/\1:\2\/\3/' |
				sort -u -t: -k1n | tr '\n' ' '
			echo
		done
	done
	finish
fi

# Session 21: between hosts over TCP, who should stage GPU buffers in host
# memory?  With NCCL_NET_GDR_LEVEL=SYS (the plugin's default in every job
# until session 21, now only with P2P off or NCCL_PASS_SM=1) NCCL hands the
# plugin GPU buffers and the copy engines move them through its pinned
# slots, a copy-engine hop on each side; without it NCCL's kernels write
# and read host buffers themselves, as with its Socket net.  Native
# (Socket, posed hosts) runs in the first call of each group; the default
# runs twice for the spread; NCCL_SYMMEM_LL_MAX=0 asks whether the tuner's
# LL rule (measured with GPU buffers) still pays with host staging.
# OLD_TREE: the default through an older tree's plugin too.
if [ "$MODE" = hosts-stage ]; then
	T="-H 2 -o ${OPS:-all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv}"
	T="$T -b 8 -e ${MAX:-67108864} -f 4 -c none -i ${ITERS:-20} -E NCCL_SYMMEM_BACKEND=tcp"
	SUBSYS=INIT,ENV,NET,TUNING PROVE=hosts-host gpu_apps stage-host bench stage-host $T
	PROVE=none gpu_apps stage-host-old bench_old stage-host-old -m plugin $T
	SUBSYS=INIT,ENV,NET,TUNING PROVE=hosts gpu_apps stage-gpu bench stage-gpu -m plugin $T \
		-E NCCL_NET_GDR_LEVEL=SYS
	SUBSYS=INIT,ENV,NET,TUNING PROVE=hosts-host bench stage-host-llmax0 -m plugin $T \
		-E NCCL_SYMMEM_LL_MAX=0
	PROVE=hosts-host bench stage-host-again -m plugin $T
	python3 scripts/sweep_ratios.py "$OUT/tables.txt" | tee "$OUT/ratios.txt"
	# Registered buffers (ncclCommRegister): with GPUDirect the plugin sends
	# from them with no kernel copy; NCCL_PASS_SM=1 keeps GPUDirect.
	R="-H 2 -R -o sendrecv,alltoall -b 8 -e ${MAX:-67108864} -f 8 -c none -i ${ITERS:-20} -E NCCL_SYMMEM_BACKEND=tcp"
	PROVE=hosts-host bench reg-host $R
	PROVE=hosts bench reg-gpu -m plugin $R -E NCCL_NET_GDR_LEVEL=SYS
	PROVE=hosts bench reg-pass-sm -m plugin $R -E NCCL_PASS_SM=1
	python3 scripts/sweep_ratios.py "$OUT/tables.txt" reg-host | tee -a "$OUT/ratios.txt"
	# 8 bytes, stage by stage (the connections' close lines).
	V="-m plugin -H 2 -o sendrecv,all_reduce -b 8 -e 8 -c none -i 300 -E NCCL_SYMMEM_BACKEND=tcp -E NCCL_SM_FREE_VERBOSE=1"
	PROVE=hosts-host bench stage-host-8b $V
	# The old tree may start helpers here (before ba0f20f it did): no checks.
	PROVE=none bench_old stage-host-8b-old $V
	PROVE=hosts bench stage-gpu-8b $V -E NCCL_NET_GDR_LEVEL=SYS
	for v in stage-host-8b stage-host-8b-old stage-gpu-8b; do
		[ -d "$OUT/logs/$v" ] || continue
		echo "$v: send connections' close lines (post-to-done mean, stage medians):"
		grep -h 'NET/symmem send comm .* closed' "$OUT"/logs/$v/nccl.*.log |
			sed 's/.*closed: //' | grep -v '^0 messages' | sort | head -6
	done
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
		variant_args "$v"
		bench "sweep-$n" -m plugin $S "${E[@]}"
	done
	helper_lines sweep- 4
	# Every run against sweep-def's native times, one column each.
	python3 scripts/sweep_ratios.py "$OUT/tables.txt" | tee "$OUT/ratios.txt"
	finish
fi

# Between hosts: GPU buffers over TCP through the pinned, overlapped bounce
# slots (transport/tcp_bounce.c) against NCCL's own Socket net with no
# plugin loaded and, with OLD_TREE, the synchronous bounce before them.
# Native P2P runs in every invocation for the ratio column.
if [ "$MODE" = tcp ]; then
	T="-o sendrecv,all_reduce,all_gather,alltoall -b 8 -e 268435456 -f 8 -c none -i 5"
	PROVE=none bench tcp-socket -m plugin $T -E NCCL_NET_PLUGIN=none -E NCCL_NET=Socket
	bench tcp-new $T -E NCCL_SYMMEM_BACKEND=tcp -E NCCL_SM_FREE_VERBOSE=1
	bench_old tcp-old -m plugin $T -E NCCL_SYMMEM_BACKEND=tcp
	# More channels, so more sockets, than NCCL's own choice.
	for v in ${TCP_VARIANTS:-}; do
		variant_args "$v"
		bench "tcp-${v//[^A-Za-z0-9=]/_}" -m plugin $T -E NCCL_SYMMEM_BACKEND=tcp "${E[@]}"
	done
	bench tcp-reg -m plugin -R -o sendrecv,alltoall -b 1048576 -e 268435456 -f 16 -c none -i 5 \
		-E NCCL_SYMMEM_BACKEND=tcp
	[ -z "${SKIP_GRAPH:-}" ] && PHASE_TIMEOUT=90 bench tcp-graph -m plugin -G -o all_reduce,sendrecv \
		-b 8 -e 16777216 -f 16 -c none -i 5 -E NCCL_SYMMEM_BACKEND=tcp
	grep -h "driver would not pin" "$OUT"/logs/tcp-*/nccl.*.log | head -2
	for d in "$OUT"/logs/tcp-*; do
		echo "${d##*/}: $(grep -h -m1 'Channel [0-9]*/[0-9]* :' "$d"/nccl.*.log | sed 's/.*INFO //')"
	done
	finish
fi

# CUDA-graph replays queued back to back over TCP.  Once about 28 replays
# of a graph with a host node wait, cuGraphLaunch holds a driver lock every
# CUDA call of the process needs (copy-helper.md); a copy issued from
# NCCL's progress thread then waits for replays that wait for it.  REPLAYS
# launches per size, each phase bounded by PHASE_TIMEOUT; the same-host
# copy-engine path (copies in the helper) beside it.
if [ "$MODE" = tcp-replays ]; then
	R="-G -o all_reduce,sendrecv -b 1048576 -e 16777216 -f 16 -c none -i ${REPLAYS:-200}"
	PHASE_TIMEOUT=${PHASE_TIMEOUT:-90} bench tcp-replays -m plugin $R -E NCCL_SYMMEM_BACKEND=tcp
	PHASE_TIMEOUT=${PHASE_TIMEOUT:-90} bench ce-replays -m plugin $R
	# Receive copies under 32 KiB still run in NCCL's process.
	PHASE_TIMEOUT=${PHASE_TIMEOUT:-90} bench tcp-replays-small -m plugin -G -o all_reduce,sendrecv \
		-b 8 -e 16384 -f 8 -c none -i ${REPLAYS:-200} -E NCCL_SYMMEM_BACKEND=tcp
	finish
fi

# A user's cap on NCCL's CTAs (NCCL_MAX_CTAS, NCCL_MAX_NCHANNELS) against
# the plugin's NCCL_MIN_NCHANNELS default: NCCL copies channels up to its
# minimum after applying the maximum, so a minimum of 32 would override a
# cap of 8.  Each run prints, for native and plugin processes apart, the
# channel counts NCCL built ("Channel 00/N") and the most channels any
# all_reduce ran on (TUNING).  'old' sets the old minimum of 32 by hand.
if [ "$MODE" = ctas ]; then
	S="-o all_reduce,all_gather,reduce_scatter ${SIZES:--b 1048576 -e 268435456 -f 4} -c none -i ${ITERS:-10}"
	export SUBSYS=INIT,ENV,NET,TUNING
	bench ctas-default $S
	bench ctas-max-ctas8 $S -E NCCL_MAX_CTAS=8
	bench ctas-max-nch8 -m plugin $S -E NCCL_MAX_NCHANNELS=8
	bench ctas-old $S -m plugin -E NCCL_MAX_CTAS=8 -E NCCL_MIN_NCHANNELS=32
	for d in "$OUT"/logs/ctas-*; do
		for kind in native plugin; do
			logs=$(grep -L 'Using network symmem' "$d"/nccl.*.log 2>/dev/null)
			[ $kind = plugin ] && logs=$(grep -l 'Using network symmem' "$d"/nccl.*.log 2>/dev/null)
			[ -n "$logs" ] || continue
			echo "${d##*/} $kind: built channels $(cat $logs | grep -o 'Channel 00/[0-9]*' | sed 's|.*/||' | sort -u | tr '\n' ' ')" \
				"most all_reduce channels $(cat $logs | grep 'AllReduce: .* Bytes -> Algo' | grep -o 'channel{Lo..Hi}={[0-9]*..[0-9]*}' | sed 's/.*={\([0-9]*\)..\([0-9]*\)}/\1 \2/' | awk '{n=$2-$1+1; if (n>m) m=n} END {print m+0}')" \
				"$(cat $logs | grep -o 'NCCL_MIN_NCHANNELS[^,]*' | sort -u | head -2 | tr '\n' ' ')"
		done
	done | tee "$OUT/ctas.txt"
	python3 scripts/sweep_ratios.py "$OUT/tables.txt" | tee "$OUT/ratios.txt"
	finish
fi

# A bisection in one call: ARGS (nccl_bench arguments) natively and through
# this tree, then through the plugin of each older checkout in TREES
# (directories in the working tree, e.g. made by
# `git archive REV | tar -x -C trees/REV`), then this tree again to show
# the drift; VARIANTS (as for sweep) add runs of this tree.
if [ "$MODE" = trees ]; then
	S=${ARGS:?ARGS holds the nccl_bench arguments}
	bench trees-head $S
	for t in ${TREES:?TREES names the older checkouts}; do
		bench_tree "$t" "trees-${t##*/}" -m plugin $S
	done
	n=0
	for v in ${VARIANTS:-}; do
		n=$((n + 1))
		variant_args "$v"
		bench "trees-var$n" -m plugin $S "${E[@]}"
	done
	bench trees-head-again -m plugin $S
	helper_lines trees- 4
	python3 scripts/sweep_ratios.py "$OUT/tables.txt" | tee "$OUT/ratios.txt"
	finish
fi

# A job on part of a host whose ranks each see one GPU (-V): the copy
# helpers see the whole host (bench/results/visibility.md), and their phases
# must count only the GPUs the job writes to, as they do when the ranks
# see the job's GPUs only.  3 of 4 GPUs, alltoall, this tree against
# OLD_TREE (phases over every GPU the helper sees), then 4 GPUs to show
# that a job on the whole host is unchanged.
if [ "$MODE" = part-host ]; then
	# alltoall sizes a multiple of 3 ranks: 192 and 768 MiB.
	S3="-o alltoall -b 201326592 -e 805306368 -f 4 -c none -i 10 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	S="-o alltoall -b 268435456 -e 1073741824 -f 4 -c none -i 10 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	for reg in "" "-R -A"; do
		tag=${reg:+-reg}
		NRANKS=3 bench "part3-seen$tag" $S3 $reg
		NRANKS=3 bench "part3-visible$tag" -V $S3 $reg
		NRANKS=3 bench_old "part3-visible-old$tag" -V $S3 $reg
		NRANKS=4 bench "whole4$tag" $S $reg
		NRANKS=4 bench_old "whole4-old$tag" $S $reg
	done
	helper_lines part3 3
	helper_lines whole4 4
	finish
fi

# Ranks that see a list of two GPUs, their own and the next rank's (-W, as
# with two GPUs per task): the other peers are hidden from them.  This
# tree's helpers run without the list; OLD_TREE's kept it.
if [ "$MODE" = lists ]; then
	S="-W -o all_reduce,all_gather,alltoall,sendrecv -b 268435456 -e 1073741824 -f 4 -c none -i 10 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	R="-W -R -A -o alltoall,sendrecv -b 268435456 -e 1073741824 -f 4 -c none -i 10 -E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench lists $S
	bench_old lists-old $S
	bench lists-reg $R
	bench_old lists-old-reg $R
	helper_lines lists 4
	finish
fi

# Session 29: PyTorch's 4-GPU send/recv ran at 0.86-0.88 of native where
# nccl_bench's same pattern (ring, registered ncclMemAlloc buffers, 16
# channels per peer) ran at 1.04.  One machine, both drivers, and for each
# plugin run: the stage medians of every connection (are copies slower, or
# do they start later?), the helper lines, and the CPUs every thread of the
# ranks and helpers may use, sampled mid-run.
if [ "$MODE" = torch-gap ]; then
	affinity() {	# affinity NAME: every 4 s for 24 s, each process's and thread's CPUs
		local i p t
		for i in 1 2 3 4 5 6; do
			sleep 4
			for p in $(pgrep -f 'nccl_bench|torch_p2p|symmem-copyd'); do
				for t in /proc/$p/task/*; do
					# stat field 39 (the CPU it last ran on) is the 37th
					# after "pid (comm) ": comm may hold spaces.
					printf '%s|%s|%s|%s\n' "$p" "$(tr ' ' _ <$t/comm 2>/dev/null)" \
						"$(grep Cpus_allowed_list $t/status 2>/dev/null | cut -f2)" \
						"$(sed 's/.*) //' $t/stat 2>/dev/null | cut -d' ' -f37)"
				done
			done
		done >"$OUT/logs/affinity-$1.txt" 2>/dev/null
	}
	stages() {	# stages NAME: the close lines' medians, counted
		local k
		for k in "waited for the receive median" "isend to copy landed median" \
			"landed to seen here median"; do
			grep -h "closed:" "$OUT"/logs/$1/nccl.*.log 2>/dev/null |
				grep -o "$k[^,]*" | sort | uniq -c | sort -rn | head -4 | sed "s|^|$1: |"
		done
		helper_lines "$1" 8
		[ -f "$OUT/logs/affinity-$1.txt" ] &&
			awk -F'|' '$2 != "" {print $2, $3}' "$OUT/logs/affinity-$1.txt" | sort | uniq -c | sort -rn |
			head -12 | sed "s|^|$1 cpus: |"
	}
	V="-E NCCL_NCHANNELS_PER_NET_PEER=16 -E NCCL_SM_FREE_VERBOSE=1"
	affinity gap-bench &
	bench gap-bench -R -A -o sendrecv -b 1073741824 -e 1073741824 -c none -i 20 $V
	wait
	stages gap-bench
	PLUGIN="NCCL_NET_PLUGIN=symmem NCCL_NET=symmem NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
		NCCL_SM_FREE_VERBOSE=1"
	for run in ${RUNS:-native-pool plugin-pool plugin-pool-nophase plugin-pool-2gpu native-pool-2gpu}; do
		E="NCCL_NCHANNELS_PER_NET_PEER=16 ITERS=${ITERS:-20}"
		case $run in *pool*) E="$E TORCH_REG=pool" ;; esac
		case $run in plugin*) E="$E $PLUGIN" ;; esac
		case $run in *warm*) E="$E TORCH_WARM=1" ;; esac
		case $run in *nophase) E="$E NCCL_SYMMEM_PHASE_US=0" ;; esac
		case $run in *2gpu) E="$E NRANKS=2" ;; esac
		# -old: the same through OLD_TREE's plugin (an A/B in one call).
		case $run in *-old)
			[ -n "${OLD_TREE:-}" ] && tree_built "$OLD_TREE" || continue
			E="$E LD_LIBRARY_PATH=$PWD/$OLD_TREE/build-gpu:$LD_LIBRARY_PATH" ;;
		esac
		affinity "torch-$run" &
		torch_p2p_run "torch-$run"
		wait
		stages "torch-$run"
	done
	finish
fi

# Issue 4: PyTorch's user buffers registered with NCCL.  scripts/torch_p2p.py
# (send/recv and all_to_all_single of SIZE, default 1 GiB, per rank, every
# element checked) natively and through the plugin: unregistered, with
# PyTorch's allocator hook (TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1,
# cudaMalloc segments; PyTorch turns the hook off under expandable segments),
# with NCCL's allocator in a registered MemPool (TORCH_REG=pool, cuMem
# memory), and that with NCCL_PASS_SM=1.  The plugin runs log the
# connections' close lines (NCCL_SM_FREE_VERBOSE=1): their mean message
# size says whether the plugin moved NCCL's 2 MiB steps or the user's whole
# buffers.  RUNS picks runs of that list, EXTRA adds settings to the plugin
# runs.
if [ "$MODE" = torch-p2p ]; then
	PLUGIN="NCCL_NET_PLUGIN=symmem NCCL_NET=symmem NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
		NCCL_SM_FREE_VERBOSE=1"
	for run in ${RUNS:-native native-pool plugin plugin-hook plugin-pool plugin-pool-passsm}; do
		E="NCCL_NCHANNELS_PER_NET_PEER=16"
		case $run in plugin*) E="$E $PLUGIN ${EXTRA:-}" ;; esac
		case $run in *-hook) E="$E TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1" ;; esac
		case $run in *-pool*) E="$E TORCH_REG=pool" ;; esac
		case $run in *passsm) E="$E NCCL_PASS_SM=1" ;; esac
		torch_p2p_run "torch-$run"
		case $run in plugin*)
			prove "torch-$run"
			grep -h "closed:" "$OUT/logs/torch-$run"/nccl.*.log |
				sed -n 's/.*comm [^ ]* on device \([0-9]*\) closed: \([0-9]*\) messages.*), \([0-9.]*\) MiB,.*/\2 \3/p' |
				awk '$1 > 0 {m += $1; b += $2} END {if (m) printf "plugin connections: %d messages, mean %.1f MiB each\n", m, b / m}'
			;;
		esac
	done
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
