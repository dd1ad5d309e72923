# session 18 call 3 (one H200): all 34 benchmark shapes of the shipped code against fla-core 0.6.0 in one run, as
# call 1, now with each call's kernel time (torch.profiler) beside do_bench's (call 2's diag: do_bench on the small
# shapes timed the host, 23-52 us between rounds for 8.6 us of kernels). Two rounds (call 1: three) to fit the
# session's last device time.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
timeout $(( 455 - ($(date +%s) - T0) )) python3 benchmarks/compare_peer.py --all --warm-jobs 14 --rep 100 --rounds 2 --json $OUT/all.json > $OUT/all.log 2>&1
echo "compare_peer rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/all.log
grep -E "copy bandwidth|warm-up" $OUT/all.log | cut -c1-400
tail -40 $OUT/all.log | cut -c1-220
