"""The ``rl`` config section: how ``rayfl train-policy`` trains the learned scheduler.

Plain pydantic (no RLlib import), so configs with an ``rl`` section load and
``rayfl run`` works without the ``rl`` extra. The defaults are the settings of
``examples/rl_scheduler.yaml``: PPO on a small surrogate system.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rayfl.text_checks import check_path

__all__ = ["RLConfig"]

#: The names of ``rayfl.rl.rewards.REWARDS`` (kept equal by a test).
Reward = Literal[
    "min_max_loss",
    "loss",
    "loss_decrease",
    "accuracy",
    "accuracy_gain",
    "jain",
    "latency",
    "energy",
]


class RLConfig(BaseModel):
    """PPO training of the learned scheduler (RLlib new API stack)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    mode: Literal["surrogate", "emulate"] = Field(
        "surrogate",
        description="Env dynamics to train on: `surrogate` (cheap loss model, "
        "envs.surrogate) or `emulate` (real FL rounds on Ray; slow).",
    )
    reward: Reward = Field(
        "min_max_loss",
        description="Env reward, the same set on every topology (rayfl.rl.rewards): "
        "min_max_loss = −max client test loss per round, loss, loss_decrease, "
        "accuracy and accuracy_gain (emulate only), jain, latency and energy (not "
        "on D2D).",
    )
    controls: bool = Field(
        False,
        description="Also learn the algorithm's per-client controls (e.g. lr, "
        "personal_lr and lam of WPFL/Ditto, sparsity of sparse_dp): each client gets "
        "its score plus one value per control, mapped onto the control's range. Star "
        "only, emulate mode only (the surrogate has no model of the controls); run "
        "the result with scheduler.controls=true.",
    )
    reward_scale: float = Field(
        1.0, gt=0, description="Multiplies every reward before PPO sees it."
    )
    neighbor_cost: float = Field(
        0.0,
        ge=0,
        description="D2D only: subtracted from each round's reward per selected "
        "neighbor (mean over the targets; envs.d2d), so the policy pays for the "
        "models it receives. Charged to the baselines in the final evaluation too.",
    )
    iterations: int = Field(
        40, ge=1, description="PPO iterations (one batch of env steps each)."
    )
    time_budget_s: float | None = Field(
        None,
        gt=0,
        description="Stop after the iteration that crosses this training wall "
        "time [s], summed over the run and its resumes (None: run all iterations).",
    )
    train_batch_size: int = Field(
        1000, ge=8, description="Env steps collected per iteration."
    )
    minibatch_size: int = Field(
        128, ge=1, description="SGD minibatch size [env steps]."
    )
    num_epochs: int = Field(10, ge=1, description="SGD passes over each batch.")
    lr: float = Field(3e-4, gt=0, description="Adam learning rate.")
    gamma: float = Field(0.9, ge=0, le=1, description="Discount factor γ per FL round.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE λ (RLlib `lambda_`).")
    clip_param: float = Field(0.2, gt=0, description="PPO ratio clip ε.")
    entropy_coeff: float = Field(
        0.0, ge=0, description="Entropy bonus weight of the PPO loss."
    )
    vf_loss_coeff: float = Field(0.5, ge=0, description="Value-loss weight.")
    hidden: list[int] = Field(
        default_factory=lambda: [64, 64],
        min_length=1,
        description="Hidden widths of the per-client score MLP (and of the value "
        "net's per-client trunk); tanh activations.",
    )
    initial_log_std: float = Field(
        0.0, description="Initial log σ of the Gaussian over client scores."
    )
    num_env_runners: int = Field(
        0,
        ge=0,
        description="Remote RLlib EnvRunner actors (0: sample in the driver); each "
        "runs its own env copy, so they spread over a Ray cluster.",
    )
    num_cpus_per_env_runner: float = Field(
        1.0,
        gt=0,
        description="Ray CPUs each remote EnvRunner reserves (with "
        "`num_env_runners` > 0): the cluster needs num_env_runners × this many "
        "free CPUs besides the driver, which also runs the learner. Fractions "
        "pack several runners on one core.",
    )
    num_envs_per_env_runner: int = Field(
        1,
        ge=1,
        description="Env copies per EnvRunner. Surrogate mode: vectorised copies. "
        "Emulate mode: lanes, E FL runs stepping in lockstep on one set of client "
        "actors (envs.rl_vector; star with fedavg/fedprox, algorithm.trainer not "
        "vectorized, eval_clients unset), so E does not multiply the CPUs; the "
        "lanes of a runner share one data partition at a time (`partition_seeds`: "
        "the partition moves on when all lanes begin an episode together). 1: one "
        "FL run per runner (any config).",
    )
    checkpoint_every: int = Field(
        5, ge=1, description="Save the RLlib checkpoint every this many iterations."
    )
    eval_episodes: int = Field(
        10,
        ge=0,
        description="Episodes (fixed seeds 10000, 10001, …) on which the trained "
        "policy and the baselines are scored at the end (0: skip); with "
        "`partition_seeds`, episode i runs on partition i mod len(partition_seeds).",
    )
    baselines: list[str] = Field(
        default_factory=lambda: [
            "random",
            "round_robin",
            "proportional_fair",
            "best_channel",
        ],
        description="Registered policies scored beside the learned one.",
    )
    surrogate_recency: float = Field(
        0.35,
        ge=0,
        description="d̄ of the surrogate's recency term (envs.surrogate): mean extra "
        "test loss [nats] of a client whose update is not in the latest global "
        "model (0 turns the term off). Calibrated on Fashion-MNIST: see the "
        "learned-scheduler page of the docs (docs/reproductions/rl_scheduler.md).",
    )
    surrogate_recency_rounds: float = Field(
        1.0,
        gt=0,
        description="κ of the recency term: rounds for the drift to build up.",
    )
    surrogate_contraction: float = Field(
        0.5,
        gt=0,
        description="c of the star surrogate (envs.surrogate): the optimality gap "
        "shrinks by c × the data share of the clients that delivered, per round. "
        "This and the next fields can be fitted to emulate rollouts with "
        "`rayfl bench fit-surrogate` (docs/learned_scheduler.md).",
    )
    surrogate_channel_weight: float = Field(
        5.0,
        ge=0,
        description="a_channel of the star surrogate: gap added per unit of the "
        "delivered clients' mean per-element error probability.",
    )
    surrogate_noise_weight: float = Field(
        1.0,
        ge=0,
        description="a_noise of the star surrogate: gap added per unit of DP "
        "noise variance over the number of delivered clients.",
    )
    surrogate_participation_scale: float = Field(
        3.0,
        gt=0,
        description="τ of the star surrogate: uploads over which a client's "
        "heterogeneity offset h_n decays (exp(−uploads/τ)).",
    )
    surrogate_floor: tuple[float, float] = Field(
        (0.2, 0.5),
        description="Range [low, high] of the star surrogate's per-client loss "
        "floor f_n* [nats], drawn uniformly per client; 0 <= low <= high.",
    )
    surrogate_heterogeneity: tuple[float, float] = Field(
        (0.0, 1.0),
        description="Range [low, high] of the star surrogate's per-client "
        "heterogeneity offset h_n [nats], drawn uniformly; 0 <= low <= high.",
    )
    init_from: str | None = Field(
        None,
        description="Start from an exported policy (a train-policy run directory, "
        "its policy/ folder or policy.npz): the surrogate → emulate curriculum. "
        "No control characters or names longer than the file system allows.",
    )
    reset_log_std: float | None = Field(
        None,
        description="With `init_from`: set the Gaussian's log σ to this value after "
        "loading (None: keep the loaded one), e.g. -1 to explore again around the "
        "loaded scores when fine-tuning. Other weights are kept as loaded.",
    )
    partition_seeds: list[int] | None = Field(
        None,
        min_length=1,
        description="Federated data partitions to train on: each env builds the "
        "partition of `data` with these seeds in turn, moving to the next one "
        "every `partition_every` episodes (envs.rl.DataPartitions; the env copies "
        "start at different seeds: copy j of env runner i of R at index "
        "j·(R+1)+i; emulate lanes share their runner's partition, runner i "
        "starting at index i). None: the one partition of the config `seed` (the "
        "run seed of every episode is drawn as before). Keep them apart from "
        "the evaluation seeds.",
    )
    partition_every: int = Field(
        1,
        ge=1,
        description="Episodes on one partition before moving to the next of "
        "`partition_seeds`. Every partition's FL system stays alive after it is "
        "built (emulate mode: one set of client actors per seed, so the Ray "
        "session needs `ray.num_cpus` for all of them; only one trains at a time).",
    )

    @model_validator(mode="after")
    def _check_batch(self) -> RLConfig:
        if self.init_from is not None:
            check_path("rl.init_from", self.init_from)
        if self.reset_log_std is not None and self.init_from is None:
            raise ValueError("rl.reset_log_std needs rl.init_from (a policy to load)")
        if self.minibatch_size > self.train_batch_size:
            raise ValueError(
                f"rl.minibatch_size must be <= rl.train_batch_size "
                f"({self.train_batch_size}), got {self.minibatch_size}"
            )
        for name in ("surrogate_floor", "surrogate_heterogeneity"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise ValueError(
                    f"rl.{name} must be [low, high] with 0 <= low <= high, got "
                    f"[{low}, {high}]"
                )
        return self
