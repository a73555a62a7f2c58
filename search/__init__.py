"""The search core's shared parts, below the domains: the filter language (search.filters)."""
