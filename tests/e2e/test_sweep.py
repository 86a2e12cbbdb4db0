"""sweep.py end to end: a real tiny pre-training sweep, agents sharing a study, resume after SIGKILL, failures,
and each bad input refused in one line with the study untouched. Most tests sweep tests/fixtures/toy_program.py
(sub-second trials); one runs pre_train_t5.py on real text."""
import contextlib
import csv
import importlib.util
import io
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import optuna
import pytest
import yaml
from absl.testing import absltest, parameterized
from optuna.trial import TrialState

from t5kit import cli
from t5kit.config import parsing
from t5kit.config.script_flags import PRETRAIN_FLAG_CLASSES
from t5kit.errors import UsageError
from t5kit.sweep import storage as sweep_storage
from tests.helpers import REPO, free_port, require, run_sweep, snapshot

TOY = REPO / "tests" / "fixtures" / "toy_program.py"
AGENT_TIMEOUT_S = 240
optuna.logging.set_verbosity(optuna.logging.WARNING)


def write_sweep(folder, parameters, program=TOY, **top):
    spec = {"name": "toy", "program": str(program), "method": "random",
            "metric": {"name": "eval/loss", "goal": "minimize"}, "parameters": parameters, **top}
    path = Path(folder) / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def toy_space(**constants):
    return {"x": {"distribution": "uniform", "min": 0.0, "max": 1.0}, "layers": {"values": [1, 2, 3]},
            **{name: {"value": value} for name, value in constants.items()}}


def load_trials(out, study="toy", storage=None):
    storage = storage or f"sqlite:///{Path(out).resolve() / 'sweep.db'}"
    return optuna.load_study(study_name=study, storage=sweep_storage.open_storage(storage)).get_trials()


# Where the PostgreSQL server cannot be installed or started, its tests skip and name why; .ci/run sets this to 1, so
# that a CI without the server fails instead of passing by skipping (as T5_REQUIRE_SHARED_DATA does for the data).
REQUIRE_POSTGRES_ENV = "T5_REQUIRE_POSTGRES"


def postgres_unavailable(reason):
    message = f"no PostgreSQL server for the sweep tests: {reason}"
    if os.environ.get(REQUIRE_POSTGRES_ENV) == "1":
        raise AssertionError(f"{message}; {REQUIRE_POSTGRES_ENV}=1 (.ci/run) makes this a failure, not a skip")
    raise unittest.SkipTest(message)


def postgres_binaries():
    """The folder of initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/VERSION/bin (the newest)."""
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).resolve().parent
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


@contextlib.contextmanager
def postgres_server():
    """A PostgreSQL server of the test's own: a cluster made by initdb in a temporary folder, listening on 127.0.0.1
    at a free port (trust authentication; its unix socket in that folder), stopped and removed after. Yields its
    URL. As root it runs as the `postgres` user the Debian package creates: postgres refuses to run as root."""
    if importlib.util.find_spec("psycopg") is None:
        postgres_unavailable("psycopg is not installed (requirements.txt lists psycopg[binary])")
    binaries = postgres_binaries()
    if binaries is None:
        postgres_unavailable("initdb and pg_ctl are not installed (apt-get install postgresql; .ci/run does it)")
    as_user = []
    folder = Path(tempfile.mkdtemp(prefix="t5-postgres-"))
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder)
            postgres_unavailable("running as root, and there is no `postgres` user to run the server as")
        os.chown(folder, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", free_port()

    def run(*command):
        return subprocess.run([*as_user, *map(str, command)], capture_output=True, text=True, timeout=120)

    started = run(binaries / "initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
    if started.returncode == 0:
        started = run(binaries / "pg_ctl", "-D", data, "-l", folder / "server.log", "-w", "-t", "60", "-o",
                      f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off", "start")
    if started.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        postgres_unavailable(f"{started.args[len(as_user)]} failed: {started.stderr.strip()[-500:]}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        run(binaries / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def start_agent(sweep_file, *args):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    return subprocess.Popen([sys.executable, str(REPO / "sweep.py"), str(sweep_file), *map(str, args)],
                            cwd=Path(sweep_file).parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.sweep_agent  # a sweep of real pre-training trials
class RealProgramSweepTest(parameterized.TestCase):

    def test_tiny_pretraining_sweep_writes_report(self):
        folder = Path(self.create_tempdir().full_path)
        constants = {"model_size": "t5-tiny", "tokenizer_name_or_path": str(require("t5_spiece")),
                     "train_files": str(require("gutenberg/austen-persuasion.txt")), "input_length": 64,
                     "max_steps": 2, "eval_strategy": "steps", "eval_steps": 1, "max_eval_samples": 8,
                     "per_device_eval_batch_size": 8, "per_device_train_batch_size": 4, "save_strategy": "no",
                     "use_cpu": True, "report_to": "none", "disable_tqdm": True}
        parameters = {"learning_rate": {"distribution": "log_uniform_values", "min": 1e-3, "max": 1e-1},
                      **{name: {"value": value} for name, value in constants.items()}}
        path = write_sweep(folder, parameters, program=REPO / "pre_train_t5.py")
        out = folder / "out"
        run_sweep([str(path), "--trials", "2", "--seed", "0", "--output_dir", str(out)])

        trials = load_trials(out)
        self.assertEqual([t.state for t in trials], [TrialState.COMPLETE] * 2)
        self.assertTrue(all(t.intermediate_values for t in trials))  # eval_log.jsonl fed the pruner channel
        rows = list(csv.DictReader((out / "trials.csv").open()))
        self.assertLen(rows, 2)
        self.assertEqual({r["state"] for r in rows}, {"COMPLETE"})
        for plot in ("optimization_history.png", "param_importances.png"):
            self.assertGreater((out / plot).stat().st_size, 1000, plot)
        best = yaml.safe_load((out / "best_config.yaml").read_text())
        best_trial = min(trials, key=lambda t: t.value)
        self.assertEqual(best["learning_rate"], best_trial.user_attrs["flags"]["learning_rate"])
        *_, training_args = parsing.parse_flags(PRETRAIN_FLAG_CLASSES, [str(out / "best_config.yaml")])
        self.assertEqual(training_args.learning_rate, best["learning_rate"])
        self.assertEqual(training_args.output_dir, str(out / "best_run"))
        # Each trial ran pre_train_t5.py into its own folder, which holds the run's log and model card.
        trial_dirs = sorted((out / "trials").iterdir())
        self.assertLen(trial_dirs, 2)
        for trial_dir in trial_dirs:
            self.assertIn("rank 0 INFO", (trial_dir / "out.log").read_text())
            self.assertTrue((trial_dir / "README.md").read_text().startswith("---\n"), trial_dir)


@pytest.mark.sweep_agent  # agent processes sharing a study, one SIGKILLed
class SharedStudyTest(parameterized.TestCase):

    @parameterized.named_parameters(("sqlite", "sqlite:///{}/sweep.db"), ("journal", "journal://{}/sweep.journal"))
    def test_two_agents_run_n_trials_in_total(self, storage_template):
        folder = Path(self.create_tempdir().full_path)
        path = write_sweep(folder, toy_space(evals=2, sleep_s=0.2))
        storage = storage_template.format(folder.resolve())
        agents = [start_agent(path, "--trials", 6, "--storage", storage, "--output_dir", folder / "out")
                  for _ in range(2)]
        for agent in agents:
            _, stderr = agent.communicate(timeout=AGENT_TIMEOUT_S)
            self.assertEqual(agent.returncode, 0, stderr[-2000:])
        trials = load_trials(folder / "out", storage=storage)
        self.assertEqual(sorted(t.number for t in trials), list(range(6)))
        self.assertEqual({t.state for t in trials}, {TrialState.COMPLETE})  # a rerun trial would FAIL (mkdir)
        self.assertLen(list((folder / "out" / "trials").iterdir()), 6)

    @pytest.mark.kill  # SIGKILLs an agent mid-trial
    def test_killed_agent_resumes_and_fails_its_running_trial(self):
        folder = Path(self.create_tempdir().full_path)
        path = write_sweep(folder, toy_space(evals=3, sleep_s=0.5))
        args = ["--trials", "3", "--heartbeat_interval", "1", "--output_dir", str(folder / "out")]
        agent = start_agent(path, *args)
        deadline = time.monotonic() + AGENT_TIMEOUT_S
        while not (folder / "out" / "trials" / "trial_0001").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        agent.kill()  # SIGKILL: no chance to record anything
        agent.communicate()
        self.assertEqual([t.state for t in load_trials(folder / "out")],
                         [TrialState.COMPLETE, TrialState.RUNNING])

        run_sweep([str(path), *args])
        trials = load_trials(folder / "out")
        self.assertEqual([t.state for t in trials], [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE])
        self.assertIn("died while the trial ran", trials[1].user_attrs["fail_reason"])

    @parameterized.named_parameters(("journal", "journal"), ("postgresql", "postgresql"))
    @pytest.mark.kill  # SIGKILLs one of three agents mid-trial
    def test_three_agents_one_killed_mid_trial_count_every_trial_once(self, kind):
        folder = Path(self.create_tempdir().full_path)
        total = 6
        journal = contextlib.nullcontext(f"journal://{folder.resolve()}/sweep.journal")
        with postgres_server() if kind == "postgresql" else journal as storage:
            path = write_sweep(folder, toy_space(evals=2, sleep_s=0.5))
            agents = [start_agent(path, "--trials", total, "--storage", storage, "--heartbeat_interval", 2,
                                  "--output_dir", folder / "out") for _ in range(3)]
            victim = agents[0]
            killed = self.wait_for_running_trial(victim, storage, folder / "out" / "trials")
            victim.kill()  # SIGKILL: nothing recorded; its trial stays RUNNING until another agent looks
            victim.communicate()
            for agent in agents[1:]:
                _, stderr = agent.communicate(timeout=AGENT_TIMEOUT_S)
                self.assertEqual(agent.returncode, 0, stderr[-2000:])
            trials = load_trials(folder / "out", storage=storage)

        self.assertEqual([t.number for t in trials], list(range(len(trials))))  # each trial once, none lost
        counted, surplus = trials[:total], trials[total:]  # surplus: two agents asked at once (a server store)
        self.assertEqual([t.state for t in counted],
                         [TrialState.FAIL if t.number == killed else TrialState.COMPLETE for t in counted])
        self.assertRegex(counted[killed].user_attrs["fail_reason"], f"agent pid {victim.pid} on .* (died|silent)")
        for trial in surplus:
            self.assertEqual(trial.state, TrialState.FAIL)
            self.assertIn("surplus", trial.user_attrs["fail_reason"])
        # every counted trial ran its program once, into its own folder (a second run would fail on mkdir)
        self.assertEqual(sorted(p.name for p in (folder / "out" / "trials").iterdir()),
                         [f"trial_{n:04d}" for n in range(total)])
        best = min((t for t in counted if t.state == TrialState.COMPLETE), key=lambda t: t.value)
        best_config = yaml.safe_load((folder / "out" / "best_config.yaml").read_text())
        self.assertEqual((best_config["x"], best_config["layers"]),
                         (best.user_attrs["flags"]["x"], best.user_attrs["flags"]["layers"]))

    def wait_for_running_trial(self, agent, storage, trials_dir):
        """The number of the trial `agent` runs, once its program made the trial's folder in `trials_dir`
        (a kill before that would leave a counted trial with no folder, and the test could not tell it ran once)."""
        deadline = time.monotonic() + AGENT_TIMEOUT_S
        while time.monotonic() < deadline:
            if agent.poll() is not None:
                self.fail(f"the agent ended before it ran a trial: {agent.communicate()[1][-3000:]}")
            with contextlib.suppress(Exception):  # no study, or no tables, yet
                for trial in load_trials(None, storage=storage):
                    stamp = trial.system_attrs.get(sweep_storage.AGENT_ATTR, {})
                    started = (trials_dir / f"trial_{trial.number:04d}").exists()
                    if trial.state == TrialState.RUNNING and stamp.get("pid") == agent.pid and started:
                        return trial.number
            time.sleep(0.2)
        self.fail(f"agent pid {agent.pid} ran no trial in {AGENT_TIMEOUT_S} s")

    def test_no_completed_trial_is_one_error_line_naming_the_first_failure(self):
        folder = Path(self.create_tempdir().full_path)
        path = write_sweep(folder, {"fail": {"value": True}, "evals": {"value": 1}, "x": {"values": [0.1, 0.2]}},
                           method="grid")
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as exit_info:
            cli.run_cli(lambda: run_sweep([str(path), "--output_dir", str(folder / "out")]))
        self.assertEqual(exit_info.exception.code, 2)
        errors = [line for line in stderr.getvalue().splitlines() if line.startswith("error:")]
        self.assertLen(errors, 1, stderr.getvalue())
        log = folder / "out" / "logs" / "trial_0000.stderr.log"
        self.assertEqual(errors[0], "error: no trial of study 'toy' completed: 2 of 2 failed; the first, trial 0: "
                                    f"Traceback: RuntimeError: toy failure on purpose (log: {log}); fix that, then "
                                    "rerun with a larger --trials (failed trials count towards it) or another "
                                    "--study_name")
        self.assertEqual([t.state for t in load_trials(folder / "out")], [TrialState.FAIL] * 2)
        self.assertTrue((folder / "out" / "trials.csv").is_file())  # the report is written all the same
        self.assertFalse((folder / "out" / "best_config.yaml").exists())

    def test_failing_trial_is_recorded_and_the_sweep_goes_on(self):
        folder = Path(self.create_tempdir().full_path)
        path = write_sweep(folder, {"fail": {"values": [True, False]}, "evals": {"value": 1}}, method="grid")
        with self.assertLogs("sweep", "WARNING") as logs:
            run_sweep([str(path), "--output_dir", str(folder / "out"), "--seed", "0"])
        trials = {t.params["fail"]: t for t in load_trials(folder / "out")}
        log = folder / "out" / "logs" / f"trial_{trials[True].number:04d}.stderr.log"
        self.assertIn(f"1 of 2 trials failed; the first, trial {trials[True].number}: Traceback: RuntimeError: toy "
                      f"failure on purpose (log: {log})", logs.output[-1])
        self.assertEqual(trials[True].state, TrialState.FAIL)
        self.assertIn("toy failure on purpose", trials[True].user_attrs["fail_reason"])
        self.assertEqual(trials[False].state, TrialState.COMPLETE)
        rows = list(csv.DictReader((folder / "out" / "trials.csv").open()))
        self.assertEqual(sorted(r["state"] for r in rows), ["COMPLETE", "FAIL"])


class BadInputTest(parameterized.TestCase):
    """One-line UsageError; the sweep folder (and so the study) is not created."""

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def assert_refused(self, parameters, message, extra=(), **top):
        path = write_sweep(self.dir, parameters, **top)
        before = snapshot(self.dir)
        with self.assertRaisesRegex(UsageError, message) as caught:
            run_sweep([str(path), "--trials", "2", "--output_dir", str(self.dir / "out"), *extra])
        self.assertNotIn("\n", str(caught.exception))
        self.assertEqual(snapshot(self.dir), before)

    @parameterized.named_parameters(
        ("unknown_method", {"method": "hyperopt"}, "unknown method 'hyperopt'; choices: grid, random, bayes"),
        ("unknown_feature", {"early_terminate": {"type": "envelope"}}, "unsupported early_terminate type"),
        ("run_cap_zero", {"run_cap": 0}, "run_cap: 0 must be a positive integer"),
        ("run_cap_not_a_number", {"run_cap": "abc"}, "run_cap: 'abc' must be a positive integer"),
        ("target_not_a_number", {"metric": {"name": "eval/loss", "goal": "minimize", "target": "low"}},
         "metric target 'low' must be a number"),
        ("max_iter_string", {"early_terminate": {"type": "hyperband", "max_iter": "27", "s": 2}},
         "early_terminate max_iter='27' must be an integer >= 1"),
        ("s_float", {"early_terminate": {"type": "hyperband", "max_iter": 27, "s": 1.5}},
         "early_terminate s=1.5 must be an integer >= 1"),
        ("eta_one", {"early_terminate": {"type": "hyperband", "min_iter": 1, "eta": 1}},
         "early_terminate eta=1 must be an integer >= 2"),
        ("min_iter_above_max_iter", {"early_terminate": {"type": "hyperband", "min_iter": 5, "max_iter": 2}},
         "early_terminate min_iter 5 > max_iter 2"),
        ("program_not_python", {"program": str(REPO / "README.md")}, "program: '.*README.md' is not a .py file"),
        ("program_missing", {"program": str(REPO / "no_such_program.py")},
         r"program: .*no_such_program.py \(sweep YAML key\) is not an existing .py file"),
    )
    def test_bad_sweep(self, top, message):
        self.assert_refused(toy_space(), message, **top)

    @parameterized.named_parameters(
        ("unknown_distribution", {"x": {"distribution": "gaussian", "mu": 0}}, "unknown distribution 'gaussian'"),
        ("min_above_max", {"x": {"distribution": "uniform", "min": 1.0, "max": 0.5}}, "min 1.0 > max 0.5"),
        ("unknown_parameter", {"lyers": {"values": [1, 2]}},
         "unknown parameter 'lyers' in sweep.yaml .not a flag of .*toy_program.py.; did you mean 'layers'"),
        ("bad_value_type", {"layers": {"values": ["many"]}}, "a sampled trial of .* would be refused"),
        ("output_dir_parameter", {"output_dir": {"value": "x"}}, "'output_dir' is set per trial"),
    )
    def test_bad_parameter(self, parameters, message):
        self.assert_refused(parameters, message)

    def test_unreachable_storage(self):
        self.assert_refused(toy_space(), r"--storage postgresql://nohost/db", extra=["--storage",
                                                                                     "postgresql://nohost/db"])

    def test_output_dir_is_a_file(self):
        (self.dir / "a_file").write_text("")
        self.assert_refused(toy_space(), "--output_dir .*a_file is an existing file; give a folder",
                            extra=["--output_dir", str(self.dir / "a_file")])

    def test_storage_folder_cannot_be_created(self):
        self.assert_refused(toy_space(), r"--storage sqlite:////proc/nope/x.db: cannot create folder /proc/nope",
                            extra=["--storage", "sqlite:////proc/nope/x.db"])

    @pytest.mark.slow  # a second interpreter
    def test_help_prints_usage_and_exits_0(self):
        agent = start_agent(self.dir / "any.yaml", "--help")
        stdout, stderr = agent.communicate(timeout=AGENT_TIMEOUT_S)
        self.assertEqual(agent.returncode, 0, stderr[-2000:])
        self.assertTrue(stdout.startswith("usage: python sweep.py SWEEP.yaml"), stdout[:200])
        self.assertIn("--trials", stdout)
        self.assertNotIn("error:", stderr)

    def test_short_help_exits_0_in_process(self):  # in process: a second interpreter start costs seconds
        out = io.StringIO()
        with contextlib.redirect_stdout(out), self.assertRaises(SystemExit) as caught:
            run_sweep(["-h"])
        self.assertEqual(caught.exception.code, 0)
        self.assertIn("--storage", out.getvalue())

    def test_metric_never_reported(self):
        path = write_sweep(self.dir, toy_space(evals=1), metric={"name": "eval/accuracy", "goal": "maximize"})
        with self.assertRaisesRegex(UsageError, "metric 'eval_accuracy' of sweep.yaml is never reported by "
                                                ".*toy_program.py; it reported: eval_loss"):
            run_sweep([str(path), "--trials", "3", "--output_dir", str(self.dir / "out")])
        self.assertEqual([t.state for t in load_trials(self.dir / "out")], [TrialState.FAIL])

    @pytest.mark.slow  # a second interpreter
    def test_command_line_exit_code_and_one_line_error(self):
        path = write_sweep(self.dir, toy_space(), method="hyperopt")
        agent = start_agent(path, "--trials", 2)
        _, stderr = agent.communicate(timeout=AGENT_TIMEOUT_S)
        self.assertEqual(agent.returncode, 2)
        self.assertEqual([line for line in stderr.splitlines() if line.startswith("error:")],
                         [line for line in stderr.splitlines() if "hyperopt" in line])
        self.assertFalse((self.dir / "runs").exists())


if __name__ == "__main__":
    absltest.main()
