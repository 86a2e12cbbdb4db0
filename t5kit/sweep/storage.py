"""Where a sweep's Optuna study lives, and how agents sharing it stay consistent.

    sqlite:///runs/sweeps/x/sweep.db          one machine (the default)
    journal:///shared/fs/x/sweep.journal      several nodes on a shared filesystem, no server
    postgresql://user:pass@host/db            several nodes with a database server (also mysql://)

Agents that die leave RUNNING trials behind. Each agent stamps its trials with host, pid and a heartbeat; a
RUNNING trial whose agent is gone (same host, pid dead) or whose heartbeat is older than STALE_HEARTBEATS
intervals is marked FAIL, so it counts towards --trials and is never run twice (rerun with a larger --trials to
replace it). Journal storage has no Optuna heartbeat, hence this one for every storage.
"""
import contextlib
import fcntl
import logging
import os
import socket
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from t5kit.errors import UsageError

logger = logging.getLogger(__name__)

STALE_HEARTBEATS = 3  # missed heartbeats before another agent declares a trial's agent dead
SQLITE_BUSY_TIMEOUT_S = 60  # agents sharing one SQLite file wait this long for its write lock
SERVER_CONNECT_TIMEOUT_S = 10
SCHEMA_ATTEMPTS = 6  # tries at opening a fresh database whose tables other agents are creating at the same time
JOURNAL_PREFIX = "journal://"
POSTGRES_URL, POSTGRES_DRIVER_URL = "postgresql://", "postgresql+psycopg://"
AGENT_ATTR, HEARTBEAT_ATTR, FAIL_REASON_ATTR = "sweep_agent", "sweep_heartbeat", "fail_reason"


def storage_file(url):
    """The local file of a sqlite/journal URL (its lock sits beside it), or None for a database server."""
    if url.startswith(JOURNAL_PREFIX):
        return Path(url[len(JOURNAL_PREFIX):])
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///"):])
    return None


def open_storage(url):
    """An Optuna storage for the URL; an unreachable or unknown one is one UsageError line."""
    path = storage_file(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if url.startswith(JOURNAL_PREFIX):
            backend = optuna.storages.journal.JournalFileBackend(str(path))
            return optuna.storages.JournalStorage(backend)
        connect_args = ({"timeout": SQLITE_BUSY_TIMEOUT_S} if url.startswith("sqlite") else
                        {"connect_timeout": SERVER_CONNECT_TIMEOUT_S} if url.startswith(("postgres", "mysql")) else {})
        return open_database(with_driver(url), connect_args)
    except ImportError as err:
        raise UsageError(f"--storage {redact(url)}: database driver missing ({err}); pip install 'psycopg[binary]' "
                         "(PostgreSQL) or PyMySQL (MySQL)") from None
    except Exception as err:  # sqlalchemy raises many types for a bad URL or an unreachable server
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"--storage {redact(url)} cannot be opened: {first}") from None


def open_database(url, connect_args, attempts=SCHEMA_ATTEMPTS):
    """RDBStorage on a database server. Agents started at once on a fresh database all create Optuna's tables, and
    the server refuses all but one (a duplicate type or table): the others try again, and find the tables made."""
    import sqlalchemy.exc

    for attempt in range(1, attempts + 1):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": connect_args})
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            if attempt == attempts:
                raise
            logger.info("another agent is creating the study tables in %s; trying again", redact(url))
            time.sleep(attempt)


def with_driver(url):
    """A postgresql:// URL names psycopg (3), the driver requirements.txt installs: SQLAlchemy's default for it is
    psycopg2 before 2.1 and psycopg from 2.1 on. A URL that names its driver (postgresql+psycopg2://) keeps it."""
    return POSTGRES_DRIVER_URL + url[len(POSTGRES_URL):] if url.startswith(POSTGRES_URL) else url


def redact(url):
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest and ":" in rest.split("@")[0]:
        rest = rest.split(":")[0] + ":***@" + rest.split("@", 1)[1]
    return scheme + sep + rest


@contextlib.contextmanager
def agents_lock(url):
    """Serialises agents sharing a local store while they create it (two creating SQLite tables at once collide)
    and while they count-then-ask; a server store relies on the surplus check in sweep.py (a trial numbered past
    --trials is given back as FAIL). Not `<file>.lock`: JournalFileBackend's own lock is that symlink."""
    path = storage_file(url)
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.agents.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def stamp_agent(study, trial):
    # The heartbeat first: another agent judges a trial once it carries AGENT_ATTR, and one read between the two
    # writes would take a missing heartbeat for a silent agent and fail a trial that has just started.
    beat(study, trial)
    study._storage.set_trial_system_attr(trial._trial_id, AGENT_ATTR, {"host": socket.gethostname(),
                                                                       "pid": os.getpid()})


def beat(study, trial):
    study._storage.set_trial_system_attr(trial._trial_id, HEARTBEAT_ATTR, time.time())


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def stale_reason(frozen, heartbeat_interval, now):
    agent = frozen.system_attrs.get(AGENT_ATTR)
    if agent is None:
        return None  # started by something else (e.g. study.optimize): not ours to judge
    if agent["host"] == socket.gethostname() and agent["pid"] != os.getpid() and not pid_alive(agent["pid"]):
        return f"agent pid {agent['pid']} on {agent['host']} died while the trial ran"
    last = frozen.system_attrs.get(HEARTBEAT_ATTR, 0)
    if now - last > STALE_HEARTBEATS * heartbeat_interval:
        return f"agent pid {agent['pid']} on {agent['host']} silent for {now - last:.0f}s"
    return None


def fail_stale_trials(study, heartbeat_interval):
    """Marks RUNNING trials of dead agents FAIL (with the reason); returns their numbers."""
    failed, now = [], time.time()
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        reason = stale_reason(frozen, heartbeat_interval, now)
        if reason is None:
            continue
        try:
            study._storage.set_trial_user_attr(frozen._trial_id, FAIL_REASON_ATTR, reason)
            study._storage.set_trial_state_values(frozen._trial_id, TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another agent got there first
        logger.warning("trial %d marked FAIL: %s", frozen.number, reason)
        failed.append(frozen.number)
    return failed
