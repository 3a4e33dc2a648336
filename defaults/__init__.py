"""The floor below core: values nodegate falls back to, declared once with nothing imported.

A command's options show their defaults in `--help` and read them when a TAB completes them;
declared here, those defaults cost neither core nor pydantic (tests/unit/cli/
test_lazy_commands.py). Core and everything above import them from here; nothing here imports
anything of nodegate or outside the standard library.
"""
