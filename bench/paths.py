"""Where the benches find the repository and the shared data: ../shared/data beside it, or $T5_SHARED_DATA (the GPU
check carries a copy of what it needs and points there). A bench run as a script puts ROOT on sys.path first."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("T5_SHARED_DATA", ROOT.parent / "shared" / "data"))
