"""Which flag dataclasses each entry script parses, in parsing order, and the checks that read several of them:
the scripts read them from here, and so does sweep.py, which checks a sweep's parameter names against its program's
flags without importing the program.

    model_args, data_args, span_args, objective_args, training_args = parsing.parse_flags(PRETRAIN_FLAG_CLASSES, argv)

parsing.parse_flags runs a Program's cross_checks once every group has validated itself, so a bad combination of
flags from two groups is refused before anything is loaded, whoever parses them (an entry script, a sweep's check of
its parameters, a test).
"""
from t5kit.config.arguments import ModelArguments, T5TrainingArguments
from t5kit.config.checks import check_fp16_attention, check_loss_chunks
from t5kit.config.export_arguments import ExportArguments
from t5kit.config.finetune_arguments import FineTuneDataArguments, FineTuneTrainingArguments, check_model_to_train
from t5kit.config.parsing import Program
from t5kit.config.predict_arguments import PredictArguments
from t5kit.config.pretrain_arguments import (
    ObjectiveArguments,
    PretrainDataArguments,
    SpanCorruptionArguments,
    check_init_embeddings,
    check_packing,
    check_streaming,
)
from t5kit.config.sweep_arguments import SWEEP_FLAG_CLASSES  # declared with its group (sweep_arguments.py says why)
from t5kit.config.tokenizer_arguments import TOKENIZER_FLAG_CLASSES  # declared with its group, as sweep's

PRETRAIN_FLAG_CLASSES = Program(
    (ModelArguments, PretrainDataArguments, SpanCorruptionArguments, ObjectiveArguments, T5TrainingArguments),
    cross_checks=(check_init_embeddings, check_packing, check_streaming, check_fp16_attention,
                  check_loss_chunks))
FINETUNE_FLAG_CLASSES = Program((ModelArguments, FineTuneDataArguments, FineTuneTrainingArguments),
                                cross_checks=(check_model_to_train, check_fp16_attention, check_loss_chunks))
PREDICT_FLAG_CLASSES = Program((PredictArguments,))
EXPORT_FLAG_CLASSES = Program((ExportArguments,))
# Every entry script's flags (tests/config/test_arguments.py checks each flag is declared once across them), and the
# programs a sweep can run.
FLAG_CLASSES_BY_SCRIPT = {"pre_train_t5.py": PRETRAIN_FLAG_CLASSES, "fine_tune_t5.py": FINETUNE_FLAG_CLASSES,
                          "predict_t5.py": PREDICT_FLAG_CLASSES, "export_t5.py": EXPORT_FLAG_CLASSES,
                          "sweep.py": SWEEP_FLAG_CLASSES, "train_tokenizer.py": TOKENIZER_FLAG_CLASSES}
FLAG_CLASSES_BY_PROGRAM = {"pre_train_t5.py": PRETRAIN_FLAG_CLASSES, "fine_tune_t5.py": FINETUNE_FLAG_CLASSES}
