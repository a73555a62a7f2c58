"""LangGraph's PostgresStore (bench/peers/langgraph.txt) for bench/report.py: run with
var/bench/venvs/langgraph/bin/python.

    python bench/peers/langgraph_runner.py --database-url URL --model-path DIR

PostgresStore.from_conn_string on the given database with a connection pool, store.setup(), and its pgvector
index (dims 384, the "text" field embedded, the store's default HNSW/cosine) fed by an embedding function that
calls the bundled all-MiniLM-L6-v2 through sentence-transformers. A user's memories are the items of the
namespace ("users", user, "memories"). Serves bench/peers/_measure.py's JSON commands. bench/kb.py's search by a
given vector goes through a second PostgresStore on the same tables whose embedding function returns that vector.
"""

import argparse
import contextlib
import os
import sys
import threading
import uuid
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _measure  # noqa: E402


class LangGraphSystem:
    def __init__(self, database_url: str, model_path: str):
        from langgraph.store.postgres import PostgresStore
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(model_path, device="cpu", local_files_only=True)
        # The embedding function is the user's to write; a fast tokenizer must not serve two threads at once
        # ("Already borrowed"), so the 8 clients take turns at the model, as one shared model would.
        self.model_lock = threading.Lock()
        self.database_url = database_url
        self.supplied_store = None
        self.supplied_vector: list[float] = []
        self.stack = contextlib.ExitStack()
        self.store = self.stack.enter_context(
            PostgresStore.from_conn_string(
                database_url,
                pool_config={"min_size": 1, "max_size": 10},
                index={"dims": 384, "embed": self.embed, "fields": ["text"]},
            )
        )
        self.store.setup()

    def embed(self, texts: list[str]) -> list[list[float]]:
        with self.model_lock:
            return self.model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True).tolist()

    def info(self) -> dict:
        import importlib.metadata as metadata

        import torch

        names = ("langgraph", "langgraph-checkpoint-postgres", "torch", "sentence-transformers")
        return {
            "system": "LangGraph PostgresStore",
            "versions": {name: metadata.version(name) for name in names},
            "torch_threads": torch.get_num_threads(),
            "config": {
                "store": "PostgresStore.from_conn_string, pool max_size 10",
                "index": {"dims": 384, "fields": ["text"], "embed": "sentence-transformers all-MiniLM-L6-v2"},
            },
        }

    @staticmethod
    def namespace(user: str) -> tuple:
        return ("users", user, "memories")

    def embed_query(self, text: str):
        return self.embed([text])

    def search(self, user: str, query: str, limit: int) -> list:
        return [item.value.get("dia_id") for item in self.store.search(self.namespace(user), query=query, limit=limit)]

    def add(self, user: str, text: str) -> None:
        self.store.put(self.namespace(user), str(uuid.uuid4()), {"text": text})

    def bulk(self, user: str, texts: list[str]) -> None:
        from langgraph.store.base import PutOp

        namespace = self.namespace(user)
        self.store.batch([PutOp(namespace, str(uuid.uuid4()), {"text": text}) for text in texts])

    def seed(self, user: str, items: list[dict]) -> None:
        from langgraph.store.base import PutOp

        namespace = self.namespace(user)
        for start in range(0, len(items), 500):
            self.store.batch(
                [
                    PutOp(namespace, str(uuid.uuid4()), {"text": item["content"], "dia_id": item.get("dia_id")})
                    for item in items[start : start + 500]
                ]
            )

    def search_vector(self, namespace: list[str], vector: list[float], limit: int) -> list[str]:
        """store.search as an agent calls it, with the query's embedding given instead of computed."""
        if self.supplied_store is None:
            from langgraph.store.postgres import PostgresStore

            self.supplied_store = self.stack.enter_context(
                PostgresStore.from_conn_string(
                    self.database_url,
                    pool_config={"min_size": 1, "max_size": 2},
                    index={"dims": len(vector), "embed": self.supplied, "fields": ["text"]},
                )
            )
        self.supplied_vector = vector
        return [item.key for item in self.supplied_store.search(tuple(namespace), query="(given)", limit=limit)]

    def supplied(self, texts: list[str]) -> list[list[float]]:
        return [self.supplied_vector for _ in texts]

    def close(self) -> None:
        self.stack.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--model-path", required=True)
    args = parser.parse_args()
    _measure.serve(lambda: LangGraphSystem(args.database_url, args.model_path))


if __name__ == "__main__":
    main()
