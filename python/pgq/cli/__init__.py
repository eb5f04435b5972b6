"""The `pgq` command line: a click group per area, each a thin layer over the client."""
