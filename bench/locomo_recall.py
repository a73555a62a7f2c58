"""Retrieval quality on real conversations nobody here wrote: LoCoMo (development split).

    .venv/bin/python bench/locomo_recall.py [--embedder local|hash|both] [--target facts|kb|both] [--sweep]

facts: every turn of a conversation is stored as a fact of one user per conversation through the product's own
bulk import (content "speaker: text", occurred_at = the session's date); every question is asked through
facts_search. kb: every conversation is a tenant's knowledge base, one document per session (titled with its
date), one chunk per turn, and every question is asked through kb_search. Prints recall@1/5/10 (share of evidence
turns found) and hit@10 (any evidence found) per category and for categories 1-4. Prints figures; asserts
nothing. Uses throwaway tenants.
"""

import argparse
import json
import statistics
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import _django  # noqa: F401
from django.test import override_settings
from django.utils import timezone

from ai.services import TENANT_TEXT, active_embedding_model, embed_query, embed_texts
from core.db import copy_insert
from core.text import estimate_tokens
from facts.selectors import facts_search
from facts.services import facts_import
from kb.models import Document, KBChunk
from kb.selectors import kb_search
from tenancy.services import tenant_create

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def session_date(text: str) -> datetime:
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load_turns(sample: dict) -> list[dict]:
    conversation, turns = sample["conversation"], []
    for key, value in conversation.items():
        if key.startswith("session_") and isinstance(value, list):
            when = session_date(conversation[f"{key}_date_time"])
            turns += [
                {"dia_id": turn["dia_id"], "content": f"{turn['speaker']}: {turn['text']}", "occurred_at": when}
                for turn in value
            ]
    return turns


def ingest(tenant, samples: list[dict]) -> float:
    started = time.perf_counter()
    for sample in samples:
        items = [
            {
                "user_id": f"locomo-{sample['sample_id']}",
                "content": turn["content"],
                "occurred_at": turn["occurred_at"],
                "metadata": {"dia_id": turn["dia_id"]},
            }
            for turn in load_turns(sample)
        ]
        for start in range(0, len(items), 1000):
            facts_import(tenant=tenant, facts=items[start : start + 1000], actor="bench")
    return time.perf_counter() - started


def ingest_kb(samples: list[dict], label: str, tenants: dict) -> tuple[dict, float]:
    """One tenant per conversation, added to `tenants` ({sample_id: tenant}, for the caller to delete even when
    this fails); returns them and the seconds it took."""
    started, now = time.perf_counter(), timezone.now()
    for sample in samples:
        tenant, _ = tenant_create(name=f"locomo-kb-{label}-{sample['sample_id']}-{uuid.uuid4().hex[:6]}")
        tenants[sample["sample_id"]] = tenant
        conversation, chunks = sample["conversation"], []
        for key, value in conversation.items():
            if not (key.startswith("session_") and isinstance(value, list)):
                continue
            when = session_date(conversation[f"{key}_date_time"])
            document = Document.objects.create(
                tenant=tenant, doc_id=key, title=f"{key} {when:%Y-%m-%d %d %B %Y}", content_hash=key
            )
            for line, turn in enumerate(value, start=1):
                chunk = KBChunk(
                    tenant=tenant, document=document, ordinal=line, text=f"{turn['speaker']}: {turn['text']}",
                    line_start=line, line_end=line, content_hash=turn["dia_id"], created_at=now,
                )  # fmt: skip
                chunk.token_count = estimate_tokens(chunk.text)
                chunk.refresh_search_text(document.title)
                chunks.append(chunk)
        vectors = embed_texts([chunk.text for chunk in chunks], tenant=tenant, user_id=TENANT_TEXT)
        for chunk, vector in zip(chunks, vectors, strict=True):
            chunk.embedding, chunk.embedding_model = vector, active_embedding_model()
        copy_insert(KBChunk, chunks, [
            "tenant", "document", "ordinal", "text", "heading_path", "line_start", "line_end", "token_count",
            "content_hash", "embedding", "embedding_model", "search_text", "created_at",
        ])  # fmt: skip
    return tenants, time.perf_counter() - started


def evaluate(tenant, samples: list[dict], kb_tenants: dict | None = None) -> tuple[dict, list[float]]:
    """Scores per category; kb_tenants (from ingest_kb) asks kb_search instead of facts_search."""
    per_category = defaultdict(lambda: defaultdict(list))
    latencies = []
    for sample in samples:
        user_id = f"locomo-{sample['sample_id']}"
        known = {turn["dia_id"] for turn in load_turns(sample)}
        turn_at = _turn_places(sample)
        for qa in sample["qa"]:
            evidence = {dia_id for dia_id in qa.get("evidence", []) if dia_id in known}
            if not evidence:
                continue  # malformed evidence ids (see the data set's README)
            vector = embed_query(qa["question"], tenant=None, user_id=None)  # (searched as two tenants below)
            started = time.perf_counter()
            if kb_tenants is None:
                hits = facts_search(tenant=tenant, user_id=user_id, query=qa["question"], limit=10, vector=vector)
                found = [hit.fact.metadata["dia_id"] for hit in hits]
            else:
                hits = kb_search(tenant=kb_tenants[sample["sample_id"]], query=qa["question"], limit=10, vector=vector)
                found = [turn_at[(hit.doc_id, hit.line_start)] for hit in hits]
            latencies.append((time.perf_counter() - started) * 1000)
            scores = per_category[qa["category"]]
            for k in (1, 5, 10):
                scores[f"recall@{k}"].append(len(evidence & set(found[:k])) / len(evidence))
            scores["hit@10"].append(float(bool(evidence & set(found))))
    return per_category, latencies


def _turn_places(sample: dict) -> dict[tuple[str, int], str]:
    """(session key, line) -> dia_id, as ingest_kb lays the turns out."""
    conversation = sample["conversation"]
    return {
        (key, line): turn["dia_id"]
        for key, value in conversation.items()
        if key.startswith("session_") and isinstance(value, list)
        for line, turn in enumerate(value, start=1)
    }


def report(label: str, per_category: dict, latencies: list[float], ingest_seconds: float) -> None:
    print(
        f"\n== {label}   (ingest {ingest_seconds:.1f} s, search p50 {statistics.median(latencies):.1f} ms "
        f"excluding the query embedding)"
    )
    print(f"{'category':<16}{'questions':>10}{'recall@1':>10}{'recall@5':>10}{'recall@10':>11}{'hit@10':>9}")
    core = defaultdict(list)
    for category in sorted(per_category):
        scores = per_category[category]
        print(
            f"{CATEGORIES[category]:<16}{len(scores['hit@10']):>10}"
            + "".join(
                f"{statistics.mean(scores[m]):>10.3f}" + (" " if m == "recall@10" else "")
                for m in ("recall@1", "recall@5", "recall@10", "hit@10")
            )
        )
        if category != 5:
            for metric, values in scores.items():
                core[metric] += values
    print(
        f"{'categories 1-4':<16}{len(core['hit@10']):>10}"
        + "".join(
            f"{statistics.mean(core[m]):>10.3f}" + (" " if m == "recall@10" else "")
            for m in ("recall@1", "recall@5", "recall@10", "hit@10")
        )
    )


def _core_recall(per_category: dict) -> float:
    return statistics.mean(
        value for category, scores in per_category.items() if category != 5 for value in scores["recall@10"]
    )


def sweep(tenant, samples: list[dict], embedder: str) -> None:
    """recall@10 (categories 1-4) of facts_search under other settings: the measurement behind its defaults."""
    print(f"\n{embedder}: vector weight x MMR lambda -> recall@10 (categories 1-4)")
    for weight in (0.5, 0.6, 0.7, 0.8):
        cells = []
        for mmr in (0.8, 0.9, 1.0):
            with override_settings(
                EMBEDDING_PROVIDER=embedder, FACTS_SEARCH_VECTOR_WEIGHT=weight, FACTS_SEARCH_MMR_LAMBDA=mmr
            ):
                per_category, _ = evaluate(tenant, samples)
            cells.append(f"mmr {mmr}: {_core_recall(per_category):.3f}")
        print(f"  weight {weight}:  " + "   ".join(cells))


def sweep_kb(kb_tenants: dict, samples: list[dict], embedder: str) -> None:
    """recall@10 (categories 1-4) of kb_search under other settings: the measurement behind its defaults."""
    print(f"\n{embedder}: kb vector weight x BM25 b (k1 1.2) -> recall@10 (categories 1-4)")
    for weight in (0.4, 0.5, 0.6, 0.7, 0.8):
        cells = []
        for b in (0.0, 0.5, 0.75):
            with override_settings(EMBEDDING_PROVIDER=embedder, KB_SEARCH_VECTOR_WEIGHT=weight, KB_SEARCH_BM25_B=b):
                per_category, _ = evaluate(None, samples, kb_tenants)
            cells.append(f"b {b}: {_core_recall(per_category):.3f}")
        print(f"  weight {weight}:  " + "   ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", choices=["local", "hash", "both"], default="both")
    parser.add_argument("--target", choices=["facts", "kb", "both"], default="facts")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--sweep", action="store_true", help="also try other fusion weights and BM25/MMR settings")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text())
    targets = ["facts", "kb"] if args.target == "both" else [args.target]
    for embedder in ["local", "hash"] if args.embedder == "both" else [args.embedder]:
        with override_settings(EMBEDDING_PROVIDER=embedder):
            if "facts" in targets:
                tenant, _ = tenant_create(name=f"locomo-{embedder}-{uuid.uuid4().hex[:6]}")
                try:
                    seconds = ingest(tenant, samples)
                    per_category, latencies = evaluate(tenant, samples)
                    report(f"{embedder} embedder, facts_search", per_category, latencies, seconds)
                    if args.sweep:
                        sweep(tenant, samples, embedder)
                finally:
                    tenant.delete()
            if "kb" in targets:
                kb_tenants = {}
                try:
                    kb_tenants, seconds = ingest_kb(samples, embedder, kb_tenants)
                    per_category, latencies = evaluate(None, samples, kb_tenants)
                    report(f"{embedder} embedder, kb_search", per_category, latencies, seconds)
                    if args.sweep:
                        sweep_kb(kb_tenants, samples, embedder)
                finally:
                    for kb_tenant in kb_tenants.values():
                        kb_tenant.delete()


if __name__ == "__main__":
    main()
