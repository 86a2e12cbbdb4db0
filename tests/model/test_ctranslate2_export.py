"""model/ctranslate2_export.py: an export folder read back against its record. The digests it compares (the source's
model*.safetensors in name order, the export's model.bin), an export passed directly refused when its weights or its
source's changed, a run's own export used only when fresh and able to give the compute type, and the Translator
opened on an export, a fresh run export or a conversion into a folder deleted after loading. (Real exports:
tests/model/test_ctranslate2_backend.py.)"""
import hashlib
import json
import logging
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from absl.testing import absltest, parameterized

from t5kit.errors import UsageError
from t5kit.model import ctranslate2_backend, ctranslate2_export


def sha256(*blobs):
    digest = hashlib.sha256()
    for blob in blobs:
        digest.update(blob)
    return digest.hexdigest()


class ExportFolderTestCase(parameterized.TestCase):
    """A run folder with two weight shards, and its export RUN/ctranslate2 recorded as made from them."""

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        self.run = self.dir / "run"
        self.export = self.run / ctranslate2_export.EXPORT_DIR
        self.export.mkdir(parents=True)
        (self.run / "model-00002-of-00002.safetensors").write_bytes(b"second shard")
        (self.run / "model-00001-of-00002.safetensors").write_bytes(b"first shard")
        (self.export / "model.bin").write_bytes(b"converted weights")
        self.write_record()

    def write_record(self, quantization="float32", **changes):
        record = {"source": str(self.run), "source_weights_sha256": sha256(b"first shard", b"second shard"),
                  "export_sha256": sha256(b"converted weights"), "quantization": quantization, **changes}
        (self.export / ctranslate2_export.RECORD_FILE).write_text(json.dumps(record))
        return record


class DigestAndRecordTest(ExportFolderTestCase):

    def test_the_weights_digest_reads_the_shards_in_name_order(self):
        self.assertEqual(ctranslate2_export.weights_sha256(self.run), sha256(b"first shard", b"second shard"))
        self.assertEqual(ctranslate2_export.export_sha256(self.export), sha256(b"converted weights"))

    def test_a_folder_without_weights_is_refused(self):
        with self.assertRaisesRegex(UsageError, f"^{self.dir} holds no model\\*.safetensors weights; pass a saved "
                                                "model folder$"):
            ctranslate2_export.weights_sha256(self.dir)

    def test_the_record_is_read_back_or_none(self):
        self.assertEqual(ctranslate2_export.read_record(self.export)["quantization"], "float32")
        self.assertIsNone(ctranslate2_export.read_record(self.run))


class CheckExportTest(ExportFolderTestCase):

    def test_a_fresh_export_gives_its_record(self):
        record = ctranslate2_export.check_export(self.export)
        self.assertEqual(record["export_sha256"], sha256(b"converted weights"))

    def test_an_export_whose_source_is_gone_is_taken_on_its_own_weights(self):
        self.write_record(source=str(self.dir / "deleted"))
        self.assertEqual(ctranslate2_export.check_export(self.export)["source"], str(self.dir / "deleted"))

    def test_an_export_without_its_record_is_refused(self):
        (self.export / ctranslate2_export.RECORD_FILE).unlink()
        with self.assertRaisesRegex(UsageError, f"^--backend_dir {self.export} is a CTranslate2 folder without "
                                                "export_record.json, so what it was made from is unknown; re-export "
                                                "it: python export_t5.py --model_name_or_path SOURCE"):
            ctranslate2_export.check_export(self.export, flag="--backend_dir")

    def test_other_weights_in_the_export_are_refused(self):
        (self.export / "model.bin").write_bytes(b"other weights")
        with self.assertRaisesRegex(UsageError, f"^--model_name_or_path {self.export}: its model.bin is not the one "
                                                "export_record.json records; re-export it"):
            ctranslate2_export.check_export(self.export)

    def test_other_weights_in_the_source_make_it_stale(self):
        (self.run / "model-00001-of-00002.safetensors").write_bytes(b"retrained shard")
        with self.assertRaisesRegex(UsageError, f"{self.export} is stale: {self.run} now holds other weights than it "
                                                f"was exported from; re-export it: python export_t5.py "
                                                f"--model_name_or_path {self.run} --output_dir {self.export}"):
            ctranslate2_export.check_export(self.export)


class UsableExportTest(ExportFolderTestCase):

    @parameterized.parameters("default", "float32", "int8", "bfloat16")
    def test_a_fresh_float32_export_gives_any_compute_type(self, compute_type):
        self.assertEqual(ctranslate2_export.usable_export(self.run, compute_type), self.export)

    @parameterized.named_parameters(("its_own", "int8", True), ("default", "default", True),
                                    ("more_precise", "float32", False), ("another", "int8_float32", False))
    def test_a_quantized_export_gives_only_its_own(self, compute_type, usable):
        self.write_record(quantization="int8")
        self.assertEqual(ctranslate2_export.usable_export(self.run, compute_type), self.export if usable else None)

    def test_no_export_is_none(self):
        (self.export / "model.bin").unlink()
        self.assertIsNone(ctranslate2_export.usable_export(self.run, "default"))

    def test_a_stale_export_is_none_and_says_so(self):
        (self.run / "model-00002-of-00002.safetensors").write_bytes(b"retrained shard")
        with self.assertLogs("t5kit.model.ctranslate2_export", logging.WARNING) as logs:
            self.assertIsNone(ctranslate2_export.usable_export(self.run, "default"))
        self.assertIn(f"{self.export} is stale (the run's weights changed since it was exported)", logs.output[0])


class OpenTranslatorTest(ExportFolderTestCase):

    def setUp(self):
        super().setUp()
        self.loaded = []
        self.converted = []
        for name, value in (("default_device", "cpu"), ("check_compute_type", None), ("check_convertible", None)):
            self.enter_context(mock.patch.object(ctranslate2_backend, name, return_value=value))
        self.enter_context(mock.patch.object(ctranslate2_backend, "load_translator", side_effect=self.load))
        self.enter_context(mock.patch.object(ctranslate2_backend, "convert", side_effect=self.convert))

    def load(self, folder, device, compute_type, threads):
        files = sorted(path.name for path in Path(folder).iterdir())
        self.loaded.append((Path(folder), device, compute_type, threads, files))
        return SimpleNamespace(compute_type="float32")

    def convert(self, model_dir, out, quantization):
        self.converted.append((Path(model_dir), Path(out), quantization))
        (Path(out) / "model.bin").write_bytes(b"converted now")

    def test_an_export_passed_directly_is_loaded_as_it_is(self):
        ctranslate2_export.open_translator(self.export, "int8", threads=2)
        self.assertEqual(self.loaded[0][:4], (self.export, "cpu", "int8", 2))
        self.assertEmpty(self.converted)

    def test_a_runs_fresh_export_is_loaded(self):
        ctranslate2_export.open_translator(self.run)
        self.assertEqual(self.loaded[0][0], self.export)
        self.assertEmpty(self.converted)

    def test_without_a_usable_export_the_model_is_converted_and_the_folder_deleted(self):
        (self.export / "model.bin").unlink()
        ctranslate2_export.open_translator(self.run, "default", threads=1)
        (source, staging, quantization), = self.converted
        self.assertEqual((source, quantization), (self.run, "float32"))
        self.assertEqual(self.loaded[0][0], staging)
        self.assertEqual(self.loaded[0][4], ["model.bin"])  # loaded while the converted folder existed
        self.assertFalse(staging.exists())

    def test_a_stale_export_passed_directly_is_refused_before_loading(self):
        (self.export / "model.bin").write_bytes(b"other weights")
        with self.assertRaisesRegex(UsageError, "its model.bin is not the one export_record.json records"):
            ctranslate2_export.open_translator(self.export)
        self.assertEmpty(self.loaded)


if __name__ == "__main__":
    absltest.main()
