#!/bin/bash
# The end-to-end training benchmark (bench/e2e/, bench/results/e2e.md):
# each workload (ddp, fsdp, tp, moe) trained natively, through the plugin
# (NCCL_ENV_PLUGIN=symmem) and through the plugin with NCCL_PASS_SM=1, in
# this one invocation.  The losses through the plugin must track native's
# and every NCCL log must show the route its mode asks for; then one row
# per workload and GPU count (median and p90 step time per mode) goes
# into $OUT/e2e.json.  Exit status 0 only when every check held.
#
#   bash scripts/e2e.sh
#
# GPUS="2 4 8"  GPU counts, one pass each on the first GPUs (default: all)
# STEPS (20)    timed steps per run, after WARMUP (5) steps
# WORKLOADS     comma list (default ddp,fsdp,tp,moe)
# OUT           results (default /tmp/symmem-e2e): e2e.json (rows),
#               e2e.txt (the checks), e2e.png, logs.tgz (NCCL's logs and
#               each run's losses and step times)
# POSED=1       a host with one GPU (the default there): 2 processes on
#               GPU 0 posed as two hosts (NCCL_HOSTID), so NCCL joins them
#               through its network: only the loss checks count, the rows
#               say "posed": true, and the model is small
# SPLIT=1       one launch per workload and mode instead of one per mode
#               (slower; a failing workload then takes no other with it)
# E2E_LAYERS, E2E_HIDDEN, E2E_SEQ, E2E_BATCH, E2E_VOCAB, ...: the model
#               (bench/e2e/train.py lists them)
# COMMIT        the tree's commit in the rows (default: git's, else unknown)
# SKIP_BUILD=1  build-gpu/ holds the plugin already
# RUN_TIMEOUT   seconds per launch (default 540); past it the launch's
#               ranks are ended and its workloads fail
#
# A pass on 8 GPUs takes 3 launches of about 30-60 s each (start, NCCL's
# setup, four models built and trained): GPUS="2 4 8" may outrun a
# 10-minute call; run the counts in calls of their own, same OUT.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/symmem-e2e}
mkdir -p "$OUT/logs"
. scripts/gpu_build.sh
if [ -z "${SKIP_BUILD:-}" ]; then
	echo "== building the plugin into build-gpu/"
	gpu_build_plugin . "$OUT/logs/build.log" || { echo "FAILED: the plugin did not build"; exit 1; }
fi
# The shared GPU tools: nvidia-smi, PY, the loader path, NVLink multicast
# off, the log checks, finish.
SKIP_BUILD=1 . scripts/gpu_lib.sh
for f in libnccl-net-symmem.so libnccl-env-symmem.so symmem-copyd; do
	[ -e "build-gpu/$f" ] || { echo "FAILED: build-gpu/$f missing"; exit 1; }
done
if ! "$PY" -c 'import sys, torch
print("== torch", torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())),
      "GPUs", torch.cuda.device_count())
sys.exit(0 if torch.cuda.is_available() else 1)'; then
	echo "FAILED: $PY has no PyTorch that sees a GPU"; exit 1
fi

STEPS=${STEPS:-20} WARMUP=${WARMUP:-5} SPLIT=${SPLIT:-0} RUN_TIMEOUT=${RUN_TIMEOUT:-540}
WORKLOADS=${WORKLOADS:-ddp,fsdp,tp,moe}
ngpu=$(nvidia-smi -L | grep -c '^GPU')
if [ -z "${POSED:-}" ] && [ "$ngpu" = 1 ]; then
	note "one GPU: POSED=1 (2 processes on it, posed as two hosts; timings meaningless)"
	POSED=1
fi
[ "${POSED:-0}" = 1 ] || POSED=0
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
case $STEPS$WARMUP in *[!0-9]*) echo "STEPS and WARMUP: whole numbers"; exit 2 ;; esac
[ "$RUN_TIMEOUT" -gt 60 ] 2>/dev/null || { echo "RUN_TIMEOUT=$RUN_TIMEOUT: more than 60 s"; exit 2; }

# The environment of MODE, as env(1) arguments: nothing of the plugin's
# natively; NCCL_ENV_PLUGIN=symmem alone routes the job through it (the
# env plugin sets the rest, so none of it may come from the caller).
route() {
	local none="-u NCCL_ENV_PLUGIN -u NCCL_NET_PLUGIN -u NCCL_NET -u NCCL_P2P_DISABLE
		-u NCCL_SHM_DISABLE -u NCCL_NCHANNELS_PER_NET_PEER -u NCCL_NET_PLUGIN_REF_COUNT
		-u NCCL_PASS_SM"
	case $1 in
	native) echo "$none" ;;
	plugin) echo "$none NCCL_ENV_PLUGIN=symmem" ;;
	pass_sm) echo "$none NCCL_ENV_PLUGIN=symmem NCCL_PASS_SM=1" ;;
	esac
}

# check_route NAME MODE: every NCCL log of launch NAME went the way MODE
# asks: natively never through the plugin (posed: through NCCL's own
# network); through the plugin every process, every channel with
# GPUDirect, no other transport, a copy helper (prove, posed too);
# NCCL_PASS_SM's channel cap exactly where it is set.
check_route() {
	local name=$1 mode=$2
	if [ "$mode" = native ]; then
		expect_none_in_logs "$name" 'Using network symmem' "a native run through the plugin"
		[ "$POSED" = 1 ] && expect_in_logs "$name" 'via NET/' \
			"posed ranks not joined through NCCL's network"
		return
	fi
	expect_in_logs "$name" 'Successfully loaded external env plugin' "NCCL did not load the env plugin"
	prove "$name"
	if [ "$mode" = pass_sm ]; then
		expect_in_logs "$name" 'NCCL_PASS_SM=1: collectives capped' \
			"the plugin's tuner did not cap channels under NCCL_PASS_SM=1"
	else
		expect_none_in_logs "$name" 'NCCL_PASS_SM=1: collectives capped' \
			"channels capped without NCCL_PASS_SM"
	fi
}

# launch NAME MODE WORKLOADS RANK-ARGS...: one train.py run, its results
# (WORKLOAD.json), output and NCCL logs in $OUT/logs/NAME.
launch() {
	local name=$1 mode=$2 wl=$3 dir="$OUT/logs/$1"
	shift 3
	mkdir -p "$dir"
	note "$name: $wl, $mode ($(date +%T))"
	# $(route) splits into env's words on purpose.
	# shellcheck disable=SC2046
	if ! env $(route "$mode") NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET \
		NCCL_DEBUG_FILE="$dir/nccl.%p.log" PYTHONUNBUFFERED=1 \
		timeout -k 20 "$RUN_TIMEOUT" "$PY" bench/e2e/train.py --mode "$mode" --out "$dir" \
		--workloads "$wl" --steps "$STEPS" --warmup "$WARMUP" \
		--timeout $((RUN_TIMEOUT - 30)) "$@" >"$dir/out.txt" 2>&1; then
		echo "FAILED: $name"; grep -v '^e2e ' "$dir/out.txt" | tail -15; fail=1
	fi
	grep '^e2e ' "$dir/out.txt"
	check_route "$name" "$mode"
}

# one_pass TAG RANK-ARGS...: every workload in every mode, then the checks
# and rows per workload.
one_pass() {
	local tag=$1 w m dirs
	shift
	if [ "$SPLIT" = 1 ]; then
		for w in ${WORKLOADS//,/ }; do
			for m in native plugin pass_sm; do launch "e2e-$tag-$w-$m" $m "$w" "$@"; done
		done
	else
		for m in native plugin pass_sm; do launch "e2e-$tag-$m" $m "$WORKLOADS" "$@"; done
	fi
	for w in ${WORKLOADS//,/ }; do
		dirs=()
		for m in native plugin pass_sm; do
			if [ "$SPLIT" = 1 ]; then
				dirs+=("$m=$OUT/logs/e2e-$tag-$w-$m/$w.json")
			else
				dirs+=("$m=$OUT/logs/e2e-$tag-$m/$w.json")
			fi
		done
		"$PY" bench/e2e/compare.py "$OUT/e2e.json" "${dirs[@]}" --commit "$COMMIT" 2>&1 |
			tee -a "$OUT/e2e.txt"
		[ "${PIPESTATUS[0]}" = 0 ] || fail=1
	done
}

: >"$OUT/e2e.txt"
if [ "$POSED" = 1 ]; then
	[ -n "${GPUS:-}" ] && note "POSED=1: GPUS=$GPUS left aside (2 processes on GPU 0)"
	one_pass posed --posed
else
	for n in ${GPUS:-$ngpu}; do
		case $n in *[!0-9]* | "") echo "GPUS: counts such as \"2 4 8\""; exit 2 ;; esac
		if [ "$n" -lt 2 ] || [ "$n" -gt "$ngpu" ]; then
			echo "FAILED: $n GPUs asked, $ngpu here (2 or more; POSED=1 for one)"; fail=1
			continue
		fi
		one_pass "${n}gpu" --ranks "$n"
	done
fi
note "rows in $OUT/e2e.json; checks in $OUT/e2e.txt"
"$PY" scripts/plot_e2e.py "$OUT/e2e.json" "$OUT/e2e.png" >/dev/null 2>&1 ||
	note "no plot (scripts/plot_e2e.py needs matplotlib)"
finish
