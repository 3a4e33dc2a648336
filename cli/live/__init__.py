"""The day-2 commands' shell: reading the live cluster (`cluster.py`) and printing reports
(`render.py`)."""
