"""The cache key of the embedded default's warm-up: it follows the source of the code that builds the warm-up,
and is the same in every process that runs the same code."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from rlscale.engines.models.configs import TinyModelConfig
from rlscale.rl.length import LengthConfig
from rlscale.engines.models import tiny_model
from rlscale.engines.models.char_tokenizer import CharTokenizer
from rlscale.tasks.base import TaskConfig
from rlscale.tasks.math import MathTaskConfig
from rlscale.tasks.reasoning_gym import ReasoningGymConfig

KEY_OF_DEFAULTS = ("from rlscale.tasks.reasoning_gym import ReasoningGymConfig;"
                   "from rlscale.engines.models.configs import TinyModelConfig;"
                   "from rlscale.rl.length import LengthConfig;"
                   "from rlscale.engines.models.char_tokenizer import CharTokenizer;"
                   "from rlscale.engines.models.tiny_model import tiny_model_key;"
                   "print(tiny_model_key(TinyModelConfig(), ReasoningGymConfig(), CharTokenizer(LengthConfig().phrase)))")


def default_key() -> str:
    return tiny_model_key_of(TinyModelConfig(), ReasoningGymConfig())


def tiny_model_key_of(model_cfg: TinyModelConfig, task_cfg: TaskConfig) -> str:
    return tiny_model.tiny_model_key(model_cfg, task_cfg, CharTokenizer(LengthConfig().phrase))


def module_from(path: Path, source: str, monkeypatch) -> ModuleType:
    """A module imported from ``path`` after writing ``source`` there, in ``sys.modules`` for the test."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, path.stem, module)
    spec.loader.exec_module(module)
    return module


def test_key_covers_every_module_on_the_warmup_path():
    names = set(tiny_model.code_digests(tiny_model.warmup_code(ReasoningGymConfig())))
    assert names == {"rlscale.engines.models.tiny_model", "rlscale.engines.models.char_tokenizer",
                     "rlscale.core.types", "rlscale.tasks.base", "rlscale.tasks.answer_format",
                     "rlscale.tasks.reasoning_gym"}
    assert "rlscale.tasks.math" in tiny_model.code_digests(tiny_model.warmup_code(MathTaskConfig()))


def test_an_edit_to_hashed_source_changes_the_key(tmp_path, monkeypatch):
    helper = module_from(tmp_path / "warmup_helper.py", "def noise():\n    return 1\n", monkeypatch)
    monkeypatch.setattr(tiny_model, "WARMUP_CODE", (*tiny_model.WARMUP_CODE, helper.noise))
    before = default_key()
    assert default_key() == before
    (tmp_path / "warmup_helper.py").write_text("def noise():\n    return 2\n")
    assert default_key() != before


def test_the_list_of_hashed_code_is_in_the_key(monkeypatch):
    before = default_key()
    monkeypatch.setattr(tiny_model, "WARMUP_CODE", tiny_model.WARMUP_CODE[:-1])
    assert default_key() != before


def test_library_versions_and_configs_are_in_the_key(monkeypatch):
    before = default_key()
    assert tiny_model_key_of(TinyModelConfig(warmup_steps=301), ReasoningGymConfig()) != before
    assert tiny_model_key_of(TinyModelConfig(), ReasoningGymConfig(seed=1)) != before
    monkeypatch.setattr(tiny_model, "library_versions", lambda names: {name: "0" for name in names})
    assert default_key() != before


def test_two_processes_compute_the_same_key():
    keys = {subprocess.run([sys.executable, "-c", KEY_OF_DEFAULTS], capture_output=True, text=True,
                           check=True).stdout.strip() for _ in range(2)}
    assert keys == {default_key()}
