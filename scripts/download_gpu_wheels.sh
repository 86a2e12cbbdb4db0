#!/usr/bin/env bash
# On a CPU machine with PyPI: the wheels bench/gpu_check.sh installs on a GPU image that lacks packages or holds
# older ones than requirements.txt allows (the H100 images carry transformers 5.17 and no datasets or deepspeed).
# torch, pyarrow, tokenizers, accelerate and huggingface_hub stay the image's (the pyarrow wheel alone is 55 MB of
# the 64 MB a device call carries). deepspeed and rouge-score publish no wheel: they are built here (pure Python,
# DeepSpeed's ops left to its JIT). CTranslate2's wheels link CUDA 12, the images CUDA 13: not shipped.
#   bash scripts/download_gpu_wheels.sh [PYTHON_VERSION]      # default 3.12, the GPU images' Python
set -euo pipefail
cd "$(dirname "$0")/.."
python_version="${1:-3.12}"
python="${PYTHON:-.venv/bin/python}"
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
# The versions this tree's CI runs (what the local environment holds), with the dependencies the images lack.
names="transformers datasets dill multiprocess fsspec regex evaluate peft nltk defusedxml hjson pydantic pydantic_core
annotated-types typing-inspection"
for name in $names; do
  version=$("$python" -c "import importlib.metadata as m; print(m.version('$name'))")
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$name==$version"
done
for name in rouge-score deepspeed; do
  version=$("$python" -c "import importlib.metadata as m; print(m.version('$name'))")
  DS_BUILD_OPS=0 "$python" -m pip wheel -q --no-deps --no-build-isolation -w .whl "$name==$version"
done
ls -l .whl
