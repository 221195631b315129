"""`python -m solver` is `solver`."""

from solver.cli import main

main()
