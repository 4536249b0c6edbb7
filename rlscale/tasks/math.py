"""Math problems from local files, scored with Math-Verify (Section 2: rewards are +1 / -1, "checked with
Math-Verify after stripping the <think> trace"; the paper trains on Polaris-53K and holds out 1,000 of its
prompts for the validation curve).

``task.path`` is a ``.jsonl`` or ``.parquet`` file in one of three layouts, told apart by their columns:

- verl: ``prompt`` is a list of chat messages (the question is the last user message) and the answer is
  ``reward_model.ground_truth``;
- Polaris-53K: ``problem`` and ``answer``;
- plain: the columns named by ``task.prompt_key`` and ``task.answer_key``.

``task.path=champ`` selects the CHAMP problems shipped by the ``champ-dataset`` package instead
(``rlscale.tasks.champ``). The held-out split is ``task.val_path`` when given, else ``task.val_size`` rows
drawn with ``task.seed``; ``task.train_size`` caps the training split (a seeded sample when the file has
more rows). As the config is composed, ``MathTask.config_problems`` reads each file's header alone (a parquet
schema and row count, a jsonl's first row and line count) to refuse a missing file, a missing column and a
held-out split that leaves no training row. Math-Verify compares the value the answer states
(``rlscale.tasks.stated``), so an expression it would evaluate ("42 * 25") or a list of candidates is
incorrect, while equal values (1/2, 0.5, ``\\frac12``) are equal.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import random
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Collection, Dict, Iterator, List, Optional, Sequence, Tuple

from math_verify import parse, verify
from math_verify.errors import TimeoutException

from rlscale.config.packages import installed
from rlscale.knobs import knob
from rlscale.tasks.base import TASK_NAME, Demonstration, Problem, TaskConfig
from rlscale.tasks.champ import CHAMP_PROBLEMS, champ_problems
from rlscale.tasks.stated import stated_value

POLARIS_PROMPT = "problem"
VERL_ANSWER = "reward_model"
VERL_GROUND_TRUTH = "ground_truth"
VERIFY_TIMEOUT_S = 5


@dataclass(frozen=True)
class Shipped:
    """A data set a package ships, selected by name as ``task.path``: its loader, its number of problems and
    the module it needs, with what installs it."""

    load: Callable[[], List[Problem]]
    rows: int
    module: str
    install: str


SHIPPED: Dict[str, Shipped] = {"champ": Shipped(champ_problems, CHAMP_PROBLEMS, "champ_dataset",
                                                "pip install champ-dataset")}


def _source_file(path: str) -> Path:
    """The file ``path`` names, once it is a .jsonl or .parquet file."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"{path}: no such file")
    if file.suffix not in (".jsonl", ".parquet"):
        raise ValueError(f"{path}: expected a .jsonl or .parquet file")
    return file


def _json_row(line: str, path: Path, line_no: int) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} line {line_no}: not valid JSON ({err.msg})") from None
    if not isinstance(row, dict):
        raise ValueError(f"{path} line {line_no}: expected a JSON object, got {type(row).__name__}")
    return row


@contextmanager
def _parquet_errors(path: Path) -> Iterator[None]:
    """pyarrow's errors on an unreadable file as one line; it raises several unrelated types for them."""
    try:
        yield
    except Exception as err:
        raise ValueError(f"{path}: not a readable parquet file ({err})") from None


def _read_rows(path: Path) -> List[dict]:
    """Rows of a jsonl or parquet file as dicts."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        with _parquet_errors(path):
            return pq.read_table(path).to_pylist()
    with path.open(encoding="utf-8") as fh:
        return [_json_row(line, path, line_no) for line_no, line in enumerate(fh, start=1) if line.strip()]


def _header(path: str) -> Tuple[Optional[Tuple[str, ...]], int]:
    """(the columns, the number of rows) of a jsonl or parquet file without reading its problems: parquet's
    schema and metadata, a jsonl's first row and its count of non-blank lines; a shipped data set has no
    columns to name. ValueError with one line when ``read_problems`` could not read it (rows that go wrong
    after the first one are met there)."""
    if path in SHIPPED:
        shipped = SHIPPED[path]
        if not installed(shipped.module):
            raise ValueError(f"{path} needs the {shipped.module} module, not installed here ({shipped.install})")
        return None, shipped.rows
    file = _source_file(path)
    stat = file.stat()
    return _file_header(file.resolve(), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _file_header(file: Path, mtime_ns: int, size: int) -> Tuple[Tuple[str, ...], int]:
    """``_header`` of a file, once per process for each version of it (its time and size)."""
    if file.suffix == ".parquet":
        import pyarrow.parquet as pq

        with _parquet_errors(file):
            parquet = pq.ParquetFile(file)
            columns, rows = tuple(parquet.schema_arrow.names), parquet.metadata.num_rows
    else:
        columns, rows = None, 0
        with file.open(encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if line.strip():
                    columns = tuple(_json_row(line, file, line_no)) if columns is None else columns
                    rows += 1
    if not rows:
        raise ValueError(f"{file}: no rows")
    return columns, rows


def _prompt_text(value, where: str) -> str:
    """The question: a string, or the last user message of a chat-message list (verl)."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, list):
        users = [m.get("content") for m in value if isinstance(m, dict) and m.get("role") == "user"]
        if not users or not isinstance(users[-1], str):
            raise ValueError(f"{where}: the chat messages hold no user message with text content")
        text = users[-1]
    else:
        raise ValueError(f"{where}: expected text or a list of chat messages, got {type(value).__name__}")
    if not text.strip():
        raise ValueError(f"{where}: empty prompt")
    return text


def _answer_text(value, where: str) -> str:
    """The reference answer: text or a number, or verl's ``{"ground_truth": ...}``."""
    if isinstance(value, dict):
        if VERL_GROUND_TRUTH not in value:
            raise ValueError(f"{where}: no '{VERL_GROUND_TRUTH}' field")
        value = value[VERL_GROUND_TRUTH]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{where}: expected text or a number, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise ValueError(f"{where}: empty answer")
    return text


def _column(columns: Collection[str], candidates: Tuple[str, ...], path: Path, field: str) -> str:
    """The first of ``candidates`` among ``columns``; ValueError saying to set ``field`` when none is."""
    for name in candidates:
        if name in columns:
            return name
    names = " or ".join(f"'{c}'" for c in dict.fromkeys(candidates))
    raise ValueError(f"{path}: no column {names}; set {field} to the column's name")


def read_problems(path: str, prompt_key: str = "prompt", answer_key: str = "answer") -> List[Problem]:
    """Every row of a verl, Polaris-53K or plain jsonl/parquet file (or a shipped data set by name),
    indexed by row."""
    if path in SHIPPED:
        return SHIPPED[path].load()
    file = _source_file(path)
    rows = _read_rows(file)
    if not rows:
        raise ValueError(f"{file}: no rows")
    prompt_col = _column(rows[0], (prompt_key, POLARIS_PROMPT), file, "task.prompt_key")
    answer_col = _column(rows[0], (answer_key, VERL_ANSWER), file, "task.answer_key")
    problems = []
    for i, row in enumerate(rows):
        for col in (prompt_col, answer_col):
            if col not in row:
                raise ValueError(f"{file} row {i}: no column '{col}'")
        problems.append(Problem(
            index=i,
            prompt=_prompt_text(row[prompt_col], f"{file} row {i} column '{prompt_col}'"),
            answer=_answer_text(row[answer_col], f"{file} row {i} column '{answer_col}'"),
            meta={"source": str(file), "row": i},
        ))
    return problems


def _reindexed(problems: Sequence[Problem], rows: Sequence[int]) -> List[Problem]:
    """The given rows in file order, with ``index`` set to the position in the new split."""
    return [Problem(index=i, prompt=problems[r].prompt, answer=problems[r].answer, meta=problems[r].meta)
            for i, r in enumerate(sorted(rows))]


def sample(problems: Sequence[Problem], size: int, seed: int) -> List[Problem]:
    """At most ``size`` problems drawn with ``seed`` (all of them when there are no more)."""
    rows = random.Random(seed).sample(range(len(problems)), min(size, len(problems)))
    return _reindexed(problems, rows)


def held_out_split(problems: Sequence[Problem], val_size: int, train_size: int,
                   seed: int) -> Tuple[List[Problem], List[Problem]]:
    """(train, val) from one file: ``val_size`` rows drawn with ``seed`` are held out; at most
    ``train_size`` of the others train."""
    if not 0 < val_size < len(problems):
        raise ValueError(f"task.val_size={val_size}: must leave training rows among the {len(problems)} problems "
                         "(or set task.val_path)")
    order = random.Random(seed).sample(range(len(problems)), len(problems))
    return _reindexed(problems, order[val_size:val_size + train_size]), _reindexed(problems, order[:val_size])


class OffThreadVerifier:
    """Math-Verify for threads other than the main one. rlscale scores in main threads (the trainer's, a
    worker process's); a caller that scores from threads (a threaded evaluation harness) comes here. The
    timeouts use SIGALRM, which only a main thread may set, and without them an answer such as
    ``9^{9^{9^{9}}}`` keeps sympy busy for good. So such calls run in the main thread of a worker process
    (spawned, a pool shared by the threads), where the timeout works; a worker that still has no answer
    after ``backstop_s`` is terminated with its pool (a new pool serves the next call) and the answer counts
    as incorrect. Math-Verify's documentation leaves this to the caller ("handle the timeouting yourself")."""

    def __init__(self, workers: int, backstop_s: float):
        self.workers = workers
        self.backstop_s = backstop_s
        self._lock = threading.Lock()
        self._pool = None

    def correct(self, gold: str, answer: str) -> bool:
        with self._lock:
            if self._pool is None:
                self._pool = multiprocessing.get_context("spawn").Pool(self.workers)
                self._pool.apply(equivalent, ("1", "1"))  # start-up and imports, outside the backstop
            pool = self._pool
        try:
            return pool.apply_async(equivalent, (gold, answer)).get(self.backstop_s)
        except multiprocessing.TimeoutError:
            with self._lock:
                if self._pool is pool:
                    pool.terminate()
                    self._pool = None
            return False


OFF_THREAD = OffThreadVerifier(workers=min(4, os.cpu_count() or 1), backstop_s=4 * VERIFY_TIMEOUT_S)


def _boxed(answer: str) -> str:
    # Ground truths and stated answers are bare LaTeX ("\frac{1}{2}", "(1,2)"): boxing them makes Math-Verify
    # read the whole expression rather than the last number in it. A percent sign is read outside LaTeX
    # only (in a box it starts a comment): "50%" is 50/100.
    if "\\boxed" in answer or answer.endswith("%"):
        return answer
    return "\\boxed{" + answer + "}"


@lru_cache(maxsize=65536)
def _parsed_gold(answer: str) -> list:
    return parse(_boxed(answer), parsing_timeout=VERIFY_TIMEOUT_S)


def equivalent(gold: str, answer: str) -> bool:
    """Whether Math-Verify finds the stated ``answer`` equal to ``gold`` (equal values: 1/2, 0.5 and
    ``\\frac12``); any error or timeout (``VERIFY_TIMEOUT_S`` for the parse and again for the comparison)
    counts as unequal. Needs the main thread (the timeouts use SIGALRM)."""
    try:
        gold_parsed = _parsed_gold(gold)
        if not gold_parsed:
            return False
        return bool(verify(gold_parsed, parse(_boxed(answer), parsing_timeout=VERIFY_TIMEOUT_S),
                           timeout_seconds=VERIFY_TIMEOUT_S))
    except (Exception, TimeoutException):
        return False


def math_verify_correct(gold: str, answer_text: str, prompt: str = "") -> bool:
    """Whether ``answer_text`` (boxed, plain LaTeX or a sentence ending in the answer) states a value
    (``rlscale.tasks.stated``: "42 * 25", "8 or 9" or a repeated ``prompt`` state none) that Math-Verify
    finds equal to ``gold``. Off the main thread the comparison runs in ``OFF_THREAD``'s worker processes."""
    answer = stated_value(answer_text, gold, prompt)
    if not answer:
        return False
    if threading.current_thread() is not threading.main_thread():
        return OFF_THREAD.correct(gold, answer)
    return equivalent(gold, answer)


@dataclass
class MathTaskConfig(TaskConfig):
    """Math problems from a local file or a shipped data set, scored with Math-Verify (``task.name=math``)."""

    name: str = knob("math", TASK_NAME, "Sec. 2")
    path: Optional[str] = knob(None, "the problems file (jsonl or parquet; verl or Polaris columns), or ``champ`` "
                               "(``rlscale.tasks.champ``); a missing or unreadable file is refused as the config is "
                               "composed")
    val_path: Optional[str] = knob(None, "a separate validation file (else ``val_size`` rows of ``path`` are held "
                                   "out)")
    prompt_key: str = knob("prompt", "the prompt column (else ``problem``); a file without it is refused as the "
                           "config is composed, from its first row or parquet schema")
    answer_key: str = knob("answer", "the reference answer column (else ``reward_model``), checked alike")


class MathTask:
    """Math problems from ``task.path`` (and ``task.val_path``) with Math-Verify rewards (Section 2)."""

    name = "math"

    def __init__(self, cfg: MathTaskConfig):
        refused = self.config_problems(cfg, "task")
        if refused:
            raise ValueError(refused[0])
        problems = read_problems(cfg.path, cfg.prompt_key, cfg.answer_key)
        if cfg.val_path:
            self._train = sample(problems, cfg.train_size, cfg.seed)
            self._val = sample(read_problems(cfg.val_path, cfg.prompt_key, cfg.answer_key), cfg.val_size, cfg.seed)
        else:
            self._train, self._val = held_out_split(problems, cfg.val_size, cfg.train_size, cfg.seed)

    @classmethod
    def config_problems(cls, cfg: MathTaskConfig, where: str) -> List[str]:
        """One line per field of ``cfg`` (under ``where``) that would fail as the problems are read, found from
        each file's ``_header`` alone: ``path`` not set, a ``path`` or ``val_path`` that is no readable jsonl
        or parquet file (or a shipped data set whose package is missing), a ``prompt_key`` or ``answer_key``
        that names no column of it (nor the verl or Polaris one), and without ``val_path`` a ``val_size`` that
        leaves no training row. A later row that cannot be read is met as the problems are read."""
        if not cfg.path:
            return [f"field '{where}.path': not set; task.name=math reads a .jsonl or .parquet file (or 'champ')"]
        problems = []
        for key, source in (("path", cfg.path), ("val_path", cfg.val_path)):
            if not source:
                continue
            try:
                columns, rows = _header(source)
            except ValueError as err:
                problems.append(f"field '{where}.{key}': {err}")
                continue
            for field, candidates in (("prompt_key", (cfg.prompt_key, POLARIS_PROMPT)),
                                      ("answer_key", (cfg.answer_key, VERL_ANSWER))):
                try:
                    if columns is not None:
                        _column(columns, candidates, Path(source), f"{where}.{field}")
                except ValueError as err:
                    problems.append(f"field '{where}.{field}': {err}")
            if key == "path" and not cfg.val_path and not 0 < cfg.val_size < rows:
                problems.append(f"field '{where}.val_size': must leave training rows among the {rows} problems of "
                                f"{source} (or set {where}.val_path), got {cfg.val_size}")
        return problems

    def train_problems(self) -> List[Problem]:
        return self._train

    def val_problems(self) -> List[Problem]:
        return self._val

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        """Math-Verify of the reference against the value the text after ``</think>`` states (never
        raises)."""
        return math_verify_correct(problem.answer, answer_text, problem.prompt)

    def demonstration(self, problem: Problem) -> Optional[Demonstration]:
        return None
