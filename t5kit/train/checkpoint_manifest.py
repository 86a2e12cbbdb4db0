"""The former home of the checkpoint manifest, which now lives in checkpointing.py with the code that commits and
rotates checkpoints. This name is that same module object (so a patch or a logger reached through either name is
the same one), for callers not yet moved to `from t5kit.train import checkpointing`."""
import sys

from t5kit.train import checkpointing

sys.modules[__name__] = checkpointing
