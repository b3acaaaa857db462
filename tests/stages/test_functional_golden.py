"""Cross-stack parity: --golden-save then --golden on the same stack is exact, a planted
perturbation fails, and an unusable golden is bad input (exit 2, one line)."""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import pytest
import torch

from gatekeeper.cli import main
from gatekeeper.core.errors import InputError
from stages.functional import golden

REPO = Path(__file__).resolve().parents[2]
MODEL = "tests.support.functional_models:tiny"
CONFIG = {"model": MODEL, "batch_size": 2, "input_shape": None, "seed": 0}
ARGS = {"spec": MODEL, "batch_size": 2, "input_shape": None, "seed": 0, "device": "cpu"}
QUICK = ["--device", "cpu", "--categories", "none", "--no-traced", "--no-sparse", "--checkpoint-trials", "0"]


def _save(tmp_path: Path) -> Path:
    where = tmp_path / "golden"
    golden.save(**ARGS, directory=str(where))
    return where


def _compare(where: Path) -> dict:
    return golden.compare(**ARGS, directory=str(where), meta=golden.read_meta(where, CONFIG))


def _replant(where: Path, change) -> None:
    """Rewrite the golden's tensors through ``change`` (as another stack would have written them)."""
    meta = json.loads((where / golden.META).read_text())
    tensors = golden._read_tensors(where, meta)
    change(tensors)
    keep = {k: meta[k] for k in ("created_at", "stack", "config")}
    golden.write_golden(where, tensors, keep)


def test_same_stack_gives_cosine_one_and_records_the_stack(tmp_path: Path) -> None:
    where = _save(tmp_path)
    meta = json.loads((where / golden.META).read_text())
    assert meta["schema_version"] == 1
    assert meta["stack"]["torch"] == torch.__version__
    assert meta["stack"]["device"] == "cpu"
    assert {"hip", "cuda", "device_name"} <= set(meta["stack"])
    assert meta["config"] == CONFIG
    names = set(meta["tensors"])
    assert {"input.0", "output.0", "grad.conv.weight", "grad.fc.bias", "state.bn.running_mean"} <= names
    result = _compare(where)
    assert result["cosine_min"] == 1.0
    assert result["max_rel_error"] == 0.0
    assert result["problems"] == {}


def test_a_planted_perturbation_fails_both_metrics(tmp_path: Path) -> None:
    where = _save(tmp_path)
    gen = torch.Generator().manual_seed(1)

    def noise(t: dict) -> None:
        g = t["grad.conv.weight"]
        t["grad.conv.weight"] = g + 0.05 * g.norm() / g.numel() ** 0.5 * torch.randn(g.shape, generator=gen)

    _replant(where, noise)
    result = _compare(where)
    assert result["cosine_min"] < 0.9999
    assert result["max_rel_error"] > 1e-3
    assert result["rows"]["grad.conv.weight"]["cosine"] == result["cosine_min"]


def test_a_scaled_gradient_keeps_its_direction_but_fails_the_error(tmp_path: Path) -> None:
    where = _save(tmp_path)
    _replant(where, lambda t: t.update({"grad.fc.weight": t["grad.fc.weight"] * 1.01}))
    result = _compare(where)
    assert result["cosine_min"] == pytest.approx(1.0, abs=1e-12)
    assert result["max_rel_error"] > 1e-3  # the cosine alone would miss it


def test_a_tensor_on_one_side_only_fails_closed(tmp_path: Path) -> None:
    where = _save(tmp_path)
    _replant(where, lambda t: t.pop("grad.fc.bias"))
    result = _compare(where)
    assert result["problems"] == {"grad.fc.bias": "not in the golden"}
    assert result["cosine_min"] == 0.0
    assert result["max_rel_error"] == 1.0


class _Boom:
    def __init__(self, marker: Path) -> None:
        self.marker = marker  # per test: no fixed path that parallel runs would share

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_golden_is_never_unpickled_beyond_tensors(tmp_path: Path) -> None:
    where = _save(tmp_path)
    marker = tmp_path / "gatekeeper-golden-pwned"
    buf = io.BytesIO()
    torch.save({"output.0": torch.zeros(1), "evil": _Boom(marker)}, buf, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    meta = json.loads((where / golden.META).read_text())
    meta["file"] = "golden.pt"  # the torch.save format, whichever format this machine wrote
    (where / meta["file"]).write_bytes(buf.getvalue())
    meta["sha256"] = __import__("hashlib").sha256(buf.getvalue()).hexdigest()
    (where / golden.META).write_text(json.dumps(meta))
    with pytest.raises(pickle.UnpicklingError):
        _compare(where)
    assert not marker.exists()


def test_safetensors_when_installed(tmp_path: Path) -> None:
    import safetensors  # noqa: F401  (in the dev extra: a missing one is a failure, not a skip)

    where = _save(tmp_path)
    assert (where / "golden.safetensors").exists()
    assert json.loads((where / golden.META).read_text())["format"] == "safetensors"
    assert _compare(where)["cosine_min"] == 1.0


def test_without_safetensors_the_golden_is_a_weights_only_torch_file(tmp_path: Path, monkeypatch) -> None:
    import importlib

    real = importlib.import_module

    def no_safetensors(name: str, *args):
        if name.startswith("safetensors"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args)

    monkeypatch.setattr(golden.importlib, "import_module", no_safetensors)
    where = _save(tmp_path)
    meta = json.loads((where / golden.META).read_text())
    assert (meta["format"], meta["file"]) == ("torch", "golden.pt")
    assert _compare(where)["cosine_min"] == 1.0


@pytest.mark.parametrize(
    ("spoil", "text"),
    [
        (lambda w: (w / "golden.json").unlink(), "no golden.json here"),
        (lambda w: (w / "golden.json").write_text("{"), "not a readable golden.json"),
        (lambda w: _edit(w, schema_version=2), "schema_version: 2 is not 1"),
        (lambda w: _edit(w, config={**CONFIG, "batch_size": 4}), "config.batch_size: the golden was made with 4"),
        (lambda w: _edit(w, file="../etc/passwd"), "is not golden.safetensors or golden.pt"),
        (lambda w: _tensor_file(w).write_bytes(b"edited"), "SHA-256 differs"),
        # the golden comes from another job's artifacts: each file is read as a regular file, bounded, strict
        (lambda w: _to_dev_zero(w / "golden.json"), "expected a golden.json, found a device or socket"),
        (lambda w: _to_dev_zero(_tensor_file(w)), "expected a golden tensor file, found a device or socket"),
        (lambda w: _edit_text(w, '"seed": 0', '"seed": 0, "seed": 0'), "duplicate key 'seed'"),
    ],
)
def test_an_unusable_golden_is_exit_2_with_one_line(tmp_path: Path, capsys, spoil, text: str) -> None:
    where = _save(tmp_path)
    spoil(where)
    with pytest.raises(InputError):
        golden.read_meta(where, CONFIG)
    args = ["stage", "functional_test", *QUICK, "--model", MODEL, "--batch-size", "2"]
    rc = main([*args, "--out", str(tmp_path / "o"), "--golden", str(where)])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert text in err[0]
    assert "golden" in err[0]


def _tensor_file(where: Path) -> Path:
    return where / json.loads((where / "golden.json").read_text())["file"]


def _to_dev_zero(path: Path) -> None:
    """A link to /dev/zero where a golden file belongs: stat said 0 bytes, and the read never ended."""
    path.unlink()
    path.symlink_to("/dev/zero")


def _edit_text(where: Path, old: str, new: str) -> None:
    text = (where / "golden.json").read_text()
    assert old in text
    (where / "golden.json").write_text(text.replace(old, new, 1))


def _edit(where: Path, **changes) -> None:
    meta = json.loads((where / "golden.json").read_text())
    meta.update(changes)
    (where / "golden.json").write_text(json.dumps(meta))


@pytest.mark.slow
def test_save_then_compare_through_the_stage_and_the_gates(tmp_path: Path) -> None:
    from gatekeeper.contract.stage_report import read_stage

    where, base = tmp_path / "golden", ["stage", "functional_test", *QUICK]
    assert main([*base, "--out", str(tmp_path / "a"), "--golden-save", str(where)]) == 0
    assert main([*base, "--out", str(tmp_path / "b"), "--golden", str(where)]) == 0
    report = read_stage(tmp_path / "b" / "functional_test.json")
    assert report.metrics["golden_cosine_min"].value == 1.0
    assert report.metrics["golden_max_rel_error"].value == 0.0
    check = next(c for c in report.checks if c.name == "golden.compare")
    assert check.details["golden_stack"]["torch"] == torch.__version__
    assert _gates(tmp_path / "b")["cross-stack-parity"]["outcome"] == "pass"

    gen = torch.Generator().manual_seed(2)
    _replant(
        where, lambda t: t.update({"output.0": t["output.0"] + 0.1 * torch.randn(t["output.0"].shape, generator=gen)})
    )
    assert main([*base, "--out", str(tmp_path / "c"), "--golden", str(where)]) == 1
    gates = _gates(tmp_path / "c")
    assert gates["cross-stack-parity"]["outcome"] == "fail"
    assert gates["cross-stack-parity-error"]["outcome"] == "fail"
    assert gates["cross-stack-parity-error"]["severity"] == "advisory"
    failed = next(c for c in read_stage(tmp_path / "c" / "functional_test.json").checks if c.name == "golden.compare")
    assert failed.status == "failed"
    assert "output.0" in failed.message


def _gates(artifacts: Path) -> dict:
    main(["evaluate", "--artifacts", str(artifacts), "--gates", str(REPO / "gates.yaml"), "--out", str(artifacts)])
    return {g["name"]: g for g in json.loads((artifacts / "verdict.json").read_text())["gates"]}
