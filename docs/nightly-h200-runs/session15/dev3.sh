# session 15 call 3 (one H200): the whole perf profile (24 cases, seed 1: the seed that found perf-07b876f7e3f6 in
# session 11) on the commit that makes shared narrow tiles the cuda default; autotuning on, against fla-core.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb timeout -s TERM 565 python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda \
  --hypothesis-seed=1 -p no:xdist -p no:cacheprovider -q -W ignore --hypothesis-show-statistics \
  --fuzz-report $OUT/perf-report.json > $OUT/perf.log 2>&1
echo "perf rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/perf.log
cp regressions/perf-* $OUT/ 2>/dev/null; ls regressions | grep perf
grep -E "passed|failed|FAILED|regression file|cases|perf rc" $OUT/perf.log | head -20 | cut -c1-300
