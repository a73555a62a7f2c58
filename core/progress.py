import sys
import time


class Progress:
    """A one-line progress bar on a terminal; a single summary line anywhere else (logs, CI)."""

    def __init__(self, total: int, label: str, stream=None, width: int = 30):
        self.total, self.label, self.width = total, label, width
        self.stream = stream or sys.stderr
        self.done = 0
        self.started = time.monotonic()
        self.interactive = hasattr(self.stream, "isatty") and self.stream.isatty()

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.interactive:
            filled = int(self.width * self.done / self.total) if self.total else self.width
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}")
            self.stream.flush()

    def close(self) -> None:
        elapsed = time.monotonic() - self.started
        end = "\n" if self.interactive else ""
        self.stream.write(f"{end if self.done else ''}{self.label}: {self.done}/{self.total} in {elapsed:.1f}s\n")
        self.stream.flush()
