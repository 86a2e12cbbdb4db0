"""Which flag dataclasses each entry script parses, in parsing order: the scripts read them from here, and so does
sweep.py, which checks a sweep's parameter names against its program's flags without importing the program."""
from t5kit.config.arguments import ModelArguments, T5TrainingArguments
from t5kit.config.finetune_arguments import FineTuneDataArguments, FineTuneTrainingArguments
from t5kit.config.predict_arguments import PredictArguments
from t5kit.config.pretrain_arguments import ObjectiveArguments, PretrainDataArguments, SpanCorruptionArguments

PRETRAIN_FLAG_CLASSES = (ModelArguments, PretrainDataArguments, SpanCorruptionArguments, ObjectiveArguments,
                         T5TrainingArguments)
FINETUNE_FLAG_CLASSES = (ModelArguments, FineTuneDataArguments, FineTuneTrainingArguments)
PREDICT_FLAG_CLASSES = (PredictArguments,)
FLAG_CLASSES_BY_PROGRAM = {"pre_train_t5.py": PRETRAIN_FLAG_CLASSES, "fine_tune_t5.py": FINETUNE_FLAG_CLASSES}
