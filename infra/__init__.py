"""Pulumi components and the program `pulumi up` runs."""
