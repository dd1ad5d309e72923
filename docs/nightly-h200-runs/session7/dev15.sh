# session 7 call 2: device tests of HEAD (kernel change), headline before/after, autotuned first calls, the grid
set -o pipefail
export PYTHONUNBUFFERED=1 WY_ASCEND_AUTOTUNE=0
R=$PWD; H=$R/scratch_dev/head; B=$R/scratch_dev/before/src:$H
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site scratch_dev/whl/*.whl
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
cd $H
(
  START=$(date +%s)
  WY_ASCEND_BACKEND=cuda PYTHONPATH=$H/src:$H:/tmp/site timeout 235 python3 -m pytest tests/test_ops.py tests/test_lowp_dot_error.py tests/test_cuda_variant.py tests/test_triton_bf16_repro.py tests/test_specialization.py tests/test_rng.py tests/test_perf.py tests/test_lowp_rule.py -n 8 -p no:cacheprovider -q -W ignore > $OUT/devtests.log 2>&1
  echo "devtests rc=$? wall=$(( $(date +%s) - START )) s" >> $OUT/devtests.log
) &
P1=$!
(
  START=$(date +%s)
  PYTHONPATH=$H/src:$H timeout 235 python3 -m pytest tests/test_large.py -k "cuda and not npu" -p no:cacheprovider -q -W ignore > $OUT/large.log 2>&1
  echo "large rc=$? wall=$(( $(date +%s) - START )) s" >> $OUT/large.log
) &
P2=$!
wait $P1 $P2
tail -15 $OUT/devtests.log; tail -6 $OUT/large.log
S="fixed_B8_T4096_H16_K128 varlen_T32768_N16_H16_K128 grouped_B8_T4096_H8_HV32_K128"
PYTHONPATH=$H/src:$H:/tmp/site timeout 80 python3 benchmarks/compare_peer.py --rep 100 --shapes $S wide_B4_T8192_H16_K256 --json $OUT/head1.json > $OUT/head1.log 2>&1; echo "head1 rc=$?"
PYTHONPATH=$B:/tmp/site timeout 65 python3 benchmarks/compare_peer.py --rep 100 --shapes $S --json $OUT/before1.json > $OUT/before1.log 2>&1; echo "before1 rc=$?"
for f in before1 head1; do echo "== $f"; tail -10 $OUT/$f.log; done
WY_ASCEND_AUTOTUNE=1 PYTHONPATH=$H/src:$H:/tmp/site timeout 60 python3 benchmarks/compare_peer.py --grid --rep 40 --shapes fixed_B4_T4096_H4_K256_V256 varlen_T2048_N8_H2_HV8_K64_V32 --json $OUT/first-autotune.json > $OUT/first.log 2>&1; echo "first rc=$?"; tail -6 $OUT/first.log
python3 -c "import json; [print(r['shape'], r['provider'], r['op'], round(r['first_s'],1)) for r in json.load(open('$OUT/first-autotune.json'))['rows']]"
PYTHONPATH=$H/src:$H:/tmp/site timeout 125 python3 benchmarks/compare_peer.py --grid --rep 40 --json $OUT/grid.json > $OUT/grid.log 2>&1; echo "grid rc=$?"
tail -70 $OUT/grid.log
