"""The figures of bench/report.py from its raw measurements: pure functions (no Django, no peers), so that the
keys of var/bench/report.json are tested without running anything (tests/test_bench_report.py)."""

import json
import statistics
from pathlib import Path

SYSTEMS = ("product", "mem0", "langgraph")
LABELS = {"product": "this product", "mem0": "Mem0 OSS", "langgraph": "LangGraph PostgresStore"}
SIZES = {"1k": 1000, "10k": 10000}
# The documented keys (docs/benchmarks.md), each for every system that has the feature.
KEYS = (
    "search_store_p50_ms_1k",
    "search_store_p50_ms_10k",
    "search_e2e_p50_ms_1k",
    "search_e2e_p50_ms_10k",
    "add_per_s",
    "add_per_s_8_clients",
    "bulk_rows_per_s",
    "locomo_recall_at_10",
)
LOWER_IS_BETTER = {key for key in KEYS if key.startswith("search_")}
# The product's /context (context_build: one query embedding, facts and documents, usage counted), end to end; the
# ratios hold it against each peer's end-to-end search of the same size.
CONTEXT_KEYS = {f"context_p50_ms_{size}": f"search_e2e_p50_ms_{size}" for size in SIZES}
# Measured once per run: disk per 1,000 memories after seeding, and the resident memory (MB) of a process holding
# the system with its model loaded.
FOOTPRINT_KEYS = ("disk_kb_per_1000_memories", "rss_mb")
# The product's store side taken apart (its phases store_split_1k / _10k; bench/report.py ProductSystem.store_split):
# search_store_split_ms_<size> holds the p50 of each part, as ms; a round's raw result lists "<part>_ms" per query for
# each part but the rest, which is derived.
SPLIT_PARTS = {
    "after_embedding": "facts_search, the query's vector given, right after embedding it (as the store side runs)",
    "facts_search": "the same again, hot (right after the query's own search)",
    "statistics": "facts_search_statement: the statistics statement, and building the search statement",
    "statement": "the search statement, sent to fetched",
    "server_planning": "of which the server's planning (EXPLAIN ANALYZE)",
    "server_execution": "of which its execution",
    "rest": "the rest: scoring, MMR, building the facts (facts_search - the two above, per query)",
}
TIMED_PARTS = tuple(part for part in SPLIT_PARTS if part != "rest")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
CORE_CATEGORIES = (1, 2, 3, 4)


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * share), len(ordered) - 1)]


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def store_side_ms(search: dict) -> list[float]:
    """Search minus the embedding of the same query, paired per query (never below 0)."""
    return [max(e2e - embed, 0.0) for embed, e2e in zip(search["embed_ms"], search["e2e_ms"], strict=True)]


def pooled(rounds: list[dict], system: str, phase: str) -> list[dict]:
    """The raw results of one phase of one system over every round (failed ones left out)."""
    return [r["raw"] for r in rounds if r["system"] == system and r["phase"] == phase and r.get("raw") is not None]


def system_figures(rounds: list[dict], system: str, recall: dict | None = None) -> dict:
    """The documented keys (and a few companions: p95s, the query embedding, add latency) of one system, from
    every round pooled. None where the system was not measured."""
    figures: dict[str, float | None] = {}
    for size in SIZES:
        searches = pooled(rounds, system, f"search_{size}")
        store = [value for search in searches for value in store_side_ms(search)]
        e2e = [value for search in searches for value in search["e2e_ms"]]
        figures[f"search_store_p50_ms_{size}"] = median(store)
        figures[f"search_e2e_p50_ms_{size}"] = median(e2e)
        figures[f"search_store_p95_ms_{size}"] = percentile(store, 0.95)
        figures[f"search_e2e_p95_ms_{size}"] = percentile(e2e, 0.95)
        contexts = [value for context in pooled(rounds, system, f"context_{size}") for value in context["e2e_ms"]]
        figures[f"context_p50_ms_{size}"] = median(contexts)
        figures[f"search_store_split_ms_{size}"] = store_split_figures(pooled(rounds, system, f"store_split_{size}"))
    embeds = [
        value for size in SIZES for search in pooled(rounds, system, f"search_{size}") for value in search["embed_ms"]
    ]
    figures["query_embed_p50_ms"] = median(embeds)
    adds = pooled(rounds, system, "add")
    figures["add_per_s"] = _rate(adds, "count", "seconds")
    figures["add_p50_ms"] = median([value for add in adds for value in add["latencies_ms"]])
    figures["add_per_s_8_clients"] = _rate(pooled(rounds, system, "add_8_clients"), "count", "seconds")
    figures["bulk_rows_per_s"] = _rate(pooled(rounds, system, "bulk"), "rows", "seconds")
    figures["locomo_recall_at_10"] = recall["recall_at_10"] if recall else None
    figures["locomo_evidence_recall_at_10"] = recall["evidence_recall_at_10"] if recall else None
    return figures


def store_split_figures(splits: list[dict]) -> dict[str, float | None] | None:
    """The p50 of each part of SPLIT_PARTS over the rounds' store_split results (None when none was measured)."""
    if not splits:
        return None
    found = {part: median([value for split in splits for value in split[f"{part}_ms"]]) for part in TIMED_PARTS}
    rests = [
        total - statistics - statement
        for split in splits
        for total, statistics, statement in zip(
            split["facts_search_ms"], split["statistics_ms"], split["statement_ms"], strict=True
        )
    ]
    return found | {"rest": median(rests)}


def _rate(results: list[dict], amount: str, seconds: str) -> float | None:
    total = sum(result[seconds] for result in results)
    return sum(result[amount] for result in results) / total if results and total > 0 else None


def ratios(systems: dict[str, dict]) -> dict[str, dict]:
    """This product / each peer, key by key (None where either side has no figure), and the product's /context
    over the peer's end-to-end search (`context_p50_ms_1k_vs_search_e2e`...). Search keys: below 1 is faster;
    throughput and recall: above 1 is better."""
    product = systems.get("product") or {}

    def ratio(mine, theirs):
        return mine / theirs if mine is not None and theirs else None

    return {
        peer: {key: ratio(product.get(key), figures.get(key)) for key in KEYS}
        | {f"{key}_vs_search_e2e": ratio(product.get(key), figures.get(search)) for key, search in CONTEXT_KEYS.items()}
        for peer, figures in systems.items()
        if peer != "product"
    }


def recall_scores(questions: list[dict], found: list[list]) -> dict:
    """LoCoMo's questions ([{"category", "evidence"}], evidence = the dia_ids of the conversation's turns it rests
    on) against what a system's search returned for each (dia_ids, best first). A question is recalled when an
    evidence turn is among the first 10 (recall_at_10, categories 1-4); evidence_recall_at_10 is the share of its
    evidence turns found (bench/locomo_recall.py's recall@10)."""
    per_category: dict[int, dict[str, list[float]]] = {}
    for question, hits in zip(questions, found, strict=True):
        evidence, top = set(question["evidence"]), set(hits[:10])
        scores = per_category.setdefault(question["category"], {"hit": [], "share": []})
        scores["hit"].append(float(bool(evidence & top)))
        scores["share"].append(len(evidence & top) / len(evidence))
    core = [c for c in CORE_CATEGORIES if c in per_category]
    return {
        "recall_at_10": mean([v for c in core for v in per_category[c]["hit"]]),
        "evidence_recall_at_10": mean([v for c in core for v in per_category[c]["share"]]),
        "questions": sum(len(per_category[c]["hit"]) for c in core),
        "per_category": {
            CATEGORIES[c]: {
                "questions": len(s["hit"]),
                "recall_at_10": mean(s["hit"]),
                "evidence_recall_at_10": mean(s["share"]),
            }
            for c, s in sorted(per_category.items())
        },
    }


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def build_report(
    *,
    rounds: list[dict],
    recall: dict,
    info: dict,
    machine: dict,
    settings: dict,
    skipped: list[str],
    footprint: dict | None = None,
) -> dict:
    """var/bench/report.json: the keys per system, the ratios, the rounds' raw figures, the machine and versions.
    footprint: per system, FOOTPRINT_KEYS measured outside the rounds (disk, resident memory)."""
    measured = [s for s in SYSTEMS if s in info]
    footprint = footprint or {}
    systems = {
        s: system_figures(rounds, s, recall.get(s)) | {key: footprint.get(s, {}).get(key) for key in FOOTPRINT_KEYS}
        for s in measured
    }
    return {
        "settings": settings,
        "machine": machine,
        "versions": info,
        "skipped": skipped,
        "systems": systems,
        "ratios": ratios(systems),
        "recall": recall,
        "rounds": rounds,
    }


def write_json(report: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    return path


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def markdown(report: dict, plots: list[str]) -> str:
    systems = report["systems"]
    names = list(systems)
    peers = [name for name in names if name != "product"]
    lines = ["# Benchmarks: this product beside Mem0 OSS and LangGraph's PostgresStore", ""]
    settings = report["settings"]
    lines += [
        f"Mode **{settings['mode']}**, {settings['rounds']} alternating rounds, {settings['queries']} queries per "
        f"size and round; started {settings['started_at']}, took {fmt(settings.get('seconds'), 0)} s. "
        "One embedded PostgreSQL 18 + pgvector, one all-MiniLM-L6-v2 on the same CPU. Search keys in ms "
        "(lower is better), throughputs per second and recall (higher is better); ratio = this product / peer.",
        "",
    ]
    header = "| measure | " + " | ".join(LABELS[n] for n in names) + "".join(f" | ratio vs {LABELS[p]}" for p in peers)
    lines += [header + " |", "|---" * (1 + len(names) + len(peers)) + "|"]
    digits = {"locomo_recall_at_10": 3, "locomo_evidence_recall_at_10": 3}
    extra = ("locomo_evidence_recall_at_10", "query_embed_p50_ms", "add_p50_ms", *CONTEXT_KEYS, *FOOTPRINT_KEYS)
    for key in (*KEYS, *extra):
        cells = [fmt(systems[n].get(key), digits.get(key, 1)) for n in names]
        ratio_key = f"{key}_vs_search_e2e" if key in CONTEXT_KEYS else key
        cells += [
            fmt(report["ratios"][p].get(ratio_key), 2) + ("x" if report["ratios"][p].get(ratio_key) else "")
            for p in peers
        ]
        lines.append(f"| `{key}` | " + " | ".join(cells) + " |")
    lines += [
        "",
        "`context_p50_ms_*`: the product's /context end to end (context_build in process); its ratios are over each "
        "peer's end-to-end search of the same size. `disk_kb_per_1000_memories`: the system's tables, indexes "
        "and TOAST after seeding, over its rows. `rss_mb`: resident memory of a process holding the system with its "
        "model loaded (a peer's runner after the rounds; for the product a fresh process once it has embedded and "
        "searched, as a web worker or the task worker).",
    ]
    lines += _store_split_section(systems)
    recall = report["recall"]
    if recall:
        lines += ["", "## LoCoMo recall@10 per category (development split)", ""]
        categories = list(CATEGORIES.values())
        lines += ["| category | questions | " + " | ".join(LABELS[n] for n in recall) + " |"]
        lines += ["|---" * (2 + len(recall)) + "|"]
        for category in categories:
            rows = [recall[n]["per_category"].get(category) for n in recall]
            count = next((row["questions"] for row in rows if row), 0)
            lines.append(
                f"| {category} | {count} | " + " | ".join(fmt(row and row["recall_at_10"], 3) for row in rows) + " |"
            )
    if plots:
        lines += ["", "## Plots", ""] + [f"![{Path(plot).stem}]({Path(plot).name})" for plot in plots]
    lines += ["", "## Rounds", "", "| round | phase | system | figure |", "|---|---|---|---|"]
    for entry in report["rounds"]:
        lines.append(f"| {entry['round']} | {entry['phase']} | {LABELS[entry['system']]} | {entry['summary']} |")
    if report.get("scripts"):
        lines += ["", "## The other benchmarks of this run (`make bench`)", ""]
        lines += [
            "Each script's figures as it printed them (bench/README in docs/benchmarks.md says what each measures)."
        ]
        for script, output in report["scripts"].items():
            lines += ["", f"### bench/{script}.py", "", "```", output.rstrip(), "```"]
    if report["skipped"]:
        lines += ["", "## Not measured in this run", ""] + [f"- {reason}" for reason in report["skipped"]]
    lines += ["", "## Machine and versions", "", "```", json.dumps(report["machine"], indent=1, default=str)]
    lines += [json.dumps(report["versions"], indent=1, default=str), "```", ""]
    return "\n".join(lines)


def _store_split_section(systems: dict[str, dict]) -> list[str]:
    """The product's store side taken apart, per size, beside each peer's whole store side of the same size."""
    product = systems.get("product") or {}
    sizes = [size for size in SIZES if product.get(f"search_store_split_ms_{size}")]
    if not sizes:
        return []
    peers = [name for name in systems if name != "product"]
    lines = [
        "",
        "## The product's store side, taken apart (p50 ms)",
        "",
        "Its search with the query's vector given (embedded first, not timed), query by query in every round, beside "
        "each peer's whole store side (search minus embedding) of the same size. The parts are timed hot, right "
        "after the query's own search; the first row runs right after an embedding, as every store side does (the "
        "model's pass leaves the caches cold for the database and the search).",
        "",
        "| part | " + " | ".join(sizes) + " |",
        "|---" * (1 + len(sizes)) + "|",
    ]
    for part, label in SPLIT_PARTS.items():
        cells = [fmt(product[f"search_store_split_ms_{size}"][part], 2) for size in sizes]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for peer in peers:
        cells = [fmt(systems[peer].get(f"search_store_p50_ms_{size}"), 2) for size in sizes]
        lines.append(f"| {LABELS[peer]}: its whole store side | " + " | ".join(cells) + " |")
    return lines


def script_outputs(folder: Path, *, last_lines: int = 60) -> dict[str, str]:
    """{script name: the last lines it printed} from the folder `make bench` writes (one <script>.txt each)."""
    outputs = {}
    for path in sorted(Path(folder).glob("*.txt")):
        lines = path.read_text(errors="replace").splitlines()
        outputs[path.stem] = "\n".join(line for line in lines[-last_lines:] if "WARNING: Location" not in line)
    return outputs


def round_summary(phase: str, raw: dict | None, error: str | None = None) -> str:
    """One line for a round's result, as printed and as written in report.md."""
    if raw is None:
        return f"failed: {(error or '').strip().splitlines()[-1][:200] if error else 'no result'}"
    if phase.startswith("search_"):
        return (
            f"store p50 {fmt(median(store_side_ms(raw)), 2)} ms, e2e p50 {fmt(median(raw['e2e_ms']), 2)} ms, "
            f"embed p50 {fmt(median(raw['embed_ms']), 2)} ms ({len(raw['e2e_ms'])} queries)"
        )
    if phase.startswith("store_split_"):
        split = store_split_figures([raw])
        return (
            f"facts_search p50 {fmt(split['after_embedding'], 2)} ms after the embedding, "
            f"{fmt(split['facts_search'], 2)} hot: statistics {fmt(split['statistics'], 2)}, "
            f"statement {fmt(split['statement'], 2)} (planning {fmt(split['server_planning'], 2)}, execution "
            f"{fmt(split['server_execution'], 2)}), rest {fmt(split['rest'], 2)} "
            f"({len(raw['facts_search_ms'])} queries)"
        )
    if phase.startswith("context_"):
        return f"p50 {fmt(median(raw['e2e_ms']), 2)} ms end to end ({len(raw['e2e_ms'])} queries)"
    if phase in ("add", "add_8_clients"):
        text = f"{fmt(raw['count'] / raw['seconds'])} adds/s ({raw['count']} in {fmt(raw['seconds'], 2)} s)"
        if raw.get("errors"):
            text += f", {raw['attempted'] - raw['count']} failed: {raw['errors'][0][:120]}"
        return text
    if phase == "bulk":
        return f"{fmt(raw['rows'] / raw['seconds'])} rows/s ({raw['rows']} rows in {fmt(raw['seconds'], 2)} s)"
    return json.dumps(raw)[:200]
