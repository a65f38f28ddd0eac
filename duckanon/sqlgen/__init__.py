"""SQL as sqlglot trees: building statements, never pasting text."""
