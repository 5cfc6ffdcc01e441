#!/bin/bash
# One command on a GPU host: build the plugin and the NCCL driver, run the
# driver's matrix natively and through the plugin (same invocation, ratios),
# and prove from NCCL's own logs that every plugin run went via NET/symmem
# with GPUDirect.  Fails if any element is wrong or any log shows other
# traffic.  Logs and tables go to $OUT (default /tmp/symmem-gpu).
#
# Usage: scripts/gpu_check.sh [full|quick|debug|paths|pool|leak|helper|probe|perf|table|floor|death|abi|onegpu|hosts|hop|ab|torch-reg]
#        full: every op to 1 GiB, the three protocols, CUDA graphs, registered
#        buffers (with graphs), TCP, NCCL_CUMEM_ENABLE=0, ranks that see one
#        GPU each (nccl_bench -V), a rank killed mid-collective, PyTorch (one
#        group, and row and column groups at once); quick: the
#        same to 256 MiB (the protocols to 64 MiB);
#        debug: only the runs that hung before, short deadlines, stacks;
#        paths: five ops on each data path (DMA_ENABLE=0, DIRECT_PATH=0,
#        CUMEM_ENABLE=0); pool: NCCL_ZERO_COPY=0, the pool's sizing rules, a
#        cap that must fail; leak: CYCLES (200) communicator create/destroy
#        cycles; helper: back-to-back graph replays, registered and default to
#        1 GiB; probe: graph replays with a sync between, registered sendrecv
#        statistics; perf: step sizes (unregistered), helper streams
#        (registered), small-message latency per protocol; table: every op to
#        1 GiB, registered cudaMalloc and ncclMemAlloc buffers; floor:
#        small-message latency natively, through the plugin, NCCL's Socket
#        net, host memory only and in-process copies; death: a rank killed
#        mid-collective (all_reduce, alltoall, sendrecv, TCP), one that stops
#        taking part (stall reports, aborts return) and PyTorch's
#        row and column groups; abi: which net, tuner and env plugin ABI
#        this NCCL picks (from its log), every op 8 B-16 MiB checked, the
#        1 MiB and 1 GiB ratios (bench/results/versions.md;
#        scripts/nccl_build.sh --check runs it on an NCCL built from
#        source); onegpu: two processes on GPU 0 posing as two hosts
#        (NCCL_HOSTID), over the copy engines and TCP, correctness only
#        (abi does the same on a host with one GPU); hosts: two ranks on
#        GPU 0 in namespaces of their own (BENCH_PID_NS=1), so the plugin
#        too sees two hosts: through the test stand-in of an inner net
#        plugin (natively: NCCL's Socket net), and over its own TCP; then
#        GPU buffers on the inner path (the stand-in's INNER_STANDIN_GPU,
#        by regMr and by regMrDmaBuf): GDRDMA on every channel, every op
#        8 B-16 MiB, every element checked.
#        hop: the copy-engine hop (test/mp/bench_hop.c) host<->GPU against
#        the driver's floors, idle and beside a kernel on every SM (in
#        another process and in the copying one), with landing words and
#        with events (NCCL_SYMMEM_LANDING_WORDS=1/0): $OUT/hop.jsonl;
#        then the helper's own share on this host's CPUs, no GPU
#        (test/mp/bench_helper_cpu.c): $OUT/helper-cpu.jsonl;
#        with two GPUs or more also GPU 0 <-> GPU 1 (--path gpu-gpu);
#        OLD_TREE=DIR adds a run through DIR's plugin (an earlier commit's
#        exported tree), idle, as variant "base DIR";
#        ab: the NCCL-level sweep, every op, natively and through the plugin
#        with landing words and with events (on one GPU: posed hosts to
#        64 MiB, correctness only; on several: 8 B-1 GiB, sweep rows with
#        `variant`), then hop (AB_ONLY=1: not).
#        torch-reg: README.md's PyTorch recipe on one GPU: two ranks on GPU 0
#        posing as two hosts (NCCL_HOSTID) run scripts/torch_registered.py
#        (ncclMemAlloc tensors from the process group's allocator, the pool
#        registered, an all_reduce and a send/recv, every element checked)
#        with NCCL_PASS_SM=1; NCCL's logs must show every channel via
#        NET/symmem with GPUDirect, the tuner's cap, send/recv buffers
#        registered with the net, and no driver error quoted for host memory.
#        NRANKS=n uses the first n GPUs (default: all).
#        NCCL_FROM=wheel runs the NCCL drivers on PyTorch's NCCL (2.28.9 on the
#        GPU hosts) instead of the system's (2.28.3); NCCL_FROM=/DIR on one
#        built into /DIR (scripts/nccl_build.sh), its lib first on the loader path.
#        SKIP_GRAPH=1 leaves out the CUDA-graph runs.
#        PART=matrix runs only full's / quick's driver matrix (every op, the
#        protocols, graphs, registered buffers), PART=extras only the rest
#        (TCP, cudaMalloc buffers, visibility, killed ranks, PyTorch): a
#        4-GPU full does not fit one 10-minute device call.
#        PHASE_TIMEOUT (s) per phase; a phase past it has its ranks' stacks
#        taken (cuda-gdb) into its log folder before they are killed.
MODE=${1:-full}
case $MODE in
full | quick | debug | paths | pool | leak | helper | probe | perf | table | floor | death | abi | onegpu | hosts | hop | ab | torch-reg) ;;
*)
	echo "gpu_check.sh: unknown mode '$MODE' (modes: full quick debug paths pool leak helper" \
		"probe perf table floor death abi onegpu hosts hop ab torch-reg)" >&2
	exit 2
	;;
esac
set -u
cd "$(dirname "$0")/.."
. scripts/gpu_lib.sh

if [ "$MODE" = debug ]; then
	bench graph -G -o all_reduce,sendrecv -b 8 -e 4194304 -f 8 -c none -i 5
	bench chan16 -E NCCL_MIN_NCHANNELS=16 -o all_reduce -b 65536 -e 1048576 -c none -i 5
	bench registered-graph -R -G -o sendrecv,alltoall -b 1048576 -e 16777216 -c none -i 5
	bench tcp -E NCCL_SYMMEM_BACKEND=tcp -o all_reduce,sendrecv -b 8 -e 16777216 -c none -i 3
	finish
fi

# Which plugin ABI this NCCL takes, and a short check through it.  The env
# plugin's route only where this NCCL loads env plugins (2.28.7 on).
if [ "$MODE" = abi ]; then
	runs=abi-check
	if [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then
		one_gpu abi-check -b 8 -e 16777216 -f 16 -i 3
	else
		bench abi-check -b 8 -e 16777216 -f 16 -i 3
		bench abi-ratio -o all_reduce,all_gather,reduce_scatter,alltoall,sendrecv \
			-b 1048576 -e 1073741824 -f 1024 -c none -i 5
		runs="$runs abi-ratio"
		if grep -q ncclEnvPlugin_v "$NCCL_SO"; then
			bench abi-env -Z -o all_reduce,sendrecv -b 8 -e 1048576 -f 64 -c none -i 3
			expect_env_plugin abi-env
			runs="$runs abi-env"
		fi
	fi
	abi_versions $runs
	finish
fi

# The NCCL-level A/B of the hop: landing words against events.
if [ "$MODE" = ab ]; then
	if [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then
		for v in 1 0; do
			one_gpu ab-landing$v -E NCCL_NET_GDR_LEVEL=SYS -E NCCL_SYMMEM_LANDING_WORDS=$v \
				-b 8 -e 67108864 -f 8 -i 3
		done
	else
		for v in 1 0; do
			bench ab-landing$v -E NCCL_SYMMEM_LANDING_WORDS=$v -j "$OUT/sweep-landing$v.json" \
				-b 8 -e 1073741824 -f 4 -c none -i 20
		done
	fi
	[ -n "${AB_ONLY:-}" ] && finish
	MODE=hop
fi

# The hop itself, no NCCL: bench_hop's rows (JSON lines) in $OUT/hop.jsonl.
if [ "$MODE" = hop ]; then
	# hop NAME PLUGIN VARIANT [bench_hop args...]: one run, its rows into
	# $OUT/hop.jsonl tagged with VARIANT, its stderr in logs/hop-NAME.txt.
	hop() {
		local name=$1 plugin=$2 variant=$3
		shift 3
		note "hop $name: $* ($(date +%T))"
		SYMMEM_PLUGIN=$plugin timeout 300 build-gpu/bench_hop -r "${HOP_ROUNDS:-1000}" \
			--tag "\"variant\": \"$variant\"" "$@" \
			>>"$OUT/hop.jsonl" 2>"$OUT/logs/hop-$name.txt" ||
			{ echo "FAILED: hop $name"; tail -5 "$OUT/logs/hop-$name.txt"; fail=1; }
	}
	plugin=build-gpu/libnccl-net-symmem.so
	for hog in none other self; do
		NCCL_SYMMEM_LANDING_WORDS=1 hop "$hog-1" $plugin landing-words --hog $hog
		NCCL_SYMMEM_LANDING_WORDS=0 hop "$hog-0" $plugin events --hog $hog
	done
	# Peer copies where there are two GPUs (on one, the driver runs a copy
	# within the GPU on its SMs and the timing means nothing): idle and
	# beside a kernel on every SM, which they must not wait for.
	if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
		for hog in none other self; do
			hop "peer-$hog" $plugin landing-words --hog $hog --path gpu-gpu --gpus 0,1
		done
	fi
	# OLD_TREE=DIR (an exported source tree of an earlier commit): its
	# plugin and helper too, idle, landing words, in the same invocation.
	if [ -n "${OLD_TREE:-}" ] && tree_built "$OLD_TREE"; then
		hop old "$OLD_TREE/build-gpu/libnccl-net-symmem.so" "base ${OLD_TREE##*/}" --hog none
	fi
	# The helper's own share of a hop on this host's CPUs, no GPU: the
	# real helper over the driver without GPU (bench_helper_cpu.c).
	note "helper-cpu ($(date +%T))"
	SYMMEM_COPYD=$PWD/build-gpu/symmem-copyd LD_LIBRARY_PATH=$PWD/build-gpu/fakedriver \
		timeout 120 build-gpu/bench_helper_cpu -n 50000 -s 8,4096,65536 \
		>"$OUT/helper-cpu.jsonl" 2>"$OUT/logs/helper-cpu.txt" ||
		{ echo "FAILED: helper-cpu"; tail -5 "$OUT/logs/helper-cpu.txt"; fail=1; }
	cat "$OUT/helper-cpu.jsonl"
	python3 scripts/hop_table.py "$OUT/hop.jsonl"
	finish
fi

# Hosts the plugin believes in: each rank in PID and mount namespaces of
# its own.  The inner net plugin's test stand-in carries what crosses them
# (its log counts the bytes), then the plugin's own TCP does.
if [ "$MODE" = hosts ]; then
	gcc -shared -fPIC -O2 -std=c11 -D_GNU_SOURCE -Iplugin -Itest/mp -DSTANDIN_VERSION=12 \
		test/mp/inner_standin.c test/mp/standin_gpu.c \
		-o build-gpu/libnccl-net-standin.so -lpthread -ldl ||
		{ echo "FAILED: the stand-in did not build"; fail=1; finish; }
	apart() { BENCH_PID_NS=1 CUDA_VISIBLE_DEVICES=0,0 NRANKS=2 PROVE=none bench "$@"; }
	# settled LOG: waits (up to 15 s) for both ranks' finalize lines.  Read
	# at once after nccl_bench returned, the stand-in's close lines were
	# once missing from a log that held them all a few seconds later.
	settled() {
		for _ in $(seq 30); do
			[ "$(grep -c '^- finalize' "$1" 2>/dev/null)" -ge 2 ] && return 0
			sleep 0.5
		done
		echo "FAILED: $1: no finalize line from each rank within 15 s"; fail=1
	}
	apart hosts-inner -V -H 2 -m both -E NCCL_SM_FREE_VERBOSE=1 \
		-E NCCL_SYMMEM_INNER_NET="$PWD/build-gpu/libnccl-net-standin.so" \
		-E INNER_STANDIN_LOG="$OUT/logs/standin.log" \
		-o all_reduce,all_gather,alltoall,sendrecv -b 8 -e 4194304 -f 32 -c none -i 3
	apart hosts-tcp -V -H 2 -m plugin -E NCCL_NET_GDR_LEVEL=SYS -E NCCL_SM_FREE_VERBOSE=1 \
		-o all_reduce,sendrecv -b 8 -e 4194304 -f 32 -c none -i 3
	settled "$OUT/logs/standin.log"
	grep -q '^- send .* bytes=[1-9]' "$OUT/logs/standin.log" ||
		{ echo "FAILED: the stand-in carried nothing"; fail=1; }
	grep -h '^- \(send\|recv\)' "$OUT/logs/standin.log" | cut -d' ' -f2-5 | sort | uniq -c
	# GPU buffers on the inner path: the stand-in offers NCCL_PTR_CUDA
	# (INNER_STANDIN_GPU=1) and moves GPU bytes itself (cuMemcpy through
	# host memory), through regMr and, asked for, regMrDmaBuf.  Its device
	# has a made-up PCI path, which NCCL places far from the GPU, so SYS
	# lets GPU buffers through.  Every channel must say GDRDMA, every op
	# from 8 B to 16 MiB, every element checked.
	for reg in regmr dmabuf; do
		log="$OUT/logs/standin-gpu-$reg.log"
		BENCH_PID_NS=1 CUDA_VISIBLE_DEVICES=0,0 NRANKS=2 PROVE=inner-gdr \
			bench hosts-inner-gpu-$reg -V -H 2 -m plugin -E NCCL_SM_FREE_VERBOSE=1 \
			-E NCCL_SYMMEM_INNER_NET="$PWD/build-gpu/libnccl-net-standin.so" \
			-E INNER_STANDIN_GPU=1 -E INNER_STANDIN_LOG="$log" -E NCCL_NET_GDR_LEVEL=SYS \
			$([ $reg = dmabuf ] && echo "-E INNER_STANDIN_DMABUF=1") \
			-o all -b 8 -e 16777216 -f 2 -c none -i 2
		settled "$log"
		grep -q 'inner net plugin .standin. (v12), to another host' \
			"$OUT/logs/hosts-inner-gpu-$reg"/nccl.*.log ||
			{ echo "FAILED: hosts-inner-gpu-$reg: no connection through the stand-in"; fail=1; }
		grep -q '^- \(send\|recv\) .* gpu=[1-9]' "$log" ||
			{ echo "FAILED: hosts-inner-gpu-$reg: the stand-in moved no GPU bytes"; fail=1; }
		# NCCL registers through regMrDmaBuf only where it found DMA-BUF
		# on the GPU (its INFO line says so).
		if [ $reg = dmabuf ] && grep -qi 'DMA-BUF is available' \
			"$OUT/logs/hosts-inner-gpu-$reg"/nccl.*.log; then
			grep -q '^- send .* dmabufs=[1-9]' "$log" ||
				{ echo "FAILED: hosts-inner-gpu-dmabuf: no regMrDmaBuf"; fail=1; }
		elif [ $reg = dmabuf ]; then
			note "hosts-inner-gpu-dmabuf: NCCL found no DMA-BUF on this GPU: regMr only"
		fi
		grep -h '^- \(send\|recv\)' "$log" | sed 's/.* \(messages=[0-9]*\).* \(dmabufs=[0-9]*\).* \(gpu=[0-9]*\)/\1 \2 \3/' |
			sort | uniq -c | head -4
	done
	finish
fi

# Two processes on one GPU posing as two hosts: what a host with one GPU
# can check.
if [ "$MODE" = onegpu ]; then
	one_gpu onegpu -b 8 -e 67108864 -f 8 -i 3
	# NCCL stages posed hosts' buffers in host memory unless the GDR level
	# lets GPU buffers through: this run takes the copy engines.
	one_gpu onegpu-ce -E NCCL_NET_GDR_LEVEL=SYS -b 8 -e 67108864 -f 8 -i 3
	one_gpu onegpu-tcp -E NCCL_SYMMEM_BACKEND=tcp -o all_reduce,alltoall,sendrecv \
		-b 8 -e 16777216 -f 16 -c none -i 3
	abi_versions onegpu
	selftest
	finish
fi

# README.md's PyTorch recipe, on one GPU as two posed hosts.
if [ "$MODE" = torch-reg ]; then
	torch_posed torch-reg scripts/torch_registered.py NCCL_PASS_SM=1 NCCL_NCHANNELS_PER_NET_PEER=1
	expect_in_logs torch-reg \
		' - NET register userbuff' "no buffer registered with the net" \
		'NCCL_PASS_SM=1: collectives capped' "no NCCL_PASS_SM=1 channel cap"
	expect_none_in_logs torch-reg 'named symbol not found' "the driver's error for host memory quoted"
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

# A rank killed or stuck mid-collective (test/nccl/rank_death.c,
# bench/results/failures.md), over the copy engines and TCP, and the
# survivors going on without it.
if [ "$MODE" = death ]; then
	rank_death death-all_reduce -o all_reduce
	rank_death death-alltoall -o alltoall
	rank_death death-sendrecv -o sendrecv -m plugin
	rank_death death-tcp -o all_reduce -m plugin -E NCCL_SYMMEM_BACKEND=tcp
	rank_death stuck-all_reduce -o all_reduce -s -t 10 -E NCCL_SYMMEM_STALL_REPORT=4
	# Fault-tolerant training: the survivors drop the dead rank and go on
	# (on 2 GPUs with one rank left).  NCCL 2.28 unloads a net plugin with
	# the process's last communicator and forgets its name (the next
	# ncclCommInitRank fails: "Failed to initialize any NET plugin");
	# NCCL_NET_PLUGIN_REF_COUNT=1 keeps it loaded (failures.md, run 8).
	rank_death shrink-all_reduce -o all_reduce -k -t 3 -E NCCL_NET_PLUGIN_REF_COUNT=1
	rank_death shrink-alltoall -o alltoall -k -t 3 -m plugin -E NCCL_NET_PLUGIN_REF_COUNT=1
	torch_check torch-groups scripts/torch_groups.py
	torch_reinit
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

# Issue 3: the bandwidth table with the plugin's defaults and the README's
# NCCL_NCHANNELS_PER_NET_PEER=16, native in the same invocations: every op
# 16 B - 1 GiB, then registered buffers from cudaMalloc (legacy IPC) and
# from ncclMemAlloc (cuMem).
if [ "$MODE" = table ]; then
	P16="-E NCCL_NCHANNELS_PER_NET_PEER=16"
	bench table-all -o all_reduce,broadcast,reduce,all_gather,reduce_scatter,alltoall,sendrecv \
		-b 16 -e 1073741824 -f 4 -c none -i 8 $P16
	bench table-reg -R -o sendrecv,alltoall -b 1048576 -e 1073741824 -f 8 -c none -i 8 $P16
	expect_phases table-reg
	bench table-regmem -R -A -o sendrecv,alltoall -b 1048576 -e 1073741824 -f 8 -c none -i 8 $P16
	helper_lines table- 4
	finish
fi

# Issue 5: CYCLES (200) communicators split off, used and destroyed in one
# process, through the plugin only (both phases took longer than one device
# call); device free memory and RSS after cycle 1 and the last.
if [ "$MODE" = leak ]; then
	# LEAK_PHASE=native: the same cycles without the plugin, for comparison.
	[ "${LEAK_PHASE:-plugin}" = native ] && PROVE=none
	bench leak -m "${LEAK_PHASE:-plugin}" -L "${CYCLES:-200}" -o all_reduce,sendrecv -b 1048576 \
		-e 1048576 -c none -E NCCL_CUMEM_MONITOR=1
	grep -h "at finalize" "$OUT"/logs/leak/nccl.*.log | tail -4
	finish
fi

# The copy helper: the CUDA-graph replays that deadlocked with in-process
# copies in NCCL's process, and the registered and default paths at full size.
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

MAX=1073741824
PROTO_MAX=$MAX
[ "$MODE" = quick ] && MAX=268435456 PROTO_MAX=67108864
case ${PART:=all} in
all | matrix | extras) ;;
*) echo "PART=$PART: expected matrix or extras"; exit 2 ;;
esac
in_part() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }

if in_part matrix; then
	bench default -b 0 -e $MAX
	# NCCL_ENV_PLUGIN=symmem and nothing else: the library's env plugin routes
	# the job and gives NCCL its channels per peer (plugin/env_plugin.c).
	bench env-plugin -Z -b 8 -e $MAX -f 64 -c none -i 5
	expect_env_plugin env-plugin
	for proto in Simple LL LL128; do
		NCCL_PROTO=$proto bench "proto-$proto" -b 0 -e $PROTO_MAX -c none -i 5
	done
	if [ -z "${SKIP_GRAPH:-}" ]; then
		# NCCL registers graph-captured buffers by itself (NCCL_GRAPH_REGISTER
		# left on from NCCL 2.28): send/recv and alltoall zero-copy, ring
		# collectives' user buffers declined.
		SUBSYS=INIT,ENV,NET,REG bench graph -G -b 0 -e $MAX -c none
		expect_declined graph
		expect_none_in_logs graph 'set NCCL_GRAPH_REGISTER=0' \
			"NCCL_GRAPH_REGISTER=0 set though NCCL 2.28 says which connections are rings"
	fi
	SUBSYS=INIT,ENV,NET,REG bench registered -R -b 8 -e $MAX -c none
	expect_declined registered
	# Ring registrations kept (as with NCCL_PASS_SM=1): NCCL's one-channel path.
	SUBSYS=INIT,ENV,NET,REG bench registered-rings -R -E NCCL_SYMMEM_COLL_REGISTER=1 \
		-o all_gather,broadcast,all_reduce -b 1048576 -e $((MAX / 4)) -f 4 -c none -i 3
	expect_in_logs registered-rings ' - NET register userbuff' "no ring registration kept"
	expect_none_in_logs registered-rings 'registers for ring collectives stay unregistered' \
		"a ring registration declined with NCCL_SYMMEM_COLL_REGISTER=1"
	if [ -z "${SKIP_GRAPH:-}" ]; then
		bench registered-graph -R -G -o sendrecv,alltoall -b 1048576 -e $MAX -c none
		expect_phases registered-graph
	fi
fi
in_part extras || finish

# symmem-info --selftest: every GPU pair, host memory and TCP through the
# plugin's own table, every byte checked.
selftest

# GPU buffers over TCP go through the pinned bounce slots (tcp_bounce.c):
# several messages in flight, registered buffers too.
# NCCL_SM_FREE_VERBOSE logs each connection's data path: every process
# must have TCP connections and none on the copy-engine path, or these runs
# would pass on copy engines were the backend setting ignored.
bench tcp -E NCCL_SYMMEM_BACKEND=tcp -E NCCL_IB_HCA=mlx5 -E NCCL_SM_FREE_VERBOSE=1 \
	-o all_reduce,alltoall,sendrecv -b 8 -e 67108864 -c none -i 3
bench tcp-reg -R -E NCCL_SYMMEM_BACKEND=tcp -E NCCL_SM_FREE_VERBOSE=1 -o alltoall,sendrecv \
	-b 8 -e 67108864 -f 64 -c none -i 3
for r in tcp tcp-reg; do
	expect_in_logs $r ': tcp data path' 'no connection on the TCP data path'
	expect_none_in_logs $r ': shm data path' 'a copy-engine connection with NCCL_SYMMEM_BACKEND=tcp'
done
# Registered rings over TCP connections: declined as on the copy-engine
# path (on every connection of a P2P-off job, so that
# every rank of a job across hosts picks the same channel count).
SUBSYS=INIT,ENV,NET,REG bench tcp-reg-rings -R -E NCCL_SYMMEM_BACKEND=tcp -E NCCL_PROTO=Simple \
	-o all_gather,broadcast,sendrecv -b 1048576 -e 16777216 -f 4 -c none -i 3
expect_declined tcp-reg-rings
grep -h -m1 "RDMA devices" "$OUT"/logs/tcp/nccl.*.log | sed 's/.*NCCL INFO //' | head -1
# NCCL's buffers from cudaMalloc: exported as legacy CUDA IPC handles.
bench cumem0 -E NCCL_CUMEM_ENABLE=0 -o all_reduce,all_gather,reduce_scatter,alltoall,sendrecv \
	-b 8 -e $((MAX / 4)) -c none -i 5
# Each rank sees its own GPU only (a scheduler's per-task binding): the
# copy helper must still see the GPUs it copies into (bench/results/visibility.md).
bench visible -V -o all_reduce,all_gather,alltoall,sendrecv -b 8 -e $MAX -f 16 -i 5
bench visible-reg -V -R -A -o alltoall,sendrecv -b 1048576 -e $MAX -f 16 -c none -i 5
# Two GPUs per rank, its own and the next (-W): the others are hidden.
bench visible-list -W -o all_reduce,alltoall,sendrecv -b 8 -e $MAX -f 64 -c none -i 5

# A send buffer deregistered while the copy helper holds its copy (NCCL
# after an abort): clean failure or landed, and the helper still copies.
note "deregMr with a copy in flight (dereg_inflight)"
if ! SYMMEM_PLUGIN=build-gpu/libnccl-net-symmem.so timeout 120 build-gpu/dereg_inflight \
	>"$OUT/logs/dereg_inflight.txt" 2>&1; then
	echo "FAILED: dereg_inflight"; fail=1
fi
cat "$OUT/logs/dereg_inflight.txt"

rank_death death-all_reduce -o all_reduce
rank_death death-alltoall -o alltoall -m plugin
# A copy that outlives NCCL_SYMMEM_COPY_TIMEOUT fails its connection with
# a WARN instead of waiting for ever; 0.1 ms is shorter than
# the queueing of a 1 GiB send/recv's copies, so it must trip here.
expect_fail copy-timeout "did not land in" -o sendrecv -b 1073741824 -e 1073741824 -c none -i 2 \
	-E NCCL_SYMMEM_COPY_TIMEOUT=0.0001 -E NCCL_NCHANNELS_PER_NET_PEER=16
sleep 1
pgrep -x symmem-copyd >/dev/null && { echo "FAILED: a copy helper outlived copy-timeout"; fail=1; }

torch_check torch scripts/torch_allreduce.py
torch_check torch-groups scripts/torch_groups.py
TORCH_ROUTE=env torch_check torch-env scripts/torch_allreduce.py
expect_env_plugin torch-env
torch_reinit

finish
