"""Transformations compiled to SQL: full-domain generalization, recoding by groups, typed bounds."""
