"""Test-wide setup: offline hubs and W&B, set before any test module imports transformers or datasets."""
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Tests import the t5kit package and the root modules (constants, data_collator, metrics) as the entry scripts do.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# absl's TestCase helpers (create_tempdir) read absl flags, which pytest never parses: use their defaults.
from absl import flags as absl_flags  # noqa: E402

absl_flags.FLAGS.mark_as_parsed()
