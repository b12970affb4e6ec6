"""Benchmarks (``duetime bench ...``): figures, not tests. A package of its own, outside the Lambda asset; the
capacity model they check lives in ``duetime.capacity``."""
