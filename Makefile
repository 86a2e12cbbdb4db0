# make test        -> creates .venv on first use, then runs the offline test suite on every core (pytest-xdist);
#                     tests needing real data read $T5_DATA_DIR (unset: ../shared/data), e.g. `make data &&
#                     T5_DATA_DIR=data make test`. 2 cores, 2026-12-08: "2480 passed ... in 513.82s"
# make test-fast   -> the same without the slow kinds marked in pytest.ini (launches, kills, sweep agents,
#                     training in setUpClass, slow tests): "2178 passed ... in 57.29s"
# make quickstart  -> creates .venv on first use, then pre-trains a tiny T5 offline in about two minutes
# make bench       -> the benchmark scripts under bench/ (figures printed, see README)
# make bench-quality -> the CPU recipe vs random init: SST-2, RTE, CoLA x 3 seeds (docs/quality.md; ~20 min on 2 cores)
# make data        -> needs internet: GLUE, SuperGLUE, WikiText-2, 13 Gutenberg books, the T5 tokenizer, Multi30k,
#                     newstest2014 en-de and the BoolQ dev set from the hub, into data/ in the layout of
#                     ../shared/data: every file the tests, benches and configs read (scripts/fetch_data.py;
#                     DATA_DIR=... to change the folder; point T5_DATA_DIR at it)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
QUICKSTART_DATA := data/quickstart
DATA_DIR ?= data
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline TOKENIZERS_PARALLELISM=false
FAST_LANE := not (launch or kill or sweep_agent or train_class or slow)
# One pytest-xdist worker per core (tests/conftest.py gives each one thread); a test class stays on one worker, so
# its setUpClass runs once. Classes go out in tests/conftest.py's order, the slow kinds first (xdist's own reorder,
# by test count, would leave them to the end). TEST_WORKERS=0 runs the suite in this one process.
# Each run ends with its ten slowest tests (docs/architecture.md#tests says why they are slow).
TEST_WORKERS ?= auto
PYTEST := $(OFFLINE) $(PY) -m pytest tests -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=10

.PHONY: lint test test-fast quickstart bench bench-quality data

# The project itself goes in editable mode (pyproject.toml), so tests and benches import it from any folder.
$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	# DeepSpeed compiles its CPU shared-memory op (~/.cache/torch_extensions) when a process first starts its backend:
	# about 70 s on 2 cores, here once instead of inside the first DeepSpeed run (a GPU's accelerator has no such op).
	# The venv's ninja first on PATH, as tests/conftest.py puts it: another ninja version would rebuild the op.
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -c "from deepspeed.accelerator import get_accelerator as a; \
		b = a().create_op_builder('ShareMemCommBuilder'); \
		b is None or not b.is_compatible(False) or b.load()"
	touch $@

# ruff's rules (pyproject.toml: 120 columns, import order, unused names); .ci/run runs it before the tests.
lint: $(VENV)/.installed
	$(PY) -m ruff check .

test: $(VENV)/.installed
	$(PYTEST)

test-fast: $(VENV)/.installed
	$(PYTEST) -m "$(FAST_LANE)"

# Every step is idempotent: the corpus and tokenizer are built once, the run folder is replaced each time.
quickstart: $(VENV)/.installed
	$(OFFLINE) $(PY) -m scripts.quickstart_corpus --output_dir $(QUICKSTART_DATA)
	test -f $(QUICKSTART_DATA)/tokenizer/tokenizer_config.json || \
		$(OFFLINE) $(PY) train_tokenizer.py --train_files $(QUICKSTART_DATA)/train.txt \
		--output_dir $(QUICKSTART_DATA)/tokenizer --vocab_size 8000
	$(OFFLINE) $(PY) pre_train_t5.py configs/quickstart.yaml --overwrite_output_dir true

bench: $(VENV)/.installed
	$(OFFLINE) $(PY) bench/collator.py
	$(OFFLINE) $(PY) bench/padding.py
	$(OFFLINE) $(PY) bench/pretrain_throughput.py --threads 1
	$(OFFLINE) $(PY) bench/resume.py
	$(OFFLINE) $(PY) bench/stream_prefetch.py
	$(OFFLINE) $(PY) bench/attention_bias.py
	$(OFFLINE) $(PY) bench/adafactor_step.py
	$(OFFLINE) $(PY) bench/lora.py
	$(OFFLINE) $(PY) bench/predict.py
	$(OFFLINE) $(PY) bench/packing.py

bench-quality: $(VENV)/.installed
	$(OFFLINE) $(PY) bench/quality.py --task_adaptive

# Not $(OFFLINE): this one target talks to the hub. Files already in $(DATA_DIR) are kept, so a re-run resumes.
data: $(VENV)/.installed
	$(PY) -m scripts.fetch_data --output_dir $(DATA_DIR)
