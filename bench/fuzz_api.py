"""A deeper Schemathesis run than `make test`'s: every operation of the API, many more generated requests, a few
seeds (tests/test_schemathesis.py with SCHEMATHESIS_EXAMPLES and SCHEMATHESIS_SEED).

    .venv/bin/python bench/fuzz_api.py [--examples 200] [--seeds 1 2 3]

Prints, per seed, the operations that passed and failed and the time taken; the failures' details are in the
pytest output above the figures. Runs on the test database (pytest-django creates and drops it); asserts nothing.
"""

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200, help="generated requests per operation and seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    figures = []
    for seed in args.seeds:
        environment = {**os.environ, "SCHEMATHESIS_EXAMPLES": str(args.examples), "SCHEMATHESIS_SEED": str(seed)}
        started = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/test_schemathesis.py", "-q", "-p", "no:cacheprovider", "-rf"],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - started
        sys.stdout.write(run.stdout[-20000:])
        summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-500:]
        passed = _count(summary, "passed")
        failed = _count(summary, "failed")
        figures.append((seed, passed, failed, elapsed))
    print(f"\nSchemathesis, {args.examples} examples per operation (positive and negative), server errors and schema")
    print("conformance checked:")
    print(f"{'seed':>6} {'passed':>7} {'failed':>7} {'seconds':>8}")
    for seed, passed, failed, elapsed in figures:
        print(f"{seed:>6} {passed:>7} {failed:>7} {elapsed:>8.0f}")


def _count(summary: str, word: str) -> int:
    match = re.search(rf"(\d+) {word}", summary)
    return int(match.group(1)) if match else 0


if __name__ == "__main__":
    main()
