"""Encoding: a source bound to a policy and read once into a frequency table of distinct combinations with integer
level codes; the workspace every algorithm takes."""
