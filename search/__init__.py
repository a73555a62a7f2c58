"""The search core, below the domains: how the nearest vectors are found (search.nearest), what a statement tells the
planner (search.planner), the filter language (search.filters) and diversity (search.diversity)."""
