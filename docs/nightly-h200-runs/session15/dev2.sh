# session 15 call 2 (one H200): shared narrow tiles (WY_ASCEND_NARROW_TILES=1, off by default in this tree):
# device tests with it on, the open perf find replayed with it on, then narrowtime.py (padded vs narrow, one process each).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
mkdir -p scratch_dev/tree/scratch_dev/s15 && cp scratch_dev/s15/narrowtime.py scratch_dev/tree/scratch_dev/s15/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
WY_ASCEND_NARROW_TILES=1 WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0 timeout 230 python3 -m pytest tests/test_narrow_tiles.py \
  tests/test_ops.py tests/test_cuda_variant.py tests/test_lowp_dot_error.py tests/test_large.py::test_narrow_bf16_tile_finds \
  -n 6 -p no:cacheprovider -q -W ignore -rxXf > $OUT/devtests.log 2>&1
echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log
WY_ASCEND_NARROW_TILES=1 timeout 100 python3 -m wy_ascend.cli replay regressions/perf-07b876f7e3f6.json --backend cuda > $OUT/replay.log 2>&1
echo "replay rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/replay.log
timeout $(( 575 - ($(date +%s) - T0) )) python3 scratch_dev/s15/narrowtime.py > $OUT/narrowtime.jsonl 2> $OUT/narrowtime.err
echo "narrowtime rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/narrowtime.jsonl
grep -E "passed|failed|rc=|FAILED|Error|XPASS|XFAIL" $OUT/devtests.log | tail -12 | cut -c1-300
tail -12 $OUT/replay.log | cut -c1-300
cut -c1-330 $OUT/narrowtime.jsonl
tail -3 $OUT/narrowtime.err
