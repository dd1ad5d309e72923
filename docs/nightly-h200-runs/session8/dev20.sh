# session 8 call 3: the final grid + headline run of the shipped code; the perf property on K=V=256
# on 0bb1b34 (the code issue 13 measured) and on the shipped code; then the perf profile
export PYTHONUNBUFFERED=1
T0=$(date +%s)
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
python3 benchmarks/compare_peer.py --all --warm-jobs 12 --rep 100 --rounds 3 --json $OUT/all.json > $OUT/all.log 2>&1
echo "compare_peer rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "warm-up|device:" $OUT/all.log
for t in "0bb1b34:$PWD/scratch_dev/old13/src" "shipped:$PWD/src"; do
  echo "== perf property K=V=256 on ${t%%:*}"; PYTHONPATH=${t#*:}:/tmp/site timeout 120 python3 scratch_dev/k256.py 2>&1 | tail -2 | cut -c1-1500
done
echo "at $(( $(date +%s) - T0 )) s"
LEFT=$(( 570 - ($(date +%s) - T0) ))
echo "perf profile: $LEFT s"
WY_ASCEND_FUZZ_SCALE=0.25 timeout -s TERM $LEFT python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda \
  -p no:xdist -p no:cacheprovider -x -q -W ignore --fuzz-report $OUT/perf-report.json > $OUT/perf.log 2>&1
echo "perf rc=$?"; grep -E "^perf |FAILED|passed|failed" $OUT/perf.log | head; cp regressions/perf-* $OUT/ 2>/dev/null; true
