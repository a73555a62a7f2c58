"""Mem0 OSS (mem0ai, bench/peers/mem0.txt) for bench/report.py: run with var/bench/venvs/mem0/bin/python.

    python bench/peers/mem0_runner.py --database-url URL --model-path DIR --history-db FILE

Memory.from_config: pgvector on the given database (collection "memories", HNSW, Mem0's defaults), the
huggingface embedder on the bundled all-MiniLM-L6-v2 from its local folder, infer=False on every add, and an LLM
pointed at a dead local port so that any LLM call fails loudly. Serves bench/peers/_measure.py's JSON commands.
"""

import argparse
import hashlib
import os
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _measure  # noqa: E402

DEAD_LLM = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, any LLM call fails at once


class Mem0System:
    def __init__(self, database_url: str, model_path: str, history_db: str):
        os.environ.setdefault("MEM0_DIR", str(Path(history_db).parent / "mem0-home"))
        from mem0 import Memory

        self.config = {
            "vector_store": {
                "provider": "pgvector",
                "config": {
                    "connection_string": database_url,
                    "collection_name": "memories",
                    "embedding_model_dims": 384,
                    "maxconn": 10,  # 8 concurrent clients; Mem0's default of 5 would make them queue for a connection
                },
            },
            "embedder": {
                "provider": "huggingface",
                "config": {"model": model_path, "embedding_dims": 384, "model_kwargs": {"device": "cpu"}},
            },
            "llm": {
                "provider": "openai",
                "config": {"model": "gpt-4o-mini", "api_key": "unused", "openai_base_url": DEAD_LLM},
            },
            "history_db_path": history_db,
        }
        self.memory = Memory.from_config(self.config)

    def info(self) -> dict:
        import importlib.metadata as metadata

        import torch

        return {
            "system": "Mem0 OSS",
            "versions": {name: metadata.version(name) for name in ("mem0ai", "torch", "sentence-transformers")},
            "torch_threads": torch.get_num_threads(),
            "config": {
                "vector_store": "pgvector (collection memories, hnsw=True)",
                "embedder": "huggingface, local all-MiniLM-L6-v2",
                "infer": False,
                "llm": f"openai at {DEAD_LLM} (dead port)",
                "maxconn": 10,
            },
        }

    def embed_query(self, text: str):
        return self.memory.embedding_model.embed(text, "search")

    def search(self, user: str, query: str, limit: int) -> list:
        results = self.memory.search(query, top_k=limit, filters={"user_id": user})["results"]
        return [(result.get("metadata") or {}).get("dia_id") for result in results]

    def add(self, user: str, text: str) -> None:
        self.memory.add(text, user_id=user, infer=False)

    def bulk(self, user: str, texts: list[str]) -> None:
        self.memory.add([{"role": "user", "content": text} for text in texts], user_id=user, infer=False)

    def seed(self, user: str, items: list[dict]) -> None:
        """Setup only: the rows Mem0's add(infer=False) writes (its _create_memory payload), with the embeddings
        made in batches rather than one by one, so seeding 10k memories takes seconds, not minutes."""
        from mem0.utils.lemmatization import lemmatize_for_bm25

        vectors = self.memory.embedding_model.embed_batch([item["content"] for item in items], "add")
        now = datetime.now(UTC).isoformat()
        payloads = []
        for item in items:
            payload = {"user_id": user, "role": "user", "data": item["content"]}
            if item.get("dia_id"):
                payload["dia_id"] = item["dia_id"]
            payload["hash"] = hashlib.md5(item["content"].encode()).hexdigest()
            payload["created_at"] = payload["updated_at"] = now
            payload["text_lemmatized"] = lemmatize_for_bm25(item["content"])
            payloads.append(payload)
        for start in range(0, len(items), 1000):
            self.memory.vector_store.insert(
                vectors=vectors[start : start + 1000],
                payloads=payloads[start : start + 1000],
                ids=[str(uuid.uuid4()) for _ in payloads[start : start + 1000]],
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--history-db", required=True)
    args = parser.parse_args()
    _measure.serve(lambda: Mem0System(args.database_url, args.model_path, args.history_db))


if __name__ == "__main__":
    main()
