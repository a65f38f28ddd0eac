"""Full-domain generalization: searching the lattice of level vectors for the best transformation.

- :mod:`.lattice`: the lattice (every vector of levels, one per quasi-identifier) and its up- and down-set masks;
  a wide lattice (20–40 attributes) is numbered, not listed;
- :mod:`.evaluator`: the node-evaluator interface, all that a search knows of models, metrics and data: a node's
  verdict, suppressed records, metric values and bounds.  It also documents which models are monotone (with
  suppression: k-anonymity, distinct l-diversity, p-sensitive k-anonymity; without it: all) and what a search may
  conclude from a verdict;
- :mod:`.sql_evaluator`: the evaluator that answers with batched queries over the encoded frequency table, through
  any engine;
- :mod:`.budget`: what every search shares (its limits and progress, its result, the strategy contract);
- :mod:`.strategies`: the exact searches (optimal, Samarati's, exhaustive), which list the lattice, and the solution
  space, written against the interface alone;
- :mod:`.heuristics`: ARX's heuristic searches (Lightning, top-down, genetic), which walk it and need a limit;
- :mod:`.run`: a bound source's evaluator, and the runs the façade delegates to (search, solution space, publishing
  a node).

To add an evaluator, copy :mod:`.sql_evaluator`'s contract (:class:`~.evaluator.NodeEvaluator`'s docstring) and
implement its four abstract methods; :func:`.run.evaluator` chooses which one a run uses.
"""
