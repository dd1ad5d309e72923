# Offline sm_90 compiles of the fp32 forward in 128-wide tiles (K=V=128), by warps.
cd /work/main
for args in "fwd 128 float32 16 128 128 128 128" "fwd 128 float32 32 128 128 128 128" "fwd 64 float32 8 128 128 128 128" \
            "fwd 64 float32 4 128 128 128 128" "fwd 128 float32 16 64 16 64 64" "bwd 64 float32 8 128 128 64 64"; do
  S=$(date +%s); timeout 200 /work/venv-cuda/bin/python scratch_dev/s13/offc.py $args 2>&1 | grep -v "^\s*$" | tail -1
  echo "[$args] exit $? at $(( $(date +%s) - S )) s"
done
