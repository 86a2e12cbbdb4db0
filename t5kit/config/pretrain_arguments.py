"""The flags pre_train_t5.py adds to the shared ones: the corpus, span corruption and the objective (span
corruption, UL2's mixture of denoisers, prefix-LM)."""
import codecs
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

import yaml

import constants
from t5kit.config.arguments import check_data_files, check_positive
from t5kit.config.mapping_file import yaml_error_where
from t5kit.config.parsing import check_choices
from t5kit.errors import UsageError, did_you_mean
from t5kit.specs import FILE_BUILDERS, CorpusSpec, ObjectiveSpec, check_span_settings

SAMPLE_BY_CHOICES = ("paragraph", "line", "document")
DOCUMENT_SEPARATORS = ("eos", "none")


@dataclass
class PretrainDataArguments:
    dataset_name: str = field(default=None, metadata={
        "help": "Hub corpus name, e.g. allenai/c4 (with --dataset_config_name en). Or give --train_files."})
    dataset_config_name: str = field(default=None, metadata={"help": "Hub corpus configuration, e.g. en for C4."})
    train_files: list[str] = field(default=None, metadata={
        "help": "Local training files (.txt/.raw, .json/.jsonl, .csv/.tsv, .parquet), all of one type."})
    validation_files: list[str] = field(default=None, metadata={
        "help": "Local validation files. Unset: --validation_split_percentage of the training documents."})
    validation_split_percentage: float = field(default=5.0, metadata={
        "help": "Percent of training documents held out for validation when there is no validation split."})
    text_column: str = field(default="text", metadata={"help": "Column holding the raw text (json/csv/parquet/hub)."})
    sample_by: str = field(default="paragraph", metadata={
        "help": "How a .txt file splits into documents: paragraph (blank-line separated), line, or document "
                "(whole file). Documents are then concatenated into windows (see --document_separator).",
        "choices": SAMPLE_BY_CHOICES})
    document_separator: str = field(default="eos", metadata={
        "help": "What goes between documents when they are concatenated into windows: eos (EOS after each "
                "document, as HF's run_t5_mlm_flax.py tokenises) or none (documents joined directly, as T5's C4 "
                "span-corruption task does: reduce_concat_tokens, EOS only at the end of each window).",
        "choices": DOCUMENT_SEPARATORS})
    encoding: str = field(default="utf-8", metadata={
        "help": "Text encoding of local corpus files (e.g. latin-1: Project Gutenberg ships some books so)."})
    streaming: bool = field(default=False, metadata={
        "help": "Stream the corpus instead of downloading/tokenising it all first (needs --max_steps > 0)."})
    max_train_samples: int = field(default=None, metadata={"help": "Keep only this many training documents (debug)."})
    max_eval_samples: int = field(default=None, metadata={
        "help": "Keep only this many validation windows. With --streaming and no validation split, this many "
                "windows are held out from the start of the stream."})
    preprocessing_num_workers: int = field(default=None, metadata={"help": "Processes for tokenisation."})
    overwrite_cache: bool = field(default=False, metadata={"help": "Re-tokenise even if a cached result exists."})

    def corpus_spec(self, seed=42, cache_dir=None, trust_remote_code=False) -> CorpusSpec:
        """The corpus's spec (data/corpus.py reads it): these flags, the run's seed (the held-out split's draw), the
        hub's cache and trust."""
        return CorpusSpec(
            dataset_name=self.dataset_name, dataset_config_name=self.dataset_config_name,
            train_files=tuple(self.train_files or ()), validation_files=tuple(self.validation_files or ()),
            validation_split_percentage=self.validation_split_percentage, text_column=self.text_column,
            sample_by=self.sample_by, document_separator=self.document_separator, encoding=self.encoding,
            streaming=self.streaming, max_train_samples=self.max_train_samples, max_eval_samples=self.max_eval_samples,
            preprocessing_num_workers=self.preprocessing_num_workers, overwrite_cache=self.overwrite_cache, seed=seed,
            cache_dir=cache_dir, trust_remote_code=trust_remote_code)

    def __post_init__(self):
        check_choices(self)
        if self.dataset_name is None and not self.train_files:
            raise UsageError("no training data: pass --train_files FILE [FILE ...] or --dataset_name NAME")
        if self.dataset_name is not None and self.train_files:
            raise UsageError("--dataset_name and --train_files both set; pass one source of training data")
        check_data_files("--train_files", self.train_files)
        check_data_files("--validation_files", self.validation_files)
        for group in (self.train_files, self.validation_files):
            if group and len({FILE_BUILDERS[Path(p).suffix.lower()] for p in group}) > 1:
                raise UsageError(f"files {group} mix types; give files of one type per flag")
        overlap = {Path(p).resolve() for p in self.train_files or []} & \
                  {Path(p).resolve() for p in self.validation_files or []}
        if overlap:
            raise UsageError(f"--validation_files {sorted(map(str, overlap))[0]} is also a training file; "
                             "validation must be held-out data")
        check_encoding(self.encoding)
        if not 0 < self.validation_split_percentage < 100:
            raise UsageError(f"--validation_split_percentage={self.validation_split_percentage} must be in (0, 100)")
        for flag in ("max_train_samples", "max_eval_samples"):
            check_positive(flag, getattr(self, flag))
        if self.preprocessing_num_workers is not None and self.preprocessing_num_workers < 1:
            raise UsageError(f"--preprocessing_num_workers={self.preprocessing_num_workers} must be >= 1 (leave it "
                             "unset to tokenise in this process)")


def check_encoding(encoding):
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise UsageError(f"--encoding {encoding!r} is not a text encoding Python knows; e.g. utf-8 or "
                         "latin-1") from None


@dataclass
class SpanCorruptionArguments:
    input_length: int = field(default=constants.INPUT_LENGTH, metadata={
        "help": "Encoder tokens per example after corruption (T5: 512). The raw window is longer: "
                "tokens_length from compute_input_and_target_lengths."})
    noise_density: float = field(default=constants.NOISE_DENSITY, metadata={
        "help": "Fraction of tokens corrupted, in (0, 1) (T5 paper: 0.15)."})
    mean_noise_span_length: float = field(default=constants.MEAN_NOISE_SPAN_LENGTH, metadata={
        "help": "Mean length of a corrupted span, >= 1 (T5 paper: 3)."})

    def __post_init__(self):
        check_span_settings(self.noise_density, self.mean_noise_span_length, self.input_length)


MIN_PACKING_WINDOW_INPUTS = constants.MIN_INPUT_LENGTH  # as --input_length: span corruption needs it
DENOISER_KEYS = ("paradigm", "mean_noise_span_length", "noise_density", "proportion", "mode_token")
PROPORTION_TOLERANCE = 1e-6  # room for proportions written as rounded decimals (6 x 0.1333333 + 0.2)


@dataclass
class ObjectiveArguments:
    objective: str = field(default="span_corruption", metadata={
        "help": "Pre-training objective: span_corruption (T5: --noise_density, --mean_noise_span_length), ul2 "
                "(UL2's mixture of denoisers, Tay et al. 2022; --denoisers) or prefix_lm (T5's prefix-LM alone: "
                "the window split at a uniform point, inputs the prefix, targets the rest). See docs/objectives.md.",
        "choices": constants.OBJECTIVES})
    denoisers: list[dict] | str | None = field(default=None, metadata={
        "help": "ul2/prefix_lm: a YAML list of mappings, one per denoiser: paradigm (R, X: span corruption; S: "
                "prefix-LM), noise_density, mean_noise_span_length (R/X), proportion (the mixture's proportions sum "
                "to 1), mode_token (default [NLU]/[NLG]/[S2S] by paradigm; null for none). Unset: UL2's 7 "
                "denoisers (ul2) or one S-denoiser with r=0.5 and no mode token (prefix_lm)."})
    init_embeddings: str = field(default="random", metadata={
        "help": "Starting embeddings of a new model: random (T5's init) or word_vectors (before training, word "
                "vectors counted from the training windows: PPMI + SVD, model/word_vectors.py; seconds for 3 M "
                "ids; the CPU recipe of docs/quality.md). Not with --model_name_or_path or --streaming.",
        "choices": ("random", "word_vectors")})
    packing_window_input_length: int = field(default=None, metadata={
        "help": "--packing: the inputs a window may take under any denoiser (paradigm token and EOS included); the "
                "window length follows from it as from --input_length without packing. Unset: a tenth of "
                "--input_length, at least 8 (51 at 512: windows of 50 ids for UL2's mixture), so that under 5 per "
                "cent of a row is padding; longer windows keep longer contexts and pad more (docs/objectives.md, "
                "Packing)."})

    def __post_init__(self):
        check_choices(self)
        if isinstance(self.denoisers, str):
            self.denoisers = parse_denoisers_text(self.denoisers)
        if self.objective == "span_corruption":
            if self.denoisers is not None:
                raise UsageError("--denoisers applies to --objective ul2 or prefix_lm; drop it, or pass "
                                 "--objective ul2")
            return
        if self.denoisers is None:
            self.denoisers = constants.UL2_DENOISERS if self.objective == "ul2" else constants.PREFIX_LM_DENOISERS
        self.denoisers = check_denoisers(self.denoisers, self.objective)


def parse_denoisers_text(text):
    """--denoisers on the command line: the YAML list as one string."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise UsageError(f"--denoisers is not valid YAML: {yaml_error_where(err)}") from None


def check_denoisers(denoisers, objective):
    """Filled copies of the denoiser mappings (every key set), or UsageError naming the item and the fix."""
    if not isinstance(denoisers, (list, tuple)) or not denoisers:
        raise UsageError(f"--denoisers must be a non-empty YAML list of mappings (paradigm, noise_density, "
                         f"mean_noise_span_length, proportion, mode_token), got {denoisers!r}")
    filled = [check_denoiser(f"--denoisers item {number}", item) for number, item in enumerate(denoisers, 1)]
    if objective == "prefix_lm" and any(d["paradigm"] != "S" for d in filled):
        raise UsageError("--objective prefix_lm takes only S denoisers (paradigm: S); use --objective ul2 to mix in "
                         "R and X denoisers")
    total = math.fsum(d["proportion"] for d in filled)
    if abs(total - 1) > PROPORTION_TOLERANCE:
        raise UsageError(f"--denoisers proportions sum to {total:g}, not 1; make them add up to 1 (UL2's default "
                         f"gives S {constants.UL2_S_PROPORTION} and each R/X denoiser 2/15)")
    return filled


def check_denoiser(where, item):
    if not isinstance(item, dict):
        raise UsageError(f"{where}: expected a mapping with keys {', '.join(DENOISER_KEYS)}, got {item!r}")
    for key in item:
        if key not in DENOISER_KEYS:
            raise UsageError(f"{where}: unknown denoiser setting {key!r}{did_you_mean(key, DENOISER_KEYS)}")
    paradigm = item.get("paradigm")
    if paradigm not in constants.UL2_PARADIGMS:
        raise UsageError(f"{where}: paradigm {paradigm!r} is not a UL2 paradigm"
                         f"{did_you_mean(paradigm, constants.UL2_PARADIGMS)} (R, X: span corruption; S: prefix-LM)")
    density = number_setting(where, item, "noise_density")
    prefix_lm = paradigm == "S"
    span = None
    if prefix_lm:
        if item.get("mean_noise_span_length") is not None:
            raise UsageError(f"{where}: an S-denoiser has no mean_noise_span_length (its target is the rest of the "
                             "window); drop it")
    else:
        span = number_setting(where, item, "mean_noise_span_length")
    check_span_settings(density, span, denoiser=where, prefix_lm=prefix_lm)
    proportion = number_setting(where, item, "proportion")
    if not 0 < proportion <= 1:
        raise UsageError(f"{where}: proportion={proportion} must be in (0, 1]")
    mode_token = item.get("mode_token", constants.UL2_MODE_TOKENS[paradigm])
    if mode_token is not None and (not isinstance(mode_token, str) or not mode_token or mode_token != "".join(
            mode_token.split())):
        raise UsageError(f"{where}: mode_token {mode_token!r} must be a non-empty string without spaces (or null "
                         "for none)")
    return {"paradigm": paradigm, "mean_noise_span_length": span, "noise_density": density,
            "proportion": proportion, "mode_token": mode_token}


def number_setting(where, item, key):
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UsageError(f"{where}: {key} must be a number, got {value!r}")
    return float(value)


def check_init_embeddings(model_args, data_args, span_args, objective_args, training_args):
    """Word vectors start a new model from a corpus held in full; refused before anything is loaded otherwise."""
    if objective_args.init_embeddings != "word_vectors":
        return
    if model_args.model_name_or_path:
        raise UsageError("--init_embeddings word_vectors starts a new model; drop it, or drop --model_name_or_path "
                         "to start from random init")
    if data_args.streaming:
        raise UsageError("--init_embeddings word_vectors counts the whole training corpus; drop --streaming, or "
                         "use --init_embeddings random")


def check_streaming(model_args, data_args, span_args, objective_args, training_args):
    """--streaming against the training flags: a stream has no length, and its resume position is kept in the
    main process."""
    if not data_args.streaming:
        return
    if training_args.dataloader_num_workers:
        raise UsageError("--streaming needs --dataloader_num_workers 0: the stream position that makes resume "
                         "exact is kept in the main process")
    if training_args.max_steps <= 0:
        raise UsageError("--streaming needs --max_steps N: a stream has no length, so epochs cannot be counted")


def check_packing(model_args, data_args, span_args, objective_args, training_args):
    """--packing (a training flag, T5TrainingArguments) against the pre-training groups: refused with span corruption
    (nothing to pack) and --streaming (the packing sampler places every window of an epoch before the first batch,
    which a stream does not have); --packing_window_input_length only with it, and within the row."""
    packing = training_args.packing
    if objective_args.packing_window_input_length is not None and not packing:
        raise UsageError("--packing_window_input_length applies to --packing true; drop it, or pass --packing true")
    if not packing:
        return
    if objective_args.objective == "span_corruption":
        raise UsageError("--packing true with --objective span_corruption: span corruption is already exact (every "
                         "window gives the same input and target lengths, so rows hold no padding to fill); drop "
                         "--packing, or pass --objective ul2 or prefix_lm")
    if data_args.streaming:
        raise UsageError("--packing true with --streaming: packing places a whole epoch's windows before its first "
                         "batch, which a stream cannot give; drop --streaming (the corpus is tokenised once and "
                         "cached) or --packing")
    window = objective_args.packing_window_input_length
    if window is not None and not MIN_PACKING_WINDOW_INPUTS <= window <= span_args.input_length:
        raise UsageError(f"--packing_window_input_length={window} must be in [{MIN_PACKING_WINDOW_INPUTS}, "
                         f"--input_length={span_args.input_length}]")


def objective_spec(span_args, objective_args, packing) -> ObjectiveSpec:
    """The objective's spec (data/objectives.py builds it): --objective and its settings, --input_length, --packing."""
    return ObjectiveSpec(name=objective_args.objective, input_length=span_args.input_length,
                         noise_density=span_args.noise_density,
                         mean_noise_span_length=span_args.mean_noise_span_length,
                         denoisers=tuple(objective_args.denoisers or ()), packed=bool(packing),
                         packing_window_input_length=objective_args.packing_window_input_length)
