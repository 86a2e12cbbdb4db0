"""The architecture as docs/architecture.md states it: one package split by layer, imports flowing one way, entry
scripts that hold steps (no classes) and that nothing imports, test modules that share only tests/helpers.py and
tests/trained_model.py, and each library module with its mirror test file."""
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from absl.testing import absltest, parameterized

from tests.helpers import ENTRY_SCRIPTS, REPO

# Each library module's layer, and the layers strictly ordered (docs/architecture.md): a module may import its own
# layer or a lower one, never a higher one nor a sibling of equal rank (model and optim, train and sweep). The root
# modules belong to layers: data_collator.py to data, metrics.py is its own. cli runs an entry script's main(), so
# it sits above every layer it reports for (it takes the run log's constant from outputs).
MODULE_LAYERS = {"t5kit.errors": "base", "t5kit.specs": "base", "t5kit.digests": "base", "constants": "base",
                 "t5kit.config": "config", "t5kit.data": "data",
                 "data_collator": "data", "metrics": "metrics", "t5kit.model": "model", "t5kit.optim": "optim",
                 "t5kit.outputs": "outputs", "t5kit.train": "train", "t5kit.sweep": "sweep", "t5kit.cli": "cli"}
LAYER_RANKS = {"base": 0, "config": 1, "data": 2, "metrics": 3, "model": 4, "optim": 4, "outputs": 5, "train": 6,
               "sweep": 6, "cli": 7}
LAYERS = ("config", "data", "model", "optim", "train", "outputs", "sweep")
MAX_MODULE_LINES = 400
SHARED_TEST_MODULES = ("helpers", "trained_model", "forked")  # what test modules may import of tests/
# Library modules tested in another file than their mirror (docs/architecture.md, "Tests": tests/<layer>/
# test_<module>.py tests t5kit/<layer>/<module>.py): module -> the one test file that covers it and imports it. Only
# small modules whose behaviour is part of another's: errors.py is UsageError and the "did you mean" wording, whose
# one `error:` line and exit 2 test_cli.py checks (and every refusal's test its wording); flan_templates.py is FLAN's
# templates, data copied verbatim, which test_instructions.py formats real rows with and compares with FLAN's code.
MIRROR_TEST_EXCEPTIONS = {"t5kit/errors.py": "tests/test_cli.py",
                          "t5kit/data/flan_templates.py": "tests/data/test_instructions.py"}


def layer_of(module):
    """The layer a dotted module name belongs to, or None for third-party modules."""
    for name in sorted(MODULE_LAYERS, key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            return MODULE_LAYERS[name]
    return None


def imports_against_the_order(path, module=None):
    """The modules `path` (the library module `module`, by default its own name) imports from a higher layer or
    from a sibling layer of equal rank."""
    own = layer_of(module or module_name(path))
    return sorted(name for name in imported_modules(path) if layer_of(name) and layer_of(name) != own
                  and LAYER_RANKS[layer_of(name)] >= LAYER_RANKS[own])


def imported_modules(path):
    """Every module a file imports (absolute names; `from t5kit.x import y` counts t5kit.x.y too)."""
    names = set()
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def module_name(path):
    return ".".join(Path(path).relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def mirror_test_file(path, root=REPO):
    """The test file of a library module: t5kit/<layer>/<module>.py -> tests/<layer>/test_<module>.py, and
    t5kit/<module>.py -> tests/test_<module>.py."""
    relative = Path(path).relative_to(Path(root) / "t5kit")
    return Path(root) / "tests" / relative.parent / f"test_{relative.name}"


def modules_without_their_test_file(modules, exceptions, root=REPO):
    """'module: what is missing' for each library module under `root` with no mirror test file, unless `exceptions`
    (module path -> test file path, both relative to `root`) names a test file that exists and imports or names
    the module."""
    missing = []
    for path in modules:
        relative = Path(path).relative_to(root).as_posix()
        name = ".".join(Path(relative).with_suffix("").parts)
        covering = exceptions.get(relative)
        if mirror_test_file(path, root).is_file():
            continue
        if covering is None:
            missing.append(f"{relative}: no {mirror_test_file(path, root).relative_to(root).as_posix()}")
        elif not (Path(root) / covering).is_file():
            missing.append(f"{relative}: MIRROR_TEST_EXCEPTIONS names {covering}, which does not exist")
        elif name not in imported_modules(Path(root) / covering) and name not in (Path(root) / covering).read_text():
            missing.append(f"{relative}: MIRROR_TEST_EXCEPTIONS names {covering}, which never mentions {name}")
    return missing


LIBRARY = sorted(REPO.glob("t5kit/**/*.py")) + [REPO / name for name in ("constants.py", "data_collator.py",
                                                                         "metrics.py")]
# Every test module and helper, in tests/ and its layer folders (tests/data/test_corpus.py, tests/e2e/...).
TEST_FILES = sorted(REPO.glob("tests/**/*.py"))


class LayoutTest(parameterized.TestCase):

    def test_the_package_has_one_folder_per_layer(self):
        self.assertContainsSubset(LAYERS, [p.name for p in (REPO / "t5kit").iterdir() if p.is_dir()])
        root_modules = sorted(p.stem for p in REPO.glob("*.py"))
        self.assertEqual(root_modules, sorted([*ENTRY_SCRIPTS, "constants", "data_collator", "metrics"]))

    @parameterized.named_parameters((module_name(p).replace(".", "_"), p) for p in LIBRARY)
    def test_imports_flow_downward(self, path):
        self.assertEmpty(imports_against_the_order(path),
                         f"{module_name(path)} ({layer_of(module_name(path))}) imports a higher or sibling layer")

    @parameterized.named_parameters(
        ("data_imports_metrics", "t5kit.data.task_splits", "from metrics import parse_label"),
        ("metrics_imports_model", "metrics", "from t5kit.model.inference import score_label_words"),
        ("model_imports_optim", "t5kit.model.building", "import t5kit.optim.optimizer_classes"),
        ("model_imports_outputs", "t5kit.model.tokenizer_training", "from t5kit.outputs import run_folder"),
        ("outputs_imports_train", "t5kit.outputs.run_logging", "from t5kit.train.callbacks import LossLogCallback"),
        ("sweep_imports_train", "t5kit.sweep.trial", "from t5kit.train import private_api"),
        ("specs_imports_data", "t5kit.specs", "from t5kit.data import corpus"),
        ("train_imports_cli", "t5kit.train.callbacks", "from t5kit.cli import run_cli"),
        ("config_imports_data", "t5kit.config.checks", "import data_collator"))
    def test_a_planted_import_against_the_order_is_caught(self, module, planted):
        source = REPO / (module.replace(".", "/") + ".py")
        planted_copy = Path(self.create_tempfile(content=source.read_text() + "\n" + planted + "\n").full_path)
        self.assertEmpty(imports_against_the_order(source, module))
        self.assertLen(imports_against_the_order(planted_copy, module), 1 + planted.startswith("from"))

    def test_data_never_imports_the_config_layer(self):
        for path in REPO.glob("t5kit/data/*.py"):
            self.assertEmpty([n for n in imported_modules(path) if n.startswith("t5kit.config")], path.name)

    @pytest.mark.slow  # a second interpreter
    def test_the_config_layer_loads_no_trainer_data_or_model_module(self):
        code = ("import sys; import t5kit.config.script_flags, t5kit.config.parsing, t5kit.config.launch_checks; "
                "print('\\n'.join(m for m in sys.modules if m.startswith(('t5kit.', 'data_collator', 'metrics'))))")
        loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                                check=True).stdout.split()
        self.assertNotEmpty(loaded)
        self.assertEmpty([m for m in loaded if not m.startswith(("t5kit.config", "t5kit.errors", "t5kit.specs"))],
                         loaded)

    def test_nothing_imports_an_entry_script(self):
        """Entry scripts are run, never imported: the package, benches, helper scripts and test modules import
        the package. The one exception is tests/helpers.entry_main, which end-to-end tests call main() through."""
        files = [*LIBRARY, *REPO.glob("*.py"), *REPO.glob("bench/*.py"), *REPO.glob("scripts/*.py"),
                 *(p for p in TEST_FILES if p.name != "helpers.py")]
        for path in files:
            self.assertEmpty(set(ENTRY_SCRIPTS) & imported_modules(path), path.relative_to(REPO))

    def test_entry_scripts_hold_steps_not_classes(self):
        for name in ENTRY_SCRIPTS:
            tree = ast.parse((REPO / f"{name}.py").read_text())
            self.assertEmpty([n.name for n in tree.body if isinstance(n, ast.ClassDef)], name)
            self.assertIn("main", [n.name for n in tree.body if isinstance(n, ast.FunctionDef)], name)

    def test_no_test_module_imports_another(self):
        for path in TEST_FILES:
            others = [n for n in imported_modules(path) if n.split(".")[-1].startswith("test_")
                      or (n.startswith("tests.") and n.split(".")[1] not in SHARED_TEST_MODULES)]
            self.assertEmpty(others, path.relative_to(REPO))

    def test_the_readme_is_a_front_door_whose_links_resolve(self):
        readme = (REPO / "README.md").read_text()
        self.assertLessEqual(len(readme.encode()), 12 * 1024, "README.md: move the depth to docs/")
        for target in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)\)", readme):
            self.assertTrue((REPO / target).is_file(), target)
        for page in (REPO / "docs").glob("*.md"):
            self.assertIn(f"docs/{page.name}", readme, f"README links no {page.name}")

    def test_every_module_has_its_mirror_test_file(self):
        modules = sorted(path for path in REPO.glob("t5kit/**/*.py") if path.name != "__init__.py")
        self.assertNotEmpty(modules)
        missing = modules_without_their_test_file(modules, MIRROR_TEST_EXCEPTIONS)
        self.assertEmpty(missing, "each library module needs tests/<layer>/test_<module>.py (docs/architecture.md, "
                                  "Tests), or an entry in MIRROR_TEST_EXCEPTIONS naming the test file that covers it:\n"
                                  + "\n".join(missing))

    def test_the_mirror_exceptions_are_modules_without_a_mirror(self):
        """An exception for a module that is gone, or that has its own test file now, is removed, not kept."""
        for module, covering in MIRROR_TEST_EXCEPTIONS.items():
            self.assertTrue((REPO / module).is_file(), module)
            self.assertFalse(mirror_test_file(REPO / module).exists(), f"{module} has its mirror: drop the exception")
            self.assertTrue(covering.startswith("tests/") and Path(covering).name.startswith("test_"), covering)

    def test_a_module_without_its_test_file_is_caught(self):
        """A planted tree: a module with its mirror, one covered by an exception, one with neither."""
        root = Path(self.create_tempdir().full_path)
        files = {"t5kit/data/tested.py": "", "tests/data/test_tested.py": "", "t5kit/data/small.py": "",
                 "tests/data/test_other.py": "from t5kit.data.small import VALUES\n", "t5kit/data/untested.py": "",
                 "t5kit/errors.py": "", "tests/test_cli.py": "import t5kit.data\n"}
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        modules = sorted(path for path in root.glob("t5kit/**/*.py"))
        exceptions = {"t5kit/data/small.py": "tests/data/test_other.py", "t5kit/errors.py": "tests/test_cli.py"}
        self.assertEqual(modules_without_their_test_file(modules, exceptions, root), [
            "t5kit/data/untested.py: no tests/data/test_untested.py",
            "t5kit/errors.py: MIRROR_TEST_EXCEPTIONS names tests/test_cli.py, which never mentions t5kit.errors"])
        (root / "tests" / "data" / "test_untested.py").write_text("")
        (root / "tests" / "test_cli.py").write_text("from t5kit.errors import UsageError\n")
        self.assertEqual(modules_without_their_test_file(modules, exceptions, root), [])
        (root / "tests" / "data" / "test_other.py").unlink()
        self.assertEqual(modules_without_their_test_file(modules, exceptions, root), [
            "t5kit/data/small.py: MIRROR_TEST_EXCEPTIONS names tests/data/test_other.py, which does not exist"])

    def test_modules_stay_under_400_lines(self):
        for path in [*LIBRARY, *REPO.glob("*.py"), *REPO.glob("scripts/*.py")]:
            lines = len(path.read_text().splitlines())
            self.assertLessEqual(lines, MAX_MODULE_LINES, f"{path.relative_to(REPO)}: split it by concern")


if __name__ == "__main__":
    absltest.main()
