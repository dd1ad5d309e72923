# session 14 call 5 (one H200): scratch_dev/s14/mini4.py, the narrow-tile reproducer cut to two bf16 dots of one A^T tile.
export PYTHONUNBUFFERED=1
cp scratch_dev/commit $OUT/commit
cd scratch_dev/s14
timeout 150 python3 mini4.py > $OUT/mini4.jsonl 2> $OUT/mini4.err
echo "mini4 rc=$?" >> $OUT/mini4.jsonl
cut -c1-300 $OUT/mini4.jsonl
