# graph-mode hang: dump every thread's stack of the rank processes
mkdir -p $OUT/logs/graphdbg
./build-gpu/nccl_bench -n 2 -G -o all_reduce -b 8 -e 8 -m plugin -c none -i 1 -w 0 -t 45 \
  -E NCCL_DEBUG=INFO -E NCCL_DEBUG_SUBSYS=INIT,NET,PROXY -E NCCL_SM_FREE_VERBOSE=1 \
  -E NCCL_DEBUG_FILE=$OUT/logs/graphdbg/nccl.%p.log > $OUT/logs/graphdbg/out.txt 2>&1 &
sleep 30
for p in $(pgrep -f "nccl_bench -n 2 -G" | tail -n +2); do
  echo "=== pid $p"
  if command -v gdb >/dev/null; then gdb -p $p -batch -ex "thread apply all bt 12" 2>/dev/null | grep -E "^#|^Thread" | head -120
  elif command -v eu-stack >/dev/null; then eu-stack -p $p | head -150
  else for t in /proc/$p/task/*; do echo "$t $(cat $t/comm) $(cat $t/wchan)"; done; fi
done > $OUT/logs/graphdbg/stacks.txt 2>&1
wait
grep -c . $OUT/logs/graphdbg/stacks.txt; grep -E "symmem|smf_|tp_|sm_|cu[A-Z]|nccl" $OUT/logs/graphdbg/stacks.txt | grep -v "^Thread" | head -60
