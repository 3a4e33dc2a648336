"""The day-2 commands' shell: reading the live cluster (`cluster.py`; `sources.py`, what the
rules read about one node), the label records' writes (`label_records.py`), where to look
(`options.py`) and printing reports (`render.py`)."""
