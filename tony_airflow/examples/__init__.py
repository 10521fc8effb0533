"""Example task programs shipped with the package (used by `make demo` and the docs)."""
