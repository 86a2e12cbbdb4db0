"""Where the real test data lives (../shared/data beside the repo) and how tests skip when it is absent."""
import os
import unittest
from pathlib import Path

SHARED_DATA = Path(os.environ.get("T5_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
T5_TOKENIZER_DIR = SHARED_DATA / "t5_spiece"


def require(relative_path: str) -> Path:
    """Returns SHARED_DATA/relative_path, or skips the calling test naming what is missing."""
    path = SHARED_DATA / relative_path
    if not path.exists():
        raise unittest.SkipTest(f"real test data {path} is absent (expected ../shared/data beside the repo)")
    return path
