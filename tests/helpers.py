"""What the test modules share (no test module imports another): where the real data lives and how its absence
is reported, the argv of tiny runs, the entry scripts' main(), folder snapshots, fault injection, tokenizers,
packing examples, an attention module's stand-in, the checks every model card's tests run, two-process launches.

The real test data lives in the folder $T5_DATA_DIR names (relative to the repository root; `make data` writes data/,
so T5_DATA_DIR=data), by default ../shared/data beside the repository. Where it is absent, a test that needs it skips
and names the missing path; with T5_REQUIRE_SHARED_DATA=1 (what .ci/run sets) it fails instead, so a CI that lost
the data cannot pass by skipping.
"""
import contextlib
import functools
import importlib
import io
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import types
import unittest
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from absl.testing import parameterized

REPO = Path(__file__).resolve().parents[1]
DATA_DIR_ENV = "T5_DATA_DIR"
SHARED_DATA = REPO / (os.environ.get(DATA_DIR_ENV) or REPO.parent / "shared" / "data")  # an absolute path stays
REQUIRE_SHARED_DATA_ENV = "T5_REQUIRE_SHARED_DATA"
ENTRY_SCRIPTS = ("pre_train_t5", "fine_tune_t5", "sweep", "train_tokenizer", "predict_t5", "export_t5")
EVAL_ROWS = 12  # fine-tuning runs evaluate this many RTE dev rows
TEST_ROWS = 6  # and predict this many test rows


def require(relative_path: str) -> Path:
    """SHARED_DATA/relative_path, or a skip naming what is missing (a failure under T5_REQUIRE_SHARED_DATA=1)."""
    path = SHARED_DATA / relative_path
    if not path.exists():
        message = (f"real test data {path} is absent (set {DATA_DIR_ENV} to the data folder, e.g. data/ after "
                   "`make data`; unset, ../shared/data beside the repo)")
        if os.environ.get(REQUIRE_SHARED_DATA_ENV) == "1":
            raise AssertionError(f"{message}; {REQUIRE_SHARED_DATA_ENV}=1 makes this a failure, not a skip")
        raise unittest.SkipTest(message)
    return path


def entry_main(name):
    """The main(argv) of an entry script at the repository root, which the end-to-end tests call as HF's example
    tests do (the one place tests reach an entry script; nothing in t5kit or bench/ imports one)."""
    if name not in ENTRY_SCRIPTS:
        raise ValueError(f"{name} is not an entry script: {', '.join(ENTRY_SCRIPTS)}")
    return importlib.import_module(name).main


def argv_from(values):
    """{"flag": value} -> ["--flag", "value", ...]; a list gives several values, None leaves the flag out."""
    argv = []
    for key, value in values.items():
        if value is None:
            continue
        argv += [f"--{key}", *map(str, value)] if isinstance(value, list) else [f"--{key}", str(value)]
    return argv


def tiny_run_flags(output_dir, train_file, **overrides):
    """argv of a seconds-long pre-training run: t5-tiny, 64-token inputs, real T5 tokenizer."""
    return argv_from({
        "output_dir": output_dir, "model_size": "t5-tiny", "tokenizer_name_or_path": str(require("t5_spiece")),
        "train_files": [train_file], "input_length": 64, "per_device_train_batch_size": 4,
        "per_device_eval_batch_size": 16, "max_eval_samples": 32, "max_steps": 8, "learning_rate": 1e-2,
        "logging_steps": 1, "eval_strategy": "no", "save_strategy": "no", "use_cpu": True, "seed": 3,
        "report_to": "none", "disable_tqdm": True, **overrides})


def tiny_flags(output_dir, **overrides):
    """argv of a seconds-long fine-tuning run: t5-tiny, short inputs, real T5 tokenizer, RTE from its folder."""
    return argv_from({
        "output_dir": output_dir, "model_size": "t5-tiny", "tokenizer_name_or_path": str(require("t5_spiece")),
        "dataset_name": "rte", "data_dir": [str(require("glue/RTE"))], "max_source_length": 64,
        "max_train_samples": 32, "max_eval_samples": EVAL_ROWS, "per_device_train_batch_size": 4,
        "per_device_eval_batch_size": 32, "max_steps": 4, "learning_rate": 1e-2, "eval_strategy": "steps",
        "eval_steps": 2, "save_strategy": "steps", "save_steps": 2, "logging_steps": 1, "use_cpu": True,
        "seed": 3, "report_to": "none", "disable_tqdm": True, **overrides})


def built_once(name, build):
    """The folder `build(folder)` fills, built once per test run for all pytest-xdist workers (under a file lock in a
    temp folder named by the run's id, or by the process's id without xdist); returns (folder, what `build` returned,
    as JSON). A worker that needs it while another builds it waits instead of building it a second time."""
    import filelock  # huggingface_hub's and datasets' lock

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"  # never a build of an earlier run
    root = Path(tempfile.gettempdir()) / f"t5kit-tests-{run}"
    root.mkdir(parents=True, exist_ok=True)
    folder, done = root / name, root / f"{name}.json"
    with filelock.FileLock(root / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a build stopped by an exception left
            partial = done.with_suffix(".tmp")
            partial.write_text(json.dumps(build(folder)))
            os.replace(partial, done)  # the record appears whole, once the folder is complete
    return folder, json.loads(done.read_text())


def built_quickstart_corpus():
    """(folder, {split: path}) of scripts/quickstart_corpus.py's full build (the whole stdlib, ~8 s, as `make
    quickstart` runs it), built once per test run for the tests that read it."""
    from scripts import quickstart_corpus

    def build(folder):
        return {split: str(path) for split, path in quickstart_corpus.main(["--output_dir", str(folder)]).items()}

    folder, paths = built_once("quickstart_corpus", build)
    return folder, {split: Path(path) for split, path in paths.items()}


def snapshot(folder):
    """{relative path: bytes} of everything under folder, to prove a refused run touched nothing."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def read_paragraphs(path, limit):
    text = Path(path).read_text(encoding="utf-8")
    return [p.strip() for p in text.split("\n\n") if p.strip()][:limit]


class T5TokenizerTestCase(parameterized.TestCase):
    """Tests that read text through the real T5 tokenizer: self.tokenizer, loaded once per class as runs load it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from t5kit.model import building  # here: most helpers' users never load a tokenizer

        cls.tokenizer = building.load_tokenizer(str(require("t5_spiece")))


class TinyRunTestCase(parameterized.TestCase):
    """Tiny runs on real text: self.corpus (a Gutenberg book) and a fresh self.dir per test."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.corpus = str(require("gutenberg/austen-persuasion.txt"))

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)


class OneThreadTestCase(TinyRunTestCase):
    """In-process tiny runs: one torch thread, as two threads on a shared 2-core machine run ~10x slower."""

    def setUp(self):
        super().setUp()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self.addCleanup(torch.set_num_threads, threads)

    def run_flags(self, out, **overrides):
        return tiny_run_flags(str(out), self.corpus, **{"max_steps": 4, "save_strategy": "steps", "save_steps": 2,
                                                        **overrides})


def fault_at(call, fault):
    """Patches T5's forward so that `fault(output)` hits the `call`-th training forward (test-only fault)."""
    from transformers import T5ForConditionalGeneration

    original = T5ForConditionalGeneration.forward
    calls = []

    @functools.wraps(original)  # the Trainer reads forward's signature to pick dataset columns
    def forward(model, *args, **kwargs):
        output = original(model, *args, **kwargs)
        if model.training:
            calls.append(None)
            if len(calls) == call:
                fault(output)
        return output
    return mock.patch.object(T5ForConditionalGeneration, "forward", forward)


def nan_loss_at(call):
    def make_nan(output):
        output.loss = output.loss * float("nan")
    return fault_at(call, make_nan)


def inf_gradient_at(call):
    """The loss stays finite; backward multiplies its gradient by inf (an overflow inside backward)."""
    def overflow_in_backward(output):
        output.loss.register_hook(lambda grad: grad * float("inf"))
    return fault_at(call, overflow_in_backward)


def training_args(*argv):
    """T5TrainingArguments parsed from argv (on the CPU, into an unused folder)."""
    from t5kit.config import parsing
    from t5kit.config.arguments import T5TrainingArguments

    (args,) = parsing.parse_flags((T5TrainingArguments,), ["--output_dir", "/tmp/unused", "--use_cpu", "true", *argv])
    return args


@functools.lru_cache(maxsize=None)
def in_memory_t5_tokenizer(num_words=32000, num_sentinels=100):
    """A T5-layout tokenizer built in memory (no data needed): <pad>=0, </s>=1, <unk>=2, words w3..., and the
    sentinels on top, <extra_id_0> the highest id, as in T5's vocabulary."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    vocab.update({f"w{i}": i for i in range(3, num_words)})
    vocab.update({f"<extra_id_{i}>": num_words + num_sentinels - 1 - i for i in range(num_sentinels)})
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
        additional_special_tokens=[f"<extra_id_{i}>" for i in range(num_sentinels)])


def random_word_ids(count, num_words=32000, seed=0):
    """`count` word ids of in_memory_t5_tokenizer, Zipf-distributed like text (ids 3..num_words-1)."""
    rng = np.random.default_rng(seed)
    return 3 + np.minimum(rng.zipf(1.2, size=count) - 1, num_words - 4)


def random_examples(count, seed=0, longest_input=40, longest_target=12):
    """Packing tests' examples: [(input ids, target ids), ...] of random lengths, ids from 2 (0 is pad, 1 EOS),
    each ending in EOS."""
    rng = np.random.default_rng(seed)
    examples = []
    for _ in range(count):
        inputs = rng.integers(2, 1000, rng.integers(1, longest_input + 1))
        targets = rng.integers(2, 1000, rng.integers(1, longest_target + 1))
        inputs[-1] = targets[-1] = 1
        examples.append((inputs, targets))
    return examples


def example_lengths(examples):
    """(input lengths, target lengths) of random_examples' examples, as numpy arrays."""
    return (np.array([len(i) for i, _ in examples]), np.array([len(t) for _, t in examples]))


def attention_module(is_decoder, is_causal=False):
    """A stand-in for a T5Attention module: the three attributes the attention functions read of it."""
    return types.SimpleNamespace(is_decoder=is_decoder, is_causal=is_causal, has_relative_attention_bias=False)


def tiny_model():
    """A random one-layer T5 (64-word vocabulary, 16 wide) for optimizer and trainer tests that never tokenize."""
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(vocab_size=64, d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2,
                      decoder_start_token_id=0, pad_token_id=0)
    return T5ForConditionalGeneration(config)


def save_tiny_t5(folder):
    """A random t5-tiny with the real T5 tokenizer saved in `folder` (a base model for LoRA and loading tests)."""
    from t5kit.model import building

    tokenizer = building.load_tokenizer(str(require("t5_spiece")))
    torch.manual_seed(0)
    building.new_t5_model(building.build_t5_config("t5-tiny", tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


# Tiny random configs of each T5-family architecture (config class, extra arguments): Flan-T5 is T5 v1.1's
# architecture; LongT5 in both encoder attentions, with windows far shorter than the test inputs.
T5_FAMILY = {
    "flan_t5": ("T5Config", {}),
    "mt5": ("MT5Config", {}),
    "umt5": ("UMT5Config", {}),
    "longt5_local": ("LongT5Config", {"encoder_attention_type": "local", "local_radius": 4}),
    "longt5_tglobal": ("LongT5Config", {"encoder_attention_type": "transient-global", "local_radius": 4,
                                        "global_block_size": 4}),
}


def save_tiny_family_model(folder, family, tokenizer_path):
    """A random 2-layer model of a T5_FAMILY architecture, untied as the released v1.1/mT5/UMT5/LongT5 checkpoints
    are, with the tokenizer at tokenizer_path, saved in `folder`; returns the folder."""
    import transformers

    from t5kit.model import building

    tokenizer = building.load_tokenizer(str(tokenizer_path))
    config_class, extra = T5_FAMILY[family]
    config = getattr(transformers, config_class)(
        d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2, feed_forward_proj="gated-gelu", dropout_rate=0.0,
        vocab_size=building.padded_vocab_size(tokenizer), pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.pad_token_id, **extra)
    config.tie_word_embeddings = False  # transformers 5.x's T5-family configs read it back as True
    torch.manual_seed(0)
    building.new_t5_model(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def python_block(card_text):
    """The first ```python block of a model card: its usage snippet."""
    return re.search(r"```python\n(.*?)```", card_text, flags=re.S).group(1)


def run_snippet(code):
    """Runs a card's usage snippet as a user would paste it; returns what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "<model card>", "exec"), {})  # our own generated snippet
    return printed.getvalue()


def rendered_tokens(card_text):
    """markdown-it's tokens of the card body (GitHub-style tables on, as the hub renders them)."""
    from markdown_it import MarkdownIt

    body = card_text.split("\n---\n", 1)[1]
    return MarkdownIt("commonmark").enable("table").parse(body)


class CardTestCase(parameterized.TestCase):
    """The model card of a run made once per class (run_into) into a temporary folder; the tests read its README.md
    and metrics.json. The two here check what every card shares (outputs/model_card.py): the hub's metadata format
    and Markdown the hub renders, with the class's `sections`. A test module imports it and deletes the name after
    subclassing, so that pytest does not collect a class with no run of its own."""
    sections = ()

    @classmethod
    def run_into(cls, out):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        from huggingface_hub import ModelCard

        super().setUpClass()
        # One torch thread, as OneThreadTestCase: two threads on a shared 2-core machine run slower.
        cls.threads = torch.get_num_threads()
        torch.set_num_threads(1)
        cls.tmp = Path(tempfile.mkdtemp())
        cls.out = cls.tmp / "run"
        cls.run_into(cls.out)
        cls.text = (cls.out / "README.md").read_text()
        cls.card = ModelCard.load(cls.out / "README.md")
        cls.metrics = json.loads((cls.out / "metrics.json").read_text())

    @classmethod
    def tearDownClass(cls):
        torch.set_num_threads(cls.threads)
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def test_metadata_is_the_hub_format(self):
        data = self.card.data
        self.assertEqual((data.library_name, data.pipeline_tag), ("transformers", "text2text-generation"))
        self.assertContainsSubset(["t5", "text2text-generation", "t5kit"], data.tags)
        self.assertEqual(data.model_name, "run")
        self.assertTrue(self.text.startswith("---\n"))

    def test_renders_as_markdown_without_raw_html(self):
        tokens = rendered_tokens(self.text)
        self.assertEmpty([t for t in tokens if t.type == "html_block"])
        inline = [child for t in tokens if t.type == "inline" for child in t.children or []]
        self.assertEmpty([t.content for t in inline if t.type == "html_inline"])  # <extra_id_0> would vanish
        self.assertEqual([t.info for t in tokens if t.type == "fence"], ["python", "bash", "bash"])
        self.assertEqual([t.attrGet("src") for t in inline if t.type == "image"], ["loss_curve.png"])
        headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
        self.assertEqual(headings, ["run", *self.sections])
        self.assertGreaterEqual(len([t for t in tokens if t.type == "table_open"]), 4)


def pre_train(argv):
    """pre_train_t5.py's main(argv): metrics."""
    return entry_main("pre_train_t5")(argv)


def fine_tune(argv):
    """fine_tune_t5.py's main(argv): results."""
    return entry_main("fine_tune_t5")(argv)


def predict(argv):
    """predict_t5.py's main(argv): the output rows."""
    return entry_main("predict_t5")(argv)


def predict_flags(model_dir, input_file, output_file, **overrides):
    """argv of predict_t5.py on the CPU without a progress bar, in fp32 (the default turns bf16 on where the CPU has
    it, which would make predictions depend on the machine the tests run on)."""
    return argv_from({"model_name_or_path": model_dir, "input_file": input_file, "output_file": output_file,
                      "use_cpu": True, "disable_tqdm": True, "bf16": False, **overrides})


def run_sweep(argv):
    """sweep.py's main(argv): the Optuna study."""
    return entry_main("sweep")(argv)


def train_tokenizer(argv):
    """train_tokenizer.py's main(argv): the tokenizer folder."""
    return entry_main("train_tokenizer")(argv)


# The launchers' folder (torchrun, accelerate, deepspeed) and a free port for a launch or a server of a test's own.
VENV_BIN = Path(sys.executable).parent


def free_port():
    """A TCP port nothing listens on now (the kernel picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


# Failing environments, real ones: a W&B server that refuses or never answers, and writes the OS refuses.
@contextlib.contextmanager
def wandb_online_at(url):
    """W&B online at `url` (WANDB_MODE=online, WANDB_BASE_URL) in this process's environment for the block."""
    with mock.patch.dict(os.environ, {"WANDB_MODE": "online", "WANDB_BASE_URL": url}):
        yield url


@contextlib.contextmanager
def silent_listener():
    """http://127.0.0.1:PORT of a listener that takes connections (the kernel accepts them into its backlog) and
    never answers a byte: a server that hangs."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@contextlib.contextmanager
def wandb_online_at_a_silent_server():
    with silent_listener() as url, wandb_online_at(url):
        yield url


@contextlib.contextmanager
def file_size_limit(max_bytes):
    """Files this process writes stop at max_bytes (RLIMIT_FSIZE), with SIGXFSZ ignored so that the OS answers a
    write past it with EFBIG ("File too large") instead of killing the process; both restored after."""
    import resource
    import signal

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, hard))
    try:
        yield max_bytes
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
