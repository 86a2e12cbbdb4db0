"""A CTranslate2 export folder read back: its record (what it was made from) checked, so that a stale export is
never used, and a Translator opened on it or on a fresh conversion.

    export = ctranslate2_export.usable_export(run_dir, "default")   # a fresh RUN/ctranslate2, else None
    ctranslate2_export.check_export(export_dir, flag="--model_name_or_path")   # an export passed directly
    translator = ctranslate2_export.open_translator(model_dir, "default", threads=2)   # predict_t5.py's backend

export_record.json (outputs/export_record.py writes it) holds the source folder, the sha256 of the source's weights
(model*.safetensors, in name order) and of the export's model.bin, the quantization, the probe check's agreement and
the versions. A run folder's export is RUN/ctranslate2/; it is used only when the source sha256 in its record is the
run's weights' today (a re-trained or re-merged run makes it stale) and its weights are the ones the record names.
"""
import json
import logging
import tempfile
from pathlib import Path

from t5kit.digests import file_sha256
from t5kit.errors import UsageError
from t5kit.model import ctranslate2_backend

logger = logging.getLogger(__name__)

EXPORT_DIR = "ctranslate2"  # RUN/ctranslate2: a run folder's export
RECORD_FILE = "export_record.json"


def weights_sha256(model_dir) -> str:
    files = sorted(Path(model_dir).glob("model*.safetensors"))
    if not files:
        raise UsageError(f"{model_dir} holds no model*.safetensors weights; pass a saved model folder")
    return file_sha256(*files)


def export_sha256(export_dir) -> str:
    return file_sha256(Path(export_dir) / ctranslate2_backend.TRANSLATOR_CONFIG)


def read_record(export_dir):
    path = Path(export_dir) / RECORD_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def check_export(export_dir, flag="--model_name_or_path") -> dict:
    """The record of an export passed directly, refusing one whose weights are not the ones it records, or whose
    source folder (where it still exists) now holds other weights."""
    record = read_record(export_dir)
    fix = (f"re-export it: python export_t5.py --model_name_or_path SOURCE --output_dir {export_dir} "
           "--overwrite_output_dir true")
    if record is None:
        raise UsageError(f"{flag} {export_dir} is a CTranslate2 folder without {RECORD_FILE}, so what it was made "
                         f"from is unknown; {fix}")
    if export_sha256(export_dir) != record.get("export_sha256"):
        raise UsageError(f"{flag} {export_dir}: its model.bin is not the one {RECORD_FILE} records; {fix}")
    source = Path(record.get("source") or "")
    if record.get("source_weights_sha256") and source.is_dir() and list(source.glob("model*.safetensors")) and \
            weights_sha256(source) != record["source_weights_sha256"]:
        raise UsageError(f"{flag} {export_dir} is stale: {source} now holds other weights than it was exported "
                         f"from; {fix.replace('SOURCE', str(source))}")
    return record


def usable_export(model_dir, compute_type):
    """RUN/ctranslate2 when its record names this run's weights (sha256) and it can give `compute_type` (a float32
    export gives any; a quantized one only its own or "default"), else None (stale, absent, or other weights)."""
    folder = Path(model_dir) / EXPORT_DIR
    record = read_record(folder) if ctranslate2_backend.is_export(folder) else None
    if record is None:
        return None
    fresh = (record.get("source_weights_sha256") == weights_sha256(model_dir)
             and record.get("export_sha256") == export_sha256(folder))
    precise = record.get("quantization") in ("float32", compute_type) or compute_type == "default"
    if not fresh:
        logger.warning("%s is stale (the run's weights changed since it was exported): converting afresh; "
                       "python export_t5.py --model_name_or_path %s --overwrite_output_dir true updates it", folder,
                       model_dir)
    return folder if fresh and precise else None


def open_translator(model_dir, compute_type="default", threads=0, use_cpu=False, flag="--model_name_or_path"):
    """predict_t5.py --backend ctranslate2: (Translator, what it runs). An export folder passed directly is checked
    against its record; a model folder's RUN/ctranslate2 is used when fresh (usable_export); otherwise the model
    is converted into a temporary folder, loaded, and the folder deleted (predict_t5.py writes only its output
    file; export_t5.py saves an export for next time)."""
    device = ctranslate2_backend.default_device(use_cpu)
    ctranslate2_backend.check_compute_type(compute_type, device, flag="--compute_type")
    if ctranslate2_backend.is_export(model_dir):
        check_export(model_dir, flag)
        folder, made = Path(model_dir), "the export itself"
    else:
        ctranslate2_backend.check_convertible(model_dir, flag)
        folder = usable_export(model_dir, compute_type) if Path(model_dir).is_dir() else None
        made = f"its export {folder}" if folder else None
    if folder is not None:
        translator = ctranslate2_backend.load_translator(folder, device, compute_type, threads)
    else:
        with tempfile.TemporaryDirectory(prefix="t5kit-ctranslate2-") as staging:
            ctranslate2_backend.convert(model_dir, staging, "float32")
            translator = ctranslate2_backend.load_translator(staging, device, compute_type, threads)
        made = "converted now (float32; export_t5.py keeps an export for next time)"
    logger.info("CTranslate2 on %s (%s, compute type %s): %s, %s", device, translator.compute_type, compute_type,
                model_dir, made)
    return translator
