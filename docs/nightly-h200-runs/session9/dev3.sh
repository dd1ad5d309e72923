# session 9 call 3 (the shipped code, commit in $OUT/commit). GPU 1: the cuda/npu-cuda device tests, then
# the perf profile (seed 1); GPU 0: the grid + headline run against fla-core, then the perf profile (seed 2).
# Each perf run draws up to 12 of the profile's 24 cases (WY_ASCEND_FUZZ_SCALE=0.5) until the call's end.
export PYTHONUNBUFFERED=1
cp scratch_dev/commit $OUT/commit
T0=$(date +%s)
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
perf() {  # $1: GPU and seed
  CUDA_VISIBLE_DEVICES=$2 WY_ASCEND_FUZZ_SCALE=0.5 WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb$1 \
    timeout -s TERM $(( 515 - ($(date +%s) - T0) )) python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda \
    --hypothesis-seed=$1 -p no:xdist -p no:cacheprovider -q -W ignore --fuzz-report $OUT/perf-report-$1.json \
    > $OUT/perf-$1.log 2>&1; echo "perf seed $1 rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/perf-$1.log
}
( CUDA_VISIBLE_DEVICES=1 WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0 timeout 120 python3 -m pytest \
    tests/test_ptxas_deadline.py tests/test_ops.py tests/test_cuda_variant.py -n 6 -p no:cacheprovider -q -W ignore \
    > $OUT/devtests.log 2>&1; echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log
  perf 1 1 ) &
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/compare_peer.py --all --warm-jobs 12 --rep 100 --rounds 3 --json $OUT/all.json > $OUT/all.log 2>&1
echo "compare_peer rc=$? at $(( $(date +%s) - T0 )) s"; grep -E "warm-up|device:" $OUT/all.log
perf 2 0
wait
tail -3 $OUT/devtests.log | cut -c1-300
for i in 1 2; do grep -E "^perf |FAILED|passed|failed|rc=" $OUT/perf-$i.log | head -8 | cut -c1-400; done
cp regressions/perf-* $OUT/ 2>/dev/null; git status --short regressions | head
tail -45 $OUT/all.log
