"""Re-identification risk of a source or a release: who could be re-identified, and how many records are unique in the population."""
