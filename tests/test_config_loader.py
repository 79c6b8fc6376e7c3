"""The config loader against hostile input, override key parts and sweeps (issue 45).

Each hostile file or override value ends in one :class:`ConfigError` of the
documented shape (never another exception type), and an override of a swept
key replaces that axis, said on the console and in ``summary.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rayfl import cli
from rayfl.config import ConfigError, load_config

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _error(source, overrides=()) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(source, overrides)
    text = str(info.value)
    assert len(text) <= 2000 and len(text.splitlines()) <= 12, text[:3000]
    assert "Traceback" not in text
    return text


def _file(tmp_path: Path, data: bytes | str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


@pytest.mark.parametrize(
    ("data", "byte", "offset"),
    [
        (b"rounds: 3\n\x00\xff\xfe binary", "0xff", 11),
        ("name: caf\xe9\n".encode("latin-1"), "0xe9", 9),
        ("rounds: 3\n".encode("utf-16"), "0xff", 0),
    ],
)
def test_a_file_that_is_not_utf8_is_one_line(tmp_path, data, byte, offset):
    path = _file(tmp_path, data)
    assert _error(path) == f"{path}: not UTF-8 text (byte {byte} at offset {offset})"


def test_a_utf8_bom_is_fine(tmp_path):
    assert load_config(_file(tmp_path, "\ufeffrounds: 3\n")).rounds == 3


def test_a_huge_file_is_refused_before_parsing(tmp_path):
    path = _file(tmp_path, "name: x\n" + "# padding\n" * 120_000)
    text = _error(path)
    assert text.startswith(f"{path}: larger than 1024 KiB (1 MiB)")


def test_a_5000_digit_integer_is_refused_naming_the_field(tmp_path):
    path = _file(tmp_path, "rounds: " + "7" * 5000 + "\n")
    text = _error(path)
    assert text == f"{path}, line 1: rounds: an integer of 5,000 digits (at most 30)"


def test_billion_laughs_is_refused_before_expanding(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)
    ]
    text = _error(_file(tmp_path, "\n".join(lines) + "\n"))
    assert "more than 100,000 values, counting what aliases expand to" in text


def test_small_anchors_and_merge_keys_still_work(tmp_path):
    text = "data: &d {num_clients: 8}\nsweep: {rounds: [1, 2]}\nname: x\n"
    assert load_config(_file(tmp_path, text)).data.num_clients == 8


@pytest.mark.parametrize("depth", [65, 500, 5000])
def test_deep_nesting_is_refused_in_a_file_and_an_override(tmp_path, depth):
    text = _error(_file(tmp_path, "rounds: " + "[" * depth + "]" * depth + "\n"))
    assert text.endswith("line 1: nested deeper than 64 levels")
    text = _error(None, ["rounds=" + "[" * depth])
    assert (
        text.startswith("override 'rounds=") and "nested deeper than 64 levels" in text
    )
    text = _error({"rounds": 1}, {"data": _nested(depth)})
    assert "nested deeper than 64 levels" in text


def _nested(depth: int) -> dict:
    tree: dict = {}
    for _ in range(depth):
        tree = {"a": tree}
    return tree


def test_duplicate_keys_name_the_key_and_both_lines(tmp_path):
    path = _file(tmp_path, "data:\n  num_clients: 5\nrounds: 2\ndata:\n  alpha: 1\n")
    assert _error(path) == (
        f"{path}, line 4: data: duplicate key (lines 1 and 4); YAML would keep "
        "only the last: merge them"
    )
    path = _file(tmp_path, "data:\n  num_clients: 5\n  num_clients: 6\n")
    assert "data.num_clients: duplicate key (lines 2 and 3)" in _error(path)


def test_sexagesimal_is_refused(tmp_path):
    path = _file(tmp_path, "rounds: 1:30\n")
    assert _error(path) == (
        f"{path}, line 1: rounds: '1:30' is a YAML 1.1 base-60 number (90); write "
        "the number, or quote it for a string"
    )
    assert "rounds: '1:30' is a YAML 1.1 base-60" in _error(None, ["rounds=1:30"])


@pytest.mark.parametrize("word", ["yes", "No", "on", "OFF", "y", "n"])
def test_yaml11_booleans_are_refused(tmp_path, word):
    path = _file(tmp_path, f"output:\n  plots: {word}\n")
    assert _error(path) == (
        f"{path}, line 2: output.plots: {word!r} is a YAML 1.1 boolean; write true "
        f"or false, or quote it ({word!r}) for a string"
    )


def test_quoted_words_and_true_false_are_fine(tmp_path):
    cfg = load_config(_file(tmp_path, "name: 'yes'\noutput: {plots: false}\n"))
    assert (cfg.name, cfg.output.plots) == ("yes", False)


def test_octal_looking_integers_are_refused(tmp_path):
    path = _file(tmp_path, "seed: 0777\n")
    assert "seed: '0777' is a YAML 1.1 octal number; write 777" in _error(path)


def test_a_5000_digit_override_is_one_clean_line():
    text = _error(None, ["rounds=" + "9" * 5000])
    assert "rounds: an integer of 5,000 digits (at most 30)" in text
    assert len(text.splitlines()) == 1


@pytest.mark.parametrize("key", ["data..num_clients", ".rounds", "rounds.", "a...b"])
def test_empty_key_parts_are_refused(key):
    text = _error(None, [f"{key}=5"])
    assert text.startswith(f"override '{key}=5': the key '{key}' has an empty part")
    text = _error(None, {key: 5})
    assert f"the key '{key}' has an empty part" in text


def test_long_values_are_echoed_short():
    text = _error(None, {"data.dataset": "x" * 1_000_000})
    assert "(1000000 chars)" in text and len(text) < 1000
    text = _error(None, {"rounds": "y" * 100_000})
    assert "(100000 chars)" in text and len(text) < 600
    text = _error(None, {"data": {"k" * 50_000: 1}})
    assert len(text) < 2000


def test_a_tuple_in_a_mapping_is_plain_data():
    assert tuple(
        load_config({"model": {"kind": "mlp", "hidden": (8,)}}).model.hidden
    ) == (8,)


def _sweep_config(tmp_path: Path) -> Path:
    return _file(
        tmp_path,
        "name: sw\nrounds: 1\ndata: {dataset: digits, num_clients: 4, "
        "max_samples_per_client: 20}\nmodel: {kind: mlr}\n"
        "algorithm: {kind: fedavg, local_steps: 1}\n"
        f"output: {{dir: {tmp_path / 'runs'}, plots: false, progress: false}}\n"
        "ray: {num_cpus: 2}\nsweep: {algorithm.lr: [0.01, 0.5], seed: [0, 1]}\n",
    )


def test_an_override_of_a_swept_key_replaces_that_axis(tmp_path):
    path = _sweep_config(tmp_path)
    cfg = load_config(path, ["algorithm.lr=0.2"])
    assert cfg.algorithm.lr == 0.2 and cfg.sweep == {"seed": [0, 1]}
    assert cfg.replaced_sweep == {
        "algorithm.lr": {"override": "algorithm.lr=0.2", "values": [0.01, 0.5]}
    }
    cfg = load_config(path, ["algorithm.lr=0.2", "seed=3"])  # no axis left
    assert cfg.sweep == {} and set(cfg.replaced_sweep) == {"algorithm.lr", "seed"}
    cfg = load_config(path, {"algorithm": {"kind": "fedavg", "lr": 0.3}})  # a prefix
    assert "algorithm.lr" in cfg.replaced_sweep and cfg.algorithm.lr == 0.3


def test_a_sweep_override_still_sets_the_sweep(tmp_path):
    cfg = load_config(_sweep_config(tmp_path), ["sweep.algorithm.lr=[0.1, 0.2, 0.3]"])
    assert cfg.sweep["algorithm.lr"] == [0.1, 0.2, 0.3] and cfg.replaced_sweep == {}
    cfg = load_config(EXAMPLES / "dp_fedavg_fmnist.yaml", ["sweep.privacy.epsilon=[2]"])
    assert cfg.sweep == {"privacy.epsilon": [2]}


@pytest.mark.parametrize(
    ("key", "values", "bad"),
    [("rounds", [3, -1], "-1"), ("data.num_clients", [4, 0], "0")],
)
def test_every_sweep_value_is_validated(key, values, bad):
    text = _error({"sweep": {key: values}})
    assert text.startswith(
        f"invalid config:\n  sweep.{key}: the value {bad} is invalid: "
    )
    assert len(text.splitlines()) == 2


def test_a_sweep_grid_point_is_validated():
    text = _error(
        {
            "data": {"num_clients": 10},
            "scheduler": {"clients_per_round": 2},
            "sweep": {
                "data.num_clients": [10, 1],
                "scheduler.clients_per_round": [1, 2],
            },
        }
    )
    assert "sweep" in text and "clients_per_round" in text


def test_cli_override_of_a_swept_key_is_said_and_recorded(
    ray_session, tmp_path, capsys
):
    path = _sweep_config(tmp_path)
    assert cli.main(["run", str(path), "algorithm.lr=0.2", "seed=3"]) == 0
    out, err = capsys.readouterr()
    assert (
        "rayfl: algorithm.lr=0.2 replaces the config's sweep over algorithm.lr "
        "(0.01, 0.5)" in err
    )
    assert "rayfl: seed=3 replaces the config's sweep over seed (0, 1)" in err
    assert "Traceback" not in err and "sweep directory" not in out  # one run
    (summary,) = (tmp_path / "runs").glob("sw-*/summary.json")
    recorded = json.loads(summary.read_text())["replaced_sweep"]
    assert recorded["algorithm.lr"] == {
        "override": "algorithm.lr=0.2",
        "values": [0.01, 0.5],
    }
    # an axis left: a sweep over it, each run recording the replaced axis
    assert (
        cli.main(["run", str(path), "seed=3", "output.dir=" + str(tmp_path / "s")]) == 0
    )
    out, err = capsys.readouterr()
    assert "replaces the config's sweep over seed (0, 1)" in err
    assert "sweep directory" in out
    summaries = list((tmp_path / "s").glob("compare-*/*/summary.json"))
    assert len(summaries) == 2
    assert all("seed" in json.loads(s.read_text())["replaced_sweep"] for s in summaries)


def test_a_huge_int_in_a_mapping_is_one_clean_line():
    text = _error({"rounds": 10**5000})
    assert (
        text == "config.rounds: <an integer of about 5001 digits> (at most 30 digits)"
    )


def test_a_sweep_over_a_ray_session_field_is_refused():
    text = _error({"sweep": {"ray.num_cpus": [1, 2]}})
    assert text == (
        "invalid config:\n  sweep.ray.num_cpus: the sweep's runs share one Ray "
        "session, started with the config's ray.num_cpus; set it outside the sweep "
        "(or run the config once per value)"
    )
    text = _error({"sweep": {"ray.object_store_memory_mb": [100, 1e27]}})
    assert text.startswith(
        "invalid config:\n  sweep.ray.object_store_memory_mb: the value 1e+27 is invalid"
    )
    assert load_config({"sweep": {"ray.clients_per_actor": [1, 2]}}).sweep


def test_a_key_y_or_n_is_a_plain_string_but_on_is_refused(tmp_path):
    cfg = load_config({"scheduler": {"policy": "random"}})
    assert cfg.scheduler.policy == "random"
    path = _file(tmp_path, "scheduler:\n  policy: lyapunov\n  params: {n: 3}\n")
    assert "params.n" not in _error(path)  # n is a key: the policy refuses it
    path = _file(tmp_path, "on: 3\n")
    assert "on: 'on' is a YAML 1.1 boolean" in _error(path)


@pytest.mark.parametrize("how", ["policies", "algorithms", "seeds"])
def test_compare_refuses_a_config_with_a_sweep_before_ray_starts(how, tmp_path, capsys):
    # Arrange: the sweep would be dropped by every comparison (each variant runs once)
    from rayfl import cli

    cfg = tmp_path / "swept.yaml"
    cfg.write_text("data: {dataset: digits}\nsweep: {algorithm.lr: [0.1, 0.2]}\n")
    flags = {
        "policies": ["--policies", "random,round_robin"],
        "algorithms": ["--algorithms", "fedavg,fedprox"],
        "seeds": ["--policies", "random", "--seeds", "0,1"],
    }[how]
    # Act
    rc = cli.main(["compare", str(cfg), *flags, f"output.dir={tmp_path}/out"])
    # Assert: one line naming the axis, exit 2, no run directory
    err = capsys.readouterr().err
    assert rc == 2
    assert "sweep over algorithm.lr would be ignored" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_policy_entry_parameter_goes_through_the_bounded_loader():
    # `rayfl compare --policies name:key=value` parses the value like an override
    from rayfl.compare.variants import policy_variant

    base = load_config("examples/quickstart.yaml", {"wireless": {}})
    assert policy_variant(base, "data_weighted:power=2")[1]["scheduler.params"] == {
        "power": 2
    }
    for hostile, says in [("[" * 300, "nested deeper"), ("1" * 5000, "5,000 digits")]:
        with pytest.raises(ConfigError, match=says) as caught:
            policy_variant(base, f"data_weighted:power={hostile}")
        assert len(str(caught.value)) < 400
