"""The release of pgq-sql: the package version (pyproject reads it from here) and what
`pgq install` writes into the database as pgq.version()."""

__version__ = "0.3.0"
