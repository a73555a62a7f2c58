"""Reading and chunking an uploaded document in a child process, under a time and a memory limit.

An upload is whatever a caller sends: a PDF whose pages share one huge compressed stream, HTML built to make a parser
rescan, Markdown that becomes thousands of chunks. The worker hands the bytes to `python -m kb.parsing`, which sets
its own address-space and CPU limits before it reads them, loads (kb.loaders) and chunks (kb.chunking) them, and
answers one JSON object. The parent waits at most the time limit, then kills it. Whatever breaks a limit ends as a
DocumentLoadError naming the limit and its setting; the worker process itself never runs the parse.

No Django here: the child imports only the loaders and the chunker.
"""

import argparse
import json
import resource
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from .chunking import Chunk, chunk_document
from .loaders import DocumentLoadError, load_bytes


@dataclass(frozen=True)
class ParseLimits:
    seconds: int  # wall-clock and CPU time of the child (KB_PARSE_TIMEOUT_SECONDS)
    memory_mb: int  # its address space (KB_PARSE_MAX_MEMORY_MB)
    pdf_pages: int  # KB_MAX_PDF_PAGES
    chunks: int  # KB_MAX_CHUNKS_PER_DOCUMENT


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    content_type: str
    language: str
    text: str
    chunks: list[Chunk]


def parse_bounded(
    data: bytes,
    *,
    filename: str,
    content_type: str | None,
    max_tokens: int,
    overlap_tokens: int,
    limits: ParseLimits,
) -> ParsedDocument:
    """Load and chunk `data` in a child process within `limits`. Raises DocumentLoadError with the reason: what the
    loaders say of the file, or the limit it broke."""
    command = [
        sys.executable,
        "-m",
        "kb.parsing",
        f"--filename={filename}",
        f"--max-tokens={max_tokens}",
        f"--overlap-tokens={overlap_tokens}",
        f"--seconds={limits.seconds}",
        f"--memory-mb={limits.memory_mb}",
        f"--pdf-pages={limits.pdf_pages}",
        f"--chunks={limits.chunks}",
    ]
    if content_type:
        command.append(f"--content-type={content_type}")
    try:
        finished = subprocess.run(
            command, input=data, capture_output=True, timeout=limits.seconds, check=False, cwd=_PROJECT_ROOT
        )
    except subprocess.TimeoutExpired:
        raise DocumentLoadError(filename, _over_time(limits)) from None
    try:
        answer = json.loads(finished.stdout)
    except ValueError:
        answer = None
    if finished.returncode != 0 or not isinstance(answer, dict):
        raise DocumentLoadError(filename, _died(finished, limits))
    if "error" in answer:
        raise DocumentLoadError(filename, answer["error"])
    chunks = [Chunk(**chunk) for chunk in answer.pop("chunks")]
    return ParsedDocument(**answer, chunks=chunks)


_PROJECT_ROOT = Path(__file__).resolve().parent.parent  # where `-m kb.parsing` is found, whatever the caller's cwd


def _over_time(limits: ParseLimits) -> str:
    return f"reading it took longer than {limits.seconds} s (KB_PARSE_TIMEOUT_SECONDS)"


def _died(finished: subprocess.CompletedProcess, limits: ParseLimits) -> str:
    """Why the child ended without an answer: its CPU time ran out (SIGXCPU or SIGKILL), its memory did, or it
    failed otherwise (the last line it wrote says how)."""
    if finished.returncode in (-9, -24):  # SIGKILL, SIGXCPU: the CPU limit
        return _over_time(limits)
    if b"MemoryError" in finished.stderr:
        return _over_memory(limits.memory_mb)
    last_line = (finished.stderr.decode(errors="replace").strip().splitlines() or ["no answer"])[-1]
    return f"the reader failed (exit status {finished.returncode}: {last_line[:200]})"


def _over_memory(memory_mb: int) -> str:
    return f"reading it needed more than {memory_mb} MB (KB_PARSE_MAX_MEMORY_MB)"


# --- the child ----------------------------------------------------------------------------------------------------


def _child(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--filename", required=True)
    parser.add_argument("--content-type")
    parser.add_argument("--max-tokens", type=int, required=True)
    parser.add_argument("--overlap-tokens", type=int, required=True)
    parser.add_argument("--seconds", type=int, required=True)
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--pdf-pages", type=int, required=True)
    parser.add_argument("--chunks", type=int, required=True)
    args = parser.parse_args(argv)
    _limit(resource.RLIMIT_AS, args.memory_mb * 1024 * 1024)
    _limit(resource.RLIMIT_CPU, args.seconds)
    data = sys.stdin.buffer.read()
    try:
        loaded = load_bytes(data, filename=args.filename, content_type=args.content_type, max_pdf_pages=args.pdf_pages)
        chunks = chunk_document(
            loaded.text,
            content_type=loaded.content_type,
            max_tokens=args.max_tokens,
            overlap_tokens=args.overlap_tokens,
        )
    except DocumentLoadError as error:
        return {"error": error.reason}
    except MemoryError:
        return {"error": _over_memory(args.memory_mb)}
    if len(chunks) > args.chunks:
        return {"error": too_many_chunks(len(chunks), args.chunks)}
    return {**asdict(loaded), "chunks": [asdict(chunk) for chunk in chunks]}


def _limit(which: int, value: int) -> None:
    """Lower a resource limit to `value` (never above the hard limit the process was started with)."""
    _, hard = resource.getrlimit(which)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, hard))


def too_many_chunks(count: int, limit: int) -> str:
    return f"it makes {count:,} chunks; the limit is {limit:,} a document (KB_MAX_CHUNKS_PER_DOCUMENT)"


if __name__ == "__main__":
    sys.stdout.write(json.dumps(_child(sys.argv[1:])))
