# session 10 call 4 (one H200). GPU alone: the grouped backward's device time with GROUP_DK on, off and
# by the new size rule (groupbench.py, autotune off), then the perf find of call 3 replayed (autotune on,
# as the property runs it). Then at once: the cuda device tests (autotune off), the oracle property on
# cuda (dev profile, half its budget: the block bound's first device run), every regression file on cuda.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
touch /tmp/t0
cp scratch_dev/s10/groupbench.py scratch_dev/tree/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
WY_ASCEND_AUTOTUNE=0 timeout 130 python3 groupbench.py > $OUT/groupbench.log 2>&1
echo "groupbench rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/groupbench.log
timeout 80 python3 -m wy_ascend.cli replay regressions/perf-5d5548424a25.json --backend cuda > $OUT/replay.log 2>&1
echo "replay rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/replay.log
L=$(( 420 - ($(date +%s) - T0) ))
( WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0 timeout $L python3 -m pytest tests/test_ptxas_deadline.py tests/test_ops.py \
    tests/test_cuda_variant.py -n 6 -p no:cacheprovider -q -W ignore > $OUT/devtests.log 2>&1
  echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log ) &
( WY_ASCEND_AUTOTUNE=0 WY_ASCEND_FUZZ_SCALE=0.5 WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb timeout $L python3 -m pytest \
    fuzz/test_fuzz.py -k oracle --profile dev --backend cuda -n 3 -p no:cacheprovider -q -W ignore \
    --fuzz-report $OUT/oracle-report.json > $OUT/oracle.log 2>&1
  echo "oracle rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/oracle.log ) &
( WY_ASCEND_AUTOTUNE=0 timeout $L python3 -m pytest fuzz/test_regressions.py --backend cuda -n 3 -p no:cacheprovider \
    -q -W ignore -rA > $OUT/regress.log 2>&1
  echo "regress rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/regress.log ) &
wait
NEW=$(find regressions -name '*.json' -newer /tmp/t0); echo "new regression files: $NEW"
[ -n "$NEW" ] && tar czf $OUT/new-regressions.tgz $NEW
grep -E "^\{" $OUT/groupbench.log | cut -c1-300
tail -15 $OUT/replay.log | cut -c1-250
for f in devtests oracle regress; do grep -E "passed|failed|rc=|FAILED|Error" $OUT/$f.log | tail -6 | cut -c1-300; done
