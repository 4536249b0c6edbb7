"""The checks of a composed config: the bounds its fields declare (``rlscale.knobs``), and what involves several
fields or the machine (a job's shape, the packages a choice needs, a task's files). Each problem is one line that
starts with the dotted field name."""
from __future__ import annotations

from typing import List, Optional

from omegaconf import DictConfig, OmegaConf

from rlscale.config.packages import missing_packages
from rlscale.config.registry import ANSWER_FORMAT, AXES, TASK
from rlscale.config.schema import OFFPOLICY_K
from rlscale.gpus import generator_gpus
from rlscale.knobs import bound_problems
from rlscale.runfolder.names import name_problem

RETIRED = {  # fields of older configs whose meaning was split: one line saying where each meaning lives now
    "offpolicy.k": f"split by mode (Sec. 3.1): PipelineRL-k's bound on staleness is {OFFPOLICY_K['pipeline']}, "
                   f"PPO-off-policy-k's batches per policy version {OFFPOLICY_K['ppo']}",
}

NAMES = ("sweep", "variant")  # they name the run's folder results/<sweep>/<variant>


def retired_problem(dotted: str) -> Optional[str]:
    """The one-line complaint about a field that older configs had, None for any other key."""
    return f"field '{dotted}': {RETIRED[dotted]}" if dotted in RETIRED else None


def _get(cfg: DictConfig, dotted: str):
    node = cfg
    for part in dotted.split("."):
        node = node[part]
    return node


def _has(cfg: DictConfig, dotted: str) -> bool:
    """Whether the config holds ``dotted``: a section typed by its option holds only that option's knobs
    (``logger.mode`` only with logger=wandb)."""
    section, _, leaf = dotted.rpartition(".")
    return leaf in (_get(cfg, section) if section else cfg)


def validate(cfg: DictConfig) -> List[str]:
    """Return every problem found (empty when the config is usable): the bounds each field declares
    (``rlscale.knobs``, on the typed config), the names of every axis, then what involves several fields."""
    problems: List[str] = bound_problems(OmegaConf.to_object(cfg), "")
    problems += [f"field '{key}': {problem}" for key in NAMES if (problem := name_problem(cfg[key]))]
    problems += [problem for axis in AXES
                 if _has(cfg, axis.field) and (problem := axis.problem(_get(cfg, axis.field)))]
    if cfg.model.name == "tiny" and cfg.model.num_heads > 0 and cfg.model.hidden_size % cfg.model.num_heads:
        problems.append(f"field 'model.hidden_size': must be a multiple of model.num_heads ({cfg.model.num_heads}), "
                        f"got {cfg.model.hidden_size}")
    budget = cfg.generation.max_think_tokens + cfg.generation.max_answer_tokens
    if cfg.length.name == "penalty" and not cfg.length.l_cache <= cfg.length.l_max <= budget:
        problems.append(f"field 'length.l_cache': need 0 < l_cache <= l_max <= max_think_tokens + "
                        f"max_answer_tokens ({budget}), got l_cache={cfg.length.l_cache}, l_max={cfg.length.l_max}")
    if cfg.length.name == "interruption":
        window = list(cfg.length.window)
        if len(window) != 2 or window[0] > window[1]:
            problems.append(f"field 'length.window': must be [lo, hi] with 0 < lo <= hi, got {window}")
    think = cfg.generation.think
    if not (isinstance(think, bool) or think == "auto"):
        problems.append(f"field 'generation.think': must be true, false or auto, got {think!r}")
    elif think is False and cfg.length.name == "interruption":
        problems.append("field 'generation.think': false, but length=interruption needs a thinking trace; "
                        "use length=penalty (or length.name=none) with thinking off")
    checkpointing = cfg.engine.activation_checkpointing
    if not (isinstance(checkpointing, bool) or checkpointing == "auto"):
        problems.append(f"field 'engine.activation_checkpointing': must be true, false or auto, got {checkpointing!r}")
    rows = cfg.engine.generator_rows
    if not (rows == "auto" or (isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0)):
        problems.append(f"field 'engine.generator_rows': must be a count >= 0 or auto, got {rows!r}")
    if not cfg.launcher.signal_delay_s < 60 * cfg.launcher.timeout_min:
        problems.append(f"field 'launcher.signal_delay_s': must be below launcher.timeout_min x 60 "
                        f"({60 * cfg.launcher.timeout_min}), got {cfg.launcher.signal_delay_s}")
    problems += file_problems("task", cfg.task) or task_problems("task", cfg.task)
    problems += mixture_problems(cfg)
    problems += downstream_problems(cfg)
    problems += job_shape_problems(cfg)
    problems += missing_packages(cfg)
    if len(cfg.optim.betas) != 2:
        problems.append(f"field 'optim.betas': must be two values in [0, 1), got {list(cfg.optim.betas)}")
    return problems


def mixture_problems(cfg: DictConfig) -> List[str]:
    """``task.name=mixture`` takes at least two ``mixture.parts``, and parts are read only then; each part has a
    name of its own (a metric suffix), a positive weight and a task that is not itself a mixture."""
    parts = cfg.mixture.parts
    if cfg.task.name != "mixture":
        return [f"field 'mixture.parts': {len(parts)} parts, but task.name={cfg.task.name}; use task.name=mixture "
                "(task=math_code mixes math and code)"] if parts else []
    problems = [] if len(parts) >= 2 else [f"field 'mixture.parts': task.name=mixture needs at least two parts, "
                                           f"got {len(parts)}"]
    problems += named_tasks_problems("mixture.parts", parts, set())
    return problems


def downstream_problems(cfg: DictConfig) -> List[str]:
    """Each ``eval.downstream`` set has a name of its own, apart from the mixture's parts (both name metrics
    ``val_reward/<name>``), at least one sample per prompt, and a task that is not a mixture."""
    sets = cfg.eval.downstream
    parts = {part.name for part in cfg.mixture.parts} if cfg.task.name == "mixture" else set()
    return named_tasks_problems("eval.downstream", sets, parts)


def named_tasks_problems(where: str, entries, taken: set) -> List[str]:
    """The checks every list of named tasks shares (mixture parts, downstream sets): a safe name, not taken by an
    earlier entry or by ``taken``; an answer format the registry knows and a task that is not a mixture (its name is
    checked as the task is typed, ``rlscale.config.compose``)."""
    problems: List[str] = []
    seen = set(taken)
    for i, entry in enumerate(entries):
        at = f"{where}[{i}]"
        if (problem := name_problem(entry.name)) is not None:
            problem = problem.replace("(it names a folder)", "(it names metrics: val_reward/<name>)")
            problems.append(f"field '{at}.name': {problem}")
        elif entry.name in seen:
            problems.append(f"field '{at}.name': {entry.name!r} names an earlier "
                            f"{'part' if entry.name in taken else 'entry'} too")
        seen.add(entry.name)
        if entry.task.name == "mixture":
            problems.append(f"field '{at}.task.name': a mixture cannot be nested")
        if (problem := ANSWER_FORMAT.problem(entry.task.answer_format)) is not None:  # its name: as it was typed
            problems.append(problem.replace("field '", f"field '{at}.", 1))
        problems += file_problems(f"{at}.task", entry.task) or task_problems(f"{at}.task", entry.task)
    return problems


def file_problems(where: str, task: DictConfig) -> List[str]:
    """A ``math`` task reads a file: its ``path`` must be set."""
    if task.name == "math" and (OmegaConf.is_missing(task, "path") or task.path is None):
        return [f"field '{where}.path': not set; task.name=math reads a .jsonl or .parquet file (or 'champ')"]
    return []


def task_problems(where: str, task: DictConfig) -> List[str]:
    """What the task class ``task.name`` selects finds wrong with its arguments before any compute: its
    classmethod ``config_problems(cfg, where)``, where it has one (reasoning_gym and math do; the code task's checks
    are the bounds of its fields)."""
    if task.name == "mixture":
        return []  # the mixture's parts are checked one by one (a name TASK refuses never got this far: compose)
    check = getattr(TASK.load(task.name), "config_problems", None)
    return check(OmegaConf.to_object(task), where) if check else []


def job_shape_problems(cfg: DictConfig) -> List[str]:
    """A run over several trainer ranks (``launcher.nodes`` x ``launcher.tasks_per_node`` less the generator tasks)
    needs the DeepSpeed learner, several nodes need SLURM, and on CUDA each task of a node needs a GPU of its own,
    and PipelineRL's generator processes GPUs beyond the trainers' (``rlscale.gpus.generator_gpus``)."""
    launcher = cfg.launcher
    if launcher.nodes < 1 or launcher.tasks_per_node < 1 or launcher.generator_tasks < 0:
        return []  # said by the fields' bounds
    ranks = launcher.nodes * launcher.tasks_per_node - launcher.generator_tasks
    problems = generator_task_problems(cfg)
    if problems:
        return problems
    if ranks > 1 and cfg.engine.learner != "deepspeed":
        field_name = "launcher.tasks_per_node" if launcher.tasks_per_node > 1 else "launcher.nodes"
        problems.append(f"field '{field_name}': {ranks} trainer ranks need engine.learner=deepspeed "
                        f"(got engine.learner={cfg.engine.learner})")
    if launcher.nodes > 1 and launcher.name != "slurm":
        problems.append(f"field 'launcher.nodes': {launcher.nodes} nodes need launcher=slurm "
                        f"(launcher={launcher.name} runs on this machine alone)")
    if cfg.engine.device == "cuda" and launcher.tasks_per_node > max(1, launcher.gpus_per_node):
        problems.append(f"field 'launcher.tasks_per_node': {launcher.tasks_per_node} ranks per node with "
                        f"engine.device=cuda need as many GPUs, got launcher.gpus_per_node={launcher.gpus_per_node}")
    elif (cfg.engine.device == "cuda" and cfg.offpolicy.name == "pipeline" and launcher.tasks_per_node > 1
          and not launcher.generator_tasks):
        try:  # PipelineRL's generators take the node's GPUs after the trainer ranks'
            generator_gpus(launcher.tasks_per_node, launcher.gpus_per_node, cfg.offpolicy.num_generators)
        except ValueError as err:
            problems.append(str(err))
    return problems


def generator_task_problems(cfg: DictConfig) -> List[str]:
    """``launcher.generator_tasks`` > 0: PipelineRL's generators, one per task, are the job's last tasks, so the
    job keeps at least one trainer rank and ``offpolicy.num_generators`` counts those tasks."""
    launcher, tasks = cfg.launcher, cfg.launcher.nodes * cfg.launcher.tasks_per_node
    if not launcher.generator_tasks:
        return []
    field_name = "field 'launcher.generator_tasks'"
    if cfg.offpolicy.name != "pipeline":
        return [f"{field_name}: generator tasks serve PipelineRL (offpolicy=pipeline), got "
                f"offpolicy={cfg.offpolicy.name}"]
    if launcher.generator_tasks >= tasks:
        return [f"{field_name}: {launcher.generator_tasks} of the job's {tasks} tasks (launcher.nodes x "
                "launcher.tasks_per_node) leave no trainer rank"]
    if cfg.offpolicy.num_generators != launcher.generator_tasks:
        return [f"field 'offpolicy.num_generators': {cfg.offpolicy.num_generators}, but the generators are the "
                f"job's {launcher.generator_tasks} generator tasks (launcher.generator_tasks); set both alike"]
    return []
