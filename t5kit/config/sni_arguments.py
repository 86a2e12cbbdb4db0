"""The --sni_* flags of fine_tune_t5.py --benchmark sni: how Super-NaturalInstructions tasks are read and put in the
Tk-Instruct format (t5kit/data/sni.py). Defaults are nanoT5's fine-tuning settings (PiotrNawrot/nanoT5,
nanoT5/configs/task/ft.yaml), which are Tk-Instruct's (yizhongw/Tk-Instruct, scripts/train_tk_instruct.sh)."""
import dataclasses
from dataclasses import dataclass, field

from constants import SNI_METRICS
from t5kit.errors import UsageError
from t5kit.specs import SNISpec

SNI_BENCHMARK = "sni"  # constants.DATASET_VALS["sni"]: its one task, "sni", is the whole benchmark
SNI_SOURCE_LENGTH = 1024  # nanoT5 ft.yaml data.max_seq_len: --max_source_length of --benchmark sni when unset


@dataclass
class SNIArguments:
    sni_split_dir: str = field(default=None, metadata={
        "help": "--benchmark sni: the folder holding train_tasks.txt and test_tasks.txt (nanoT5's data.data_dir). "
                "Unset: DATA_DIR/splits/default, the English track."})
    sni_max_num_instances_per_task: int = field(default=100, metadata={
        "help": "--benchmark sni: instances kept per training task, a random draw from --seed (nanoT5's "
                "data.max_num_instances_per_task). -1: all."})
    sni_max_num_instances_per_eval_task: int = field(default=100, metadata={
        "help": "--benchmark sni: instances kept per test task, from its first 100 (the ones the benchmark "
                "evaluates). -1: all 100."})
    sni_add_task_name: bool = field(default=False, metadata={
        "help": "--benchmark sni: start each input with the task's name (Tk-Instruct's add_task_name)."})
    sni_add_task_definition: bool = field(default=True, metadata={
        "help": "--benchmark sni: put the task's definition first (\"Definition: ...\")."})
    sni_num_pos_examples: int = field(default=2, metadata={
        "help": "--benchmark sni: positive examples shown before the instance, while they fit --max_source_length."})
    sni_num_neg_examples: int = field(default=0, metadata={
        "help": "--benchmark sni: negative examples shown after the positive ones, while they fit."})
    sni_add_explanation: bool = field(default=False, metadata={
        "help": "--benchmark sni: add each example's explanation."})
    sni_english_only: bool = field(default=True, metadata={
        "help": "--benchmark sni: leave out tasks whose input or output language is not English only (the English "
                "track as natural-instructions' splits/README.md defines it). false: every task the split files "
                "list, as nanoT5 reads them."})
    sni_metric: str = field(default="official", metadata={
        "help": "--benchmark sni: how predictions are scored. official: the benchmark's evaluation "
                "(natural-instructions eval/automatic/evaluation.py): exact match and Rouge-L, each the best over "
                "all of an instance's outputs. nanot5: what nanoT5 reports and its published Rouge-L figures are "
                "(40.7 for its 16-hour model): Rouge-L against one drawn output, round-tripped through the "
                "tokenizer and cut to --max_target_length, scored as evaluate's rouge with use_stemmer=True. Compare "
                "with nanoT5's figures under nanot5 only.", "choices": SNI_METRICS})

    def sni_spec(self) -> SNISpec:
        """The --sni_* flags as data/sni.py reads them."""
        return SNISpec(**{f.name.removeprefix("sni_"): getattr(self, f.name) for f in dataclasses.fields(SNIArguments)})

    def check_sni_flags(self):
        for name in ("sni_max_num_instances_per_task", "sni_max_num_instances_per_eval_task"):
            if getattr(self, name) < -1 or getattr(self, name) == 0:
                raise UsageError(f"--{name}={getattr(self, name)} must be >= 1, or -1 for all instances")
        for name in ("sni_num_pos_examples", "sni_num_neg_examples"):
            if getattr(self, name) < 0:
                raise UsageError(f"--{name}={getattr(self, name)} must be >= 0")
