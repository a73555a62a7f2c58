"""One example request per API operation, by operation id, for the OpenAPI schema (a test checks that every
operation has one and that each example body is accepted by the running API)."""

REQUEST_EXAMPLES: dict[str, dict] = {
    "health_retrieve": {},
    "health_live": {},
    "health_ready": {},
    "whoami": {},
    "embedding_cache_stats": {},
    "facts_delete_by_filter": {
        "body": {"user_id": "alice", "filters": {"AND": [{"category": "project"}, {"metadata.source": "crm-sync"}]}}
    },
    "api_keys_list": {"parameters": {"limit": 20}},
    "api_keys_create": {"body": {"name": "review console", "scopes": ["memory:read", "review"]}},
    "api_keys_update": {"parameters": {"key_id": 7}, "body": {"scopes": ["memory:read"]}},
    "api_keys_revoke": {"parameters": {"key_id": 7}},
    # facts
    "facts_list": {"parameters": {"user_id": "alice", "status": "active,pending", "limit": 20}},
    "facts_remember": {
        "body": {
            "user_id": "alice",
            "content": "Prefers PostgreSQL for new projects",
            "category": "preference",
            "confidence": 0.9,
            "metadata": {"source": "onboarding chat"},
        }
    },
    "facts_get": {"parameters": {"fact_id": 42}},
    "facts_update": {"parameters": {"fact_id": 42}, "body": {"content": "Prefers PostgreSQL 18", "pinned": True}},
    "facts_delete": {"parameters": {"fact_id": 42}},
    "facts_history": {"parameters": {"fact_id": 42}},
    "facts_approve": {"parameters": {"fact_id": 42}},
    "facts_reject": {"parameters": {"fact_id": 42}},
    "facts_restore": {"parameters": {"fact_id": 42}},
    "facts_undo_supersession": {"parameters": {"fact_id": 42}},
    "facts_import": {
        "body": {
            "facts": [
                {"user_id": "alice", "content": "Lives in Lisbon", "category": "profile"},
                {"user_id": "alice", "content": "Is allergic to shellfish", "category": "profile", "pinned": True},
            ]
        }
    },
    "facts_search": {"body": {"user_id": "alice", "query": "which database?", "limit": 5}},
    "conflicts_list": {"parameters": {"user_id": "alice", "status": "open"}},
    "conflicts_resolve": {"parameters": {"conflict_id": 7}, "body": {"resolution": "keep_new"}},
    # context
    "context_build": {"body": {"user_id": "alice", "query": "Set up a database for my new app", "max_tokens": 600}},
    # episodes
    "episodes_list": {"parameters": {"user_id": "alice", "session_id": "chat-2026-12-01"}},
    "episodes_store": {
        "body": {
            "user_id": "alice",
            "session_id": "chat-2026-12-01",
            "messages": [
                {"role": "user", "content": "I moved to Lisbon last month.", "timestamp": "2026-12-01T09:30:00Z"},
                {"role": "assistant", "content": "Congratulations! How is it going?"},
            ],
        }
    },
    "episodes_get": {"parameters": {"episode_id": 3}},
    "episodes_retry": {"parameters": {"episode_id": 3}},
    "episodes_search": {"body": {"user_id": "alice", "query": "moving house", "limit": 3}},
    # forgetting
    "forget_policy_get": {},
    "forget_policy_put": {
        "body": {
            "enabled": True,
            "max_unused_days": 90,
            "min_usage_count": 3,
            "max_facts_per_user": 1000,
            "archive_retention_days": 30,
            "exempt_categories": ["profile"],
        }
    },
    "forget_policy_patch": {"body": {"max_unused_days": 180}},
    "forget_policy_reset": {},
    "forget_dry_run": {"body": {"as_of": "2027-01-01T00:00:00Z"}},
    "forget_runs_list": {"parameters": {"dry_run": "false", "limit": 10}},
    "forget_runs_get": {"parameters": {"run_id": 12}},
    # knowledge base
    "kb_documents_list": {"parameters": {"path_prefix": "guides/"}},
    "kb_documents_upload": {
        "body": {
            "doc_id": "guides/deploy.md",
            "title": "Deploying",
            "text": "# Deploying\n\n## Rolling back\n\nRun `make rollback` to return to the previous release.\n",
        }
    },
    "kb_documents_get": {"parameters": {"document_id": 5}},
    "kb_documents_delete": {"parameters": {"document_id": 5}},
    "kb_documents_retry": {"parameters": {"document_id": 5}},
    "kb_search": {"body": {"query": "how do I roll back a deploy?", "limit": 3}},
    # privacy
    "users_erase": {"parameters": {"user_id": "alice"}},
    "users_export": {"parameters": {"user_id": "alice"}},
    # The JSON document form of an import (JSON Lines carry the same records, one a line).
    "users_import": {
        "parameters": {"user_id": "alice"},
        "body": {
            "results": [
                {"type": "header", "format": "memoryproject", "version": 1, "user_id": "alice"},
                {"type": "fact", "id": 1, "content": "Lives in Lisbon", "category": "profile"},
                {"type": "fact", "id": 2, "content": "Prefers PostgreSQL", "category": "preference", "pinned": True},
            ]
        },
    },
    # agent tools
    "tools_list": {"parameters": {"format": "anthropic"}},
    "tools_call": {
        "body": {
            "user_id": "alice",
            "name": "memory_search",
            "arguments": '{"query": "which database does she prefer?", "limit": 5}',
        }
    },
}
