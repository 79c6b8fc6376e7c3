"""The plug-in contract of a topology: :class:`TopologyPlugin`.

A topology (the star, the hierarchy, D2D, or one a user writes) is one class
deriving from :class:`TopologyPlugin`, named by one line of
:data:`rayfl.registry.TOPOLOGIES` (or :func:`rayfl.registry.register_topology`
at run time). Everything the rest of rayfl asks of a topology is a member here:
its config section, its engine strategy, its deciders, its observation keys and
action parts, its envs, its checks and its benchmark scenarios. No module
outside a topology's own folder compares against a topology's name; it asks
the plug-in instead (``topology_of(cfg).<member>``).

This module is light (no torch, no Ray, no gymnasium): config validation reads
the plug-ins' data members, and hooks import what they need when called.

Example:
    >>> from rayfl.registry import topology_of
    >>> topology_of("star").default_policy
    'all'
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["TopologyPlugin"]


class TopologyPlugin:
    """Base class of a topology plug-in; subclass it and set the data members.

    Data members (class attributes):

    | member | meaning |
    |---|---|
    | ``name`` | the value of ``topology.kind`` |
    | ``aliases`` | other accepted spellings of ``topology.kind`` (older configs) |
    | ``config`` | the ``topology:`` section model (a pydantic model with ``kind``) |
    | ``default_policy`` | ``scheduler.policy`` when the config names none |
    | ``removed_fields`` | topology fields that once named the policy (refused) |
    | ``observation_keys`` | the keys of a unit's observation (:mod:`rayfl.observation`) |
    | ``action_parts`` | the action parts a policy may fill here |
    | ``envs`` | env entry points by role: ``single``, ``flat``, ``rl_base``, ``lanes``, ``surrogate``... |
    | ``capabilities`` | optional features: ``keeps_warm`` (a warm session reuses the actors) |

    Hooks are methods; the default of each is what most topologies want.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    config: ClassVar[type[Any]]
    default_policy: ClassVar[str]
    removed_fields: ClassVar[tuple[str, ...]] = ()
    observation_keys: ClassVar[tuple[str, ...]]
    action_parts: ClassVar[frozenset[str]]
    envs: ClassVar[Mapping[str, str]] = {}
    capabilities: ClassVar[frozenset[str]] = frozenset()

    def __repr__(self) -> str:
        return f"<topology {self.name!r}>"

    # ------------------------------------------------------------ engine, runner
    def strategy(self) -> Any:
        """Return a new engine strategy (a :class:`rayfl.system.RoundStrategy`)."""
        raise NotImplementedError(f"topology {self.name!r} has no engine strategy")

    def context(self, cfg: Any, system: Any = None) -> Any:
        """Return the :class:`rayfl.observation.SystemContext` a policy gets.

        Args:
            cfg: The run config.
            system: The built system (its model size...), or None before one
                is built (a config check: the model size is then 1).
        """
        from rayfl.observation import SystemContext

        return SystemContext(
            topology=self.name,
            seed=int(cfg.seed),
            rounds=int(cfg.rounds),
            model_dim=1 if system is None else int(system.dim),
        )

    def deciders(self, cfg: Any, system: Any, policy_decider: Any) -> list[Any]:
        """Return one decider per decision unit of ``system``, in unit order.

        Args:
            cfg: The run config.
            system: The run's built engine.
            policy_decider: ``policy_decider(policy, to_schedule, observe=None)``
                wraps a policy (``rayfl.engine.deciders.PolicyDecider``).
        """
        raise NotImplementedError(f"topology {self.name!r} has no deciders")

    def loop_settings(self, cfg: Any, base: Any) -> Any:
        """Return the round loop's settings (``rayfl.engine.loop.LoopSettings``).

        ``base`` holds the settings read from the config; a topology returns
        it changed (``dataclasses.replace``) where its loop differs.
        """
        return base

    def plots(self, cfg: Any, out_dir: Path) -> list[Path]:
        """Draw the topology's own plots of a finished run into ``out_dir``.

        Called after the round plots when ``output.plots`` is on; default none.
        """
        return []

    def summary(self, system: Any, rows: list[dict[str, Any]], **common: Any) -> Any:
        """Return the run's ``summary.json`` document, or None for the shared one.

        The shared one (``rayfl.engine.rows.summary_document``) is followed by
        the system's extra files (``system.write_extra``); a topology returning
        its own document writes no extra files.

        Args:
            system: The run's engine.
            rows: The ``rounds.parquet`` rows so far.
            **common: ``name``, ``status``, ``error``, ``total_s``.
        """
        return None

    def check_policy_build(self, cfg: Any) -> None:
        """Build ``cfg``'s policy once, before a comparison runs (default: nothing).

        Raises:
            ValueError, TypeError, FileNotFoundError: If the policy cannot be built.
        """

    def env_policy(self, cfg: Any, env: Any) -> Any:
        """Return ``cfg``'s policy for a reset env of this topology, as a run builds it."""
        raise NotImplementedError(f"topology {self.name!r} builds no env policy")

    # -------------------------------------------------------------------- config
    #: The rewards (``rayfl.rl.rewards.REWARDS``) its envs can compute; None: all.
    rewards: ClassVar[frozenset[str] | None] = None
    #: The optional ``rl`` features it trains with: ``controls`` (the policy
    #: also sets per-client controls; needs a ``wireless`` section) and
    #: ``neighbor_cost`` (a price on neighbor selections). Others are refused.
    #: Each is also a keyword option of its RL env (``envs.rl.make_rl_env``)
    #: and a field of the ``rl`` section of the same name.
    rl_features: ClassVar[frozenset[str]] = frozenset()

    def check_run(self, cfg: Any) -> None:
        """Refuse, in one line, a run config this topology cannot run as given.

        Called by the config's cross-section validation (before Ray starts) on
        a config whose sections are each valid. Refuse a field this topology
        does not read (:meth:`refuse_unread`) rather than ignore it. Default:
        nothing to refuse.

        Raises:
            ValueError: Naming the field(s) and what to change.
        """

    def check_scheduler(self, cfg: Any) -> None:
        """Refuse ``cfg.scheduler`` where this topology has its own rules (default: none).

        Called after the policy is found meant for this topology and before
        it is checked against :meth:`policy_parts`.
        """

    def policy_parts(self, cfg: Any) -> frozenset[str]:
        """Return the action parts this run offers its policy (default: ``action_parts``)."""
        return frozenset(self.action_parts)

    def check_rl(self, cfg: Any) -> None:
        """Refuse, in one line, an ``rl`` section this topology cannot train.

        The default refuses the :attr:`rl_features` it does not declare.
        """
        rl = cfg.rl
        if rl.controls and ("controls" not in self.rl_features or cfg.wireless is None):
            raise ValueError(
                "rl.controls learns the star's per-client controls; it needs "
                f"topology.kind=star with a wireless section (got {self.name})"
            )
        if rl.neighbor_cost and "neighbor_cost" not in self.rl_features:
            raise ValueError(
                "rl.neighbor_cost prices D2D neighbor selections; it needs "
                f"topology.kind=d2d (got {self.name})"
            )

    def dp_claim(self, cfg: Any) -> Any:
        """Return this topology's own DP rules for :func:`rayfl.privacy.sensitivity.adjacency`.

        None (the default): the uplink's rules (``privacy`` and the algorithm's
        DP), as on the star. Otherwise a
        :class:`rayfl.privacy.sensitivity.DPClaim`.
        """
        return None

    def refuse_unread(
        self, cfg: Any, *, evaluates: str, clients_per_round: str
    ) -> None:
        """Refuse ``eval_clients`` and ``scheduler.clients_per_round``, which it does not read.

        Args:
            cfg: The run config.
            evaluates: What it evaluates instead (e.g. "every device").
            clients_per_round: Who chooses the uploaders instead.
        """
        kind = cfg.topology.kind
        if cfg.eval_clients is not None:
            raise ValueError(
                f"eval_clients is read by the star only: topology.kind={kind} "
                f"evaluates {evaluates}; remove eval_clients"
            )
        k = cfg.scheduler.clients_per_round
        if k is not None:
            raise ValueError(
                f"scheduler.clients_per_round={k} is not read on topology.kind={kind}: "
                f"{clients_per_round}; remove it"
            )

    # ------------------------------------------------------------ envs and RL
    def env_entry(self, role: str) -> str:
        """Return the ``"module:attr"`` of the env in ``role`` (a key of ``envs``).

        Roles (a plug-in names the ones it has; ``rl_base`` and ``rl_scores``
        have defaults):

        | role | what the entry point is |
        |---|---|
        | ``single`` | the gym id's env class, ``(config, mode=, reward=, ...)`` |
        | ``flat`` | its ``-Flat-`` id's env class |
        | ``rl_base`` | ``(cfg, mode=, reward=, **rl_features)`` → the RL stack's base env (default: ``single``) |
        | ``rl_scores`` | ``(env, selection=)`` → scores in, features out (default: ``envs.rl:score_env``) |
        | ``lanes`` | the RL vector env over emulate lanes (``make_rl_vector_env``'s arguments) |
        | ``vector`` | the gym id's vector env (``gym.make_vec``) |
        | ``surrogate`` | the surrogate dynamics of ``mode="surrogate"`` |
        | ``policies`` | ``(env, name, **params)`` → one policy per decision unit, as one callable |
        | ``multiagent`` | a PettingZoo parallel env, one agent per decision unit |

        Raises:
            ValueError: If this topology has no env in ``role``.
        """
        if role in self.envs:
            return self.envs[role]
        if role == "rl_base" and "single" in self.envs:
            return self.envs["single"]
        if role == "rl_scores":
            return "envs.rl:score_env"
        raise ValueError(
            f"topology.kind={self.name} has no {role!r} env "
            f"(it has: {', '.join(sorted(self.envs)) or 'none'})"
        )

    def rl_meta(self, cfg: Any) -> dict[str, Any]:
        """How the learned scheduler's scores become a decision on ``cfg``.

        Returns:
            ``selection``: ``"top_k"`` (the K highest eligible scores) or
            ``"positive"`` (every eligible positive score, at most K);
            ``num_subchannels``: K of one decision (None: one per client);
            ``observation_keys``: the keys a unit observes beyond the core
            ones that the policy's features read (a moving world's, the
            star's :func:`rayfl.star.moving.moving_keys`; default none).
        """
        where = cfg.wireless if cfg.wireless is not None else cfg.topology
        count = getattr(where, "num_subchannels", None)
        return {
            "selection": "top_k",
            "num_subchannels": None if count is None else int(count),
            "observation_keys": [],
        }

    def check_lanes(self, cfg: Any) -> None:
        """Raise a one-line ``ValueError`` if emulate lanes cannot run ``cfg``.

        Lanes (E FL runs stepping together on shared client hosts, the
        ``lanes`` env) exist only where the plug-in names a ``lanes`` env and
        overrides this check; the default refuses.
        """
        raise ValueError(f"lanes need a topology with lanes, got {cfg.topology.kind}")

    def learned_controls(self, cfg: Any) -> dict[str, float]:
        """The per-client controls a learned policy sets here (``rl.controls``).

        Returns:
            Each control's name → its configured value, around which the
            network's output is decoded; the default: none.
        """
        return {}

    def check_train(self, cfg: Any) -> None:
        """Raise a one-line ``ValueError`` if ``rayfl train-policy`` cannot train ``cfg``.

        Called when training starts (:meth:`check_rl` checks the ``rl``
        section when a config is loaded). The default accepts every config.
        """

    # ------------------------------------------------------------- benchmarks
    # (``rayfl bench``.) Capabilities read here: ``fits_surrogate`` (its
    # scenarios train the surrogate's fit, ``rayfl bench fit-surrogate``) and
    # ``tunes_config`` (``constant_tuned``'s constants are config keys).
    #: Action parts the benchmark's env offers (``rayfl bench policies``);
    #: None: :attr:`action_parts`.
    bench_parts: ClassVar[frozenset[str] | None] = None
    #: Keyword arguments of the benchmark's env (the ``single`` env of :attr:`envs`).
    bench_env_options: ClassVar[Mapping[str, Any]] = {}
    #: Parameters of the benchmark's ``learned_untrained`` baseline, beside
    #: ``untrained=True`` (e.g. the selection rule its policies are trained with).
    untrained_params: ClassVar[Mapping[str, Any]] = {}

    def scenarios(self) -> Mapping[str, tuple[Any, ...]]:
        """Return the benchmark's scenarios: name → ``(size, config[, breaks])``.

        ``size`` is ``small``, ``medium`` or ``large``; ``config`` a run config
        (a dict whose ``topology.kind`` is this topology); ``breaks`` says what
        the scenario stresses beyond the heuristics' assumptions. Names are
        unique over every topology (``<topology>-<size>[-variant]``). Default:
        none.
        """
        return {}

    def tunable_constants(self, cfg: Any) -> dict[str, tuple[float, float, float]]:
        """Return what the ``constant_tuned`` baseline tunes: {name: (configured, low, high)}.

        Names are the env's control names (the ``controls`` action, held
        constant), or dotted config keys when ``"tunes_config"`` is one of
        :attr:`capabilities`. Default: nothing (no ``constant_tuned`` row).
        """
        return {}

    def bench_policy(
        self, env: Any, cfg: Any, name: str, params: Mapping[str, Any], mode: str
    ) -> Any:
        """Build policy ``name`` for the benchmark's reset ``env``, as a run would.

        Args:
            env: The benchmark's env (reset; in emulate mode it holds the system).
            cfg: The scenario's run config.
            name: A registered policy name.
            params: The policy's parameters.
            mode: ``surrogate`` or ``emulate``.

        Returns:
            The policy, or None (the default): the benchmark builds it with
            :func:`rayfl.registry.build_policy` on ``env``'s spaces.
        """
        return None
