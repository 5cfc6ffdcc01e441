#!/bin/bash
# The bandwidth sweep as rows (bench/results/sweep.json, e2e.md): every
# op over a size range natively and through the plugin (routed by
# NCCL_ENV_PLUGIN=symmem alone, nccl_bench -Z), every element checked, for
# each GPU count; nccl_bench -j gives the rows, bench/e2e/rows.py folds
# them into $OUT/sweep.json with the ratio of the bus bandwidths.
#
#   bash scripts/sweep.sh
#
# GPUS="2 4"   GPU counts (default: all); OPS (all seven); MIN (8), MAX
# (1 GiB), FACTOR (4) the sizes; ITERS (10) timed calls per size; OUT
# (/tmp/symmem-sweep): sweep.json, sweep.png, tables.txt, logs.tgz.
# COMMIT: the tree's commit in the rows (default: git's, else unknown).
# SKIP_BUILD=1: build-gpu/ holds the plugin and nccl_bench already.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/symmem-sweep}
. scripts/gpu_lib.sh
OPS=${OPS:-all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv}
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
ngpu=$(nvidia-smi -L | grep -c '^GPU')
for n in ${GPUS:-$ngpu}; do
	case $n in *[!0-9]* | "") echo "GPUS: counts such as \"2 4\""; exit 2 ;; esac
	if [ "$n" -lt 2 ] || [ "$n" -gt "$ngpu" ]; then
		echo "FAILED: $n GPUs asked, $ngpu here"; fail=1
		continue
	fi
	rm -f "$OUT/logs/sweep-$n.jsonl"
	NRANKS=$n bench "sweep-$n" -Z -o "$OPS" -b "${MIN:-8}" -e "${MAX:-1073741824}" \
		-f "${FACTOR:-4}" -c none -i "${ITERS:-10}" -j "$OUT/logs/sweep-$n.jsonl"
	expect_env_plugin "sweep-$n"
	"$PY" bench/e2e/rows.py sweep "$OUT/sweep.json" "$OUT/logs/sweep-$n.jsonl" \
		--commit "$COMMIT" || fail=1
done
"$PY" scripts/plot_sweep.py "$OUT/sweep.json" "$OUT/sweep.png" >/dev/null 2>&1 ||
	note "no plot (scripts/plot_sweep.py needs matplotlib)"
finish
