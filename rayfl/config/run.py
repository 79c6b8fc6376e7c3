"""RunConfig: the whole run's typed tree, its cross-section checks and load_config.

Re-exported by :mod:`rayfl.config` (import from there). The sections live beside
their features and are re-exported here too; this module keeps
:class:`RunConfig`, its cross-section checks, :func:`load_config` and the
overrides.

Example:
    >>> cfg = load_config({"rounds": 3}, ["data.num_clients=8", "algorithm.lr=0.1"])
    >>> (cfg.rounds, cfg.data.num_clients, cfg.algorithm.lr)
    (3, 8, 0.1)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)

from rayfl.algorithms.config import AlgorithmConfig, FedAvgConfig
from rayfl.cluster.config import RayConfig
from rayfl.compression.config import CompressionConfig
from rayfl.config.errors import MAX_LINE, format_validation_error
from rayfl.config.loader import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    ConfigError,
    clip,
    clip_text,
    load_yaml,
    read_config_file,
)
from rayfl.config.numbers import booleans_as_numbers
from rayfl.config.scheduler import SchedulerConfig, topology_policy
from rayfl.config.semantics import check_semantics
from rayfl.config.sweep import (
    check_variants,
    replaced_sweep_lines,
    set_dotted,
    take_swept,
)
from rayfl.config.topology import (
    TOPOLOGY_DESCRIPTION,
    default_topology,
    mark_built,
    refresh,
    topology_union,
)
from rayfl.data.config import DataConfig
from rayfl.learning.config import ModelConfig
from rayfl.privacy.config import PrivacyConfig
from rayfl.registry import topology_of
from rayfl.rl.config import RLConfig
from rayfl.rundir.config import OutputConfig
from rayfl.wireless.config import WirelessConfig

__all__ = [
    "ConfigError",
    "ModelConfig",
    "OutputConfig",
    "RayConfig",
    "RunConfig",
    "SchedulerConfig",
    "load_config",
    "parse_overrides",
    "replaced_sweep_lines",
]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


if TYPE_CHECKING:  # what a type checker sees: the shipped sections
    from rayfl.d2d.config import D2DTopologyConfig
    from rayfl.hierarchy.config import TopologyConfig as HierarchicalTopologyConfig
    from rayfl.star.config import StarTopologyConfig

    TopologyConfig = StarTopologyConfig | HierarchicalTopologyConfig | D2DTopologyConfig
else:
    TopologyConfig = topology_union()
"""The ``topology`` section: the registered topologies' sections, a union
discriminated on ``kind`` (:mod:`rayfl.config.topology`; default flat)."""


class RunConfig(_Section):
    """One run: data, model, algorithm, scheduling, channel, privacy, Ray, output."""

    name: str = Field(
        "run",
        min_length=1,
        max_length=200,
        description="Run name (prefix of its directory). Characters other than "
        "letters, digits and `._+=,@-` become `_` in the directory name, so the "
        "run directory is always directly inside output.dir. No control "
        "characters.",
    )
    seed: int = Field(
        0,
        ge=0,
        le=2**63 - 1,
        description="Seed of every random draw (DESIGN.md keys), 0..2^63-1.",
    )
    rounds: int = Field(
        10, ge=1, le=10**8, description="Communication rounds T, 1..1e8."
    )
    eval_every: int = Field(
        1,
        ge=1,
        description="Evaluate all clients every this many rounds (and the last).",
    )
    eval_clients: int | None = Field(
        None,
        ge=1,
        description="Evaluate a uniform sample of this many clients, drawn anew "
        "at each evaluation from (seed, round) (rayfl.eval_sample); rounds.parquet "
        "then has the aggregates' standard errors (global_acc_se, ...). At most "
        "data.num_clients (which evaluates every client, as None does). Star "
        "topology only: refused on hierarchical and d2d runs, which evaluate "
        "every device or the targets.",
    )
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    algorithm: AlgorithmConfig = Field(default_factory=FedAvgConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    wireless: WirelessConfig | None = Field(
        None,
        description="Wireless channel model; None = ideal links (no latency, no errors).",
    )
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)
    compression: CompressionConfig = Field(default_factory=CompressionConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    topology: TopologyConfig = Field(
        default_factory=default_topology, description=TOPOLOGY_DESCRIPTION
    )
    output: OutputConfig = Field(default_factory=OutputConfig)
    rl: RLConfig | None = Field(
        None,
        description="Training of the learned scheduler (`rayfl train-policy`); "
        "ignored by `rayfl run`.",
    )
    sweep: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Grid of overrides to run as separate variants, dotted key → "
        "values, e.g. {privacy.epsilon: [1, 4, null]}; empty = one run. Every "
        "variant is validated before Ray starts. An override of a swept key "
        "(`rayfl run cfg.yaml privacy.epsilon=2.5`) replaces that axis: the "
        "command line wins, `rayfl run` says so on the console, and the run "
        "records it in `replaced_sweep` (config.yaml and summary.json); with no "
        "axis left it is a single run. `sweep.privacy.epsilon=[1, 2]` sets an axis.",
    )
    replaced_sweep: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Set by load_config, not by hand: the sweep axes an override "
        "replaced, swept key → {override: 'key=value', values: the sweep's values}.",
    )

    def __init__(self, **data: Any) -> None:
        refresh(RunConfig)  # a topology registered since: rebuild the union first
        super().__init__(**data)

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> RunConfig:
        """Validate ``obj`` (the topology union first takes in new registrations)."""
        refresh(RunConfig)
        return super().model_validate(obj, **kwargs)

    @model_validator(mode="wrap")
    @classmethod
    def _policy_fields(
        cls, data: Any, handler: ModelWrapValidatorHandler[RunConfig]
    ) -> RunConfig:
        """The topology's default policy, validate, then check the policy."""
        if isinstance(data, dict):
            booleans = booleans_as_numbers(data, cls)
            if booleans:
                raise ValueError("; ".join(booleans))
            data = topology_policy(data)
        cfg = handler(data)
        cfg._check_policy()
        return cfg

    @model_validator(mode="after")
    def _check_cross(self) -> RunConfig:
        k = self.scheduler.clients_per_round
        if k is not None and k > self.data.num_clients:
            raise ValueError(
                f"scheduler.clients_per_round must be <= data.num_clients "
                f"({self.data.num_clients}), got {k}"
            )
        for key, values in self.sweep.items():
            if not values:
                raise ValueError(f"sweep.{key} must list at least one value")
        if self.model.kind == "cnn" and self.data.dataset == "synthetic":
            raise ValueError(
                "model.kind=cnn needs image data; data.dataset=synthetic is a 60-dim "
                "vector: use model.kind=mlr or mlp"
            )
        if self.model.kind == "cnn" and self.data.dataset == "digits":
            raise ValueError(
                "model.kind=cnn needs images of at least 16×16; data.dataset=digits "
                "is 8×8: use model.kind=mlr or mlp"
            )
        self._check_rl()
        topology_of(self).check_run(self)  # the topology's own rules
        check_semantics(self)
        return self

    def _check_policy(self) -> None:
        """The scheduling policy fits the topology, and its params fit the policy.

        In order: the policy is meant for the topology at all
        (:func:`rayfl.registry.check_policy`); the topology's own rules
        (its plug-in's ``check_scheduler``: the star's without a ``wireless``
        section, ``scheduler.clients_per_round``...); the action parts this run
        offers (its plug-in's ``policy_parts``) give the policy what it needs;
        a policy that ``uses_controls`` gets them; its params fit it. Unknown
        names are refused earlier, by the fields' own validators.
        """
        from rayfl.registry import check_params, check_policy, policy_class

        plugin, policy = topology_of(self), self.scheduler.policy
        check_policy(policy, topology=plugin.name)  # meant for this topology at all?
        plugin.check_scheduler(self)
        parts = plugin.policy_parts(self)
        check_policy(policy, topology=plugin.name, parts=parts)
        if "controls" not in parts and getattr(
            policy_class(policy), "uses_controls", False
        ):
            raise ValueError(
                f"scheduler.policy={policy} sets per-client controls; "
                f"topology.kind={self.topology.kind} offers none: it drives "
                "policies that act on the observation alone (e.g. random, "
                "round_robin, best_channel)"
            )
        check_params(policy, self.scheduler.params)

    def _check_rl(self) -> None:
        """Check the ``rl`` section against the run's topology, one line per problem.

        ``rayfl train-policy`` trains on the topology's env: the reward must
        exist there (the plug-in's ``rewards``), the topology's own rules must
        hold (its ``check_rl``: D2D's one target, ``rl.controls``,
        ``rl.neighbor_cost``...) and the baselines must run on it.

        Raises:
            ValueError: On the first problem found.
        """
        rl = self.rl
        if rl is None:
            return
        from rayfl.registry import check_policy
        from rayfl.rl.rewards import check_reward

        plugin = topology_of(self)
        check_reward(
            rl.reward,
            topology=plugin.name,
            rewards=plugin.rewards,
            mode=rl.mode,
            field="rl.reward",
        )
        plugin.check_rl(self)
        for name in rl.baselines:
            check_policy(name, topology=plugin.name, field="rl.baselines")
        if rl.controls and rl.mode != "emulate":
            raise ValueError(
                "rl.controls needs rl.mode=emulate: the surrogate has no model of "
                "the controls, so there would be nothing to learn"
            )

    def to_dict(self) -> dict[str, Any]:
        """Return the resolved config as plain YAML-able data."""
        return self.model_dump(mode="json")


mark_built(RunConfig)


def _key_path(key: str, shown: str) -> list[str]:
    """``"a.b"`` → ``["a", "b"]``; an empty part (``a..b``, ``.a``, ``a.``) is refused."""
    path = key.strip().split(".")
    if not key.strip():
        raise ConfigError(f"override {shown} has an empty key")
    if "" in path:
        raise ConfigError(
            f"override {shown}: the key {clip(key)} has an empty part "
            "(write key.path=value, one dot between names)"
        )
    return path


def _parse_override(item: str) -> tuple[list[str], Any]:
    shown = clip(item)
    if "=" not in item:
        raise ConfigError(f"override {shown} must look like key.path=value")
    key, raw = item.split("=", 1)
    path = _key_path(key, shown)
    where = f"override {shown}"
    value = load_yaml(raw, where, lines=False, root=key.strip()) if raw.strip() else ""
    return path, value


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """Parse ``["a.b=1", "c=x"]`` into ``{"a.b": 1, "c": "x"}`` (values as YAML).

    Example:
        >>> parse_overrides(["rounds=5", "data.partition=dirichlet", "ray.address=null"])
        {'rounds': 5, 'data.partition': 'dirichlet', 'ray.address': None}
    """
    parsed = {}
    for item in items:
        path, value = _parse_override(item)
        parsed[".".join(path)] = value
    return parsed


def _set_path(tree: dict[str, Any], path: list[str], value: Any) -> None:
    set_dotted(tree, path, _plain(value, ".".join(path)))


def _plain(value: Any, where: str, depth: int = 0) -> Any:
    """A copy of ``value`` as plain YAML data (dicts, lists), at most MAX_DEPTH deep."""
    if depth > MAX_DEPTH:
        raise ConfigError(f"{clip_text(where)}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        return {k: _plain(v, f"{where}.{k}", depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, int) and value.bit_length() > 120:  # as in a file
        raise ConfigError(
            f"{clip_text(where)}: {clip(value)} (at most {MAX_INT_DIGITS} digits)"
        )
    return value


def load_config(
    source: str | Path | Mapping[str, Any] | RunConfig | None = None,
    overrides: Iterable[str] | Mapping[str, Any] = (),
) -> RunConfig:
    """Load, override and validate a run configuration.

    Args:
        source: A YAML path, a mapping, a ``RunConfig``, or None for the defaults.
        overrides: ``"a.b=value"`` strings (values parsed as YAML), or a mapping of
            dotted keys (``{"data.num_clients": 100}``) to values. An override
            of a key the config's ``sweep`` sweeps replaces that axis (recorded
            in ``replaced_sweep``; see :mod:`rayfl.config.sweep`).

    Returns:
        The validated, frozen config.

    Raises:
        ConfigError: For a missing, unreadable or hostile file (see
            :mod:`rayfl.config.loader`), bad YAML, any invalid field or sweep
            variant; the message names each field path and what is allowed,
            and echoes values only in short.
    """
    if isinstance(source, RunConfig):
        tree: dict[str, Any] = source.to_dict()
    elif source is None:
        tree = {}
    elif isinstance(source, Mapping):
        tree = _plain(source, "config")
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"config file not found: {clip_text(str(path), 200)}")
        tree = read_config_file(path) or {}
        if not isinstance(tree, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections")
    if not isinstance(overrides, Mapping):
        overrides = parse_overrides(overrides)
    replaced = take_swept(tree, overrides)
    for key, value in overrides.items():
        shown = f"{clip(key)} (a mapping's key)"
        _set_path(tree, _key_path(key, shown) if isinstance(key, str) else [key], value)
    if replaced:
        tree["replaced_sweep"] = {**(tree.get("replaced_sweep") or {}), **replaced}
    cfg = _validate(tree)
    if cfg.sweep:
        check_variants(cfg.to_dict(), cfg.sweep, _validate)
    return cfg


def _validate(tree: dict[str, Any]) -> RunConfig:
    """``RunConfig.model_validate``, any failure as a short ConfigError."""
    try:
        return RunConfig.model_validate(tree)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, RunConfig)) from None
    except ConfigError as e:
        raise ConfigError(clip_text(str(e), 1500)) from None
    except Exception as e:  # a validator's own bug or an exotic value: still one line
        raise ConfigError(
            f"invalid config:\n  {clip_text(str(e), MAX_LINE)} ({type(e).__name__})"
        ) from None
