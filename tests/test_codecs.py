"""OliVe's and ANT's operand decoders as a priced component of the bit-slice unit (issue 10,
item 4): decode counts and energy derived by hand on ``ops_bitslice`` (R = 32, C = 128, 28 nm),
coverage of the ``decode_<decoder>`` entries, the pipeline stage's bound, other dataflows as they
were. A fold of m streamed rows at P slice products per MAC and s_w weight slices takes
``s_w·R + R + C − 2 + P·m`` cycles (``arch/units/bitslice.py``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

import accel_sim
from accel_sim.arch.load import ARCH_DIR, arch_from_dict, load_arch
from accel_sim.dataflow.olive import build as olive_build
from accel_sim.energy.model import price
from accel_sim.energy.scaling import scale_factor
from accel_sim.engine.counts import ActionCounts
from accel_sim.engine.run import run_plan
from accel_sim.workload.gemm import Gemm

ARCH = "ops_bitslice"
R, C = 32, 128
#: Stillmaker & Baas logic factor 45 nm → 28 nm (docs/energy.md: ×0.420)
F28 = scale_factor(45, 28, "logic")
#: the decoders' entries in ops_bitslice.yaml, pJ per decoded element at 45 nm
PJ_45 = {"olive4": 0.03, "olive8": 0.06, "ant4": 0.03, "ant8": 0.06}


def _data(name: str) -> dict:
    return yaml.safe_load((ARCH_DIR / f"{name}.yaml").read_text(encoding="utf-8"))


def _without(decoder: str) -> dict:
    data = _data(ARCH)
    data["energy"]["compute"].pop(f"decode_{decoder}")
    return data


def test_the_node_factor_is_the_documented_one():
    assert F28 == pytest.approx(0.420, abs=1e-3)


def test_decode_count_and_energy_of_a_small_gemm_by_hand():
    """64×128×128 OliVe-4: K/R = 4 row folds × N/C = 1 column fold, all 64 rows streamed in each.
    X: each fold streams its 64×32 slice once → 4 · 2048 = 8,192 = M·K·(N/C) decodes; W: each
    fold loads its 32×128 tile once → 4 · 4096 = 16,384 = K·N. Total 24,576 decodes ×
    0.03 pJ × 0.420 ≈ 309.8 pJ."""
    r = accel_sim.simulate(ARCH, "64x128x128", "olive", {"bits": 4})
    decodes = 64 * 128 * (128 // C) + 128 * 128
    assert decodes == 24_576
    assert r.energy_breakdown_pj["decode_olive4"] == pytest.approx(decodes * 0.03 * F28)
    assert r.energy_breakdown_pj["decode_olive4"] == pytest.approx(309.79, abs=0.01)
    source = r.energy_sources["decode_olive4"]
    assert source.startswith("compute.decode_olive4: 0.03 pJ/op @45 nm → 0.01261 @28 nm")
    assert "assumption" in source and "[H14]" in source
    # the run's energy before the decoders were priced, plus the decoders
    assert r.energy_pj == pytest.approx(3_144_034.3279 + decodes * 0.03 * F28, rel=1e-9)
    assert r.energy_pj == pytest.approx(sum(r.energy_breakdown_pj.values()))
    assert r.knobs["decodes"] == decodes  # the plan's count agrees with the engine's here
    assert not any("not simulated" in n or "no codec" in n for n in r.notes)


@pytest.mark.parametrize("flow, bits", [("olive", 4), ("olive", 8), ("ant", 4), ("ant", 8)])
def test_column_folds_decode_x_again(flow, bits):
    """64×256×512: 8 row folds × 4 column folds. X enters once per column fold: 64·256·4 =
    65,536; W once: 256·512 = 131,072; 196,608 decodes at the decoder's width's price."""
    r = accel_sim.simulate(ARCH, "64x256x512", flow, {"bits": bits})
    decoder = f"{flow}{bits}"
    decodes = 64 * 256 * 4 + 256 * 512
    priced = decodes * PJ_45[decoder] * F28
    assert r.energy_breakdown_pj[f"decode_{decoder}"] == pytest.approx(priced)
    assert [k for k in r.energy_breakdown_pj if k.startswith("decode_")] == [f"decode_{decoder}"]
    assert r.knobs["decodes"] == decodes


def test_instances_and_engines_count_alike():
    """``count`` instances decode ``count`` times as much; the closed-form engine counts the
    same elements (counts come from the step program, not the timing)."""
    arch = load_arch(ARCH)
    for count in (1, 3):
        plan = olive_build(Gemm(64, 128, 128, count=count), arch, None, {"bits": 4})
        for engine in ("des", "twin"):
            result = run_plan(arch, plan, engine=engine)
            total: Counter = Counter()
            for op in result.ops:
                total.update(op.counts.decodes)
            assert total == Counter({"olive4": count * 24_576})


def test_price_charges_each_decoder_at_its_entry():
    arch = load_arch(ARCH)
    report = price(arch, ActionCounts(decodes=Counter({"ant8": 1000, "olive4": 10})), cycles=0)
    assert report.breakdown_pj["decode_ant8"] == pytest.approx(1000 * 0.06 * F28)
    assert report.breakdown_pj["decode_olive4"] == pytest.approx(10 * 0.03 * F28)
    assert set(report.breakdown_pj) == {"decode_ant8", "decode_olive4"}


def test_the_pipeline_stage_is_below_a_rounding_error():
    """Not charged (docs/dataflows.md): one registered stage delays a fold by ≤ 1 cycle. On
    64×128×128 OliVe-4 the 4 folds take 32 + 32 + 128 − 2 + 64 = 254 cycles each, 1,016 in
    all, unchanged by the decoders; the bound, 4 cycles, is 0.39 %. The shortest possible fold
    (m = 1, INT4) is 32 + 32 + 128 − 2 + 1 = 191 cycles: ≤ 0.53 % anywhere on this array."""
    r = accel_sim.simulate(ARCH, "64x128x128", "olive", {"bits": 4})
    folds = (128 // R) * (128 // C)
    assert r.compute_cycles == folds * (R + R + C - 2 + 64) == 1016
    assert folds / r.compute_cycles < 0.004
    unit = load_arch(ARCH).compute
    shortest = unit.step_cycles(unit.step_tiles(1, R, C, 16)[0], 16, 1, R, C)
    assert shortest == 191 and 1 / shortest < 0.0053
    before = {"olive": 1016, "ant": 1016}  # compute cycles before the decoders were priced
    for flow, cycles in before.items():
        assert accel_sim.simulate(ARCH, "64x128x128", flow, {"bits": 4}).compute_cycles == cycles


@pytest.mark.parametrize("flow, energy", [
    ("w8a8", 3_826_743.195013846), ("int16", 5_535_314.914547028),
    ("w4a4_static", 3_138_126.300280245)])  # fmt: skip
def test_other_dataflows_are_unchanged(flow, energy):
    """The same energy as before the decoders were priced, no decoder line."""
    r = accel_sim.simulate(ARCH, "64x128x128", flow)
    assert r.energy_pj == pytest.approx(energy, rel=1e-12)
    assert not any(k.startswith("decode_") for k in r.energy_breakdown_pj)


def test_units_without_decoders_leave_the_plan_as_it_was():
    """On the systolic array (no decode actions) the matmul has no decoding, its energy is the
    one before, and the notes say the decoders are not modelled there."""
    r = accel_sim.simulate("systolic_32x32_ws", "64x128x128", "olive", {"bits": 4})
    # (the twin's tile pipeline costs the 64-row step tile exactly, 1,319 cycles, and the
    # mapper takes it over the 32-row one, 1,473 in the DES: 1,842,186.84 pJ before)
    assert r.energy_pj == pytest.approx(1_792_224.8477998893, rel=1e-12)
    assert not any(k.startswith("decode_") for k in r.energy_breakdown_pj)
    assert any("decode_olive4" in n and "not modelled" in n for n in r.notes)
    plan = olive_build(Gemm(64, 128, 128), load_arch("systolic_32x32_ws"), None, {"bits": 4})
    assert plan.matmuls[0].decode is None
    assert olive_build(Gemm(64, 128, 128), load_arch(ARCH), None, {"bits": 4}).matmuls[0].decode \
        == "olive4"  # fmt: skip


# ------------------------------------------------------------------ coverage
def test_shipped_entries_are_used_and_declared():
    arch = load_arch(ARCH)
    assert arch.compute.decode_actions() == tuple(f"decode_{d}" for d in sorted(PJ_45))
    assert arch.unused_energy_entries == []
    for decoder, value in PJ_45.items():
        entry = arch.energy["compute"][f"decode_{decoder}"]
        assert (entry.value, entry.unit, entry.node_nm, entry.scaling) == (value, "pJ/op", 45,
                                                                          "logic")  # fmt: skip
        assert entry.source.startswith("assumption:")


def test_a_missing_entry_is_one_line_naming_the_key(tmp_path: Path, run_cli):
    arch = arch_from_dict(_without("olive4"), "broken.yaml")  # loads: not needed at load
    assert arch.unused_energy_entries == []
    with pytest.raises(accel_sim.UserInputError) as info:
        accel_sim.simulate(arch, "64x128x128", "olive", {"bits": 4})
    assert info.value.key == "energy.compute.decode_olive4"
    assert "missing entry" in str(info.value) and "\n" not in str(info.value)
    accel_sim.simulate(arch, "64x128x128", "olive", {"bits": 8})  # its own entry is there
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(_without("ant4"), sort_keys=False), encoding="utf-8")
    code, out, err = run_cli(["run", "--arch", path, "--gemm", "64x128x128", "--dataflow", "ant"])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "energy.compute.decode_ant4: missing entry" in err


def test_a_present_entry_must_be_per_op():
    data = _data(ARCH)
    data["energy"]["compute"]["decode_ant8"]["unit"] = "pJ/MAC"
    with pytest.raises(accel_sim.UserInputError) as info:
        arch_from_dict(data, "broken.yaml")
    assert info.value.key == "energy.compute.decode_ant8.unit" and "pJ/op" in str(info.value)


def test_an_entry_no_unit_decodes_with_is_reported_unused():
    data = _data("systolic_32x32_ws")
    data["energy"]["compute"]["decode_olive4"] = dict(_data(ARCH)["energy"]["compute"]
                                                      ["decode_olive4"])  # fmt: skip
    arch = arch_from_dict(data, "extra.yaml")
    assert arch.unused_energy_entries == ["energy.compute.decode_olive4"]
