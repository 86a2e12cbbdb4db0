"""Test-wide setup, before any test module imports torch, transformers or datasets: offline hubs and W&B, and under
pytest-xdist (`make test` runs two workers) one thread and one temporary folder per worker."""
import gc
import os
import sys
import tempfile

from absl import flags as absl_flags

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The environment's own tools first, as in an activated venv (and as the Makefile builds DeepSpeed's CPU op): torch
# builds that op with the first `ninja` on PATH, and ninja 1.11 (Debian's) and 1.13 (the venv's) hash its commands
# differently, so a suite that reached both rebuilt the op each time it switched (30-60 s of two cores).
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])

# Inductor's CPU kernels without SIMD: its cold build of the compiled tests' graphs takes 25-45 % less (the t5_flex
# test 26 s instead of 47 s on 2 cores). Those tests check our code under torch.compile (masks, score mods, static
# caches) against eager; the vector width of Inductor's C++ is its own, and a GPU compiles Triton kernels instead.
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "0")

WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ... under xdist; unset in a single process
if WORKER:
    # Two torch processes on two cores with default threads run up to 8x slower (their threads spin waiting for
    # each other): each worker, and every process it starts, computes on one thread.
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    # absl's default test folder (get_default_test_tmpdir, named subfolders of it) is one per worker, so that two
    # workers never write the same folder; absltest reads TEST_TMPDIR when it is first imported, after this.
    os.environ["TEST_TMPDIR"] = tempfile.mkdtemp(prefix=f"t5kit-tests-{WORKER}-")

# absl's TestCase helpers (create_tempdir) read absl flags, which pytest never parses: use their defaults.
absl_flags.FLAGS.mark_as_parsed()


SLOW_KINDS = ("launch", "kill", "sweep_agent", "train_class", "slow")  # pytest.ini's markers


def pytest_collection_modifyitems(config, items):
    """The slow kinds first, in their collected order, then the rest: under --no-loadscope-reorder (the Makefile)
    pytest-xdist hands out test classes in this order, so the long ones start at once and the short ones fill the
    workers' ends, instead of one worker running a 3-minute class alone at the end of the run (longest first)."""
    items.sort(key=lambda item: not any(item.get_closest_marker(kind) for kind in SLOW_KINDS))


def pytest_collection_finish(session):
    """Every object the collected suite holds (~600k: torch, transformers, the test modules) moves out of the
    garbage collector's reach: accelerate runs a full gc.collect() at each Trainer's start, 0.35 s over that heap,
    a third of a tiny run (tests/forked.py's processes do the same with what they inherit)."""
    gc.collect()
    gc.freeze()
