"""The `nodegate` command line."""
