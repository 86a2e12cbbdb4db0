"""export_t5.py's flags: the model to export, the format and precision, where the export goes, the probe check.
Everything here is checked before anything is converted; a refused export writes nothing."""
from dataclasses import dataclass, field
from pathlib import Path

from t5kit.config.arguments import (
    HubArguments,
    ModelPathArguments,
    check_positive,
    looks_like_a_folder,
)
from t5kit.config.output_arguments import OutputDirArguments, OverwriteOutputDirArguments
from t5kit.config.parsing import check_choices
from t5kit.errors import UsageError

EXPORT_FORMATS = ("ctranslate2",)
QUANTIZATIONS = ("float32", "int8", "int8_float32", "bfloat16")  # CTranslate2 weight types export_t5.py offers


@dataclass
class ExportArguments(HubArguments, OverwriteOutputDirArguments, OutputDirArguments, ModelPathArguments):
    """The format, precision and probe check of an export; the model, output folder and hub flags come from the
    shared groups (a T5/mT5/UMT5 model: CTranslate2 converts no LongT5)."""

    format: str = field(default="ctranslate2", metadata={
        "help": "The export format: ctranslate2 (C++ inference engine; predict_t5.py --backend ctranslate2).",
        "choices": EXPORT_FORMATS})
    quantization: str = field(default="float32", metadata={
        "help": "Weight type of the export: float32 (predictions identical to the torch model's), int8, "
                "int8_float32 (int8 weights, float32 activations), bfloat16 (a GPU: CTranslate2 4.x computes none on a "
                "CPU).",
        "choices": QUANTIZATIONS})
    probe_file: str = field(default=None, metadata={
        "help": "Inputs the export is checked on (read as predict_t5.py reads --input_file, in the model card's task "
                "format). Unset: a few built-in sentences, fed as they are."})
    probe_examples: int = field(default=16, metadata={
        "help": "How many probe inputs both the torch model and the export decode greedily: fp32 must agree on "
                "all of them (a difference is reported); a quantized export reports its agreement."})
    probe_max_new_tokens: int = field(default=16, metadata={"help": "Tokens each probe input generates at most."})

    def __post_init__(self):
        check_choices(self)
        if not self.model_name_or_path:
            raise UsageError("--model_name_or_path is required; see --help")
        check_positive("probe_examples", self.probe_examples)
        check_positive("probe_max_new_tokens", self.probe_max_new_tokens)
        if self.probe_file and not Path(self.probe_file).is_file():
            raise UsageError(f"--probe_file {self.probe_file} not found; check the path")
        if self.push_to_hub and not self.hub_model_id:
            raise UsageError("--push_to_hub true needs --hub_model_id NAME (the repo is named, never guessed)")
        # (a missing local folder is refused as such when the model is loaded, before the output folder is used)
        if self.output_dir is None and not Path(self.model_name_or_path).is_dir() and \
                not looks_like_a_folder(self.model_name_or_path):
            raise UsageError(f"--model_name_or_path {self.model_name_or_path} is not a local folder: name "
                             f"--output_dir for its export")
