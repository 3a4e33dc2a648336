"""Go templates inferred from a builder's runs: the generic engine behind `charts/nodegate`.

It knows Go templates, helm's `.Values` and Kubernetes objects (a list item that has a `kind`
and a `metadata.name` is that object wherever it appears), and nothing of nodegate: what varies
is a `Table` (nodegate's is `nodegate.manifests.chart.values.TABLE`), and the builder is a
function from values to objects.

* **Leaves.** The builder runs once with plain values (D) and once with a sentinel for every
  setting (S); a leaf where the two differ is where a setting lands, and becomes a
  `{{ .Values… }}` expression (a sentinel inside a longer string, such as
  `--rules-configmap=<ns>/<name>`, becomes a `printf`).
* **Subtrees.** Settings the builder copies whole (`resources`, `nodeSelector`, `affinity`)
  become `toYaml`; labels it merges over the common ones become a `merge`; the `tolerations` it
  appends to the gates' (minus repeats) a `range` with the same de-duplication; lists it maps
  item by item (`image.pullSecrets`, `networkPolicy.apiServerPorts`) a `range` over the item.
* **Switches.** The builder runs under every variant (a section enabled, an optional value
  set, a default switched off) alone and in pairs; an object, key or list item present in some
  of those builds only is wrapped in `{{ if }}` with the narrowest condition (one or two
  variants, possibly negated) that explains exactly where it appears, and a leaf whose
  expression changes between them becomes an `if`/`else`. A difference no such condition
  explains is a generator error, not a guess.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

# --- what the generator varies ------------------------------------------------------------------


@dataclass(frozen=True)
class Scalar:
    """A setting that lands in leaves, and its sentinel. A sentinel `in_strings` (distinctive
    enough never to occur by chance: a made-up name, a digest, a port number) is also found
    inside longer strings; any other (an enum, a small number) only as a whole leaf. With a
    `fallback` (a template expression for something of the release's), the chart's default is
    `""` and the template uses the fallback for it."""

    path: str
    sentinel: str | int
    fallback: str | None = None
    note: str = ""
    """The fallback, for the value's description in the chart."""
    in_strings: bool = False

    @property
    def expression(self) -> str:
        value = f".Values.{self.path}"
        if self.fallback is not None:
            return f"({value} | default {self.fallback})"
        return f"({value} | int)" if isinstance(self.sentinel, int) else value


@dataclass(frozen=True)
class Subtree:
    """A setting the builder uses as a whole: `copy` (the value as is), `merge` (map entries
    over the common labels), `splice` (list items after the gates', repeats dropped), `map` (a
    list, each item placed into a fixed object). `plain` and `sentinel` are the D and S values."""

    path: str
    kind: str
    plain: Any
    sentinel: Any
    optional: bool = False
    """Empty means the builder leaves the key out (a variant switches it on)."""
    as_built: Callable[[Any], Any] | None = None
    """How the builder writes the value, when not as given (a `splice`'s items, normalised)."""


@dataclass(frozen=True)
class Variant:
    """A way the builder's output changes shape: values that switch it (on the D side), and
    the template conditions that hold when it is on and off."""

    name: str
    patch: dict[str, Any]
    on: str
    off: str


def switch(path: str, patch: dict[str, Any] | None = None) -> Variant:
    """An optional section switched on (`<path>.enabled`)."""
    values = {f"{path}.enabled": True, **(patch or {})}
    return Variant(path, values, f".Values.{path}.enabled", f"not .Values.{path}.enabled")


def given(path: str, value: Any) -> Variant:
    """An optional value given (it is empty by default)."""
    return Variant(path, {path: value}, f".Values.{path}", f"not .Values.{path}")


def dropped(path: str, value: Any) -> Variant:
    """A value switched off (it is set by default)."""
    return Variant(path, {path: value}, f"not .Values.{path}", f".Values.{path}")


@dataclass(frozen=True)
class Table:
    """What the generator varies: the scalar settings, the settings used whole, the variants.
    A sentinel must differ from the default and be unique among them (`_substitute` refuses a
    leaf it cannot explain)."""

    scalars: tuple[Scalar, ...]
    subtrees: tuple[Subtree, ...]
    variants: tuple[Variant, ...]

    def subtree(self, path: str) -> Subtree:
        return next(s for s in self.subtrees if s.path == path)


Combo = frozenset[str]
Literal_ = tuple[str, bool]
"""A variant and whether it is on."""


def set_value(data: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path of a values tree, making the maps on the way."""
    *parents, leaf = path.split(".")
    for key in parents:
        data = data.setdefault(key, {})
    data[leaf] = value


def get_value(data: dict[str, Any], path: str) -> Any:
    """A dotted path of a values tree."""
    for key in path.split("."):
        data = data[key]
    return data


# --- the template tree --------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    """A leaf computed by the template: a Go template pipeline yielding its value."""

    pipeline: str


@dataclass(frozen=True)
class Mark:
    """A Subtree's place in the builder's output. `rest` is what the builder adds around it
    (`merge`: the common labels; `splice`: the gates' tolerations before it; `map`: one item
    with the Subtree's item as `Expr('.')`)."""

    path: str
    rest: Any = None


@dataclass
class Node:
    """One place of the union of every variant's output: where it is present, and either a
    mapping, a sequence or leaves (by variant: a leaf may differ between them)."""

    present: set[Combo] = field(default_factory=set)
    mapping: dict[str, Node] | None = None
    sequence: list[tuple[Any, Node]] | None = None
    leaves: dict[Combo, Any] = field(default_factory=dict)
    orders: list[list[str]] = field(default_factory=list)
    """A sequence's item identities as each variant's build lists them (`_ordered`)."""


def _mark(node: Any, subtrees: dict[str, Any], table: Table) -> Any:
    """Replace each Subtree's value (its D or S value, given in `subtrees`) by a Mark."""
    for sub in table.subtrees:
        value = subtrees.get(sub.path)
        if value is None or value in ({}, []):
            continue
        if sub.kind == "copy" and node == value:
            return Mark(sub.path)
        merged = isinstance(node, dict) and len(node) > len(value)
        if sub.kind == "merge" and merged and value.items() <= node.items():
            return Mark(sub.path, {k: v for k, v in node.items() if k not in value})
        if sub.kind == "map" and isinstance(node, list) and len(node) == 1 == len(value):
            item = _replace_leaf(node[0], value[0])
            if item is not None:
                return Mark(sub.path, item)
        spliced = isinstance(node, list) and len(node) >= len(value)
        if sub.kind == "splice" and spliced and node[len(node) - len(value) :] == value:
            head = node[: len(node) - len(value)]
            return [_mark(v, subtrees, table) for v in head] + [Mark(sub.path, head)]
    if isinstance(node, dict):
        return {k: _mark(v, subtrees, table) for k, v in node.items()}
    if isinstance(node, list):
        return [_mark(v, subtrees, table) for v in node]
    return node


def _replace_leaf(node: Any, leaf: Any) -> Any:
    """`node` with its one leaf equal to `leaf` as `Expr('.')`; None if it has none."""
    if isinstance(node, dict):
        found = {k: _replace_leaf(v, leaf) for k, v in node.items()}
        hits = [k for k, v in found.items() if v is not None]
        if len(hits) != 1:
            return None
        return {k: (found[k] if k in hits else v) for k, v in node.items()}
    return Expr(".") if node == leaf and type(node) is type(leaf) else None


def _expression_for(plain: Any, sentinel: Any, where: str, table: Table) -> Expr:
    """The expression of a leaf that differs between the D and S builds."""
    if isinstance(sentinel, bool) or not isinstance(sentinel, int | str):
        raise ValueError(f"{where}: {sentinel!r} is no sentinel")
    whole = [
        s for s in table.scalars if s.sentinel == sentinel and type(s.sentinel) is type(sentinel)
    ]
    if len(whole) == 1:
        return Expr(whole[0].expression)
    if isinstance(sentinel, str):
        tokens = {str(s.sentinel): s for s in table.scalars if s.in_strings}
        pattern = re.compile("|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True)))
        parts: list[str] = []
        position = 0
        for match in pattern.finditer(sentinel):
            if match.start() > position:
                parts.append(go_string(sentinel[position : match.start()]))
            parts.append(tokens[match.group()].expression)
            position = match.end()
        if parts:
            if position < len(sentinel):
                parts.append(go_string(sentinel[position:]))
            return Expr(f"printf {go_string('%v' * len(parts))} {' '.join(parts)}")
    raise ValueError(f"{where}: {sentinel!r} (plain {plain!r}) is no sentinel")


def _substitute(plain: Any, sentinel: Any, where: str, table: Table) -> Any:
    """The S build with every leaf that differs from the D build as its expression; any other
    difference is a generator error."""
    if isinstance(plain, Mark) and isinstance(sentinel, Mark) and plain.path == sentinel.path:
        if plain.path in {s.path for s in table.subtrees if s.kind == "map"}:
            return sentinel
        return Mark(
            plain.path, _substitute(plain.rest, sentinel.rest, f"{where}<{plain.path}>", table)
        )
    if isinstance(plain, dict) and isinstance(sentinel, dict):
        if plain.keys() != sentinel.keys():
            raise ValueError(f"{where}: a setting changes which keys are present")
        return {k: _substitute(plain[k], v, f"{where}.{k}", table) for k, v in sentinel.items()}
    if isinstance(plain, list) and isinstance(sentinel, list):
        if len(plain) != len(sentinel):
            raise ValueError(f"{where}: a setting changes a list's length")
        return [
            _substitute(p, s, f"{where}[{i}]", table)
            for i, (p, s) in enumerate(zip(plain, sentinel, strict=True))
        ]
    if plain == sentinel and type(plain) is type(sentinel):
        return sentinel
    return _expression_for(plain, sentinel, where, table)


def _identity(item: Any, plain: Any) -> str:
    """How a list item is recognised across variants: an object by kind and name, an item
    with a name by its name, anything else by its value in the D build."""
    if isinstance(plain, dict) and "kind" in plain and "metadata" in plain:
        return f"{plain['kind']}/{plain['metadata']['name']}"
    if isinstance(plain, dict) and isinstance(plain.get("name"), str):
        return f"name={plain['name']}"
    if isinstance(item, Mark):
        return f"mark={item.path}"
    return json.dumps(plain, sort_keys=True, default=repr)


def _merge(node: Node, tree: Any, plain: Any, combo: Combo) -> None:
    """Add one variant's template tree (with its D build, for identities) to the union."""
    node.present.add(combo)
    if isinstance(tree, dict) and tree:
        node.mapping = node.mapping if node.mapping is not None else {}
        for key, value in tree.items():
            child = node.mapping.setdefault(key, Node())
            _merge(child, value, plain[key] if isinstance(plain, dict) else None, combo)
    elif isinstance(tree, list) and tree:
        node.sequence = node.sequence if node.sequence is not None else []
        known = [identity for identity, _ in node.sequence]
        position = 0
        plains = plain if isinstance(plain, list) and len(plain) == len(tree) else tree
        node.orders.append([_identity(i, p) for i, p in zip(tree, plains, strict=True)])
        for item, item_plain in zip(tree, plains, strict=True):
            identity = _identity(item, item_plain)
            if identity in known:
                position = known.index(identity) + 1
                child = node.sequence[known.index(identity)][1]
            else:
                child = Node()
                node.sequence.insert(position, (identity, child))
                known.insert(position, identity)
                position += 1
            _merge(child, item, item_plain, combo)
    else:
        node.leaves[combo] = tree


def _ordered(node: Node, place: str) -> None:
    """Put every sequence's items in an order that keeps each build's: items that no build
    lists together keep their first-seen place (an item a variant adds goes after the item
    before it), but two variants' items that follow the same item stand as the builds with
    both variants list them (the OCI flags after the webhook's, the NodeRules grants before
    the OCI and webhook ones). A build listing two items the other way round from another is
    a generator error."""
    if node.sequence is not None:
        index = {identity: i for i, (identity, _) in enumerate(node.sequence)}
        before: dict[str, set[str]] = {identity: set() for identity in index}
        for order in node.orders:
            for first, then in itertools.pairwise(order):
                if first != then:
                    before[then].add(first)
        placed: list[str] = []
        waiting = sorted(index, key=index.__getitem__)
        while waiting:
            ready = next((i for i in waiting if before[i] <= set(placed)), None)
            if ready is None:
                raise ValueError(f"{place}: the builds list {waiting[0]} in different orders")
            placed.append(ready)
            waiting.remove(ready)
        children = dict(node.sequence)
        node.sequence = [(identity, children[identity]) for identity in placed]
        for identity, child in node.sequence:
            _ordered(child, f"{place}[{identity}]")
    for key, child in (node.mapping or {}).items():
        _ordered(child, f"{place}.{key}")


def _literals(table: Table) -> list[Literal_]:
    return [(v.name, on) for v in table.variants for on in (True, False)]


def _holds(condition: tuple[Literal_, ...], combo: Combo) -> bool:
    return all((name in combo) == on for name, on in condition)


def _condition(
    where: set[Combo], among: set[Combo], place: str, table: Table
) -> tuple[Literal_, ...]:
    """The narrowest conjunction of at most two variants (or their negations) that holds in
    exactly the variants `where` (out of `among`)."""
    if where == among:
        return ()
    literals = _literals(table)
    for size in (1, 2):
        for condition in itertools.combinations(literals, size):
            if len({name for name, _ in condition}) < size:
                continue
            if all(_holds(condition, c) == (c in where) for c in among):
                return condition
    raise ValueError(f"{place}: no condition of one or two variants explains where it appears")


def _template_condition(condition: tuple[Literal_, ...], table: Table) -> str:
    by_name = {v.name: v for v in table.variants}
    parts = [by_name[name].on if on else by_name[name].off for name, on in condition]
    if len(parts) == 1:
        return parts[0]
    return "and " + " ".join(f"({p})" for p in parts)


# --- writing the template -----------------------------------------------------------------------


def go_string(text: str) -> str:
    """A Go string literal (JSON's escapes are Go's)."""
    return json.dumps(text, ensure_ascii=False)


_BARE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./@-]*")


def _scalar(value: Any) -> str:
    """A literal leaf as YAML text; strings Go would read as template actions go through one."""
    if isinstance(value, Expr):
        return f"{{{{ {value.pipeline} | toJson }}}}"
    if isinstance(value, str):
        if "{{" in value or "}}" in value:
            return f"{{{{ {go_string(value)} | toJson }}}}"
        if _BARE.fullmatch(value) and yaml.safe_load(value) == value:
            return value
        return json.dumps(value, ensure_ascii=False)
    if value == {}:
        return "{}"
    if value == []:
        return "[]"
    return json.dumps(value)


def _go_value(value: Any) -> str:
    """A literal or Expr as a Go template argument."""
    if isinstance(value, Expr):
        return f"({value.pipeline})"
    if isinstance(value, str):
        return go_string(value)
    return f"(fromJson {go_string(json.dumps(value))})"


def _leaf_text(node: Node, among: set[Combo], place: str, table: Table) -> str:
    """A leaf; `if`/`else` over its expressions when they differ between variants."""
    combos = [c for c in sorted(node.leaves, key=sorted) if c in among]
    values: dict[str, set[Combo]] = {}
    for combo in combos:
        values.setdefault(_scalar(node.leaves[combo]), set()).add(combo)
    if len(values) == 1:
        return next(iter(values))
    smallest = min(combos, key=lambda c: (len(c), sorted(c)))
    base = next(t for t, cs in values.items() if smallest in cs)
    text = base
    for option, where in values.items():
        if option == base:
            continue
        condition = _template_condition(_condition(where, set(combos), place, table), table)
        text = f"{{{{ if {condition} }}}}{option}{{{{ else }}}}{text}{{{{ end }}}}"
    return text


class _Writer:
    def __init__(self, table: Table) -> None:
        self.table = table
        self.lines: list[str] = []

    def guarded(self, condition: tuple[Literal_, ...]) -> Iterator[None]:
        if condition:
            self.lines.append(f"{{{{- if {_template_condition(condition, self.table)} }}}}")
        yield
        if condition:
            self.lines.append("{{- end }}")


def _mark_lines(mark: Mark, key_line: str, indent: int, table: Table) -> list[str]:
    """A Subtree's template: `key_line` is its key (or list dash) line."""
    pad = " " * indent
    values = f".Values.{mark.path}"
    kind = table.subtree(mark.path).kind
    if kind == "copy":
        return [key_line, f"{pad}{{{{- toYaml {values} | nindent {indent} }}}}"]
    if kind == "merge":
        common = " ".join(f"{go_string(k)} {_go_value(v)}" for k, v in mark.rest.items())
        merged = f"merge (deepCopy {values}) (dict {common})"
        return [key_line, f"{pad}{{{{- toYaml ({merged}) | nindent {indent} }}}}"]
    if kind == "map":
        item = _Writer(table)
        _write_value(item, mark.rest, indent - 2, "- ", ())
        return [key_line, f"{{{{- range {values} }}}}", *item.lines, "{{- end }}"]
    raise ValueError(f"{mark.path}: a {kind} subtree is written by its list")


def _splice_lines(mark: Mark, indent: int) -> list[str]:
    """The items the settings add after the builder's own, repeats dropped (as the builder)."""
    pad = " " * indent
    seen = go_string(json.dumps(mark.rest))
    return [
        f"{{{{- $seen := fromJsonArray {seen} }}}}",
        f"{{{{- range $item := .Values.{mark.path} }}}}",
        "{{- if not (has $item $seen) }}",
        "{{- $seen = append $seen $item }}",
        f"{pad}- {{{{ toJson $item }}}}",
        "{{- end }}",
        "{{- end }}",
    ]


def _write_value(out: _Writer, value: Any, indent: int, lead: str, key: tuple[str, ...]) -> None:
    """A plain template tree (no variants), for a `map` subtree's item."""
    pad = " " * indent
    if isinstance(value, dict):
        first = True
        for k, v in value.items():
            prefix = f"{pad}{lead}" if first else f"{pad}{' ' * len(lead)}"
            out.lines.append(f"{prefix}{k}: {_scalar(v)}")
            first = False
    else:
        out.lines.append(f"{pad}{lead}{_scalar(value)}")


def _write(out: _Writer, node: Node, indent: int, inherited: set[Combo], place: str) -> None:
    """The lines of a mapping or sequence node's children, each guarded by its condition
    relative to `inherited` (where the node itself is present)."""
    pad = " " * indent
    table = out.table
    if node.mapping is not None:
        for key, child in node.mapping.items():
            condition = _condition(child.present & inherited, inherited, f"{place}.{key}", table)
            for _ in out.guarded(condition):
                _write_entry(out, child, f"{pad}{key}:", indent + 2, f"{place}.{key}")
    elif node.sequence is not None:
        for index, (_, child) in enumerate(node.sequence):
            where = f"{place}[{index}]"
            condition = _condition(child.present & inherited, inherited, where, table)
            for _ in out.guarded(condition):
                mark = _only_mark(child)
                if mark is not None and table.subtree(mark.path).kind == "splice":
                    out.lines += _splice_lines(mark, indent)
                elif child.mapping or child.sequence or mark is not None:
                    _write_entry(out, child, f"{pad}-", indent + 2, where)
                else:
                    out.lines.append(f"{pad}- {_leaf_text(child, child.present, where, table)}")


def _only_mark(node: Node) -> Mark | None:
    marks = [v for v in node.leaves.values() if isinstance(v, Mark)]
    if not marks:
        return None
    if len(marks) != len(node.leaves) or len({repr(m) for m in marks}) != 1:
        raise ValueError(f"a subtree changes between variants: {marks[0].path}")
    return marks[0]


def _write_entry(out: _Writer, node: Node, head: str, indent: int, place: str) -> None:
    """A key's (or list item's) value: inline for a leaf, on the following lines otherwise."""
    mark = _only_mark(node)
    if mark is not None:
        out.lines += _mark_lines(mark, head, indent, out.table)
        return
    if not node.mapping and not node.sequence:
        out.lines.append(f"{head} {_leaf_text(node, node.present, place, out.table)}")
        return
    start = len(out.lines)
    _write(out, node, indent, node.present, place)
    first = out.lines[start] if len(out.lines) > start else ""
    if head.endswith("-") and first.startswith(" " * indent) and not first.startswith("{{"):
        out.lines[start] = f"{head} {first[indent:]}"  # `- key: value` on the dash's line
    else:
        out.lines.insert(start, head)


# --- the builds ---------------------------------------------------------------------------------


Build = Callable[[dict[str, Any]], Sequence[Mapping[str, Any]] | None]
"""The builder: its objects for some values, None for values it refuses (a combination of
variants the settings do not allow). A leaf may already be an `Expr`, for a value the chart
passes on whole."""


def _combos(table: Table) -> list[Combo]:
    names = [v.name for v in table.variants]
    combos = [frozenset(), *(frozenset({n}) for n in names)]
    combos += [frozenset(pair) for pair in itertools.combinations(names, 2)]
    return combos


def _plain_values(combo: Combo, base: dict[str, Any], table: Table) -> dict[str, Any]:
    values = copy.deepcopy(base)
    for sub in table.subtrees:
        if not sub.optional:
            set_value(values, sub.path, copy.deepcopy(sub.plain))
    for variant in table.variants:
        if variant.name in combo:
            for path, value in variant.patch.items():
                set_value(values, path, copy.deepcopy(value))
    return values


def _sentinel_values(plain: dict[str, Any], table: Table) -> dict[str, Any]:
    values = copy.deepcopy(plain)
    for scalar in table.scalars:
        if get_value(plain, scalar.path) not in ("", None):
            set_value(values, scalar.path, scalar.sentinel)
    for sub in table.subtrees:
        if get_value(plain, sub.path) not in ({}, [], None):
            set_value(values, sub.path, copy.deepcopy(sub.sentinel))
    return values


def _subtree_values(values: dict[str, Any], table: Table) -> dict[str, Any]:
    found = {}
    for sub in table.subtrees:
        value = get_value(values, sub.path)
        found[sub.path] = sub.as_built(value) if sub.as_built is not None else value
    return found


def infer_templates(table: Table, base: dict[str, Any], build: Build) -> dict[str, str]:
    """One template per object the builder can make, in the builder's order, by the object's
    identity (`Kind/name`). `base` is the values every build starts from (every required value
    given)."""
    root = Node()
    for combo in _combos(table):
        plain_values = _plain_values(combo, base, table)
        plain = build(plain_values)
        if plain is None:
            continue
        sentinel_values = _sentinel_values(plain_values, table)
        sentinel = build(sentinel_values)
        assert sentinel is not None, f"the sentinels are refused under {sorted(combo)}"
        plain_marked = _mark(list(plain), _subtree_values(plain_values, table), table)
        sentinel_marked = _mark(list(sentinel), _subtree_values(sentinel_values, table), table)
        tree = _substitute(plain_marked, sentinel_marked, "objects", table)
        _merge(root, tree, plain_marked, combo)
    assert root.sequence is not None
    for identity, node in root.sequence:
        # Within each object; the objects keep their first-seen order (it only names the
        # template files, and helm orders what it applies by kind).
        _ordered(node, identity)
    templates: dict[str, str] = {}
    for identity, node in root.sequence:
        out = _Writer(table)
        condition = _condition(node.present, root.present, identity, table)
        for _ in out.guarded(condition):
            _write(out, node, 0, node.present, identity)
        templates[identity] = "\n".join(out.lines) + "\n"
    return templates
