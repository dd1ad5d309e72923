# session 13 call 1 (one H200): WY_ASCEND_WIDE_FP32=1 (32 warps for BT=128 backwards of fp32 dots): the five
# timeout regression files replayed on cuda, wide.py (first-call times, oracle, speed against BT=64), the cuda device
# tests with it on; then the group rule's threshold again (groupbench.py) with the one-launch dk sum.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cp scratch_dev/s13/wide.py scratch_dev/s13/groupbench.py scratch_dev/tree/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
export WY_ASCEND_WIDE_FP32=1
( for f in timeout-21d1bf14d9f7 timeout-2955788d1f50 timeout-480e59409a9c timeout-540d395d7bda timeout-bc8ea089f730; do
    S=$(date +%s)
    timeout 150 python3 -m wy_ascend.cli replay regressions/$f.json --backend cuda >> $OUT/replay.log 2>&1
    echo "replay $f rc=$? took $(( $(date +%s) - S )) s at $(( $(date +%s) - T0 )) s" >> $OUT/replay.log
  done ) &
( WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0 timeout 240 python3 -m pytest tests/test_ops.py tests/test_cuda_variant.py -n 4 \
    -p no:cacheprovider -q -W ignore > $OUT/devtests.log 2>&1
  echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log ) &
( timeout 330 python3 wide.py > $OUT/wide.log 2>&1; echo "wide rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/wide.log ) &
wait
unset WY_ASCEND_WIDE_FP32
timeout $(( 540 - ($(date +%s) - T0) )) python3 groupbench.py > $OUT/groupbench.log 2>&1
echo "groupbench rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/groupbench.log
grep -E "^(PASS|FAIL)|rc=|Error" $OUT/replay.log | cut -c1-250
grep -E "passed|failed|rc=|FAILED|Error" $OUT/devtests.log | tail -8 | cut -c1-300
cut -c1-400 $OUT/wide.log
cut -c1-400 $OUT/groupbench.log
