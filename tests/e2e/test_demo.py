"""`nodegate demo`'s story, step by step, on the real control plane: it cannot rot."""

from __future__ import annotations

import io
from importlib.resources import files

from rich.console import Console

from nodegate.demo.story import Story
from nodegate.localcluster.cluster import LocalControlPlane


def test_every_step_of_the_demo_story_does_what_it_says(
    scheduling_control_plane: LocalControlPlane, unique_name: str
) -> None:
    rules = files("nodegate.examples").joinpath("rules.yaml").read_text("utf-8")
    out = io.StringIO()
    result = Story(
        scheduling_control_plane, rules, Console(file=out, width=160), prefix=unique_name[:40]
    ).play()
    print(out.getvalue())
    assert [s.title for s in result.steps if not s.ok] == []
    assert len(result.steps) == 6
    assert result.metrics["nodegate_label_restores_total"] == 1
    assert result.metrics["nodegate_rules_rejected_total"] == 1
    assert result.metrics.get("nodegate_errors_total", 0) == 0
