"""Privacy models and risk: what a release must satisfy, checked as GROUP BY ... HAVING queries."""
