"""Label selector strings (kubectl's `-l`, apimachinery's `labels.Parse`) as requirements:
accepted exactly when apimachinery accepts them, read as it reads them."""

from __future__ import annotations

import re

import pytest

from nodegate.migrate.label_selector import Requirement, SelectorSyntaxError, parse_selector


@pytest.mark.parametrize(
    ("text", "requirements"),
    [
        pytest.param("a", [Requirement("a", "exists")], id="bare key: exists"),
        pytest.param("!a", [Requirement("a", "!")], id="!key: does not exist"),
        pytest.param("a=b", [Requirement("a", "=", ("b",))], id="equals"),
        pytest.param("a==b", [Requirement("a", "==", ("b",))], id="double equals"),
        pytest.param("a!=b", [Requirement("a", "!=", ("b",))], id="not equals"),
        pytest.param("a=", [Requirement("a", "=", ("",))], id="equals the empty value"),
        pytest.param(
            "a in (b, c)", [Requirement("a", "in", ("b", "c"))], id="in, blanks between values"
        ),
        pytest.param("a notin (b,c)", [Requirement("a", "notin", ("b", "c"))], id="notin"),
        pytest.param("a notin(b)", [Requirement("a", "notin", ("b",))], id="no blank before ("),
        pytest.param("a in ()", [Requirement("a", "in", ("",))], id="() holds the empty value"),
        pytest.param(
            "a in (b,,c)", [Requirement("a", "in", ("b", "", "c"))], id="an empty item is ''"
        ),
        pytest.param("a in (b,b)", [Requirement("a", "in", ("b",))], id="values are a set"),
        pytest.param("in in (in)", [Requirement("in", "in", ("in",))], id="in as key and value"),
        pytest.param("a > 5", [Requirement("a", ">", ("5",))], id="greater than an integer"),
        pytest.param(
            "example.com/a=b,!c, d in (e)",
            [
                Requirement("example.com/a", "=", ("b",)),
                Requirement("c", "!"),
                Requirement("d", "in", ("e",)),
            ],
            id="comma-separated, in the order written",
        ),
        pytest.param("\ta = b ", [Requirement("a", "=", ("b",))], id="blanks around tokens"),
        pytest.param("", [], id="empty: every node"),
    ],
)
def test_a_selector_reads_as_kubernetes_reads_it(
    text: str, requirements: list[Requirement]
) -> None:
    assert list(parse_selector(text)) == requirements


@pytest.mark.parametrize(
    ("text", "said"),
    [
        pytest.param("a,", "found 'end of string', expected: identifier after ','", id="a,"),
        pytest.param(",a", "found ',', expected: !, identifier", id=",a"),
        pytest.param("!a=b", "'!a' takes no operator or value", id="!a=b"),
        pytest.param("a in b", "found 'b', expected: '('", id="in without ("),
        pytest.param("a in (b", "found 'end of string', expected: ',' or ')'", id="unclosed ("),
        pytest.param("a in (b c)", "found 'c', expected: ',' or ')'", id="values without ,"),
        pytest.param("a in (,,)", "found ')', expected: ',' or value", id="(,,)"),
        pytest.param("a b", "found 'b', expected: one of =, ==, !=, in, notin", id="two keys"),
        pytest.param("a=b=c", "found '=', expected: ',' or end of string", id="a=b=c"),
        pytest.param("a=(b)", "found '(', expected: value", id="a=(b)"),
        pytest.param("a > b", "the value of > and < must be an integer", id="a > b"),
        pytest.param("Bad_/key", "invalid label key 'Bad_/key'", id="bad key"),
        pytest.param("a=b_", "invalid label value for 'a'", id="bad value"),
        pytest.param("a in (b, -c)", "invalid label value for 'a'", id="bad value in a set"),
    ],
)
def test_a_selector_kubernetes_refuses_is_refused_saying_what_was_found(
    text: str, said: str
) -> None:
    with pytest.raises(SelectorSyntaxError, match=re.escape(said)):
        parse_selector(text)
