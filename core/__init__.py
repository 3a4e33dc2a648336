"""The rules core: one model of the rules file, its validation, and the pure planning functions.

Everything else (bootstrap rendering, Pulumi programs, the reconciler, the CLI) imports from here
and never keeps a copy of its own.
"""
