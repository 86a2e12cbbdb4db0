"""Windows cut from a streamed corpus, resumable from a recorded position without re-reading what was consumed.

    stream = WindowStream(tokenized_documents, tokens_length)   # a datasets.IterableDataset of input_ids
    for window in stream: ...        # {"input_ids": (tokens_length,), "window_index": k, "stream_epoch": e}
    position = stream.position(k + 1)             # JSON-able: where window k + 1 starts
    fresh = WindowStream(tokenized_documents, tokens_length); fresh.load_position(position)
    next(iter(fresh))                             # window k + 1, without reading windows 0..k again

A map-style corpus is packed once (corpus.pack_windows) and resumed by index. A stream cannot be indexed, so windows
are cut as documents arrive, exactly as pack_windows would cut them (every document in order, EOS kept, the
remainder at the end of the stream dropped), and each window records where it starts: the datasets state of the
document stream just before the document the window starts in (`IterableDataset.state_dict()`, None at the start of
an epoch) plus how many of that document's tokens earlier windows took. Loading it makes datasets jump to that
document: shards (files) already finished are not opened again; inside the current shard datasets skips examples
it has read (no tokenisation, packing or collation of them), and the batched tokenisation map restarts at the
start of its batch of TOKENIZE_BATCH_SIZE documents.

Each new epoch calls datasets' `set_epoch`, which visits the files (shards) of a multi-file corpus in a new order,
seeded by the epoch (what the Trainer does with a datasets IterableDataset); the saved state belongs to its epoch.

Windows carry an id that keeps counting across epochs, so the trainer can tell which windows it has trained on
although the data loader reads ahead (stream_resume.py). Positions are kept for windows not yet trained on only
(`forget_before`). Iterating needs the main process (`--dataloader_num_workers 0`): positions live on this object.

Reading ahead: with no loader workers, reading and tokenising would happen between training steps, while the
accelerator waits (the trainer syncs with it every step). So a background thread (`Prefetcher`) reads, tokenises
and cuts up to `prefetch` windows ahead; it needs no GIL while the main thread waits on the device or the fast
tokenizer works. The main thread still records the positions, in the order it hands windows out, so windows,
positions and resume are exactly those of reading in line (`prefetch=0`). Streams with `max_windows` (evaluation,
held-out windows) read in line: they stop early, and reading ahead would only read more than they use.
"""
import atexit
import collections
import queue
import threading
import weakref

import numpy as np
import torch

WINDOW_INDEX = "window_index"
STREAM_EPOCH = "stream_epoch"
POSITION_KEYS = ("epoch", "window", "documents", "offset")
PREFETCH_WINDOWS = 2048  # ~2 tokenisation batches of C4-sized documents at 568 ids; 9 MB of int64 ids
RUNNING_PREFETCHERS = weakref.WeakSet()


@atexit.register
def stop_reading_ahead():
    """Stops the threads still reading when the program ends: a training loop stopped at max_steps leaves its
    iteration unfinished. The interpreter would kill such a daemon thread wherever it stands, and one killed inside
    native code (the tokenizer, torch) aborts the process ("terminate called without an active exception") after a
    run that succeeded. atexit runs before that."""
    for prefetcher in list(RUNNING_PREFETCHERS):
        prefetcher.close()


class Prefetcher:
    """Iterates `iterator` in a daemon thread, up to `depth` items ahead of the consumer. Errors raised there are
    raised to the consumer; close() stops the thread and waits for it (at most the item it is producing)."""

    _END = object()

    def __init__(self, iterator, depth):
        self.items = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._produce, args=(iterator,), name="stream-prefetch", daemon=True)
        self.thread.start()
        RUNNING_PREFETCHERS.add(self)

    def _put(self, item):
        while not self.stop.is_set():
            try:
                self.items.put(item, timeout=0.05)  # a timeout, so that close() is noticed while the queue is full
                return True
            except queue.Full:
                pass
        return False

    def _produce(self, iterator):
        try:
            for item in iterator:
                if not self._put((item, None)):
                    return
            self._put((self._END, None))
        except BaseException as error:  # handed to the consumer, which raises it
            self._put((self._END, error))
        finally:
            getattr(iterator, "close", lambda: None)()

    def __iter__(self):
        while True:
            item, error = self.items.get()
            if error is not None:
                raise error
            if item is self._END:
                return
            yield item

    def close(self):
        self.stop.set()
        self.thread.join()
        RUNNING_PREFETCHERS.discard(self)


def epoch_start(epoch, window):
    """The position of the first window of an epoch (window ids keep counting across epochs)."""
    return {"epoch": epoch, "window": window, "documents": None, "offset": 0}


class WindowStream(torch.utils.data.IterableDataset):
    """Exact windows of `tokens_length` ids from a stream of tokenised documents, each with a resumable position.

    skip_windows: windows left out at the start of every epoch (held out for evaluation).
    max_windows: stop after this many (an evaluation stream). with_positions=False yields plain windows.
    """

    def __init__(self, documents, tokens_length, skip_windows=0, max_windows=None, with_positions=True,
                 prefetch=PREFETCH_WINDOWS, explain_error=None):
        self.documents = documents
        self.explain_error = explain_error  # error -> the error to raise instead (a one-line UsageError), or None
        self.tokens_length = tokens_length
        self.skip_windows = skip_windows
        self.max_windows = max_windows
        self.with_positions = with_positions
        self.prefetch = prefetch  # windows read ahead by a background thread; 0: read in line
        self.prefetcher = None  # the running iteration's
        self.start = epoch_start(0, 0)  # where the next iteration starts
        self.positions = collections.OrderedDict()  # window id -> position, ids increasing

    def load_position(self, position):
        """The next iteration starts at `position` (from `position()`, possibly in another process)."""
        missing = [key for key in POSITION_KEYS if key not in position]
        if missing:
            raise ValueError(f"stream position lacks {', '.join(missing)}: {position}")
        self.start = dict(position)
        self.positions = collections.OrderedDict()  # those of another run; iterating records the new ones

    def position(self, window_id):
        """Where window `window_id` starts; known once the window before it has been read."""
        if window_id not in self.positions:
            known = f"{next(iter(self.positions))}..{next(reversed(self.positions))}" if self.positions else "none"
            raise KeyError(f"no recorded position for window {window_id} (known: {known})")
        return self.positions[window_id]

    def forget_before(self, window_id):
        """Drops positions of windows before `window_id`: they have been trained on and will not be resumed to."""
        while self.positions and next(iter(self.positions)) < window_id:
            self.positions.popitem(last=False)

    def __iter__(self):
        if self.prefetcher is not None:  # an iteration abandoned unfinished: its thread must stop reading first
            self.prefetcher.close()
        start = self.start
        windows = self._cut_windows(start)  # reads nothing until iterated
        # Bounded reads (evaluation, held-out windows) stop early: reading ahead there would only read too much.
        read_ahead = self.prefetch if self.max_windows is None else 0
        prefetcher = self.prefetcher = Prefetcher(windows, read_ahead) if read_ahead else None
        try:
            yield from self._hand_out(start, prefetcher if prefetcher else windows)
        finally:
            if prefetcher is not None:
                prefetcher.close()
                if self.prefetcher is prefetcher:
                    self.prefetcher = None

    def _hand_out(self, start, windows):
        """Yields the windows with their ids, recording where each next one starts (see the module doc)."""
        epoch, window_id = start["epoch"], start["window"]
        skip = self.skip_windows if start["documents"] is None and start["offset"] == 0 else 0
        if self.with_positions:  # an epoch start re-skips the held-out windows, so it is the first one's position
            self.positions[window_id] = start
        produced = 0
        for window, after in windows:
            if skip:
                skip -= 1
                continue
            if self.max_windows is not None and produced >= self.max_windows:
                return
            produced += 1
            if not self.with_positions:
                yield {"input_ids": window}
                continue
            self.positions[window_id + 1] = {"epoch": epoch, "window": window_id + 1, **after}
            yield {"input_ids": window, WINDOW_INDEX: window_id, STREAM_EPOCH: epoch}
            window_id += 1
        # Exhausted (the remainder is dropped, as in pack_windows): the next window opens the next epoch.
        self.start = epoch_start(epoch + 1, window_id)
        if self.with_positions:
            self.positions[window_id] = self.start

    def _cut_windows(self, start):
        """(window, where the next one starts); a position is {"documents": state, "offset": n}."""
        self.documents.set_epoch(start["epoch"])  # a state saved in another epoch is then ignored by datasets
        if start["documents"] is not None:
            self.documents.load_state_dict(start["documents"])
        length = self.tokens_length
        pieces, filled = [], 0
        state_before = start["documents"]  # datasets state just before the next document
        offset = start["offset"]  # tokens of that document already taken by earlier windows
        for document in self._documents_explained():
            ids = np.asarray(document["input_ids"], dtype=np.int64)
            state_of_document = state_before
            if self.with_positions:  # a deep copy per document: cheap next to tokenising it
                state_before = self.documents.state_dict()
            i, offset = offset, 0
            while i < len(ids):
                take = min(length - filled, len(ids) - i)
                pieces.append(ids[i:i + take])
                filled, i = filled + take, i + take
                if filled == length:
                    after = ({"documents": state_of_document, "offset": i} if i < len(ids)
                             else {"documents": state_before, "offset": 0})
                    yield np.concatenate(pieces), after
                    pieces, filled = [], 0

    def _documents_explained(self):
        """The documents; an error reading them is raised as explain_error turns it (naming the bad file)."""
        try:
            yield from self.documents
        except Exception as err:  # re-raised unless explain_error knows it
            explained = self.explain_error(err) if self.explain_error is not None else None
            if explained is None:
                raise
            raise explained from None
