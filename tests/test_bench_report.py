"""bench/report.py's figures and JSON from given measurements (pure functions: no peers, no database), its
--help, and the product's store side taken apart on the database. The benchmark itself is run by `make bench` /
`make bench-quick`, never by the suite."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH / "peers"))

import _measure  # noqa: E402
import _report_figures as figures  # noqa: E402


def search(embed_ms, e2e_ms):
    return {"embed_ms": embed_ms, "e2e_ms": e2e_ms}


def rounds_of(system, *, with_10k=True, store_extra=0.0):
    """Two rounds of every phase for one system. Embedding and search vary together per query, so the median of
    the paired differences (2 ms, + store_extra) differs from the difference of the medians."""
    entries = []
    for number in (1, 2):
        raw = {
            "search_1k": search([10, 20, 30], [40 + store_extra, 22 + store_extra, 32 + store_extra]),
            "add": {"count": 10, "seconds": 0.5, "latencies_ms": [40, 50, 60]},
            "add_8_clients": {"count": 80, "attempted": 80, "seconds": 2.0, "errors": []},
            "bulk": {"rows": 200, "seconds": 2.0},
        }
        if with_10k:
            raw["search_10k"] = search([10, 10, 10], [30, 31, 32])
        if system == "product":
            raw["context_1k"] = {"e2e_ms": [12, 16, 14]}
        entries += [{"round": number, "phase": phase, "system": system, "raw": r} for phase, r in raw.items()]
    return entries


RECALL = {
    "recall_at_10": 0.7,
    "evidence_recall_at_10": 0.6,
    "questions": 10,
    "per_category": {"multi-hop": {"questions": 10, "recall_at_10": 0.7, "evidence_recall_at_10": 0.6}},
}


def test_every_documented_key_is_written_per_system_with_ratios_against_each_peer(tmp_path):
    # Given: two rounds of the product and Mem0, and LangGraph measured at 1k only
    rounds = rounds_of("product") + rounds_of("mem0", store_extra=2.0) + rounds_of("langgraph", with_10k=False)
    info = {name: {"versions": {}} for name in ("product", "mem0", "langgraph")}
    recall = {"product": RECALL, "mem0": RECALL | {"recall_at_10": 0.5}}
    # When: the report is built and written
    footprint = {"product": {"disk_kb_per_1000_memories": 3100.0, "rss_mb": 690.0}, "mem0": {"rss_mb": 800.0}}
    report = figures.build_report(
        rounds=rounds, recall=recall, info=info, machine={}, settings={}, skipped=[], footprint=footprint
    )
    written = json.loads(figures.write_json(report, tmp_path / "bench" / "report.json").read_text())
    # Then: every key is there for every system, None where the system was not measured
    for name in ("product", "mem0", "langgraph"):
        assert set(figures.KEYS) <= set(written["systems"][name])
    product, mem0, langgraph = (written["systems"][n] for n in ("product", "mem0", "langgraph"))
    assert product["search_store_p50_ms_1k"] == 2  # median of (30, 2, 2), not median(e2e) - median(embed) = 12
    assert mem0["search_store_p50_ms_1k"] == 4
    assert product["search_e2e_p50_ms_1k"] == 32
    assert product["search_store_p50_ms_10k"] == 21
    assert langgraph["search_store_p50_ms_10k"] is None
    assert product["add_per_s"] == 20  # 20 adds in 1 s over both rounds
    assert product["add_per_s_8_clients"] == 40
    assert product["bulk_rows_per_s"] == 100
    assert product["locomo_recall_at_10"] == 0.7
    assert langgraph["locomo_recall_at_10"] is None
    # and the ratios are this product / each peer, key by key
    assert set(written["ratios"]) == {"mem0", "langgraph"}
    assert set(written["ratios"]["mem0"]) == set(figures.KEYS) | {
        f"{key}_vs_search_e2e" for key in figures.CONTEXT_KEYS
    }
    assert written["ratios"]["mem0"]["search_store_p50_ms_1k"] == pytest.approx(0.5)
    assert written["ratios"]["mem0"]["locomo_recall_at_10"] == pytest.approx(1.4)
    assert written["ratios"]["langgraph"]["search_e2e_p50_ms_10k"] is None
    assert written["ratios"]["langgraph"]["add_per_s"] == pytest.approx(1.0)
    assert (product["disk_kb_per_1000_memories"], product["rss_mb"]) == (3100.0, 690.0)
    assert (mem0["disk_kb_per_1000_memories"], mem0["rss_mb"], langgraph["rss_mb"]) == (None, 800.0, None)
    assert product["context_p50_ms_1k"] == 14
    assert (product["context_p50_ms_10k"], mem0["context_p50_ms_1k"]) == (None, None)  # not measured
    assert written["ratios"]["mem0"]["context_p50_ms_1k_vs_search_e2e"] == pytest.approx(14 / 34)
    assert written["ratios"]["mem0"]["context_p50_ms_10k_vs_search_e2e"] is None
    # and the rounds' raw figures are kept
    assert len(written["rounds"]) == len(rounds)


def test_a_failed_round_is_left_out_of_the_figures():
    # Given: the product's second bulk round failed
    rounds = rounds_of("product")
    failed = next(r for r in rounds if r["round"] == 2 and r["phase"] == "bulk")
    failed["raw"] = None
    # When / then: the rate is the first round's alone
    assert figures.system_figures(rounds, "product")["bulk_rows_per_s"] == 100
    assert figures.round_summary("bulk", None, "Traceback...\nRuntimeError: dead port").endswith("dead port")


def test_recall_counts_a_question_when_an_evidence_turn_is_in_the_top_10_over_categories_1_to_4():
    # Given: four questions, one adversarial (category 5), one whose evidence is 11th
    questions = [
        {"category": 1, "evidence": ["D1:1", "D1:2"]},
        {"category": 4, "evidence": ["D2:1"]},
        {"category": 4, "evidence": ["D3:1"]},
        {"category": 5, "evidence": ["D4:1"]},
    ]
    found = [["D1:2", "x"], ["D2:1"], [f"n{i}" for i in range(10)] + ["D3:1"], ["D4:1"]]
    # When
    scores = figures.recall_scores(questions, found)
    # Then: 2 of the 3 core questions recalled; half of the first one's evidence found
    assert scores["recall_at_10"] == pytest.approx(2 / 3)
    assert scores["evidence_recall_at_10"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert scores["questions"] == 3
    assert scores["per_category"]["adversarial"]["recall_at_10"] == 1.0
    assert scores["per_category"]["single-hop"]["recall_at_10"] == 0.5


def test_the_markdown_report_has_a_row_per_key_and_the_rounds():
    rounds = rounds_of("product") + rounds_of("mem0")
    for entry in rounds:
        entry["summary"] = figures.round_summary(entry["phase"], entry["raw"])
    settings = {"mode": "quick", "rounds": 2, "queries": 3, "started_at": "now", "seconds": 1.0}
    report = figures.build_report(
        rounds=rounds,
        recall={"product": RECALL},
        info={"product": {}, "mem0": {}},
        machine={},
        settings=settings,
        skipped=["LangGraph: not chosen"],
    )
    text = figures.markdown(report, ["/x/latency_vs_memories.png"])
    for key in (*figures.KEYS, *figures.CONTEXT_KEYS, *figures.FOOTPRINT_KEYS):
        assert f"| `{key}` |" in text
    assert "| `context_p50_ms_1k` | 14.0 | - | 0.44x |" in text  # over Mem0's end-to-end search at 1k (32 ms)
    assert "p50 14.00 ms end to end (3 queries)" in text
    assert "ratio vs Mem0 OSS" in text
    assert "![latency_vs_memories](latency_vs_memories.png)" in text
    assert "- LangGraph: not chosen" in text
    assert "store p50 2.00 ms" in text


SPLIT = {
    "after_embedding_ms": [6.0, 10.0, 8.5],
    "facts_search_ms": [5.0, 9.0, 7.0],
    "statistics_ms": [1.0, 1.0, 2.0],
    "statement_ms": [3.0, 4.0, 4.0],
    "server_planning_ms": [0.5, 0.7, 0.6],
    "server_execution_ms": [2.0, 3.0, 2.5],
}


def test_the_products_store_side_taken_apart_gives_each_parts_p50_and_the_rest_paired_per_query():
    # Given: the product's store side taken apart at 1k in one round, beside Mem0's rounds
    split_round = {"round": 1, "phase": "store_split_1k", "system": "product", "raw": SPLIT}
    split_round["summary"] = figures.round_summary("store_split_1k", SPLIT)
    rounds = rounds_of("product") + rounds_of("mem0") + [split_round]
    for entry in rounds:
        entry.setdefault("summary", figures.round_summary(entry["phase"], entry["raw"]))
    settings = {"mode": "quick", "rounds": 2, "queries": 3, "started_at": "now", "seconds": 1.0}
    # When: the report is built
    report = figures.build_report(
        rounds=rounds, recall={}, info={"product": {}, "mem0": {}}, machine={}, settings=settings, skipped=[]
    )
    text = figures.markdown(report, [])
    # Then: each part's p50; the rest is the median of (facts_search - statistics - statement) per query: 1, 4, 1 -> 1
    # (the medians' difference would be 7 - 1 - 4 = 2)
    product, mem0 = report["systems"]["product"], report["systems"]["mem0"]
    assert product["search_store_split_ms_1k"] == {
        "after_embedding": 8.5,
        "facts_search": 7.0,
        "statistics": 1.0,
        "statement": 4.0,
        "server_planning": 0.6,
        "server_execution": 2.5,
        "rest": 1.0,
    }
    assert product["search_store_split_ms_10k"] is None  # not measured
    assert mem0["search_store_split_ms_1k"] is None
    # and report.md has a table of them beside each peer's whole store side
    assert "## The product's store side, taken apart (p50 ms)" in text
    assert "| the search statement, sent to fetched | 4.00 |" in text
    assert "| the rest: scoring, MMR, building the facts (facts_search - the two above, per query) | 1.00 |" in text
    assert "| Mem0 OSS: its whole store side | 2.00 |" in text
    assert (
        "facts_search p50 8.50 ms after the embedding, 7.00 hot: statistics 1.00, statement 4.00 (planning 0.60, "
        "execution 2.50), rest 1.00 (3 queries)" in text
    )


def test_no_store_split_measured_writes_no_such_section():
    rounds = rounds_of("product")
    for entry in rounds:
        entry["summary"] = figures.round_summary(entry["phase"], entry["raw"])
    report = figures.build_report(
        rounds=rounds, recall={}, info={"product": {}}, machine={}, settings={"mode": "quick", "rounds": 2,
        "queries": 3, "started_at": "now", "seconds": 1.0}, skipped=[],
    )  # fmt: skip

    assert "taken apart" not in figures.markdown(report, [])


@pytest.mark.django_db
def test_the_product_takes_its_store_side_apart_on_the_database(settings):
    """bench/report.py's product phase on real PostgreSQL: every query timed in each part, the warm-up left out."""
    import report as bench_report

    from facts.services import facts_import

    settings.EMBEDDING_PROVIDER = "hash"
    system = bench_report.ProductSystem()
    facts_import(
        tenant=system.tenant,
        facts=[{"user_id": "u1", "content": text} for text in ("Likes green tea", "Lives in Lisbon", "Has a dog")],
        actor="test",
    )

    split = system.store_split("u1", ["Where does the user live?", "What does the user drink?"], warmup=1)

    assert set(split) == {
        "after_embedding_ms", "facts_search_ms", "statistics_ms", "statement_ms", "server_planning_ms",
        "server_execution_ms",
    }  # fmt: skip
    assert all(len(values) == 2 for values in split.values())  # the warm-up query is not counted
    assert all(value > 0 for values in split.values() for value in values)


def test_the_other_scripts_outputs_of_make_bench_join_the_markdown(tmp_path):
    (tmp_path / "forgetting.txt").write_text("sweep over 1,000,000 facts: 412 s\n")
    (tmp_path / "kb.txt").write_text("\n".join(f"line {n}" for n in range(100)) + "\n")
    rounds = rounds_of("product")
    for entry in rounds:
        entry["summary"] = figures.round_summary(entry["phase"], entry["raw"])
    report = figures.build_report(
        rounds=rounds, recall={}, info={"product": {}}, machine={}, settings={"mode": "full",
        "rounds": 2, "queries": 3, "started_at": "now", "seconds": 1.0}, skipped=[],
    )  # fmt: skip
    report["scripts"] = figures.script_outputs(tmp_path)

    text = figures.markdown(report, [])

    assert "### bench/forgetting.py\n\n```\nsweep over 1,000,000 facts: 412 s\n```" in text
    assert "line 40\n" in text  # the last 60 lines of a long output
    assert "line 39\n" not in text


def test_report_help_runs_without_starting_anything():
    result = subprocess.run(
        [sys.executable, str(BENCH / "report.py"), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "--quick" in result.stdout
    assert "var/bench/report.json" in result.stdout


class GivenVectorSystem:
    """A peer's search by a given vector, nearest first by dot product over three stored items."""

    items = {"a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.0, 1.0]}

    def search_vector(self, namespace, vector, limit):
        assert namespace == ["kb", "7"]
        scores = {key: sum(x * y for x, y in zip(item, vector, strict=True)) for key, item in self.items.items()}
        return sorted(scores, key=scores.get, reverse=True)[:limit]


def test_a_runner_answers_a_search_by_a_given_vector_with_its_keys_and_its_time():
    answer = _measure.run(
        GivenVectorSystem(), {"op": "vector_search", "namespace": ["kb", "7"], "vector": [0.0, 1.0], "limit": 2}
    )

    assert answer["keys"] == ["c", "b"]
    assert answer["ms"] >= 0
