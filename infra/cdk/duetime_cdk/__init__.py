"""duetime's infrastructure, one construct per capability (storage, queue, pollers, workers, API,
observability), composed in ``stack.DuetimeStack``."""
