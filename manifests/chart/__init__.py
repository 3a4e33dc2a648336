"""`charts/nodegate`, generated from the one manifest builder (`build_manifests`), never by hand.

Go templates cannot call the builder, and writing its objects a second time as templates would
give two sources that drift. So the chart is derived from the builder's output, in three parts:

* `inference`: the generic engine. It runs a builder under plain values, sentinels and variants,
  and infers the Go template of each object it makes (where a setting lands, what a section
  switches on); it knows nothing of nodegate.
* `values`: nodegate's values. The deploy settings (`DeploySettings`) in the chart's shape and
  back (`default_values`, `settings_for`, `release_settings`), values.schema.json, and nodegate's
  table of what the engine varies (`TABLE`: the scalar settings and their sentinels, the
  settings used whole, the variants).
* `files`: the chart's files (`chart_files`, for `nodegate chart`): Chart.yaml, values.yaml and
  its README, NOTES.txt, the inferred templates and the rules guard.

tests/unit/manifests/test_chart_helm.py renders the chart with the real helm and compares it,
object by object and field by field, with the builder's output for the same settings.
"""
