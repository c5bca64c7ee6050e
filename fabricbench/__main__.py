"""`python -m fabricbench ...` is the `fabricbench` command."""

from fabricbench.cli import main

main()
