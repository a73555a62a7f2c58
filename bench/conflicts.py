"""Conflict detection of the offline judge on the labelled pairs of tests/facts/conflict_pairs.py.

    .venv/bin/python bench/conflicts.py [--embedder local|hash|both] [--skip-e2e] [--skip-locomo] [--background 20]
                                        [--candidates N]

Judge: every pair through judge_by_rules with the similarity the embedder gives it. Prints the detection rate (share
of contradiction pairs judged a contradiction) and the false-conflict rate (share of compatible pairs and rewordings
judged a contradiction), per language, per kind and per batch (the second batch, written after the rules were
tuned on the first, caught 0.59 of its contradictions then), then every pair judged against its label.

LoCoMo (unless --skip-locomo): unlabelled real statements, each observation of a speaker judged against its nearest
earlier ones; prints the share flagged and the flagged pairs to read.

End to end (unless --skip-e2e): each pair is played through fact_remember with the offline judge (CHAT_PROVIDER
none) for a user who already holds `--background` other facts of everyday life and the pair's existing fact; the
new fact then "finds" the existing one when it is among the FACTS_JUDGE_CANDIDATES nearest neighbours, and
"flags" it when the write supersedes it or opens a conflict on it (--candidates N judges N neighbours instead of
FACTS_JUDGE_CANDIDATES); also prints, per language, how often the existing fact ranks within the top 1/3/5/10 of the
new fact's nearest. Uses a throwaway tenant of the current settings'
database (the embedded one by default; run `manage.py migrate` first). Prints figures; asserts nothing.
"""

import argparse
import json
import re
import uuid
from collections import defaultdict
from pathlib import Path

import _django  # noqa: F401
from django.conf import settings
from django.test import override_settings

from ai.embedders import get_embedder
from ai.services import embed_query
from facts.judging import Relation, judge_by_rules
from facts.models import FactConflict
from facts.selectors import facts_nearest
from facts.services import fact_remember
from tenancy.services import tenant_create
from tests.facts.conflict_pairs import PAIRS, Pair

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo_dev.json"

# What a user's memory holds besides the pair: everyday facts on other subjects, so the pair's existing fact must
# win its place among the nearest neighbours against them.
BACKGROUND = {
    "en": [
        "Uses Jira for task tracking", "Reads science fiction before bed", "Has a standing desk at home",
        "Supports Arsenal", "Likes Thai food", "Is learning to play chess", "Prefers dark mode in the editor",
        "Backs up photos to an external drive", "Goes climbing on Thursdays", "Listens to podcasts about history",
        "Keeps a vegetable garden", "Writes Python at work", "Is saving for a trip to Iceland",
        "Volunteers at the food bank once a month", "Uses a Kindle for novels", "Drinks sparkling water",
        "Visited Morocco last spring", "Watches Formula 1 races", "Bakes sourdough bread",
        "Plays board games with friends", "Is training for a half marathon", "Wears glasses", "Uses Firefox",
        "Has a grey sofa",
    ],
    "zh": [
        "用Jira管理任务", "睡前看科幻小说", "家里有一张升降桌", "支持阿森纳", "喜欢泰国菜", "在学下国际象棋",
        "编辑器用深色主题", "把照片备份到移动硬盘", "周四去攀岩", "喜欢听历史播客", "种了一小块菜地", "工作中写Python",
        "在为去冰岛旅行存钱", "每月去食物银行做一次志愿者", "用Kindle看小说", "喜欢喝气泡水", "去年春天去过摩洛哥",
        "爱看F1比赛", "会烤酸面包", "常和朋友玩桌游", "在为半程马拉松训练", "戴眼镜", "用火狐浏览器",
        "家里有一张灰色沙发",
    ],
}  # fmt: skip


def judged(pair: Pair, similarity: float) -> bool:
    return judge_by_rules(pair.new, pair.existing, similarity=similarity).relation == Relation.CONTRADICTS


def similarities(pairs: list[Pair]) -> list[float]:
    embedder = get_embedder()
    vectors = embedder.embed([text for pair in pairs for text in (pair.new, pair.existing)])
    return [float(vectors[2 * index] @ vectors[2 * index + 1]) for index in range(len(pairs))]


def rates(rows: list[tuple[Pair, bool]]) -> str:
    contradictions = [flagged for pair, flagged in rows if pair.contradiction]
    compatible = [flagged for pair, flagged in rows if not pair.contradiction]
    detection = _share(contradictions)
    return f"detection {detection:<16}  false conflicts {_share(compatible)}"


def _share(flags: list[bool]) -> str:
    return f"{sum(flags) / len(flags):.3f} ({sum(flags)}/{len(flags)})" if flags else "-"


def report(title: str, rows: list[tuple[Pair, bool]]) -> None:
    print(f"\n== {title}")
    print(f"{'all':<22}{rates(rows)}")
    for language in ("en", "zh"):
        print(f"{language:<22}{rates([row for row in rows if row[0].language == language])}")
    for batch in ("first", "second"):
        print(f"batch {batch:<16}{rates([row for row in rows if row[0].batch == batch])}")
    by_kind = defaultdict(list)
    for row in rows:
        by_kind[row[0].kind].append(row)
    for kind, kind_rows in by_kind.items():
        print(f"kind {kind:<17}{rates(kind_rows)}")


def bench_judge(embedder: str) -> None:
    scores = similarities(PAIRS)
    rows = [(pair, judged(pair, score)) for pair, score in zip(PAIRS, scores, strict=True)]
    report(f"{embedder} embedder: judge_by_rules on {len(PAIRS)} pairs", rows)
    wrong = [
        (pair, score) for (pair, flagged), score in zip(rows, scores, strict=True) if flagged != pair.contradiction
    ]
    print(f"judged against the label ({len(wrong)}):")
    for pair, score in wrong:
        judgement = judge_by_rules(pair.new, pair.existing, similarity=score)
        label = "missed" if pair.contradiction else "false conflict"
        print(f"  {label:<15}{pair.language} {pair.kind:<12}{pair.new!r} / {pair.existing!r}  sim {score:.2f}")
        print(f"  {'':<15}-> {judgement.relation.value}: {judgement.reason}")


def bench_end_to_end(embedder: str, background: int) -> None:
    tenant, _ = tenant_create(name=f"bench-conflicts-{embedder}-{uuid.uuid4().hex[:6]}")
    rows, found, found_ranks = [], [], []
    try:
        for index, pair in enumerate(PAIRS):
            user_id = f"pair-{index}"
            for content in BACKGROUND[pair.language][:background]:
                fact_remember(tenant=tenant, user_id=user_id, content=content)
            existing = fact_remember(tenant=tenant, user_id=user_id, content=pair.existing).fact
            vector = embed_query(pair.new, tenant=tenant, user_id=user_id)
            nearest = facts_nearest(tenant=tenant, user_id=user_id, vector=vector, limit=background + 1)
            rank = next((rank for rank, n in enumerate(nearest, 1) if n.fact.pk == existing.pk), None)
            found.append((pair, rank is not None and rank <= settings.FACTS_JUDGE_CANDIDATES))
            found_ranks.append((pair, rank))
            result = fact_remember(tenant=tenant, user_id=user_id, content=pair.new)
            flagged = existing.pk in result.superseded_ids or existing.pk in _conflicted(result, existing.pk)
            rows.append((pair, flagged))
    finally:
        tenant.delete()
    title = (
        f"{embedder} embedder: fact_remember, offline judge, {background} background facts per user, "
        f"{settings.FACTS_JUDGE_CANDIDATES} neighbours judged"
    )
    report(title, rows)
    for language in ("en", "zh"):
        ranked = [rank for pair, rank in found_ranks if pair.contradiction and pair.language == language]
        within = ", ".join(
            f"top {top}: {sum(rank is not None and rank <= top for rank in ranked) / len(ranked):.3f}"
            for top in (1, 3, 5, 10)
        )
        print(f"{language}: the existing fact of a contradiction pair ranks among the new fact's nearest: {within}")
    for (pair, neighbour), (_, flagged) in zip(found, rows, strict=True):
        if pair.contradiction and not flagged:
            why = "judged, not flagged" if neighbour else "not a neighbour"
            print(f"  {why + ':':<21}{pair.new!r} / {pair.existing!r}")
        elif flagged and not pair.contradiction:
            print(f"  {'false conflict:':<21}{pair.new!r} / {pair.existing!r}")


def _conflicted(result, existing_id: int) -> set[int]:
    conflicts = FactConflict.objects.filter(pk__in=result.conflict_ids)
    return set(conflicts.values_list("existing_fact_id", flat=True))


def bench_locomo(embedder: str, shown: int, candidates: int) -> None:
    """Unlabelled, real statements: each LoCoMo observation about a speaker (name taken out) judged against its
    FACTS_JUDGE_CANDIDATES nearest earlier observations of that speaker, as fact_remember would. Nearly all such
    pairs are compatible (a life told over months changes little), so the share flagged bounds the false conflicts
    from above; the flagged pairs are printed for a person to read."""
    samples = json.loads(LOCOMO.read_text())
    embed = get_embedder().embed
    judged_pairs, flagged = 0, []
    for sample in samples:
        sessions = sorted(
            (key for key in sample["observation"] if key.endswith("_observation")),
            key=lambda key: int(key.split("_")[1]),
        )
        for speaker in (sample["conversation"]["speaker_a"], sample["conversation"]["speaker_b"]):
            texts = [
                _without_name(text, speaker)
                for key in sessions
                for text, _ in sample["observation"][key].get(speaker, [])
            ]
            if len(texts) < 2:
                continue
            vectors = embed(texts)
            for index in range(1, len(texts)):
                scores = vectors[:index] @ vectors[index]
                for earlier in scores.argsort()[::-1][:candidates]:
                    judgement = judge_by_rules(texts[index], texts[earlier], similarity=float(scores[earlier]))
                    judged_pairs += 1
                    if judgement.relation == Relation.CONTRADICTS:
                        flagged.append((texts[index], texts[earlier], judgement))
    print(f"\n== {embedder} embedder: LoCoMo observations, against its {candidates} nearest earlier ones")
    print(f"judged {judged_pairs} pairs, flagged {len(flagged)} as contradictions ({len(flagged) / judged_pairs:.3f})")
    for new, existing, judgement in flagged[:shown]:
        print(f"  {new!r}\n  / {existing!r}\n    -> {judgement.certainty}: {judgement.reason}")


def _without_name(text: str, name: str) -> str:
    """The observation as a fact of the user: the speaker's name, which the product never learns, taken out."""
    return re.sub(rf"^{re.escape(name)}(?:'s)?\s+|\b{re.escape(name)}\b", "", text).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", choices=["local", "hash", "both"], default="both")
    parser.add_argument("--skip-e2e", action="store_true", help="only the judge, no database")
    parser.add_argument("--background", type=int, default=20, help="other facts each user holds (at most 24)")
    parser.add_argument("--skip-locomo", action="store_true", help="no LoCoMo observations")
    parser.add_argument("--candidates", type=int, help="FACTS_JUDGE_CANDIDATES for the end-to-end run")
    parser.add_argument("--show", type=int, default=15, help="flagged LoCoMo pairs to print")
    args = parser.parse_args()
    for embedder in ["hash", "local"] if args.embedder == "both" else [args.embedder]:
        with override_settings(EMBEDDING_PROVIDER=embedder, EMBEDDING_CACHE=False, CHAT_PROVIDER="none"):
            bench_judge(embedder)
            if not args.skip_locomo and LOCOMO.exists():
                for candidates in sorted({settings.FACTS_JUDGE_CANDIDATES, 10, 20}):
                    bench_locomo(embedder, args.show, candidates)
            if not args.skip_e2e:
                with override_settings(FACTS_JUDGE_CANDIDATES=args.candidates or settings.FACTS_JUDGE_CANDIDATES):
                    bench_end_to_end(embedder, args.background)


if __name__ == "__main__":
    main()
