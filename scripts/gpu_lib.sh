# Sourced by scripts/gpu_check.sh from the
# repository root: lists the GPUs, builds the plugin and nccl_bench into
# build-gpu/ (SKIP_BUILD=1: already built), and gives every mode its tools:
#   bench NAME ARGS     one nccl_bench invocation, tables and NCCL logs kept;
#   prove NAME          every plugin run went via NET/symmem with GPUDirect;
#   expect_fail         a run that must fail with a WARN, well before its deadline;
#   rank_death          a rank killed mid-collective: errors, aborts, no helper left;
#   torch_check         a PyTorch script through the plugin;
#   torch_posed         a torchrun-style PyTorch script as two posed hosts on GPU 0;
#   one_gpu             two ranks on GPU 0 posing as two hosts;
#   abi_versions        the plugin ABI versions NCCL picked, from its logs;
#   bench_tree, bench_old  the same run through an older tree's plugin;
#   helper_lines, traces  the copy helpers' stop lines, the NCCL_SYMMEM_TRACE_US
#                       lines of all ranks on one clock;
#   finish              pack the logs, print PASS or FAIL, exit.
# NRANKS=n uses the first n GPUs (default: all); PHASE_TIMEOUT (s) per phase,
# past it the ranks' stacks are taken (cuda-gdb) before they are killed.
OUT=${OUT:-/tmp/symmem-gpu}
mkdir -p "$OUT/logs"
# NVLink multicast stays off on shared hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
fail=0
note() { echo "== $*"; }
# PyTorch's Python: the GPU hosts keep it in /opt/torch/.venv.
PY=$(command -v python3)
[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3

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
# process on purpose: prove NAME inproc).  hosts: ranks posing as hosts
# (nccl_bench -H), P2P inside each; hosts-host: the same with NCCL staging
# the network's buffers in host memory (no GPUDirect, no helper needed);
# hosts1: one rank per posed host (one_gpu), every channel via NET/symmem,
# GPUDirect or not.
prove() {
	local dir="$OUT/logs/$1" gdr=${2:-gdr} n=0 p2p=0
	local outside='via (P2P|SHM)|via NET/(Socket|IB)'
	[ "$gdr" = none ] && return	# a native-only run: nothing to prove
	# hosts: ranks posing as hosts (nccl_bench -H) keep P2P/SHM inside each.
	case $gdr in hosts | hosts-host) outside='via NET/(Socket|IB)' ;; esac
	for log in "$dir"/nccl.*.log; do
		[ -e "$log" ] || continue
		# Every process of a plugin run: one that NCCL routed elsewhere
		# must not drop out of the checks below.
		if ! grep -q 'Using network symmem' "$log"; then
			echo "a process not routed through the plugin: $log"; fail=1
			continue
		fi
		n=$((n + 1))
		# The GPUDirect and P2P checks below pass a log with no channel.
		case $gdr in hosts | hosts-host) ;; *)
			grep -q 'via NET/symmem' "$log" ||
				{ echo "no channel via NET/symmem in $log"; fail=1; } ;;
		esac
		grep -q 'via P2P' "$log" && p2p=$((p2p + 1))
		if grep -E "$outside" "$log" | head -2 | grep .; then
			echo "traffic outside NET/symmem in $log"; fail=1
		fi
		if [ "$gdr" = hosts-host ] && grep 'via NET/symmem' "$log" | grep -q 'GDRDMA'; then
			echo "GPUDirect where NCCL should stage in host memory in $log"; fail=1
		fi
		if [ "$gdr" != nogdr ] && [ "$gdr" != hosts-host ] && [ "$gdr" != hosts1 ] &&
			grep 'via NET/symmem' "$log" | grep -vq 'GDRDMA'; then
			echo "a channel without GPUDirect in $log:"; grep 'via NET/symmem' "$log" | grep -v GDRDMA | head -2
			fail=1
		fi
	done
	[ "$n" -gt 0 ] || { echo "no plugin log says 'Using network symmem' in $1"; fail=1; }
	if { [ "$gdr" = hosts ] || [ "$gdr" = hosts-host ]; } && [ "$p2p" = 0 ]; then
		echo "no P2P channel inside the posed hosts in $1"; fail=1
	fi
	# Host staging between posed hosts: no GPU buffer reaches the plugin,
	# so no copy helper (nor its CUDA context) may start.
	if [ "$gdr" = hosts-host ] && grep -qh 'copy helper .* drives GPU' "$dir"/nccl.*.log; then
		echo "a copy helper started although NCCL staged in host memory in $1"; fail=1
	fi
	# GPU runs: the copies ran in symmem-copyd, not in NCCL's process.
	if { [ "$gdr" = gdr ] || [ "$gdr" = hosts ]; } && ! grep -qh 'copy helper .* drives GPU' "$dir"/nccl.*.log; then
		echo "no copy helper started in $1"; fail=1
	fi
	grep -h -m1 'via NET/symmem' "$dir"/nccl.*.log 2>/dev/null | head -1
}

# one_gpu NAME [nccl_bench args...]: two ranks on GPU 0 in processes of
# their own, posing as two hosts (NCCL_HOSTID, so NCCL takes them for two
# GPUs and everything between them goes over the network): the plugin on a
# host with one GPU, correctness only (the plugin phase alone).
one_gpu() {
	local name=$1
	shift
	CUDA_VISIBLE_DEVICES=0,0 NRANKS=2 PROVE=hosts1 bench "$name" -V -H 2 -m plugin "$@"
}

# abi_versions NAME...: what NCCL says it took from the plugin's library in
# the runs NAME (net, tuner and env tables, with their ABI version where
# this NCCL names it), each distinct line once with its count of processes,
# then one summary line.
abi_versions() {
	local run lines
	lines=$(for run in "$@"; do cat "$OUT/logs/$run"/nccl.*.log 2>/dev/null; done |
		sed -n 's/.*NCCL INFO //p' |
		grep -E '^(NCCL version|NET/Plugin: (Loaded|Failed)|TUNER/Plugin|ENV/Plugin|Using network)' |
		sed 's/^\(NCCL version [^ ]*\).*/\1/' | sort | uniq -c)
	echo "$lines"
	echo "ABI picked: net $(abi_named "$lines" 'Loaded net plugin')," \
		"tuner $(abi_named "$lines" 'TUNER/Plugin: Using')," \
		"env $(abi_named "$lines" 'ENV/Plugin: Using')"
}

# abi_named LINES PATTERN: the versions "(vN)" that LINES matching PATTERN
# name, or "none named" (NCCL before 2.26 logs no version for net v8, and
# before 2.28 none for the tuner).
abi_named() {
	local v
	v=$(echo "$1" | grep -e "$2" | grep -o '(v[0-9]*)' | tr -d '()' | sort -u | paste -sd ' ' -)
	echo "${v:-none named}"
}

# expect_in_logs NAME PATTERN WHAT [PATTERN WHAT ...]: every NCCL log of
# run NAME holds each PATTERN (grep); each one missing fails the run with
# "WHAT: LOG".  No log at all fails it too.
expect_in_logs() {
	local dir="$OUT/logs/$1" n=0 log i
	local -a want
	shift
	want=("$@")
	[ $((${#want[@]} % 2)) = 0 ] || { echo "expect_in_logs: PATTERN without WHAT"; fail=1; }
	for log in "$dir"/nccl.*.log; do
		[ -e "$log" ] || continue
		n=$((n + 1))
		for ((i = 0; i + 1 < ${#want[@]}; i += 2)); do
			grep -q -- "${want[i]}" "$log" || { echo "${want[i + 1]}: $log"; fail=1; }
		done
	done
	[ "$n" -gt 0 ] || { echo "no NCCL log in ${dir##*/}"; fail=1; }
}

# expect_none_in_logs NAME PATTERN WHAT: no NCCL log of run NAME holds
# PATTERN; one that does fails the run with "WHAT: LOG".
expect_none_in_logs() {
	local log
	for log in "$OUT/logs/$1"/nccl.*.log; do
		[ -e "$log" ] || continue
		! grep -q -- "$2" "$log" || { echo "$3: $log"; fail=1; }
	done
}

# expect_env_plugin NAME: a run with NCCL_ENV_PLUGIN=symmem alone
# (nccl_bench -Z, torch_check with TORCH_ROUTE=env): every process NCCL
# logged for is routed through the plugin, NCCL loaded the library as its
# env plugin, the plugin's line says the env plugin set
# NCCL_NCHANNELS_PER_NET_PEER=16 (the one variable NCCL reads before it
# loads a net plugin), and NCCL read that value.
expect_env_plugin() {
	expect_in_logs "$1" \
		'Using network symmem' "a process not routed through the plugin" \
		'Successfully loaded external env plugin' "NCCL did not load the env plugin" \
		'env plugin (NCCL_ENV_PLUGIN) set what the user left unset: .*NCCL_NCHANNELS_PER_NET_PEER=16' \
		"no env plugin line with NCCL_NCHANNELS_PER_NET_PEER=16" \
		'NCCL_NCHANNELS_PER_NET_PEER set by environment to 16' \
		"NCCL did not read NCCL_NCHANNELS_PER_NET_PEER=16"
	grep -h -m1 'env plugin (NCCL_ENV_PLUGIN) set' "$OUT/logs/$1"/nccl.*.log 2>/dev/null | head -1 |
		sed 's/.*NCCL INFO //'
}

# expect_declined NAME: a run on registered buffers (NCCL_DEBUG_SUBSYS
# with REG) kept NCCL from registering them on ring connections
# (plugin/conn_hints.h), which would run all_gather and broadcast on one
# channel: the plugin says so once in every process, and every process
# still registered buffers (its send/recv and alltoall, zero-copy).
expect_declined() {
	expect_in_logs "$1" \
		'registers for ring collectives stay unregistered' "no declined ring registration" \
		' - NET register userbuff' "no buffer registered at all"
}

# expect_phases NAME: on 3 or more GPUs an alltoall run's copy helpers
# take their copies in phases (one destination GPU at a time, all helpers
# in step), and say so in a 'phases:' line.  Registered cudaMalloc buffers
# once went without them: the driver names the importing GPU
# for a legacy IPC mapping, not the one the memory is on.
expect_phases() {
	local ranks=${NRANKS:-$(nvidia-smi -L | wc -l)}
	[ "$ranks" -ge 3 ] || return 0
	if ! grep -qh 'copy helper (pid [0-9]*): phases:' "$OUT/logs/$1"/nccl.*.log; then
		echo "no copy helper took its copies in phases in $1 ($ranks GPUs)"; fail=1
	fi
}

# expect_fail NAME PATTERN [nccl_bench args...]: the plugin run must fail,
# well before its deadline (no hang), with PATTERN in a WARN line.
expect_fail() {
	local name=$1 pattern=$2 t0 took rc
	shift 2
	mkdir -p "$OUT/logs/$name"
	note "$name (must fail with a WARN matching '$pattern'): nccl_bench -m plugin $*"
	t0=$(date +%s)
	timeout 300 ./build-gpu/nccl_bench ${NRANKS:+-n $NRANKS} -t "${PHASE_TIMEOUT:-240}" -m plugin "$@" \
		-E NCCL_DEBUG=INFO -E NCCL_DEBUG_SUBSYS=INIT,NET \
		-E "NCCL_DEBUG_FILE=$OUT/logs/$name/nccl.%p.log" \
		>"$OUT/logs/$name/table.txt" 2>"$OUT/logs/$name/stderr.txt"
	rc=$?
	[ $rc = 0 ] && { echo "FAILED: $name succeeded but must fail"; fail=1; }
	# timeout's own kill is a hang too, whatever PHASE_TIMEOUT says.
	case $rc in 124 | 137) echo "FAILED: $name hung until timeout 300 killed it"; fail=1 ;; esac
	took=$(($(date +%s) - t0))
	echo "$name: failed after $took s"
	[ "$took" -lt "${PHASE_TIMEOUT:-240}" ] || { echo "FAILED: $name ran into its deadline"; fail=1; }
	if ! grep -h "WARN.*$pattern" "$OUT/logs/$name"/nccl.*.log | sed 's/.*NCCL WARN //' | sort -u | head -2 | grep .; then
		echo "FAILED: $name: no WARN matching '$pattern'"; fail=1
	fi
}

# rank_death NAME [rank_death args...]: the last rank SIGKILLed in the
# middle of a collective; through the plugin every survivor must see an
# error, abort and leave no copy helper behind (test/nccl/rank_death.c).
# The plugin's WARN lines of the survivors are listed.
rank_death() {
	local name=$1
	shift
	mkdir -p "$OUT/logs/$name"
	note "$name: rank_death $* ($(date +%T))"
	if ! timeout 300 ./build-gpu/rank_death ${NRANKS:+-n $NRANKS} "$@" -E NCCL_DEBUG=WARN \
		-E "NCCL_DEBUG_FILE=$OUT/logs/$name/nccl.%p.log" \
		>"$OUT/logs/$name/table.txt" 2>"$OUT/logs/$name/stderr.txt"; then
		echo "FAILED: $name"; tail -5 "$OUT/logs/$name/stderr.txt"; fail=1
	fi
	cat "$OUT/logs/$name/table.txt"
	{ echo "## $name: rank_death $*"; cat "$OUT/logs/$name/table.txt"; echo; } >>"$OUT/tables.txt"
	# NCCL_DEBUG=WARN, default subsystems: each survivor's log names why,
	# with the peer process (the start-up advice WARNs do not count).
	local ranks=${NRANKS:-$(nvidia-smi -L | wc -l)} warned=0 log
	for log in "$OUT/logs/$name"/nccl.*.log; do
		[ -e "$log" ] && grep -q "NCCL WARN NET/symmem.*peer process" "$log" &&
			warned=$((warned + 1))
	done
	echo "$name: $warned log(s) with a NET/symmem WARN naming the peer, $((ranks - 1)) survivor(s)"
	# With -k a rank without a connection to the victim learns of it only
	# from the deadline: the neighbours shrink instead of aborting.
	local need=$((ranks - 1))
	case " $* " in *" -k "*) need=1 ;; esac
	case " $* " in *" -m native "*) ;; *)
		[ "$warned" -ge "$need" ] || { echo "FAILED: $name: a survivor logged no WARN"; fail=1; } ;;
	esac
	grep -h "WARN" "$OUT/logs/$name"/nccl.*.log 2>/dev/null | sed 's/.*NCCL WARN //' |
		sed 's/[0-9][0-9]*/N/g' | sort | uniq -c | sort -rn | head -8
}

# torch_reinit: PyTorch's process group destroyed and made again in the same
# processes, with NCCL_NET_PLUGIN_REF_COUNT=1 as the README asks; each
# process's log must show the plugin in use for both groups.
torch_reinit() {
	local log n
	torch_check torch-reinit scripts/torch_reinit.py NCCL_NET_PLUGIN_REF_COUNT=1
	for log in "$OUT/logs/torch-reinit"/nccl.*.log; do
		n=$(grep -c "Using network symmem" "$log")
		[ "$n" -ge 2 ] || { echo "FAILED: torch-reinit: ${log##*/} used the plugin $n time(s), not 2"; fail=1; }
	done
}

# torch_check NAME SCRIPT [NAME=VALUE...]: a PyTorch script through the
# plugin (with the extra variables), its output line and the proof that its
# traffic went through the plugin.
torch_check() {
	local name=$1 script=$2
	local route="NCCL_NET_PLUGIN=symmem NCCL_NET=symmem NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"
	shift 2
	# TORCH_ROUTE=env: NCCL_ENV_PLUGIN=symmem alone, the env plugin sets the
	# rest (so none of it may come from the caller).
	[ "${TORCH_ROUTE:-}" = env ] && route="-u NCCL_NET_PLUGIN -u NCCL_NET -u NCCL_P2P_DISABLE
		-u NCCL_SHM_DISABLE -u NCCL_NCHANNELS_PER_NET_PEER -u NCCL_NET_PLUGIN_REF_COUNT
		NCCL_ENV_PLUGIN=symmem"
	note "$name: $script through the plugin ($route${*:+ $*})"
	mkdir -p "$OUT/logs/$name"
	# $route splits into its words on purpose (env's -u options first, the
	# caller's NAME=VALUE after them).
	if ! env $route "$@" \
		NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET NCCL_DEBUG_FILE="$OUT/logs/$name/nccl.%p.log" \
		timeout 300 "$PY" "$script" >"$OUT/logs/$name/out.txt" 2>&1; then
		echo "FAILED: $name"; tail -20 "$OUT/logs/$name/out.txt"; fail=1
	fi
	grep -E '^torch|WRONG|wrong' "$OUT/logs/$name/out.txt" | head -10
	prove "$name"
}

# torch_posed NAME SCRIPT [NAME=VALUE...]: a SCRIPT started as torchrun
# starts one (RANK, WORLD_SIZE, ...) as two ranks on GPU 0, each posing as
# a host of its own (NCCL_HOSTID), through the plugin (with the extra
# variables): PyTorch on a host with one GPU.  GDR level SYS: NCCL hands
# the plugin GPU buffers between posed hosts instead of staging them.
torch_posed() {
	local name=$1 script=$2 port=$((29500 + $$ % 1000)) rank
	local -a pids
	shift 2
	note "$name: $script, two ranks on GPU 0 posing as hosts (${*:-nothing else})"
	mkdir -p "$OUT/logs/$name"
	for rank in 0 1; do
		env CUDA_VISIBLE_DEVICES=0 RANK=$rank LOCAL_RANK=0 WORLD_SIZE=2 \
			MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NCCL_HOSTID="posed-host-$rank" \
			NCCL_NET_PLUGIN="$PWD/build-gpu/libnccl-net-symmem.so" NCCL_NET=symmem \
			NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET_GDR_LEVEL=SYS "$@" \
			NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET,REG \
			NCCL_DEBUG_FILE="$OUT/logs/$name/nccl.%p.log" \
			timeout 300 "$PY" "$script" >"$OUT/logs/$name/out.$rank.txt" 2>&1 &
		pids[rank]=$!
	done
	for rank in 0 1; do
		wait "${pids[rank]}" ||
			{ echo "FAILED: $name rank $rank (exit $?)"; tail -20 "$OUT/logs/$name/out.$rank.txt"; fail=1; }
	done
	cat "$OUT/logs/$name"/out.*.txt | grep -E '^torch|WRONG|wrong' | head -10
	prove "$name"
}

# bench_tree DIR NAME [nccl_bench args...]: the same through the plugin of
# an older checkout DIR (built once into DIR/build-gpu), for an A/B or a
# bisection in one call.  A tree that does not build fails the run and is
# not tried again.
bench_tree() {
	local tree=$1
	shift
	tree_built "$tree" || return 0
	LD_LIBRARY_PATH="$PWD/$tree/build-gpu:$LD_LIBRARY_PATH" bench "$@"
}

# tree_built DIR: DIR's plugin built into DIR/build-gpu (once); false when
# it does not build (the run fails, and it is not tried again).
tree_built() {
	local tree=$1
	[ -e "$tree/build-gpu.failed" ] && return 1
	[ -e "$tree/build-gpu/.built" ] && return 0
	note "building $tree"
	if ! gpu_build_plugin "$tree" "$OUT/logs/build-${tree##*/}.log"; then
		fail=1; touch "$tree/build-gpu.failed"
		return 1
	fi
	touch "$tree/build-gpu/.built"
}

# bench_old NAME [nccl_bench args...]: bench_tree with OLD_TREE; nothing
# without it.
bench_old() {
	[ -n "${OLD_TREE:-}" ] || return 0
	bench_tree "$OLD_TREE" "$@"
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

# symmem-info --selftest on this host: each path's result, a FAIL on any.
selftest() {
	note "selftest: symmem-info --selftest ($(date +%T))"
	if ! ./build-gpu/symmem-info --selftest >"$OUT/logs/selftest.txt" 2>&1; then
		echo "FAILED: selftest"; fail=1
	fi
	grep -E 'path:|result:|latency_us' "$OUT/logs/selftest.txt"
}

finish() {
	# The device tool brings back at most 8 files: the tables stay, logs are packed.
	tar -C "$OUT" -czf "$OUT/logs.tgz" logs 2>/dev/null && rm -rf "$OUT/logs"
	note "result: $([ $fail = 0 ] && echo PASS || echo FAIL)"
	exit $fail
}
