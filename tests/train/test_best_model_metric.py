"""train/best_model_metric.py: the metric that picks fine-tuning's best checkpoint, settled in step 1. The names
evaluation reports (one split's, or each split's under its key plus their average), the task's metric_to_optimize
filled in when --metric_for_best_model is unset, one that names nothing reported refused with a suggestion, and
evaluation switched off for tasks without a validation split."""
import logging
from types import SimpleNamespace

from absl.testing import absltest, parameterized
from transformers.trainer_utils import IntervalStrategy

from t5kit.config.finetune_arguments import FineTuneDataArguments
from t5kit.data import task_splits
from t5kit.errors import UsageError
from t5kit.train import best_model_metric


def plans(do_train=True, do_predict=False, **data_flags):
    args = FineTuneDataArguments(**data_flags)
    return task_splits.plan_splits(task_splits.resolve_tasks(args.task_selection()), args.task_data(), do_train,
                                   True, do_predict)


def training_args(metric=None, eval_strategy="epoch"):
    """The fine-tuning flags the module reads; `metric` None: --metric_for_best_model unset (HF filled "loss")."""
    return SimpleNamespace(metric_for_best_model_from_task=metric is None, metric_for_best_model=metric or "loss",
                           greater_is_better=False, do_eval=True, eval_strategy=eval_strategy,
                           load_best_model_at_end=True)


class ReportedMetricsTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("one_metric", dict(dataset_name="rte"), ["accuracy", "loss", "invalid_count", "invalid_rate"]),
        ("combined", dict(dataset_name="mrpc"),
         ["f1", "accuracy", "combined_score", "loss", "invalid_count", "invalid_rate"]),
        ("two_splits", dict(dataset_name="mnli"),
         ["mnli_matched_accuracy", "mnli_matched_loss", "mnli_matched_invalid_count", "mnli_matched_invalid_rate",
          "mnli_mismatched_accuracy", "mnli_mismatched_loss", "mnli_mismatched_invalid_count",
          "mnli_mismatched_invalid_rate", "average"]))
    def test_what_evaluation_reports(self, flags, names):
        self.assertEqual(best_model_metric.reported_metrics(plans(**flags)), names)


class ChooseMetricTest(parameterized.TestCase):

    @parameterized.named_parameters(("one_task", dict(dataset_name="cola"), "matthews_correlation"),
                                    ("combined", dict(dataset_name="stsb"), "combined_score"),
                                    ("mixture", dict(tasks="glue/rte,glue/sst2"), "average"))
    def test_unset_it_is_the_tasks_metric_to_optimize(self, flags, metric):
        args = training_args()
        self.assertEqual(best_model_metric.choose_best_model_metric(args, plans(**flags)), metric)
        self.assertEqual((args.metric_for_best_model, args.greater_is_better), (metric, True))

    @parameterized.named_parameters(("bare", "accuracy", "accuracy"), ("hf_prefixed", "eval_loss", "loss"))
    def test_a_metric_given_is_checked_and_kept(self, given, chosen):
        args = training_args(given)
        self.assertEqual(best_model_metric.choose_best_model_metric(args, plans(dataset_name="rte")), chosen)
        self.assertEqual((args.metric_for_best_model, args.greater_is_better), (given, False))  # as the user set

    def test_a_metric_not_reported_is_refused_with_a_suggestion(self):
        with self.assertRaisesRegex(UsageError, r"^--metric_for_best_model 'acuracy' is not reported by this run; "
                                                r"did you mean 'accuracy'\?"):
            best_model_metric.choose_best_model_metric(training_args("acuracy"), plans(dataset_name="rte"))
        with self.assertRaisesRegex(UsageError, r"^--metric_for_best_model 'accuracy' is not reported by this run; "
                                                r"choices: mnli_matched_accuracy, .*, average$"):  # split keys
            best_model_metric.choose_best_model_metric(training_args("accuracy"), plans(dataset_name="mnli"))

    def test_nothing_evaluated_chooses_nothing(self):
        args = training_args()
        self.assertIsNone(best_model_metric.choose_best_model_metric(args, plans(
            do_train=False, do_predict=True, benchmark="glue", dataset_name="ax")))
        self.assertEqual(args.metric_for_best_model, "loss")


class EvaluationWithoutSplitsTest(parameterized.TestCase):

    def test_tasks_without_a_validation_split_turn_evaluation_off(self):
        args = training_args()
        with self.assertLogs("t5kit.train.best_model_metric", logging.INFO) as logs:
            best_model_metric.turn_off_evaluation_without_splits(args, plans(do_train=False, do_predict=True,
                                                                             dataset_name="ax"))
        self.assertEqual((args.do_eval, args.eval_strategy, args.load_best_model_at_end),
                         (False, IntervalStrategy.NO, False))
        self.assertIn("no task of this run has a validation split", logs.output[0])

    def test_a_run_with_a_validation_split_or_no_evaluation_is_left_alone(self):
        args = training_args()
        best_model_metric.turn_off_evaluation_without_splits(args, plans(dataset_name="rte"))
        self.assertEqual((args.do_eval, args.eval_strategy, args.load_best_model_at_end), (True, "epoch", True))
        args = training_args(eval_strategy="no")
        best_model_metric.turn_off_evaluation_without_splits(args, plans(do_train=False, do_predict=True,
                                                                         dataset_name="ax"))
        self.assertEqual((args.do_eval, args.load_best_model_at_end), (True, True))


if __name__ == "__main__":
    absltest.main()
