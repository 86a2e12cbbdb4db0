"""outputs/loss_plot.py: loss_curve.png, the training loss (and its z-loss term), the evaluation loss and the
evaluation metric against the optimizer step, written atomically as a PNG without pyplot's global state."""
from pathlib import Path
from unittest import mock

import matplotlib.axes
from absl.testing import absltest, parameterized

from t5kit.outputs import loss_plot
from t5kit.outputs.loss_plot import plot_loss_curve

HISTORY = [{"step": 1, "loss": 5.0, "learning_rate": 1e-3}, {"step": 2, "loss": 4.0},
           {"step": 2, "eval_loss": 4.5, "eval_accuracy": 0.5}, {"step": 3, "loss": 3.5},
           {"step": 4, "eval_loss": 4.1, "eval_accuracy": 0.75}, {"step": 4, "train_runtime": 9.0}]


def drawn_lines(history, path, metric_name=None):
    """(label, steps, values) of every line plot_loss_curve draws."""
    drawn, plot = [], matplotlib.axes.Axes.plot

    def recording_plot(ax, *args, **kwargs):
        drawn.append((kwargs.get("label"), list(args[0]), list(args[1])))
        return plot(ax, *args, **kwargs)

    with mock.patch.object(matplotlib.axes.Axes, "plot", recording_plot):
        plot_loss_curve(history, path, metric_name)
    return drawn


class LossPlotTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def test_series_takes_one_key_across_the_history(self):
        self.assertEqual(loss_plot.series(HISTORY, "loss"), ([1, 2, 3], [5.0, 4.0, 3.5]))
        self.assertEqual(loss_plot.series(HISTORY, "eval_accuracy"), ([2, 4], [0.5, 0.75]))
        self.assertEqual(loss_plot.series(HISTORY, "z_loss"), ([], []))

    def test_losses_and_the_metric_each_get_a_line(self):
        drawn = drawn_lines(HISTORY, str(self.dir / "curve.png"), metric_name="accuracy")
        self.assertEqual(drawn, [("train loss", [1, 2, 3], [5.0, 4.0, 3.5]), ("eval loss", [2, 4], [4.5, 4.1]),
                                 ("eval accuracy", [2, 4], [0.5, 0.75])])

    def test_without_a_metric_or_evaluations_only_the_training_loss(self):
        train_only = [entry for entry in HISTORY if "loss" in entry]
        self.assertEqual(drawn_lines(train_only, str(self.dir / "a.png"), metric_name="accuracy"),
                         [("train loss", [1, 2, 3], [5.0, 4.0, 3.5])])
        self.assertEqual([label for label, *_ in drawn_lines(HISTORY, str(self.dir / "b.png"))],
                         ["train loss", "eval loss"])

    def test_loss_curve_draws_the_term(self):
        history = [{"step": 1, "loss": 5.0, "z_loss": 0.01}, {"step": 2, "loss": 4.0, "z_loss": 0.009}]
        drawn, plot = [], matplotlib.axes.Axes.plot

        def recording_plot(ax, *args, **kwargs):
            drawn.append((kwargs.get("label"), list(args[1])))
            return plot(ax, *args, **kwargs)

        with mock.patch.object(matplotlib.axes.Axes, "plot", recording_plot):
            plot_loss_curve(history, str(self.dir / "curve.png"))
        self.assertIn(("train z-loss term", [0.01, 0.009]), drawn)
        self.assertTrue((self.dir / "curve.png").read_bytes().startswith(b"\x89PNG"))

    def test_the_png_replaces_an_old_one_whole(self):
        path = self.dir / "loss_curve.png"
        path.write_bytes(b"old")
        self.assertEqual(plot_loss_curve(HISTORY, path, "accuracy"), path)
        data = path.read_bytes()
        self.assertTrue(data.startswith(b"\x89PNG\r\n\x1a\n"))
        self.assertEqual(int.from_bytes(data[16:20], "big"), 700)  # 7 inches at 100 dpi
        self.assertEqual([p.name for p in self.dir.iterdir()], ["loss_curve.png"])  # no temporary file left


if __name__ == "__main__":
    absltest.main()
