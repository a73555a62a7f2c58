"""Where the client connects and how it introduces itself: arguments first, then the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .__version__ import __version__

URL_VARIABLE = "MEMORYPROJECT_URL"
KEY_VARIABLE = "MEMORYPROJECT_API_KEY"
DEFAULT_URL = "http://127.0.0.1:8000"  # `make run`


@dataclass(frozen=True)
class ClientSettings:
    base_url: str
    headers: dict[str, str]


def client_settings(base_url: str | None, api_key: str | None, headers: dict[str, str] | None) -> ClientSettings:
    base_url = base_url or os.environ.get(URL_VARIABLE) or DEFAULT_URL
    api_key = api_key or os.environ.get(KEY_VARIABLE)
    if not api_key:
        raise ValueError(f"No API key: pass api_key=... or set {KEY_VARIABLE}.")
    return ClientSettings(
        base_url=base_url.rstrip("/"),
        headers={
            "Authorization": f"Bearer {api_key}",
            "User-Agent": f"memoryproject-client/{__version__}",
            **(headers or {}),
        },
    )
