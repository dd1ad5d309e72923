# session 7 call 3: the 10-minute nightly on HEAD (8 workers, one GPU); test_large on cuda alongside during the warm-up
export PYTHONUNBUFFERED=1 WY_ASCEND_AUTOTUNE=0
H=$PWD/scratch_dev/head; cd $H; export PYTHONPATH=$H/src:$H
nvidia-smi --query-gpu=name,memory.used --format=csv
ls regressions/*.json > /tmp/reg-before.txt
(
  START=$(date +%s)
  WY_ASCEND_BACKEND=cuda timeout 200 python3 -m pytest tests/test_large.py -k "cuda and not npu" -p no:cacheprovider -q -W ignore > $OUT/large.log 2>&1
  echo "large rc=$? wall=$(( $(date +%s) - START )) s" >> $OUT/large.log
) &
START=$(date +%s)
WY_ASCEND_WARMUP_JOBS=14 timeout -s TERM 572 python3 -m pytest fuzz/ --profile nightly --backend cuda -n 8 -p no:cacheprovider -q -W ignore --fuzz-report $OUT/nightly-report.json > $OUT/nightly.log 2>&1
echo "fuzz rc=$? wall=$(( $(date +%s) - START )) s" >> $OUT/nightly.log
wait
nvidia-smi --query-gpu=memory.used --format=csv
tail -8 $OUT/large.log
grep -a "pool\|warm-up" $OUT/nightly.log | tr '\r' '\n' | tail -4
tail -30 $OUT/nightly.log
python3 .ci/nightly_summary.py --outcome fuzz=success --fuzz-report $OUT/nightly-report.json --regressions-before /tmp/reg-before.txt --copy-new-to $OUT/new > $OUT/summary.md 2>&1; echo "summary rc=$?"
head -40 $OUT/summary.md
