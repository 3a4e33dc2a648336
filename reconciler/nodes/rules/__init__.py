"""The rules lifecycle: where rules come from, which are in force, what is held, and the
status record that says so."""
