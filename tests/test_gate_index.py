"""Releases are listed from the index the installs use (uv's settings, then
pip's, then PyPI), through the simple repository API: no pip needed."""
from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from harness.tools.gate import index, specs

#: An index nobody can reach.
NO_INDEX = "file:///nonexistent/simple"


def test_the_index_is_uvs_then_pips_then_pypi(tmp_path):
    bare = {"XDG_CONFIG_HOME": str(tmp_path), "XDG_CONFIG_DIRS": str(tmp_path)}
    assert index.configured(bare).default == index.PYPI
    assert index.configured({**bare, "PIP_INDEX_URL": "https://pip.example/simple/"}).default \
        == "https://pip.example/simple"
    both = index.configured({**bare, "PIP_INDEX_URL": "https://pip.example/simple",
                             "UV_INDEX_URL": "https://uv.example/simple",
                             "UV_INDEX": "mine=https://mine.example/simple"})
    assert both.default == "https://uv.example/simple"
    assert both.uv_arguments() == ["--default-index", "https://uv.example/simple",
                                   "--index", "https://mine.example/simple"]
    (tmp_path / "uv").mkdir()
    (tmp_path / "uv" / "uv.toml").write_text(
        '[[index]]\nurl = "https://toml.example/simple"\ndefault = true\n'
        '[[index]]\nurl = "https://pinned.example/simple"\nexplicit = true\n', encoding="utf-8")
    assert index.configured(bare) == index.Indexes(default="https://toml.example/simple")


def test_releases_are_listed_from_a_simple_index_without_pip(tmp_path, monkeypatch):
    page = tmp_path / "simple" / "agentscope"
    page.mkdir(parents=True)
    (page / "index.html").write_text(
        "<html><body>\n"
        '<a href="agentscope-2.0.8-py3-none-any.whl">agentscope-2.0.8-py3-none-any.whl</a>\n'
        '<a href="agentscope-2.0.9.tar.gz">agentscope-2.0.9.tar.gz</a>\n'
        '<a href="agentscope-2.0.10-py3-none-any.whl" data-yanked="">'
        "agentscope-2.0.10-py3-none-any.whl</a>\n"
        '<a href="agentscope-2.1.0rc1-py3-none-any.whl">agentscope-2.1.0rc1-py3-none-any.whl</a>\n'
        "</body></html>\n",
        encoding="utf-8",
    )
    url = (tmp_path / "simple").as_uri()
    found = index.versions("agentscope", index.Indexes(default=url))
    assert found == [Version("2.0.8"), Version("2.0.9"), Version("2.1.0rc1")]
    monkeypatch.setenv("UV_DEFAULT_INDEX", url)
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    specs.released.cache_clear()
    try:
        assert specs.released() == (Version("2.0.8"), Version("2.0.9"))
        monkeypatch.setenv("UV_DEFAULT_INDEX", NO_INDEX)
        specs.released.cache_clear()
        with pytest.raises(specs.NotAgentscope, match="cannot list agentscope's releases on "
                           "the index: file:///nonexistent/simple/agentscope/: "):
            specs.released()
    finally:
        specs.released.cache_clear()
    (tmp_path / "simple" / "agentscope" / "index.html").unlink()
    (tmp_path / "simple" / "agentscope").rmdir()
    monkeypatch.setenv("UV_DEFAULT_INDEX", url)
    try:
        with pytest.raises(specs.NotAgentscope, match="lists no release of agentscope"):
            specs.released()
    finally:
        specs.released.cache_clear()


def test_an_index_that_cannot_be_reached_says_so_in_one_line():
    with pytest.raises(index.IndexUnreachable, match="http://127.0.0.1:9/simple/agentscope/"):
        index.versions("agentscope", index.Indexes(default="http://127.0.0.1:9/simple"))


def test_no_pip_is_needed(monkeypatch):
    """The gate never runs ``pip`` (a ``uv venv`` has none)."""
    source = Path(specs.__file__).parent
    for module in source.glob("*.py"):
        assert '"pip", "index"' not in module.read_text(encoding="utf-8"), module
