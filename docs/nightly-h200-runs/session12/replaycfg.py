"""Replay regression files on cuda with CUDA_CONFIGS extended by register-capped configs (argv: files)."""
import sys
from wy_ascend import backends, cli
backends.CUDA_CONFIGS = backends.CUDA_CONFIGS + [(4, 1, 168), (4, 1, 128), (8, 1, 128)]
rc = 0
for path in sys.argv[1:]:
    print("==", path, backends.CUDA_CONFIGS, flush=True)
    try:
        r = cli.main(["replay", path, "--backend", "cuda"])
    except SystemExit as e:
        r = e.code
    print("== rc", r, flush=True)
