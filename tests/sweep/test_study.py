"""sweep/study.py: one agent's work on a shared Optuna study. The program's flags (ours from script_flags, never
importing an entry script; another program's FLAG_CLASSES), the sweep's parameters checked against them and a
sampled trial parsed as the program would, the number of trials to run, a trial asked for only while the study
needs one, each outcome recorded, and the study and sweep folders opened or refused in one line. (Agents running
real trials: tests/e2e/test_sweep.py.)"""
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import optuna
import pytest
import yaml
from absl.testing import absltest, parameterized
from optuna.trial import TrialState

from t5kit.config import script_flags
from t5kit.errors import UsageError
from t5kit.sweep import space as sweep_space
from t5kit.sweep import storage as sweep_storage
from t5kit.sweep import study as sweep_study
from t5kit.sweep import trial as sweep_trial
from tests.helpers import REPO

TOY = REPO / "tests" / "fixtures" / "toy_program.py"
optuna.logging.set_verbosity(optuna.logging.WARNING)


def agent_args(**values):
    """sweep.py's flags as study.py reads them."""
    return SimpleNamespace(**{"trials": None, "study_name": None, "seed": 0, "heartbeat_interval": 60.0,
                              "storage": None, **values})


class SweepTestCase(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def sweep(self, parameters, **top):
        spec = {"program": str(TOY), "method": "random", "metric": {"name": "eval_loss", "goal": "minimize"},
                "parameters": parameters, **top}
        path = self.dir / "sweep.yaml"
        path.write_text(yaml.safe_dump(spec))
        return sweep_space.load_sweep(path)

    def study(self, sweep, name="s"):
        """An in-memory study of the sweep (a database costs a second a test; StudyAndFoldersTest opens real ones)."""
        return optuna.create_study(study_name=name, direction=sweep.goal)


class ProgramFlagsTest(SweepTestCase):

    @pytest.mark.slow  # a second interpreter
    def test_our_scripts_flags_come_from_script_flags_without_importing_them(self):
        """In a fresh interpreter: this one may have imported the script for another test."""
        code = ("import sys; from t5kit.config import script_flags; from t5kit.sweep import study; "
                f"flags = study.load_program_flags({str(REPO / 'fine_tune_t5.py')!r}); "
                "print(flags is script_flags.FLAG_CLASSES_BY_PROGRAM['fine_tune_t5.py'], "
                "'fine_tune_t5' in sys.modules)")
        result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
        self.assertEqual(result.stdout.split(), ["True", "False"], result.stderr[-2000:])

    def test_another_programs_flag_classes_are_read_from_its_file(self):
        (flag_class,) = sweep_study.load_program_flags(str(TOY))
        self.assertEqual(flag_class.__name__, "ToyArguments")
        self.assertEqual([action.dest for action in sweep_study.program_actions((flag_class,))],
                         ["output_dir", "x", "layers", "optimizer", "evals", "sleep_s", "fail"])  # no --help

    def test_a_program_that_is_no_script_or_has_no_flag_classes_is_refused(self):
        with self.assertRaisesRegex(UsageError, rf"^program: {self.dir}/missing.py \(sweep YAML key\) is not an "
                                                "existing .py file; run sweep.py from the folder"):
            sweep_study.load_program_flags(str(self.dir / "missing.py"))
        (self.dir / "plain.py").write_text("VALUE = 1\n")
        with self.assertRaisesRegex(UsageError, rf"^program {self.dir}/plain.py has no FLAG_CLASSES; sweep.py checks "
                                                "parameter names against them$"):
            sweep_study.load_program_flags(str(self.dir / "plain.py"))

    def test_list_flags_are_the_ones_taking_several_values(self):
        listed = sweep_study.list_flags(script_flags.FLAG_CLASSES_BY_PROGRAM["pre_train_t5.py"])
        self.assertContainsSubset({"train_files", "validation_files", "param_group_lr"}, listed)
        self.assertNotIn("learning_rate", listed)

    def test_parameters_are_checked_against_the_programs_flags(self):
        flag_classes = sweep_study.load_program_flags(str(TOY))
        sweep_study.check_parameters(self.sweep({"x": {"min": 0.0, "max": 1.0}, "layers": {"values": [1, 2]}}),
                                     flag_classes, [])
        with self.assertRaisesRegex(UsageError, r"^sweep.yaml: parameter 'output_dir' is set per trial by sweep.py; "
                                                r"remove it$"):
            sweep_study.check_parameters(self.sweep({"output_dir": {"value": "x"}}), flag_classes, [])
        with self.assertRaisesRegex(UsageError, r"^unknown parameter 'lyers' in sweep.yaml \(not a flag of .*"
                                                r"toy_program.py\); did you mean 'layers'\?"):
            sweep_study.check_parameters(self.sweep({"lyers": {"values": [1, 2]}}), flag_classes, [])
        with self.assertRaisesRegex(UsageError, r"^sweep.yaml: a sampled trial of .*toy_program.py would be refused: "
                                                r".*evals.*'three'"):
            sweep_study.check_parameters(self.sweep({"evals": {"values": ["three", "four"]}}), flag_classes, [])

    @parameterized.named_parameters(
        ("categorical", optuna.distributions.CategoricalDistribution(["a", "b"]), "a"),
        ("int", optuna.distributions.IntDistribution(1, 4), 2),
        ("float", optuna.distributions.FloatDistribution(0.0, 1.0), 0.5))
    def test_the_sample_checked_is_the_middle_of_each_range(self, distribution, value):
        self.assertEqual(sweep_study.midpoint(distribution), value)
        self.assertIs(type(sweep_study.midpoint(distribution)), type(value))


class TrialCountTest(SweepTestCase):

    def test_a_grid_runs_once_at_most(self):
        grid = self.sweep({"layers": {"values": [1, 2, 3]}, "optimizer": {"values": ["a", "b"]}}, method="grid")
        self.assertEqual(sweep_study.target_trials(grid, agent_args()), 6)
        self.assertEqual(sweep_study.target_trials(grid, agent_args(trials=4)), 4)
        self.assertEqual(sweep_study.target_trials(grid, agent_args(trials=100)), 6)

    def test_a_search_runs_trials_or_the_run_cap(self):
        searched = self.sweep({"x": {"min": 0.0, "max": 1.0}}, run_cap=8)
        self.assertEqual(sweep_study.target_trials(searched, agent_args()), 8)
        self.assertEqual(sweep_study.target_trials(searched, agent_args(trials=3)), 3)
        with self.assertRaisesRegex(UsageError, r"^method random needs --trials N \(or run_cap in sweep.yaml\)$"):
            sweep_study.target_trials(self.sweep({"x": {"min": 0.0, "max": 1.0}}), agent_args())

    @parameterized.named_parameters(("minimize_reached", "minimize", 0.2, True),
                                    ("minimize_not_yet", "minimize", 0.05, False),
                                    ("maximize_reached", "maximize", 0.2, False),
                                    ("maximize_below", "maximize", 0.1, True))
    def test_the_metrics_target_ends_the_sweep(self, goal, target, reached):
        sweep = self.sweep({"x": {"min": 0.0, "max": 1.0}}, metric={"name": "eval_loss", "goal": goal,
                                                                    "target": target})
        study = self.study(sweep)
        self.assertFalse(sweep_study.target_reached(study, sweep))  # no completed trial yet
        study.tell(study.ask(), 0.1)
        self.assertEqual(sweep_study.target_reached(study, sweep), reached)


class AskAndRecordTest(SweepTestCase):

    def setUp(self):
        super().setUp()
        self.sweep_obj = self.sweep({"x": {"min": 0.0, "max": 1.0}})
        self.url = f"sqlite:///{self.dir}/sweep.db"
        self.study_obj = self.study(self.sweep_obj)

    def test_a_trial_is_asked_for_while_the_study_needs_one(self):
        first = sweep_study.next_trial(self.study_obj, self.sweep_obj, agent_args(), self.url, total=2)
        self.assertEqual(first.number, 0)
        self.assertIn(sweep_storage.AGENT_ATTR, self.study_obj.get_trials()[0].system_attrs)  # stamped by its agent
        sweep_study.next_trial(self.study_obj, self.sweep_obj, agent_args(), self.url, total=2)
        self.assertIsNone(sweep_study.next_trial(self.study_obj, self.sweep_obj, agent_args(), self.url, total=2))

    def test_a_surplus_trial_two_agents_asked_for_at_once_is_given_back(self):
        self.study_obj.tell(self.study_obj.ask(), 1.0)
        with mock.patch.object(self.study_obj, "get_trials", return_value=[]):  # the other agent's ask not seen
            self.assertIsNone(sweep_study.next_trial(self.study_obj, self.sweep_obj, agent_args(), self.url, total=1))
        surplus = self.study_obj.get_trials()[1]
        self.assertEqual((surplus.state, surplus.user_attrs["fail_reason"]),
                         (TrialState.FAIL, "surplus: the study already had 1 trials"))

    def test_outcomes_are_recorded(self):
        outcomes = [sweep_trial.TrialOutcome("complete", value=0.25), sweep_trial.TrialOutcome("pruned"),
                    sweep_trial.TrialOutcome("fail", detail="exit code 1; stderr: ...boom",
                                             reported=("eval_loss",))]
        for outcome in outcomes:
            state = sweep_study.record_outcome(self.study_obj, self.sweep_obj, self.study_obj.ask(), outcome)
            self.assertEqual(state, outcome.state)
        trials = self.study_obj.get_trials()
        self.assertEqual([t.state for t in trials], [TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL])
        self.assertEqual((trials[0].value, trials[2].user_attrs["fail_reason"]), (0.25, "exit code 1; stderr: ...boom"))

    def test_a_metric_the_program_never_reports_is_bad_input(self):
        outcome = sweep_trial.TrialOutcome("fail", detail="metric 'eval_loss' missing",
                                           reported=("eval_accuracy", "loss"))
        with self.assertRaisesRegex(UsageError, r"^metric 'eval_loss' of sweep.yaml is never reported by .*"
                                                r"toy_program.py; it reported: eval_accuracy, loss$"):
            sweep_study.record_outcome(self.study_obj, self.sweep_obj, self.study_obj.ask(), outcome)
        self.assertEqual(self.study_obj.get_trials()[0].state, TrialState.FAIL)  # recorded before refusing


class StudyAndFoldersTest(SweepTestCase):

    def test_a_study_is_created_once_and_found_again(self):
        sweep = self.sweep({"x": {"min": 0.0, "max": 1.0}}, metric={"name": "eval_accuracy", "goal": "maximize"})
        url = f"sqlite:///{self.dir}/sweep.db"
        created = sweep_study.open_study(sweep, agent_args(), url, create=True)
        self.assertEqual((created.study_name, created.direction), ("sweep", optuna.study.StudyDirection.MAXIMIZE))
        created.tell(created.ask(), 0.5)
        again = sweep_study.open_study(sweep, agent_args(), url, create=True)
        self.assertLen(again.trials, 1)
        self.assertLen(sweep_study.open_study(sweep, agent_args(), url, create=False).trials, 1)

    def test_a_report_of_a_study_that_does_not_exist_is_refused(self):
        url = f"sqlite:///{self.dir}/sweep.db"
        with self.assertRaisesRegex(UsageError, rf"^no study 'other' in sqlite:///{self.dir}/sweep.db; run the sweep "
                                                "first$"):
            sweep_study.open_study(self.sweep({"x": {"value": 1}}), agent_args(study_name="other"), url, create=False)

    def test_sweep_folders(self):
        sweep_study.make_sweep_folders(self.dir / "sweep", f"sqlite:///{self.dir}/sweep/deeper/sweep.db",
                                       agent_args())
        self.assertTrue((self.dir / "sweep" / "deeper").is_dir())
        (self.dir / "file").write_text("x")
        with self.assertRaisesRegex(UsageError, rf"^--output_dir {self.dir}/file is an existing file; give a folder"):
            sweep_study.make_sweep_folders(self.dir / "file", f"sqlite:///{self.dir}/s.db", agent_args())
        with self.assertRaisesRegex(UsageError, rf"^--storage sqlite:///{self.dir}/file/s.db: cannot create folder "
                                                rf"{self.dir}/file \(.*\); give a writable path$"):
            sweep_study.make_sweep_folders(self.dir / "sweep", f"sqlite:///{self.dir}/file/s.db",
                                           agent_args(storage="given"))
        with self.assertRaisesRegex(UsageError, rf"^--output_dir {self.dir}/file/sweep: cannot create folder"):
            sweep_study.make_sweep_folders(self.dir / "file" / "sweep", f"sqlite:///{self.dir}/file/sweep/s.db",
                                           agent_args())
        sweep_study.make_sweep_folders(self.dir / "sweep", "postgresql://u@host/db", agent_args())  # no folder


if __name__ == "__main__":
    absltest.main()
