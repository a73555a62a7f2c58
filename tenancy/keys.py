"""API keys as text: how they look and how they are hashed (services issue them, selectors find them)."""

import hashlib
import secrets

KEY_PREFIX = "mp_"


def api_key_generate() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def api_key_hash(key: str) -> str:
    # Keys carry 256 random bits, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(key.encode()).hexdigest()
