# session 18 call 2 (one H200): diag.py (call 1's grouped K128 forward at 1.83x, its small shapes slow), then the
# whole perf profile (seed 1, as session 17) on the shipped code: the autotuner's
# 20 ms graph replays and the warm-up's workers building inputs two at a time (session 17: out of memory in one
# large case's warm-up); then the linearity and grouped_heads properties on cuda with the time left.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
timeout 110 python3 docs/nightly-h200-runs/session18/diag.py > $OUT/diag.log 2>&1
echo "diag rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/diag.log
cut -c1-330 $OUT/diag.log
WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb timeout -s TERM $(( 580 - ($(date +%s) - T0) )) python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda \
  --hypothesis-seed=1 -p no:xdist -p no:cacheprovider -q -W ignore --fuzz-report /tmp/perf-report.json > $OUT/perf.log 2>&1
echo "perf rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/perf.log
cp /tmp/perf-report.json $OUT/ 2>/dev/null
cat /tmp/perf-report.json.logs/*.log 2>/dev/null | grep -E "warm-up|Error|error" | cut -c1-400 > $OUT/warm.log
grep -E "passed|failed|FAILED|regression file|perf rc|cases in" $OUT/perf.log | head -20 | cut -c1-300
head -30 $OUT/warm.log
tar czf $OUT/regressions.tgz regressions/perf-* 2>/dev/null
LEFT=$(( 585 - ($(date +%s) - T0) ))
if [ $LEFT -gt 60 ]; then
  WY_ASCEND_AUTOTUNE=0 WY_ASCEND_FUZZ_SCALE=0.2 timeout -s TERM $LEFT python3 -m pytest fuzz/test_fuzz.py --profile ci \
    --backend cuda -k "linearity or grouped_heads" -p no:xdist -p no:cacheprovider -q -W ignore \
    --fuzz-report /tmp/fz.json > $OUT/fuzz.log 2>&1
  echo "fuzz rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/fuzz.log
  grep -E "passed|failed|FAILED|linearity|grouped_heads|rc=" $OUT/fuzz.log | head -20 | cut -c1-300
fi
