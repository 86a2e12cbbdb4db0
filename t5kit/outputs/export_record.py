"""A CTranslate2 export folder written with its record: what it was made from, so that a stale export is never used
(model/ctranslate2_export.py reads it back).

    folder = export_record.build_export(model_dir, out, "float32", check=probe)  # export_t5.py

export_record.json holds the source folder, the sha256 of the source's weights (model*.safetensors, in name order)
and of the export's model.bin, the quantization, the probe check's agreement and the versions. A run folder's
export is RUN/ctranslate2/; predict_t5.py uses it only when the source sha256 in its record is the run's weights'
today (a re-trained or re-merged run makes it stale) and its weights are the ones the record names.
"""
import logging
import shutil
import tempfile
from pathlib import Path

from t5kit.errors import UsageError
from t5kit.model import ctranslate2_backend
from t5kit.model.ctranslate2_export import EXPORT_DIR, RECORD_FILE, export_sha256, weights_sha256
from t5kit.outputs import save_failures
from t5kit.outputs.atomic_files import publish_folder, write_json
from t5kit.outputs.run_folder import MODEL_CARD_FILE
from t5kit.outputs.run_record import package_versions

logger = logging.getLogger(__name__)

VERSIONED = ("ctranslate2", "transformers", "torch")
QUANTIZED_BYTES = {"float32": 4, "bfloat16": 2, "int8": 1, "int8_float32": 1}  # bytes a weight takes in model.bin


def default_output_dir(model_dir):
    """RUN/ctranslate2 for a local model folder; None for a hub name (--output_dir is then needed)."""
    return Path(model_dir) / EXPORT_DIR if Path(model_dir).is_dir() else None


def check_output_dir(out, overwrite) -> Path:
    out = Path(out)
    if out.exists() and not overwrite:
        raise UsageError(f"--output_dir {out} exists; pass --overwrite_output_dir true to replace it, or choose "
                         "another folder")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--output_dir {out} is a file; name a folder")
    return out


def build_export(model_dir, out, quantization, check=None, overwrite=False) -> Path:
    """Converts model_dir into a temporary folder beside `out`, copies the model card, runs check(folder) (the
    probe: its dict goes into the record), writes the record and publishes the folder as `out` in one rename.
    A crash leaves `out` as it was, the temporary folder removed; a disk that refuses the writes is one error line."""
    out = check_output_dir(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    with save_failures.refusing_failed_writes("--output_dir", out, "the CTranslate2 export",
                                              lambda: export_bytes(model_dir, quantization),
                                              cleanup=lambda: shutil.rmtree(staging, ignore_errors=True),
                                              rerun="rerun export_t5.py"):
        ctranslate2_backend.convert(model_dir, staging, quantization)
        if (Path(model_dir) / MODEL_CARD_FILE).is_file():  # the task predict_t5.py reads from the card
            shutil.copy2(Path(model_dir) / MODEL_CARD_FILE, staging / MODEL_CARD_FILE)
        probe = check(staging) if check else None
        write_json(staging / RECORD_FILE, {
            "source": str(Path(model_dir).resolve()) if Path(model_dir).exists() else str(model_dir),
            "source_weights_sha256": weights_sha256(model_dir) if Path(model_dir).is_dir() else None,
            "export_sha256": export_sha256(staging), "quantization": quantization, "probe": probe,
            "versions": package_versions(VERSIONED)})
        publish_folder(staging, out)
    return out


def export_bytes(model_dir, quantization):
    """About what an export takes: the source's weights (float32 as saved) scaled to the export's weight type."""
    weights = sum(path.stat().st_size for path in Path(model_dir).glob("model*.safetensors"))
    return weights * QUANTIZED_BYTES.get(quantization, 4) // 4


