# session 9 call 1: kernel variants vs fla-core on the headline shapes (GPU 0); the device tests that
# did not run in session 8 (GPU 1): test_large, the ptxas deadline test, test_rng's GPU-vs-CPU inputs
export PYTHONUNBUFFERED=1
T0=$(date +%s)
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
nvidia-smi --query-gpu=name,memory.used --format=csv
( CUDA_VISIBLE_DEVICES=1 WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0 timeout 300 python3 -m pytest tests/test_large.py \
   tests/test_ptxas_deadline.py "tests/test_rng.py::test_a_gpu_builds_the_inputs_the_cpu_builds" \
   -n 4 -p no:cacheprovider -q -W ignore > $OUT/devtests.log 2>&1; echo "devtests rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/devtests.log ) &
CUDA_VISIBLE_DEVICES=0 timeout 330 python3 scratch_dev/varbench.py base,fused,spans,remap,fused_spans,fused_remap,fused_spans_remap fwd > $OUT/fwd.log 2>&1
echo "fwd rc=$? at $(( $(date +%s) - T0 )) s"
CUDA_VISIBLE_DEVICES=0 timeout $(( 560 - ($(date +%s) - T0) )) python3 scratch_dev/varbench.py base,spans,remap bwd > $OUT/bwd.log 2>&1
echo "bwd rc=$? at $(( $(date +%s) - T0 )) s"
wait
tail -15 $OUT/devtests.log
python3 - <<'PY'
import json, os
for f in ("fwd.log", "bwd.log"):
    for line in open(os.path.join(os.environ["OUT"], f)):
        if line.startswith("{"):
            r = json.loads(line)
            if "variant" in r:
                print(f"{r['shape']:32s} {r['op']} {r['variant']:18s} {r['ms']:.4f} fla {r['fla_ms']:.4f} ratio {r['ratio']:.3f} first {r['first_s']:.1f} diff {r['maxdiff_vs_first']:.3g}")
            else:
                print(r)
        elif "Error" in line or "error" in line:
            print(f, line.rstrip()[:300])
PY
