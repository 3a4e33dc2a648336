"""pydantic's pattern errors in words: a Kubernetes name form is named with a name that fits;
any other pattern is shown as the regular expression it is, never as pydantic's raw text."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel, Field, ValidationError

from nodegate.core.text.k8s_names import (
    CSI_DRIVER_PATTERN,
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    name_form_problem,
)
from nodegate.core.text.located_errors import located_errors


class Named(BaseModel):
    label: Annotated[str, Field(pattern=DNS_LABEL_PATTERN)] = "a"
    subdomain: Annotated[str, Field(pattern=DNS_SUBDOMAIN_PATTERN)] = "a"
    quantity: Annotated[str, Field(pattern=r"^[0-9]+(m|Mi)?$")] = "1"


def message(**data: str) -> str:
    with pytest.raises(ValidationError) as raised:
        Named.model_validate(data)
    [located] = located_errors(raised.value, Named)
    return located.message


@pytest.mark.parametrize(
    ("value", "pattern", "expected"),
    [
        (
            "CI_rule",
            DNS_LABEL_PATTERN,
            "'CI_rule' is not a DNS label (lower-case letters, digits and '-', starting and "
            "ending with a letter or digit): write e.g. 'ci-rule'",
        ),
        (
            "My_Pool.-x",
            DNS_SUBDOMAIN_PATTERN,
            "'My_Pool.-x' is not a DNS subdomain (lower-case letters, digits, '-' and '.', each "
            "'.'-separated part starting and ending with a letter or digit): write e.g. "
            "'my-pool.x'",
        ),
        (
            "EBS_CSI.aws",
            CSI_DRIVER_PATTERN,
            "'EBS_CSI.aws' is not a CSI driver name (lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit): write e.g. 'ebs-csi.aws'",
        ),
        (
            "__",
            DNS_LABEL_PATTERN,
            "'__' is not a DNS label (lower-case letters, digits and '-', starting and ending "
            "with a letter or digit)",
        ),
    ],
    ids=["label", "subdomain", "csi-driver", "nothing-fits"],
)
def test_a_name_form_is_said_in_words_with_a_name_that_fits(
    value: str, pattern: str, expected: str
) -> None:
    assert name_form_problem(value, pattern) == expected


def test_a_field_with_a_name_form_gets_its_words_not_pydantics_pattern_text() -> None:
    assert message(label="CI_rule").startswith("'CI_rule' is not a DNS label (")


def test_any_other_pattern_is_shown_as_the_regular_expression_it_is() -> None:
    assert message(quantity="lots") == (
        "'lots' does not have the form this field takes (the regular expression ^[0-9]+(m|Mi)?$)"
    )
