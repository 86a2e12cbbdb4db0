"""Named constants: T5 span-corruption defaults, model size presets and the fine-tuning task registry.

Numbers here come from the T5 paper (Raffel et al., 2020, "Exploring the Limits of Transfer Learning with a
Unified Text-to-Text Transformer") and google-research/text-to-text-transfer-transformer (t5/models/gin/
models/*.gin, t5/data/preprocessors.py); T5 v1.1 shapes from its released_checkpoints.md. The ranges of the
span-corruption settings are checked in t5kit/specs.check_span_settings.
"""
# Span corruption (T5 paper, section 3.3.4: 15 % of tokens corrupted, mean span length 3).
NOISE_DENSITY = 0.15
MEAN_NOISE_SPAN_LENGTH = 3.0
NUM_SENTINELS = 100  # <extra_id_0> .. <extra_id_99>, as in every released T5 vocabulary.
INPUT_LENGTH = 512  # encoder length after corruption used to pre-train the released T5 models.
MIN_INPUT_LENGTH = 8  # shortest --input_length taken: a window of ~8 ids holds about one noise span at T5's density.

# Pre-training objectives (--objective): T5's span corruption, UL2's mixture of denoisers, prefix-LM alone.
OBJECTIVES = ("span_corruption", "ul2", "prefix_lm")
# UL2 (Tay et al. 2022, "UL2: Unifying Language Learning Paradigms", sec. 3.1.2-3.1.3): R-denoisers (regular:
# short spans, 15 % corruption), X-denoisers (extreme: long spans or 50 % corruption), the S-denoiser (sequential:
# prefix-LM). Paradigm tokens (sec. 3.1.4 "mode switching") are prepended to the inputs: [NLU] for R, [NLG] for X,
# [S2S] for S.
UL2_PARADIGMS = ("R", "X", "S")
UL2_MODE_TOKENS = {"R": "[NLU]", "X": "[NLG]", "S": "[S2S]"}
# The S-denoiser's share. The paper's final mixture and the UL2 20B release give S-denoising 20 % of the examples;
# the paper gives no per-denoiser split of the other 80 % that we could verify offline, so the six R/X denoisers
# share it equally (2/15 each). Change `proportion` in --denoisers to follow another reading.
UL2_S_PROPORTION = 0.2
_UL2_SPAN_PROPORTION = (1 - UL2_S_PROPORTION) / 6
# (paradigm, mean span length mu, corruption rate r): sec. 3.1.3's seven denoisers. The S-denoiser's r = 0.25 is the
# expected share of the window in the targets (a random split point, see PREFIX_LM_NOISE_DENSITY).
UL2_DENOISERS = (
    dict(paradigm="R", mean_noise_span_length=3.0, noise_density=0.15, proportion=_UL2_SPAN_PROPORTION),
    dict(paradigm="R", mean_noise_span_length=8.0, noise_density=0.15, proportion=_UL2_SPAN_PROPORTION),
    dict(paradigm="X", mean_noise_span_length=3.0, noise_density=0.5, proportion=_UL2_SPAN_PROPORTION),
    dict(paradigm="X", mean_noise_span_length=8.0, noise_density=0.5, proportion=_UL2_SPAN_PROPORTION),
    dict(paradigm="X", mean_noise_span_length=64.0, noise_density=0.15, proportion=_UL2_SPAN_PROPORTION),
    dict(paradigm="X", mean_noise_span_length=64.0, noise_density=0.5, proportion=_UL2_SPAN_PROPORTION),
    dict(paradigm="S", noise_density=0.25, proportion=UL2_S_PROPORTION),
)
# T5's prefix-LM objective (T5 paper sec. 3.3.1; t5/data/preprocessors.py prefix_lm: random_prefix_noise_mask with
# noise_density 0.5, so the split point is uniform over the window), run alone by --objective prefix_lm, without
# a paradigm token.
PREFIX_LM_NOISE_DENSITY = 0.5
PREFIX_LM_DENOISERS = (dict(paradigm="S", noise_density=PREFIX_LM_NOISE_DENSITY, proportion=1.0, mode_token=None),)

# T5 special-token layout of the SentencePiece vocabulary (t5/data/vocabularies.py).
PAD_ID = 0
EOS_ID = 1
UNK_ID = 2

# Pad the embedding matrix to a multiple of this (32100 tokens -> 32128 in the released checkpoints), so
# matmuls over the vocabulary stay tensor-core aligned.
VOCAB_PAD_MULTIPLE = 128

# Architecture presets for random initialisation (`--model_size`). Keys are T5Config arguments.
_T5_V1_0 = dict(feed_forward_proj="relu", tie_word_embeddings=True)
# T5 v1.1: GEGLU feed-forward and "no parameter sharing between embedding and classifier layer" (its own lm_head,
# no rescaling of the decoder output); model/building.py keeps the head untied, which transformers' T5Config alone
# does not.
_T5_V1_1 = dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)
MODEL_SIZE_PRESETS = {
    # Tiny shapes: "t5-tiny" for unit tests (seconds on CPU), "t5-mini" for the offline quickstart.
    "t5-tiny": dict(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2, **_T5_V1_0),
    "t5-mini": dict(d_model=128, d_ff=512, d_kv=32, num_layers=2, num_heads=4, **_T5_V1_0),
    "t5-small": dict(d_model=512, d_ff=2048, d_kv=64, num_layers=6, num_heads=8, **_T5_V1_0),
    "t5-base": dict(d_model=768, d_ff=3072, d_kv=64, num_layers=12, num_heads=12, **_T5_V1_0),
    "t5-large": dict(d_model=1024, d_ff=4096, d_kv=64, num_layers=24, num_heads=16, **_T5_V1_0),
    "t5-v1_1-small": dict(d_model=512, d_ff=1024, d_kv=64, num_layers=8, num_heads=6, **_T5_V1_1),
    "t5-v1_1-base": dict(d_model=768, d_ff=2048, d_kv=64, num_layers=12, num_heads=12, **_T5_V1_1),
    "t5-v1_1-large": dict(d_model=1024, d_ff=2816, d_kv=64, num_layers=24, num_heads=16, **_T5_V1_1),
}

# ---------------------------------------------------------------------------------------------------------------
# Fine-tuning task registry: DATASET_VALS[benchmark][task]. task_format.py formats rows with it, metrics.py scores.
#
# Input text follows T5's `preprocessors.glue` (google-research/text-to-text-transfer-transformer,
# t5/data/preprocessors.py): the prefix, then "<column>: <value>" for each column of a list `text_column_name`,
# joined by single spaces ("mnli hypothesis: ... premise: ..."). T5 orders columns by sorted feature name unless
# t5/data/glue_utils.py `get_glue_text_preprocessor` names them (WiC: sentence1, sentence2, word). A single str
# column is appended bare after the prefix, so the prefix carries its name: "sst2 sentence: ...", "summarize: ...".
# Label words are the ClassLabel names T5 decodes targets to (`label_names=builder_config.label_classes`, the
# same names as the HF hub datasets), keyed by the hub's integer label id; the order of `labels` is class order.
#
# Keys of an entry:
#   task_type            "classification" | "regression" | "generation"
#   prefix, text_column_name, label_column_name, labels (None unless classification),
#   metric_names         metrics.py names (HF `evaluate` names); "combined_score" = their mean (HF run_glue.py)
#   metric_to_optimize   one of metric_names, or "combined_score" = the GLUE server's task score
#   hub_name             (path, config name) for datasets.load_dataset
#   train_split, validation_splits, test_splits   hub split names (MNLI evaluates on two)
#   data_dir_name        folder under --data_dir, named as in the official GLUE / SuperGLUE downloads
#   file_format          "tsv" (read with csv.QUOTE_NONE, as HF's glue.py does) | "jsonl" | "parallel_text"
#   data_files           hub split -> file in data_dir_name ("parallel_text": hub split -> {column: file})
#   tsv_columns          hub split -> column names of header-less files (CoLA train/dev); other files have a header
#   file_column_map      file column -> our column; columns absent from it keep their name
#   file_label_map       raw file label -> label id; None: regression parses a float, generation keeps the text
#   row_format           optional: how rows become T5 examples when they are not plain `glue` rows
#                        (t5kit/data/superglue_formats.py): "multirc", "record", "wsc_simple", "wnli_simple", "axg";
#                        "sni": the tasks of a natural-instructions checkout (t5kit/data/sni.py)
#   t5_task              the T5 task (t5/data/tasks.py) whose format and metrics the entry reproduces
#   submission_name      leaderboard file name when it is not data_dir_name (GLUE's diagnostic folder: AX.tsv)
#   train_only_referents WSC: train only on rows whose candidate is the referent (T5: correct_referent_only)
#   predicted_by         a task only predicted (train_split None): the task whose model T5 predicts it with
# Files without a label column (GLUE/SuperGLUE test splits) get label NO_LABEL, as the hub's test splits have. A
# diagnostic task (GLUE AX, SuperGLUE AX-b and AX-g) has only a test split: T5 mixes it in with rate 0, so it is
# never trained on, only predicted by a model fine-tuned on MNLI (AX) or RTE (AX-b, AX-g).

NO_LABEL = -1  # hub label of unlabeled (test) rows; T5's `glue` preprocessor turns it into the target "<unk>".
NO_LABEL_TARGET = "<unk>"
# T5 `preprocessors.stsb`: tf.as_string(tf.round(label * 5) / 5, precision=1), in float32 with round-half-to-even:
# STS-B scores become one of 0.0, 0.2, ..., 5.0, rendered with one decimal ("3.8").
STSB_TARGET_RESOLUTION = 5

COMBINED_SCORE = "combined_score"  # mean of a non-generation task's metric_names (HF run_glue.py, SuperGLUE).

_GLUE_FILES = dict(
    train_split="train", validation_splits=("validation",), test_splits=("test",), file_format="tsv",
    data_files={"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}, tsv_columns={},
)
_SUPER_GLUE_FILES = dict(
    train_split="train", validation_splits=("validation",), test_splits=("test",), file_format="jsonl",
    data_files={"train": "train.jsonl", "validation": "val.jsonl", "test": "test.jsonl"}, tsv_columns={},
)
_BINARY_TSV_LABELS = {"0": 0, "1": 1}  # SST-2, CoLA, MRPC, QQP and WNLI files hold the label id as text.
_ACCURACY = dict(metric_names=("accuracy",), metric_to_optimize="accuracy")
_F1_ACCURACY = dict(metric_names=("f1", "accuracy"), metric_to_optimize=COMBINED_SCORE)
_COLA_FILE_COLUMNS = ("source", "label", "label_notes", "sentence")  # CoLA README; train/dev have no header.
_RTE_LABELS = {0: "entailment", 1: "not_entailment"}
_MNLI_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}
# The SuperGLUE diagnostics are cast as RTE (glue_utils.get_glue_text_preprocessor: benchmark_name "rte"); their
# jsonl files hold the label words.
_DIAGNOSTIC = dict(task_type="classification", prefix="rte", text_column_name=["hypothesis", "premise"],
                   label_column_name="label", labels=_RTE_LABELS, predicted_by="super_glue/rte",
                   train_split=None, validation_splits=(),
                   test_splits=("test",), file_format="jsonl", tsv_columns={},
                   file_label_map={"entailment": 0, "not_entailment": 1})

NO_TASK = "none"  # predict_t5.py's --task none: no registry task, the inputs as they are

DATASET_VALS = {
    "glue": {
        "cola": dict(
            task_type="classification", prefix="cola sentence:", text_column_name="sentence",
            label_column_name="label", labels={0: "unacceptable", 1: "acceptable"},
            metric_names=("matthews_correlation",), metric_to_optimize="matthews_correlation",
            hub_name=("nyu-mll/glue", "cola"), data_dir_name="CoLA",
            **(_GLUE_FILES | dict(tsv_columns={"train": _COLA_FILE_COLUMNS, "validation": _COLA_FILE_COLUMNS})),
            file_column_map={}, file_label_map=_BINARY_TSV_LABELS, t5_task="glue_cola_v002",
        ),
        "sst2": dict(
            task_type="classification", prefix="sst2 sentence:", text_column_name="sentence",
            label_column_name="label", labels={0: "negative", 1: "positive"}, **_ACCURACY,
            hub_name=("nyu-mll/glue", "sst2"), data_dir_name="SST-2", **_GLUE_FILES,
            file_column_map={}, file_label_map=_BINARY_TSV_LABELS, t5_task="glue_sst2_v002",
        ),
        "mrpc": dict(
            task_type="classification", prefix="mrpc", text_column_name=["sentence1", "sentence2"],
            label_column_name="label", labels={0: "not_equivalent", 1: "equivalent"}, **_F1_ACCURACY,
            hub_name=("nyu-mll/glue", "mrpc"), data_dir_name="MRPC", **_GLUE_FILES,
            # The header starts with a UTF-8 BOM ("\ufeffQuality"); task_format.convert_file_row drops it.
            file_column_map={"Quality": "label", "#1 String": "sentence1", "#2 String": "sentence2"},
            file_label_map=_BINARY_TSV_LABELS, t5_task="glue_mrpc_v002",
        ),
        "qqp": dict(
            task_type="classification", prefix="qqp", text_column_name=["question1", "question2"],
            label_column_name="label", labels={0: "not_duplicate", 1: "duplicate"}, **_F1_ACCURACY,
            hub_name=("nyu-mll/glue", "qqp"), data_dir_name="QQP", **_GLUE_FILES,
            file_column_map={"is_duplicate": "label"}, file_label_map=_BINARY_TSV_LABELS, t5_task="glue_qqp_v002",
        ),
        "stsb": dict(
            task_type="regression", prefix="stsb", text_column_name=["sentence1", "sentence2"],
            label_column_name="label", labels=None,
            metric_names=("pearson", "spearmanr"), metric_to_optimize=COMBINED_SCORE,
            hub_name=("nyu-mll/glue", "stsb"), data_dir_name="STS-B", **_GLUE_FILES,
            file_column_map={"score": "label"}, file_label_map=None, t5_task="glue_stsb_v002",
        ),
        "mnli": dict(
            task_type="classification", prefix="mnli", text_column_name=["hypothesis", "premise"],
            label_column_name="label", labels={0: "entailment", 1: "neutral", 2: "contradiction"}, **_ACCURACY,
            hub_name=("nyu-mll/glue", "mnli"), data_dir_name="MNLI",
            **(_GLUE_FILES | dict(
                validation_splits=("validation_matched", "validation_mismatched"),
                test_splits=("test_matched", "test_mismatched"),
                data_files={"train": "train.tsv", "validation_matched": "dev_matched.tsv",
                            "validation_mismatched": "dev_mismatched.tsv", "test_matched": "test_matched.tsv",
                            "test_mismatched": "test_mismatched.tsv"},
            )),
            file_column_map={"sentence1": "premise", "sentence2": "hypothesis", "gold_label": "label"},
            file_label_map={"entailment": 0, "neutral": 1, "contradiction": 2}, t5_task="glue_mnli_v002",
        ),
        "qnli": dict(
            task_type="classification", prefix="qnli", text_column_name=["question", "sentence"],
            label_column_name="label", labels={0: "entailment", 1: "not_entailment"}, **_ACCURACY,
            hub_name=("nyu-mll/glue", "qnli"), data_dir_name="QNLI", **_GLUE_FILES,
            file_column_map={}, file_label_map={"entailment": 0, "not_entailment": 1}, t5_task="glue_qnli_v002",
        ),
        "rte": dict(
            task_type="classification", prefix="rte", text_column_name=["sentence1", "sentence2"],
            label_column_name="label", labels={0: "entailment", 1: "not_entailment"}, **_ACCURACY,
            hub_name=("nyu-mll/glue", "rte"), data_dir_name="RTE", **_GLUE_FILES,
            file_column_map={}, file_label_map={"entailment": 0, "not_entailment": 1}, t5_task="glue_rte_v002",
        ),
        "wnli": dict(
            task_type="classification", prefix="wnli", text_column_name=["sentence1", "sentence2"],
            label_column_name="label", labels={0: "not_entailment", 1: "entailment"}, **_ACCURACY,
            hub_name=("nyu-mll/glue", "wnli"), data_dir_name="WNLI", **_GLUE_FILES,
            file_column_map={}, file_label_map=_BINARY_TSV_LABELS, t5_task="glue_wnli_v002",
        ),
        # The diagnostic set, cast as MNLI; diagnostic.tsv has no labels (the server scores it).
        "ax": dict(
            task_type="classification", prefix="mnli", text_column_name=["hypothesis", "premise"],
            label_column_name="label", labels=_MNLI_LABELS, metric_names=("matthews_correlation",),
            metric_to_optimize="matthews_correlation", hub_name=("nyu-mll/glue", "ax"), data_dir_name="diagnostic",
            train_split=None, validation_splits=(), test_splits=("test",), file_format="tsv", tsv_columns={},
            data_files={"test": "diagnostic.tsv"}, submission_name="AX", predicted_by="glue/mnli",
            file_column_map={"sentence1": "premise", "sentence2": "hypothesis"},
            file_label_map={"entailment": 0, "neutral": 1, "contradiction": 2}, t5_task="glue_ax_v002",
        ),
    },
    "super_glue": {
        "boolq": dict(
            task_type="classification", prefix="boolq", text_column_name=["passage", "question"],
            label_column_name="label", labels={0: "False", 1: "True"}, **_ACCURACY,
            hub_name=("aps/super_glue", "boolq"), data_dir_name="BoolQ", **_SUPER_GLUE_FILES,
            # "answer": the original BoolQ release (question, title, answer, passage) names the label so.
            file_column_map={"answer": "label"}, file_label_map={False: 0, True: 1}, t5_task="super_glue_boolq_v102",
        ),
        "cb": dict(
            task_type="classification", prefix="cb", text_column_name=["hypothesis", "premise"],
            label_column_name="label", labels={0: "entailment", 1: "contradiction", 2: "neutral"},
            metric_names=("f1", "accuracy"), metric_to_optimize=COMBINED_SCORE,  # f1: mean over 3 classes
            hub_name=("aps/super_glue", "cb"), data_dir_name="CB", **_SUPER_GLUE_FILES,
            file_column_map={}, file_label_map={"entailment": 0, "contradiction": 1, "neutral": 2},
            t5_task="super_glue_cb_v102",
        ),
        "copa": dict(
            task_type="classification", prefix="copa",
            text_column_name=["choice1", "choice2", "premise", "question"],  # T5: sorted feature names
            label_column_name="label", labels={0: "choice1", 1: "choice2"}, **_ACCURACY,
            hub_name=("aps/super_glue", "copa"), data_dir_name="COPA", **_SUPER_GLUE_FILES,
            file_column_map={}, file_label_map={0: 0, 1: 1}, t5_task="super_glue_copa_v102",
        ),
        "multirc": dict(
            task_type="classification", prefix="multirc",
            text_column_name=["question", "answer", "paragraph"],  # glue_utils.py: feature_names for multirc
            label_column_name="label", labels={0: "False", 1: "True"},
            metric_names=("f1", "exact_match"), metric_to_optimize=COMBINED_SCORE,  # F1a and EM, as SuperGLUE
            hub_name=("aps/super_glue", "multirc"), data_dir_name="MultiRC", **_SUPER_GLUE_FILES,
            file_column_map={}, file_label_map={0: 0, 1: 1}, row_format="multirc", t5_task="super_glue_multirc_v102",
        ),
        "record": dict(
            task_type="qa", prefix="record query:", text_column_name=["passage", "query", "entities"],
            label_column_name="answers", labels=None,
            metric_names=("exact_match", "f1"), metric_to_optimize=COMBINED_SCORE,  # max over answers (squad)
            hub_name=("aps/super_glue", "record"), data_dir_name="ReCoRD", **_SUPER_GLUE_FILES,
            file_column_map={}, file_label_map=None, row_format="record", t5_task="super_glue_record_v102",
        ),
        "rte": dict(
            task_type="classification", prefix="rte", text_column_name=["hypothesis", "premise"],
            label_column_name="label", labels={0: "entailment", 1: "not_entailment"}, **_ACCURACY,
            hub_name=("aps/super_glue", "rte"), data_dir_name="RTE", **_SUPER_GLUE_FILES,
            file_column_map={}, file_label_map={"entailment": 0, "not_entailment": 1}, t5_task="super_glue_rte_v102",
        ),
        "wic": dict(
            task_type="classification", prefix="wic",
            text_column_name=["sentence1", "sentence2", "word"],  # glue_utils.py: feature_names for wic
            label_column_name="label", labels={0: "False", 1: "True"}, **_ACCURACY,
            hub_name=("aps/super_glue", "wic"), data_dir_name="WiC", **_SUPER_GLUE_FILES,
            file_column_map={}, file_label_map={False: 0, True: 1}, t5_task="super_glue_wic_v102",
        ),
        # T5's simplified WSC: trained on super_glue_wsc_v102_simple_train (only rows whose candidate is the
        # referent), evaluated as super_glue_wsc_v102_simple_eval.
        "wsc": dict(
            task_type="referent", prefix="wsc:", text_column_name=["text", "span1_text", "span2_text", "span2_index"],
            label_column_name="label", labels=None, **_ACCURACY,
            hub_name=("aps/super_glue", "wsc.fixed"), data_dir_name="WSC", **_SUPER_GLUE_FILES,
            file_column_map={}, file_label_map=None, row_format="wsc_simple",
            t5_task="super_glue_wsc_v102_simple_train", train_only_referents=True,
        ),
        "axb": dict(
            **_DIAGNOSTIC, metric_names=("matthews_correlation",), metric_to_optimize="matthews_correlation",
            hub_name=("aps/super_glue", "axb"), data_dir_name="AX-b", data_files={"test": "AX-b.jsonl"},
            file_column_map={"sentence1": "premise", "sentence2": "hypothesis"}, t5_task="super_glue_axb_v102",
        ),
        # AX-g's metrics and their combined_score (the mean) are ours: T5 gives AX-g none, the leaderboard shows
        # accuracy and gender parity (pairs idx 2k, 2k + 1 predicted alike) side by side, averaged nowhere.
        "axg": dict(
            **_DIAGNOSTIC, metric_names=("accuracy", "gender_parity"), metric_to_optimize=COMBINED_SCORE,
            hub_name=("aps/super_glue", "axg"), data_dir_name="AX-g", data_files={"test": "AX-g.jsonl"},
            file_column_map={}, row_format="axg", t5_task="super_glue_axg_v102",
        ),
    },
    "summarization": {
        # T5 `preprocessors.summarize`: "summarize: <article>" -> highlights (sentences separated by "\n").
        "cnn_dailymail": dict(
            task_type="generation", prefix="summarize:", text_column_name="article",
            label_column_name="highlights", labels=None,
            metric_names=("rouge1", "rouge2", "rougeL", "rougeLsum"), metric_to_optimize="rougeLsum",
            hub_name=("abisee/cnn_dailymail", "3.0.0"), data_dir_name="cnn_dailymail",
            train_split="train", validation_splits=("validation",), test_splits=("test",),
            file_format="jsonl", tsv_columns={},
            data_files={"train": "train.jsonl", "validation": "validation.jsonl", "test": "test.jsonl"},
            file_column_map={}, file_label_map=None, t5_task="cnn_dailymail_v002",
        ),
    },
    "translation": {
        # T5 `preprocessors.translate`: "translate English to German: <en>" -> <de>. Multi30k (Elliott et al.
        # 2016) ships line-aligned raw text files, e.g. val.en / val.de.
        "multi30k_en_de": dict(
            task_type="generation", prefix="translate English to German:", text_column_name="en",
            label_column_name="de", labels=None, metric_names=("bleu",), metric_to_optimize="bleu",
            hub_name=("bentrevett/multi30k", None), data_dir_name="multi30k",
            train_split="train", validation_splits=("validation",), test_splits=("test",),
            file_format="parallel_text", tsv_columns={},
            data_files={split: {"en": f"{stem}.en", "de": f"{stem}.de"}
                        for split, stem in [("train", "train"), ("validation", "val"), ("test", "test")]},
            file_column_map={}, file_label_map=None,
        ),
    },
    # Super-NaturalInstructions as nanoT5 fine-tunes and evaluates it (t5kit/data/sni.py, metrics.score_sni).
    "sni": {"sni": dict(
        task_type="generation", prefix="", text_column_name="input", label_column_name="output", labels=None,
        metric_names=("exact_match", "rougeL"), metric_to_optimize="rougeL", hub_name=None, data_dir_name="",
        train_split="train", validation_splits=("test",), test_splits=(), file_format="sni", tsv_columns={},
        data_files={"train": "splits/default/train_tasks.txt", "test": "splits/default/test_tasks.txt"},
        file_column_map={}, file_label_map=None, row_format="sni")},
}

# --wnli_format wsc_simple: WNLI as T5 evaluated it (glue_wnli_v002_simple_eval: preprocessors.wnli_simple, scored
# by postprocessors.wsc_simple), by a model fine-tuned on super_glue/wsc; evaluation and prediction only.
WNLI_AS_WSC = dict(task_type="referent", prefix="wsc:", labels=None, **_ACCURACY, train_split=None,
                   row_format="wnli_simple", t5_task="glue_wnli_v002_simple_eval", predicted_by="super_glue/wsc")
WNLI_FORMATS = ("glue", "wsc_simple")
# --instruction_templates: T5's own format (none), or FLAN's templates (t5kit/data/instructions.py) as they are
# (flan) or inside FLAN v1's dialog markers (flan_dialog).
INSTRUCTION_FORMATS = ("none", "flan", "flan_dialog")
# --sni_metric: how Super-NaturalInstructions predictions are scored (metrics.score_sni). official: the benchmark's
# evaluation (allenai/natural-instructions eval/automatic/evaluation.py: the best over an instance's outputs); nanot5:
# what nanoT5 reports (PiotrNawrot/nanoT5 train_utils.predict: one drawn output, evaluate's rouge), which its
# published Rouge-L figures are.
SNI_METRICS = ("official", "nanot5")
