"""data/window_stream.py: windows cut from a stream equal map-style packing, and a stream put at a recorded position
continues exactly where the uninterrupted one did, without re-tokenising what came before. (The collator that
carries the windows' ids into training: tests/train/test_stream_resume.py.)"""
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from unittest import mock

import datasets
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from transformers import T5TokenizerFast

from t5kit.data import corpus
from t5kit.data.window_stream import WindowStream
from tests.helpers import read_paragraphs, require

WINDOW = 61  # a prime, so windows start at varying offsets inside documents
NUM_FILES = 8


class CountingTokenizer:
    """The T5 tokenizer, counting the documents it is asked to tokenise."""

    def __init__(self, tokenizer):
        self.tokenizer, self.documents = tokenizer, 0

    def __call__(self, texts, **kwargs):
        self.documents += len(texts)
        return self.tokenizer(texts, **kwargs)


class StreamTestCase(parameterized.TestCase):
    """A multi-file paragraph corpus (real text) and streams over it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = T5TokenizerFast.from_pretrained(str(require("t5_spiece")))
        paragraphs = read_paragraphs(require("gutenberg/austen-persuasion.txt"), 240)
        cls.dir = Path(absltest.get_default_test_tmpdir()) / "window_stream"
        cls.dir.mkdir(parents=True, exist_ok=True)
        # Several files: datasets shards a stream by file, and a resumed stream must not reopen finished ones.
        per_file = len(paragraphs) // NUM_FILES
        cls.files = []
        for i in range(NUM_FILES):
            path = cls.dir / f"part{i}.txt"
            path.write_text("\n\n".join(paragraphs[i * per_file:(i + 1) * per_file]) + "\n", encoding="utf-8")
            cls.files.append(str(path))

    def stream(self, tokenizer=None, **kwargs):
        raw = datasets.load_dataset("text", data_files={"train": self.files}, split="train", streaming=True,
                                    sample_by="paragraph")
        return WindowStream(corpus.tokenize_documents(raw, tokenizer or self.tokenizer, "text"), WINDOW, **kwargs)


class WindowStreamTest(StreamTestCase):

    def test_windows_equal_map_style_packing(self):
        raw = datasets.load_dataset("text", data_files={"train": self.files}, split="train", sample_by="paragraph",
                                    cache_dir=str(self.dir / "cache"))
        expected = np.asarray(corpus.pack_windows(corpus.tokenize_documents(raw, self.tokenizer, "text"), WINDOW)[
            "input_ids"])
        windows = list(self.stream())
        np.testing.assert_array_equal(np.stack([w["input_ids"] for w in windows]), expected)
        self.assertEqual([w["window_index"] for w in windows], list(range(len(expected))))

    def test_resume_at_any_position_continues_exactly_across_epochs(self):
        stream = self.stream()
        # Two epochs; ids keep counting. datasets visits the files in a new order each epoch (set_epoch).
        first, second = list(stream), list(stream)
        per_epoch = len(first)
        self.assertEqual([w["stream_epoch"] for w in second], [1] * len(second))
        self.assertEqual(second[0]["window_index"], per_epoch)
        uninterrupted = first + second
        # Positions in the first file, deep in later files, the last window of epoch 0 and inside epoch 1.
        for window_id in (1, 7, per_epoch // 2, per_epoch - 1, per_epoch, per_epoch + 5):
            position = json.loads(json.dumps(stream.position(window_id)))  # as saved in a checkpoint
            resumed = WindowStream(self.stream().documents, WINDOW)
            resumed.load_position(position)
            rest = list(resumed)
            if window_id < per_epoch:  # the resumed epoch ends; the next iteration is the following epoch
                rest += list(resumed)
            expected = uninterrupted[window_id:]
            self.assertEqual([w["window_index"] for w in rest], [w["window_index"] for w in expected], window_id)
            self.assertEqual([w["stream_epoch"] for w in rest], [w["stream_epoch"] for w in expected], window_id)
            for got, want in zip(rest, expected):
                np.testing.assert_array_equal(got["input_ids"], want["input_ids"])

    def test_resume_does_not_tokenise_the_consumed_stream_again(self):
        with mock.patch.object(corpus, "TOKENIZE_BATCH_SIZE", 8):
            stream = self.stream()
            windows = list(stream)
            late = len(windows) - 3  # in the last file
            position = stream.position(late)

            counting = CountingTokenizer(self.tokenizer)
            resumed = self.stream(counting, prefetch=0)  # counts what one window costs, without reading ahead
            resumed.load_position(position)
            counting.documents = 0  # reading the columns at build time does not count
            window = next(iter(resumed))
            np.testing.assert_array_equal(window["input_ids"], windows[late]["input_ids"])
            # At most the tokenisation batch the position falls in is read again, not the ~230 documents before.
            self.assertLessEqual(counting.documents, 8)

            restarted = self.stream(counting)
            counting.documents = 0
            list(restarted)
            self.assertGreater(counting.documents, 200)  # what reading the stream from its start costs

    def test_held_out_windows_are_skipped_each_epoch_and_eval_stream_stops(self):
        whole = self.stream()
        everything = [[w["input_ids"] for w in epoch] for epoch in (list(whole), list(whole))]
        train = self.stream(skip_windows=3)
        for epoch in range(2):
            windows = np.stack([w["input_ids"] for w in train])
            np.testing.assert_array_equal(windows, np.stack(everything[epoch][3:]), f"epoch {epoch}")
        evaluation = list(self.stream(max_windows=3, with_positions=False))
        self.assertEqual([sorted(w) for w in evaluation], [["input_ids"]] * 3)
        np.testing.assert_array_equal(np.stack([w["input_ids"] for w in evaluation]), np.stack(everything[0][:3]))

    def test_forgotten_and_bad_positions_are_refused(self):
        stream = self.stream()
        iterator = iter(stream)
        for _ in range(5):
            next(iterator)
        stream.forget_before(3)
        self.assertEqual(stream.position(3)["window"], 3)
        with self.assertRaisesRegex(KeyError, r"no recorded position for window 1 \(known: 3..5\)"):
            stream.position(1)
        with self.assertRaisesRegex(ValueError, "stream position lacks documents, offset"):
            stream.load_position({"epoch": 0, "window": 3})


class FailingTokenizer(CountingTokenizer):
    """The T5 tokenizer until `after` documents have been tokenised, then an error (a broken input)."""

    def __init__(self, tokenizer, after):
        super().__init__(tokenizer)
        self.after = after

    def __call__(self, texts, **kwargs):
        if self.documents >= self.after:
            raise RuntimeError(f"broken document after {self.documents}")
        return super().__call__(texts, **kwargs)


def prefetch_threads():
    return [thread for thread in threading.enumerate() if thread.name == "stream-prefetch" and thread.is_alive()]


class ReadingAheadTest(StreamTestCase):
    """A background thread reads and cuts windows ahead; what the stream hands out and records does not change."""

    def test_reading_ahead_hands_out_and_records_what_reading_in_line_does(self):
        in_line, ahead = self.stream(prefetch=0), self.stream(prefetch=4)
        expected = list(in_line) + list(in_line)
        iterator = iter(ahead)
        got = [next(iterator)]
        self.assertLen(prefetch_threads(), 1)  # reading ahead while the first window is out
        got += list(iterator) + list(ahead)
        self.assertEmpty(prefetch_threads())  # each finished epoch stops its thread
        self.assertEqual([(w["window_index"], w["stream_epoch"]) for w in got],
                         [(w["window_index"], w["stream_epoch"]) for w in expected])
        for have, want in zip(got, expected):
            np.testing.assert_array_equal(have["input_ids"], want["input_ids"])
        for window_id in range(len(expected) + 1):
            self.assertEqual(json.dumps(ahead.position(window_id)), json.dumps(in_line.position(window_id)))

    def test_an_abandoned_iteration_stops_reading_before_the_next_one_starts(self):
        stream = self.stream(prefetch=4)
        iterator = iter(stream)
        for _ in range(5):
            next(iterator)
        abandoned = stream.prefetcher.thread
        restarted = list(stream)  # what the Trainer does at a new epoch while the old iterator is still referenced
        self.assertFalse(abandoned.is_alive())
        np.testing.assert_array_equal(np.stack([w["input_ids"] for w in restarted]),
                                      np.stack([w["input_ids"] for w in self.stream(prefetch=0)]))

    def test_an_error_while_reading_ahead_reaches_the_consumer(self):
        with mock.patch.object(corpus, "TOKENIZE_BATCH_SIZE", 8):
            stream = self.stream(FailingTokenizer(self.tokenizer, after=16), prefetch=4)
            with self.assertRaisesRegex(RuntimeError, "broken document after 16"):
                list(stream)
        self.assertEmpty(prefetch_threads())

    @pytest.mark.slow  # a second interpreter
    def test_a_program_ending_mid_iteration_stops_the_reading_thread_first(self):
        """A run stopped at max_steps ends with its iteration unfinished. The interpreter kills daemon threads where
        they stand, which aborts the process when one is inside native code (the tokenizer); the reading thread
        must be stopped, closing its document stream, before that. The child's document stream notes its close."""
        closed = Path(self.create_tempdir().full_path) / "closed"
        child = textwrap.dedent(f"""
            import itertools
            from t5kit.data.window_stream import WindowStream

            class Documents:  # endless, as a streamed corpus seems to a run that stops at max_steps
                def set_epoch(self, epoch): pass
                def state_dict(self): return {{}}
                def __iter__(self):
                    try:
                        for i in itertools.count():
                            yield {{"input_ids": [i % 100] * 7}}
                    finally:
                        open({str(closed)!r}, "w").close()

            iterator = iter(WindowStream(Documents(), 5, prefetch=4))
            next(iterator)  # the thread has read ahead and waits for room; the program ends
            """)
        subprocess.run([sys.executable, "-c", child], check=True, timeout=60)
        self.assertTrue(closed.exists())


if __name__ == "__main__":
    absltest.main()
