"""Where the benches find the repository and the data: $T5_DATA_DIR (relative to the repository root; data/ after
`make data`), else ../shared/data beside it (the GPU check carries a copy of what it needs and points there). A bench
run as a script puts ROOT on sys.path first."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT / (os.environ.get("T5_DATA_DIR") or ROOT.parent / "shared" / "data")  # an absolute path stays
