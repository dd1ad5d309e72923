# session 14 call 1 (one H200): narrow bf16 tiles (per-dot bisection at K64/V32, other narrow widths, standalone
# kernels) and K,V < 64 launches timed (shipped padded bf16, fp32 dots in narrow tiles, bf16 in narrow tiles) vs fla-core.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
mkdir -p scratch_dev/tree/scratch_dev/s14 && cp scratch_dev/s14/narrow.py scratch_dev/tree/scratch_dev/s14/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
NPROC=12 timeout 420 python3 scratch_dev/s14/narrow.py > $OUT/narrow.jsonl 2> $OUT/narrow.err
echo "narrow rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/narrow.jsonl
cut -c1-330 $OUT/narrow.jsonl
tail -5 $OUT/narrow.err
