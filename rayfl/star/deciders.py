"""The star's one decider: its registered policy, built with the run's context.

A client-set policy (action part ``participants`` only, e.g. ``all``; or any
client-set-capable policy on ideal links) reads eligibility and the round,
an observation the decider builds itself (:class:`StarParticipants`); any
other gets the scheduling env's spaces and action rules (:class:`StarActions`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from rayfl.registry import build_policy, client_set_only, policy_class
from rayfl.star.actions import StarActions, StarParticipants
from rayfl.star.context import config_context, star_context
from rayfl.star.run_checks import star_policy_parts

__all__ = [
    "check_policy_build",
    "chooses_participants",
    "env_policy",
    "make_deciders",
    "policy_needs_controls",
    "star_policy",
]


def policy_needs_controls(cfg: Any) -> bool:
    """Whether ``cfg``'s policy needs an env exposing the algorithm's controls.

    A policy that sets per-client knobs (e.g. minmax: lr, personal_lr, lam)
    declares ``uses_controls``; ``scheduler.controls`` forces them on.
    """
    policy = policy_class(cfg.scheduler.policy)
    return cfg.scheduler.controls or bool(getattr(policy, "uses_controls", False))


def chooses_participants(cfg: Any) -> bool:
    """Whether the star's policy picks a client set, not subchannels.

    A client-set-only policy always does (``all``); one that can fill either
    part (``random``, ``round_robin``) does on ideal links (no ``wireless``).
    """
    return "assignment" not in star_policy_parts(cfg)


def star_policy(cfg: Any, spaces: Any, context: Any, **params: Any) -> Any:
    """``cfg``'s policy for ``spaces`` (an env or a pair) with ``context``, reset."""
    return build_policy(
        cfg.scheduler.policy,
        spaces,
        params={**cfg.scheduler.params, **params},
        context=context,
        seed=cfg.seed,
    )


def env_policy(cfg: Any, env: Any) -> Any:
    """Build ``cfg``'s policy for a reset emulate-mode env, as a run does.

    The policy gets the run constants (model size, link, DP targets) of the
    env's system as its context and is reset with ``cfg.seed``.
    """
    return star_policy(cfg, env, star_context(env.backend.system))


def make_deciders(cfg: Any, system: Any, policy_decider: Any) -> list[Any]:
    """Return the star's one decider: its registered policy, with the run's context.

    Args:
        cfg: The run config.
        system: The star's built engine.
        policy_decider: ``policy_decider(policy, to_schedule, observe=None)``.
    """
    context = star_context(system)
    if chooses_participants(cfg):
        wireless = cfg.wireless
        rules = StarParticipants(
            system.num_clients, wireless.num_subchannels if wireless else 0
        )
        k = cfg.scheduler.clients_per_round  # the field wins over params
        policy = star_policy(cfg, rules.spaces(), context, clients_per_round=k)
        return [
            policy_decider(policy, rules.to_schedule, partial(rules.observe, system))
        ]
    actions = StarActions.from_config(cfg, controls=policy_needs_controls(cfg))
    policy = star_policy(cfg, actions.spaces(), context)
    return [policy_decider(policy, actions.to_schedule)]


def check_policy_build(cfg: Any) -> None:
    """Build ``cfg``'s policy once on the scheduling env's spaces (a preflight).

    Client-set rules and runs without ``wireless`` are checked by the config
    alone; the policy gets a context as a run gives it (the model size is not
    known yet).

    Raises:
        ValueError, TypeError, FileNotFoundError: If the policy cannot be built.
    """
    if cfg.wireless is None or client_set_only(cfg.scheduler.policy):
        return
    spaces = StarActions.from_config(cfg, controls=policy_needs_controls(cfg))
    build_policy(
        cfg.scheduler.policy,
        spaces.spaces(),
        params=cfg.scheduler.params,
        context=config_context(cfg),
    )
