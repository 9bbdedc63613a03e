"""Several endpoints of one model: the spec's list, URLs shown without credentials, sessions."""

from __future__ import annotations

import pytest

from moot.core.errors import ConfigError
from moot.core.llm.endpoints import SESSION, sticky
from moot.core.llm.spec import parse_spec
from moot.core.redaction import public_url


def test_endpoints_come_from_commas_and_lists_in_order():
    spec = parse_spec("openai/m", api_base=["http://a:1/v1,http://b:1/v1", "http://c:1/v1"])
    assert spec.api_bases == ("http://a:1/v1", "http://b:1/v1", "http://c:1/v1")
    assert spec.api_base == "http://a:1/v1" and spec.endpoints == spec.api_bases
    one = parse_spec("openai/m", api_base=["http://a:1/v1"])
    assert (one.api_base, one.api_bases, one.endpoints) == ("http://a:1/v1", (), ("http://a:1/v1",))
    assert parse_spec("openai/m", api_base="").endpoints == ()


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("http://a:1/v1,", "invalid --api-base ''"),
        ("http://a:1/v1, a:1/v1", "invalid --api-base 'a:1/v1'"),
        (["http://a:1/v1", "http://a:1/v1/"], "given twice"),
    ],
)
def test_a_bad_or_repeated_endpoint_is_refused(given, problem):
    with pytest.raises(ConfigError, match=problem):
        parse_spec("openai/m", api_base=given)


def test_public_url_drops_the_password_and_masks_query_values():
    shown = public_url("https://user:pw@host:8000/v1?api-key=abcdef&x=1")
    assert shown == "https://host:8000/v1?api-key=***&x=***"
    assert public_url("http://host/v1") == "http://host/v1"


def test_sticky_names_the_session_inside_only():
    assert SESSION.get() is None
    with sticky("debate-1"):
        assert SESSION.get() == "debate-1"
    assert SESSION.get() is None


def test_the_router_prices_nothing_for_moot_a_priced_model_keeps_its_price():
    """The Router is told its requests are free (its cost tracking is not read); moot's prices
    of the same model, one endpoint or several, stay the cost map's."""
    from moot.core.llm.endpoints import build_router
    from moot.core.llm.prices import Prices

    one = parse_spec("openai/gpt-4o")
    several = parse_spec("openai/gpt-4o", api_base="http://127.0.0.1:1/v1,http://127.0.0.1:2/v1")
    before = Prices().price(one)
    router = build_router(several, None)
    assert before is not None and before.input > 0
    assert Prices().price(one) == before
    assert Prices().price(several) is None  # a custom server: unpriced unless --prices says
    infos = [d["model_info"] for d in router.model_list]
    assert all(i["input_cost_per_token"] == 0 == i["output_cost_per_token"] for i in infos)


def test_the_router_gets_no_rpm_or_tpm_and_spreads_by_them_as_weights():
    """A deployment's rpm/tpm are moot's limit (`RouterGroup.limit`): litellm's Router would
    refuse a request over one with a 429 instead of queueing it."""
    from moot.core.llm.endpoints import build_router
    from moot.core.llm.spec import RouterGroup

    urls = ("http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1")
    given = tuple(
        {"model": "openai/m", "api_base": u, "rpm": r} for u, r in zip(urls, (2, 6), strict=True)
    )
    group = RouterGroup("router.yaml", "openai/m", given, {})
    assert group.limit("rpm") == 8 and group.limit("tpm") is None
    spec = parse_spec("openai/m", api_base=",".join(urls), router=group)
    params = [d["litellm_params"] for d in build_router(spec, None).model_list]
    assert [(p.get("rpm"), p.get("tpm"), p["weight"]) for p in params] == [
        (None, None, 2),
        (None, None, 6),
    ]


def test_every_router_of_a_process_keeps_a_session_on_one_endpoint_and_moves_it_off_a_failure():
    """The Router picks (`choose`), moot pins the session at once; a failure (`failed`) counts
    against the endpoint and moves the session. litellm reads every Router's pins from one cache
    (its one session check per process, the first Router's), so a second Router (another model,
    or a later event loop) must pin there too."""
    import asyncio

    from moot.core.llm.endpoints import build_router, choose, failed
    from moot.core.llm.failures import Transient

    urls = ",".join(f"http://127.0.0.1:{port}/v1" for port in (1, 2, 3))
    specs = [parse_spec(name, api_base=urls) for name in ("openai/m", "openai/other")]
    messages = [{"role": "user", "content": "Hi."}]

    async def picks(router, spec, session: str) -> set[str]:
        with sticky(session):
            return {await choose(router, spec, messages) for _ in range(8)}

    async def main() -> None:
        for spec in specs:
            router = build_router(spec, None)
            (first,) = await picks(router, spec, "item-1")
            with sticky("item-1"):
                failed(router, spec, first, Transient("HTTP 500", status=500))
            (moved,) = await picks(router, spec, "item-1")
            assert moved != first
            with sticky("item-2"):
                failed(router, spec, first, Transient("no reply in time"))  # the second: out
            fresh = set().union(*[await picks(router, spec, f"new-{i}") for i in range(12)])
            assert first not in fresh and len(fresh) == 2

    asyncio.run(main())
