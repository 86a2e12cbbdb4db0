"""Flags declared once across the six entry scripts: a flag two scripts share comes from one group dataclass
(config/arguments.py) with one help text, so the scripts cannot drift apart; the scripts' own groups inherit it, and
a name two groups declare on purpose is listed with its two meanings (each --help says which)."""
import dataclasses
import inspect
from pathlib import Path

from absl.testing import absltest, parameterized

from t5kit.config import arguments, parsing
from t5kit.config.arguments import (
    HubArguments,
    ModelPathArguments,
    ModelSourceArguments,
    TaskInputArguments,
)
from t5kit.config.output_arguments import OutputDirArguments, OverwriteOutputDirArguments
from t5kit.config.script_flags import FINETUNE_FLAG_CLASSES, FLAG_CLASSES_BY_SCRIPT, PREDICT_FLAG_CLASSES
from t5kit.errors import UsageError
from tests.helpers import ENTRY_SCRIPTS, predict_flags, require, tiny_flags

PROGRAMS = {script.removesuffix(".py"): classes for script, classes in FLAG_CLASSES_BY_SCRIPT.items()}
TRAINING = ("pre_train_t5", "fine_tune_t5")
SHARED_GROUPS = {ModelPathArguments: (*TRAINING, "predict_t5", "export_t5"),
                 ModelSourceArguments: (*TRAINING, "predict_t5"),
                 OutputDirArguments: (*TRAINING, "train_tokenizer", "export_t5", "sweep"),
                 OverwriteOutputDirArguments: (*TRAINING, "train_tokenizer", "export_t5"),
                 HubArguments: (*TRAINING, "export_t5"),
                 TaskInputArguments: ("fine_tune_t5", "predict_t5")}
# Names two of our groups declare on purpose, because they mean different things in different scripts.
SAME_NAME_OTHER_MEANING = {
    "dataset_name": "pre-training's hub corpus; fine-tuning's task within --benchmark",
    "text_column": "pre-training's corpus column (default text); predict_t5.py's input column (default: the task's)",
    "max_train_samples": "pre-training counts documents; fine-tuning counts task rows",
    "max_eval_samples": "pre-training counts windows; fine-tuning counts rows of each validation split",
    "train_files": "pre-training's corpus files (text, json, csv, parquet); train_tokenizer.py's text files",
    "seed": "train_tokenizer.py's SentencePiece sampling seed; sweep.py's Optuna sampler seed (training's is HF's)",
}


def declarations(classes):
    """flag name -> the set of our dataclasses (t5kit's, not HF's) whose own body declares it, over the classes'
    bases too. A field that overrides one of HF's TrainingArguments (a new default) is HF's flag, not ours."""
    declared = {}
    for cls in classes:
        for owner in cls.__mro__:
            if not owner.__module__.startswith("t5kit.") or not dataclasses.is_dataclass(owner):
                continue
            for name in inspect.get_annotations(owner):
                overrides_hf = any(name in getattr(base, "__dataclass_fields__", {}) for base in owner.__mro__[1:]
                                   if base.__module__.startswith("transformers."))
                if not overrides_hf:
                    declared.setdefault(name, set()).add(owner)
    return declared


def parser_help(classes):
    return {action.dest: action.help for action in parsing._Parser(classes)._actions}


class FlagGroupsTest(parameterized.TestCase):

    def test_the_guard_covers_every_entry_script(self):
        self.assertCountEqual(PROGRAMS, ENTRY_SCRIPTS)

    def test_a_flag_two_scripts_share_is_declared_once(self):
        everywhere = declarations([cls for classes in PROGRAMS.values() for cls in classes])
        twice = {name: sorted(cls.__name__ for cls in owners) for name, owners in everywhere.items()
                 if len(owners) > 1}
        self.assertEqual(sorted(twice), sorted(SAME_NAME_OTHER_MEANING), twice)

    @parameterized.named_parameters(*[(name, classes) for name, classes in PROGRAMS.items()])
    def test_no_script_parses_a_flag_from_two_groups(self, classes):
        names = [f.name for cls in classes for f in dataclasses.fields(cls)]
        self.assertEqual(sorted({n for n in names if names.count(n) > 1}), [])

    @parameterized.named_parameters(*[(group.__name__, group) for group in SHARED_GROUPS])
    def test_shared_groups_reach_their_scripts_with_one_help(self, group):
        shared = list(inspect.get_annotations(group))  # the group's own flags, not those it inherits
        helps = {}
        for program in SHARED_GROUPS[group]:
            classes = PROGRAMS[program]
            self.assertTrue(any(issubclass(cls, group) for cls in classes), program)
            declared = declarations(classes)
            self.assertEqual({name: declared[name] for name in shared}, {name: {group} for name in shared}, program)
            helps[program] = {name: parser_help(classes)[name] for name in shared}
        self.assertLen({repr(h) for h in helps.values()}, 1, helps)
        for text in helps[SHARED_GROUPS[group][0]].values():
            self.assertNotIn("Required.", text)  # a script's own requirement is its own check, not the help's

    def test_predict_t5_still_requires_a_model(self):
        work = Path(self.create_tempdir().full_path)
        (work / "in.txt").write_text("a line\n")
        argv = predict_flags(None, str(work / "in.txt"), str(work / "out.jsonl"))  # None: the flag left out
        with self.assertRaisesRegex(UsageError, "^--model_name_or_path is required; see --help$"):
            parsing.parse_flags(PREDICT_FLAG_CLASSES, argv)

    def test_unset_source_length_means_512_for_fine_tuning_and_the_model_card_for_prediction(self):
        work = Path(self.create_tempdir().full_path)
        argv = tiny_flags(str(work / "ft"), max_source_length=None)  # None: the flag left out
        _, data_args, _ = parsing.parse_flags(FINETUNE_FLAG_CLASSES, argv)
        # --label_scoring unset: fine-tuning's per-task rule (data/task_scoring.label_scoring_of); predict generates
        self.assertEqual((data_args.max_source_length, data_args.label_scoring), (512, None))
        (work / "in.txt").write_text("a line\n")
        (args,) = parsing.parse_flags(PREDICT_FLAG_CLASSES, predict_flags(str(work), str(work / "in.txt"),
                                                                          str(work / "out.jsonl")))
        self.assertEqual((args.max_source_length, args.label_scoring, args.tokenizer_name_or_path),
                         (None, "generate", str(work)))

    @parameterized.named_parameters(
        ("source_length", {"max_source_length": 1},
         "^--max_source_length=1 leaves no room for text and EOS; use >= 2$"),
        ("scoring", {"label_scoring": "vote"},
         r"^--label_scoring='vote' is not a valid choice; choices: generate, rank$"),
        ("predict_samples", {"max_predict_samples": 0}, "^--max_predict_samples=0 must be >= 1"),
    )
    def test_both_scripts_refuse_a_shared_flag_in_one_wording(self, flags, message):
        work = Path(self.create_tempdir().full_path)
        (work / "in.txt").write_text("a line\n")
        with self.assertRaisesRegex(UsageError, message):
            parsing.parse_flags(FINETUNE_FLAG_CLASSES, tiny_flags(str(work / "ft"), **flags))
        with self.assertRaisesRegex(UsageError, message):
            parsing.parse_flags(PREDICT_FLAG_CLASSES, predict_flags(str(work), str(work / "in.txt"),
                                                                    str(work / "out.jsonl"), **flags))

    def test_a_fine_tuning_record_reloads_with_the_shared_flags(self):
        from t5kit.outputs import run_record  # the record's writer, as the entry scripts call it

        work = Path(self.create_tempdir().full_path)
        flags = parsing.parse_flags(FINETUNE_FLAG_CLASSES, tiny_flags(str(work / "ft"), label_scoring="rank",
                                                                      max_predict_samples=3))
        record = run_record.flag_values(flags)
        path = run_record.write_run_record(str(work), {**record, parsing.DERIVED_KEY: {"world_size": 1}})
        again = run_record.flag_values(parsing.parse_flags(FINETUNE_FLAG_CLASSES, [str(path)]))
        self.assertEqual(again, record)
        self.assertEqual((record["max_source_length"], record["label_scoring"], record["max_predict_samples"],
                          record["tokenizer_name_or_path"]), (64, "rank", 3, str(require("t5_spiece"))))



class LooksLikeAFolderTest(parameterized.TestCase):
    """--model_name_or_path that can only be a local folder (refused as missing when it does not exist) vs a hub
    name, which goes to the hub."""

    @parameterized.named_parameters(
        ("absolute", "/runs/x", True), ("dot", "./runs/x", True), ("dot_dot", "../x", True), ("home", "~/x", True),
        ("two_separators", "runs/x/model", True), ("hub_name", "google-t5/t5-small", False),
        ("bare_hub_name", "t5-small", False), ("run_folder_like_a_hub_name", "runs/quickstart", False))
    def test_looks_like_a_folder(self, path, folder):
        self.assertEqual(arguments.looks_like_a_folder(path), folder)


if __name__ == "__main__":
    absltest.main()
