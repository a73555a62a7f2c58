"""What an API key may do. A key carries scopes; each API operation needs one of them.

- memory:read  — read and search facts, episodes, documents and context; the read-only tools.
- memory:write — save, edit and delete memory and documents; the tools that write.
- review       — approve or reject facts, resolve conflicts, restore and undo: the decisions a person makes.
- admin        — the tenant's settings (forget policy, embedding cache) and its API keys.

A key issued without scopes has read and write; the first key of a tenant has them all.
"""

from django.core.exceptions import ValidationError

MEMORY_READ = "memory:read"
MEMORY_WRITE = "memory:write"
REVIEW = "review"
ADMIN = "admin"
ALL_SCOPES: tuple[str, ...] = (MEMORY_READ, MEMORY_WRITE, REVIEW, ADMIN)
DEFAULT_SCOPES: tuple[str, ...] = (MEMORY_READ, MEMORY_WRITE)
ANY_KEY = "*"  # an operation any valid key may call, whatever its scopes (whoami)
SCOPE_CHOICES = [(scope, scope) for scope in ALL_SCOPES]


def default_scopes() -> list[str]:
    return list(DEFAULT_SCOPES)


def all_scopes() -> list[str]:
    return list(ALL_SCOPES)


def scopes_parse(value: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """The scopes of "memory:read,memory:write" (or a list), in the canonical order; the default when empty.
    ValidationError names an unknown scope and the known ones."""
    if value is None:
        return default_scopes()
    names = [part.strip() for part in value.split(",")] if isinstance(value, str) else list(value)
    names = [name for name in names if name]
    unknown = sorted({name for name in names if name not in ALL_SCOPES})
    if unknown:
        raise ValidationError(
            f"Unknown scope {', '.join(repr(name) for name in unknown)}: the scopes are {', '.join(ALL_SCOPES)}.",
            code="invalid_scope",
        )
    if not names:
        return default_scopes()
    return [scope for scope in ALL_SCOPES if scope in names]
