# session 17 call 2 (one H200): compare_peer's new warm-up (one autotune config a task) on one shape, then all 34
# benchmark shapes of the shipped code against fla-core 0.6.0 (the JSON docs/benchmarks.md is generated from);
# with the time left, the linearity and grouped_heads properties on cuda.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
timeout 150 python3 benchmarks/compare_peer.py --grid --shapes fixed_B4_T4096_H4_K16_V16 --warm-jobs 15 --rep 20 --rounds 1 > $OUT/smoke.log 2>&1
RC=$?
echo "smoke rc=$RC at $(( $(date +%s) - T0 )) s" | tee -a $OUT/smoke.log
tail -8 $OUT/smoke.log | cut -c1-300
if [ $RC -eq 0 ]; then
  timeout $(( 585 - ($(date +%s) - T0) )) python3 benchmarks/compare_peer.py --all --warm-jobs 14 --rep 100 --rounds 3 --json $OUT/all.json > $OUT/all.log 2>&1
  echo "compare_peer rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/all.log
  grep -E "copy bandwidth|warm-up" $OUT/all.log | cut -c1-400
  tail -72 $OUT/all.log | cut -c1-200
  LEFT=$(( 590 - ($(date +%s) - T0) ))
  if [ $LEFT -gt 60 ]; then
    WY_ASCEND_AUTOTUNE=0 WY_ASCEND_FUZZ_SCALE=0.2 timeout -s TERM $LEFT python3 -m pytest fuzz/test_fuzz.py --profile ci \
      --backend cuda -k "linearity or grouped_heads" -p no:xdist -p no:cacheprovider -q -W ignore \
      --fuzz-report /tmp/fz.json > $OUT/fuzz.log 2>&1
    echo "fuzz rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/fuzz.log
    cp /tmp/fz.json $OUT/fuzz-report.json 2>/dev/null
    grep -E "passed|failed|FAILED|linearity|grouped_heads|rc=" $OUT/fuzz.log | head -20 | cut -c1-300
  fi
else
  WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb timeout -s TERM 480 python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda \
    --hypothesis-seed=1 -p no:xdist -p no:cacheprovider -q -W ignore --fuzz-report /tmp/perf-report.json > $OUT/perf.log 2>&1
  echo "perf rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/perf.log
  cp /tmp/perf-report.json $OUT/ 2>/dev/null
  grep -E "passed|failed|FAILED|regression file|perf rc|cases in" $OUT/perf.log | head -20 | cut -c1-300
  tar czf $OUT/regressions.tgz regressions/perf-* 2>/dev/null
fi
