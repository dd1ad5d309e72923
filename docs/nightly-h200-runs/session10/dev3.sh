# session 10 call 3 (one H200). GPU alone: forward variants A/B against fla-core (varbench.py: the shipped
# kernels; the fused forward loop software-pipelined, 2 or 3 stages; 64-wide tiles). Then, at once: the
# cuda device tests (autotune off), the oracle property on cuda (dev profile, half its budget: the block
# bound's first device run) and every regression file replayed on cuda.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
touch /tmp/t0
cp scratch_dev/s10/varbench.py scratch_dev/tree/
mkdir -p scratch_dev/tree/scratch_dev && cp scratch_dev/var_*.py scratch_dev/tree/scratch_dev/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
timeout 200 python3 varbench.py base=base:0,cap64=base:64,p2_64=p2:64,p3_64=p3:64,p2=p2:0 > $OUT/varbench.log 2>&1
echo "varbench rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/varbench.log
L=$(( 540 - ($(date +%s) - T0) ))
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
grep -E "^\{" $OUT/varbench.log | cut -c1-220
for f in devtests oracle regress; do grep -E "passed|failed|rc=|FAILED|Error" $OUT/$f.log | tail -6 | cut -c1-300; done
