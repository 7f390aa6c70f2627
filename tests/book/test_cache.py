"""The on-disk cache of pure functions, the cache key's components, the page's box, the hub-id loader."""

import functools

import numpy as np
import pytest

from gtbook import cache, imports, provenance

CALLS = []


@cache.disk_cache
def _costly(n, scale=1.0, *, arr=None, stat=None):
    CALLS.append((n, scale))
    base = np.arange(n) * scale
    return base + (0 if arr is None else arr.sum()) + (0 if stat is None else stat(base))


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.OFF_ENV, raising=False)
    CALLS.clear()
    cache._environment_key.cache_clear()
    yield
    cache._environment_key.cache_clear()


def test_a_second_call_is_served_from_disk():
    first = _costly(5, 2.0)
    again = _costly(5, 2.0)
    np.testing.assert_array_equal(first, again)
    assert CALLS == [(5, 2.0)]
    _costly(5, 3.0)
    _costly(6, 2.0)
    assert len(CALLS) == 3


def test_arrays_and_named_functions_are_part_of_the_key():
    a = np.ones(3)
    _costly(4, arr=a)
    _costly(4, arr=a.copy())
    assert len(CALLS) == 1
    _costly(4, arr=np.full(3, 2.0))
    _costly(4, arr=np.ones(3, dtype=np.float32))  # same values, another dtype
    assert len(CALLS) == 3
    _costly(4, stat=np.mean)
    _costly(4, stat=np.mean)
    _costly(4, stat=np.max)
    _costly(4, stat=functools.partial(np.quantile, q=0.5))
    _costly(4, stat=functools.partial(np.quantile, q=0.5))
    assert len(CALLS) == 6


def test_an_argument_without_a_faithful_key_is_not_cached():
    _costly(4, stat=lambda x: x.sum())
    _costly(4, stat=lambda x: x.sum())
    assert len(CALLS) == 2


def test_editing_gtcore_or_upgrading_a_package_invalidates(monkeypatch):
    _costly(3)
    monkeypatch.setattr(imports, "modules_hash", lambda *a, **k: "edited")
    cache._environment_key.cache_clear()
    _costly(3)
    real = imports.key_versions()
    monkeypatch.setattr(imports, "key_versions", lambda: {**real, "numpy": "0.0"})
    cache._environment_key.cache_clear()
    _costly(3)
    assert len(CALLS) == 3


def test_clear_and_off_switch(monkeypatch):
    _costly(3)
    assert cache.clear() == 1
    _costly(3)
    assert len(CALLS) == 2
    monkeypatch.setenv(cache.OFF_ENV, "1")
    _costly(3)
    assert len(CALLS) == 3


def test_a_corrupt_entry_is_recomputed():
    _costly(3)
    (entry,) = list(cache.cache_dir().rglob("*.pkl"))
    entry.write_bytes(b"not a pickle")
    np.testing.assert_array_equal(_costly(3), np.arange(3.0))
    assert len(CALLS) == 2


# ------------------------------------------------------------------------ provenance
def test_key_components_change_one_at_a_time():
    base = provenance.key_components("src", "quick", {"n": 1}, library="L", versions={"numpy": "1"})
    assert provenance.stale_reasons(base, base) == []
    changed = {
        "source": provenance.key_components("src2", "quick", {"n": 1}, library="L", versions={"numpy": "1"}),
        "parameters": provenance.key_components("src", "full", {"n": 1}, library="L", versions={"numpy": "1"}),
        "library": provenance.key_components("src", "quick", {"n": 1}, library="M", versions={"numpy": "1"}),
        "versions": provenance.key_components("src", "quick", {"n": 1}, library="L", versions={"numpy": "2"}),
    }
    for reason, comps in changed.items():
        assert provenance.stale_reasons(base, comps) == [reason]
        assert provenance.cache_key(comps) != provenance.cache_key(base)
    assert provenance.stale_reasons(None, base) == list(provenance.COMPONENTS)


def test_the_box_says_how_the_page_was_made():
    meta = {
        "chapter": "01_x",
        "profile": "full",
        "parameters": {"seed": 3},
        "overrides": {"n": 5, "Ns": [1, 2]},
        "changed": {"n": 5},
        "runtime_s": 12.345,
        "date": "2026-01-01 10:00 UTC",
        "git": {"commit": "abcdef1234567", "dirty": True},
        "cache": {"key": "0123456789abcdef"},
    }
    box = provenance.box_markdown(
        meta,
        [{"passed": True, "statement": "s1"}, {"passed": True, "statement": "s2"}, {"passed": True, "statement": None}],
    )  # an instrument names no statement
    assert box.startswith(":::{admonition} How this page was made") and box.endswith(":::")
    for text in (
        "`full`",
        "**seed** `3`",
        "`n = 5` (`--set`)",
        "12.3 s",
        "2026-01-01",
        "`abcdef1234`",
        "uncommitted",
        "`0123456789abcdef`",
        "3 of 3 passed",
        "(statements: `s1`, `s2`)",
        "`gtbook run --only 01_x --profile full --set n=5 --set 'Ns=[1,2]'`",
    ):
        assert text in box, text


def test_environment_names_versions_and_hardware_without_paths():
    env = provenance.environment()
    assert env["python"] and env["packages"]["numpy"] != "absent" and env["cores"] >= 1
    assert "/" not in str(env["packages"])


# ---------------------------------------------------------------------- hub ids
def test_load_transformer_takes_a_hub_id_from_the_local_cache_only(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    from gtcore.models import ModelNotAvailable, load_transformer

    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailable, match=r"^someorg/tiny-bert: not in the local Hugging Face cache") as err:
        load_transformer("someorg/tiny-bert", device="cpu")
    assert "\n" not in str(err.value) and "no download is attempted" in str(err.value)
    snap = hub / "models--someorg--tiny-bert" / "snapshots" / ("0" * 40)
    cfg = transformers.BertConfig(
        vocab_size=30,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=32,
    )
    transformers.BertModel(cfg).save_pretrained(snap, safe_serialization=True)
    (hub / "models--someorg--tiny-bert" / "refs").mkdir()
    (hub / "models--someorg--tiny-bert" / "refs" / "main").write_text("0" * 40)
    model = load_transformer("someorg/tiny-bert", device="cpu")
    assert model.d == 16 and model.n_layers == 2 and model.name == "tiny-bert"
    assert "/tmp" not in repr(model) and str(tmp_path) not in repr(model)
