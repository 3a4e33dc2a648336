"""`make test`'s runner: the suite's phases in order, each timed, and a report at the end."""
