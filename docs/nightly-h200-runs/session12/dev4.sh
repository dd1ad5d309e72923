# session 12 call 4 (one H200): the one-launch dk sum inside the ops: device tests, the perf regression files, grouped
# vs per-head bit for bit (g8.py).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cp scratch_dev/s12/g8.py scratch_dev/tree/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
( WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0 timeout 300 python3 -m pytest tests/test_ops.py tests/test_cuda_variant.py -n 4 \
    -p no:cacheprovider -q -W ignore > $OUT/devtests.log 2>&1
  echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log ) &
( for f in perf-d16759ef3d4b perf-5d5548424a25 perf-ed58fb69cb0f; do
    timeout 150 python3 -m wy_ascend.cli replay regressions/$f.json --backend cuda >> $OUT/replay.log 2>&1
    echo "replay $f rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/replay.log
  done ) &
( sleep 30; WY_ASCEND_AUTOTUNE=0 timeout 200 python3 g8.py > $OUT/g8.log 2>&1; echo "g8 rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/g8.log ) &
wait
grep -E "passed|failed|rc=|FAILED|Error" $OUT/devtests.log | tail -8 | cut -c1-300
grep -E "^(PASS|FAIL)|rc=|  (fwd|bwd) " $OUT/replay.log | cut -c1-200
cat $OUT/g8.log | cut -c1-300
