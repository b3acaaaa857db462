from __future__ import annotations

import pytest
import torch

from stages.functional import checkpoint

TINY = "tests.support.functional_models:tiny"
ARGS = (TINY, 3, "cpu", 2, None)


@pytest.fixture(autouse=True)
def _keep_thread_count():
    threads = torch.get_num_threads()  # checkpoint runs pin one thread (in a worker, normally)
    yield
    torch.set_num_threads(threads)


def test_restore_continues_bitwise_and_a_lost_numpy_rng_is_caught(tmp_path):
    path = tmp_path / "ckpt.pt"
    straight = checkpoint.train(*ARGS, 4, 2, str(path))
    assert path.exists()
    assert not (tmp_path / "ckpt.pt.tmp").exists()  # written atomically
    resumed = checkpoint.resume(*ARGS, 2, str(path))
    ok, message, worst = checkpoint.compare_states(resumed, straight, bitwise=True)
    assert ok, message
    assert worst == 0.0
    assert "bitwise identical" in message

    # a checkpoint whose numpy RNG state is wrong: the continued run diverges, and the check says so
    ckpt = torch.load(path, weights_only=True)
    ckpt["numpy_rng"]["keys"] = torch.roll(ckpt["numpy_rng"]["keys"], 1)
    torch.save(ckpt, path)
    diverged = checkpoint.resume(*ARGS, 2, str(path))
    ok, message, _ = checkpoint.compare_states(diverged, straight, bitwise=True)
    assert not ok
    assert "tensors differ" in message


def test_compare_states_tolerance_mode_for_gpus():
    a = {"w": torch.ones(3)}
    b = {"w": torch.ones(3) * (1 + 1e-6)}
    ok, message, _ = checkpoint.compare_states(b, a, bitwise=False)
    assert ok
    assert "not bitwise" in message
    ok, _, _ = checkpoint.compare_states({"w": torch.ones(3) * 1.1}, a, bitwise=False)
    assert not ok
    ok, message, _ = checkpoint.compare_states({"v": torch.ones(3)}, a, bitwise=True)
    assert not ok
    assert "keys differ" in message
