"""Declaring: policies, column roles, and the catalog of stored hierarchies and policies (schema ``anon``)."""
