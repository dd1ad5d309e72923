# session 16 call 4 (one H200, the session's last ~240 device-seconds): the two property changes of the session on
# compiled kernels: linearity (new) and grouped_heads (two compiles' rounding), ci profile at a fifth of its budget,
# autotune off (one config a compile: the time is compiles).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD
WY_ASCEND_AUTOTUNE=0 WY_ASCEND_FUZZ_SCALE=0.2 timeout -s TERM 125 python3 -m pytest fuzz/test_fuzz.py --profile ci \
  --backend cuda -k "linearity or grouped_heads" -p no:xdist -p no:cacheprovider -q -W ignore \
  --fuzz-report /tmp/fz.json > $OUT/fuzz.log 2>&1
echo "fuzz rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/fuzz.log
cp /tmp/fz.json $OUT/fuzz-report.json 2>/dev/null
grep -E "passed|failed|FAILED|linearity|grouped_heads|rc=" $OUT/fuzz.log | head -20 | cut -c1-300
