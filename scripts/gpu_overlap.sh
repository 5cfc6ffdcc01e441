#!/bin/bash
# One command on a GPU host for issue 4's overlap benchmark: builds the
# plugin and nccl_overlap, then for each collective runs a bf16 GEMM
# (8192^3, repeated) beside it natively, through the plugin, and through the
# plugin with NCCL_PASS_SM=1, all in one invocation per collective, with
# NCCL's buffers and with registered ones; all_gather and alltoall also with
# NCCL's copy-engine collectives (native-ce).  Tables to $OUT/overlap.txt, a
# plot to $OUT/overlap.png (scripts/plot_overlap.py).
#
# Usage: scripts/gpu_overlap.sh [bytes]   (default 134217728)
#        NRANKS=n uses the first n GPUs; GEMMS / COLLS set the batch.
#        OPS="alltoall sendrecv" picks collectives; BUFS="plain reg regmem"
#        picks buffers (regmem: registered and from ncclMemAlloc, cuMem).
#        PASS_SM_SWEEP="4 8 16": instead, all_gather and all_reduce (or OPS) with
#        NCCL_PASS_SM=1 at each NCCL_SYMMEM_PASS_SM_CHANNELS (native and the
#        uncapped plugin in the first invocation), to pick the cap by makespan.
#        README_1G=1: then the README's NCCL_PASS_SM=1 settings at 1 GiB
#        (registered ncclMemAlloc buffers; send/recv with 1 channel per peer,
#        alltoall with 8), and all_reduce / reduce_scatter of 1 GiB on
#        NCCL's buffers (5 of them beside the 20 GEMMs), into
#        $OUT/overlap-1g.txt.
#        The plugin's configurations are routed as the README's Quick start
#        does, by NCCL_ENV_PLUGIN=symmem alone (nccl_overlap -Z); ROUTE=vars
#        routes them by NCCL_NET_PLUGIN and friends instead (no
#        NCCL_NCHANNELS_PER_NET_PEER).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/symmem-overlap}
BYTES=${1:-134217728}
case ${ROUTE:-env} in
env) ZFLAG=-Z ;;
vars) ZFLAG= ;;
*) echo "ROUTE is env or vars, not '$ROUTE'" >&2; exit 2 ;;
esac
mkdir -p "$OUT/logs"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. scripts/gpu_build.sh
gpu_build "$OUT/logs/build.log" && gpu_build_overlap "$OUT/logs/build.log" || exit 1
fail=0
if [ -n "${PASS_SM_SWEEP:-}" ]; then
	for op in ${OPS:-all_gather all_reduce}; do
		echo "== $op $BYTES caps: default, $PASS_SM_SWEEP ($(date +%T))"
		echo "# PASS_SM default cap (NCCL_SYMMEM_PASS_SM_CHANNELS unset)" >>"$OUT/overlap.txt"
		./build-gpu/nccl_overlap ${NRANKS:+-n $NRANKS} $ZFLAG -o $op -b "$BYTES" -C native,plugin,passsm \
			-g "${GEMMS:-20}" -c "${COLLS:-10}" -t "${PHASE_TIMEOUT:-240}" \
			>>"$OUT/overlap.txt" 2>>"$OUT/logs/stderr.txt" || { echo "FAILED: $op"; fail=1; }
		for n in $PASS_SM_SWEEP; do
			echo "# PASS_SM cap $n (NCCL_SYMMEM_PASS_SM_CHANNELS=$n)" >>"$OUT/overlap.txt"
			./build-gpu/nccl_overlap ${NRANKS:+-n $NRANKS} $ZFLAG -o $op -b "$BYTES" -C native,passsm \
				-E NCCL_SYMMEM_PASS_SM_CHANNELS=$n -g "${GEMMS:-20}" -c "${COLLS:-10}" \
				-t "${PHASE_TIMEOUT:-240}" >>"$OUT/overlap.txt" 2>>"$OUT/logs/stderr.txt" ||
				{ echo "FAILED: $op cap $n"; fail=1; }
		done
	done
	grep -E "^# overlap|^  |^# PASS_SM" "$OUT/overlap.txt"
	exit $fail
fi
for op in ${OPS:-all_gather reduce_scatter all_reduce alltoall sendrecv}; do
	for buf in ${BUFS:-plain reg}; do
		# NCCL's own copy-engine collectives (zero CTAs, symmetric windows)
		# exist for all_gather and alltoall; their buffers are always NCCL's.
		cfgs=native,plugin,passsm
		case "$op,$buf" in all_gather,plain | alltoall,plain) cfgs=native,native-ce,plugin,passsm ;; esac
		case $buf in plain) reg= ;; reg) reg=-R ;; regmem) reg="-R -A" ;; esac
		echo "== $op $BYTES $buf ($(date +%T))"
		./build-gpu/nccl_overlap ${NRANKS:+-n $NRANKS} $ZFLAG -o $op -b "$BYTES" $reg -C $cfgs \
			-g "${GEMMS:-20}" -c "${COLLS:-10}" -t "${PHASE_TIMEOUT:-240}" \
			>>"$OUT/overlap.txt" 2>>"$OUT/logs/stderr.txt" || { echo "FAILED: $op $reg"; fail=1; }
	done
done
if [ -n "${README_1G:-}" ]; then
	G=1073741824
	run_1g() {
		echo "== 1 GiB: $* ($(date +%T))"
		./build-gpu/nccl_overlap ${NRANKS:+-n $NRANKS} $ZFLAG -b $G -g "${GEMMS:-20}" \
			-t "${PHASE_TIMEOUT:-240}" "$@" >>"$OUT/overlap-1g.txt" 2>>"$OUT/logs/stderr.txt" ||
			{ echo "FAILED: 1 GiB $*"; fail=1; }
	}
	run_1g -o sendrecv -R -A -C native,passsm -E NCCL_NCHANNELS_PER_NET_PEER=1 -c 10
	run_1g -o alltoall -R -A -C native,passsm -E NCCL_NCHANNELS_PER_NET_PEER=8 -c 10
	run_1g -o all_reduce -C native,plugin,passsm -c 5
	run_1g -o reduce_scatter -C native,plugin,passsm -c 5
fi
cat "$OUT/overlap.txt" ${README_1G:+"$OUT/overlap-1g.txt"}
python3 scripts/plot_overlap.py "$OUT/overlap.txt" ${README_1G:+"$OUT/overlap-1g.txt"} \
	"$OUT/overlap.png" || fail=1
exit $fail
