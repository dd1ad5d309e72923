# session 8 call 4: device tests of the shipped code (GROUP_DK, A loads, bwd cap 64, direct launch, ptxas
# deadline, graph-timed autotune), the outlier shapes again, the perf property on K=V=256 on 0bb1b34
export PYTHONUNBUFFERED=1
T0=$(date +%s)
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
( WY_ASCEND_AUTOTUNE=0 WY_ASCEND_BACKEND=cuda timeout 260 python3 -m pytest tests/test_ops.py tests/test_lowp_dot_error.py \
    tests/test_cuda_variant.py tests/test_triton_bf16_repro.py tests/test_specialization.py tests/test_rng.py tests/test_perf.py \
    tests/test_lowp_rule.py tests/test_ptxas_deadline.py -n 8 -p no:cacheprovider -q -W ignore > $OUT/devtests.log 2>&1
  echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log ) &
( WY_ASCEND_AUTOTUNE=0 timeout 240 python3 -m pytest tests/test_large.py -k "cuda and not npu" -p no:cacheprovider -q -W ignore > $OUT/large.log 2>&1
  echo "large rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/large.log ) &
wait
tail -4 $OUT/devtests.log; grep -E "FAILED|Error" $OUT/devtests.log | head -10; tail -3 $OUT/large.log
timeout 150 python3 benchmarks/compare_peer.py --all --shapes fixed_B4_T4096_H4_K64_V32 varlen_T2048_N8_H2_HV8_K32_V32 \
  varlen_T2048_N8_H2_HV8_K64_V32 fixed_B4_T4096_H4_K16_V16 varlen_T2048_N8_H2_HV8_K256_V128 grouped_B8_T4096_H8_HV32_K128 \
  --warm-jobs 6 --rep 100 --rounds 3 --json $OUT/outliers.json > $OUT/outliers.log 2>&1
echo "outliers rc=$? at $(( $(date +%s) - T0 )) s"; tail -26 $OUT/outliers.log
echo "== perf property K=V=256 on 0bb1b34 (autotune off: its 9-config search sat in ptxas)"
WY_ASCEND_AUTOTUNE=0 PYTHONPATH=$PWD/scratch_dev/old13/src:/tmp/site timeout 120 python3 scratch_dev/k256.py 2>&1 | tail -2 | cut -c1-1500
echo "end at $(( $(date +%s) - T0 )) s"
