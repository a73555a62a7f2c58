"""Review that decides: a fact that is not active changes no other fact; approving applies what it proposed, rejecting
takes back what it did, a conflict decides only through its resolution, a supersession can be undone."""

from datetime import timedelta

import numpy as np
import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import ApplicationError
from facts.models import Fact, FactConflict
from facts.selectors import fact_events, facts_list
from facts.services import (
    conflict_resolve,
    fact_approve,
    fact_reject,
    fact_remember,
    fact_supersession_undo,
    fact_update,
)
from retrieval.context import context_build

pytestmark = pytest.mark.django_db

NURSE = "Works as a nurse at Hospital La Paz"
HEAD_NURSE = "Works as a head nurse at Hospital La Fe"


def remember(tenant, content, **kwargs):
    return fact_remember(tenant=tenant, user_id="u1", content=content, **kwargs)


def extracted(tenant, content, confidence=0.8):
    """What an episode extraction stores: below FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE, so it waits for review."""
    return remember(tenant, content, source=Fact.Source.EXTRACTED, confidence=confidence)


def state(fact) -> tuple:
    fact = Fact.objects.get(pk=fact.pk)
    return fact.content, fact.status, fact.valid_to, fact.superseded_by_id, fact.confidence, fact.updated_at


def actions(fact) -> list[str]:
    return list(fact_events(tenant=fact.tenant, fact_id=fact.pk).values_list("action", flat=True))


def current(tenant) -> list[str]:
    return sorted(facts_list(tenant=tenant, user_id="u1", statuses=["active"]).values_list("content", flat=True))


class TestPendingChangesNothing:
    def test_a_pending_contradiction_leaves_the_active_fact_alone_and_proposes_to_supersede_it(self, tenant):
        old = remember(tenant, NURSE).fact
        before = state(old)

        result = extracted(tenant, HEAD_NURSE)

        assert (result.outcome, result.fact.status) == ("pending", "pending")
        assert state(old) == before  # not retired, not touched: the context still has the workplace
        assert NURSE in context_build(tenant=tenant, user_id="u1", query="where does the user work?").text
        proposal = result.fact.proposal
        assert proposal["action"] == "supersede"
        [target] = proposal["targets"]
        assert (target["fact"], target["content"], target["relation"]) == (old.pk, NURSE, "contradicts")
        assert target["reason"]
        assert 0 < target["certainty"] <= 1

    def test_a_pending_duplicate_does_not_merge_into_or_rewrite_the_active_fact(self, tenant):
        old = remember(tenant, "Prefers dark mode in the editor").fact
        before = state(old)

        result = extracted(tenant, "Prefers dark mode in the editor and in the terminal")

        assert result.outcome == "pending"
        assert state(old) == before
        assert result.fact.proposal["action"] == "refine"
        assert result.fact.proposal["targets"][0]["fact"] == old.pk

    def test_rejecting_the_pending_fact_changes_nothing_else(self, tenant):
        old = remember(tenant, NURSE).fact
        before = state(old)
        pending = extracted(tenant, HEAD_NURSE).fact

        fact_reject(tenant=tenant, fact_id=pending.pk, actor="staff:1")

        assert state(old) == before
        assert Fact.objects.get(pk=pending.pk).status == "rejected"
        assert current(tenant) == [NURSE]


class TestApprove:
    def test_approving_applies_the_proposed_supersession_in_one_go_with_events(self, tenant):
        old = remember(tenant, NURSE).fact
        pending = extracted(tenant, HEAD_NURSE).fact

        approved = fact_approve(tenant=tenant, fact_id=pending.pk, actor="staff:7")

        assert (approved.status, approved.valid_to, approved.reviewed_at is not None) == ("active", None, True)
        retired = Fact.objects.get(pk=old.pk)
        assert (retired.superseded_by_id, retired.valid_to is not None) == (pending.pk, True)
        assert current(tenant) == [HEAD_NURSE]
        assert actions(retired)[-1] == "superseded"
        assert actions(approved)[-1] == "approved"
        assert HEAD_NURSE in context_build(tenant=tenant, user_id="u1", query="where does the user work?").text

    def test_approving_a_proposed_merge_strengthens_the_active_fact_and_keeps_the_new_one_as_history(self, tenant):
        old = remember(tenant, "Prefers window seats", confidence=0.8).fact
        pending = extracted(tenant, "Prefers window seats", confidence=0.6).fact
        assert pending.proposal["action"] == "merge"

        fact_approve(tenant=tenant, fact_id=pending.pk, actor="staff:7")

        kept, merged = Fact.objects.get(pk=old.pk), Fact.objects.get(pk=pending.pk)
        assert kept.valid_to is None
        assert kept.confidence > 0.8
        assert (merged.superseded_by_id, merged.valid_to is not None) == (old.pk, True)
        assert current(tenant) == ["Prefers window seats"]
        assert actions(kept)[-1] == "merged"
        assert actions(merged)[-2:] == ["approved", "merged"]

    def test_a_proposal_whose_target_changed_is_judged_again(self, tenant):
        old = remember(tenant, NURSE).fact
        pending = extracted(tenant, HEAD_NURSE).fact
        # The old fact is edited meanwhile into something the new one does not contradict.
        fact_update(tenant=tenant, fact_id=old.pk, actor="staff:1", content="Prefers tea to coffee")

        fact_approve(tenant=tenant, fact_id=pending.pk, actor="staff:7")

        assert Fact.objects.get(pk=old.pk).valid_to is None  # the stale proposal was not applied
        assert current(tenant) == sorted([HEAD_NURSE, "Prefers tea to coffee"])

    def test_a_proposal_whose_target_is_gone_just_makes_the_fact_active(self, tenant):
        old = remember(tenant, NURSE).fact
        pending = extracted(tenant, HEAD_NURSE).fact
        fact_reject(tenant=tenant, fact_id=old.pk, actor="staff:1")

        fact_approve(tenant=tenant, fact_id=pending.pk, actor="staff:7")

        assert current(tenant) == [HEAD_NURSE]
        assert Fact.objects.get(pk=old.pk).superseded_by_id is None

    def test_a_fact_with_an_open_conflict_is_approved_only_through_the_conflict(self, tenant):
        old = remember(tenant, "Lives in Berlin").fact
        result = remember(tenant, "Lives in Paris", confidence=0.5)
        assert result.outcome == "conflict"
        before = (state(old), state(result.fact))

        with pytest.raises(ApplicationError) as refused:
            fact_approve(tenant=tenant, fact_id=result.fact.pk, actor="staff:7")

        assert (refused.value.status_code, refused.value.code) == (409, "open_conflict")
        assert f"#{result.conflict_ids[0]}" in refused.value.message
        assert refused.value.details == {"conflicts": result.conflict_ids}
        assert (state(old), state(result.fact)) == before
        assert FactConflict.objects.get(pk=result.conflict_ids[0]).status == "open"


class TestConflictResolution:
    @pytest.fixture
    def conflict(self, tenant):
        old = remember(tenant, "Lives in Berlin").fact
        result = remember(tenant, "Lives in Paris", confidence=0.5)
        return FactConflict.objects.get(pk=result.conflict_ids[0]), old, result.fact

    def test_keep_new_makes_the_new_fact_active_and_retires_the_old_one(self, tenant, conflict):
        conflict, old, new = conflict

        conflict_resolve(tenant=tenant, conflict_id=conflict.pk, resolution="keep_new", actor="staff:1")

        assert current(tenant) == ["Lives in Paris"]
        assert Fact.objects.get(pk=old.pk).superseded_by_id == new.pk
        assert FactConflict.objects.get(pk=conflict.pk).resolution == "keep_new"

    def test_keep_both_keeps_both_current(self, tenant, conflict):
        conflict, _, _ = conflict

        conflict_resolve(tenant=tenant, conflict_id=conflict.pk, resolution="keep_both", actor="staff:1")

        assert current(tenant) == ["Lives in Berlin", "Lives in Paris"]

    def test_keep_old_rejects_the_new_fact(self, tenant, conflict):
        conflict, _, new = conflict

        conflict_resolve(tenant=tenant, conflict_id=conflict.pk, resolution="keep_old", actor="staff:1")

        assert current(tenant) == ["Lives in Berlin"]
        assert Fact.objects.get(pk=new.pk).status == "rejected"
        assert FactConflict.objects.get(pk=conflict.pk).resolution == "keep_old"

    def test_merge_replaces_both_with_one_edited_text(self, tenant, conflict):
        conflict, old, new = conflict
        vector_before = np.asarray(Fact.objects.get(pk=old.pk).embedding)

        conflict_resolve(
            tenant=tenant,
            conflict_id=conflict.pk,
            resolution="merge",
            content="Lives in Berlin, moving to Paris in May",
            actor="staff:1",
        )

        assert current(tenant) == ["Lives in Berlin, moving to Paris in May"]
        kept = Fact.objects.get(pk=old.pk)
        assert not np.array_equal(np.asarray(kept.embedding), vector_before)  # re-embedded: search finds the new text
        assert Fact.objects.get(pk=new.pk).superseded_by_id == old.pk
        assert FactConflict.objects.get(pk=conflict.pk).resolution == "merge"

    def test_merge_needs_the_text(self, tenant, conflict):
        conflict, _, _ = conflict
        with pytest.raises(Exception, match="merged text is required"):
            conflict_resolve(tenant=tenant, conflict_id=conflict.pk, resolution="merge", actor="staff:1")
        assert FactConflict.objects.get(pk=conflict.pk).status == "open"


class TestUndoSupersession:
    def test_the_old_fact_is_current_again_and_the_new_one_rejected_with_history(self, tenant):
        old = remember(tenant, "Lives in Berlin").fact
        new = remember(tenant, "Moved to Paris").fact
        assert Fact.objects.get(pk=old.pk).superseded_by_id == new.pk

        back = fact_supersession_undo(tenant=tenant, fact_id=old.pk, actor="staff:1")

        assert (back.valid_to, back.superseded_by_id) == (None, None)
        assert Fact.objects.get(pk=new.pk).status == "rejected"
        assert current(tenant) == ["Lives in Berlin"]
        assert actions(back)[-1] == "reinstated"
        assert actions(new)[-1] == "rejected"

    def test_only_a_superseded_fact_can_be_made_current_again(self, tenant):
        live = remember(tenant, "Prefers tea").fact
        twin = remember(tenant, "Prefers window seats", confidence=0.8).fact
        pending = extracted(tenant, "Prefers window seats", confidence=0.6).fact
        fact_approve(tenant=tenant, fact_id=pending.pk, actor="staff:1")  # merged into its twin, not superseded

        for fact in (live, pending):
            with pytest.raises(ApplicationError) as refused:
                fact_supersession_undo(tenant=tenant, fact_id=fact.pk, actor="staff:1")
            assert refused.value.status_code == 409
        assert Fact.objects.get(pk=twin.pk).valid_to is None

    def test_rejecting_an_active_fact_reinstates_what_it_superseded(self, tenant):
        old = remember(tenant, "Lives in Berlin").fact
        new = remember(tenant, "Moved to Paris").fact

        fact_reject(tenant=tenant, fact_id=new.pk, actor="staff:1")

        assert Fact.objects.get(pk=old.pk).valid_to is None
        assert current(tenant) == ["Lives in Berlin"]


class TestValidity:
    def test_the_database_refuses_a_validity_that_ends_before_it_starts(self, tenant):
        fact = remember(tenant, "Lives in Berlin").fact
        with pytest.raises(IntegrityError), transaction.atomic():
            Fact.objects.filter(pk=fact.pk).update(valid_to=fact.valid_from - timedelta(days=1))

    def test_a_new_fact_about_an_earlier_time_ends_the_old_one_where_it_began(self, tenant):
        old = remember(tenant, "Lives in Berlin").fact
        earlier = timezone.now() - timedelta(days=400)

        new = remember(tenant, "Moved to Paris", occurred_at=earlier).fact

        retired = Fact.objects.get(pk=old.pk)
        assert retired.superseded_by_id == new.pk
        assert retired.valid_to == retired.valid_from  # before: valid_to == new.valid_from, a year before it began
