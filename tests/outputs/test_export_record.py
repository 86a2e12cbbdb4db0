"""outputs/export_record.py: a CTranslate2 export written with its record. Where it goes by default, the output folder
refused when it exists (unless replaced) or is a file, and build_export: the converted folder, the model card copied,
the record naming the source's weights, the export's model.bin, the quantization, the probe and the versions,
published in one rename; a failure leaves the output as it was and nothing staged. (Real conversions:
tests/model/test_ctranslate2_backend.py.)"""
import hashlib
import json
from pathlib import Path
from unittest import mock

from absl.testing import absltest, parameterized

from t5kit.errors import UsageError
from t5kit.model import ctranslate2_backend, ctranslate2_export
from t5kit.outputs import export_record


def fake_convert(model_dir, out, quantization):
    """ctranslate2_backend.convert's stand-in: a model.bin naming what it was made from."""
    (Path(out) / "model.bin").write_text(f"{Path(model_dir).name} as {quantization}")


class OutputDirTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def test_a_local_model_exports_into_its_folder_and_a_hub_model_nowhere(self):
        self.assertEqual(export_record.default_output_dir(self.dir), self.dir / "ctranslate2")
        self.assertIsNone(export_record.default_output_dir("google-t5/t5-small"))

    def test_an_existing_output_needs_overwrite_and_must_be_a_folder(self):
        self.assertEqual(export_record.check_output_dir(str(self.dir / "new"), overwrite=False), self.dir / "new")
        (self.dir / "old").mkdir()
        with self.assertRaisesRegex(UsageError, f"^--output_dir {self.dir}/old exists; pass --overwrite_output_dir "
                                                "true to replace it, or choose another folder$"):
            export_record.check_output_dir(self.dir / "old", overwrite=False)
        self.assertEqual(export_record.check_output_dir(self.dir / "old", overwrite=True), self.dir / "old")
        (self.dir / "file").write_text("x")
        with self.assertRaisesRegex(UsageError, f"^--output_dir {self.dir}/file is a file; name a folder$"):
            export_record.check_output_dir(self.dir / "file", overwrite=True)


class BuildExportTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        self.model = self.dir / "run"
        self.model.mkdir()
        (self.model / "model.safetensors").write_bytes(b"weights")
        (self.model / "README.md").write_text("# a card\n")
        self.out = self.model / "ctranslate2"
        self.enter_context(mock.patch.object(ctranslate2_backend, "convert", side_effect=fake_convert))

    def test_the_folder_holds_the_export_the_card_and_its_record(self):
        folder = export_record.build_export(self.model, self.out, "int8", check=lambda staging: {"identical": 3})
        self.assertEqual(folder, self.out)
        self.assertEqual(sorted(p.name for p in folder.iterdir()), ["README.md", "export_record.json", "model.bin"])
        self.assertEqual((folder / "README.md").read_text(), "# a card\n")
        record = json.loads((folder / "export_record.json").read_text())
        self.assertEqual(record["source"], str(self.model.resolve()))
        self.assertEqual(record["source_weights_sha256"], hashlib.sha256(b"weights").hexdigest())
        self.assertEqual(record["export_sha256"], hashlib.sha256(b"run as int8").hexdigest())
        self.assertEqual((record["quantization"], record["probe"]), ("int8", {"identical": 3}))
        self.assertContainsSubset(["python", "ctranslate2", "transformers", "torch"], record["versions"])
        self.assertEqual(ctranslate2_export.check_export(folder), record)  # what the reader accepts
        self.assertEqual(sorted(p.name for p in self.model.iterdir()), ["README.md", "ctranslate2",
                                                                        "model.safetensors"])  # nothing staged left

    def test_the_probe_sees_the_staged_export(self):
        seen = []
        export_record.build_export(self.model, self.out, "float32", check=lambda staging: seen.append(
            sorted(p.name for p in Path(staging).iterdir())))
        self.assertEqual(seen, [["README.md", "model.bin"]])  # converted and carded, not yet recorded

    def test_a_hub_model_records_its_name_and_no_weights(self):
        folder = export_record.build_export("google-t5/t5-small", self.dir / "hub", "float32")
        record = json.loads((folder / "export_record.json").read_text())
        self.assertEqual((record["source"], record["source_weights_sha256"], record["probe"]),
                         ("google-t5/t5-small", None, None))
        self.assertFalse((folder / "README.md").exists())

    def test_a_failed_probe_leaves_the_old_export_and_nothing_staged(self):
        export_record.build_export(self.model, self.out, "float32")
        before = (self.out / "export_record.json").read_text()

        def failing_probe(staging):
            raise RuntimeError("probe failed")

        with self.assertRaisesRegex(RuntimeError, "probe failed"):
            export_record.build_export(self.model, self.out, "int8", check=failing_probe, overwrite=True)
        self.assertEqual((self.out / "export_record.json").read_text(), before)
        self.assertEqual(sorted(p.name for p in self.model.iterdir()), ["README.md", "ctranslate2",
                                                                        "model.safetensors"])

    def test_replacing_needs_overwrite(self):
        export_record.build_export(self.model, self.out, "float32")
        with self.assertRaisesRegex(UsageError, "ctranslate2 exists; pass --overwrite_output_dir true"):
            export_record.build_export(self.model, self.out, "int8")
        export_record.build_export(self.model, self.out, "int8", overwrite=True)
        self.assertEqual((self.out / "model.bin").read_text(), "run as int8")


if __name__ == "__main__":
    absltest.main()
