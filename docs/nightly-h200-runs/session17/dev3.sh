# session 17 call 3 (one H200): the whole perf profile (seed 1, as call 1) on the shipped code, the warm-up's
# workers freeing their allocators' cache (call 1 ran out of device memory in one warm-up) .
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb timeout -s TERM 470 python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda \
  --hypothesis-seed=1 -p no:xdist -p no:cacheprovider -q -W ignore --fuzz-report /tmp/perf-report.json > $OUT/perf.log 2>&1
echo "perf rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/perf.log
cp /tmp/perf-report.json $OUT/ 2>/dev/null
cat /tmp/perf-report.json.logs/*.log 2>/dev/null | grep -E "warm-up|Error|error" | cut -c1-400 > $OUT/warm.log
grep -E "passed|failed|FAILED|regression file|perf rc|cases in" $OUT/perf.log | head -20 | cut -c1-300
cat $OUT/warm.log | head -30
tar czf $OUT/regressions.tgz regressions/perf-* 2>/dev/null
