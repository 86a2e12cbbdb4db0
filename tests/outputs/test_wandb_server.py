"""outputs/wandb_server.py: with W&B online, its server is asked once, in seconds, before a run writes anything; a
refused port and a listener that never answers are each one error line; offline, nothing is asked. Real servers:
an HTTP server this test starts, a port nothing listens on, a listener that never answers.
(The training scripts' refusal, folder untouched: tests/test_bad_inputs.py; the sweep agents': tests/scripts/.)"""
import http.server
import threading
import time

from absl.testing import absltest, parameterized

from t5kit.errors import UsageError
from t5kit.outputs import wandb_server
from tests.helpers import free_port, silent_listener


class AnsweringServer(http.server.BaseHTTPRequestHandler):
    """Answers every GET with `status`, as a W&B server answers an unauthenticated request with some status."""

    status = 200

    def do_GET(self):
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args):
        pass


def serve(status):
    handler = type("Handler", (AnsweringServer,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class WandbServerTest(parameterized.TestCase):

    def online(self, url, **extra):
        return {"WANDB_MODE": "online", "WANDB_BASE_URL": url, "WANDB_CONFIG_DIR": self.create_tempdir().full_path,
                **extra}

    @parameterized.named_parameters(("ok", 200), ("unauthorized", 401), ("not_found", 404))
    def test_a_server_that_answers_passes(self, status):
        server = serve(status)
        self.addCleanup(server.shutdown)
        url = f"http://127.0.0.1:{server.server_port}"
        self.assertEqual(wandb_server.check_before_run(["wandb"], self.online(url)), url)

    def test_a_refused_port_is_one_line_at_once(self):
        url = f"http://127.0.0.1:{free_port()}"
        start = time.monotonic()
        with self.assertRaises(UsageError) as caught:
            wandb_server.check_before_run(["tensorboard", "wandb"], self.online(url, WANDB_DIR="/runs/x"))
        self.assertLess(time.monotonic() - start, wandb_server.WANDB_SERVER_TIMEOUT_S)
        self.assertEqual(str(caught.exception),
                         f"--report_to wandb: the W&B server {url} does not answer (connection refused; "
                         "WANDB_MODE=online); on a node without network, run with WANDB_MODE=offline (the run logs "
                         "into /runs/x/wandb/offline-run-*), then `wandb sync /runs/x/wandb/offline-run-*` from a node "
                         "with network")

    def test_a_listener_that_never_answers_is_one_line_after_the_timeout(self):
        with silent_listener() as url:
            start = time.monotonic()
            with self.assertRaisesRegex(UsageError, f"the W&B server {url} does not answer \\(no answer in 1 s;"):
                wandb_server.check_before_run("wandb", self.online(url), timeout_s=1.0)
            self.assertLess(time.monotonic() - start, 10)  # seconds, not wandb.init's minutes

    @parameterized.named_parameters(("offline", {"WANDB_MODE": "offline"}), ("disabled", {"WANDB_MODE": "disabled"}),
                                    ("not_reported_to", {}, ["tensorboard"]), ("none", {}, []))
    def test_nothing_is_asked_offline_or_without_wandb(self, mode, report_to=("wandb",)):
        environ = {**self.online(f"http://127.0.0.1:{free_port()}"), **mode}
        self.assertIsNone(wandb_server.check_before_run(list(report_to), environ))

    def test_the_server_wandb_login_host_saved_is_the_one_asked(self):
        """`wandb login --host URL` keeps the server in WANDB_CONFIG_DIR/settings: wandb.init would use it."""
        config_dir = self.create_tempdir()
        url = f"http://127.0.0.1:{free_port()}"
        config_dir.create_file("settings", f"[default]\nbase_url = {url}\n")
        with self.assertRaisesRegex(UsageError, f"the W&B server {url} does not answer"):
            wandb_server.check_before_run(["wandb"], {"WANDB_MODE": "online", "WANDB_CONFIG_DIR": config_dir.full_path})


if __name__ == "__main__":
    absltest.main()
