# session 9 call 4, one H200 (the shipped code, commit in $OUT/commit): the cuda/npu-cuda device tests, then the
# grid + headline run against fla-core, then the perf profile (seed 1) until the call's end
export PYTHONUNBUFFERED=1
cp scratch_dev/commit $OUT/commit
T0=$(date +%s)
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0 timeout 100 python3 -m pytest \
    tests/test_ptxas_deadline.py tests/test_ops.py tests/test_cuda_variant.py -n 8 -p no:cacheprovider -q -W ignore \
    > $OUT/devtests.log 2>&1; echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log
tail -3 $OUT/devtests.log | cut -c1-300
python3 benchmarks/compare_peer.py --all --warm-jobs 12 --rep 100 --rounds 3 --json $OUT/all.json > $OUT/all.log 2>&1
echo "compare_peer rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "warm-up|device:" $OUT/all.log | cut -c1-300
WY_ASCEND_FUZZ_SCALE=0.5 WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb1 timeout -s TERM $(( 505 - ($(date +%s) - T0) )) python3 -m pytest \
    fuzz/test_fuzz.py --profile perf --backend cuda --hypothesis-seed=1 -p no:xdist -p no:cacheprovider -q -W ignore \
    --fuzz-report $OUT/perf-report-1.json > $OUT/perf-1.log 2>&1; echo "perf seed 1 rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/perf-1.log
grep -E "^perf |FAILED|passed|failed|rc=" $OUT/perf-1.log | head -8 | cut -c1-400
cp regressions/perf-* $OUT/ 2>/dev/null; git status --short regressions | head
tail -45 $OUT/all.log
