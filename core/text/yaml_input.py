"""The one front door for YAML that nodegate did not write: bytes or text in, plain data out.

Every source of rules (a file for `nodegate validate`/`render`/`explain`, the reconciler's
ConfigMap or mounted file, the Pulumi stack) and every node file `nodegate explain` reads comes
through `read_yaml`, so hostile input is refused the same way everywhere, as `RulesError`
problems naming the source, line, column and the fix, within bounded memory and time:

* size: at most `MAX_BYTES`, checked before anything is decoded;
* encoding: UTF-8 only; a UTF-8 byte-order mark is accepted and dropped (YAML allows one and
  Windows editors write it), UTF-16/32 and bytes that are not UTF-8 are refused at their line;
* control characters YAML does not allow, refused at their line before the parser sees them;
* nesting deeper than `MAX_DEPTH` and documents that would expand past `MAX_NODES` values
  (aliases count every time they are used), refused by the composer *as it builds* the node
  graph: an alias bomb stops at the alias that crosses the bound, before anything is expanded;
* every ruamel.yaml error (reader, scanner, parser, composer, constructor) at its mark;
* a key repeated in a mapping, at the repetition, with its path. It is the one refusal the
  reader can go on past (the first entry is kept): a caller that checks the document further
  (the rules loader) asks for `keep_going` and lists it with the problems found after it;
  every other refusal stops the reading, so it comes alone.

ruamel.yaml has a depth bound (`max_depth`) but no bound on alias expansion, and its depth does
not follow aliases (an alias to a deep anchor nests it again), hence the small composer below.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer
from ruamel.yaml.constructor import DuplicateKeyError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.reader import Reader, ReaderError

from nodegate.core.text.errors import DocPath, Problem, RulesError

_T = TypeVar("_T")
_Written = dict[tuple[int, int], str]
"""The text of plain scalars read as another type than a string, by 0-based (line, column)."""


class Positions(dict[DocPath, tuple[int, int]]):
    """Where each key or list item of a document stood: 1-based (line, column) by document path.

    `written` holds the text of each plain scalar YAML read as another type than a string (a
    number, a boolean, null), by the path pydantic reports it at (a key's path ends with
    "[key]"), so a message can say to quote what the author wrote: `012` is read as 12, and
    quoting "12" would give another label value than the "012" they meant."""

    def __init__(self, *args: Any, written: dict[DocPath, str] | None = None) -> None:
        super().__init__(*args)
        self.written: dict[DocPath, str] = written if written is not None else {}
        self.problems: tuple[Problem, ...] = ()
        """What `read_yaml(..., keep_going=True)` refused and went on past (repeated keys),
        for the caller to report with the problems it finds itself."""


MAX_BYTES = 1024 * 1024
"""1 MiB: the most a ConfigMap can hold, so the most the reconciler can ever be given. A rules
file of a thousand label taints is about 240 KB."""

MAX_DEPTH = 32
"""Nesting levels (the document is level 1). The deepest a valid rules file goes is 9
(`startupGates[].readyWhen.pods.selector...`), a kubectl Node about 10; 32 leaves room for
any hand-written file and keeps every recursive step (composer, constructor, validation) far
below Python's recursion limit."""

MAX_NODES = 50_000
"""Values (keys, scalars, lists, mappings) in the document once aliases are expanded. A label
taint rule is about 24, so a thousand rules is 24,000; the bound is twice that. It also bounds
memory: 50,000 values cost ruamel.yaml about 50 MB, which fits the reconciler's 256 MiB."""

_UTF16_32_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as ruamel.yaml counts lines (YAML 1.2)


def read_limited(path: str | Path) -> bytes:
    """A file's bytes, never more than one byte past `MAX_BYTES` (so /dev/zero cannot fill
    memory); `read_yaml` refuses the rest. OSError is the caller's to report."""
    with Path(path).open("rb") as stream:
        return stream.read(MAX_BYTES + 1)


def read_yaml(data: str | bytes, source: str, *, keep_going: bool = False) -> tuple[Any, Positions]:
    """One YAML (or JSON) document as plain data with the position of every key and item.

    `data` is the raw input, bytes or text; `source` names it in every problem. Raises
    `RulesError` for anything refused (see the module docstring), but with `keep_going` keeps
    repeated keys in `Positions.problems` instead.
    """
    text = decode(data, source)
    tree, marks, repeated = _load(text, source, lambda yaml: yaml.load(text))
    positions = Positions({(): (1, 1)})
    plain = _plain(tree, (), positions, marks)
    problems = tuple(_repeated_key(source, r, positions) for r in repeated)
    if problems and not keep_going:
        raise RulesError(problems)
    positions.problems = problems
    return plain, positions


def read_yaml_documents(data: str | bytes, source: str) -> list[tuple[Any, Positions]]:
    """Every document of a `---`-separated YAML stream (empty ones dropped), each as plain data
    with its positions: lines count from the start of the stream. The bounds hold for the whole
    stream (`MAX_NODES` counts every document's values), so input other tools wrote (`kubectl
    get -o yaml`, a directory of manifests concatenated) is read as safely as a rules file."""
    text = decode(data, source)
    trees, marks, repeated = _load(text, source, lambda yaml: list(yaml.load_all(text)))
    if repeated:
        raise RulesError([_repeated_key(source, r, Positions()) for r in repeated])
    documents: list[tuple[Any, Positions]] = []
    for tree in trees:
        if tree is None:
            continue
        positions = Positions({(): _start(tree)})
        documents.append((_plain(tree, (), positions, marks), positions))
    return documents


def _start(tree: Any) -> tuple[int, int]:
    if isinstance(tree, CommentedMap | CommentedSeq) and tree.lc.line is not None:
        return (tree.lc.line + 1, tree.lc.col + 1)
    return (1, 1)


def _load(
    text: str, source: str, load: Callable[[YAML], _T]
) -> tuple[_T, _Written, list[_Repeated]]:
    """`load` run on a bounded, locating parser, the text of each plain scalar it read as
    another type than a string, by its 0-based (line, column), and the keys it found repeated
    (their first entries kept); every other failure a located RulesError."""
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    yaml.Composer = _BoundedComposer
    yaml.Constructor = _LocatingConstructor
    try:
        loaded = load(yaml)
        constructor = cast(_LocatingConstructor, yaml.constructor)  # yaml.Constructor, above
        return loaded, constructor.written, constructor.repeated
    except _InputError as err:
        raise _error(source, err.mark, str(err)) from err
    except DuplicateKeyError as err:  # a !!set's (a mapping's are collected: `repeated`)
        key = str(err.problem).split('"')[1] if '"' in str(err.problem) else "?"
        first = err.context_mark.line + 1 if err.context_mark else 0
        raise _error(
            source,
            err.problem_mark,
            f"duplicate key '{key}' (the set starts at line {first}); a key may appear "
            "once per set: remove one",
        ) from err
    except MarkedYAMLError as err:
        raise _error(source, err.problem_mark or err.context_mark, _syntax_message(err)) from err
    except ReaderError as err:  # decode() refuses what the reader would; kept as a backstop
        where = _line_col(text, err.position)
        raise _refused(source, f"YAML reader error: {err.reason}", where) from err
    # A bug in the YAML library on input no test has tried: still a refusal, never a crash (the
    # fuzz tier fails on it, because this problem has no place).
    except Exception as err:
        raise _refused(
            source,
            f"the YAML parser failed on this input ({type(err).__name__}: {err}); "
            "simplify the YAML (plain keys and values, no tags or anchors)",
        ) from err


def decode(data: str | bytes, source: str) -> str:
    """The text of `data` (a UTF-8 byte-order mark dropped), or RulesError: too large, not
    UTF-8, or a control character. For callers that keep the text itself (the rules ConfigMap
    the Pulumi program and `nodegate manifests` write); `read_yaml` calls it first."""
    # A character is 1-4 bytes in UTF-8: only encode (to measure) when it could be over;
    # surrogatepass: a lone surrogate is measured here and refused as a character below.
    size = len(data)
    if isinstance(data, str) and size * 4 > MAX_BYTES:
        size = len(data.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise _refused(
            source,
            f"larger than {MAX_BYTES:,} bytes (1 MiB, the most a ConfigMap holds), the most "
            "nodegate reads: a thousand rules take about 240 KB; remove what is not needed or "
            "split the input",
        )
    text = _text(data, source) if isinstance(data, bytes) else data
    text = text.removeprefix("\ufeff")
    bad = Reader.NON_PRINTABLE.search(text)
    if bad is not None:
        raise _refused(
            source,
            f"character U+{ord(bad.group()):04X} is not allowed in YAML (a control character, "
            "often invisible in an editor): delete it, or inside a double-quoted string write "
            f'it as the escape "\\u{ord(bad.group()):04x}"',
            _line_col(text, bad.start()),
        )
    return text


def check_limits(data: Any, source: str) -> None:
    """The depth and size bounds of `read_yaml`, for data parsed elsewhere (the Pulumi stack's
    structured config): walked without recursion, so a deep value cannot overflow the stack."""
    count = 0
    stack: list[tuple[Any, DocPath]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        count += 1
        if len(path) >= MAX_DEPTH:
            raise _refused(source, _too_deep(), path=path)
        if count > MAX_NODES:
            raise _refused(source, _too_many(), path=path)
        if isinstance(value, dict):
            count += len(value)  # the keys
            stack.extend((v, (*path, str(k))) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, (*path, i)) for i, v in enumerate(value))


# --- decoding ------------------------------------------------------------------------------


def _text(data: bytes, source: str) -> str:
    for bom, encoding in _UTF16_32_BOMS:
        if data.startswith(bom):
            raise _refused(
                source,
                f"the text is {encoding} (it starts with a {encoding} byte-order mark); nodegate "
                f"reads UTF-8 only: save it as UTF-8 (e.g. iconv -f {encoding} -t UTF-8)",
                (1, 1),
            )
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as err:
        before = data[skip : skip + err.start].decode("utf-8")  # valid up to the first bad byte
        raise _refused(
            source,
            f"byte 0x{data[skip + err.start]:02X} (byte offset {skip + err.start}) is not "
            "UTF-8; nodegate reads UTF-8 only: save the file as UTF-8 (e.g. iconv -f latin1 -t "
            "UTF-8 if it was written as Latin-1)",
            _line_col(before, len(before)),
        ) from err


def _line_col(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of `text[index]`, counting lines as ruamel.yaml does."""
    line, start = 1, 0
    for match in _LINE_BREAK.finditer(text, 0, index):
        line, start = line + 1, match.end()
    return line, index - start + 1


# --- bounded parsing -----------------------------------------------------------------------


class _InputError(Exception):
    """Refused while composing or constructing: the place (a ruamel mark) and the message."""

    def __init__(self, mark: Any, message: str) -> None:
        super().__init__(message)
        self.mark = mark


class _BoundedComposer(Composer):
    """ruamel.yaml's composer, counting as it builds: the nesting level of each node and how
    many values the document holds once every alias is expanded. An alias adds the size of
    its anchor's node (known once that node is complete), so a bomb is refused at the first
    alias that crosses `MAX_NODES`, having built a few hundred nodes, not billions."""

    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader)
        self.warn_double_anchors = False  # legal YAML (the later anchor wins); not worth a warning
        self._values = 0
        self._open: list[int] = []  # per node being built: the height of its tallest child
        self._anchored: dict[int, tuple[int, int]] = {}  # id(node) -> (values, height)

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        level = len(self._open) + 1
        if isinstance(event, AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None:  # an undefined alias is ruamel's error to raise
                self._alias(event, target, level)
            return super().compose_node(parent, index)
        if level > MAX_DEPTH:
            raise _InputError(event.start_mark, _too_deep())
        self._count(1, event.start_mark, _too_many())
        before = self._values
        self._open.append(0)
        node = super().compose_node(parent, index)
        height = self._open.pop() + 1
        self._grow(height)
        if event.anchor is not None:
            self._anchored[id(node)] = (self._values - before + 1, height)
        return node

    def _alias(self, event: Any, target: Any, level: int) -> None:
        known = self._anchored.get(id(target))
        if known is None:
            raise _InputError(
                event.start_mark,
                f"alias *{event.anchor} is inside the node its anchor &{event.anchor} names, "
                "which makes the value infinite: write the value out instead",
            )
        values, height = known
        if level - 1 + height > MAX_DEPTH:
            raise _InputError(event.start_mark, _too_deep(f"with alias *{event.anchor} expanded, "))
        self._count(
            values,
            event.start_mark,
            f"alias *{event.anchor} ({values:,} value{'s' if values > 1 else ''}) takes the "
            f"document past {MAX_NODES:,} "
            "values: aliases are copied at every use, so a few can expand without bound (an "
            "'alias bomb'); write the values out, or use fewer aliases",
        )
        self._grow(height)

    def _count(self, values: int, mark: Any, message: str) -> None:
        self._values += values
        if self._values > MAX_NODES:
            raise _InputError(mark, message)

    def _grow(self, height: int) -> None:
        if self._open:
            self._open[-1] = max(self._open[-1], height)


@dataclass(frozen=True)
class _Repeated:
    """A key repeated in a mapping: where it is repeated, and where it first stood (1-based;
    None if the reader kept no place for it)."""

    key: Any
    mark: Any
    first: tuple[int, int] | None


def _repeated_key(source: str, repeated: _Repeated, positions: Positions) -> Problem:
    """The problem of a repeated key, at the repetition, with the path of its first entry."""
    part = _path_part(_plain_scalar(repeated.key))
    at = repeated.first
    path = next((p for p, where in positions.items() if p and p[-1] == part and where == at), ())
    where = f" (first at line {at[0]})" if at is not None else ""
    return Problem(
        repeated.mark.line + 1,
        repeated.mark.column + 1,
        source,
        path,
        f"duplicate key '{part}'{where}; a key may appear once per mapping: merge the two entries",
    )


class _LocatingConstructor(RoundTripConstructor):
    """ruamel.yaml's constructors assume well-formed nodes; on hostile input some fail with a
    bare Python error and no place: `int` past 4,300 digits and a 13th month (ValueError),
    `!!bool x` (KeyError), `!!set x` (AttributeError). This gives them the node's place.

    It also notes how each plain scalar that is not read as a string was written (`Positions`
    says why)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.written: _Written = {}
        self.repeated: list[_Repeated] = []

    def check_mapping_key(
        self, node: Any, key_node: Any, mapping: Any, key: Any, value: Any
    ) -> bool:
        """A repeated key is noted and skipped (the first entry stays), not raised: the
        reader goes on, so the caller may report it beside the problems found after it."""
        if key not in mapping:
            return True
        lc = getattr(mapping, "lc", None)
        where = ((lc.data if lc is not None else None) or {}).get(key)
        first = (where[0] + 1, where[1] + 1) if where else None
        self.repeated.append(_Repeated(key, key_node.start_mark, first))
        return False

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            value = super().construct_object(node, deep)
        # Already located (here, for a node inside this one, or by ruamel.yaml).
        except (YAMLError, _InputError):
            raise
        # Anything else is a value (or an explicit tag) ruamel.yaml could not build.
        except Exception as err:
            tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
            raise _InputError(
                node.start_mark,
                f"cannot read this value as {tag} ({type(err).__name__}: {err}); fix the "
                "value, or quote it to make it a string",
            ) from err
        if isinstance(node, ScalarNode) and node.style is None and not isinstance(value, str):
            self.written[(node.start_mark.line, node.start_mark.column)] = node.value
        return value


def _too_deep(prefix: str = "") -> str:
    return (
        f"{prefix}nested deeper than {MAX_DEPTH} levels, the most nodegate reads (a valid rules "
        "file needs 9): remove the extra brackets or indentation"
    )


def _too_many() -> str:
    return (
        f"more than {MAX_NODES:,} values (keys, items and scalars), the most nodegate reads "
        "(a thousand rules take about 24,000): remove what is not needed or split the input"
    )


_SYNTAX_FIXES = (
    ("'\\t'", "indent with spaces: YAML does not allow tabs here"),
    ("undefined alias", "define the anchor (&name) before the alias (*name) uses it"),
    ("another document", "a rules file is one YAML document: remove the second '---' part"),
    ("mapping values are not allowed", "quote a value that contains ': ', or fix the indent"),
    ("while parsing a flow", "close each '[' with ']' and each '{' with '}', or quote the value"),
    ("while scanning a quoted", "close the quoted string with the quote it opened with"),
)


def _syntax_message(err: MarkedYAMLError) -> str:
    context, problem = (str(part) if part else "" for part in (err.context, err.problem))
    start, mark = err.context_mark, err.problem_mark
    if context.startswith("while") and start is not None and mark is not None:
        context += f" started at line {start.line + 1}" if start.line != mark.line else ""
    glue = ", " if problem.startswith("but") else ": "
    what = glue.join(part for part in (context, problem) if part)
    fix = next((fix for key, fix in _SYNTAX_FIXES if key in what), None)
    fix = fix or "fix the YAML at this place (indentation, quoting, brackets)"
    return f"YAML syntax error: {what}; {fix}"


def _error(source: str, mark: Any, message: str) -> RulesError:
    where = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
    return _refused(source, message, where)


def _refused(
    source: str, message: str, where: tuple[int, int] = (0, 0), path: DocPath = ()
) -> RulesError:
    """The one problem that stops the reading, at `where` (1-based line and column; (0, 0):
    no place known)."""
    return RulesError([Problem(*where, source, path, message)])


# --- plain data ----------------------------------------------------------------------------


def _plain(node: Any, path: DocPath, positions: Positions, written: _Written) -> Any:
    """ruamel's round-trip objects to plain Python, recording where each key/item stood and
    how each scalar read as another type than a string was written.

    A key YAML reads as a number, a boolean or null stays one, so validation refuses it where a
    string is needed ("quote it"), as it refuses such a value: turned into a string it would be
    another key than the author wrote (`1e3` would become '1000.0', `~` 'None'), and kubectl or
    helm (YAML 1.1) would turn it into yet another ('1000', 'null').

    Recursive, which is safe: the composer refused anything deeper than MAX_DEPTH."""
    if isinstance(node, CommentedMap):
        result: dict[Any, Any] = {}
        for key, value in node.items():
            plain_key = _plain_scalar(key)
            child = (*path, _path_part(plain_key))
            positions[child] = _mark(node, key)
            where = (node.lc.data or {}).get(key) or ()
            _note(positions, (*child, "[key]"), written, where[0:2])
            _note(positions, child, written, where[2:4])
            result[plain_key] = _plain(value, child, positions, written)
        return result
    if isinstance(node, CommentedSeq):
        items = []
        for index, value in enumerate(node):
            positions[(*path, index)] = _mark(node, index)
            _note(positions, (*path, index), written, (node.lc.data or {}).get(index, ())[0:2])
            items.append(_plain(value, (*path, index), positions, written))
        return items
    return _plain_scalar(node)


def _plain_scalar(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def _path_part(key: Any) -> str | int:
    """A key as pydantic's error places (`loc`) name it: an int (a boolean as 0 or 1), else
    its text."""
    return int(key) if isinstance(key, int) else str(key)


def _note(positions: Positions, path: DocPath, written: _Written, where: Any) -> None:
    text = written.get((where[0], where[1])) if len(where) == 2 else None
    if text is not None:
        positions.written[path] = text


def _mark(node: CommentedMap | CommentedSeq, key: Any) -> tuple[int, int]:
    """Where a key or item stood; a key merged in with `<<: *anchor` takes its mapping's, and
    so does one of a collection under a tag ruamel does not know (`!!python/...`), which it
    builds without positions."""
    where = (node.lc.data or {}).get(key)
    line, column = (where[0], where[1]) if where else (node.lc.line, node.lc.col)
    return (line + 1, column + 1) if line is not None else (1, 1)
