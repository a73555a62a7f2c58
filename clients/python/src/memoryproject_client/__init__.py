"""A typed client for the memoryproject REST API, sync (`MemoryClient`) and async (`AsyncMemoryClient`)."""
