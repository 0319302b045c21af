"""Which keywords of a call are the function's and which are the call's options (no cluster)."""

import functools

import pytest

import bulletin
from bulletin._call_options import split_keywords
from bulletin._config import Options


def fetch(url, timeout=None, *, retries=0):
    return url, timeout, retries


def train(x):
    return x


def anything(x, **kwargs):
    return kwargs


def test_keywords_the_function_takes_reach_it():
    call = split_keywords(fetch, {"timeout": 5, "retries": 2}, Options())
    assert call.kwargs == {"timeout": 5, "retries": 2}
    assert call.options == Options()


def test_option_names_the_function_cannot_take_set_the_options():
    call = split_keywords(train, {"gpus": 2, "timeout": "1h", "memory": "1GiB", "qos": "batch",
                                  "priority": 3, "retries": 1, "credits": 2.5, "cpus": 4}, Options())
    assert call.kwargs == {}
    assert call.options == Options(gpus=2, cpus=4.0, memory=2**30, qos="batch", priority=3,
                                   timeout=3600.0, retries=1, credits=2.5)


def test_a_function_with_var_keywords_gets_every_keyword():
    call = split_keywords(anything, {"gpus": 2, "timeout": 5, "key": "k"}, Options(gpus=1))
    assert call.kwargs == {"gpus": 2, "timeout": 5, "key": "k"}
    assert call.options == Options(gpus=1) and call.key is None


def test_a_mix_splits_by_name():
    call = split_keywords(fetch, {"timeout": 5, "gpus": 1, "key": "get"}, Options())
    assert call.kwargs == {"timeout": 5}
    assert call.options.gpus == 1 and call.options.timeout == 0 and call.key == "get"


def test_a_decorated_function_is_judged_by_its_own_signature():
    remote = bulletin.cpu(fetch, cpus=2)
    call = split_keywords(remote, {"timeout": 5, "gpus": 1}, remote.call_options)
    assert call.kwargs == {"timeout": 5}
    assert call.options == Options(gpus=1, cpus=2.0)


def test_a_partial_passes_a_keyword_that_is_also_an_option_name():
    call = split_keywords(functools.partial(train), {"x": 1, "timeout": 5}, Options())
    assert call.kwargs == {"x": 1} and call.options.timeout == 5


def test_an_unreadable_signature_refuses_option_names_and_says_both_ways():
    with pytest.raises(bulletin.InvalidArgumentError) as info:
        split_keywords(int, {"qos": "batch"}, Options())
    message = str(info.value)
    assert "qos=" in message and "bulletin.cpu(int, qos=...)" in message
    assert "functools.partial(int, qos=...)" in message
    # Keywords that name no option go to the function without looking at its signature.
    assert split_keywords(int, {"base": 16}, Options()).kwargs == {"base": 16}


def test_dask_resources_map_onto_the_options():
    call = split_keywords(train, {"resources": {"GPU": 2, "memory": "2GB", "CPU": 3}}, Options())
    assert call.options == Options(gpus=2, cpus=3.0, memory=2 * 10**9)
    with pytest.raises(bulletin.InvalidArgumentError, match="'TPU' is not a resource"):
        split_keywords(train, {"resources": {"TPU": 1}}, Options())


@pytest.mark.parametrize("name, value, reason", [
    ("workers", ["w1"], "places each call itself"),
    ("actor", True, "no actors"),
    ("key", 3, "expected a str"),
])
def test_dask_keywords_without_a_meaning_here_are_refused(name, value, reason):
    with pytest.raises(bulletin.InvalidArgumentError, match=reason):
        split_keywords(train, {name: value}, Options())


def test_dask_keywords_that_change_nothing_are_accepted():
    call = split_keywords(train, {"pure": False, "fifo_timeout": "100 ms",
                                  "allow_other_workers": True}, Options())
    assert call.kwargs == {} and call.options == Options()


def test_options_give_a_new_remote_function_validated_at_once_naming_the_field():
    remote = bulletin.gpu(fetch)
    longer = remote.options(timeout="2h", gpus=2)
    assert longer.call_options == Options(gpus=2, timeout=7200.0)
    assert remote.call_options == Options(gpus=1)  # unchanged
    with pytest.raises(bulletin.InvalidArgumentError, match="gpus=-1"):
        remote.options(gpus=-1)
    with pytest.raises(bulletin.InvalidArgumentError, match="unknown option 'gpu'"):
        remote.options(gpu=1)
