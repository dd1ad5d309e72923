# session 15 call 4 (one H200, the session's last device seconds): groupnarrow.py on 16aca9b (shared narrow tiles
# the default): grouped vs per-value-head backward on K,V <= 32 shapes around the perf finds.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
mkdir -p scratch_dev/tree/scratch_dev/s15 && cp scratch_dev/s15/groupnarrow.py scratch_dev/tree/scratch_dev/s15/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
timeout 225 python3 scratch_dev/s15/groupnarrow.py > $OUT/groupnarrow.jsonl 2> $OUT/groupnarrow.err
echo "groupnarrow rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/groupnarrow.jsonl
cut -c1-300 $OUT/groupnarrow.jsonl
tail -3 $OUT/groupnarrow.err
