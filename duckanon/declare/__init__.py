"""Declaring: hierarchies, policies, column roles, label notation and parameter checks."""
