#!/usr/bin/env bash
# The GPU check in one command: installs the pinned packages from wheels shipped beside the tree (.whl/, made on a
# CPU machine by scripts/download_gpu_wheels.sh) when there are any, since a GPU image may hold an older
# transformers than requirements.txt allows, then runs bench/gpu_check.py with the arguments given.
#   bash bench/gpu_check.sh --output_dir runs/gpu_check            # 8 minutes on one H100
set -euo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/t5kit-site \
    .whl/*.whl
  export PYTHONPATH="/tmp/t5kit-site${PYTHONPATH:+:$PYTHONPATH}"
fi
# The GPU image has no editable install of the project: the repository root on the path gives the benches `bench`,
# `t5kit` and the root modules, as `pip install -e .` does in the Makefile's venv.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline TOKENIZERS_PARALLELISM=false
exec python3 bench/gpu_check.py "$@"
