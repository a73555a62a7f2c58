"""What a new fact would do to the user's facts, decided from the judge's verdicts: applied at once for an active
fact, kept on a pending fact as its proposal until a person approves it (then applied, or decided again when what it
targets has changed since)."""

from dataclasses import dataclass, field, replace

from django.conf import settings
from django.utils import timezone

from tenancy.models import Tenant

from ..judging import Judgement, Relation
from ..models import Fact, FactConflict
from ..selectors import Neighbour


@dataclass(frozen=True)
class Target:
    """One of the user's facts the decision acts on, as it was when judged."""

    fact: Fact
    judgement: Judgement


@dataclass(frozen=True)
class Decision:
    action: str  # create | merge (the same information) | refine (the same, said better) | supersede
    targets: tuple[Target, ...] = ()  # merge/refine: the one fact taking it in; supersede: the facts it retires
    conflicts: tuple[Target, ...] = field(default=())  # contradictions too unsure to retire: a person decides

    def as_proposal(self, *, conflict_ids: list[int] | None = None) -> dict:
        """The decision as stored on a pending fact (and shown to the reviewer), with the ids of the conflicts its
        unsure contradictions opened once they exist."""
        conflict_ids = conflict_ids or [None] * len(self.conflicts)
        return {
            "action": self.action,
            "targets": [_described(target) for target in self.targets],
            "conflicts": [
                {**_described(target), "conflict": conflict_id}
                for target, conflict_id in zip(self.conflicts, conflict_ids, strict=True)
            ],
            "judged_at": timezone.now().isoformat(),
        }


def _described(target: Target) -> dict:
    return {
        "fact": target.fact.pk,
        "content": target.fact.content,
        "relation": target.judgement.relation.value,
        "certainty": target.judgement.certainty,
        "reason": target.judgement.reason,
        "version": target.fact.updated_at.isoformat(),  # a change of the target since makes the proposal stale
    }


def decision_of(new: Fact, judged: list[tuple[Neighbour, Judgement]]) -> Decision:
    """The first relation that decides: the same information (merge), a contradiction (supersede when the judge is
    sure and nothing protects the old fact, else a conflict for a person), a refinement, else a new fact.

    An agent's fact never changes a fact it does not own (one of no agent, shared by every agent): it is not merged
    into (the agent keeps its own copy, since its reads see only its own facts) and a contradiction of it is a
    conflict for a person."""
    shared = [(n, j) for n, j in judged if not _owned_by_agent_of(new, n.fact)]
    if shared:
        owned = [(n, j) for n, j in judged if _owned_by_agent_of(new, n.fact)]
        decision = decision_of(new, owned)
        held = tuple(Target(n.fact, j) for n, j in shared if j.relation == Relation.CONTRADICTS)
        return replace(decision, conflicts=decision.conflicts + held) if held else decision
    duplicates = [Target(n.fact, j) for n, j in judged if j.relation == Relation.DUPLICATE]
    if duplicates:
        return Decision("merge", (duplicates[0],))
    contradictions = [Target(n.fact, j) for n, j in judged if j.relation == Relation.CONTRADICTS]
    if contradictions:
        sure = tuple(target for target in contradictions if _safe_to_supersede(new, target))
        unsure = tuple(target for target in contradictions if not _safe_to_supersede(new, target))
        return Decision("supersede" if sure else "create", sure, unsure)
    refinements = [Target(n.fact, j) for n, j in judged if j.relation == Relation.REFINES]
    if refinements:
        return Decision("refine", (refinements[0],))
    return Decision("create")


def _owned_by_agent_of(new: Fact, old: Fact) -> bool:
    """Whether `new` may change `old`: a fact of no agent may change any fact of the user, an agent's only its own."""
    return not new.agent_id or old.agent_id == new.agent_id


def _safe_to_supersede(new: Fact, target: Target) -> bool:
    old, judgement = target.fact, target.judgement
    reviewed = old.reviewed_at is not None or old.source == Fact.Source.MANUAL
    return (
        judgement.certainty >= settings.FACTS_SUPERSEDE_CERTAINTY
        and new.confidence >= settings.FACTS_SUPERSEDE_MIN_CONFIDENCE
        and not old.pinned
        and not (new.source == Fact.Source.EXTRACTED and reviewed)
    )


def decision_stored(*, tenant: Tenant, fact: Fact, drop_stale: bool = False) -> Decision | None:
    """The pending fact's proposal as a decision on the facts as they are now: None when it has none, or when a fact
    it acts on is no longer an active, current fact as it was when judged (then it must be judged again). With
    drop_stale, such facts are left out instead (the rest still applies; "create" when nothing is left)."""
    proposal = fact.proposal
    if not proposal:
        return Decision("create") if drop_stale else None
    wanted = {item["fact"]: item for item in proposal["targets"]}
    current = {
        target.pk: target
        for target in Fact.objects.filter(
            tenant=tenant, pk__in=list(wanted), status=Fact.Status.ACTIVE, valid_to__isnull=True
        )
    }
    unchanged = [
        item
        for item in proposal["targets"]
        if item["fact"] in current and current[item["fact"]].updated_at.isoformat() == item["version"]
    ]
    if len(unchanged) < len(wanted) and not drop_stale:
        return None
    targets = tuple(
        Target(current[item["fact"]], Judgement(Relation(item["relation"]), item["certainty"], item["reason"]))
        for item in unchanged
    )
    if not targets:
        return Decision("create")
    return Decision(proposal["action"], targets)


def decision_unchanged(decision: Decision) -> bool:
    """Whether the facts the decision acts on are still as they were when it was made (read under lock)."""
    if not decision.targets:
        return True
    locked = {
        row.pk: row
        for row in Fact.objects.select_for_update().filter(pk__in=[target.fact.pk for target in decision.targets])
    }
    return all(
        target.fact.pk in locked
        and locked[target.fact.pk].updated_at == target.fact.updated_at
        and locked[target.fact.pk].valid_to is None
        for target in decision.targets
    )


def open_conflict_ids(fact: Fact) -> list[int]:
    """The open conflicts in which `fact` is the newcomer: only their resolution decides it."""
    return list(
        FactConflict.objects.filter(tenant_id=fact.tenant_id, new_fact=fact, status=FactConflict.Status.OPEN)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
