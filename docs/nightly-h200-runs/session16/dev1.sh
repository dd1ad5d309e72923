# session 16 call 1 (one H200): var16.py on HEAD (a2cced3): grouped vs per-head bits; the narrow backward's
# occupancy variants (var_nokk, 8 warps, maxnreg); wide shapes base vs nokk.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
mkdir -p scratch_dev/tree/scratch_dev/s16 && cp scratch_dev/s16/var16.py scratch_dev/s16/var_nokk.py scratch_dev/tree/scratch_dev/s16/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
timeout 480 python3 scratch_dev/s16/var16.py > $OUT/var16.jsonl 2> $OUT/var16.err
echo "var16 rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/var16.jsonl
cut -c1-400 $OUT/var16.jsonl | tail -60
tail -3 $OUT/var16.err
