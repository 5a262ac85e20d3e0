"""`python -m decide`: the same command line as `decide` (`decide.cli`)."""

from decide.cli import main

main()
