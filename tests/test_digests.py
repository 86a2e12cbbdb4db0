"""t5kit/digests.py: file_sha256, the digest that says which bytes a file holds (checkpoint manifests, CTranslate2
export records): hashlib's sha256 of one file, or of several read in the order given, read in chunks."""
import hashlib
from pathlib import Path
from unittest import mock

from absl.testing import absltest, parameterized

from t5kit import digests


class FileSha256Test(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def write(self, name, data):
        (self.dir / name).write_bytes(data)
        return self.dir / name

    @parameterized.named_parameters(("empty", b""), ("text", b"T5 weights\n"), ("binary", bytes(range(256)) * 9))
    def test_one_file_is_hashlibs_digest(self, data):
        self.assertEqual(digests.file_sha256(self.write("f", data)), hashlib.sha256(data).hexdigest())

    def test_several_files_are_one_digest_of_their_bytes_in_order(self):
        first, second = self.write("a", b"first shard"), self.write("b", b"second shard")
        self.assertEqual(digests.file_sha256(first, str(second)),
                         hashlib.sha256(b"first shardsecond shard").hexdigest())
        self.assertNotEqual(digests.file_sha256(second, first), digests.file_sha256(first, second))

    def test_a_file_longer_than_a_chunk_is_read_whole(self):
        data = bytes(range(256)) * 10
        with mock.patch.object(digests, "HASH_CHUNK_BYTES", 100):
            self.assertEqual(digests.file_sha256(self.write("f", data)), hashlib.sha256(data).hexdigest())

    def test_a_missing_file_is_an_error_not_an_empty_digest(self):
        with self.assertRaises(FileNotFoundError):
            digests.file_sha256(self.dir / "absent")


if __name__ == "__main__":
    absltest.main()
