from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from pgvector.django import HalfVectorField, HnswIndex, VectorField

from core.db import BitStringField
from core.text import search_text
from tenancy.models import Tenant


class Fact(models.Model):
    """One atomic statement about a user or their work (semantic memory)."""

    class Category(models.TextChoices):
        PREFERENCE = "preference"
        PROFILE = "profile"
        PROJECT = "project"
        DECISION = "decision"
        PROCEDURE = "procedure"
        OTHER = "other"

    class Status(models.TextChoices):
        PENDING = "pending"  # waits for human review
        ACTIVE = "active"
        REJECTED = "rejected"
        ARCHIVED = "archived"  # forgotten but restorable until purged

    class Source(models.TextChoices):
        AGENT = "agent"
        EXTRACTED = "extracted"
        MANUAL = "manual"
        IMPORT = "import"

    class EmbeddingPending(models.TextChoices):
        NO = "", "no"  # embedded (or never to be: history)
        JUDGE = "judge"  # stored while the embedder failed: embedded, then judged as a new fact would have been
        EMBED = "embed"  # edited or imported while the embedder failed: embedded only

    # No index of its own: the table's composite indexes start with tenant.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="facts", db_index=False)
    user_id = models.CharField(max_length=255)
    agent_id = models.CharField(max_length=255, blank=True, default="")
    category = models.CharField(max_length=20, choices=Category.choices, default=Category.OTHER)
    content = models.TextField()
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    # Awaiting its vector (the embedding provider failed): found by keywords meanwhile, embedded by
    # facts.tasks.facts_embed with exponential backoff between attempts (facts.services.embedding).
    embedding_pending = models.CharField(
        max_length=5, choices=EmbeddingPending.choices, blank=True, default=EmbeddingPending.NO
    )
    embedding_attempts = models.PositiveSmallIntegerField(default=0)
    embedding_next_attempt_at = models.DateTimeField(null=True, blank=True)
    confidence = models.FloatField(default=1.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    # Moved every time the fact is injected into a prompt; deliberately not indexed (cheap HOT updates).
    usage_count = models.PositiveIntegerField(default=0)
    last_used_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.AGENT)
    source_episode = models.ForeignKey(
        "episodes.Episode", on_delete=models.SET_NULL, null=True, blank=True, related_name="facts"
    )
    # Temporal validity: a contradicted fact is retired (valid_to, superseded_by), never erased.
    valid_from = models.DateTimeField(default=timezone.now)
    valid_to = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="supersedes"
    )
    occurred_at = models.DateTimeField(null=True, blank=True)
    pinned = models.BooleanField(default=False)
    metadata = models.JSONField(default=dict, blank=True)
    # Why it waits for a person whatever its confidence: its text reads as instructions to an assistant
    # (core.instructions), so it never reaches a prompt before someone has read it.
    hold_reason = models.CharField(max_length=200, blank=True, default="", editable=False)
    # Set when a person approved or rejected it: extracted facts never silently override such a fact.
    reviewed_at = models.DateTimeField(null=True, blank=True)
    # Set when the fact was archived (forgotten but restorable): the purge counts its retention from here.
    archived_at = models.DateTimeField(null=True, blank=True)
    # What the judge found when a fact arrived that could not take effect at once (a pending fact changes no
    # other fact): "merge into #43", "supersede #43", with the reasons; approving applies it (facts.services.review).
    proposal = models.JSONField(null=True, blank=True, editable=False)
    # The indexes, in source_episode's messages, of the messages the fact was extracted from (provenance).
    source_messages = ArrayField(models.PositiveIntegerField(), default=list, blank=True, editable=False)
    # Keyword search: the content plus its date words (and CJK spaced apart), prepared in Python by
    # refresh_search_text(); PostgreSQL keeps the tsvector in step.
    search_text = models.TextField(blank=True, default="", editable=False)
    search_vector = models.GeneratedField(
        expression=SearchVector("search_text", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # One user's rows: lists, and the exact scan of a search in the past (current facts are searched
            # through FactSearchEntry).
            models.Index(fields=["tenant", "user_id", "status"], name="fact_tenant_user_status"),
            # Filters on metadata (search.filters: an equality goes with its containment, which this finds).
            GinIndex(fields=["metadata"], opclasses=["jsonb_path_ops"], name="fact_metadata"),
            # The embedding sweep's due facts: a handful of rows, so a partial index of those alone.
            models.Index(
                fields=["embedding_next_attempt_at"],
                condition=~models.Q(embedding_pending=""),
                name="fact_embedding_pending",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0.0, confidence__lte=1.0), name="fact_confidence_0_1"
            ),
            # A retired fact was true from valid_from until valid_to: never an interval that ends before it starts.
            models.CheckConstraint(
                condition=models.Q(valid_to__isnull=True) | models.Q(valid_to__gte=models.F("valid_from")),
                name="fact_valid_to_after_valid_from",
            ),
        ]

    def __str__(self) -> str:
        return self.content[:80]

    def save(self, *args, **kwargs):
        self.refresh_search_text()
        super().save(*args, **kwargs)

    def embedding_text(self) -> str:
        # Dates go to the keyword side only: prefixing them to the embedded text measured worse on LoCoMo.
        return self.content

    def refresh_search_text(self) -> None:
        """Call before bulk_create / bulk_update, which skip save()."""
        self.search_text = search_text(self.content, dates=(self.occurred_at or self.valid_from,))


class FactSearchEntry(models.Model):
    """The narrow copy of each fact a search can find (current, active or pending), which facts_search reads
    instead of the wide facts_fact rows: ~1 kB a row (a halfvec and the keywords) instead of ~2.3 kB, and a GIN
    index that finds one user's keyword matches alone. Written by PostgreSQL only: triggers on facts_fact
    (facts/sql/search_upkeep.sql) keep it in step with every insert, COPY, update and delete, so no write path can
    forget it.

    keywords is the fact's search_vector plus one scope lexeme, 'zs' + md5('<tenant id>:<user id>')
    (search_scope_lexeme): a query ANDs it with its terms, so the GIN index yields the rows of that user only
    (btree_gin, which would index the user beside the words, is not in every PostgreSQL).

    The table is hash-partitioned by (tenant_id, user_id) (migration 0023; Django sees the parent), each partition
    with its own indexes below: a user's statements read one partition, and a large user's walk of the HNSW graph
    meets its own entries and a 64th of the others'. The primary key in the database is (fact_id, tenant_id,
    user_id), as a partitioned table's must hold the partition key."""

    fact = models.OneToOneField(
        Fact, primary_key=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    tenant = models.ForeignKey(
        Tenant, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    user_id = models.CharField(max_length=255)
    agent_id = models.CharField(max_length=255)
    category = models.CharField(max_length=20)
    status = models.CharField(max_length=20)
    # Half precision: the scan or the HNSW graph picks candidates by it, and facts_search re-scores them with the
    # full vector. The size of facts_fact.embedding (manage.py reembed resizes both).
    embedding = HalfVectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True)
    vector_model = models.CharField(max_length=200)  # the model of the vector, "" without one
    awaiting_vector = models.BooleanField()
    keywords = SearchVectorField()
    # The vector's signs, a bit each (pgvector's binary_quantize): a large user's shortlist of nearest entries is
    # taken by their Hamming distance to the query's, from the index below alone (search.nearest).
    signs = BitStringField(null=True)

    class Meta:
        indexes = [
            # Covering what a search filters on and the signs, so counting a user's entries and shortlisting them
            # read the index alone, in the user's order whatever else the table holds.
            models.Index(
                fields=["tenant", "user_id", "status"],
                include=["vector_model", "awaiting_vector", "category", "agent_id", "fact", "signs"],
                name="factsearch_tenant_user_status",
            ),
            # Without a pending list: with one, every search scans the facts inserted since the last merge, every
            # user's (291 pages of them: a 1k user's search 3.7 -> 8.9 ms); a bulk import of 100 pays ~13 ms instead.
            GinIndex(fields=["keywords"], name="factsearch_keywords", fastupdate=False),
            # Large users' nearest entries (search.nearest.nearest_sql); pgvector's default graph parameters.
            HnswIndex(
                fields=["embedding"],
                name="factsearch_embedding_hnsw",
                opclasses=["halfvec_cosine_ops"],
                m=16,
                ef_construction=64,
            ),
        ]

    def __str__(self) -> str:
        return f"search entry of fact {self.fact_id}"


class SearchEntryKey(models.Model):
    """The columns a search filters entries by (FactSearchEntry's), which the entries' counts are kept per."""

    tenant = models.ForeignKey(
        Tenant, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    user_id = models.CharField(max_length=255)
    status = models.CharField(max_length=20)
    agent_id = models.CharField(max_length=255)
    category = models.CharField(max_length=20)
    vector_model = models.CharField(max_length=200)
    awaiting_vector = models.BooleanField()
    entries = models.IntegerField()

    class Meta:
        abstract = True


class FactSearchCount(SearchEntryKey):
    """How many search entries a user has, per value of every column a search filters them by: what a search reads
    for its BM25 N and its choice of how to find the nearest entries, instead of counting the user's entries (1.1 of
    the 10.5 ms a 10k user's search statement took). Written by PostgreSQL only: triggers on facts_factsearchentry
    (facts/sql/search_upkeep.sql) add each statement's net change, and drop a row that reaches 0."""

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "user_id", "status", "agent_id", "category", "vector_model", "awaiting_vector"],
                name="factsearchcount_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.entries} {self.status} entries of {self.user_id}"


class FactSearchTerm(SearchEntryKey):
    """How many search entries of a user hold a lexeme, per value of every column a search filters entries by (as
    FactSearchCount): the document frequency BM25 needs for a common term, which facts_search would otherwise count
    by reading every entry holding it (~1,400 of a 10k user's for a name). Written by PostgreSQL only: triggers on
    facts_factsearchentry (facts/sql/search_upkeep.sql) add each statement's net change, and drop a row that
    reaches 0, so a deleted fact's words do not outlive it."""

    lexeme = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "tenant", "user_id", "lexeme", "status", "agent_id", "category", "vector_model", "awaiting_vector"
                ],
                name="factsearchterm_key",
            )
        ]  # fmt: skip

    def __str__(self) -> str:
        return f"{self.entries} {self.status} entries of {self.user_id} holding {self.lexeme!r}"


class FactEvent(models.Model):
    """Audit trail of every state change of a fact, with who did it and the values before and after."""

    class Action(models.TextChoices):
        CREATED = "created"
        MERGED = "merged"
        SUPERSEDED = "superseded"
        CONFLICT_OPENED = "conflict_opened"
        CONFLICT_RESOLVED = "conflict_resolved"
        UPDATED = "updated"
        APPROVED = "approved"
        REJECTED = "rejected"
        DELETED = "deleted"
        ARCHIVED = "archived"
        RESTORED = "restored"
        PURGED = "purged"
        REINSTATED = "reinstated"  # current again: the fact that had superseded it was rejected

    # No index of its own: the table's composite indexes start with tenant.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="fact_events", db_index=False)
    # A plain id, not a foreign key: the audit outlives a purged fact.
    fact_id = models.BigIntegerField()
    user_id = models.CharField(max_length=255)
    action = models.CharField(max_length=30, choices=Action.choices)
    actor = models.CharField(max_length=100)  # "api_key:<id>", "staff:<id>" or "system"
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["tenant", "fact_id", "created_at"], name="factevent_tenant_fact")]

    def __str__(self) -> str:
        return f"{self.action} fact {self.fact_id} by {self.actor}"


class FactConflict(models.Model):
    """A contradiction the service would not settle on its own; a human resolves it."""

    class Status(models.TextChoices):
        OPEN = "open"
        RESOLVED = "resolved"

    class Resolution(models.TextChoices):
        KEEP_NEW = "keep_new"
        KEEP_OLD = "keep_old"
        KEEP_BOTH = "keep_both"
        MERGE = "merge"  # one edited text replaces both

    # No index of its own: the table's composite indexes start with tenant.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="fact_conflicts", db_index=False)
    user_id = models.CharField(max_length=255)
    existing_fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="conflicts_as_existing")
    new_fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="conflicts_as_new")
    reason = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    resolution = models.CharField(max_length=20, choices=Resolution.choices, blank=True)
    resolved_by = models.CharField(max_length=100, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "status", "user_id"], name="factconflict_tenant_status")]

    def __str__(self) -> str:
        return f"conflict {self.existing_fact_id} vs {self.new_fact_id} ({self.status})"
