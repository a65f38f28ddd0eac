"""Partitioning: Mondrian's cuts computed in SQL."""
