"""The local model's process-wide bound: at most EMBEDDING_MAX_CONCURRENCY calls at once, each with a model of its
own, a long call sliced, and a short call (a query) ahead of the waiting slices of a document."""

import threading
import time

import numpy as np
import pytest

from ai import embedders
from ai.embedders import EmbeddingGate, LocalEmbedder


class CountingModel:
    """Stands in for the SentenceTransformer: counts calls in flight (shared by its copies) and records each call;
    `hold` blocks calls until set, so the test decides when they end."""

    def __init__(self, shared):
        self.shared = shared

    def __deepcopy__(self, memo):
        self.shared["copies"] += 1
        return CountingModel(self.shared)

    def encode(self, texts, **options):
        shared = self.shared
        with shared["lock"]:
            shared["active"] += 1
            shared["most"] = max(shared["most"], shared["active"])
            shared["models"].add(id(self))
            shared["calls"].append(list(texts))
            shared["pass_sizes"].append(options["batch_size"])
        shared["started"].release()
        try:
            assert shared["hold"].wait(timeout=30), "the test never released the call"
            if shared.get("fail"):
                raise RuntimeError("the model failed")
            return np.asarray([[float(text.split()[-1])] * 4 for text in texts], dtype=np.float32)
        finally:
            with shared["lock"]:
                shared["active"] -= 1


@pytest.fixture
def local(monkeypatch):
    """A LocalEmbedder over a CountingModel, and a fresh process-wide gate."""
    monkeypatch.setattr(embedders, "EMBEDDING_GATE", EmbeddingGate())
    shared = {
        "lock": threading.Lock(),
        "active": 0,
        "most": 0,
        "models": set(),
        "calls": [],
        "pass_sizes": [],  # the texts per forward pass each call asked for
        "copies": 0,
        "hold": threading.Event(),
        "started": threading.Semaphore(0),
    }
    embedder = object.__new__(LocalEmbedder)
    embedder._model = CountingModel(shared)
    embedder._free_models = [embedder._model]
    embedder._models_lock = threading.Lock()
    embedder._waiting = []
    embedder._waiting_lock = threading.Lock()
    embedder.batch_size = 64
    embedder.dimensions = 4
    embedder.encodes_directly = False  # CountingModel answers encode
    embedder.parallel_passes = 1  # as a runtime other than ONNX Runtime: one pass at a time
    return embedder, shared


def run_in_threads(count, work):
    threads = [threading.Thread(target=work, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    return threads


def wait_until(condition):
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.005)


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_no_more_calls_run_at_once_than_the_bound_each_on_a_model_of_its_own(settings, local, limit):
    settings.EMBEDDING_MAX_CONCURRENCY = limit
    settings.EMBEDDING_SLICE_SIZE = 8
    embedder, shared = local
    results = [None] * 6

    def work(index):
        results[index] = embedder.embed([f"query {index}"])

    threads = run_in_threads(6, work)
    for _ in range(limit):  # as many calls as the bound allows get in ...
        assert shared["started"].acquire(timeout=30)
    assert not shared["started"].acquire(timeout=0.2)  # ... and no more while they run
    assert shared["active"] == limit
    shared["hold"].set()
    for thread in threads:
        thread.join(timeout=30)

    assert shared["most"] == limit
    assert len(shared["models"]) == limit  # concurrent calls never share a model (its tokenizer is not thread-safe)
    assert shared["copies"] == limit - 1
    assert [result.tolist() for result in results] == [[[float(index)] * 4] for index in range(6)]


def test_short_calls_waiting_together_go_through_the_model_as_one_batch_each_getting_its_own_vectors(settings, local):
    settings.EMBEDDING_MAX_CONCURRENCY = 1
    settings.EMBEDDING_SLICE_SIZE = 8
    embedder, shared = local
    results = {}

    threads = run_in_threads(1, lambda _: results.setdefault(0, embedder.embed(["first 0"])))
    assert shared["started"].acquire(timeout=30)  # the first call runs (and is held) ...
    threads += run_in_threads(5, lambda index: results.setdefault(index + 1, embedder.embed([f"q {index + 1}"] * 2)))
    wait_until(lambda: embedders.EMBEDDING_GATE.waiting_short() == 5)  # ... while five more wait
    shared["hold"].set()
    for thread in threads:
        thread.join(timeout=30)

    assert len(shared["calls"]) == 2  # the five waiting calls in one model call
    assert sorted(shared["calls"][1]) == sorted(text for index in range(1, 6) for text in [f"q {index}"] * 2)
    assert {index: result.tolist() for index, result in results.items()} == {
        0: [[0.0] * 4],
        **{index: [[float(index)] * 4] * 2 for index in range(1, 6)},
    }


def test_a_batch_that_fails_fails_each_of_its_calls_and_the_next_calls_still_run(settings, local):
    settings.EMBEDDING_MAX_CONCURRENCY = 1
    embedder, shared = local
    outcomes = {}

    def work(index):
        try:
            outcomes[index] = embedder.embed([f"q {index}"]).tolist()
        except RuntimeError as exc:
            outcomes[index] = str(exc)

    shared["fail"] = True
    threads = run_in_threads(1, work)
    assert shared["started"].acquire(timeout=30)
    threads += run_in_threads(2, lambda index: work(index + 1))
    wait_until(lambda: embedders.EMBEDDING_GATE.waiting_short() == 2)
    shared["hold"].set()
    for thread in threads:
        thread.join(timeout=30)
    shared["fail"] = False
    work(3)

    assert outcomes == {0: "the model failed", 1: "the model failed", 2: "the model failed", 3: [[3.0] * 4]}
    assert embedder._waiting == []


def test_a_long_call_is_sliced_and_a_query_waiting_meanwhile_goes_before_its_next_slice(settings, local):
    settings.EMBEDDING_MAX_CONCURRENCY = 1
    settings.EMBEDDING_SLICE_SIZE = 8
    embedder, shared = local
    document = [f"chunk {number}" for number in range(24)]  # three slices
    results = {}

    threads = run_in_threads(1, lambda _: results.setdefault("document", embedder.embed(document)))
    assert shared["started"].acquire(timeout=30)  # the first slice runs (and is held)
    threads += run_in_threads(1, lambda _: results.setdefault("query", embedder.embed(["how do I deploy? 7"])))
    wait_until(lambda: embedders.EMBEDDING_GATE.waiting_short() == 1)
    shared["hold"].set()
    for thread in threads:
        thread.join(timeout=30)

    assert shared["calls"] == [document[0:8], ["how do I deploy? 7"], document[8:16], document[16:24]]
    assert results["document"].shape == (24, 4)
    assert shared["most"] == 1


def test_a_long_call_is_sliced_by_length_and_answered_in_its_own_order(settings, local):
    settings.EMBEDDING_SLICE_SIZE = 4
    embedder, shared = local
    shared["hold"].set()
    texts = [("word " * (number % 3 * 10)) + str(number) for number in range(12)]  # short, middling, long in turn

    vectors = embedder.embed(texts)

    assert [sorted({len(text) for text in call}) for call in shared["calls"]] == [[1], [51, 52], [101, 102]]
    assert vectors.tolist() == [[float(number)] * 4 for number in range(12)]


def test_a_long_calls_slices_go_through_in_one_pass_each_and_a_short_calls_texts_one_per_pass(settings, local):
    settings.EMBEDDING_SLICE_SIZE = 6
    embedder, shared = local
    shared["hold"].set()

    embedder.embed([f"turn {number}" for number in range(12)])  # sorted by length: little padding in a big pass
    embedder.embed(["how do I deploy? 1", "a much longer question about the deployment of the service? 2"])

    assert [len(call) for call in shared["calls"]] == [6, 6, 2]
    assert shared["pass_sizes"] == [6, 6, 1]  # unsorted texts of a short call: none padded to another's length


def test_an_empty_call_embeds_nothing(local):
    embedder, shared = local

    assert embedder.embed([]).shape == (0, 4)
    assert shared["calls"] == []
