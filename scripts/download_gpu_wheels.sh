#!/usr/bin/env bash
# On a CPU machine with PyPI: the wheels bench/gpu_check.sh installs on a GPU image whose transformers is older
# than requirements.txt allows (the H100 images carry 5.17). Pure-Python packages only: torch stays the image's.
#   bash scripts/download_gpu_wheels.sh [PYTHON_VERSION]      # default 3.12, the GPU images' Python
set -euo pipefail
cd "$(dirname "$0")/.."
python_version="${1:-3.12}"
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
# The versions this tree's CI runs: what the local environment holds.
for name in transformers accelerate huggingface_hub tokenizers safetensors; do
  version=$("${PYTHON:-.venv/bin/python}" -c "import importlib.metadata as m; print(m.version('$name'))")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$name==$version"
done
ls -l .whl
