"""sweep/report.py: what a sweep leaves behind. One row per trial with the flag values its program received (not
Optuna's latent values), trials.csv and the logged table, the best trial, best_config.yaml (the base configs, then
its flags, list flags as lists, a fresh output_dir) that reruns it, and the plots, each skipped with its reason."""
import csv
import logging
from pathlib import Path

import optuna
import yaml
from absl.testing import absltest, parameterized
from optuna.trial import TrialState

from t5kit.sweep import report as sweep_report
from t5kit.sweep import space as sweep_space

optuna.logging.set_verbosity(optuna.logging.WARNING)


class ReportTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        spec = {"program": "p.py", "method": "random", "metric": {"name": "eval_loss", "goal": "minimize"},
                "parameters": {"learning_rate": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-2},
                               "train_files": {"values": ["a.txt", "b.txt"]}, "seed": {"value": 3}}}
        (self.dir / "s.yaml").write_text(yaml.safe_dump(spec))
        self.sweep = sweep_space.load_sweep(self.dir / "s.yaml")
        self.study = optuna.create_study(study_name="s", direction="minimize")

    def add_trial(self, value=None, state=TrialState.COMPLETE, reason=None):
        """A trial of the sweep, its flag values recorded as study.run_one records them; returns them."""
        trial = self.study.ask({p.name: p.distribution for p in self.sweep.searched})
        flags = sweep_space.trial_flags(self.sweep, trial.params)
        trial.set_user_attr(sweep_report.FLAGS_ATTR, flags)
        if reason:
            trial.set_user_attr("fail_reason", reason)
        if state == TrialState.COMPLETE:
            self.study.tell(trial, value)
        else:
            self.study.tell(trial, state=state)
        return flags

    def test_rows_hold_the_flags_the_program_received(self):
        flags = self.add_trial(2.0)
        self.add_trial(state=TrialState.FAIL, reason="exit code 1")
        rows = sweep_report.trial_rows(self.study, self.sweep)
        self.assertEqual(rows[0], {"number": 0, "state": "COMPLETE", "value": 2.0,
                                   "learning_rate": flags["learning_rate"], "train_files": flags["train_files"],
                                   "fail_reason": ""})
        self.assertEqual((rows[1]["state"], rows[1]["value"], rows[1]["fail_reason"]), ("FAIL", "", "exit code 1"))
        self.assertNotIn("seed", rows[0])  # a constant is no searched flag

    def test_trials_csv(self):
        self.assertIsNone(sweep_report.write_trials_table([], self.dir / "trials.csv"))
        self.assertFalse((self.dir / "trials.csv").exists())
        self.add_trial(2.0)
        self.add_trial(1.5)
        path = sweep_report.write_trials_table(sweep_report.trial_rows(self.study, self.sweep), self.dir / "t.csv")
        with open(path) as handle:
            rows = list(csv.DictReader(handle))
        self.assertEqual([(row["number"], row["state"], row["value"]) for row in rows],
                         [("0", "COMPLETE", "2.0"), ("1", "COMPLETE", "1.5")])
        self.assertEqual(list(rows[0]), ["number", "state", "value", "learning_rate", "train_files", "fail_reason"])

    def test_the_logged_table_aligns_cut_columns(self):
        self.assertEqual(sweep_report.format_table([]), "(no trials yet)")
        rows = [{"number": 0, "state": "COMPLETE", "value": 0.123456789, "a_very_long_flag_name": "x" * 30,
                 "fail_reason": "not shown"}]
        header, line = sweep_report.format_table(rows, columns_width=8).splitlines()
        self.assertEqual(header.split(), ["number", "state", "value", "a_very_l"])
        self.assertEqual(line.split(), ["0", "COMPLETE", "0.123457", "xxxxxxxx"])

    def test_best_config_reruns_the_best_trial(self):
        self.assertIsNone(sweep_report.best_trial(self.study))  # nothing completed
        self.add_trial(state=TrialState.PRUNED)
        self.assertIsNone(sweep_report.best_trial(self.study))
        self.add_trial(2.0)
        best_flags = self.add_trial(1.0)
        self.add_trial(3.0)
        best = sweep_report.best_trial(self.study)
        self.assertEqual(best.number, 2)
        base = self.dir / "base.yaml"
        base.write_text("model_size: t5-tiny\nlearning_rate: 0.5\nmax_steps: 10\n")
        config = sweep_report.best_config(best, [str(base)], self.dir, list_flags={"train_files"})
        self.assertEqual(config, {"model_size": "t5-tiny", "learning_rate": best_flags["learning_rate"],
                                  "max_steps": 10, "train_files": [best_flags["train_files"]], "seed": 3,
                                  "output_dir": str(self.dir / "best_run")})

    def test_the_report_writes_its_files_and_logs_the_table(self):
        for value in (2.0, 1.0, 3.0):
            self.add_trial(value)
        with self.assertLogs("t5kit.sweep.report", logging.INFO) as logs:
            rows = sweep_report.write_report(self.study, self.sweep, [], self.dir, list_flags={"train_files"})
        self.assertLen(rows, 3)
        self.assertTrue({"trials.csv", "best_config.yaml", "optimization_history.png"}
                        <= {p.name for p in self.dir.iterdir()})
        self.assertEqual(yaml.safe_load((self.dir / "best_config.yaml").read_text())["output_dir"],
                         str(self.dir / "best_run"))
        self.assertIn("best trial 1: eval_loss = 1; rerun it with: python p.py", "\n".join(logs.output))

    def test_without_a_completed_trial_no_best_config_and_no_plots(self):
        self.add_trial(state=TrialState.FAIL, reason="boom")
        with self.assertLogs("t5kit.sweep.report", logging.INFO) as logs:
            sweep_report.write_report(self.study, self.sweep, [], self.dir)
        self.assertEqual(sorted(p.name for p in self.dir.iterdir()), ["s.yaml", "trials.csv"])
        said = "\n".join(logs.output)
        self.assertIn("no completed trial: no best_config.yaml", said)
        self.assertIn("skipped optimization_history.png: no completed trial", said)
        self.assertIn("skipped param_importances.png: needs >= 2 completed trials whose searched parameters differ",
                      said)


if __name__ == "__main__":
    absltest.main()
