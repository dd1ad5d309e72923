cd /work/main
for args in "128 float32 1 0 4" "128 float32 1 0 8" "128 float32 0 0 8" "128 float32 1 1 8" "128 float16 1 0 8"; do
  timeout 600 nice /work/venv-cuda/bin/python scratch_dev/s12/offc.py $args 2>&1 | tail -1 || echo "$args: timeout"
done
