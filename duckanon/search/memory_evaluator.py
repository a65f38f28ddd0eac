"""The in-process node evaluator: nodes evaluated with NumPy over the frequency table's arrays.

(Being written: the lead fills this module in.  Contract for the rest of the package:)

- ``MemoryNodeEvaluator(engine, encoding, hierarchies, models, metrics, allowed_suppressed, monotone, progress,
  suppressed_monotone, suppressed_class)``: same arguments and results as
  :class:`~duckanon.search.sql_evaluator.SqlNodeEvaluator`.
- ``memory_needed(engine, encoding, models, metrics) -> int``: bytes the evaluator's arrays take for this encoding.
- ``DEFAULT_MEMORY_BUDGET``: the budget ``evaluator="auto"`` compares that with.
"""
