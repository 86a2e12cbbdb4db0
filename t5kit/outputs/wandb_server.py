"""Whether the W&B server answers, asked before a run reports to it online: seconds, not wandb.init's minutes.

    wandb_server.check_before_run(training_args.report_to)   # step 2 of the training scripts
    python -m scripts.check_wandb_server                    # slurm/wandb_sweep_agents.sbatch, before `wandb agent`

A compute node without outbound network would otherwise wait in wandb.init for about two minutes and die with its
traceback, after config.yaml and out.log are written. Here the server gets one HTTP request (any answer, an error
status too, counts) with WANDB_SERVER_TIMEOUT_S to connect and as long to answer; no answer is one error line
(exit 2) before the output folder is touched, saying how to log offline and sync later. No fall-back to offline
mode: a run that asked for the live dashboard gets it or says why not, and a W&B sweep agent cannot work offline.
The mode and the server are read as wandb.init reads them (its settings files, then WANDB_* variables), without
starting wandb.
"""
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path

from t5kit.errors import UsageError

WANDB_SERVER_TIMEOUT_S = 5.0  # per connect and per answer; a W&B server answers in well under a second
ONLINE_MODES = ("online", "run", "shared")  # wandb's modes that talk to the server (offline, dryrun, disabled don't)


def wandb_settings(environ=None):
    """wandb's Settings as wandb.init resolves them: the settings files (`wandb offline`, `wandb login --host`),
    then WANDB_* variables. A fresh object: wandb's own process-wide settings are neither loaded nor frozen here."""
    import wandb

    environ = dict(os.environ if environ is None else environ)
    settings = wandb.Settings()
    settings.settings_system = str(Path(environ.get("WANDB_CONFIG_DIR") or "~/.config/wandb").expanduser()
                                   / "settings")
    settings.update_from_system_settings()
    settings.update_from_env_vars(environ)
    return settings


def unanswered(url, timeout_s=None):
    """None if `url` answers HTTP within timeout_s (None: WANDB_SERVER_TIMEOUT_S), else why not ("connection
    refused", "no answer in 5 s")."""
    timeout_s = WANDB_SERVER_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        urllib.request.urlopen(url, timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return None  # an HTTP status is an answer: the server is there
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return f"no answer in {timeout_s:g} s"
        return (getattr(reason, "strerror", None) or str(reason)).lower()
    return None


def check_server(fix, environ=None, timeout_s=None, who="--report_to wandb", offline_too=False):
    """Raises one UsageError line naming the server, why it did not answer and `fix` (formatted with the offline
    run folder, {wandb_dir}) when W&B is online (or `offline_too`) and its server does not answer; returns the
    server's URL, or None offline (nothing asked)."""
    settings = wandb_settings(environ)
    if settings.mode not in ONLINE_MODES and not offline_too:
        return None
    reason = unanswered(settings.base_url, timeout_s)
    if reason is not None:
        raise UsageError(f"{who}: the W&B server {settings.base_url} does not answer ({reason}; WANDB_MODE="
                         f"{settings.mode}); {fix.format(wandb_dir=settings.wandb_dir)}")
    return settings.base_url


RUN_FIX = ("on a node without network, run with WANDB_MODE=offline (the run logs into {wandb_dir}/offline-run-*), "
           "then `wandb sync {wandb_dir}/offline-run-*` from a node with network")


def check_before_run(report_to, environ=None, timeout_s=None):
    """Step 2 of the training scripts: with `wandb` among --report_to (HF has resolved 'all' by then), the server
    must answer before anything is written. Every process asks, so that all of them stop alike."""
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    if "wandb" in names:
        return check_server(RUN_FIX, environ, timeout_s)
    return None
