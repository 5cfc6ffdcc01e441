#!/bin/sh
# Run inside scripts/rdma_vm.sh (Soft-RoCE): two processes posed as two
# hosts (bench_pingpong's PINGPONG_APART) under NCCL_SYMMEM_BACKEND=auto.
# With NCCL_NET_GDR_LEVEL=SYS NCCL would hand the plugin GPU buffers,
# which only TCP carries: the connections go over TCP and each process
# says once, as a WARN, that it passed over its RDMA device.  With NCCL
# staging in host memory (the level unset) they go over ibverbs, and
# nothing is said.  With NCCL_SYMMEM_BACKEND=ib each process asks rxe0
# whether it registers GPU memory through DMA-BUF (GPUDirect RDMA):
# Soft-RoCE cannot, and one INFO line per process says so, with the
# probe's answer, and that NCCL stages GPU buffers in host memory.
# Usage: test_rdma_hosts.sh PLUGIN BENCH_PINGPONG
. "$(dirname "$0")/tap.sh"
plugin=$1
pingpong=$2
passed='connections to other hosts run over TCP, though this host has RDMA device(s) rxe0'

# posed TEXT PATH WARNS [VAR=value ...]: the ping-pong passes, its four
# connection ends (two per process) run on PATH, and WARNS WARN lines say
# the RDMA device was passed over (and no other WARN).
posed() {
	text=$1 path=$2 warns=$3
	shift 3
	out=$(env SYMMEM_PLUGIN="$plugin" PINGPONG_APART=1 HARNESS_VERBOSE=1 \
		NCCL_SM_FREE_VERBOSE=1 NCCL_IB_HCA=rxe0 "$@" "$pingpong" 8 50 2>&1)
	check $? "posed hosts, $text: the ping-pong passes"
	k=$(echo "$out" | grep -c ": $path data path")
	check "$([ "$k" = 4 ]; echo $?)" "posed hosts, $text: 4 connection ends on $path ($k)"
	k=$(echo "$out" | grep -c "^WARN .*$passed")
	check "$([ "$k" = "$warns" ]; echo $?)" "posed hosts, $text: $warns passed-over WARN(s) ($k)"
	k=$(echo "$out" | grep "^WARN " | grep -vc "$passed")
	check "$([ "$k" = 0 ]; echo $?)" "posed hosts, $text: no other WARN ($k)"
	[ $fail = 0 ] || echo "$out" | sed 's/^/# /'
}

posed "GPU buffers allowed" tcp 2 NCCL_NET_GDR_LEVEL=SYS
posed "host staging" ib 0
posed "ibverbs required" ib 0 NCCL_SYMMEM_BACKEND=ib
probe='^INFO NET/symmem no GPUDirect RDMA: NCCL stages GPU buffers in host memory .*rxe0: the DMA-BUF probe answered EOPNOTSUPP'
k=$(echo "$out" | grep -c "$probe")
check "$([ "$k" = 2 ]; echo $?)" "posed hosts, ibverbs required: 2 INFO lines with the DMA-BUF probe's answer ($k)"
[ "$k" = 2 ] || echo "$out" | sed 's/^/# /'
exit $fail
