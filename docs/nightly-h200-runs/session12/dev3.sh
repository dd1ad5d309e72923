# session 12 call 3 (one H200): the launch check (properties._launched_as_asked) on cuda and npu-cuda: the device tests
# that run properties.run_ops, the launch_invariance/grouped_heads/oracle properties on cuda (dev profile, a fraction of
# its budget); at once the fused dk-sum experiment (sumexp.py).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cp scratch_dev/s12/sumexp.py scratch_dev/tree/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
L=380
( WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0 timeout $L python3 -m pytest tests/test_ops.py tests/test_cuda_variant.py -n 4 \
    -p no:cacheprovider -q -W ignore > $OUT/devtests.log 2>&1
  echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log ) &
( WY_ASCEND_AUTOTUNE=0 WY_ASCEND_FUZZ_SCALE=0.25 WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb timeout $L python3 -m pytest \
    fuzz/test_fuzz.py -k "launch_invariance or grouped_heads or oracle" --profile dev --backend cuda -n 3 -p no:cacheprovider \
    -q -W ignore --fuzz-report $OUT/fuzz-report.json > $OUT/fuzz.log 2>&1
  echo "fuzz rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/fuzz.log ) &
( sleep 60; timeout 300 python3 sumexp.py > $OUT/sumexp.log 2>&1; echo "sumexp rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/sumexp.log ) &
wait
for f in devtests fuzz sumexp; do grep -E "passed|failed|rc=|FAILED|Error|^\{" $OUT/$f.log | tail -12 | cut -c1-400; done
grep -E "launch|asked|never" $OUT/fuzz.log | head -10 | cut -c1-300
