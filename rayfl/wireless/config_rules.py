"""Cross-field rules of the ``wireless`` section, and which fields move the world.

The rules :class:`rayfl.wireless.config.WirelessConfig` checks after its
fields (each error names the field and what it goes with), kept beside it so
the section's fields stay one readable file; and :func:`moving_world_fields`,
the issue-48 fields a run sets away from the papers' static world (the star's
columnar lanes refuse them by name). It imports nothing of rayfl (the section
is typed ``Any`` here), so the section still depends on no engine module.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

__all__ = [
    "CpuHigh",
    "CpuLaw",
    "CpuLow",
    "CpuSigma",
    "MeanOff",
    "MeanOn",
    "TraceAbsent",
    "TracePath",
    "TracePeriod",
    "DirectionStd",
    "Memory",
    "Pause",
    "SpeedMax",
    "SpeedMean",
    "SpeedMin",
    "SpeedStd",
    "check_device_fields",
    "check_mobility_fields",
    "check_moving_world",
    "moving_world_fields",
]

# The mobility models' parameter fields, one definition for the star's
# ``wireless`` section and the D2D topology (same names, bounds and docs):
# ``mobility_speed_min_mps: SpeedMin = None``.
#: ``mobility_speed_min_mps``.
SpeedMin = Annotated[
    float | None,
    Field(
        gt=0,
        le=1e4,
        description="v_min: a leg's slowest speed in m/s, in (0, 1e4]; "
        "random_waypoint only.",
    ),
]

#: ``mobility_speed_max_mps``.
SpeedMax = Annotated[
    float | None,
    Field(
        gt=0,
        le=1e4,
        description="v_max: a leg's fastest speed in m/s, in (0, 1e4], >= "
        "v_min; random_waypoint only.",
    ),
]

#: ``mobility_pause_s``.
Pause = Annotated[
    float | None,
    Field(
        ge=0,
        le=1e9,
        description="T_p: pause at each waypoint in s, >= 0 (None: 0); "
        "random_waypoint only.",
    ),
]

#: ``mobility_memory``.
Memory = Annotated[
    float | None,
    Field(
        ge=0,
        le=1,
        description="α: memory of speed and direction per round, in [0, 1] "
        "(1: straight lines); gauss_markov only.",
    ),
]

#: ``mobility_speed_mean_mps``.
SpeedMean = Annotated[
    float | None,
    Field(
        ge=0,
        le=1e4,
        description="s̄: mean speed in m/s, in [0, 1e4]; gauss_markov only.",
    ),
]

#: ``mobility_speed_std_mps``.
SpeedStd = Annotated[
    float | None,
    Field(
        ge=0,
        le=1e4,
        description="σ_s: std of the speed in m/s, in [0, 1e4]; gauss_markov only.",
    ),
]

#: ``mobility_direction_std_rad``.
DirectionStd = Annotated[
    float | None,
    Field(
        ge=0,
        le=100.0,
        description="σ_θ: std of the direction around its mean in rad, in "
        "[0, 100]; gauss_markov only.",
    ),
]


# The device models' parameter fields, one definition for the star's
# ``wireless`` section and the D2D topology (same names, bounds and docs).
#: ``availability_trace``.
TracePath = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=4096,
        description="Path of the availability trace, a CSV with columns "
        "client, start, end (device reachable in rounds start <= t < end), "
        "relative to the working directory; trace only. Read when the run "
        "starts: a missing file or a bad row is an error naming the file and "
        "line.",
    ),
]

#: ``availability_trace_absent``.
TraceAbsent = Annotated[
    Literal["never", "always"] | None,
    Field(
        description="A device with no row in the trace is 'never' (None: the "
        "default) or 'always' reachable; trace only.",
    ),
]

#: ``availability_period_rounds``.
TracePeriod = Annotated[
    int | None,
    Field(
        ge=1,
        le=10**8,
        description="P: replay the trace every P rounds (round t reads t mod "
        "P), >= 1; None = play it once (every device away after its last "
        "interval). trace only.",
    ),
]

#: ``mean_on_rounds``.
MeanOn = Annotated[
    float | None,
    Field(
        ge=1.0,
        le=1e9,
        description="T_on: mean rounds a device stays reachable, >= 1; markov only.",
    ),
]

#: ``mean_off_rounds``.
MeanOff = Annotated[
    float | None,
    Field(
        ge=1.0,
        le=1e9,
        description="T_off: mean rounds a device stays away, >= 1; markov only.",
    ),
]

#: ``cpu_frequency_distribution``.
CpuLaw = Annotated[
    Literal["constant", "uniform", "lognormal"],
    Field(
        description="Law of each device's CPU frequency f_i, drawn once per "
        "device from (seed, device): 'constant' (every f_i = "
        "cpu_frequency_hz, the papers'), 'uniform' on [cpu_frequency_low_hz, "
        "cpu_frequency_high_hz] or 'lognormal' (ln f_i ~ N(ln "
        "cpu_frequency_hz, cpu_frequency_sigma²): cpu_frequency_hz is the "
        "median).",
    ),
]

#: ``cpu_frequency_low_hz``.
CpuLow = Annotated[
    float | None,
    Field(gt=0, le=1e12, description="Lowest f_i in Hz, in (0, 1e12]; uniform only."),
]

#: ``cpu_frequency_high_hz``.
CpuHigh = Annotated[
    float | None,
    Field(
        gt=0,
        le=1e12,
        description="Highest f_i in Hz, in (0, 1e12], >= low; uniform only.",
    ),
]

#: ``cpu_frequency_sigma``.
CpuSigma = Annotated[
    float | None,
    Field(ge=0, le=10.0, description="Std of ln f_i, in [0, 10]; lognormal only."),
]


#: ``wireless.mobility`` kind → its parameter fields (the names of
#: :data:`rayfl.wireless.mobility.MOBILITY_MODELS` with a ``mobility_`` prefix).
MOBILITY_FIELDS: dict[str, tuple[str, ...]] = {
    "random_waypoint": (
        "mobility_speed_min_mps",
        "mobility_speed_max_mps",
        "mobility_pause_s",
    ),
    "gauss_markov": (
        "mobility_memory",
        "mobility_speed_mean_mps",
        "mobility_speed_std_mps",
        "mobility_direction_std_rad",
    ),
}

#: The optional ones (their model's default applies when unset).
_OPTIONAL = ("mobility_pause_s",)


def moving_world_fields(wireless: Any) -> list[str]:
    """Return the issue-48 fields of ``wireless`` set away from the static default.

    Example:
        >>> from rayfl.wireless.config import WirelessConfig
        >>> moving_world_fields(WirelessConfig(round_deadline_s=1.0))
        ['wireless.round_deadline_s']
        >>> moving_world_fields(WirelessConfig(availability="markov",
        ...     mean_on_rounds=5, mean_off_rounds=2))
        ['wireless.availability=markov']
        >>> moving_world_fields(None)
        []
    """
    if wireless is None:
        return []
    defaults = {
        "fading_dynamics": "iid",
        "availability": "always",
        "cpu_frequency_distribution": "constant",
        "mobility": "static",
    }
    out = [
        f"wireless.{name}={getattr(wireless, name)}"
        for name, default in defaults.items()
        if getattr(wireless, name) != default
    ]
    for name in ("round_deadline_s", "shadowing_decorrelation_m"):
        if getattr(wireless, name) is not None:
            out.append(f"wireless.{name}")
    return out


def check_moving_world(cfg: Any) -> None:
    """Check the cross-field rules of the issue-48 fields (the first broken raises).

    Raises:
        ValueError: Naming the field and what it needs or goes with.
    """
    _check_fading_dynamics(cfg)
    check_device_fields(cfg)
    _check_mobility(cfg)


def check_device_fields(cfg: Any, section: str = "wireless") -> None:
    """Availability and CPU-frequency fields: each kind needs its own, no other's.

    Shared by the ``wireless`` section (the star's devices) and a D2D
    ``topology`` (:class:`rayfl.d2d.config.D2DTopologyConfig`): both name the
    fields ``availability``, ``availability_trace*``, ``mean_on_rounds``,
    ``mean_off_rounds``, ``cpu_frequency_distribution`` and its parameters.

    Raises:
        ValueError: Naming ``section``'s field and what it needs or goes with.
    """
    _check_only_with(
        cfg,
        "availability",
        {
            "markov": ("mean_on_rounds", "mean_off_rounds"),
            "trace": ("availability_trace",),
        },
        section=section,
    )
    optional = ("availability_trace_absent", "availability_period_rounds")
    for name in optional:
        if cfg.availability != "trace" and getattr(cfg, name) is not None:
            raise ValueError(
                f"{section}.{name} is read only with {section}.availability="
                f"trace, got availability={cfg.availability}"
            )
    _check_only_with(
        cfg,
        "cpu_frequency_distribution",
        {
            "uniform": ("cpu_frequency_low_hz", "cpu_frequency_high_hz"),
            "lognormal": ("cpu_frequency_sigma",),
        },
        section=section,
    )
    low, high = cfg.cpu_frequency_low_hz, cfg.cpu_frequency_high_hz
    if low is not None and high is not None and low > high:
        raise ValueError(
            f"{section}.cpu_frequency_low_hz must be <= cpu_frequency_high_hz, "
            f"got {low:g} > {high:g}"
        )


def _check_only_with(
    cfg: Any,
    selector: str,
    needs: dict[str, tuple[str, ...]],
    optional: tuple[str, ...] = (),
    section: str = "wireless",
) -> None:
    """Each kind of ``selector`` needs its own parameter fields and no other's."""
    kind = getattr(cfg, selector)
    wanted = needs.get(kind, ())
    for name in wanted:
        if getattr(cfg, name) is None and name not in optional:
            raise ValueError(
                f"{section}.{selector}={kind} needs {section}.{name}, which is unset"
            )
    for other, names in needs.items():
        for name in names:
            if name not in wanted and getattr(cfg, name) is not None:
                raise ValueError(
                    f"{section}.{name} is read only with {section}.{selector}={other}, "
                    f"got {selector}={kind}"
                )


def check_mobility_fields(cfg: Any, section: str = "wireless") -> None:
    """A moving ``mobility`` needs its parameters and T; v_min <= v_max.

    Shared by the ``wireless`` section (the star's cell) and a D2D
    ``topology`` (:class:`rayfl.d2d.config.D2DTopologyConfig`): both name the
    fields ``mobility``, ``round_duration_s`` and :data:`MOBILITY_FIELDS`.

    Raises:
        ValueError: Naming ``section``'s field and what it needs.
    """
    _check_only_with(cfg, "mobility", MOBILITY_FIELDS, _OPTIONAL, section)
    if cfg.mobility != "static" and cfg.round_duration_s is None:
        raise ValueError(
            f"{section}.mobility={cfg.mobility} needs {section}.round_duration_s "
            "(T, how long a device moves between two rounds), which is unset"
        )
    low, high = cfg.mobility_speed_min_mps, cfg.mobility_speed_max_mps
    if low is not None and high is not None and low > high:
        raise ValueError(
            f"{section}.mobility_speed_min_mps must be <= mobility_speed_max_mps, "
            f"got {low:g} > {high:g}"
        )


def _check_mobility(cfg: Any) -> None:
    """A moving kind needs its parameters and T; shadowing that moves needs σ."""
    check_mobility_fields(cfg)
    if cfg.shadowing_decorrelation_m is not None and cfg.shadowing_std_db == 0:
        raise ValueError(
            "wireless.shadowing_decorrelation_m needs wireless.shadowing_std_db "
            "> 0 (no shadowing to decorrelate), got 0"
        )


def _check_fading_dynamics(cfg: Any) -> None:
    """gauss_markov needs exactly one source of ρ; iid takes none of them."""
    sources = [
        name
        for name in ("fading_correlation", "doppler_hz", "speed_mps")
        if getattr(cfg, name) is not None
    ]
    moving = cfg.mobility != "static"  # round_duration_s is mobility's T too
    if cfg.fading_dynamics == "iid":
        extra = sources + [
            name
            for name in ("carrier_hz", "round_duration_s")
            if getattr(cfg, name) is not None
            and not (moving and name == "round_duration_s")
        ]
        if extra:
            also = " or a moving mobility" if extra[0] == "round_duration_s" else ""
            raise ValueError(
                f"wireless.{extra[0]} is read only with "
                f"wireless.fading_dynamics=gauss_markov{also}, got iid"
            )
        return
    if cfg.fading == "none":
        raise ValueError(
            "wireless.fading_dynamics=gauss_markov needs wireless.fading rayleigh "
            "or rician, got none (no fading to correlate)"
        )
    if len(sources) != 1:
        raise ValueError(
            "wireless.fading_dynamics=gauss_markov needs exactly one of "
            "wireless.fading_correlation, doppler_hz, speed_mps; got "
            f"{', '.join(sources) or 'none'}"
        )
    if (sources[0] == "speed_mps") != (cfg.carrier_hz is not None):
        raise ValueError(
            "wireless.carrier_hz goes with wireless.speed_mps (f_D = v·f_c/c): "
            "set both or neither"
        )
    timed = sources[0] != "fading_correlation"
    if timed and cfg.round_duration_s is None:
        raise ValueError(
            "wireless.round_duration_s goes with wireless.doppler_hz or "
            "speed_mps (ρ = J0(2π·f_D·T)): set it"
        )
    if not timed and not moving and cfg.round_duration_s is not None:
        raise ValueError(
            "wireless.round_duration_s goes with wireless.doppler_hz or "
            "speed_mps (ρ = J0(2π·f_D·T)) or a moving wireless.mobility: "
            "remove it (fading_correlation gives ρ)"
        )
