"""Offline extraction quality on LoCoMo's development split, through the product's own path (issue 19).

    .venv/bin/python bench/extraction.py [--data PATH] [--conversations N]

Protocol (the issue's): every session of a conversation is posted as an episode (speaker A = the user, B = the
assistant, timestamps from the session's date), one after another, and extracted as the worker does
(episode_extract, offline extractor, the bundled MiniLM, fact_remember's judging and merging). Then every extracted
fact of the user, pending or active, is compared with the dataset authors' observations, after taking the
speaker's name out of each observation (the product never learns it, and it would dominate the similarity):
- recall: the share of A's observations that some fact scores cosine >= 0.6 against;
- facts per session, and "near": the share of facts that some observation of the conversation (either speaker)
  scores >= 0.5 against (a precision proxy: observations are not exhaustive);
- per confidence bucket, the share of facts near an observation, and what each candidate value of
  FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE would auto-approve (how many, how many near) and leave for review.
Prints figures; asserts nothing. Uses a throwaway tenant of the current database and deletes it afterwards.

Measured 2026-12-01 (MiniLM, 5 conversations, 128 sessions): see the quality table in docs/memory.md.
"""

import argparse
import json
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _django  # noqa: F401
import numpy as np
from django.conf import settings
from django.test import override_settings

from ai.services import embed_texts
from episodes.services import episode_store
from episodes.tasks import episode_extract
from facts.models import Fact
from tenancy.models import Tenant
from tenancy.services import tenant_create

DATA = Path(settings.BASE_DIR).parent / "shared" / "data" / "locomo" / "locomo_dev.json"
RECALLED = 0.6  # the thresholds
NEAR = 0.5
BUCKETS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)
THRESHOLDS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def sessions_of(sample: dict) -> list[tuple[str, list[dict]]]:
    conversation = sample["conversation"]
    keys = [key for key in conversation if re.fullmatch(r"session_\d+", key)]
    sessions = []
    for key in sorted(keys, key=lambda name: int(name.split("_")[1])):
        start = datetime.strptime(conversation[f"{key}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
        messages = [
            {
                "role": "user" if turn["speaker"] == conversation["speaker_a"] else "assistant",
                "content": turn["text"],
                "timestamp": (start + timedelta(seconds=30 * index)).isoformat(),
            }
            for index, turn in enumerate(conversation[key])
        ]
        sessions.append((key, messages))
    return sessions


def observations_of(sample: dict) -> tuple[list[str], list[str]]:
    """(every observation of the conversation, those about speaker A), each without the speaker's name."""
    speaker_a = sample["conversation"]["speaker_a"]
    every, of_a = [], []
    for per_speaker in sample["observation"].values():
        for speaker, items in per_speaker.items():
            for text, _ in items:
                cleaned = " ".join(re.sub(rf"\b{re.escape(speaker)}(?:'s)?\b", "", text).split())
                every.append(cleaned)
                if speaker == speaker_a:
                    of_a.append(cleaned)
    return every, of_a


def embedded(texts: list[str]) -> np.ndarray:
    return np.asarray(embed_texts(texts, tenant=None, user_id=None)) if texts else np.zeros((0, 384))


def measure(tenant: Tenant, samples: list[dict]) -> None:
    observations = recalled = session_count = 0
    facts: list[tuple[float, float, str]] = []  # (confidence, best cosine to an observation, status)
    started = time.perf_counter()
    for sample in samples:
        user_id = sample["sample_id"]
        for key, messages in sessions_of(sample):
            stored = episode_store(tenant=tenant, user_id=user_id, session_id=key, messages=messages)
            episode_extract(stored.episode.pk)
            session_count += 1
        kept = list(
            Fact.objects.filter(
                tenant=tenant,
                user_id=user_id,
                source=Fact.Source.EXTRACTED,
                status__in=[Fact.Status.ACTIVE, Fact.Status.PENDING],
            ).values_list("content", "confidence", "status")
        )
        every, of_a = observations_of(sample)
        fact_vectors, every_vectors, a_vectors = embedded([c for c, _, _ in kept]), embedded(every), embedded(of_a)
        observations += len(of_a)
        if kept:
            recalled += int(((a_vectors @ fact_vectors.T).max(axis=1) >= RECALLED).sum())
            best = (fact_vectors @ every_vectors.T).max(axis=1)
            facts.extend((confidence, float(b), status) for (_, confidence, status), b in zip(kept, best, strict=True))
        print(f"  {user_id}: {len(kept)} facts, {len(of_a)} observations of the user")
    elapsed = time.perf_counter() - started
    near = sum(1 for _, best, _ in facts if best >= NEAR)
    print(
        f"\nobservation recall (cos >= {RECALLED}) {recalled / observations:.3f}   facts per session "
        f"{len(facts) / session_count:.2f}   near an observation (cos >= {NEAR}) {near / max(len(facts), 1):.3f}"
        f"   ({len(facts)} facts, {session_count} sessions, {observations} observations; {elapsed:.0f} s)"
    )
    print("\nconfidence      facts  near   share near")
    for low, high in zip(BUCKETS, BUCKETS[1:], strict=False):
        bucket = [best for confidence, best, _ in facts if low <= confidence < high]
        if bucket:
            hits = sum(best >= NEAR for best in bucket)
            print(f"[{low:.2f}, {min(high, 1):.2f})  {len(bucket):6d}  {hits:4d}   {hits / len(bucket):.3f}")
    print("\nauto-approve at   approved  near   share near   left for review  near   share near")
    for threshold in THRESHOLDS:
        approved = [best for confidence, best, _ in facts if confidence >= threshold]
        review = [best for confidence, best, _ in facts if confidence < threshold]
        print(f">= {threshold:.2f}        {len(approved):8d}  {_near(approved)}   {len(review):15d}  {_near(review)}")
    active = sum(status == Fact.Status.ACTIVE for _, _, status in facts)
    print(
        f"\nwith FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE={settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE}: "
        f"{active} active, {len(facts) - active} pending"
    )


def _near(bests: list[float]) -> str:
    hits = sum(best >= NEAR for best in bests)
    return f"{hits:4d}   {hits / len(bests):.3f}     " if bests else "   -       -     "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text())[: args.conversations]
    with override_settings(EMBEDDING_PROVIDER="local", CHAT_PROVIDER="none"):
        tenant, _ = tenant_create(name=f"bench-extraction-{uuid.uuid4().hex[:8]}")
        try:
            print(f"offline extraction, {settings.EMBEDDING_PROVIDER} embedder, {len(samples)} conversations")
            measure(tenant, samples)
        finally:
            tenant.delete()


if __name__ == "__main__":
    main()
