"""Full-domain generalization: the lattice of level vectors, node evaluation, search strategies."""
