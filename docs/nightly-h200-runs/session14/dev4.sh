# session 14 call 4 (one H200): the standalone narrow-tile reproducer (scratch_dev/s14/repro_narrow.py: the backward's
# per-chunk math, no wy_ascend import) over its ladder of variants, 8 processes.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
cd scratch_dev/s14
NPROC=8 timeout 200 python3 repro_narrow.py > $OUT/repro.jsonl 2> $OUT/repro.err
echo "repro rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/repro.jsonl
cat $OUT/repro.jsonl | cut -c1-300
tail -5 $OUT/repro.err
