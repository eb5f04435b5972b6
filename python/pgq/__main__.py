"""`python -m pgq ...` is the `pgq` command."""

from .cli.main import main

main()
