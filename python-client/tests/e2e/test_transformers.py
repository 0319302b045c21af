"""A Hugging Face model through a call: as argument and result, and trained by a call. The model
is a tiny GPT-2 built from a config here (no download: HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CALL_SECONDS = 150
# The first call imports transformers in the executor: seconds on an idle machine, a minute on
# a busy one.
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def tiny_gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2,
                                     n_head=2)
    return transformers.GPT2LMHeadModel(config)


def batch():
    generator = torch.Generator().manual_seed(1)
    return torch.randint(0, 64, (4, 16), generator=generator)


def echo(model):
    return model


def train(model, tokens, steps):
    """A few optimiser steps on the worker; the model and the losses come back."""
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        loss = model(input_ids=tokens, labels=tokens).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return model, losses


def same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_a_transformers_model_goes_through_a_call_as_argument_and_result(client):
    model = tiny_gpt2()
    back = client.submit(echo, model).result(timeout=CALL_SECONDS)
    assert type(back) is transformers.GPT2LMHeadModel and back is not model
    assert back.config.to_dict() == model.config.to_dict()
    assert same_weights(back, model)
    model.eval(), back.eval()
    with torch.no_grad():
        assert torch.equal(back(input_ids=batch()).logits, model(input_ids=batch()).logits)


def test_a_call_trains_a_transformers_model_for_a_few_steps(client):
    model = tiny_gpt2()
    trained, losses = client.submit(train, model, batch(), 5, gpus=1).result(
        timeout=CALL_SECONDS)
    assert len(losses) == 5 and all(l == l for l in losses)  # no NaN
    assert losses[-1] < losses[0], losses
    assert not same_weights(trained, model)  # the caller's copy is untouched, the result moved
    trained.eval()
    with torch.no_grad():
        loss = trained(input_ids=batch(), labels=batch()).loss.item()
    assert loss < losses[0]
