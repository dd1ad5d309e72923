# session 16 call 2 (one H200): the perf bound's calibration on device copies (calib.py), then the whole perf
# profile (seed 1, as session 15 call 3) on the shipped kernels with the bound floor + bytes/bandwidth, then every
# perf regression replayed.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
mkdir -p scratch_dev/tree/scratch_dev/s16 && cp scratch_dev/s16/calib.py scratch_dev/tree/scratch_dev/s16/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
timeout 60 python3 scratch_dev/s16/calib.py > $OUT/calib.jsonl 2>&1
echo "calib rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/calib.jsonl
cat $OUT/calib.jsonl
WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb timeout -s TERM 390 python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda \
  --hypothesis-seed=1 -p no:xdist -p no:cacheprovider -q -W ignore --fuzz-report $OUT/perf-report.json > $OUT/perf.log 2>&1
echo "perf rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/perf.log
cp regressions/perf-* $OUT/ 2>/dev/null
grep -E "passed|failed|FAILED|regression file|perf rc" $OUT/perf.log | head -20 | cut -c1-300
timeout 90 python3 -m wy_ascend.cli replay regressions/perf-*.json --backend cuda > $OUT/replay.log 2>&1
echo "replay rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/replay.log
tail -25 $OUT/replay.log | cut -c1-250
