"""The sha256 digest that says which bytes a file holds: checkpoint manifests (train/checkpointing.py), a CTranslate2
export's record of the weights it was made from (model/ctranslate2_export.py), the quickstart corpus. Base layer:
the model layer reads digests and the outputs layer writes them."""
import hashlib

HASH_CHUNK_BYTES = 1 << 22


def file_sha256(*paths) -> str:
    """sha256 of the files' bytes, read in the order given: one file's digest, or one for a sharded model."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(HASH_CHUNK_BYTES), b""):
                digest.update(chunk)
    return digest.hexdigest()
