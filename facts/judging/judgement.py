"""What a judge says about a new fact and an existing one: the relation, how sure, and why."""

from dataclasses import dataclass
from enum import StrEnum


class Relation(StrEnum):
    DUPLICATE = "duplicate"
    REFINES = "refines"
    CONTRADICTS = "contradicts"
    UNRELATED = "unrelated"


@dataclass(frozen=True)
class Judgement:
    relation: Relation
    certainty: float  # 0..1, how sure the rule is; the caller supersedes the old fact from 0.75 up
    reason: str  # short and human-readable: "negation: 'no longer' in the new fact"
