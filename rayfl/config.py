"""The typed configuration tree of a run, loaded from YAML with overrides.

A run is configured by one YAML file (see ``examples/``) validated into
:class:`RunConfig`, a tree of frozen pydantic models, one per section. Command-line
overrides use dotted paths: ``rayfl run cfg.yaml rounds=5 data.num_clients=100``.
A bad value raises :class:`ConfigError`, whose message names the field path, the
bad value and the allowed values in a few lines.

The sections live beside their features (``rayfl/wireless/config.py``,
``rayfl/learning/config.py``, ``rayfl/session_config.py``, ...) and are re-exported
here; this module keeps :class:`RunConfig`, its cross-section checks,
:func:`load_config`, the overrides and the error formatting.

Example:
    >>> cfg = load_config({"rounds": 3}, ["data.num_clients=8", "algorithm.lr=0.1"])
    >>> (cfg.rounds, cfg.data.num_clients, cfg.algorithm.lr)
    (3, 8, 0.1)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)

from rayfl.algorithms.config import AlgorithmConfig, FedAvgConfig, algorithm_names
from rayfl.compression.config import CompressionConfig
from rayfl.config_numbers import booleans_as_numbers, union_kind
from rayfl.config_semantics import check_semantics
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.data.config import DataConfig
from rayfl.hierarchy.config import TopologyConfig as HierarchicalTopologyConfig
from rayfl.learning.config import ModelConfig
from rayfl.names import UnknownNameError, unknown_name_message
from rayfl.output_config import OutputConfig
from rayfl.privacy.config import PrivacyConfig
from rayfl.rl.config import RLConfig
from rayfl.scheduler_config import SchedulerConfig, topology_policy
from rayfl.session_config import RayConfig
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
]


class ConfigError(ValueError):
    """A configuration problem, printed by the CLI in a few lines, no traceback."""


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class FlatTopologyConfig(_Section):
    """Clients and one cloud server (the default; behaviour of every other run)."""

    kind: Literal["flat"] = "flat"


TopologyConfig = Annotated[
    FlatTopologyConfig | HierarchicalTopologyConfig | D2DTopologyConfig,
    Field(discriminator="kind"),
]
"""The ``topology`` section: a discriminated union on ``kind`` (default flat)."""


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
        default_factory=FlatTopologyConfig,
        description="flat (clients + cloud), hierarchical (devices → edge actors → "
        "cloud, H2FDP, rayfl.hierarchy) or d2d (server-free, pFedWN, rayfl.d2d).",
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
        "values, e.g. {privacy.epsilon: [1, 4, null]}; empty = one run.",
    )

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
        if self.topology.kind == "d2d":
            from rayfl.d2d.config import check_d2d_run

            check_d2d_run(self)
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
        if self.topology.kind == "hierarchical":
            self._check_hierarchical()
        self._check_rl()
        check_semantics(self)
        return self

    def _check_hierarchical(self) -> None:
        """Sections a hierarchical run replaces by its own (topology.dp, .cost...)."""
        if self.privacy.mechanism != "none" or self.compression.quantize_bits:
            raise ValueError(
                "topology.kind=hierarchical has its own DP (topology.dp): set "
                "privacy.mechanism=none and no compression"
            )
        if self.wireless is not None:
            raise ValueError(
                "topology.kind=hierarchical uses topology.cost for the device→edge "
                "links; remove the `wireless` section"
            )

    def _check_policy(self) -> None:
        """The scheduling policy fits the topology, and its params fit the policy.

        Star runs (``topology.kind=flat``): without a ``wireless`` section only
        the client-set rules (``rayfl.scheduler_config.BUILTIN_POLICIES``) run;
        with one, ``all`` still chooses a client set and every other policy fills
        the env's subchannel assignment (plus power levels when
        ``wireless.power_levels > 1`` and per-client controls when
        ``scheduler.controls`` is set or the policy ``uses_controls``).
        Hierarchical and D2D runs check the policy against their topology.
        Unknown names are refused earlier, by the fields' own validators.
        """
        from rayfl.registry import (
            check_params,
            check_policy,
            policy_class,
        )

        kind, policy = self.topology.kind, self.scheduler.policy
        if kind == "flat":
            from rayfl.scheduler_config import BUILTIN_POLICIES

            check_policy(policy, topology="star")  # meant for the star at all?
            if self.wireless is None and policy not in BUILTIN_POLICIES:
                raise ValueError(
                    f"scheduler.policy={policy} schedules subchannels: it needs a "
                    "`wireless` section (without one, use one of "
                    f"{', '.join(BUILTIN_POLICIES)})"
                )
            check_policy(policy, topology="star", parts=self._star_parts())
            self._check_clients_per_round(policy)
        else:
            check_policy(policy, topology=kind)
        if kind == "hierarchical" and getattr(
            policy_class(policy), "uses_controls", False
        ):
            raise ValueError(
                f"scheduler.policy={policy} sets per-client controls; the hierarchy drives "
                "policies that act on the observation alone (e.g. random, "
                "round_robin, best_channel)"
            )
        check_params(policy, self.scheduler.params)

    def _check_rl(self) -> None:
        """Check the ``rl`` section against the run's topology, one line per problem.

        ``rayfl train-policy`` trains on the star's env, the hierarchy's (edge by
        edge) or a D2D config with one target; the reward must exist there and
        the baselines must run on that topology.

        Raises:
            ValueError: On the first problem found.
        """
        rl = self.rl
        if rl is None:
            return
        from rayfl.registry import check_policy
        from rayfl.rewards import check_reward

        topology = "star" if self.topology.kind == "flat" else self.topology.kind
        check_reward(rl.reward, topology=topology, mode=rl.mode, field="rl.reward")
        if self.topology.kind == "d2d" and self.topology.target == "all":
            raise ValueError(
                "rl: training on D2D needs one target (topology.target: an id or "
                "random); got topology.target=all"
            )
        for name in rl.baselines:
            check_policy(name, topology=topology, field="rl.baselines")
        if rl.controls:
            self._check_rl_controls(topology, rl.mode)
        if rl.neighbor_cost and topology != "d2d":
            raise ValueError(
                "rl.neighbor_cost prices D2D neighbor selections; it needs "
                f"topology.kind=d2d (got {topology})"
            )

    def _check_rl_controls(self, topology: str, mode: str) -> None:
        """``rl.controls`` needs the star and emulate mode.

        (Every star algorithm declares at least ``lr``.)
        """
        if topology != "star" or self.wireless is None:
            raise ValueError(
                "rl.controls learns the star's per-client controls; it needs "
                f"topology.kind=flat with a wireless section (got {topology})"
            )
        if mode != "emulate":
            raise ValueError(
                "rl.controls needs rl.mode=emulate: the surrogate has no model of "
                "the controls, so there would be nothing to learn"
            )

    def _check_clients_per_round(self, policy: str) -> None:
        """K (``scheduler.clients_per_round``) is read only by a client-set rule."""
        from rayfl.registry import policy_parameters

        in_params = "clients_per_round" in self.scheduler.params
        if self.wireless is not None and policy != "all":  # the policy fills K
            k = self.scheduler.clients_per_round
            name = (
                "scheduler.params.clients_per_round"
                if in_params
                else (None if k is None else f"scheduler.clients_per_round={k}")
            )
            if name is not None:
                raise ValueError(
                    f"{name} is not used by scheduler.policy={policy} with a "
                    "wireless section: the policy fills the "
                    "wireless.num_subchannels subchannels; drop it"
                )
        elif in_params and "clients_per_round" in policy_parameters(policy):
            raise ValueError(  # the field would win
                "scheduler.params.clients_per_round: set scheduler.clients_per_round "
                f"instead (it decides k for scheduler.policy={policy})"
            )

    def _star_parts(self) -> set[str]:
        """The action parts a star run offers its policy (see ``_check_policy``)."""
        if self.wireless is None or self.scheduler.policy == "all":
            return {"participants"}
        from rayfl.registry import policy_class

        parts = {"assignment"}
        if self.wireless.power_levels > 1:
            parts.add("power")
        cls = policy_class(self.scheduler.policy)
        if self.scheduler.controls or getattr(cls, "uses_controls", False):
            parts.add("controls")
        return parts

    def to_dict(self) -> dict[str, Any]:
        """Return the resolved config as plain YAML-able data."""
        return self.model_dump(mode="json")


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like key.path=value")
    key, raw = item.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ConfigError(f"override {item!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"override {item!r}: cannot parse value: {e}") from None
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
    node = tree
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def _allowed_keys(loc: tuple[Any, ...]) -> list[str] | None:
    """The keys of the section at ``loc[:-1]`` (a union's tag picks its member)."""
    models: list[Any] = [RunConfig]
    for part in loc[:-1]:
        tagged = [m for m in models if union_kind(m) == part]
        if tagged:
            models = tagged
            continue
        fields = getattr(models[0], "model_fields", None)
        if len(models) != 1 or not fields or part not in fields:
            return None
        ann = fields[part].annotation
        args = [a for a in getattr(ann, "__args__", ()) if hasattr(a, "model_fields")]
        models = args or [ann]
    fields = getattr(models[0], "model_fields", None) if len(models) == 1 else None
    return sorted(fields) if fields else None


def _unknown_name(path: str, err: Any) -> str | None:
    """The "did you mean" message of an unknown name (a Literal or a kind), or None."""
    ctx = err.get("ctx") or {}
    if isinstance(ctx.get("error"), UnknownNameError):
        return str(ctx["error"])
    if err["type"] == "literal_error":
        expected, name = ctx.get("expected", ""), err.get("input")
    elif err["type"] == "union_tag_invalid":
        expected, name = ctx.get("expected_tags", ""), ctx.get("tag")
        path = f"{path}.{ctx.get('discriminator', 'kind')}".replace("'", "")
    else:
        return None
    allowed = re.findall(r"'([^']*)'", str(expected))
    if not isinstance(name, str) or not allowed:
        return None
    return unknown_name_message(path, name, allowed)


def _format(error: ValidationError) -> str:
    tags = {  # union members' tags pydantic puts in the location
        "algorithm": set(algorithm_names()),
        "topology": {"flat", "hierarchical", "d2d"},
    }
    lines = []
    for err in error.errors():
        loc = raw_loc = tuple(err["loc"])
        if len(loc) > 1 and loc[1] in tags.get(str(loc[0]), ()):
            loc = (loc[0],) + loc[2:]
        path = ".".join(str(p) for p in loc) or "<config>"
        msg = err["msg"].removeprefix("Value error, ")
        unknown = _unknown_name(path, err)
        if unknown:
            lines.append(unknown)
        elif err["type"] == "extra_forbidden":
            allowed = _allowed_keys(raw_loc)
            hint = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
            lines.append(f"{path}: unknown key{hint}")
        elif loc == ():  # a cross-section check: its message names the fields
            lines.append(msg)
        elif err["type"] in ("model_type", "dict_type"):
            lines.append(f"{path}: {msg}")
        elif isinstance(err.get("input"), dict):  # a section's own cross-field check
            lines.append(msg if msg.startswith(f"{path}.") else f"{path}: {msg}")
        else:
            lines.append(f"{path}: {msg} (got {err.get('input')!r})")
    return "invalid config:\n  " + "\n  ".join(lines)


def load_config(
    source: str | Path | Mapping[str, Any] | RunConfig | None = None,
    overrides: Iterable[str] | Mapping[str, Any] = (),
) -> RunConfig:
    """Load, override and validate a run configuration.

    Args:
        source: A YAML path, a mapping, a ``RunConfig``, or None for the defaults.
        overrides: ``"a.b=value"`` strings (values parsed as YAML), or a mapping of
            dotted keys (``{"data.num_clients": 100}``) to values.

    Returns:
        The validated, frozen config.

    Raises:
        ConfigError: For a missing file, bad YAML or any invalid field; the message
            names each field path and what is allowed.
    """
    if isinstance(source, RunConfig):
        tree: dict[str, Any] = source.to_dict()
    elif source is None:
        tree = {}
    elif isinstance(source, Mapping):
        tree = yaml.safe_load(yaml.safe_dump(dict(source))) or {}
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        try:
            tree = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        if not isinstance(tree, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections")
    if not isinstance(overrides, Mapping):
        overrides = parse_overrides(overrides)
    for key, value in overrides.items():
        _set_path(tree, [p for p in key.split(".") if p], value)
    try:
        return RunConfig.model_validate(tree)
    except ValidationError as e:
        raise ConfigError(_format(e)) from None
