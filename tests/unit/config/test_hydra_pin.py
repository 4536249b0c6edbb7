"""Why ``rlscale.config.compose`` uses two internal functions of Hydra 1.3 (``Hydra.create_main_hydra2`` and
``create_config_search_path``), and why pyproject.toml pins hydra-core below 1.4: the user's config folders
(``--config-dir``, RLSCALE_CONFIG_PATH) must come before the packaged tree, so that a user's ``loss/cispo.yaml``
replaces the packaged one. Hydra's public compose API cannot say that: ``initialize_config_dir`` takes one primary
folder, which must hold the root config.yaml, and ``hydra.searchpath`` appends the others after it."""
from __future__ import annotations

import hydra
from hydra import compose, initialize_config_dir

from rlscale.config.compose import compose_raw, register_schema
from rlscale.paths import CONF_DIR, CONFIG_PATH_ENV


def user_folder(tmp_path):
    (tmp_path / "loss").mkdir()
    (tmp_path / "loss" / "cispo.yaml").write_text("name: cispo\ncispo_cap: 5.0\n")
    return tmp_path


def test_the_users_folder_comes_first(tmp_path, monkeypatch):
    monkeypatch.setenv(CONFIG_PATH_ENV, str(user_folder(tmp_path)))
    assert compose_raw([]).loss.cispo_cap == 5.0


def test_the_public_api_would_put_the_packaged_tree_first(tmp_path):
    register_schema()
    searched = f"hydra.searchpath=[{user_folder(tmp_path).as_uri()}]"
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        assert "cispo_cap" not in compose(config_name="config", overrides=[searched]).loss  # the packaged file won


def test_hydra_is_the_pinned_minor_version():
    assert hydra.__version__.startswith("1.3.")
