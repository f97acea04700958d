"""The compatibility study: the mechanism's numbers are right, a tiny grid runs, writes what it promises, and resumes."""

import json
import math
from dataclasses import replace

import pytest
import torch

from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer
from attention_viz.data.checkpoints import list_models, load_model
from attention_viz.data.snapshots import load_snapshots
from attention_viz.draw import study as draw_study
from attention_viz.service.catalog import model_families
from attention_viz.train import study
from attention_viz.train.mechanism import measure, softmax_jacobian_norm

pytestmark = pytest.mark.usefixtures("one_thread")


def test_softmax_jacobian_norm_matches_autograd_and_its_limits():
    g = torch.Generator().manual_seed(0)
    for s in torch.randn(5, 7, generator=g, dtype=torch.float64) * 3:
        jacobian = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), s)  # (K, K)
        expected = torch.linalg.matrix_norm(jacobian)
        torch.testing.assert_close(softmax_jacobian_norm(torch.softmax(s, -1)), expected)
    n = 9
    uniform = torch.full((n,), 1 / n, dtype=torch.float64)
    assert softmax_jacobian_norm(uniform).item() == pytest.approx(math.sqrt(1 / n - 1 / n**2))
    assert softmax_jacobian_norm(torch.eye(4)[1]).item() == 0.0  # saturated: no gradient reaches the logits


def test_measure_sees_the_scale_switch_and_leaves_the_mode():
    cfg = TransformerConfig.small(vocab_size=30, n_encoder_layers=1, n_decoder_layers=1, d_model=32, d_k=64, d_v=8,
                                  d_ff=32, init="unit_qk")
    torch.manual_seed(0)
    model = Transformer(cfg).train()
    src, tgt = torch.randint(3, 30, (8, 7)), torch.randint(3, 30, (8, 6))
    src[:, 5:] = cfg.pad_id
    plain, scaled = measure(model, src, tgt, "none"), measure(model, src, tgt, "sqrt_dk")
    assert model.training
    assert set(plain) == {"encoder.0.self", "decoder.0.self", "decoder.0.cross", "all"}
    first = "encoder.0.self"  # the one attention whose inputs do not depend on the switch
    assert plain[first]["logit_std"] / scaled[first]["logit_std"] == pytest.approx(8.0, rel=1e-4)  # √64
    assert plain[first]["qk_var"] == scaled[first]["qk_var"]  # q·k itself does not depend on the switch
    assert plain["all"]["logit_std"] ** 2 == pytest.approx(plain["all"]["qk_var"], rel=0.05)
    assert plain["all"]["softmax_grad_norm"] < scaled["all"]["softmax_grad_norm"]  # larger logits, flatter softmax


def test_probe_steps_are_log_spaced_from_zero_to_the_end():
    marks = study.probe_steps(1000)
    assert marks[0] == 0 and marks[-1] == 1000 and marks == sorted(set(marks)) and len(marks) >= 20


def test_spread_counts_runs_that_never_got_there():
    s = study.spread([100, None, 300])
    assert (s["n"], s["missing"], s["mean"], s["median"]) == (2, 1, 200, 200)
    assert s["std"] == pytest.approx(math.sqrt(20000))
    assert study.spread([None]) == {"n": 0, "missing": 1}


TINY = replace(study.BASE, d_model=16, n_heads=2, d_v=4, d_ff=16, max_len=4, batch_size=8, warmup=2,
               log_every=2, heldout_size=20)


def test_a_tiny_study_writes_results_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(study, "BASE", TINY)
    ship = tmp_path / "ship"
    argv = ["--out", str(tmp_path), "--d-k", "4", "16", "--seeds", "0", "1", "--ship", str(ship),
            "--steps", "4", "--jobs", "1"]
    study.main(argv)
    results = json.loads((tmp_path / "results.json").read_text())
    runs = results["runs"]
    # the seed-0 unit_qk members are shipped: one checkpoint with snapshots per arm and d_k, listed as families
    names = {f"reverse_{arm}_dk{d_k}" for arm in study.ARMS for d_k in (4, 16)}
    assert set(results["setup"]["shipped"]) == names and len(results["setup"]["invocations"]) == 1
    assert {card["name"] for card in list_models(ship)} == names
    for name in names:
        model, card = load_model(name, device="cpu", directory=ship)
        assert card["family"] == "study" and card["init"] == "unit_qk" and card["seed"] == 0
        assert card["weights_dtype"] in ("float16", "float32") and card["half_precision_max_map_error"] >= 0
        snaps = load_snapshots(name, directory=ship)
        assert snaps.steps == study.probe_steps(4) and snaps.meta["compatibility"] == model.config.compatibility
    families = {f.key: f for f in model_families(list_models(ship))}
    assert set(families) == {"reverse/sqrt_dk", "reverse/none", "reverse/additive"}
    assert all(f.d_ks == [4, 16] for f in families.values())
    assert len(runs) == 2 * 2 * (3 + 2)  # d_k x seeds x (3 arms from unit_qk + 2 from xavier)
    for r in runs:
        assert r["compatibility"] in ("scaled_dot", "dot", "additive") and r["init"] in ("unit_qk", "xavier")
        assert 0 <= r["heldout_exact_match"] <= 1 and r["steps_to_90"] is None or isinstance(r["steps_to_90"], int)
        assert r["curve"]["step"] == [2, 4] and math.isfinite(r["final_loss"])
        assert r["mechanism"]["step"] == study.probe_steps(4)
        assert len(r["mechanism"]["all"]["softmax_grad_norm"]) == len(r["mechanism"]["step"])
    assert {(r["init"], r["compatibility"], r["d_k"]) for r in results["summary"]} == {
        (r["init"], r["compatibility"], r["d_k"]) for r in runs}
    assert all(row["heldout_exact_match"]["n"] == 2 for row in results["summary"])
    assert len(results["initialisation"]) == 2 * 3 * 2  # inits x arms x d_k, first seed
    figures = {"curves_unit_qk.png", "curves_xavier.png", "mechanism_unit_qk.png", "mechanism_xavier.png",
               "summary.png", "forming_dk4.png", "forming_dk16.png"}
    assert {p.name for p in tmp_path.glob("*.png")} == figures
    assert "| 16 |" in (tmp_path / "table.md").read_text()
    # The runs below ask for the same figures of the same members: drawn above, and again for partial results
    # (--no-train); the others record what they asked for (two thirds of this test's time was matplotlib's).
    draw_figures, asked = draw_study.save_figures, []
    monkeypatch.setattr(draw_study, "save_figures", lambda results, out, **kwargs: asked.append(
        (len(results["runs"]), str(out))) or [])
    # a second run trains nothing and keeps every member file
    stamps = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "members").iterdir()}
    study.main(argv)
    assert "0 members trained" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "members").iterdir()} == stamps
    assert json.loads((tmp_path / "results.json").read_text())["runs"] == runs
    # a shipped member whose snapshots went missing is trained again
    (ship / "reverse_dot_dk16.snapshots.npz").unlink()
    study.main(argv)
    assert "1 members trained" in capsys.readouterr().out
    assert load_snapshots("reverse_dot_dk16", directory=ship).steps == study.probe_steps(4)
    assert len(json.loads((tmp_path / "results.json").read_text())["setup"]["invocations"]) == 2
    assert asked == [(len(runs), str(tmp_path))] * 2
    # --no-train assembles what is finished, names what is not, and draws what it has
    (tmp_path / "members" / "additive_dk16_seed1_unit_qk.json").unlink()
    for png in tmp_path.glob("*.png"):
        png.unlink()
    monkeypatch.setattr(draw_study, "save_figures", draw_figures)
    study.main([*argv, "--no-train"])
    partial = json.loads((tmp_path / "results.json").read_text())
    assert partial["setup"]["missing"] == ["additive_dk16_seed1_unit_qk"] and len(partial["runs"]) == len(runs) - 1
    assert "0 members trained" in capsys.readouterr().out
    assert {p.name for p in tmp_path.glob("*.png")} == figures
    # a different setup is not mistaken for a finished one
    monkeypatch.setattr(draw_study, "save_figures", lambda results, out, **kwargs: asked.append(
        (len(results["runs"]), str(out))) or [])
    study.main([*argv[:-4], "--steps", "2", "--jobs", "1", "--xavier-arms"])
    assert "12 members trained" in capsys.readouterr().out
    assert len(asked) == 3


def test_equal_settings_but_the_compared_fields():
    a = study.member_settings(study.BASE, "dot", 512, 1, "unit_qk")
    b = study.member_settings(study.BASE, "additive", 8, 2, "xavier")
    assert (a.compatibility, a.scale, b.compatibility, b.scale) == ("dot_product", "none", "additive", "sqrt_dk")
    differ = {k for k, v in vars(a).items() if vars(b)[k] != v}
    assert differ == {"compatibility", "scale", "d_k", "seed", "init"}
