"""Config fuzzing: hostile values are rejected up front or the run ends cleanly.

Design (seeded, bounded time):
    * ``cases(seed, n)`` draws ``n`` mutations: one of the example configs
      (``examples/*.yaml``), one of its fields (every leaf, plus fields known to
      have crashed: ``wireless.tx_power_dbm``, ``algorithm.lr``,
      ``algorithm.local_epochs``, ``name``, ``output.dir``...) and one hostile
      value (inf, nan, 1e308, -1, 0, huge ints, wrong types, empty strings,
      paths with ``..`` and ``/``, unknown names).
    * Every case (``N_CASES`` = 300) is validated with :func:`load_config` (no
      Ray): it must either pass or raise :class:`ConfigError` whose message is
      at most a screen long and names the mutated field (or its section, for a
      section that does not belong, e.g. ``wireless`` with a D2D topology);
      any other exception fails the test.
    * The config gaps of issue 36 (``GAPS``) join the cases, and each must be
      rejected the same way.
    * A seeded subset of the accepted cases (``N_RUN`` = 4 in the default
      suite, all of them in the slow test) runs for one round of one local
      step on at most 40 samples per client, in a shared 2-CPU Ray session;
      cases mutating a loop length (``LOOP_FIELDS``: a huge accepted ``rounds``
      only makes a run long) are validated only. Each run must end with
      ``status: completed`` and a strict-JSON ``summary.json`` directly inside
      ``output.dir``; a failed run (``RunFailed``) counts as a crash that
      validation missed and fails the test. Limits that depend on the data or
      the machine (``DatasetError``: e.g. a Dirichlet draw that cannot give
      every client ``min_partition_size`` samples; ``ResourceError``: memory)
      may still stop a run, in one screen and before any run directory is
      made. Afterwards no run directory lacks a terminal status.
    * Every reject is at most 12 lines and 2,000 characters (echoes are cut).
    * Hostile FILES (``HOSTILE_FILES``: not UTF-8, 5,000-digit ints, billion
      laughs, 500+ levels, duplicate keys, YAML 1.1 surprises, huge files, very
      long values) and override items (``HOSTILE_OVERRIDES``: empty key parts,
      deep or huge values) each end in one clean :class:`ConfigError`.
    * Under ``slow``, ``N_SLOW_CASES`` = 3,000 more cases are validated.
"""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

import rayfl
from rayfl.cluster.resources import ResourceError
from rayfl.config import ConfigError, load_config
from rayfl.data.datasets import DatasetError
from rayfl.rundir.status import RunFailed

EXAMPLES = sorted(Path(__file__).resolve().parents[1].glob("examples/*.yaml"))
N_CASES = 300
N_RUN = 4
SEED = 20261125

# Fields that crashed a run before they were validated; always among the targets.
KNOWN = [
    "wireless.tx_power_dbm",
    "wireless.bs_tx_power_dbm",
    "wireless.noise_psd_dbm_hz",
    "wireless.bandwidth_hz",
    "algorithm.lr",
    "algorithm.local_epochs",
    "algorithm.local_steps",
    "algorithm.batch_size",
    "name",
    "output.dir",
    "rounds",
    "seed",
    "data.num_clients",
    "model.hidden",
]
HOSTILE: list[Any] = [
    math.inf,
    -math.inf,
    math.nan,
    1e308,
    -1e308,
    1e12,
    1e6,
    -1,
    0,
    2**63,
    10**30,
    "",
    "not-a-name",
    "../x",
    "/abs/path",
    [],
    {},
    True,
    None,
    [10**9],
    "x" * 100_000,  # the echo in the error must stay short
    10**5000,  # past Python's int-to-text limit
    "[" * 600,  # a string, but an override would parse it as YAML
]
# Harness settings for runs: one round of one local step, unless the case mutates
# them (the data section is the example's: changing it could make a valid config
# invalid).
RUN_DEFAULTS = {
    "rounds": 1,
    "eval_every": 1,
    "sweep": {},
    "algorithm.local_epochs": 1,
    "algorithm.local_steps": 1,
    "data.max_samples_per_client": 40,
    "ray.num_cpus": 2,
    "ray.address": None,
    "output.progress": False,
    "output.plots": False,
    "output.checkpoint_every": 0,
}


# Loop lengths: a huge accepted value only makes a run long, so cases mutating
# them are validated but not run.
LOOP_FIELDS = {
    "rounds",
    "eval_every",
    "algorithm.local_epochs",
    "algorithm.local_steps",
    "algorithm.personal_steps",
    "algorithm.inner_steps",
}


def _leaves(tree: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key not in ("sweep", "params"):
            out += _leaves(value, f"{path}.")
        else:
            out.append(path)
    return out


def _set(tree: dict[str, Any], path: str, value: Any) -> None:
    node = tree
    parts = path.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


def cases(seed: int, n: int, a_file: Path) -> list[tuple[str, str, Any, dict]]:
    """Return ``n`` cases ``(example, field, value, tree)`` drawn with ``seed``.

    ``a_file`` is a regular file: ``output.dir`` values under it must be
    rejected; an absolute ``output.dir`` is placed beside it (never in ``/``).
    """
    import yaml

    rng = random.Random(seed)
    examples = {p.name: yaml.safe_load(p.read_text()) for p in EXAMPLES}
    names = sorted(examples)
    hostile_dirs = [str(a_file / "sub"), str(a_file), "/proc/rayfl-no-such/x"]
    out = []
    for _ in range(n):
        name = rng.choice(names)
        tree = copy.deepcopy(examples[name])
        field = rng.choice(KNOWN) if rng.random() < 0.35 else rng.choice(_leaves(tree))
        pool = HOSTILE + (hostile_dirs if field == "output.dir" else [])
        value = rng.choice(pool)
        if field == "output.dir" and value == "/abs/path":
            value = str(a_file.parent / "abs" / "path")
        _set(tree, field, value)
        out.append((name, field, value, tree))
    return out


def _validate(field: str, value: Any, tree: dict[str, Any]) -> Any:
    """Return the config, or None after checking the ConfigError is clear."""
    try:
        return load_config(tree)
    except ConfigError as e:
        text = str(e)
        assert len(text.splitlines()) <= 12 and len(text) <= 2000, (
            f"{field}: error too long ({len(text)} chars)"
        )
        # the field, or its section when the error is about a whole section
        # (e.g. "remove the `wireless` section")
        assert any(part in text for part in field.split(".")), (
            f"{field}: the error does not name the field:\n{text}"
        )
        return None


def _run_tree(tree: dict[str, Any], field: str, out_dir: Path) -> dict[str, Any]:
    tree = copy.deepcopy(tree)
    for key, value in RUN_DEFAULTS.items():
        if not (field == key or field.startswith(key + ".") or key.startswith(field)):
            _set(tree, key, value)
    if field != "output.dir":
        _set(tree, "output.dir", str(out_dir))
    return tree


def _no_constants(name):
    raise ValueError(f"non-JSON constant {name}")


def _runnable(accepted):
    return [c for c in accepted if c[1] not in LOOP_FIELDS]


def _check_runs(accepted, tmp_path, monkeypatch) -> None:
    root = tmp_path / "runs"
    cwd = tmp_path / "cwd" / "deeper"  # a relative output.dir like ../x lands here
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    missed: list[str] = []
    for i, (example, field, value, tree) in enumerate(accepted):
        tree = _run_tree(tree, field, root / str(i))
        cfg = load_config(tree)  # accepted before: still valid with tiny data
        base = Path(cfg.output.dir).resolve()
        try:
            result = rayfl.run(cfg)
        except RunFailed as e:  # a crash that validation missed
            missed.append(f"{example} {field}={value!r}: {str(e).splitlines()[0]}")
            continue
        except (DatasetError, ResourceError) as e:
            # data- or machine-dependent limits (a partition that cannot give
            # every client min_partition_size samples, memory): a one-screen
            # rayfl error before any run directory is made
            assert len(str(e).splitlines()) <= 25
            assert not base.exists() or not list(base.rglob("config.yaml")), e
            continue
        run_dir = result.run_dir.resolve()
        assert run_dir.parent == base, f"{example} {field}={value!r}: {run_dir}"
        summary = json.loads(
            (run_dir / "summary.json").read_text(), parse_constant=_no_constants
        )
        assert summary["status"] == "completed", (example, field, value)
    assert not missed, "accepted configs that crashed:\n" + "\n".join(missed)
    for config in tmp_path.rglob("config.yaml"):  # every run directory made
        status = json.loads((config.parent / "summary.json").read_text())["status"]
        assert status in ("completed", "failed", "interrupted"), config.parent


#: Issue 36's config gaps, (example, field, value) each accepted before and
#: silently shrunk (a bound-less K_e, DP without G, noise dropped, no noise, a
#: boolean taken as 1, a file root ignored); ``A_FILE`` is a regular file.
GAPS = [
    ("h2fdp_fmnist.yaml", "topology.scheduling.subchannels_per_edge", 2**70),
    ("h2fdp_fmnist.yaml", "topology.dp.grad_bound", None),
    ("quickstart.yaml", "privacy.noise_std", 0.1),
    ("quickstart.yaml", "privacy.epsilon", 4.0),
    ("dp_fedavg_fmnist.yaml", "privacy.noise_multiplier", 0),
    ("quickstart.yaml", "rounds", True),
    ("quickstart.yaml", "data.num_clients", True),
    ("quickstart.yaml", "algorithm.local_epochs", True),
    ("h2fdp_fmnist.yaml", "topology.tau", True),
    ("fedavg_fmnist.yaml", "data.root", "A_FILE"),
    # issue 45: accepted, then refused after Ray started or run other than asked
    ("h2fdp_fmnist.yaml", "topology.cost.tx_power_dbm", math.nan),
    ("h2fdp_fmnist.yaml", "topology.cost.distance_max_m", math.inf),
    ("h2fdp_fmnist.yaml", "topology.lr.gamma", math.inf),
    ("h2fdp_fmnist.yaml", "topology.cost.bandwidth_hz", 1e-300),
    ("h2fdp_fmnist.yaml", "topology.num_edges", 10**4),
    ("h2fdp_fmnist.yaml", "eval_clients", 5),
    ("h2fdp_fmnist.yaml", "scheduler.clients_per_round", 5),
    ("pfedwn_d2d.yaml", "data.num_clients", 1),
    ("pfedwn_d2d.yaml", "scheduler.clients_per_round", 5),
    ("quickstart.yaml", "compression.quantize_bits", 8),
    ("quickstart.yaml", "eval_clients", 500),
    ("dp_fedavg_fmnist.yaml", "privacy.noise_std", 1e-300),
    ("dp_fedavg_fmnist.yaml", "privacy.placement", "edge"),
    ("wpfl_minmax.yaml", "compression.quantize_bits", None),
    ("quickstart.yaml", "ray.object_store_memory_mb", 10**27),
    ("quickstart.yaml", "ray.address", "host:70000"),
    ("quickstart.yaml", "data.root", "/no/such/dir"),
    ("quickstart.yaml", "output.dir", " "),
    ("quickstart.yaml", "name", "a\x00b"),
]


def gap_cases(a_file: Path) -> list[tuple[str, str, Any, dict]]:
    """Return the :data:`GAPS` as fuzz cases on their example configs."""
    import yaml

    out = []
    for name, field, value in GAPS:
        tree = yaml.safe_load((EXAMPLES[0].parent / name).read_text())
        value = str(a_file) if value == "A_FILE" else value
        _set(tree, field, value)
        out.append((name, field, value, tree))
    return out


@pytest.fixture(scope="module")
def fuzz_cases(tmp_path_factory):
    a_file = tmp_path_factory.mktemp("fuzz") / "a_file"
    a_file.write_text("a regular file, not a directory\n")
    all_cases = cases(SEED, N_CASES, a_file) + gap_cases(a_file)
    accepted = []
    for case in all_cases:
        _, field, value, tree = case
        if _validate(field, value, tree) is not None:
            accepted.append(case)
    return all_cases, accepted


def test_every_hostile_config_is_rejected_clearly_or_accepted(fuzz_cases):
    all_cases, accepted = fuzz_cases
    assert len(all_cases) >= 200
    rejected = len(all_cases) - len(accepted)
    # the fuzzer exercises both outcomes (a generator that only made valid or
    # only invalid configs would test nothing)
    assert rejected >= len(all_cases) // 2 and len(accepted) >= N_RUN


def test_every_config_gap_is_rejected_clearly(fuzz_cases):
    all_cases, accepted = fuzz_cases
    gaps = all_cases[-len(GAPS) :]
    assert [(c[0], c[1]) for c in gaps] == [(n, f) for n, f, _ in GAPS]
    slipped = [(c[0], c[1], c[2]) for c in gaps if any(c is a for a in accepted)]
    assert not slipped, f"config gaps accepted: {slipped}"


# a few one-round runs in the shared session (seconds); the slow test below runs all
def test_accepted_configs_run_to_completion(
    ray_session, fuzz_cases, tmp_path, monkeypatch
):
    _, accepted = fuzz_cases
    subset = random.Random(SEED).sample(_runnable(accepted), N_RUN)
    _check_runs(subset, tmp_path, monkeypatch)


@pytest.mark.slow
def test_all_accepted_configs_run_to_completion(
    ray_session, fuzz_cases, tmp_path, monkeypatch
):
    _, accepted = fuzz_cases
    _check_runs(_runnable(accepted), tmp_path, monkeypatch)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("wireless.tx_power_dbm", 1e12),
        ("algorithm.lr", 1e308),
        ("algorithm.lr", math.nan),
        ("algorithm.local_epochs", 1e6),
        ("data.alpha", math.inf),
    ],
)
def test_known_crashes_are_rejected(field, value):
    base = {"wireless": {}} if field.startswith("wireless") else {}
    with pytest.raises(ConfigError, match=field.split(".")[-1]):
        load_config(base, {field: value})


def test_output_dir_under_a_file_is_rejected(tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match="output.dir"):
        load_config({}, {"output.dir": str(a_file / "runs")})


N_SLOW_CASES = 3000


@pytest.mark.slow  # validation only: thousands of cases, no run
def test_thousands_of_hostile_configs_are_rejected_clearly_or_accepted(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("a regular file\n")
    drawn = cases(SEED + 1, N_SLOW_CASES, a_file)
    accepted = [c for c in drawn if _validate(c[1], c[2], c[3]) is not None]
    assert len(drawn) >= 3000 and len(accepted) < len(drawn)


def _laughs() -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


#: Hostile config FILES (issue 45): contents and what the one error must say.
HOSTILE_FILES: list[tuple[str, bytes | str, str]] = [
    ("binary", b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe", "not UTF-8 text (byte 0xff"),
    ("latin-1", "name: r\xe9seau\n".encode("latin-1"), "not UTF-8 text (byte 0xe9"),
    (
        "utf-16",
        "rounds: 3\n".encode("utf-16"),
        "not UTF-8 text (byte 0xff at offset 0)",
    ),
    ("5000 digits", "seed: " + "1" * 5000 + "\n", "seed: an integer of 5,000 digits"),
    ("billion laughs", _laughs(), "counting what aliases expand to"),
    ("nesting 500", "rounds: " + "[" * 500 + "]" * 500, "nested deeper than 64"),
    ("nesting 5000 maps", "a: {" * 5000 + "}" * 5000, "nested deeper than 64"),
    (
        "duplicate",
        "data: {num_clients: 4}\nrounds: 2\ndata: {alpha: 1}\n",
        "lines 1 and 3",
    ),
    ("sexagesimal", "rounds: 1:30\n", "base-60"),
    ("yes", "output: {plots: yes}\n", "output.plots: 'yes' is a YAML 1.1 boolean"),
    ("huge", "rounds: 3\n" + "#" * (2 << 20) + "\n", "larger than 1024 KiB"),
    ("long value", "name: " + "n" * 500_000 + "\n", "name"),
    ("long key", "k" * 500_000 + ": 1\n", "not valid YAML"),  # keys ≤ 1024 chars
    ("long explicit key", "? " + "k" * 5000 + "\n: 1\n", "unknown key"),
    ("not a mapping", "- 1\n- 2\n", "top level must be a mapping"),
    ("bad yaml", "rounds: [1, 2\n", "not valid YAML"),
]

HOSTILE_OVERRIDES: list[tuple[str, str]] = [
    ("data..num_clients=5", "empty part"),
    (".rounds=3", "empty part"),
    ("rounds.=3", "empty part"),
    ("rounds=" + "[" * 500, "nested deeper than 64"),
    ("rounds=" + "{a: " * 500, "nested deeper than 64"),
    ("seed=" + "9" * 5000, "seed: an integer of 5,000 digits"),
    ("rounds=1:30", "base-60"),
    ("output.plots=no", "YAML 1.1 boolean"),
    ("name=" + "x" * 300_000, "name"),
    ("data.dataset=" + "y" * 300_000, "data.dataset"),
]


def _clean_reject(call) -> str:
    try:
        call()
    except ConfigError as e:
        text = str(e)
    else:
        raise AssertionError("accepted")
    assert len(text) <= 2000 and len(text.splitlines()) <= 12, text[:2500]
    return text


@pytest.mark.parametrize(("label", "content", "says"), HOSTILE_FILES)
def test_hostile_files_are_one_clean_error(tmp_path, label, content, says):
    path = tmp_path / "cfg.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    text = _clean_reject(lambda: load_config(path))
    assert says in text, f"{label}: {text[:300]}"


@pytest.mark.parametrize(("item", "says"), HOSTILE_OVERRIDES)
def test_hostile_overrides_are_one_clean_error(item, says):
    text = _clean_reject(lambda: load_config(EXAMPLES[0], [item]))
    assert says in text, text[:300]
