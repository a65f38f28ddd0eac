"""Perturbation: seed 004's empirical synthesis and the noise baselines."""
