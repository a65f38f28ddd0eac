"""Encoding: a source read once into a frequency table of distinct combinations with integer level codes."""
