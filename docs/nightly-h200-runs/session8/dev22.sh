# session 8 call 5: the fixed GPU-vs-CPU input test, the ptxas device test, test_large with the cuda backend
export PYTHONUNBUFFERED=1 WY_ASCEND_BACKEND=cuda WY_ASCEND_AUTOTUNE=0
export PYTHONPATH=$PWD/src:$PWD
timeout 130 python3 -m pytest tests/test_large.py tests/test_ptxas_deadline.py "tests/test_rng.py::test_a_gpu_builds_the_inputs_the_cpu_builds" \
  -k "not npu" -n 6 -p no:cacheprovider -q -W ignore 2>&1 | tail -8
