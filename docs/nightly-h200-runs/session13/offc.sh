# Offline sm_90 compiles (this CPU, upstream Triton 3.6 + ptxas) of fp32-dot specs by warps: which first calls are cliffs.
cd /work/main
for args in "fwd 128 float32 32 64 16 64 64" "fwd 128 float32 8 64 16 64 64" "fwd 128 float32 4 64 16 64 64" \
            "bwd 64 float32 4 64 16 64 64" "bwd 64 float32 2 64 16 64 64" "bwd 64 float32 8 64 16 64 64" \
            "bwd 64 float32 16 64 16 64 64" "fwd 64 float32 4 64 16 64 64" "fwd 64 float32 2 64 16 64 64"; do
  S=$(date +%s); timeout 200 /work/venv-cuda/bin/python scratch_dev/s13/offc.py $args 2>&1 | grep -v "^\s*$" | tail -1
  echo "[$args] exit $? at $(( $(date +%s) - S )) s"
done
