"""What every actor of a run is built from: a small, picklable bundle.

The driver resolves the config once (σ calibration, model shape...) into an
:class:`ActorSetup` and passes it to every actor, so actors never re-derive
run-level values and never see the YAML.
"""

from __future__ import annotations

from dataclasses import dataclass

from rayfl.config import RunConfig

__all__ = ["ActorSetup"]


@dataclass(frozen=True)
class ActorSetup:
    """Run-level values every actor needs.

    Attributes:
        config: The resolved run config.
        input_shape: Shape of one sample.
        num_classes: Number of classes.
        noise_std: Per-element std σ of the uplink Gaussian noise (0 = none).
        server_noise_std: Std of noise added by the server (central DP), 0 = none.
        reduce_in_actor: Sum the uploads inside the client actor (no channel effects
            act on individual uploads); see ``rayfl.learning.aggregate``.
        client_noise_std: Per-client σ_n by client id (N,), overriding
            ``noise_std`` when set (seed 001: Δs_n = 2C/abs(D_n)).
    """

    config: RunConfig
    input_shape: tuple[int, ...]
    num_classes: int
    noise_std: float = 0.0
    server_noise_std: float = 0.0
    reduce_in_actor: bool = False
    client_noise_std: tuple[float, ...] | None = None

    @property
    def seed(self) -> int:
        """The run's seed."""
        return self.config.seed
