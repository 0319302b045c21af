import json

import pytest

import bulletin
from bulletin._config import (Options, gpu_eighths, parse_memory, parse_timeout, resolve_address,
                             resolve_token)


@pytest.mark.parametrize("value, expected", [
    (1024, 1024), ("512MB", 512 * 10**6), ("32GiB", 32 * 2**30), ("1.5gb", 1_500_000_000),
    ("64 KiB", 65536), ("100", 100), (None, 0),
])
def test_memory_accepts_bytes_and_unit_strings(value, expected):
    assert parse_memory(value) == expected


@pytest.mark.parametrize("value", ["lots", "32GB RAM", "12XB", -1, True, [1], "GiB"])
def test_memory_rejects_nonsense_naming_the_parameter_and_the_accepted_forms(value):
    with pytest.raises(bulletin.InvalidArgumentError, match=r"memory=.*(512MB|non-negative)"):
        parse_memory(value)


@pytest.mark.parametrize("value, expected", [
    (30, 30.0), (0.5, 0.5), ("45s", 45.0), ("30m", 1800.0), ("2h", 7200.0), ("1h30m", 5400.0),
    ("1.5h", 5400.0), ("90", 90.0), ("1d", 86400.0), (None, 0.0),
    # The runtime's config grammar: milliseconds, spaces around units, any case, Slurm's clock.
    ("10 ms", 0.01), ("1h 30m", 5400.0), (" 2H ", 7200.0), ("1d2h", 93600.0),
    ("1:30:00", 5400.0), ("45:00", 2700.0), ("2-00:00:00", 172800.0),
])
def test_timeout_accepts_seconds_and_duration_strings(value, expected):
    assert parse_timeout(value) == expected


@pytest.mark.parametrize("value", ["soon", "2 hours", "5x", 0, -3, "0s", float("inf"), True,
                                   "1e3", "-5s", "1h30", "unlimited", "", "nan", ":30"])
def test_timeout_rejects_nonsense_naming_the_parameter(value):
    with pytest.raises(bulletin.InvalidArgumentError, match=r"timeout="):
        parse_timeout(value)


def test_invalid_option_error_is_also_a_value_error():
    with pytest.raises(ValueError):
        Options.make(gpus=-1)


def test_options_apply_only_given_values_over_the_base():
    base = Options.make(gpus=2, memory="1GiB", qos="batch")
    merged = Options.make(base, cpus=4, memory=None, qos=None)
    assert (merged.gpus, merged.cpus, merged.memory, merged.qos) == (2, 4.0, 2**30, "batch")


@pytest.mark.parametrize("gpus, eighths", [(0.5, 4), (0.25, 2), (0.125, 1), (0.875, 7),
                                           (2, 0), (3.0, 0)])
def test_gpus_take_whole_numbers_and_eighths_of_one_gpu(gpus, eighths):
    options = Options.make(gpus=gpus)
    assert options.gpus == gpus and gpu_eighths(options.gpus) == eighths
    assert isinstance(options.gpus, int) == float(gpus).is_integer()


@pytest.mark.parametrize("gpus, words", [
    (0.3, "a share of a GPU is a multiple of 1/8"),
    (1.5, "fractions are for less than one GPU"),
    (2.25, "ask for 3 whole GPUs instead"),
    (-0.5, "expected a whole number of GPUs"),
    (float("nan"), "expected a whole number of GPUs"),
    (True, "expected a whole number of GPUs"),
])
def test_gpus_refuse_other_fractions_saying_what_to_ask(gpus, words):
    with pytest.raises(bulletin.InvalidArgumentError, match=words.replace(".", r"\.")):
        Options.make(gpus=gpus)


@pytest.mark.parametrize("kwargs, name", [
    ({"gpus": 1.5}, "gpus"), ({"cpus": 0}, "cpus"), ({"qos": 3}, "qos"),
    ({"priority": "high"}, "priority"), ({"retries": -1}, "retries"),
])
def test_bad_decorator_option_fails_at_definition_naming_it(kwargs, name):
    with pytest.raises(bulletin.InvalidArgumentError, match=name):
        bulletin.gpu(**kwargs)


def test_address_prefers_argument_then_env_then_runtime_json_then_default(bulletin_env, monkeypatch):
    assert resolve_address() == ("127.0.0.1:8770", "the default address")
    (bulletin_env / "runtime.json").write_text(json.dumps({"address": "127.0.0.1:9001", "pid": 1}))
    assert resolve_address()[0] == "127.0.0.1:9001"
    monkeypatch.setenv("BULLETIN_ADDRESS", "head:9002")
    assert resolve_address() == ("head:9002", "$BULLETIN_ADDRESS")
    assert resolve_address("other:1")[0] == "other:1"


def test_half_written_runtime_json_falls_back_to_the_default(bulletin_env):
    (bulletin_env / "runtime.json").write_text('{"address": ')
    assert resolve_address()[0] == "127.0.0.1:8770"


def test_token_prefers_argument_then_env_then_home_file(bulletin_env, monkeypatch):
    assert resolve_token()[0] is None
    (bulletin_env / "token").write_text("from-file\n")
    assert resolve_token()[0] == "from-file"
    monkeypatch.setenv("BULLETIN_TOKEN", "from-env")
    assert resolve_token()[0] == "from-env"
    assert resolve_token("from-arg")[0] == "from-arg"
