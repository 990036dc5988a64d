"""`core.apps`: the app manifest (every field checked, errors name the field), the review
states, and the revenue split (exact to the micro-unit, property-tested)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardhour.core import apps
from cardhour.core.errors import InvalidInput, InvalidTransition

GOOD = """
name: Document search
slug: doc-search
category: rag
description: Multimodal RAG over a small document set.
price_per_call: "0.02"
entrypoint: app:handle
requirements: [sentence-transformers==3.0.1]
input_schema: {type: object, properties: {query: {type: string}}, required: [query]}
output_schema: {type: object}
resources: {gpu: H100, milli_gpu: 250, memory_gb: 8}
scaling: {min_replicas: 0, max_replicas: 4, target_concurrency: 4, idle_seconds: 300}
"""


def test_a_good_manifest() -> None:
    m = apps.parse_manifest(GOOD)
    assert (m.slug, m.category, m.price_micros) == ("doc-search", "rag", 20_000)
    assert m.resources.milli_gpu == 250 and m.scaling.max_replicas == 4
    cpu = apps.parse_manifest(
        GOOD.replace("resources: {gpu: H100, milli_gpu: 250, memory_gb: 8}", "")
    )
    assert cpu.resources.gpu is None and cpu.resources.milli_gpu == 0


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("slug: doc-search", "slug: Doc_Search", "slug: 3-48 lowercase"),
        ("category: rag", "category: chat", "category: one of text-generation"),
        (
            'price_per_call: "0.02"',
            'price_per_call: "0.0000001"',
            "price_per_call: at most 6 decimals",
        ),
        ('price_per_call: "0.02"', 'price_per_call: "-1"', "price_per_call: more than 0"),
        ('price_per_call: "0.02"', 'price_per_call: "abc"', "price_per_call: a decimal amount"),
        ("entrypoint: app:handle", "entrypoint: app.py", "entrypoint: module:function"),
        ("[sentence-transformers==3.0.1]", "[--index-url=http://x]", "requirements: '--index-url"),
        (
            "output_schema: {type: object}",
            "output_schema: {type: string}",
            "output_schema: a JSON Schema",
        ),
        ("milli_gpu: 250", "milli_gpu: 1500", "resources.milli_gpu: more than one GPU"),
        ("max_replicas: 4", "max_replicas: 0", "scaling.max_replicas: Input should be greater"),
        ("min_replicas: 0", "min_replicas: 5", "scaling: min_replicas is more than max_replicas"),
        ("gpu: H100, ", "", "resources: milli_gpu needs a gpu model"),
        ("name: Document search", "name: Document search\nshell: rm -rf /", "shell: Extra inputs"),
    ],
)
def test_each_bad_field_is_named(old: str, new: str, message: str) -> None:
    assert old in GOOD
    with pytest.raises(InvalidInput) as err:
        apps.parse_manifest(GOOD.replace(old, new))
    assert err.value.message.startswith(message), err.value.message


@pytest.mark.parametrize("text", ["", "- a list", "name: [unclosed"])
def test_not_a_manifest(text: str) -> None:
    with pytest.raises(InvalidInput, match="manifest"):
        apps.parse_manifest(text)


def test_review_states() -> None:
    s = apps.AppStatus
    assert apps.review("draft", "submit") == s.IN_REVIEW
    assert apps.review("in_review", "approve") == s.LISTED
    assert apps.review("in_review", "reject") == s.REJECTED
    assert apps.review("rejected", "submit") == s.IN_REVIEW
    assert apps.review("listed", "delist") == s.DELISTED
    assert apps.review("delisted", "submit") == s.IN_REVIEW
    for current, action in [
        ("draft", "approve"),
        ("listed", "submit"),
        ("in_review", "delist"),
        ("gone", "submit"),
    ]:
        with pytest.raises(InvalidTransition):
            apps.review(current, action)


def test_split_examples() -> None:
    assert apps.split(20_000) == (14_000, 6_000)  # 0.02 → 0.014 + 0.006
    assert apps.split(1) == (0, 1)  # the developer's share rounds down
    assert apps.split(10, 5_000) == (5, 5)
    with pytest.raises(ValueError):
        apps.split(10, 10_001)


@given(st.integers(0, 10**12), st.integers(0, 10_000))
def test_split_is_exact_and_rounds_the_developer_down(price: int, bp: int) -> None:
    developer, platform = apps.split(price, bp)
    assert developer + platform == price and developer >= 0 and platform >= 0
    assert developer * 10_000 <= price * bp < (developer + 1) * 10_000
