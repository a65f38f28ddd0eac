"""Clustering: seed 001's semi-supervised (alpha,k), seed 003's personalized model, MDAV."""
