"""The plans of kb_search's statement, as the knowledge-base tests read them."""

from contextlib import contextmanager

from django.db import connection


@contextmanager
def search_plans():
    """The EXPLAIN ANALYZE of each kb_search statement run inside, in order (each statement still runs)."""
    plans: list[str] = []

    def explained(execute, sql, params, many, context):
        if "WITH vector_hits" in sql:
            explain = sql.replace("WITH vector_hits", "EXPLAIN (ANALYZE, COSTS OFF) WITH vector_hits", 1)
            execute(explain, params, many, context)
            context["cursor"].nextset()  # past the search's settings, sent before it
            plans.append("\n".join(row[0] for row in context["cursor"].fetchall()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explained):
        yield plans


def plan_node(plan: str, relation: str) -> str:
    """The lines of the node of EXPLAIN's text `plan` reading `relation` ("kb_kbchunk c") and of the nodes under it."""
    lines = plan.splitlines()
    start = next(n for n, line in enumerate(lines) if f" on {relation} " in line)
    depth = len(lines[start]) - len(lines[start].lstrip(" ->"))
    node = [lines[start]]
    for line in lines[start + 1 :]:
        if len(line) - len(line.lstrip(" ->")) <= depth:
            break
        node.append(line)
    return "\n".join(node)
