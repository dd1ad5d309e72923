# session 13 call 2 (one H200): the whole perf profile (24 cases, seed 1, autotune on, against fla-core) on the shipped code


export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
touch /tmp/t0
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb timeout -s TERM 520 python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda \
  --hypothesis-seed=1 -p no:xdist -p no:cacheprovider -q -W ignore --hypothesis-show-statistics \
  --fuzz-report $OUT/perf-report.json > $OUT/perf.log 2>&1
echo "perf rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/perf.log
NEW=$(find regressions -name '*.json' -newer /tmp/t0); echo "new regression files: $NEW"
[ -n "$NEW" ] && cp $NEW $OUT/
grep -E "passed|failed|FAILED|regression file|cases" $OUT/perf.log | head -20 | cut -c1-300
