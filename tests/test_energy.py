"""Energy at one node per architecture: the scaling rule, coverage at load, and pricing.

Hand-computed values come from Stillmaker & Baas 2017, Table 5 (energy fit a2·V² + a1·V + a0 per
node) at the nominal supplies in ``accel_sim/energy/scaling.py``, and from Horowitz (ISSCC 2014,
45 nm): INT8 mult 0.2, INT32 add 0.1, FP16 mult 1.1, FP32 add 0.9 pJ.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
import yaml

from accel_sim.arch.load import ARCH_DIR, arch_from_dict, list_archs, load_arch
from accel_sim.energy.model import energy_at_node, price
from accel_sim.energy.scaling import energy_factor, energy_fit, scale_energy, scale_factor
from accel_sim.engine.counts import ActionCounts
from accel_sim.errors import UserInputError

# --- the scaling rule ---------------------------------------------------------------------------

F45 = 1.018 - 0.3107 + 0.1539  # HP 45 nm at 1.0 V
F7 = 0.1776 * 0.7**2 - 0.09097 * 0.7 + 0.02447  # ITRS HP 7 nm at 0.7 V
F10 = 0.2068 * 0.75**2 - 0.09311 * 0.75 + 0.02375  # ITRS HP 10 nm at 0.75 V


def test_fit_reproduces_the_papers_corrected_example():
    # Stillmaker & Baas corrigendum, §4.2.1: 32 nm HP at 0.9 V vs 65 nm at 1.3 V, 1 pJ/op
    assert energy_fit(32, 0.9) == pytest.approx(0.4571, abs=1e-4)
    assert energy_fit(65, 1.3) == pytest.approx(2.604, abs=1e-3)
    assert energy_fit(32, 0.9) / energy_fit(65, 1.3) * 1.0 == pytest.approx(0.1755, abs=1e-4)


def test_factors_at_table_nodes():
    assert energy_factor(45) == pytest.approx(0.8612, abs=1e-4)
    assert energy_factor(7) == pytest.approx(0.047815, rel=1e-9)
    assert scale_factor(45, 7, "logic") == pytest.approx(F7 / F45, rel=1e-12)
    assert scale_factor(45, 7, "logic") == pytest.approx(0.05552, abs=1e-5)
    # INT8 MAC (0.3 pJ at 45 nm) at 7 nm
    assert scale_energy(0.3, 45, 7, "logic") == pytest.approx(0.01666, abs=1e-5)
    nodes = [130, 90, 65, 45, 32, 20, 16, 14, 10, 7]
    factors = [energy_factor(n) for n in nodes]
    assert factors == sorted(factors, reverse=True)  # smaller node, less energy per operation


def test_log_log_interpolation_between_nodes():
    t = math.log(8 / 7) / math.log(10 / 7)
    expected = math.exp(math.log(F7) + t * math.log(F10 / F7))
    assert energy_factor(8) == pytest.approx(expected, rel=1e-12)
    assert F7 < energy_factor(8) < F10


def test_sram_uses_the_logic_factor_and_none_is_identity():
    assert scale_factor(45, 16, "sram") == scale_factor(45, 16, "logic")
    assert scale_factor(45, 45, "logic") == 1.0
    assert scale_factor(None, 7, "none") == 1.0
    assert scale_energy(31.2, None, 7, "none") == 31.2


@pytest.mark.parametrize("node", [5, 3, 180, 250])
def test_nodes_outside_the_table_are_refused(node):
    with pytest.raises(UserInputError, match="outside the 7-130 nm range"):
        energy_factor(node)
    with pytest.raises(UserInputError):
        scale_factor(45, node, "logic")


# --- shipped architectures ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list_archs())
def test_shipped_arch_covers_its_needs(name):
    arch = load_arch(name)
    assert 7 <= arch.node_nm <= 130
    for (component, action), (unit, _) in arch.energy_needs().items():
        assert arch.energy[component][action].unit == unit
    assert arch.unused_energy_entries == []
    # every needed action can be priced
    counts = ActionCounts(
        macs=Counter({a[4:]: 1000 for c, a in arch.energy_needs() if c == "compute"}),
        bytes_read=Counter({m.name: 64 for m in arch.memory}),
        bytes_written=Counter({m.name: 64 for m in arch.memory}),
        vector_ops=10.0,
        comparator_ops=10 if arch.early_bird else 0,
    )
    report = price(arch, counts, cycles=1000)
    assert set(report.breakdown_pj) == set(report.sources)
    assert "leakage" in report.breakdown_pj and "vector" in report.breakdown_pj
    assert ("early_bird" in report.breakdown_pj) == (arch.early_bird is not None)


@pytest.mark.parametrize("name", list_archs())
def test_mac_energy_is_multiply_plus_accumulator_add(name):
    arch = load_arch(name)
    if arch.compute.kind == "bitslice":
        pytest.skip("a MAC is P slice products + reductions: tests/test_bitslice.py checks it")
    compute = arch.energy["compute"]
    if "mac_int8" in compute:  # INT8 mult 0.2 + 32-bit add 0.1, not an 8-bit add (0.03)
        assert compute["mac_int8"].value == pytest.approx(0.2 + 0.1)
        assert compute["mac_int8"].node_nm == 45 and "INT32 add" in compute["mac_int8"].source
    if "mac_int4" in compute:
        assert compute["mac_int4"].value == pytest.approx(0.2 * (4 / 8) ** 2 + 0.1)
    if "mac_fp16" in compute:  # FP16 mult 1.1 + FP32 add 0.9
        assert compute["mac_fp16"].value == pytest.approx(1.1 + 0.9)
    if "mac_fp8" in compute:
        assert compute["mac_fp8"].value == pytest.approx(1.1 * (4 / 11) ** 2 + 0.9, abs=1e-3)


@pytest.mark.parametrize("name", list_archs())
def test_dram_is_per_technology_not_node_scaled(name):
    arch = load_arch(name)
    for action in ("read", "write"):
        entry = arch.energy[arch.dram.name][action]
        assert entry.scaling == "none"
        assert energy_at_node(arch, arch.dram.name, action) == entry.value
    assert arch.energy["chip"]["leakage"].scaling == "none"


def test_price_converts_to_the_arch_node_and_names_the_source():
    arch = load_arch("ascend_like_cube")  # 7 nm
    counts = ActionCounts(macs=Counter({"int8": 1000}), bytes_read=Counter({"HBM": 100}))
    report = price(arch, counts, cycles=0)
    assert report.breakdown_pj["mac_int8"] == pytest.approx(1000 * 0.3 * F7 / F45)
    assert report.breakdown_pj["HBM_read"] == pytest.approx(100 * 31.2)
    src = report.sources["mac_int8"]
    assert src.startswith("compute.mac_int8: 0.3 pJ/MAC @45 nm → 0.01666 @7 nm")
    assert "(Stillmaker & Baas 2017, logic) — [H14] INT8 mult 0.2 + INT32 add 0.1" in src
    assert report.sources["HBM_read"].startswith("HBM.read: 31.2 pJ/byte (not node-scaled) — ")


# --- validation at load -------------------------------------------------------------------------


def _data(name: str) -> dict:
    return yaml.safe_load((ARCH_DIR / f"{name}.yaml").read_text(encoding="utf-8"))


def _dump(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "component", "action"),
    [
        ("ascend_like_cube", "L2", "write"),
        ("ascend_like_cube", "compute", "mac_int8"),
        ("ascend_like_cube", "chip", "leakage"),
        ("systolic_32x32_ws", "early_bird", "compare"),
        ("edge_npu_int8", "vector", "op"),
    ],
)
def test_missing_entry_is_a_one_line_error(tmp_path, run_cli, name, component, action):
    data = _data(name)
    del data["energy"][component][action]
    path = _dump(tmp_path, data)
    code, _, err = run_cli(["run", "--arch", path, "--gemm", "16x16x16"])
    line = err.rstrip("\n")
    assert code == 2 and "\n" not in line and "Traceback" not in line
    assert f"{path}: energy.{component}.{action}: missing entry" in line


def _edit(component: str, action: str, **changes):
    """A mutator updating (value ``None``: removing) keys of ``energy[component][action]``."""

    def mutate(data: dict) -> None:
        entry = data["energy"][component][action]
        for key, value in changes.items():
            if value is None:
                entry.pop(key)
            else:
                entry[key] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "key", "needle"),
    [
        (_edit("HBM", "read", scaling="logic", node_nm=45), "energy.HBM.read.scaling", "DRAM"),
        (_edit("chip", "leakage", scaling="logic", node_nm=45), "energy.chip.leakage.scaling",
         "use none"),
        (_edit("L2", "read", unit="pJ/op"), "energy.L2.read.unit", "pJ/byte"),
        (_edit("L1", "read", node_nm=None), "energy.L1.read.node_nm", "required"),
        (_edit("L1", "read", node_nm=180), "energy.L1.read.node_nm", "7-130"),
        (_edit("L1", "read", tech="x"), "energy.L1.read.tech", "unknown key"),
        (_edit("L1", "read", scaling=None), "energy.L1.read.scaling", "required"),
        (lambda d: d.update(node_nm=5), "node_nm", "7-130"),
        (lambda d: d.pop("node_nm"), "node_nm", "required"),
    ],
    ids=["dram-scaled", "leakage-scaled", "unit", "no-node", "node-180", "unknown-key",
         "no-scaling", "arch-node-5", "no-arch-node"],
)  # fmt: skip
def test_bad_entries_name_their_key(mutate, key, needle):
    data = _data("ascend_like_cube")
    mutate(data)
    with pytest.raises(UserInputError) as info:
        arch_from_dict(data, "broken.yaml")
    assert info.value.key == key
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_unused_entries_are_reported_not_rejected(tmp_path, run_cli):
    data = _data("edge_npu_int8")  # INT only: no fp8 rate, no early-bird unit
    entry = dict(data["energy"]["compute"]["mac_int8"])
    data["energy"]["compute"]["mac_fp8"] = entry
    data["energy"]["early_bird"] = {"compare": dict(data["energy"]["vector"]["op"])}
    arch = arch_from_dict(data, "extra.yaml")
    expected = ["energy.compute.mac_fp8", "energy.early_bird.compare"]
    assert arch.unused_energy_entries == expected
    code, out, err = run_cli(["arch", "show", _dump(tmp_path, data)])
    assert code == 0 and '"node_nm": 7' in out
    assert "energy entries nothing uses" in err and "energy.compute.mac_fp8" in err


def test_entries_of_a_component_the_architecture_lacks_are_rejected(tmp_path, run_cli):
    """Not merely unused: a component name that is neither a memory level nor a unit is a
    typo or a stale file (an unknown key)."""
    data = _data("edge_npu_int8")
    data["energy"]["NPU_cache"] = {"read": dict(data["energy"]["DRAM"]["read"])}
    code, _, err = run_cli(["arch", "show", _dump(tmp_path, data)])
    assert code == 2 and "energy.NPU_cache: no such component" in err
    assert "DRAM" in err  # the components it could have meant


def test_rate_zero_makes_the_mac_unused():
    data = _data("ascend_like_cube")
    data["compute"]["rates"]["fp4"] = 0
    arch = arch_from_dict(data, "rates.yaml")
    assert arch.unused_energy_entries == ["energy.compute.mac_fp4"]
