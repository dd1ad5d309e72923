# session 13 call 3 (one H200): WY_ASCEND_FP32_WARPS=1 (fp32-dot launches run one config, the fewest warps within
# FP32_DOT_WORK): the five BT=128 timeout files replayed on cuda, the cuda device tests, fp32warps.py on (first calls,
# device times, oracle); then groupfind.py (the perf find of call 2, grouped vs per value head) alone on the GPU, then
# fp32warps.py off (4 warps, BT=64) for the speed each launch had, to the call's end.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cp scratch_dev/s13/fp32warps.py scratch_dev/s13/groupfind.py scratch_dev/tree/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
( for f in timeout-21d1bf14d9f7 timeout-2955788d1f50 timeout-480e59409a9c timeout-540d395d7bda timeout-bc8ea089f730; do
    ( S=$(date +%s); WY_ASCEND_FP32_WARPS=1 timeout 150 python3 -m wy_ascend.cli replay regressions/$f.json --backend cuda > $OUT/replay-$f.log 2>&1
      echo "replay $f rc=$? took $(( $(date +%s) - S )) s at $(( $(date +%s) - T0 )) s" >> $OUT/replay-$f.log ) &
  done; wait ) &
( WY_ASCEND_FP32_WARPS=1 WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0 timeout 180 python3 -m pytest tests/test_ops.py tests/test_cuda_variant.py \
    tests/test_fp32_dot.py -n 4 -p no:cacheprovider -q -W ignore > $OUT/devtests.log 2>&1
  echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log ) &
( WY_ASCEND_FP32_WARPS=1 timeout 200 python3 fp32warps.py on > $OUT/fp32warps-on.log 2>&1; echo "on rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/fp32warps-on.log ) &
wait
timeout 90 python3 groupfind.py > $OUT/groupfind.log 2>&1; echo "groupfind rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/groupfind.log
WY_ASCEND_AUTOTUNE=0 timeout $(( 380 - ($(date +%s) - T0) )) python3 fp32warps.py off > $OUT/fp32warps-off.log 2>&1
echo "off rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/fp32warps-off.log
for f in $OUT/replay-*.log; do grep -E "^(PASS|FAIL)|rc=" $f | cut -c1-250; done
grep -E "passed|failed|rc=|FAILED" $OUT/devtests.log | tail -8 | cut -c1-300
grep -E "^\{|rc=" $OUT/groupfind.log $OUT/fp32warps-on.log $OUT/fp32warps-off.log | cut -c1-500
