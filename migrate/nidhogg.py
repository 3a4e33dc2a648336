"""nidhogg (github.com/uswitch/nidhogg, and the fork that maintains it, github.com/pelotech/
nidhogg): its config file, YAML or JSON, as `nodeAgents` rules, one per DaemonSet.

What nidhogg does, read from its source (uswitch at 6196db5: README.md, pkg/nidhogg/handler.go,
decoder.go, pkg/controller/node/node_controller.go; pelotech at a877a4d: docs/README.md, the
same files, charts/nidhogg/values.yaml): the config is read with gopkg.in/yaml.v1 into
`daemonsets` ([{name, namespace}]) and `nodeSelector` (a list of label selector strings, each
parsed by apimachinery's `labels.Parse`; a selector that does not parse stops it at start). A
value of the wrong type, such as a single string or the mapping of labels nidhogg read before
uswitch#26, is dropped without a word, and so are unknown keys. For every node the selector
matches and every DaemonSet it adds `nidhogg.uswitch.com/<namespace>.<name>:NoSchedule` at once
whenever the node has no Ready pod of that DaemonSet (pods and nodes are watched, there is no
grace period), removes it once there is one, and removes any other taint under its prefix.
uswitch ANDs the selector strings; with none it selects every node. pelotech (v0.6.0, #33)
keeps only the last string (`BuildSelectors` replaces the selector for each one), and with none
uses each DaemonSet's own `spec.template.spec.nodeSelector` (its chart's default: no
nodeSelector), read from the cluster at every node's reconcile and matched label for label
(`labels.SelectorFromSet`: none selects every node; a DaemonSet it cannot read, no node); it
adds `taintNamePrefix`, `taintEffect` (NoSchedule, PreferNoSchedule or NoExecute; anything else
silently NoSchedule) and `taintRemovalDelayInSeconds`, a sleep in its one worker before each
removal. Both annotate a node the first time it carries none of their taints, with the time as
`2006-01-02T15:04:05Z` (uswitch: `nidhogg.uswitch.com/first-time-ready`; pelotech:
`<taintNamePrefix>/ready-since`), and never change it.

The DaemonSets' nodeSelectors come from `--daemon-sets` files (`kubectl get ds -A -o yaml`,
manifests): one rule per DaemonSet then matches what its nodeSelector selects.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from nodegate.core.rules.model import TAINT_EFFECTS, DaemonSetRef
from nodegate.core.text.errors import DocPath, Problem, RulesError
from nodegate.core.text.k8s_names import qualified_name_problem
from nodegate.core.text.yaml_input import read_yaml
from nodegate.migrate.conversion import (
    Conversion,
    Found,
    Place,
    YamlFile,
    as_text,
    rule_name,
    rules_document,
)
from nodegate.migrate.defaults import HOLD
from nodegate.migrate.label_selector import Requirement, SelectorSyntaxError, parse_selector

COMMAND: Final = "nodegate migrate nidhogg"
TAINT_PREFIX: Final = "nidhogg.uswitch.com"
"""nidhogg's taint key prefix (pelotech: `taintNamePrefix`, this when not given)."""
DEFAULT_EFFECT: Final = "NoSchedule"
_NODE_SELECTOR: Final = ("spec", "template", "spec", "nodeSelector")
KEYS: Final = (
    "daemonsets",
    "nodeSelector",
    "taintNamePrefix",
    "taintEffect",
    "taintRemovalDelayInSeconds",
)
_DAEMON_SET_KEYS: Final = ("name", "namespace")
_ENTRY: Final = "{name: kiam, namespace: kube-system}"
_EXAMPLE: Final = f"daemonsets: [{_ENTRY}]"
_OPERATORS: Final = {"exists": "Exists", "!": "DoesNotExist", "in": "In", "notin": "NotIn"}
READY_ANNOTATIONS: Final = {
    "pelotech": "{prefix}/ready-since",
    "uswitch": f"{TAINT_PREFIX}/first-time-ready",
}
"""`--ready-annotation`: nidhogg's annotation of a node's first time without its taints, by
fork (pelotech's under its taintNamePrefix; uswitch's key was fixed)."""
_DAEMON_SETS_FLAG: Final = "--daemon-sets <(kubectl get ds -A -o yaml)"


@dataclass(frozen=True)
class _Nodes:
    """The nodes nidhogg's selector meant: the rules' `match` (None: every node), the selector
    string each match entry came from, and what to tell about it."""

    match: dict[str, Any] | None = None
    places: dict[DocPath, DocPath] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    own: bool = False
    """Each DaemonSet's own nodeSelector (pelotech without nodeSelector): `match` is unused."""


@dataclass(frozen=True)
class _Selector:
    """A DaemonSet's `spec.template.spec.nodeSelector` in a `--daemon-sets` file, and where."""

    labels: Mapping[str, str] | None
    """None: not node labels (a problem says so at `place`)."""
    place: Place


def convert_nidhogg(
    text: str | bytes,
    source: str,
    hold: str = HOLD,
    every_node: bool = False,
    daemon_sets: Sequence[YamlFile] | None = None,
    ready_annotation: str | None = None,
) -> Conversion:
    """nidhogg's config file as rules; RulesError naming the file's line if it is not YAML or
    JSON. `hold`: the rules' `for`; what a config without nodeSelector means: every node
    (`every_node`, uswitch), or each DaemonSet's own nodeSelector as `daemon_sets` give it
    (pelotech); `ready_annotation`: which fork's first-ready annotation the rules write."""
    config, positions = read_yaml(text, source)
    return convert_nidhogg_config(
        config, Place(source, (), positions), hold, every_node, daemon_sets, ready_annotation
    )


def convert_nidhogg_config(
    config: object,
    top: Place,
    hold: str = HOLD,
    every_node: bool = False,
    daemon_sets: Sequence[YamlFile] | None = None,
    ready_annotation: str | None = None,
) -> Conversion:
    """nidhogg's config, already read, as rules: problems at `top`'s file and lines."""
    found = Found(top)
    if not isinstance(config, dict):
        found.add(
            (),
            f"expected nidhogg's config, a mapping such as {{{_EXAMPLE}, nodeSelector: "
            f"['node-role.kubernetes.io/node']}}, found {_kind(config)}",
        )
        raise RulesError(found.problems)
    for key in config:
        if key not in KEYS:
            found.add((str(key),), _unknown(str(key), KEYS, "nidhogg's config"))
    prefix = _prefix(config, found)
    effect = _effect(config, found)
    delay = _delay(config, found)
    nodes = _nodes(config, found, every_node, daemon_sets is not None)
    selectors = _node_selectors(daemon_sets or (), found) if nodes.own else {}
    annotation = _ready_annotation(ready_annotation, prefix, found)
    agents: list[dict[str, Any]] = []
    places: dict[DocPath, DocPath | Place] = {}
    for index, namespace, name in _daemon_sets(config, found, prefix):
        at: DocPath = ("nodeAgents", len(agents))
        rule: dict[str, Any] = {
            "name": rule_name(f"{namespace}-{name}", [a["name"] for a in agents])
        }
        if nodes.own:
            own = selectors.get((namespace, name))
            if own is None:
                found.add(("daemonsets", index), _not_in_files(namespace, name, daemon_sets))
                continue
            if own.labels is None:
                continue
            if own.labels:  # none: `labels.SelectorFromSet` of nothing selects every node
                rule["match"] = {"labels": dict(own.labels)}
                places[(*at, "match")] = own.place  # the DaemonSet's nodeSelector, label by label
                places.update({(*at, "match", "labels", k): own.place.at(k) for k in own.labels})
        elif nodes.match is not None:
            rule["match"] = copy.deepcopy(nodes.match)
        rule["daemonSets"] = [{"namespace": namespace, "name": name}]
        rule["taint"] = {"key": _taint_key(prefix, namespace, name), "effect": effect}
        rule["mode"] = "continuous"
        rule["for"] = hold
        if annotation is not None:
            rule["firstReadyAnnotation"] = annotation
        agents.append(rule)
        places.update(_places(at, found, index, config))
        places.update(
            {(*at, *path): found.top.at(*setting) for path, setting in nodes.places.items()}
        )
    flags = [f"--for {hold}"] if hold != HOLD else []
    flags += ["--every-node"] if every_node else []
    flags += [f"--daemon-sets {f.source}" for f in daemon_sets or ()]
    flags += [f"--ready-annotation {ready_annotation}"] if ready_annotation else []
    return Conversion(
        command=" ".join([COMMAND, *flags]),
        source=top.source,
        rules=rules_document(nodeAgents=agents),
        notes=_notes(agents, prefix, effect, delay, hold, nodes, annotation),
        places=places,
        problems=tuple(found.problems),
        webhook={"failurePolicy": "Ignore"},
    )


# --- reading -----------------------------------------------------------------------------------


def _prefix(config: dict[str, Any], found: Found) -> str:
    prefix = config.get("taintNamePrefix")
    if prefix in (None, ""):  # pelotech: empty means its default
        return TAINT_PREFIX
    if not isinstance(prefix, str):
        found.add(("taintNamePrefix",), f"must be a string such as '{TAINT_PREFIX}'")
        return TAINT_PREFIX
    problem = qualified_name_problem(f"{prefix}/name")  # whatever the DaemonSet
    if problem is not None:
        found.add(
            ("taintNamePrefix",),
            f"'{prefix}' makes taint keys '{prefix}/<namespace>.<name>' that the API server "
            f"refuses ({problem}), so nidhogg never tainted a node with it: give a DNS "
            f"subdomain such as '{TAINT_PREFIX}'",
        )
    return prefix


def _effect(config: dict[str, Any], found: Found) -> str:
    effect = config.get("taintEffect")
    if effect in (None, ""):
        return DEFAULT_EFFECT
    if effect not in TAINT_EFFECTS:
        close = difflib.get_close_matches(str(effect), TAINT_EFFECTS, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        found.add(
            ("taintEffect",),
            f"{effect!r} is not a taint effect: use one of {', '.join(TAINT_EFFECTS)} "
            f"(pelotech's nidhogg silently used {DEFAULT_EFFECT} for it){hint}",
        )
        return DEFAULT_EFFECT
    return str(effect)


def _delay(config: dict[str, Any], found: Found) -> int:
    delay = config.get("taintRemovalDelayInSeconds", 0)
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        found.add(
            ("taintRemovalDelayInSeconds",),
            f"{delay!r} is not a number of seconds: write a whole number such as 10 "
            "(pelotech's nidhogg silently read 0 for it)",
        )
        return 0
    return delay


def _daemon_sets(config: dict[str, Any], found: Found, prefix: str) -> list[tuple[int, str, str]]:
    """(index, namespace, name) of each DaemonSet nidhogg watched, each once, with a valid
    taint key; a problem for every other entry."""
    entries = config.get("daemonsets")
    if entries is None or entries == []:
        found.add(
            ("daemonsets",),
            f"no daemonsets: nidhogg watched no DaemonSet and tainted no node; list the "
            f"DaemonSets the nodes wait for, e.g. {_EXAMPLE}",
        )
        return []
    if not isinstance(entries, list):
        found.add(("daemonsets",), f"must be a list of {{name, namespace}}, e.g. {_EXAMPLE}")
        return []
    read: list[tuple[int, str, str]] = []
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(entries):
        at: DocPath = ("daemonsets", index)
        if not isinstance(entry, dict):
            found.add(at, f"must be a mapping {{name, namespace}}, found {_kind(entry)}")
            continue
        for key in entry:
            if key not in _DAEMON_SET_KEYS:
                found.add((*at, str(key)), _unknown(str(key), _DAEMON_SET_KEYS, "a daemonset"))
        before = len(found.problems)
        for key in ("namespace", "name"):
            value = entry.get(key)
            if value is None or value == "":
                found.add((*at, key), f"every daemonset needs its {key}, e.g. {_ENTRY}")
            elif isinstance(value, dict | list):
                found.add((*at, key), f"must be a string, found {_kind(value)}")
        if len(found.problems) > before:
            continue
        namespace, name = str(as_text(entry["namespace"])), str(as_text(entry["name"]))
        if not _named_as_kubernetes_names(namespace, name, at, found):
            continue
        if (namespace, name) in seen:
            found.add(at, f"{namespace}/{name} is listed twice (one taint, one rule); list it once")
            continue
        seen.add((namespace, name))
        key = _taint_key(prefix, namespace, name)
        problem = qualified_name_problem(key)
        if problem is not None:
            if qualified_name_problem(f"{prefix}/name") is None:  # else said at the prefix
                found.add(
                    at,
                    f"nidhogg's taint for it, '{key}', is not a valid taint key ({problem}): the "
                    "API server refused it, so nidhogg never tainted a node for this DaemonSet; "
                    "write its nodeAgents rule by hand, with a key of your own",
                )
            continue
        read.append((index, namespace, name))
    return read


_NAME_RULES: Final = {
    "namespace": "a DNS label: at most 63 lower-case letters, digits and '-'",
    "name": "a DNS subdomain: lower-case letters, digits, '-' and '.'",
}


def _named_as_kubernetes_names(namespace: str, name: str, at: DocPath, found: Found) -> bool:
    """Whether a DaemonSet could have this namespace and name (checked by the rules model's own
    DaemonSetRef); a problem for each that it could not."""
    try:
        DaemonSetRef.model_validate({"namespace": namespace, "name": name})
    # Permanent: a name no DaemonSet can have; said in nidhogg's terms rather than as a pattern.
    except ValidationError as err:
        for field in sorted({str(e["loc"][0]) for e in err.errors()}):
            value = namespace if field == "namespace" else name
            found.add(
                (*at, field),
                f"{value!r} cannot be a DaemonSet's {field} ({_NAME_RULES[field]}), so no pod "
                "ever matched it and nidhogg kept its taint on every node it selects: give the "
                f"{field} `kubectl get daemonsets -A` shows",
            )
        return False
    return True


def _nodes(config: dict[str, Any], found: Found, every_node: bool, own: bool) -> _Nodes:
    selector = config.get("nodeSelector")
    # yaml.v1 leaves a list field nil for `[]`, and for a mapping (dropped): as if absent.
    absent = selector is None or selector in ([], {})
    for flag, given in (("--every-node", every_node), ("--daemon-sets", own)):
        if given and not absent:
            found.add(
                ("nodeSelector",),
                f"{flag} is for a config without nodeSelector; this one has one: drop the flag",
            )
    if absent:
        if every_node and own:
            found.add(
                ("nodeSelector",),
                "--every-node (uswitch: every node) and --daemon-sets (pelotech: each "
                "DaemonSet's own nodeSelector) say two things: give the one for your nidhogg",
            )
        elif not (every_node or own):
            found.add(
                ("nodeSelector",),
                "no nodeSelector: pelotech's nidhogg (v0.6.0 on, its Helm chart's default) "
                "then taints, for each DaemonSet, the nodes its own "
                "spec.template.spec.nodeSelector selects, read from the cluster, which this "
                f"file does not hold: give the DaemonSets, {_DAEMON_SETS_FLAG}; uswitch's "
                "nidhogg tainted every node: --every-node",
            )
        if own:
            return _Nodes(notes=(_OWN_SELECTORS,), own=True)
        return _Nodes(notes=(_EVERY_NODE,) if every_node else ())
    if isinstance(selector, dict):
        return _labels(selector)
    if isinstance(selector, str):
        return _strings([selector], found, scalar=True)
    if isinstance(selector, list):
        return _strings(selector, found, scalar=False)
    found.add(
        ("nodeSelector",),
        "must be a list of label selector strings, e.g. ['node-role.kubernetes.io/node', "
        "'!node-role.kubernetes.io/master']",
    )
    return _Nodes()


def _node_selectors(files: Sequence[YamlFile], found: Found) -> dict[tuple[str, str], _Selector]:
    """(namespace, name) -> the nodeSelector of each DaemonSet in the files (a List's items
    too; no namespace: `default`, as `kubectl apply` reads a manifest). A DaemonSet given twice
    must say the same both times."""
    selectors: dict[tuple[str, str], _Selector] = {}
    for daemon_set_file in files:
        several = len(daemon_set_file.documents) > 1
        for number, (document, positions) in enumerate(daemon_set_file.documents):
            prefix: DocPath = ("document", number) if several else ()
            items = document.get("items") if isinstance(document, dict) else None
            listed = isinstance(items, list)
            for index, item in enumerate(items if isinstance(items, list) else [document]):
                if not (isinstance(item, dict) and item.get("kind") == "DaemonSet"):
                    continue
                meta = item.get("metadata")
                meta = meta if isinstance(meta, dict) else {}
                name, namespace = meta.get("name"), meta.get("namespace") or "default"
                if not (isinstance(name, str) and isinstance(namespace, str)):
                    continue
                at: DocPath = ("items", index) if listed else ()
                place = Place(daemon_set_file.source, (*at, *_NODE_SELECTOR), positions, prefix)
                selector: object = item
                for key in _NODE_SELECTOR:
                    selector = selector.get(key) if isinstance(selector, dict) else None
                labels = _selector_labels(selector, found.under(place))
                first = selectors.setdefault((namespace, name), _Selector(labels, place))
                if first.labels != labels:
                    found.under(place).add(
                        (),
                        f"{namespace}/{name} is given again with another nodeSelector than in "
                        f"{first.place.source}: give each DaemonSet once, as the cluster has it",
                    )
    return selectors


def _selector_labels(selector: object, found: Found) -> dict[str, str] | None:
    """A DaemonSet's nodeSelector as labels (none: {}), or None after a problem at `found`'s
    top."""
    if selector is None:
        return {}
    if isinstance(selector, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in selector.items()
    ):
        return dict(selector)
    found.add(
        (),
        "must be a mapping of node labels to their values, all strings (the API server refuses "
        "a DaemonSet with any other): quote a value such as 'true'",
    )
    return None


def _not_in_files(namespace: str, name: str, files: Sequence[YamlFile] | None) -> str:
    given = ", ".join(f.source for f in files or ()) or "none"
    return (
        f"{namespace}/{name} is not in the --daemon-sets files ({given}): pelotech's nidhogg "
        "reads its nodeSelector from the cluster, and tainted no node for it while it could "
        f"not: give the file that holds it ({_DAEMON_SETS_FLAG}), or drop it from daemonsets"
    )


def _ready_annotation(fork: str | None, prefix: str, found: Found) -> str | None:
    """The key of nidhogg's first-ready annotation, for `--ready-annotation FORK`."""
    if fork is None:
        return None
    key = READY_ANNOTATIONS.get(fork)
    if key is None:
        message = (
            f"'{fork}' is not a nidhogg: give pelotech (<taintNamePrefix>/ready-since) or "
            f"uswitch ({READY_ANNOTATIONS['uswitch']})"
        )
        found.problems.append(Problem(0, 0, found.top.source, ("--ready-annotation",), message))
        return None
    return key.format(prefix=prefix)


def _labels(selector: dict[str, Any]) -> _Nodes:
    """The mapping of labels nidhogg read before uswitch#26 (2020): each label equal."""
    labels = {str(k): as_text(v) for k, v in selector.items()}
    places: dict[DocPath, DocPath] = {("match", "labels", k): ("nodeSelector", k) for k in labels}
    places[("match",)] = ("nodeSelector",)
    note = (
        "nodeSelector is a mapping of labels, nidhogg's format before uswitch#26 (2020); "
        "since then nidhogg reads a list of selector strings and silently dropped this mapping, "
        "so it tainted every node (pelotech: the nodes of each DaemonSet's own nodeSelector). "
        "These rules match the labels as written, as nidhogg did before #26; nodes outside "
        "them lose nidhogg's taint."
    )
    return _Nodes({"labels": labels}, places, (note,))


def _strings(strings: list[Any], found: Found, *, scalar: bool) -> _Nodes:
    """The selector strings, ANDed: every requirement of every string."""
    labels: dict[str, Any] = {}
    expressions: list[dict[str, Any]] = []
    places: dict[DocPath, DocPath] = {("match",): ("nodeSelector",)}
    for index, text in enumerate(strings):
        at: DocPath = ("nodeSelector",) if scalar else ("nodeSelector", index)
        if isinstance(text, dict | list) or text is None:
            found.add(at, f"must be a label selector string, found {_kind(text)}")
            continue
        try:
            requirements = parse_selector(str(as_text(text)))
        except SelectorSyntaxError as err:
            found.add(
                at,
                f"{str(as_text(text))!r} is not a label selector ({err}), so nidhogg refused to "
                "start with it: write requirements such as 'key', '!key', 'key=value', "
                "'key!=value', 'key in (a, b)', 'key notin (a, b)', separated by commas",
            )
            continue
        for requirement in requirements:
            if requirement.operator in (">", "<"):
                found.add(
                    at,
                    f"'{requirement.key} {requirement.operator} {requirement.values[0]}': a "
                    "nodegate match has no > or < (In, NotIn, Exists, DoesNotExist): list the "
                    "values it allows with 'in (...)'",
                )
            elif requirement.operator in ("=", "==") and requirement.key not in labels:
                labels[requirement.key] = requirement.values[0]
                places[("match", "labels", requirement.key)] = at
            else:
                expression = _expression(requirement)
                if expression not in expressions:
                    places[("match", "expressions", len(expressions))] = at
                    expressions.append(expression)
    match: dict[str, Any] = {}
    if labels:
        match["labels"] = labels
    if expressions:
        match["expressions"] = expressions
    notes: list[str] = []
    if scalar:
        notes.append(
            "nodeSelector is a single string here (as in uswitch's README): nidhogg reads a "
            "list and silently dropped it, so it tainted every node (pelotech: the nodes of "
            "each DaemonSet's own nodeSelector). These rules apply the selector as written; "
            "nodes outside it lose nidhogg's taint."
        )
    if len(strings) > 1:
        notes.append(
            "nodeSelector's strings are ANDed, as nidhogg's README says and uswitch's nidhogg "
            "did. pelotech's fork from v0.6.0 applied only the last one (its BuildSelectors "
            "replaces the selector for each string), so if you ran it, it tainted nodes the "
            "other strings exclude, and those lose the taint now; to keep what it did, keep "
            "only the last string."
        )
    return _Nodes(match or None, places, tuple(notes))


def _expression(requirement: Requirement) -> dict[str, Any]:
    """A requirement as a match expression; `k != v` is NotIn [v], which matches a node
    without k too, as in Kubernetes; `k = v` when k already has a value here is In [v]."""
    if requirement.operator in ("!=", "=", "=="):
        operator = "NotIn" if requirement.operator == "!=" else "In"
        return {"key": requirement.key, "operator": operator, "values": list(requirement.values)}
    expression: dict[str, Any] = {
        "key": requirement.key,
        "operator": _OPERATORS[requirement.operator],
    }
    if requirement.values:
        expression["values"] = list(requirement.values)
    return expression


def _taint_key(prefix: str, namespace: str, name: str) -> str:
    return f"{prefix}/{namespace}.{name}"


def _places(
    at: DocPath, found: Found, index: int, config: dict[str, Any]
) -> dict[DocPath, DocPath | Place]:
    """Each generated field -> the config setting it came from."""
    entry = ("daemonsets", index)
    taint = ("taintNamePrefix",) if config.get("taintNamePrefix") else entry
    return {
        at: found.top.at(*entry),
        (*at, "name"): found.top.at(*entry),
        (*at, "daemonSets"): found.top.at(*entry),
        (*at, "daemonSets", 0): found.top.at(*entry),
        (*at, "daemonSets", 0, "name"): found.top.at(*entry, "name"),
        (*at, "daemonSets", 0, "namespace"): found.top.at(*entry, "namespace"),
        (*at, "taint"): found.top.at(*taint),
        (*at, "taint", "key"): found.top.at(*taint),
        (*at, "taint", "effect"): found.top.at("taintEffect"),
        (*at, "for"): ("--for",),
    }


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "a string" if isinstance(value, str) else type(value).__name__


def _unknown(key: str, known: Sequence[str], where: str) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return (
        f"'{key}' is not a key of {where} ({', '.join(known)}); nidhogg silently ignored it: "
        f"{hint}fix or remove it"
    )


# --- notes -------------------------------------------------------------------------------------

_EVERY_NODE = (
    "No nodeSelector, --every-node: the rules match every node, as uswitch's nidhogg did. "
    "pelotech's fork instead tainted only the nodes of each DaemonSet's own nodeSelector: for "
    f"that, run with {_DAEMON_SETS_FLAG} instead of --every-node."
)
_OWN_SELECTORS = (
    "No nodeSelector, --daemon-sets: as pelotech's nidhogg (v0.6.0 on, its Helm chart's "
    "default), each DaemonSet's taint goes only on the nodes its own "
    "spec.template.spec.nodeSelector selects: its rule's match is that nodeSelector as the "
    "--daemon-sets files give it (none: every node). nidhogg read it from the cluster at every "
    "reconcile; the rules hold a copy, so when a DaemonSet's nodeSelector changes, run this "
    "again. nidhogg read nothing else of where the DaemonSet runs: a node its nodeSelector "
    "selects but its required node affinity or a taint keeps its pod from, nidhogg tainted for "
    "ever; nodegate does not wait there for a pod the DaemonSet controller will not make "
    "(cannotRun: skip, the default; docs/agents.md)."
)


def _notes(
    agents: Sequence[dict[str, Any]],
    prefix: str,
    effect: str,
    delay: int,
    hold: str,
    nodes: _Nodes,
    annotation: str | None,
) -> tuple[str, ...]:
    example = agents[0]["taint"]["key"] if agents else f"{prefix}/<namespace>.<name>"
    notes = [
        f"One rule per DaemonSet, each with nidhogg's own taint ({prefix}/<namespace>.<name>:"
        f"{effect}): a nodeAgents rule has one taint for all the DaemonSets it lists, nidhogg "
        "had one per DaemonSet. nodegate takes over the taints nidhogg put on nodes and lifts "
        "them, and tolerations of them keep working.",
        _hold_note(hold),
        "Born tainted: nidhogg tainted a node only after it registered, a window in which pods "
        "could be scheduled there (its issue #24 reports one). nodegate gives matching nodes "
        "the taint at registration: the Node admission webhook (the settings above), `nodegate "
        "render` for the pools under nodePools, or Karpenter's startupTaints.",
        f"Each DaemonSet must tolerate its own taint (e.g. tolerations: [{{key: {example}, "
        "operator: Exists}]), or its pod is never made on a node born with it and the taint "
        "stays for ever; under nidhogg the first pod usually landed before the taint, but a "
        "replaced one did not. Check before the switch: `nodegate validate rules.yaml "
        "--daemon-sets <(kubectl get ds -A -o yaml)`. nidhogg's README asks the same toleration "
        "of every pod that should run on a tainted node.",
        *nodes.notes,
    ]
    if len(agents) > 1:
        notes.append(
            "Several DaemonSets: a node is born with the taint of every rule that matches it, "
            "and the DaemonSet controller makes no pod of a DaemonSet that does not tolerate "
            "them all; under nidhogg, whose taints came after the first pods, it did. Give each "
            "DaemonSet a toleration of every one of these taints its nodes can carry (as "
            "nidhogg's README asks of every pod that should run on a tainted node)."
        )
    if effect == "NoExecute":
        notes.append(
            "taintEffect NoExecute: every time the taint comes back, the pods on the node that do "
            "not tolerate it are evicted, as under nidhogg; nodegate charges such taints to its "
            "eviction budget (by default at most 20% of the nodes per 5 minutes)."
        )
    if delay:
        notes.append(
            f"taintRemovalDelayInSeconds: {delay} has no counterpart: nodegate lifts the taint "
            "as soon as the pod is Ready. (nidhogg slept that long in its only worker before "
            "each removal, holding up every other node meanwhile.) If the agent is Ready before "
            "it serves, make its readinessProbe say when it does."
        )
    notes.append(
        "Ready: one pod on the node that the DaemonSet owns (by uid), Ready (PodReady and every "
        "container), not terminating, Ready since the Node was created. uswitch's nidhogg "
        "matched pods by their owner's name alone and took one whose containers had not "
        "reported yet as ready; pelotech's wanted every pod of the DaemonSet on the node Ready."
    )
    notes.append(
        f"nidhogg also removed every {prefix}/ taint its config did not name (left by an earlier "
        "config); nodegate removes only its rules' taints."
    )
    notes.append(_annotation_note(prefix, annotation))
    return tuple(notes)


def _annotation_note(prefix: str, annotation: str | None) -> str:
    if annotation is None:
        return (
            "nidhogg annotated a node with its first time without its taints "
            f"({READY_ANNOTATIONS['uswitch']}; pelotech: {prefix}/ready-since); these rules "
            "write no such annotation (Events and metrics instead): if something reads it, run "
            "with --ready-annotation pelotech (or uswitch)."
        )
    return (
        f"firstReadyAnnotation: {annotation} is written, as nidhogg wrote it, the first time "
        "the node carries none of these rules' taints (every rule decided: its agents Ready, or "
        "the node not matched), with the time as 2006-01-02T15:04:05Z (UTC), and never changed. "
        f"nidhogg counted any {prefix}/ taint, these rules' only."
    )


def _hold_note(hold: str) -> str:
    if hold == HOLD:
        return (
            f"for: {HOLD}, as nidhogg: the taint comes back the moment a DaemonSet's pod on the "
            "node is not Ready, so every rollout of the DaemonSet takes each node out of "
            "scheduling while its pod is replaced, and a node that joins without the taint gets "
            "it at once. nodegate's default, for: 2m (--for 2m, or delete the line), rides out "
            "a rolling update, but lets pods be scheduled for up to 2 minutes onto a node whose "
            "agent has failed, or has joined without the taint (so have nodes born with it)."
        )
    return (
        f"for: {hold} (--for): the taint comes back once a DaemonSet's pod on the node has not "
        "been Ready that long, where nidhogg put it back at once; a node that joins without the "
        "taint gets it after that long too, so have nodes born with it (Born tainted)."
    )
