"""SQL a migration loads from the files under an app's sql/ folder (triggers and the functions they call), so that
what the database runs can be read in one place."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sql_file(path: str) -> str:
    """The text of `path` (from the project's root), for migrations.RunSQL."""
    return (ROOT / path).read_text(encoding="utf-8")
