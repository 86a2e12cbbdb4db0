"""A CTranslate2 export folder and its record: what it was made from, so that a stale export is never used.

    folder = export_record.build_export(model_dir, out, "float32", check=probe)  # export_t5.py
    export = export_record.usable_export(run_dir, "default")   # predict_t5.py: a fresh RUN/ctranslate2, else None
    export_record.check_export(export_dir, flag="--model_name_or_path")           # an export passed directly
    translator = export_record.open_translator(model_dir, "default", threads=2)  # predict_t5.py --backend

export_record.json holds the source folder, the sha256 of the source's weights (model*.safetensors, in name order)
and of the export's model.bin, the quantization, the probe check's agreement and the versions. A run folder's
export is RUN/ctranslate2/; predict_t5.py uses it only when the source sha256 in its record is the run's weights'
today (a re-trained or re-merged run makes it stale) and its weights are the ones the record names.
"""
import json
import logging
import shutil
import tempfile
from pathlib import Path

from t5kit.errors import UsageError
from t5kit.model import ctranslate2_backend
from t5kit.outputs.atomic_files import file_sha256, publish_folder, write_json
from t5kit.outputs.run_folder import MODEL_CARD_FILE
from t5kit.outputs.run_record import package_versions

logger = logging.getLogger(__name__)

EXPORT_DIR = "ctranslate2"  # RUN/ctranslate2: a run folder's export
RECORD_FILE = "export_record.json"
VERSIONED = ("ctranslate2", "transformers", "torch")
def weights_sha256(model_dir) -> str:
    files = sorted(Path(model_dir).glob("model*.safetensors"))
    if not files:
        raise UsageError(f"{model_dir} holds no model*.safetensors weights; pass a saved model folder")
    return file_sha256(*files)


def export_sha256(export_dir) -> str:
    return file_sha256(Path(export_dir) / ctranslate2_backend.TRANSLATOR_CONFIG)


def default_output_dir(model_dir):
    """RUN/ctranslate2 for a local model folder; None for a hub name (--output_dir is then needed)."""
    return Path(model_dir) / EXPORT_DIR if Path(model_dir).is_dir() else None


def read_record(export_dir):
    path = Path(export_dir) / RECORD_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def check_output_dir(out, overwrite) -> Path:
    out = Path(out)
    if out.exists() and not overwrite:
        raise UsageError(f"--output_dir {out} exists; pass --overwrite true to replace it, or choose another folder")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--output_dir {out} is a file; name a folder")
    return out


def build_export(model_dir, out, quantization, check=None, overwrite=False) -> Path:
    """Converts model_dir into a temporary folder beside `out`, copies the model card, runs check(folder) (the
    probe: its dict goes into the record), writes the record and publishes the folder as `out` in one rename.
    A crash leaves `out` as it was."""
    out = check_output_dir(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
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
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def check_export(export_dir, flag="--model_name_or_path") -> dict:
    """The record of an export passed directly, refusing one whose weights are not the ones it records, or whose
    source folder (where it still exists) now holds other weights."""
    record = read_record(export_dir)
    fix = f"re-export it: python export_t5.py --model_name_or_path SOURCE --output_dir {export_dir} --overwrite true"
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
                       "python export_t5.py --model_name_or_path %s --overwrite true updates it", folder, model_dir)
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
