# session 10 call 3 (one H200): the full perf profile again (providers timed in turns) (24 cases, autotuning on, against fla-core)
# on the shipped kernels. Runs from a `git archive` of the commit in scratch_dev/tree.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb timeout -s TERM 545 python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda \
  --hypothesis-seed=1 -p no:xdist -p no:cacheprovider -q -W ignore --hypothesis-show-statistics \
  --fuzz-report $OUT/perf-report.json > $OUT/perf.log 2>&1
echo "perf rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/perf.log
cp regressions/perf-* $OUT/ 2>/dev/null; git status --short regressions 2>/dev/null | head
grep -E "passed|failed|FAILED|regression file|cases" $OUT/perf.log | head -20 | cut -c1-300
