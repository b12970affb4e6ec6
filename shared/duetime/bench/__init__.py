"""Benchmarks (`duetime bench ...`) and the capacity planner (`duetime plan`). Figures, not tests."""
