"""export_t5.py's flags: the model to export, the format and precision, where the export goes, the probe check.
Everything here is checked before anything is converted; a refused export writes nothing."""
from dataclasses import dataclass, field
from pathlib import Path

from t5kit.config.arguments import check_choices, check_positive
from t5kit.errors import UsageError

EXPORT_FORMATS = ("ctranslate2",)
QUANTIZATIONS = ("float32", "int8", "int8_float32", "bfloat16")  # CTranslate2 weight types export_t5.py offers
BACKENDS = ("torch", "ctranslate2")


@dataclass
class ExportArguments:
    model_name_or_path: str = field(default=None, metadata={
        "help": "Required. A saved T5/mT5/UMT5 model: a run's output folder (pre-trained or fine-tuned), a LoRA run's "
                "merged/ folder (--merge_adapters true), or a hub name."})
    format: str = field(default="ctranslate2", metadata={
        "help": "The export format: ctranslate2 (C++ inference engine; predict_t5.py --backend ctranslate2).",
        "choices": EXPORT_FORMATS})
    quantization: str = field(default="float32", metadata={
        "help": "Weight type of the export: float32 (predictions identical to the torch model's), int8, "
                "int8_float32 (int8 weights, float32 activations), bfloat16 (a GPU: CTranslate2 4.x computes none on a CPU).",
        "choices": QUANTIZATIONS})
    output_dir: str = field(default=None, metadata={
        "help": "Where the export goes. Unset: MODEL/ctranslate2 for a local model folder (predict_t5.py finds it "
                "there); required for a hub name. An existing folder is refused without --overwrite."})
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing --output_dir (atomically)."})
    probe_file: str = field(default=None, metadata={
        "help": "Inputs the export is checked on (read as predict_t5.py reads --input_file, in the model card's task "
                "format). Unset: a few built-in sentences, fed as they are."})
    probe_examples: int = field(default=16, metadata={
        "help": "How many probe inputs both the torch model and the export decode greedily: fp32 must agree on "
                "all of them (a difference is reported); a quantized export reports its agreement."})
    max_new_tokens: int = field(default=16, metadata={"help": "Tokens each probe input generates at most."})
    push_to_hub: bool = field(default=False, metadata={
        "help": "Upload the export, once checked and saved, as ctranslate2/ into --hub_model_id (the token from "
                "HF_TOKEN); a failed upload is one error line and the export stays saved."})
    hub_model_id: str = field(default=None, metadata={
        "help": "The hub repo the export goes to with --push_to_hub (a run's own repo: beside its model)."})
    hub_private_repo: bool = field(default=None, metadata={"help": "Create the repo private if it does not exist."})

    def __post_init__(self):
        check_choices(self)
        if not self.model_name_or_path:
            raise UsageError("--model_name_or_path is required; see --help")
        check_positive("probe_examples", self.probe_examples)
        check_positive("max_new_tokens", self.max_new_tokens)
        if self.probe_file and not Path(self.probe_file).is_file():
            raise UsageError(f"--probe_file {self.probe_file} not found; check the path")
        if self.push_to_hub and not self.hub_model_id:
            raise UsageError("--push_to_hub true needs --hub_model_id NAME (the repo is named, never guessed)")
        if self.output_dir is None and not Path(self.model_name_or_path).is_dir():
            raise UsageError(f"--model_name_or_path {self.model_name_or_path} is not a local folder: name "
                             f"--output_dir for its export")
