"""`python -m pgq ...` is the `pgq` command."""

from .cli import main

main()
