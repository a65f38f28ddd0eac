"""Privacy: equivalence classes, the models a release must satisfy, checked as GROUP BY ... HAVING queries, and
risk."""
