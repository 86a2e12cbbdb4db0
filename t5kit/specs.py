"""Small typed specs: the values a data-layer builder needs, built from the flags by the config layer
(`PretrainDataArguments.corpus_spec`, `FineTuneDataArguments.task_data`, ...) so that no data function reads a flag
dataclass, and the ranges both layers check them against. Base layer: the config layer builds and checks them, the
data layer takes them (and checks what code builds without the flags), and neither imports the other."""
from dataclasses import dataclass
from typing import Optional

from constants import INPUT_LENGTH, MEAN_NOISE_SPAN_LENGTH, MIN_INPUT_LENGTH, NOISE_DENSITY, UL2_DENOISERS
from t5kit.errors import UsageError

# datasets builder for each local corpus file suffix (".tsv" is csv with a tab delimiter).
FILE_BUILDERS = {".txt": "text", ".raw": "text", ".text": "text", ".json": "json", ".jsonl": "json",
                 ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}


def check_span_settings(noise_density=None, mean_noise_span_length=None, input_length=None, denoiser=None,
                        prefix_lm=False):
    """Refuses span-corruption settings outside their ranges, in one wording wherever they are set: the flags and
    each --denoisers item (config/pretrain_arguments.py), and the collators (data_collator.py, data/ul2.py), which
    code may build without the flags. It lives here, below both layers, because the data layer never imports the
    config layer. A setting left None is not checked. `denoiser` ("--denoisers item 2") names a denoiser's own
    setting; without it the flag is named. An S-denoiser (`prefix_lm`) splits the window once: its density is the
    targets' mean share, at most 0.5 (T5's random_prefix_noise_mask)."""
    def named(setting):
        return f"{denoiser}: {setting}" if denoiser else f"--{setting}"

    if noise_density is not None and prefix_lm and not 0 < noise_density <= 0.5:
        raise UsageError(f"{named('noise_density')}={noise_density} must be in (0, 0.5] for S (T5's "
                         f"random_prefix_noise_mask); UL2's S-denoiser uses {UL2_DENOISERS[-1]['noise_density']}")
    if noise_density is not None and not 0 < noise_density < 1:
        raise UsageError(f"{named('noise_density')}={noise_density} must be in (0, 1); the T5 paper uses "
                         f"{NOISE_DENSITY}")
    if mean_noise_span_length is not None and not mean_noise_span_length >= 1:
        raise UsageError(f"{named('mean_noise_span_length')}={mean_noise_span_length} must be >= 1 (tokens); the T5 "
                         f"paper uses {MEAN_NOISE_SPAN_LENGTH:g}")
    if input_length is not None and not input_length >= MIN_INPUT_LENGTH:
        raise UsageError(f"--input_length={input_length} is too short for span corruption; use >= {MIN_INPUT_LENGTH} "
                         f"(T5: {INPUT_LENGTH})")


@dataclass(frozen=True)
class ObjectiveSpec:
    """A pre-training objective (data/objectives.py): its name (--objective), the row's inputs (--input_length),
    span corruption's settings, a mixture's filled denoisers, and --packing with its window."""

    name: str
    input_length: int
    noise_density: float
    mean_noise_span_length: float
    denoisers: tuple = ()
    packed: bool = False
    packing_window_input_length: Optional[int] = None


@dataclass(frozen=True)
class CorpusSpec:
    """A pre-training corpus (data/corpus.py): where the documents come from, how they are read and split, and how
    many are kept; the flags of the same names (config/pretrain_arguments.py), the run's seed and the hub cache."""

    dataset_name: Optional[str] = None
    dataset_config_name: Optional[str] = None
    train_files: tuple = ()
    validation_files: tuple = ()
    validation_split_percentage: float = 5.0
    text_column: str = "text"
    sample_by: str = "paragraph"
    document_separator: str = "eos"
    encoding: str = "utf-8"
    streaming: bool = False
    max_train_samples: Optional[int] = None
    max_eval_samples: Optional[int] = None
    preprocessing_num_workers: Optional[int] = None
    overwrite_cache: bool = False
    seed: int = 42
    cache_dir: Optional[str] = None
    trust_remote_code: bool = False


@dataclass(frozen=True)
class TaskSelection:
    """Which tasks a fine-tuning run reads (data/task_splits.resolve_run_tasks): registry names or a task declared
    in YAML, the held-out ones, and FLAN's format (the flags of the same names, config/finetune_arguments.py)."""

    benchmark: str = "glue"
    dataset_name: Optional[str] = None
    tasks: tuple = ()  # "benchmark/task" names; empty: dataset_name alone
    eval_tasks: tuple = ()
    custom_task: Optional[dict] = None
    wnli_format: str = "glue"
    instruction_templates: str = "none"
    instruction_options: bool = False
    few_shot: int = 0


@dataclass(frozen=True)
class SNISpec:
    """How Super-NaturalInstructions tasks are read (data/sni.py): the --sni_* flags without their prefix."""

    split_dir: Optional[str] = None
    max_num_instances_per_task: int = 100
    max_num_instances_per_eval_task: int = 100
    add_task_name: bool = False
    add_task_definition: bool = True
    num_pos_examples: int = 2
    num_neg_examples: int = 0
    add_explanation: bool = False
    english_only: bool = True
    metric: str = "official"  # constants.SNI_METRICS


@dataclass(frozen=True)
class TaskDataSpec:
    """Where a fine-tuning run's task rows come from and how many it keeps (data/task_splits.py, task_sources.py,
    sni.py): the data flags of the same names, and the hub cache."""

    data_dir: tuple = ()
    train_file: Optional[str] = None
    validation_file: Optional[str] = None
    test_file: Optional[str] = None
    max_source_length: int = 512
    max_target_length: Optional[int] = None
    max_train_samples: Optional[int] = None
    max_eval_samples: Optional[int] = None
    max_predict_samples: Optional[int] = None
    leaderboard_files: bool = True
    cache_dir: Optional[str] = None
    sni: SNISpec = SNISpec()

    @property
    def local_files(self) -> dict:
        """role -> the local file given for it (None where none is)."""
        return {"train": self.train_file, "eval": self.validation_file, "predict": self.test_file}
