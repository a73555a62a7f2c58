from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from core.admin import ActionsOnlyAdmin, apply_to_each
from facts.models import Fact
from tenancy.admin import TenantListFilter, TenantScopedAdmin

from . import selectors, services
from .models import Episode


class ExtractedFactInline(admin.TabularInline):
    """The facts extracted from this conversation, so a reviewer reads them beside what was said."""

    model = Fact
    fk_name = "source_episode"
    fields = ["fact_link", "content", "category", "confidence", "status"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False
    verbose_name_plural = "Facts extracted from this episode"

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description="fact")
    def fact_link(self, fact):
        return format_html('<a href="{}">#{}</a>', reverse("admin:facts_fact_change", args=[fact.pk]), fact.pk)


@admin.register(Episode)
class EpisodeAdmin(ActionsOnlyAdmin, TenantScopedAdmin):
    """View only (an episode changes through the API and the extraction), plus re-queuing its extraction."""

    list_display = [
        "id", "user_id", "session_id", "message_count", "extraction_status", "last_message_at", "tenant",
    ]  # fmt: skip
    list_filter = ["extraction_status", TenantListFilter]
    search_fields = ["user_id", "session_id", "summary"]
    fields = [
        "tenant", "user_id", "agent_id", "session_id", "last_message_at", "summary", "transcript",
        "extraction_status", "extraction_error", "extraction_skip_reason", "extraction_fallback_reason",
        "extraction_attempts", "extraction_next_attempt_at", "extracted_message_count", "message_count",
        "summarized_message_count", "embedding_model", "created_at", "updated_at",
    ]  # fmt: skip
    readonly_fields = fields
    inlines = [ExtractedFactInline]
    actions = ["retry_extraction"]

    def has_add_permission(self, request):
        return False  # episodes come from agents, through the API

    def has_delete_permission(self, request, obj=None):
        return False  # no service deletes one episode; a user's episodes go with the erasure of the user

    @admin.display(description="messages")
    def transcript(self, episode):
        return format_html(
            '<div style="max-height:40em;overflow:auto">{}</div>',
            format_html_join(
                "",
                '<p><b>{}</b> <small>{}</small><br><span style="white-space:pre-wrap">{}</span></p>',
                (
                    (f"{message['index']}. {message['role']}", message["timestamp"] or "", message["content"])
                    for message in selectors.episode_messages(episode=episode)
                ),
            ),
        )

    @admin.action(description="Retry the extraction of selected episodes", permissions=["change"])
    def retry_extraction(self, request, queryset):
        apply_to_each(
            self,
            request,
            queryset,
            "Queued for extraction:",
            lambda episode: services.episode_retry(tenant=episode.tenant, episode_id=episode.pk),
        )
