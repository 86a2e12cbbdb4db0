"""Spec of data/task_scoring.py: the one rule of how a fine-tuning run predicts each task (label_scoring_of: held-out
tasks in FLAN's templates ranked, as FLAN scores them, unless --label_scoring says otherwise), applied by the trainer
(uses_rank_scoring) and recorded per split with SNI's --sni_metric (evaluation_by_split), on the registry's task
entries as a run resolves them."""
from absl.testing import absltest, parameterized

from t5kit.config.finetune_arguments import FineTuneDataArguments
from t5kit.data import task_scoring, task_splits
from t5kit.errors import UsageError
from t5kit.train.task_trainer import uses_rank_scoring
from tests.helpers import REPO

SNI_FIXTURE = REPO / "tests" / "fixtures" / "natural_instructions"


def resolved(label_scoring=None, **flags):
    """(the --label_scoring value, the tasks a run resolves) for these flags."""
    args = FineTuneDataArguments(**{"dataset_name": None, "label_scoring": label_scoring, **flags})
    return args.label_scoring, task_splits.resolve_run_tasks(args.task_selection())


class LabelScoringRuleTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("unset_held_out_in_flan_templates", None, "super_glue/wic", True, "flan", "rank"),
        ("unset_held_out_in_flan_dialog", None, "super_glue/cb", True, "flan_dialog", "rank"),
        ("unset_trained_in_flan_templates", None, "glue/rte", False, "flan", "generate"),
        ("unset_held_out_in_t5s_format", None, "glue/rte", True, "none", "generate"),
        ("generate_given_for_a_held_out_task", "generate", "super_glue/wic", True, "flan", "generate"),
        ("rank_given_for_a_trained_task", "rank", "glue/sst2", False, "none", "rank"),
        ("unset_held_out_copa_options_per_row", None, "super_glue/copa", True, "flan", "rank"),
        ("unset_held_out_record_entities_per_row", None, "super_glue/record", True, "flan", "rank"),
        ("rank_given_for_record_in_flan_templates", "rank", "super_glue/record", False, "flan", "rank"),
        ("rank_given_for_record_in_t5s_format", "rank", "super_glue/record", False, "none", "generate"),
        ("unset_held_out_summaries", None, "summarization/cnn_dailymail", True, "flan", "generate"),
        ("rank_given_for_regression", "rank", "glue/stsb", True, "flan", "generate"),
    )
    def test_the_rule(self, label_scoring, name, held_out, templates, expected):
        trained = "glue/mrpc" if name != "glue/mrpc" else "glue/sst2"
        flag, tasks = resolved(label_scoring, tasks=trained if held_out else f"{trained},{name}",
                               eval_tasks=name if held_out else None, instruction_templates=templates)
        (task_vals,) = [t for t in tasks if t["name"] == name]
        self.assertEqual(bool(task_vals.get("held_out")), held_out)
        self.assertEqual(task_scoring.label_scoring_of(flag, task_vals), expected)
        self.assertEqual(uses_rank_scoring(flag, task_vals), expected == "rank")  # what the trainer does

    def test_held_out_tasks_are_named_in_the_log_with_the_flag_that_generates_them(self):
        flag, tasks = resolved(tasks="glue/mrpc", eval_tasks="super_glue/wic,super_glue/copa,glue/stsb",
                               instruction_templates="flan")
        with self.assertLogs("t5kit.data.task_scoring", "INFO") as logs:
            task_scoring.check_label_scoring(flag, tasks)
        self.assertIn("held-out super_glue/wic, super_glue/copa (each row's own options) ranked by FLAN's answers, as "
                      "FLAN scores held-out tasks; --label_scoring generate generates them", logs.output[0])
        self.assertIn("held-out glue/stsb generated: no answers to rank (a score or free text)", logs.output[1])

    def test_what_can_be_ranked(self):
        """Label words (a fixed set), or each row's own options (FLAN's COPA and ReCoRD), or nothing."""
        _, tasks = resolved(tasks="super_glue/copa,super_glue/record,super_glue/cb,glue/stsb",
                            instruction_templates="flan")
        self.assertEqual([(task_scoring.has_label_words(t), task_scoring.has_row_options(t)) for t in tasks],
                         [(False, True), (False, True), (True, False), (False, False)])
        _, t5_tasks = resolved(tasks="super_glue/copa,super_glue/record")
        self.assertEqual([task_scoring.has_answers_to_rank(t) for t in t5_tasks], [True, False])  # T5's own format

    def test_rank_without_any_label_words_is_refused(self):
        flag, tasks = resolved("rank", tasks="glue/stsb")
        with self.assertRaisesRegex(UsageError, r"^--label_scoring rank scores label words, and glue/stsb is a "
                                                r"regression task without them; use --label_scoring generate$"):
            task_scoring.check_label_scoring(flag, tasks)


class EvaluationRecordTest(parameterized.TestCase):

    def test_each_evaluated_split_records_its_scoring(self):
        args = FineTuneDataArguments(dataset_name=None, tasks="glue/sst2,glue/mnli", eval_tasks="glue/rte",
                                     data_dir=[str(REPO)], instruction_templates="flan")
        plans = task_splits.plan_splits(task_splits.resolve_run_tasks(args.task_selection()), args.task_data(),
                                        do_train=True, do_eval=True, do_predict=True)
        rank, generate = {"label_scoring": "rank"}, {"label_scoring": "generate"}
        self.assertEqual(task_scoring.evaluation_by_split(args.label_scoring, plans),
                         {"sst2": generate, "mnli_matched": generate, "mnli_mismatched": generate, "rte": rank})

    @parameterized.named_parameters(("official", "official", ("exact_match", "rougeL")),
                                    ("nanot5", "nanot5", ("rougeL",)))
    def test_sni_splits_carry_their_metric(self, metric, names):
        args = FineTuneDataArguments(benchmark="sni", data_dir=[str(SNI_FIXTURE)], sni_metric=metric)
        plans = task_splits.plan_splits(task_splits.resolve_run_tasks(args.task_selection()), args.task_data())
        self.assertEqual(task_scoring.evaluation_by_split(args.label_scoring, plans),
                         {"sni": {"label_scoring": "generate", "sni_metric": metric}})
        self.assertEqual({plan.task_vals["metric_names"] for plan in plans}, {names})  # nanoT5 reports Rouge-L alone

    def test_an_unknown_metric_is_refused_with_the_choices(self):
        with self.assertRaisesRegex(UsageError, r"^--sni_metric='rouge' is not a valid choice; choices: official, "
                                                r"nanot5$"):
            FineTuneDataArguments(benchmark="sni", data_dir=[str(SNI_FIXTURE)], sni_metric="rouge")


if __name__ == "__main__":
    absltest.main()
