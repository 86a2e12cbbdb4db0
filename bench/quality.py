"""Does pre-training pay? Fine-tuning accuracy from a pre-trained T5 against random init of the same shape.

    make bench-quality                     # the CPU recipe: --task_adaptive, SST-2/RTE/CoLA x 3 seeds, ~20 min
    python bench/quality.py --quick --task_adaptive   # ~5 min: 200 pre-training steps, one seed, SST-2 only
    python bench/quality.py --pretrain_config configs/pretrain_cpu.yaml --seeds 1 2 3 --tasks sst2 rte cola
    python bench/quality.py --task_adaptive --parallel 6 ...   # a GPU machine: 6 fine-tuning runs share the GPU

One run, all offline (../shared/data beside the repository):
1. Corpus: the 13 Project Gutenberg books (two of them Latin-1, read as such) and the stored WikiText-2, written as
   UTF-8 text; one book (--validation_book) is held out as the validation file. With --task_adaptive, each task's
   training inputs (no labels) become one more pre-training file.
2. Tokenizer: train_tokenizer.py on the training text (--vocab_size pieces + T5's 100 sentinels).
3. Pre-training: pre_train_t5.py with --pretrain_config (its model size, lengths and schedule; corpus, tokenizer and
   output folder are set here), saving a checkpoint at each of --curve_steps.
4. Fine-tuning: fine_tune_t5.py with --finetune_config on each task of --tasks and each seed of --seeds, from the
   pre-trained model and from random init of the same shape (--model_size of the pre-training config and the same
   tokenizer), with the same steps, learning rate and seeds; for the curve, SST-2 also from each checkpoint. Where
   the pre-training config starts from word vectors (--init_embeddings word_vectors), a third arm fine-tunes the
   pre-trained model's own starting point: the same word vectors and seed, no span-corruption step (one step at
   learning rate 0, which leaves every weight as built), so the report says what span corruption adds to them.
5. Report: per task the dev metric of both arms (mean +- sample std over seeds) and the difference; the pre-training
   figures (content accuracy, losses, tokens seen, minutes); quality.json and accuracy_vs_pretraining.png in
   --work_dir. Every step runs the entry script as a command, as a user would.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.paths import ROOT, SHARED_DATA
from t5kit.data.predict_inputs import read_rows
from t5kit.data.task_format import find_task, text_columns

LATIN1_BOOKS = ("chesterton-ball.txt", "shakespeare-caesar.txt")  # not UTF-8 (../shared/data/PROVENANCE.md)
TASK_FOLDERS = {"sst2": "SST-2", "rte": "RTE", "cola": "CoLA", "mrpc": "MRPC"}
TASK_METRICS = {"sst2": "eval_accuracy", "rte": "eval_accuracy", "cola": "eval_matthews_correlation",
                "mrpc": "eval_accuracy"}
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline",
           "TOKENIZERS_PARALLELISM": "false"}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work_dir", default="runs/bench_quality", help="Everything the run writes goes here.")
    parser.add_argument("--pretrain_config", default="configs/pretrain_cpu.yaml")
    parser.add_argument("--finetune_config", default="configs/finetune_cpu.yaml")
    parser.add_argument("--vocab_size", type=int, default=8000, help="SentencePiece pieces (sentinels on top).")
    parser.add_argument("--validation_book", default="chesterton-thursday.txt")
    parser.add_argument("--tasks", nargs="+", default=["sst2", "rte", "cola"], choices=list(TASK_FOLDERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--curve_steps", nargs="*", type=int, default=None,
                        help="Pre-training steps to fine-tune SST-2 from, besides 0 (random init) and the end. "
                             "Default: a quarter, a half and three quarters of the pre-training steps.")
    parser.add_argument("--pretrain_overrides", type=shlex.split, default=[],
                        help="Extra pre_train_t5.py flags, one string: --pretrain_overrides='--max_steps 800'.")
    parser.add_argument("--finetune_overrides", type=shlex.split, default=[],
                        help="Extra fine_tune_t5.py flags, one string: --finetune_overrides='--max_steps 300'.")
    parser.add_argument("--task_adaptive", action="store_true",
                        help="Pre-train on the training texts of every task of --tasks too (no labels; the tokenizer "
                             "still learns from the books and WikiText-2 alone): the recipe of "
                             "configs/pretrain_cpu.yaml.")
    parser.add_argument("--reuse", action="store_true",
                        help="Keep what --work_dir already holds (corpus, tokenizer, pre-training, fine-tunes) and "
                             "only run what is missing.")
    parser.add_argument("--parallel", type=int, default=1,
                        help="Fine-tuning runs at a time. 1 on a 2-core CPU (each run takes both cores); on a GPU "
                             "machine several small runs share the GPU (the GPU check runs its 6 at once).")
    parser.add_argument("--quick", action="store_true",
                        help="Shrink it for a check: 200 pre-training steps, seed 1, SST-2 (fine-tuning keeps its 300 "
                             "steps: after 100, both arms still predict the majority class).")
    args = parser.parse_args(argv)
    if args.parallel < 1:
        parser.error(f"--parallel {args.parallel}: give 1 or more fine-tuning runs at a time")
    if args.quick:
        args.tasks, args.seeds, args.curve_steps = ["sst2"], [1], [100]
        args.pretrain_overrides = ["--max_steps", "200", "--eval_steps", "100", "--save_steps", "100",
                                   *args.pretrain_overrides]
    return args


def run(command, log_path):
    """Runs one entry script (2 threads: the whole machine); its output goes to log_path. Returns seconds."""
    start = time.time()
    with open(log_path, "w") as log:
        result = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, **OFFLINE, OMP_NUM_THREADS="2"))
    if result.returncode:
        raise SystemExit(f"{' '.join(map(str, command))} failed (exit {result.returncode}); see {log_path}")
    # one line a finished step, so that a run stopped from outside (the GPU check's budget) shows how far it got
    print(f"[quality] {Path(log_path).stem}: done in {time.time() - start:.0f} s", flush=True)
    return time.time() - start


def write_corpus(folder, validation_book):
    """train.txt (12 books + WikiText-2) and validation.txt (the held-out book), UTF-8, documents as paragraphs."""
    folder.mkdir(parents=True, exist_ok=True)
    books = sorted((SHARED_DATA / "gutenberg").glob("*.txt"))
    if not books:
        raise SystemExit(f"bench/quality.py needs {SHARED_DATA}/gutenberg (../shared/data beside the repository)")
    train = [book.read_text(encoding="latin-1" if book.name in LATIN1_BOOKS else "utf-8") for book in books
             if book.name != validation_book]
    # WikiText-2 holds one paragraph per line: a blank line between them makes each a document.
    wiki = (SHARED_DATA / "wikitext-2-raw" / "wiki.test.raw").read_text(encoding="utf-8")
    train.append("\n\n".join(line.strip() for line in wiki.splitlines() if line.strip()))
    (folder / "train.txt").write_text("\n\n".join(text.replace("\r\n", "\n") for text in train), encoding="utf-8")
    (folder / "validation.txt").write_text((SHARED_DATA / "gutenberg" / validation_book).read_text(),
                                           encoding="utf-8")


def task_text_file(work, task):
    return work / "corpus" / f"{task}_train.txt"


def write_task_texts(folder, task):
    """TASK_train.txt: the task's training inputs without their labels, one document a row (a pair task's two
    sentences as two lines of one document), read as predict_t5.py reads the official file."""
    task_vals = find_task(task)
    rows, _ = read_rows(SHARED_DATA / "glue" / TASK_FOLDERS[task] / task_vals["data_files"]["train"], task_vals)
    documents = ["\n".join(row[column].strip() for column in text_columns(task_vals))
                 for _, row in rows if row is not None]
    (folder / f"{task}_train.txt").write_text("\n\n".join(documents) + "\n", encoding="utf-8")


def pretrain_command(args, work, tokenizer):
    task_files = [str(task_text_file(work, task)) for task in args.tasks] if args.task_adaptive else []
    return [sys.executable, "pre_train_t5.py", args.pretrain_config, "--tokenizer_name_or_path", str(tokenizer),
            "--train_files", str(work / "corpus" / "train.txt"), *task_files, "--validation_files",
            str(work / "corpus" / "validation.txt"), "--output_dir", str(work / "pretrain"),
            "--overwrite_output_dir", "true", *args.pretrain_overrides]


def read_config_value(config, key):
    import yaml

    return yaml.safe_load((ROOT / config).read_text()).get(key)


def pretrain_setting(args, key):
    """A pre-training flag's value: from --pretrain_overrides when given there, else from --pretrain_config."""
    flag = f"--{key}"
    given = [value for name, value in zip(args.pretrain_overrides, args.pretrain_overrides[1:]) if name == flag]
    return given[-1] if given else read_config_value(args.pretrain_config, key)


def word_vectors_only_command(args, work, tokenizer):
    """The pre-training command stopped before its first update: one step at learning rate 0 saves the model as
    built (the word-vector embeddings and the seed's random init of everything else), with no checkpoints. The
    flags given last win, so these override --pretrain_overrides too (a --param_group_lr there would otherwise give
    its groups their own learning rates for that step)."""
    return [*pretrain_command(args, work, tokenizer), "--output_dir", str(work / "word_vectors_only"),
            "--max_steps", "1", "--learning_rate", "0", "--param_group_lr", ".*=0", "--warmup_steps", "0",
            "--eval_strategy", "no", "--save_strategy", "no"]


def finetune(args, work, task, seed, arm, model_args):
    """One fine-tuning run; returns its dev metric (from metrics.json), reusing a finished run under --reuse."""
    out = work / "finetune" / f"{task}_{arm}_seed{seed}"
    metrics_file = out / "metrics.json"
    if not (args.reuse and metrics_file.is_file()):
        command = [sys.executable, "fine_tune_t5.py", args.finetune_config, "--dataset_name", task, "--data_dir",
                   str(SHARED_DATA / "glue" / TASK_FOLDERS[task]), "--output_dir", str(out),
                   "--overwrite_output_dir", "true", "--seed", str(seed), *model_args, *args.finetune_overrides]
        run(command, work / "logs" / f"{out.name}.log")
        shutil.rmtree(out / "checkpoint-best", ignore_errors=True)
        for checkpoint in out.glob("checkpoint-*"):  # the bench keeps metrics, not checkpoints
            shutil.rmtree(checkpoint)
    return json.loads(metrics_file.read_text())[TASK_METRICS[task]]


def finetune_all(args, work, runs):
    """{(task, arm): [dev metric per seed of --seeds]} of every (task, arm, model flags) in runs, --parallel runs at a
    time (threads, each waiting on its fine_tune_t5.py process)."""
    with ThreadPoolExecutor(args.parallel) as pool:
        pending = {(task, arm): [pool.submit(finetune, args, work, task, seed, arm, model_args) for seed in args.seeds]
                   for task, arm, model_args in runs}
        return {key: [future.result() for future in futures] for key, futures in pending.items()}


def report_line(task, scores, num_seeds):
    """Each arm's mean +- std, the pre-trained arm's gain over random init and, with the third arm, over the word
    vectors alone (what span corruption added), and the per-seed figures."""
    (p_mean, p_std), (r_mean, r_std) = mean_std(scores["pretrained"]), mean_std(scores["random_init"])
    line = (f"{task} ({TASK_METRICS[task].removeprefix('eval_')}, {num_seeds} seeds): pre-trained "
            f"{p_mean:.1f} +- {p_std:.1f} vs random init {r_mean:.1f} +- {r_std:.1f} -> {p_mean - r_mean:+.1f}")
    if "word_vectors_only" in scores:
        w_mean, w_std = mean_std(scores["word_vectors_only"])
        line += f"; word vectors alone {w_mean:.1f} +- {w_std:.1f} -> span corruption adds {p_mean - w_mean:+.1f}"
    per_seed = zip(*(scores[arm] for arm in scores))
    return line + f" (per seed, {'/'.join(scores)}: {', '.join('/'.join(f'{v:.1f}' for v in s) for s in per_seed)})"


def mean_std(values):
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def pretraining_figures(pretrain_dir, minutes):
    metrics = json.loads((pretrain_dir / "metrics.json").read_text())
    config = json.loads((pretrain_dir / "config.json").read_text())
    import yaml

    derived = yaml.safe_load((pretrain_dir / "config.yaml").read_text())["derived"]
    return {"steps": metrics.get("train_steps", None) or max(e.get("step", 0) for e in metrics["log_history"]),
            "eval_loss": metrics["eval_loss"], "eval_content_accuracy": metrics["eval_content_accuracy"],
            "eval_content_loss": metrics["eval_content_loss"], "eval_token_accuracy": metrics["eval_token_accuracy"],
            "tokens_seen": derived["tokens_per_optimizer_step"] * max(e.get("step", 0)
                                                                      for e in metrics["log_history"]),
            "parameters": derived["parameters"], "minutes": minutes, "d_model": config["d_model"]}


def plot_curve(curve, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = sorted(curve)
    means = [mean_std(curve[s])[0] for s in steps]
    stds = [mean_std(curve[s])[1] for s in steps]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.errorbar(steps, means, yerr=stds, marker="o", capsize=4)
    ax.set_xlabel("pre-training steps (0 = random init)")
    ax.set_ylabel("SST-2 dev accuracy (%)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    work = (ROOT / args.work_dir).resolve()
    (work / "logs").mkdir(parents=True, exist_ok=True)
    started = time.time()

    # 1-2. Corpus and tokenizer.
    tokenizer = work / "tokenizer"
    if not (args.reuse and (tokenizer / "tokenizer_config.json").is_file()):
        write_corpus(work / "corpus", args.validation_book)
        run([sys.executable, "train_tokenizer.py", "--train_files", str(work / "corpus" / "train.txt"),
             "--output_dir", str(tokenizer), "--vocab_size", str(args.vocab_size), "--overwrite_output_dir", "true"],
            work / "logs" / "tokenizer.log")
    for task in args.tasks if args.task_adaptive else []:
        if not task_text_file(work, task).is_file():
            write_task_texts(work / "corpus", task)

    # 3. Pre-training, with the checkpoints the curve fine-tunes from.
    pretrain_dir = work / "pretrain"
    max_steps = int(pretrain_setting(args, "max_steps"))
    curve_steps = args.curve_steps if args.curve_steps is not None else [max_steps // 4, max_steps // 2,
                                                                         3 * max_steps // 4]
    minutes_file = pretrain_dir / "bench_minutes.json"
    if not (args.reuse and minutes_file.is_file()):
        save = ["--save_strategy", "steps", "--save_steps", str(min(curve_steps) if curve_steps else max_steps),
                "--save_total_limit", "100"]
        seconds = run(pretrain_command(args, work, tokenizer) + save, work / "logs" / "pretrain.log")
        minutes_file.write_text(json.dumps({"minutes": seconds / 60}))
    pretraining = pretraining_figures(pretrain_dir, json.loads(minutes_file.read_text())["minutes"])

    # 4. Fine-tuning: both arms, every task and seed; the curve on SST-2.
    # Random init of the pre-trained model's shape: its preset and any --config_overrides.
    random_init = ["--model_size", pretrain_setting(args, "model_size"), "--tokenizer_name_or_path", str(tokenizer)]
    config_overrides = pretrain_setting(args, "config_overrides")
    if config_overrides:
        random_init += ["--config_overrides", config_overrides]
    arms = {"pretrained": ["--model_name_or_path", str(pretrain_dir)], "random_init": random_init}
    if pretrain_setting(args, "init_embeddings") == "word_vectors":
        if not (args.reuse and (work / "word_vectors_only" / "model.safetensors").is_file()):
            run(word_vectors_only_command(args, work, tokenizer), work / "logs" / "word_vectors_only.log")
        arms["word_vectors_only"] = ["--model_name_or_path", str(work / "word_vectors_only")]
    checkpoints = {f"step{step}": ["--model_name_or_path", str(pretrain_dir / f"checkpoint-{step}")]
                   for step in curve_steps if "sst2" in args.tasks and (pretrain_dir / f"checkpoint-{step}").is_dir()}
    runs = [(task, arm, model_args) for task in args.tasks for arm, model_args in arms.items()]
    runs += [("sst2", arm, model_args) for arm, model_args in checkpoints.items()]
    scores = finetune_all(args, work, runs)
    results = {task: {arm: scores[task, arm] for arm in arms} for task in args.tasks}
    curve = {0: results.get("sst2", {}).get("random_init", []), max_steps: results.get("sst2", {}).get("pretrained")}
    curve.update({int(arm.removeprefix("step")): scores["sst2", arm] for arm in checkpoints})
    if "sst2" in args.tasks:
        plot_curve({s: v for s, v in curve.items() if v}, work / "accuracy_vs_pretraining.png")

    # 5. Report.
    report = {"pretraining": pretraining, "tasks": results, "curve": {str(k): v for k, v in curve.items() if v},
              "seeds": args.seeds, "pretrain_config": args.pretrain_config, "finetune_config": args.finetune_config,
              "pretrain_overrides": args.pretrain_overrides, "finetune_overrides": args.finetune_overrides,
              "minutes_total": (time.time() - started) / 60}
    (work / "quality.json").write_text(json.dumps(report, indent=2))
    print(f"pre-training ({args.pretrain_config}): {pretraining['steps']} steps, {pretraining['tokens_seen']:,} "
          f"tokens seen, {pretraining['minutes']:.1f} min (2 cores); eval loss {pretraining['eval_loss']:.3f}, "
          f"content accuracy {100 * pretraining['eval_content_accuracy']:.1f} %, content loss "
          f"{pretraining['eval_content_loss']:.3f}, token accuracy {100 * pretraining['eval_token_accuracy']:.1f} %")
    for task, scores in results.items():
        print(report_line(task, scores, len(args.seeds)))
    if len(curve) > 2:
        print("SST-2 accuracy by pre-training steps: " + ", ".join(
            f"{step}: {mean_std(v)[0]:.1f}" for step, v in sorted(curve.items()) if v))
    print(f"wrote {work / 'quality.json'} ({report['minutes_total']:.0f} min in all)")


if __name__ == "__main__":
    main()
