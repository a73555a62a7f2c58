"""The review console (/admin/review/) in a real browser: the counts on the index, the queue worked with the keyboard
only, bulk decisions, conflicts side by side, a fact's story, and one tenant's staff seeing nothing of another's.

What the console did is read back through the REST API of the same live server, with the tenant's API key.

REVIEW_DOCS_SCREENSHOTS=1 also writes docs/review.md's pictures of the console: docs/review-queue.png,
docs/review-conflicts.png and docs/review-fact.png (test_the_readme_pictures; skipped without the variable).
"""

import os
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils.timezone import localtime
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from episodes.models import Episode
from episodes.services import episode_store
from facts.models import Fact
from facts.services import fact_approve, fact_remember
from forgetting.models import ForgetRun
from tenancy.services import tenant_membership_add
from tests.browser.pages import (
    api_get,
    click_and_wait,
    count,
    focused_fact,
    messages,
    press,
    press_ctrl,
    queue_ids,
    queue_item,
    save_cropped_png,
    wait_until_decided,
)
from tests.factories import make_tenant

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"
NURSE = "Works as a nurse at Hospital La Paz"
HEAD_NURSE = "Works as a head nurse at Hospital La Fe"
REVIEWER_PERMISSIONS = ["view_fact", "change_fact", "view_factconflict", "change_factconflict"]
DOCS = Path(settings.BASE_DIR) / "docs"


def staff_member(username: str, tenant):
    """A staff user who may review facts and conflicts, member of `tenant` only."""
    user = get_user_model().objects.create_user(username, password=PASSWORD, is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="facts", codename__in=REVIEWER_PERMISSIONS)
    )
    tenant_membership_add(tenant=tenant, user=user)
    return user


def extracted(tenant, content: str, user_id: str = "u1", **fields) -> Fact:
    """A fact extracted from a conversation, below the auto-approve confidence: it waits for review."""
    fact = fact_remember(
        tenant=tenant, user_id=user_id, content=content, source=Fact.Source.EXTRACTED, confidence=0.8, **fields
    ).fact
    assert fact.status == Fact.Status.PENDING
    return fact


def conflict_of(tenant, existing: str, new: str, user_id: str = "u1", **fields) -> tuple[Fact, Fact, int]:
    """An active fact and a later, unsure one contradicting it: (existing, new, the open conflict's id)."""
    old = fact_remember(tenant=tenant, user_id=user_id, content=existing).fact
    result = fact_remember(tenant=tenant, user_id=user_id, content=new, confidence=0.5, **fields)
    assert result.outcome == "conflict"
    return old, result.fact, result.conflict_ids[0]


def api_fact(live_server, key: str, fact: Fact) -> dict:
    return api_get(live_server.url, key, f"/api/v1/facts/{fact.pk}")


def counts_rows(page) -> dict[str, list[str]]:
    """The index's table of what waits: tenant name -> its cells' texts."""
    rows = page.find_elements(By.CSS_SELECTOR, "#review-counts tbody tr")
    return {
        row.find_element(By.TAG_NAME, "th").text: [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in rows
    }


@pytest.fixture
def acme(transactional_db):
    """Tenant A and its clear API key."""
    return make_tenant("acme")


@pytest.fixture
def reviewer(acme):
    return staff_member("reviewer", acme[0])


def test_the_index_counts_what_waits_in_the_staff_users_tenant_and_links_to_its_queue(
    page, live_server, acme, reviewer, admin_login, screenshot
):
    tenant = acme[0]
    first = extracted(tenant, "Prefers window seats on flights")
    second = extracted(tenant, "Has a dog named Toby")
    _, in_conflict, _ = conflict_of(tenant, "Lives in Berlin", "Lives in Paris")  # pending too, until resolved
    failed = episode_store(tenant=tenant, user_id="u1", session_id="s1", messages=[{"role": "user", "content": "hi"}])
    Episode.objects.filter(pk=failed.episode.pk).update(extraction_status=Episode.ExtractionStatus.FAILED)
    run = ForgetRun.objects.create(tenant=tenant, as_of=first.created_at)
    other, _ = make_tenant("globex")  # the reviewer is no member of it
    extracted(other, "Might be moving to Oslo")
    conflict_of(other, "Lives in Madrid", "Lives in Lisbon")

    admin_login("reviewer", PASSWORD)
    screenshot("index")

    assert counts_rows(page) == {"acme": ["3", "1", "1", f"{localtime(run.started_at):%Y-%m-%d %H:%M} (done)"]}
    table = page.find_element(By.ID, "review-counts").text
    assert "globex" not in table
    click_and_wait(page, page.find_element(By.CSS_SELECTOR, "#review-counts tbody td a"))  # the pending facts
    screenshot("queue")

    assert page.current_url == f"{live_server.url}/admin/review/?tenant={tenant.pk}"
    assert queue_ids(page) == [first.pk, second.pk, in_conflict.pk]  # oldest first
    assert page.find_element(By.CLASS_NAME, "review-summary").text.startswith("3 pending facts. Keys:")
    assert "Oslo" not in page.find_element(By.ID, "review-queue").text


def test_the_queue_is_worked_with_the_keyboard_only_without_reloading_the_page(
    page, live_server, acme, reviewer, admin_login, screenshot
):
    tenant, key = acme
    nurse = fact_remember(tenant=tenant, user_id="u1", content=NURSE).fact
    head_nurse = extracted(tenant, HEAD_NURSE)  # proposes to supersede the nurse fact
    dog = extracted(tenant, "Has a dog named Toby")
    allergy = extracted(tenant, "Is alergic to penicilin")
    assert api_fact(live_server, key, nurse)["valid_to"] is None  # pending, the proposal changed nothing yet
    admin_login("reviewer", PASSWORD)
    page.get(live_server.url + "/admin/review/")
    page.execute_script("window.reviewMarker = 'still the same page';")  # a reload would drop it

    head_item = queue_item(page, head_nurse.pk)
    proposal = head_item.find_element(By.CLASS_NAME, "review-proposal").text
    assert f"Approving would supersede #{nurse.pk} '{NURSE}'" in proposal
    assert NURSE in head_item.find_element(By.CLASS_NAME, "review-neighbours").text
    assert focused_fact(page) == head_nurse.pk  # the first item has the focus on load
    moves = []
    for keys in ("j", "j", "j", "k", "k"):
        press(page, keys)
        moves.append(focused_fact(page))
    assert moves == [dog.pk, allergy.pk, allergy.pk, dog.pk, head_nurse.pk]  # j/k stop at the ends

    press(page, "?")
    help_box = page.find_element(By.ID, "review-help")
    assert help_box.is_displayed()
    assert "approve (applies its proposal)" in help_box.text
    screenshot("help")
    press(page, Keys.ESCAPE)
    assert not help_box.is_displayed()

    press(page, "a")  # approve the head nurse fact: its proposal applies
    assert wait_until_decided(page, head_nurse.pk) == "approved"
    assert focused_fact(page) == dog.pk  # the focus moved on to the next fact
    retired = api_fact(live_server, key, nurse)
    assert (retired["superseded_by"], retired["valid_to"] is not None) == (head_nurse.pk, True)
    assert api_fact(live_server, key, head_nurse)["status"] == "active"

    selected = page.find_element(By.ID, "review-selected-count")
    dog_box = queue_item(page, dog.pk).find_element(By.CLASS_NAME, "review-select")
    press(page, "x")
    assert (dog_box.is_selected(), selected.text) == (True, "1")
    screenshot("selected")
    press(page, "x")
    assert (dog_box.is_selected(), selected.text) == (False, "0")

    press(page, "r")
    assert wait_until_decided(page, dog.pk) == "rejected"
    assert api_fact(live_server, key, dog)["status"] == "rejected"
    assert not dog_box.is_enabled()  # a decided fact is out of the bulk decisions
    assert focused_fact(page) == allergy.pk

    editor = queue_item(page, allergy.pk).find_element(By.CLASS_NAME, "review-editor")
    press(page, "e")
    assert editor.is_displayed()
    assert page.switch_to.active_element.tag_name == "textarea"
    press(page, Keys.ESCAPE)  # cancels the edit
    assert not editor.is_displayed()
    assert focused_fact(page) == allergy.pk
    press(page, "e")
    press_ctrl(page, "a")  # select the whole text, then type over it: no key typed here is a shortcut
    press(page, "Is allergic to penicillin")
    screenshot("editing")
    press_ctrl(page, Keys.ENTER)
    assert wait_until_decided(page, allergy.pk) == "approved"
    edited = api_fact(live_server, key, allergy)
    assert (edited["content"], edited["status"]) == ("Is allergic to penicillin", "active")
    shown = queue_item(page, allergy.pk).find_element(By.CLASS_NAME, "review-content").text
    assert shown == "Is allergic to penicillin"  # the item shows the text as saved
    screenshot("done")

    assert page.find_element(By.ID, "review-total").text == "0"
    assert page.execute_script("return window.reviewMarker;") == "still the same page"
    assert count(page, ".review-error") == 0


def test_bulk_approval_of_the_ticked_facts_posts_the_form_and_redirects_with_messages(
    page, live_server, acme, reviewer, admin_login, screenshot
):
    tenant, key = acme
    first = extracted(tenant, "Prefers window seats on flights")
    second = extracted(tenant, "Has a dog named Toby")
    third = extracted(tenant, "Is learning Portuguese")
    admin_login("reviewer", PASSWORD)
    page.get(live_server.url + "/admin/review/")

    for fact in (first, third):
        queue_item(page, fact.pk).find_element(By.CLASS_NAME, "review-select").click()
    assert page.find_element(By.ID, "review-selected-count").text == "2"
    press(page, "k")  # the keyboard still moves from a ticked box: from the third item to the second
    assert focused_fact(page) == second.pk
    second_item = queue_item(page, second.pk)
    second_item.find_element(By.CSS_SELECTOR, ".review-edit kbd").click()  # the key's badge is the button too
    assert second_item.find_element(By.CLASS_NAME, "review-editor").is_displayed()
    screenshot("ticked")
    click_and_wait(page, page.find_element(By.CSS_SELECTOR, "#review-bulk button[value=approve]"))
    screenshot("approved")

    shown = messages(page)
    assert f"#{first.pk}: approved (active)." in shown
    assert f"#{third.pk}: approved (active)." in shown
    assert queue_ids(page) == [second.pk]
    statuses = {fact.pk: api_fact(live_server, key, fact)["status"] for fact in (first, second, third)}
    assert statuses == {first.pk: "active", second.pk: "pending", third.pk: "active"}


def test_conflicts_are_resolved_side_by_side_keeping_the_new_fact_or_merging_an_edited_text(
    page, live_server, acme, reviewer, admin_login, screenshot
):
    tenant, key = acme
    chat = episode_store(
        tenant=tenant,
        user_id="u2",
        session_id="chat-1",
        messages=[
            {"role": "user", "content": "We are flat hunting this month."},
            {"role": "user", "content": "Probably moving to Lisbon in June."},
            {"role": "assistant", "content": "Exciting! Tell me how it goes."},
        ],
        extract=False,
    ).episode
    berlin, paris, first = conflict_of(tenant, "Lives in Berlin", "Lives in Paris")
    madrid, lisbon, second = conflict_of(
        tenant, "Lives in Madrid", "Lives in Lisbon", user_id="u2", source_episode=chat, source_messages=[1]
    )
    admin_login("reviewer", PASSWORD)
    page.get(live_server.url + "/admin/review/conflicts/")
    screenshot("conflicts")

    for conflict, old, new in ((first, berlin, paris), (second, madrid, lisbon)):
        article = page.find_element(By.ID, f"conflict-{conflict}")
        existing = article.find_element(By.CSS_SELECTOR, "section.review-side.review-existing")
        proposed = article.find_element(By.CSS_SELECTOR, "section.review-side.review-new")
        assert old.content in existing.text
        assert new.content in proposed.text
        assert "source Agent" in existing.text
        assert "source Agent" in proposed.text
        reason = article.find_element(By.CLASS_NAME, "review-reason").text
        assert reason.startswith("The judge: changed value of 'lives in'")
        # side by side: the new fact's column is right of the existing one's, on the same row
        assert proposed.location["x"] > existing.location["x"] + existing.size["width"] / 2
        assert proposed.location["y"] == existing.location["y"]
    lisbon_side = page.find_element(By.CSS_SELECTOR, f"#conflict-{second} section.review-new")
    source_message = lisbon_side.find_element(By.CSS_SELECTOR, ".review-excerpt .review-source")
    assert "Probably moving to Lisbon in June." in source_message.text

    click_and_wait(page, page.find_element(By.CSS_SELECTOR, f"#conflict-{first} button[value=keep_new]"))
    screenshot("kept-new")
    assert f"Conflict #{first} resolved: keep new." in messages(page)
    retired = api_fact(live_server, key, berlin)
    assert (retired["superseded_by"], retired["valid_to"] is not None) == (paris.pk, True)
    assert api_fact(live_server, key, paris)["status"] == "active"
    assert count(page, f"#conflict-{first}") == 0

    merged_text = page.find_element(By.CSS_SELECTOR, f"#conflict-{second} textarea[name=content]")
    assert merged_text.get_attribute("value") == "Lives in Lisbon"  # the new fact's text to start from
    merged_text.clear()
    merged_text.send_keys("Lives in Madrid, moving to Lisbon in June")
    screenshot("merging")
    click_and_wait(page, page.find_element(By.CSS_SELECTOR, f"#conflict-{second} button[value=merge]"))
    screenshot("merged")

    assert f"Conflict #{second} resolved: merge." in messages(page)
    assert page.find_element(By.CLASS_NAME, "review-summary").text == "0 open conflicts."
    kept = api_fact(live_server, key, madrid)
    assert kept["content"] == "Lives in Madrid, moving to Lisbon in June"
    assert (kept["status"], kept["valid_to"]) == ("active", None)
    folded = api_fact(live_server, key, lisbon)
    assert (folded["superseded_by"], folded["valid_to"] is not None) == (madrid.pk, True)


def test_a_facts_page_tells_its_story_newest_first_and_why_it_would_be_found(
    page, live_server, acme, reviewer, admin_login, screenshot
):
    tenant = acme[0]
    nurse = fact_remember(tenant=tenant, user_id="u1", content=NURSE).fact
    head_nurse = extracted(tenant, HEAD_NURSE)
    fact_remember(tenant=tenant, user_id="u1", content="Has a dog named Toby")
    fact_approve(tenant=tenant, fact_id=head_nurse.pk, actor="staff:1")
    admin_login("reviewer", PASSWORD)
    page.get(f"{live_server.url}/admin/review/facts/{head_nurse.pk}/")
    screenshot("story")

    assert page.find_element(By.CSS_SELECTOR, "#review-fact .review-big").text == HEAD_NURSE
    timeline = [item.text.split(" by ")[0] for item in page.find_elements(By.CSS_SELECTOR, ".review-timeline > li")]
    assert timeline == ["Approved", "Created"]  # newest first
    assert f"took the place of #{nurse.pk} {NURSE}" in page.find_element(By.CLASS_NAME, "review-chain").text
    proposal = page.find_element(By.CSS_SELECTOR, "#review-fact .review-facts").text
    assert f"Proposed when it was stored (it is active now):\nApproving would supersede #{nurse.pk}" in proposal

    why = page.find_element(By.CSS_SELECTOR, "form.review-why input[name=q]")
    why.send_keys("head nurse at Hospital La Fe")
    click_and_wait(page, page.find_element(By.CSS_SELECTOR, "form.review-why button"))
    screenshot("why-found")

    assert page.find_element(By.ID, "review-why-result").text.startswith("Rank 1 for “head nurse at Hospital La Fe”")
    assert page.current_url.endswith(f"/admin/review/facts/{head_nurse.pk}/?q=head+nurse+at+Hospital+La+Fe")

    page.get(f"{live_server.url}/admin/review/facts/{nurse.pk}/")  # the retired fact points at what replaced it
    assert f"replaced by #{head_nurse.pk} {HEAD_NURSE}" in page.find_element(By.CLASS_NAME, "review-chain").text
    timeline = [item.text.split(" by ")[0] for item in page.find_elements(By.CSS_SELECTOR, ".review-timeline > li")]
    assert timeline == ["Superseded", "Created"]


def test_another_tenants_staff_user_sees_nothing_of_this_tenant(page, live_server, acme, admin_login, screenshot):
    tenant = acme[0]
    mine = extracted(tenant, HEAD_NURSE)
    _, in_conflict, _ = conflict_of(tenant, "Lives in Berlin", "Lives in Paris")
    other, _ = make_tenant("globex")
    theirs = extracted(other, "Might be moving to Oslo")
    staff_member("rival", other)

    admin_login("rival", PASSWORD)
    screenshot("index")
    assert counts_rows(page) == {"globex": ["1", "0", "0", "never"]}

    page.get(live_server.url + "/admin/review/")
    screenshot("queue")
    assert queue_ids(page) == [theirs.pk]
    queue = page.find_element(By.ID, "review-queue").text
    assert "head nurse" not in queue
    assert "Paris" not in queue
    assert [option.text for option in page.find_elements(By.CSS_SELECTOR, "select[name=tenant] option")] == [
        "all",
        "globex",
    ]
    page.get(f"{live_server.url}/admin/review/?tenant={tenant.pk}")  # naming the tenant does not open it
    assert queue_ids(page) == []

    page.get(live_server.url + "/admin/review/conflicts/")
    screenshot("conflicts")
    assert count(page, "article.review-conflict") == 0
    assert "No open conflict." in page.find_element(By.ID, "review-conflicts").text
    assert "Berlin" not in page.find_element(By.ID, "content").text

    for fact in (mine, in_conflict):
        page.get(f"{live_server.url}/admin/review/facts/{fact.pk}/")
        assert "Not Found" in page.title or "Not Found" in page.find_element(By.TAG_NAME, "body").text


@pytest.mark.skipif(os.environ.get("REVIEW_DOCS_SCREENSHOTS") != "1", reason="REVIEW_DOCS_SCREENSHOTS=1 is not set")
def test_the_readme_pictures(page, live_server, acme, reviewer, admin_login):
    """docs/review-queue.png, docs/review-conflicts.png, docs/review-fact.png: a short conversation, the facts
    extracted from it waiting for review (one proposing a supersession, one in conflict), and one fact's story."""
    tenant = acme[0]
    for content in (NURSE, "Lives in Madrid", "Has a daughter named Lucía", "Drinks coffee every morning"):
        fact_remember(tenant=tenant, user_id="maria", content=content)
    chat = episode_store(
        tenant=tenant,
        user_id="maria",
        session_id="2024-06-03-evening",
        messages=[
            {"role": "user", "content": "Big news: I started at a new hospital last week."},
            {"role": "assistant", "content": "Congratulations! Which one, and what's the role?"},
            {"role": "user", "content": "Head nurse at Hospital La Fe. More paperwork, fewer night shifts."},
            {"role": "assistant", "content": "That sounds like a good trade. Did you have to move for it?"},
            {"role": "user", "content": "We're renting in Valencia for now, at least until the summer."},
            {"role": "assistant", "content": "Nice. How is Lucía taking the change?"},
            {"role": "user", "content": "She loves the beach already. And she started swimming lessons."},
        ],
        extract=False,
    ).episode

    def from_chat(content: str, message: int, confidence: float = 0.9) -> Fact:
        return fact_remember(
            tenant=tenant,
            user_id="maria",
            content=content,
            source=Fact.Source.EXTRACTED,
            confidence=confidence,
            source_episode=chat,
            source_messages=[message],
        ).fact

    head_nurse = from_chat(HEAD_NURSE, 2)
    from_chat("Lives in Valencia", 4, confidence=0.5)  # unsure, and against "Lives in Madrid": a conflict
    from_chat("Her daughter Lucía takes swimming lessons", 6)
    DOCS.mkdir(exist_ok=True)
    admin_login("reviewer", PASSWORD)
    # The admin's navigation sidebar closed, as its « button leaves it (in localStorage), for the console's width.
    page.execute_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'false');")
    try:
        page.get(live_server.url + "/admin/review/")
        save_cropped_png(page, DOCS / "review-queue.png")
        page.get(live_server.url + "/admin/review/conflicts/")
        save_cropped_png(page, DOCS / "review-conflicts.png")
        fact_approve(tenant=tenant, fact_id=head_nurse.pk, actor=f"staff:{reviewer.pk}")
        page.get(f"{live_server.url}/admin/review/facts/{head_nurse.pk}/?q=where+does+maria+work")
        save_cropped_png(page, DOCS / "review-fact.png")
    finally:
        page.execute_script("localStorage.removeItem('django.admin.navSidebarIsOpen');")  # the other tests' admin
    for name in ("review-queue", "review-conflicts", "review-fact"):
        assert (DOCS / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
