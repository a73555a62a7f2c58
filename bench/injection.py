"""The instruction detector (core.instructions) on its labelled set, and on real text it was never tuned on.

    .venv/bin/python bench/injection.py [--show-misses]

Labelled set (tests/security/injection_set.py): the share of injections caught and of benign facts flagged, by
source. Untuned benign text, when ../shared/data is there: every LoCoMo observation (the dataset authors' facts about
each speaker) and the first sentence of every LongMemEval user turn (first-person messages to an assistant, a harder
case than facts: requests such as "can you recommend..."). Also times the detector per text. Prints figures;
asserts nothing.
"""

import argparse
import gzip
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.instructions import instruction_signal  # noqa: E402
from tests.security.injection_set import INJECTIONS, benign_facts  # noqa: E402

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def rate(texts: list[str]) -> tuple[int, int]:
    return sum(1 for text in texts if instruction_signal(text)), len(texts)


def locomo_observations() -> list[str]:
    path = DATA / "locomo" / "locomo_dev.json"
    if not path.exists():
        return []
    found = []
    for conversation in json.loads(path.read_text()):
        for session in conversation["observation"].values():
            for facts in session.values():
                found += [fact[0] for fact in facts]
    return found


def longmemeval_user_sentences(limit: int = 3000) -> list[str]:
    path = DATA / "longmemeval" / "longmemeval_s_dev60.json.gz"
    if not path.exists():
        return []
    seen: dict[str, None] = {}
    for item in json.loads(gzip.decompress(path.read_bytes())):
        for session in item["haystack_sessions"]:
            for turn in session:
                if turn["role"] == "user":
                    first = _SENTENCE_END.split(" ".join(turn["content"].split()), maxsplit=1)[0][:500]
                    seen.setdefault(first, None)
    return list(seen)[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show-misses", action="store_true", help="print the misses and the flagged benign texts")
    args = parser.parse_args()

    by_source: dict[str, list[str]] = defaultdict(list)
    for text, source in INJECTIONS:
        by_source[source.split("/")[0].split(",")[0]].append(text)
    caught, total = rate([text for text, _ in INJECTIONS])
    print(f"injections caught: {caught}/{total} = {caught / total:.3f}")
    for source, texts in sorted(by_source.items()):
        hits, count = rate(texts)
        print(f"  {source:<40} {hits}/{count}")
    benign = benign_facts()
    flagged, count = rate([text for text, _ in benign])
    print(f"benign facts flagged: {flagged}/{count} = {flagged / count:.3f}")
    untuned = (("LoCoMo observations", locomo_observations()), ("LongMemEval user", longmemeval_user_sentences()))
    for name, texts in untuned:
        if not texts:
            print(f"{name}: not found under {DATA}")
            continue
        hits, count = rate(texts)
        print(f"{name} flagged (untuned): {hits}/{count} = {hits / count:.3f}")
        if args.show_misses:
            for text in texts:
                if instruction_signal(text):
                    print(f"    {instruction_signal(text)}: {text[:160]}")
    if args.show_misses:
        for text, _ in INJECTIONS:
            if not instruction_signal(text):
                print(f"  missed: {text[:160]}")
        for text, _ in benign:
            if instruction_signal(text):
                print(f"  flagged: {text[:160]}")

    texts = [text for text, _ in INJECTIONS] + [text for text, _ in benign]
    started = time.perf_counter()
    for _ in range(5):
        for text in texts:
            instruction_signal(text)
    per_text = (time.perf_counter() - started) / (5 * len(texts)) * 1e6
    print(f"detector time: {per_text:.1f} us per text (mean over {len(texts)} texts x 5)")


if __name__ == "__main__":
    main()
