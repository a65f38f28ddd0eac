"""Utility metrics: what a transformation loses, measured in SQL, and attribute weights."""
