"""`python -m solver` is `solver`."""

from solver.cli.main import main

main()
