"""scripts/check_wandb_server.py, which slurm/wandb_sweep_agents.sbatch runs before `wandb agent`: exit 0 when the
W&B server answers; one error line and exit 2 when it refuses or never answers, WANDB_MODE=offline included (an
agent fetches its runs from the server). The sbatch script stopping at it: tests/launch/test_slurm.py."""
import contextlib
import http.server
import io
import os
import threading
from unittest import mock

from absl.testing import absltest, parameterized

from scripts import check_wandb_server
from t5kit import cli
from t5kit.outputs import wandb_server
from tests.helpers import free_port, silent_listener


class CheckWandbServerTest(parameterized.TestCase):

    def test_a_server_that_answers_exits_0(self):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)  # 501s
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.shutdown)
        with mock.patch.dict(os.environ, {"WANDB_MODE": "online",
                                          "WANDB_BASE_URL": f"http://127.0.0.1:{server.server_port}"}):
            self.assertEqual(check_wandb_server.main([]), f"http://127.0.0.1:{server.server_port}")

    @parameterized.named_parameters(("refused_online", "refused", "online", "connection refused"),
                                    ("refused_offline", "refused", "offline", "connection refused"),
                                    ("silent", "silent", "online", "no answer in 0.5 s"))
    def test_a_server_that_does_not_answer_is_one_line_exit_2(self, server, mode, reason):
        # the real wait (5 s) shortened: a silent listener never answers, however long the script waits
        self.enter_context(mock.patch.object(wandb_server, "WANDB_SERVER_TIMEOUT_S", 0.5))
        with silent_listener() if server == "silent" else \
                contextlib.nullcontext(f"http://127.0.0.1:{free_port()}") as url:
            stderr = io.StringIO()
            env = {"WANDB_MODE": mode, "WANDB_BASE_URL": url, "WANDB_CONFIG_DIR": self.create_tempdir().full_path}
            with mock.patch.dict(os.environ, env), contextlib.redirect_stderr(stderr), \
                    self.assertRaises(SystemExit) as exit_info:
                cli.run_cli(lambda: check_wandb_server.main([]))
        self.assertEqual(exit_info.exception.code, 2)
        self.assertEqual(stderr.getvalue().splitlines(), [
            f"error: wandb agent: the W&B server {url} does not answer ({reason}; WANDB_MODE={mode}); "
            f"{check_wandb_server.AGENT_FIX}"])


if __name__ == "__main__":
    absltest.main()
