"""Kubernetes label selector strings (`kubectl get -l`, apimachinery's `labels.Parse`) as
requirements, for old tools whose settings hold selectors as text (nidhogg's `nodeSelector`).

Parsed here because no maintained Python library does it: the kubernetes client passes selector
strings to the API server unparsed, and the one parser on PyPI (libkubeselector 0.0.3, 2020) is
unmaintained. This follows apimachinery's lexer and parser (pkg/labels/selector.go) token for
token, so a string is accepted exactly when the old tool accepted it, and means the same:

    <selector>    ::= <requirement> | <requirement> "," <selector>
    <requirement> ::= ["!"] KEY [ <set> | <exact> ]
    <set>         ::= ("in" | "notin") "(" VALUE ["," VALUE]... ")"
    <exact>       ::= ("=" | "==" | "!=" | ">" | "<") VALUE

KEY is a qualified name, VALUE a label value (possibly empty); blanks separate tokens; `in` and
`notin` are words only where an operator may stand (`in in (in)` is a valid requirement).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, TypeGuard

from nodegate.core.text.k8s_names import label_value_problem, qualified_name_problem

Operator = Literal["exists", "!", "=", "==", "!=", "in", "notin", ">", "<"]
"""As written: `exists` for a bare key, `!` for `!key`."""

_TOKEN: Final = re.compile(r"[ \t\r\n]*(?:(!=|==|[=!(),><])|([^=!(),>< \t\r\n]+))")
"""After blanks, a symbol (the longest: `!=`, `==`, as apimachinery's scanSpecialSymbol) or a
word (up to a symbol or a blank)."""
_WORDS: Final = frozenset({"in", "notin"})
_BINARY: Final = frozenset({"in", "notin", "=", "==", "!=", ">", "<"})


@dataclass(frozen=True)
class Requirement:
    """One requirement of a selector: all of a selector's must hold."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()


class SelectorSyntaxError(ValueError):
    """A string apimachinery's `labels.Parse` refuses; the message says what it found."""


@dataclass(frozen=True)
class _Token:
    kind: str
    """The symbol or word itself; `id` for any other word, `end` after the last."""
    text: str


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """The requirements of `text` in the order written (empty: every label set matches)."""
    return _Parser(_tokens(text)).selector()


def _tokens(text: str) -> list[_Token]:
    tokens = [
        _Token(symbol or (word if word in _WORDS else "id"), symbol or word)
        for symbol, word in _TOKEN.findall(text)
    ]
    return [*tokens, _Token("end", "")]


class _Parser:
    """apimachinery's recursive descent, with its two contexts: where values may stand, the
    words `in` and `notin` are plain identifiers."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self, values: bool = True) -> _Token:
        token = self.tokens[self.at]
        return _Token("id", token.text) if values and token.kind in _WORDS else token

    def take(self, values: bool = True) -> _Token:
        token = self.peek(values)
        self.at += 1
        return token

    def selector(self) -> tuple[Requirement, ...]:
        found: list[Requirement] = []
        if self.peek().kind == "end":
            return ()
        while True:
            if self.peek().kind not in ("id", "!"):
                raise SelectorSyntaxError(
                    f"found '{self.peek().text}', expected: !, identifier, or end of string"
                )
            found.append(self.requirement())
            after = self.take()
            if after.kind == "end":
                return tuple(found)
            if after.kind != ",":
                raise SelectorSyntaxError(f"found '{after.text}', expected: ',' or end of string")
            if self.peek().kind not in ("id", "!"):
                raise SelectorSyntaxError(
                    f"found '{_shown(self.peek())}', expected: identifier after ','"
                )

    def requirement(self) -> Requirement:
        negated = self.peek().kind == "!"
        if negated:
            self.take()
        key = self.take()
        if key.kind != "id":
            raise SelectorSyntaxError(f"found '{_shown(key)}', expected: identifier")
        key_problem = qualified_name_problem(key.text)
        if key_problem is not None:
            raise SelectorSyntaxError(f"invalid label key '{key.text}': {key_problem}")
        if self.peek().kind in ("end", ","):
            return Requirement(key.text, "!" if negated else "exists")
        if negated:
            # apimachinery reads `!key` as complete, then refuses what follows it.
            raise SelectorSyntaxError(
                f"found '{self.peek().text}', expected: ',' or end of string ('!{key.text}' "
                "takes no operator or value)"
            )
        operator = self.take(values=False).kind
        if not _is_binary(operator):
            raise SelectorSyntaxError(
                f"found '{self.tokens[self.at - 1].text}', expected: one of "
                "=, ==, !=, in, notin, >, < (or ',' after a bare key)"
            )
        values = self.value_set() if operator in ("in", "notin") else self.exact_value()
        for value in values:
            problem = label_value_problem(value)
            if problem is not None:
                raise SelectorSyntaxError(f"invalid label value for '{key.text}': {problem}")
        if operator in (">", "<") and not _integer(values[0]):
            raise SelectorSyntaxError(
                f"'{key.text} {operator} {values[0]}': the value of > and < must be an integer"
            )
        return Requirement(key.text, operator, values)

    def value_set(self) -> tuple[str, ...]:
        opening = self.take()
        if opening.kind != "(":
            raise SelectorSyntaxError(f"found '{_shown(opening)}', expected: '('")
        first = self.peek()
        if first.kind == ")":
            self.take()
            return ("",)
        if first.kind not in ("id", ","):
            raise SelectorSyntaxError(f"found '{_shown(first)}', expected: ',', ')' or value")
        values = self.identifiers()
        self.take()  # the ')' that ended the list
        return tuple(dict.fromkeys(values))  # a set in apimachinery; kept in the order written

    def identifiers(self) -> list[str]:
        """Values and commas up to the closing parenthesis, as apimachinery reads them: an
        empty item (`(,a)`, `(a,,b)`, `(a,)`) is the empty value, but `,,)` is refused."""
        values: list[str] = []
        while True:
            token = self.take()
            if token.kind == "id":
                values.append(token.text)
                following = self.peek()
                if following.kind == ")":
                    return values
                if following.kind != ",":
                    raise SelectorSyntaxError(f"found '{_shown(following)}', expected: ',' or ')'")
            elif token.kind == ",":
                if not values:
                    values.append("")
                following = self.peek()
                if following.kind == ")":
                    values.append("")
                    return values
                if following.kind == ",":
                    self.take()
                    values.append("")
            else:
                raise SelectorSyntaxError(f"found '{_shown(token)}', expected: ',' or value")

    def exact_value(self) -> tuple[str, ...]:
        if self.peek().kind in ("end", ","):
            return ("",)
        token = self.take()
        if token.kind != "id":
            raise SelectorSyntaxError(f"found '{_shown(token)}', expected: value")
        return (token.text,)


def _is_binary(kind: str) -> TypeGuard[Operator]:
    return kind in _BINARY


def _integer(text: str) -> bool:
    digits = text[1:] if text[:1] in ("-", "+") else text
    return digits.isdigit() and digits.isascii()


def _shown(token: _Token) -> str:
    return "end of string" if token.kind == "end" else token.text
