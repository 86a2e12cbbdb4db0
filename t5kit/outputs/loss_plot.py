"""loss_curve.png: training loss (and its z-loss term), evaluation loss and the evaluation metric against the optimizer
step."""
from t5kit.outputs.atomic_files import atomic_write


def series(log_history, key):
    """(steps, values) of one logged key across Trainer's log_history."""
    points = [(entry["step"], entry[key]) for entry in log_history if key in entry]
    return [p[0] for p in points], [p[1] for p in points]


def plot_loss_curve(log_history, path, metric_name=None):
    """Writes the loss curve (and the eval metric on a second axis, when given) atomically to `path`."""
    from matplotlib.figure import Figure  # here, not at the top: 0.5 s of every script start

    fig = Figure(figsize=(7, 4))  # no pyplot: no display backend and no global figure state (clusters, CI)
    ax = fig.subplots()
    # z_loss (--z_loss): the auxiliary term the train loss includes, drawn on the same axis.
    for key, label in (("loss", "train loss"), ("eval_loss", "eval loss"), ("z_loss", "train z-loss term")):
        steps, values = series(log_history, key)
        if steps:
            ax.plot(steps, values, marker="o" if key == "eval_loss" else None, label=label,
                    linestyle="--" if key == "z_loss" else "-")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if metric_name:
        steps, values = series(log_history, f"eval_{metric_name}")
        if steps:
            metric_ax = ax.twinx()
            metric_ax.plot(steps, values, color="tab:green", marker="s", label=f"eval {metric_name}")
            metric_ax.set_ylabel(metric_name)
            more_handles, more_labels = metric_ax.get_legend_handles_labels()
            handles, labels = handles + more_handles, labels + more_labels
    ax.legend(handles, labels, loc="center right")
    fig.tight_layout()
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    return path
