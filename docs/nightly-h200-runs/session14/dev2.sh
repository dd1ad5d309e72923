# session 14 call 2 (one H200), tree e5df238 (HEAD): (a) device tests and the five timeout replays of the shipped code
# (the WY_ASCEND_FP32_WARPS default, not run on a GPU since its flip); (b) beside them narrow2.py's correctness jobs
# (pair bisection, standalone reproducer candidates); (c) after both, narrow2.py's timing (shipped vs equal narrow tiles).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
mkdir -p scratch_dev/tree/scratch_dev/s14 && cp scratch_dev/s14/narrow.py scratch_dev/s14/narrow2.py scratch_dev/tree/scratch_dev/s14/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
touch /tmp/devtests_running
( ( WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0 timeout 270 python3 -m pytest tests/test_ops.py tests/test_cuda_variant.py \
    tests/test_lowp_dot_error.py tests/test_triton_bf16_repro.py -n 4 -p no:cacheprovider -q -W ignore > $OUT/devtests.log 2>&1
    echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log ) &
  ( for f in timeout-21d1bf14d9f7 timeout-2955788d1f50 timeout-480e59409a9c timeout-540d395d7bda timeout-bc8ea089f730; do
      S=$(date +%s)
      timeout 100 python3 -m wy_ascend.cli replay regressions/$f.json --backend cuda >> $OUT/replay.log 2>&1
      echo "replay $f rc=$? took $(( $(date +%s) - S )) s at $(( $(date +%s) - T0 )) s" >> $OUT/replay.log
      [ $(( $(date +%s) - T0 )) -gt 270 ] && break
    done ) &
  wait; rm -f /tmp/devtests_running ) &
NPROC=8 timeout 500 python3 scratch_dev/s14/narrow2.py > $OUT/narrow2.jsonl 2> $OUT/narrow2.err
echo "narrow2 rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/narrow2.jsonl
wait
grep -E "^(PASS|FAIL)|rc=|Error" $OUT/replay.log | cut -c1-250
grep -E "passed|failed|rc=|FAILED|Error" $OUT/devtests.log | tail -8 | cut -c1-300
cut -c1-300 $OUT/narrow2.jsonl
tail -3 $OUT/narrow2.err
