"""`python -m edgewise`: the command line, as the `edgewise` script."""

from edgewise.cli import main

main()
