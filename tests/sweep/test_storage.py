"""sweep/storage.py: where a sweep's study lives and how agents sharing it stay consistent. Local stores (SQLite, a
journal file) and their folder, a store that cannot be opened as one line with its password hidden, the agents'
lock, and RUNNING trials of dead or silent agents marked FAIL with the reason, while live ones and trials no agent
stamped are left alone."""
import fcntl
import os
import socket
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import optuna
from absl.testing import absltest, parameterized
from optuna.trial import TrialState

from t5kit.errors import UsageError
from t5kit.sweep import storage

optuna.logging.set_verbosity(optuna.logging.WARNING)


def dead_pid():
    """The pid of a process that has ended (and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


class UrlTest(parameterized.TestCase):

    @parameterized.named_parameters(("sqlite", "sqlite:///runs/x/sweep.db", Path("runs/x/sweep.db")),
                                    ("absolute", "sqlite:////shared/sweep.db", Path("/shared/sweep.db")),
                                    ("journal", "journal:///shared/x.journal", Path("/shared/x.journal")),
                                    ("server", "postgresql://u:p@host/db", None))
    def test_storage_file(self, url, path):
        self.assertEqual(storage.storage_file(url), path)

    @parameterized.named_parameters(
        ("password", "postgresql://me:s3cret@host:5432/db", "postgresql://me:***@host:5432/db"),
        ("no_password", "postgresql://me@host/db", "postgresql://me@host/db"),
        ("file", "sqlite:///runs/x.db", "sqlite:///runs/x.db"))
    def test_redact(self, url, shown):
        self.assertEqual(storage.redact(url), shown)


class OpenStorageTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    @parameterized.named_parameters(
        ("sqlite", "sqlite:///{dir}/deeper/sweep.db", optuna.storages.RDBStorage),
        ("journal", "journal:///{dir}/deeper/sweep.journal", optuna.storages.JournalStorage))
    def test_a_local_store_is_made_with_its_folder(self, template, kind):
        store = storage.open_storage(template.format(dir=self.dir))
        self.assertIsInstance(store, kind)
        self.assertTrue((self.dir / "deeper").is_dir())
        study = optuna.create_study(storage=store, study_name="s")
        study.tell(study.ask(), 1.0)
        self.assertLen(optuna.load_study(study_name="s", storage=storage.open_storage(
            template.format(dir=self.dir))).trials, 1)  # a second agent sees the first one's trial

    @parameterized.named_parameters(
        ("unknown_database", "bogus://host/db", r"^--storage bogus://host/db cannot be opened: "),
        ("unreachable_server", "postgresql://me:s3cret@127.0.0.1:1/db",
         r"^--storage postgresql://me:\*\*\*@127.0.0.1:1/db (cannot be opened: |: database driver missing)"))
    def test_a_store_that_cannot_be_opened_is_one_line(self, url, message):
        with self.assertRaisesRegex(UsageError, message) as raised:
            storage.open_storage(url)
        self.assertNotIn("s3cret", str(raised.exception))
        self.assertLen(str(raised.exception).splitlines(), 1)


class AgentsLockTest(parameterized.TestCase):

    def test_the_lock_is_exclusive_beside_the_store(self):
        folder = Path(self.create_tempdir().full_path) / "new"
        url = f"sqlite:///{folder}/sweep.db"
        with storage.agents_lock(url):
            lock = folder / "sweep.db.agents.lock"
            with open(lock) as other, self.assertRaises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another agent would wait here
        with open(lock) as other:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released

    def test_a_server_store_takes_no_file_lock(self):
        with storage.agents_lock("postgresql://u@host/db"):
            pass


def frozen(agent=None, heartbeat=None):
    attrs = {} if agent is None else {storage.AGENT_ATTR: agent}
    if heartbeat is not None:
        attrs[storage.HEARTBEAT_ATTR] = heartbeat
    return SimpleNamespace(system_attrs=attrs)


class StaleTrialsTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.study = optuna.create_study(storage=storage.open_storage(
            f"sqlite:///{self.create_tempdir().full_path}/sweep.db"), study_name="s")

    def test_stale_reasons(self):
        here, now = socket.gethostname(), time.time()
        self.assertIsNone(storage.stale_reason(frozen(), 60, now))  # not an agent's: not ours to judge
        self.assertIsNone(storage.stale_reason(frozen({"host": here, "pid": os.getpid()}, now - 100), 60, now))
        pid = dead_pid()
        self.assertEqual(storage.stale_reason(frozen({"host": here, "pid": pid}, now), 60, now),
                         f"agent pid {pid} on {here} died while the trial ran")
        self.assertEqual(storage.stale_reason(frozen({"host": "other-node", "pid": 7}, now - 181), 60, now),
                         "agent pid 7 on other-node silent for 181s")
        self.assertIsNone(storage.stale_reason(frozen({"host": "other-node", "pid": 7}, now - 179), 60, now))

    def test_pid_alive(self):
        self.assertTrue(storage.pid_alive(os.getpid()))
        self.assertFalse(storage.pid_alive(dead_pid()))

    def test_dead_agents_trials_are_failed_with_the_reason_live_ones_kept(self):
        live, dead, unstamped = self.study.ask(), self.study.ask(), self.study.ask()
        for trial in (live, dead):
            storage.stamp_agent(self.study, trial)
        pid = dead_pid()
        self.study._storage.set_trial_system_attr(dead._trial_id, storage.AGENT_ATTR,
                                                  {"host": socket.gethostname(), "pid": pid})
        self.assertEqual(storage.fail_stale_trials(self.study, heartbeat_interval=60), [dead.number])
        states = {t.number: t.state for t in self.study.get_trials()}
        self.assertEqual(states, {live.number: TrialState.RUNNING, dead.number: TrialState.FAIL,
                                  unstamped.number: TrialState.RUNNING})
        self.assertEqual(self.study.get_trials()[dead.number].user_attrs[storage.FAIL_REASON_ATTR],
                         f"agent pid {pid} on {socket.gethostname()} died while the trial ran")
        self.assertEqual(storage.fail_stale_trials(self.study, heartbeat_interval=60), [])  # once only

    def test_a_trial_read_while_it_is_stamped_is_not_failed(self):
        """Another agent's check between stamp_agent's two writes (the PostgreSQL three-agents race) keeps the trial."""
        trial, checks = self.study.ask(), []
        write = self.study._storage.set_trial_system_attr

        def write_then_another_agent_looks(trial_id, key, value):
            write(trial_id, key, value)
            checks.append(storage.fail_stale_trials(self.study, heartbeat_interval=1))
        with mock.patch.object(self.study._storage, "set_trial_system_attr", write_then_another_agent_looks):
            storage.stamp_agent(self.study, trial)
        self.assertEqual(checks, [[], []])
        self.assertEqual(self.study.get_trials()[trial.number].state, TrialState.RUNNING)

    def test_a_heartbeat_keeps_a_trial_alive(self):
        trial = self.study.ask()
        storage.stamp_agent(self.study, trial)
        self.study._storage.set_trial_system_attr(trial._trial_id, storage.AGENT_ATTR,
                                                  {"host": "other-node", "pid": 7})
        self.study._storage.set_trial_system_attr(trial._trial_id, storage.HEARTBEAT_ATTR, time.time() - 10)
        self.assertEqual(storage.fail_stale_trials(self.study, heartbeat_interval=1), [trial.number])
        trial = self.study.ask()
        storage.stamp_agent(self.study, trial)
        self.study._storage.set_trial_system_attr(trial._trial_id, storage.AGENT_ATTR,
                                                  {"host": "other-node", "pid": 7})
        storage.beat(self.study, trial)
        self.assertEqual(storage.fail_stale_trials(self.study, heartbeat_interval=1), [])


if __name__ == "__main__":
    absltest.main()
