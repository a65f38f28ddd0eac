"""Aggregates of a source or a release (differentially private: :mod:`.private`)."""
