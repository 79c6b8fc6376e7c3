"""What every actor of a run is built from: a small, picklable bundle.

The driver resolves the config once (σ calibration, model shape...) into an
:class:`ActorSetup` and passes it to every actor, so actors never re-derive
run-level values and never see the YAML. The setup carries the config sections
the actors read (model, algorithm, privacy, compression, wireless) and the
run's seed and round count, not the whole run config.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

from rayfl.algorithms.config import LocalTrainingConfig
from rayfl.compression.config import CompressionConfig
from rayfl.learning.config import ModelConfig
from rayfl.privacy.config import PrivacyConfig
from rayfl.wireless.config import WirelessConfig

__all__ = ["ActorSetup"]

#: The fields of :class:`ActorSetup` copied from a run config of the same name.
_SECTIONS = ("model", "algorithm", "privacy", "compression", "wireless")


@dataclass(frozen=True)
class ActorSetup:
    """Run-level values every actor needs.

    Build it from sections (``ActorSetup(shape, classes, model=...,
    algorithm=..., privacy=..., compression=..., wireless=..., seed=...,
    rounds=...)``) or from a run config's sections with :meth:`from_config`.

    Attributes:
        input_shape: Shape of one sample.
        num_classes: Number of classes.
        noise_std: Per-element std σ of the uplink Gaussian noise (0 = none).
        server_noise_std: Std of noise added by the server (central DP), 0 = none.
        reduce_in_actor: Sum the uploads inside the client actor (no channel effects
            act on individual uploads); see ``rayfl.learning.aggregate``.
        client_noise_std: Per-client σ_n by client id (N,), overriding
            ``noise_std`` when set (seed 001: Δs_n = 2C/abs(D_n)).
        model: The ``model`` section.
        algorithm: The ``algorithm`` section.
        privacy: The ``privacy`` section.
        compression: The ``compression`` section.
        wireless: The ``wireless`` section (None: ideal links).
        seed: The run's seed.
        rounds: The run's communication rounds T.
    """

    input_shape: tuple[int, ...]
    num_classes: int
    noise_std: float = 0.0
    server_noise_std: float = 0.0
    reduce_in_actor: bool = False
    client_noise_std: tuple[float, ...] | None = None
    _: KW_ONLY
    model: ModelConfig
    algorithm: LocalTrainingConfig
    privacy: PrivacyConfig
    compression: CompressionConfig
    wireless: WirelessConfig | None
    seed: int
    rounds: int

    @classmethod
    def from_config(cls, config: Any, **values: Any) -> ActorSetup:
        """Return the setup of a run config's sections, seed and rounds.

        Only those are kept: the actors never see the whole run config.

        Args:
            config: A run config (anything with the sections, ``seed``, ``rounds``).
            **values: The other fields (``input_shape``, ``num_classes``, ...).
        """
        sections = {name: getattr(config, name) for name in _SECTIONS}
        return cls(
            **sections, seed=int(config.seed), rounds=int(config.rounds), **values
        )
