"""SCALE-Sim .cfg -> accel-sim Arch conversion and its user errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_sim.arch.scalesim_import import (
    UNLIMITED_BYTES_PER_CYCLE,
    arch_dict_from_scalesim,
    parse_scalesim_cfg,
)
from accel_sim.arch.schema import Arch
from accel_sim.errors import UserInputError

# Layout of SCALE-Sim's own configs/scale.cfg (no [layout]/[sparsity] sections).
CFG = """\
[general]
run_name = scale_example_run_32x32_ws

[architecture_presets]
ArrayHeight:    32
ArrayWidth:     16
IfmapSramSzkB:   64
FilterSramSzkB:  128
OfmapSramSzkB:   32
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : 10
Dataflow : ws
MemoryBanks:   1
ReadRequestBuffer: 512
WriteRequestBuffer: 512

[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "x.cfg"
    path.write_text(text)
    return path


def test_parse_user_cfg(tmp_path: Path) -> None:
    cfg = parse_scalesim_cfg(write(tmp_path, CFG))
    assert cfg["run_name"] == "scale_example_run_32x32_ws"
    assert (cfg["array_rows"], cfg["array_cols"], cfg["dataflow"]) == (32, 16, "ws")
    assert (cfg["ifmap_sram_kb"], cfg["filter_sram_kb"], cfg["ofmap_sram_kb"]) == (64, 128, 32)
    assert cfg["bandwidth_mode"] == "USER" and cfg["bandwidths"] == [10]
    assert cfg["read_request_buffer"] == 512 and cfg["use_ramulator_trace"] is False
    assert cfg["ifmap_sram_bank_bandwidth"] == 10  # no [layout]: defaults to Bandwidth
    assert cfg["sparsity_support"] is False


def test_convert_user_cfg_validates(tmp_path: Path) -> None:
    cfg = parse_scalesim_cfg(write(tmp_path, CFG))
    arch = Arch.model_validate(arch_dict_from_scalesim(cfg, "scalesim_ws"))
    assert arch.name == "scalesim_ws"
    assert arch.compute.kind == "systolic"
    assert (arch.compute.rows, arch.compute.cols, arch.compute.dataflow) == (32, 16, "ws")
    assert arch.compute.drain_overlap is True
    assert [m.name for m in arch.memory] == ["DRAM", "IFMAP_SRAM", "FILTER_SRAM", "OFMAP_SRAM"]
    dram, ifmap, filt, ofmap = arch.memory
    assert dram.read_bytes_per_cycle == 20 and dram.write_bytes_per_cycle == 20
    assert dram.capacity_bytes == 2**40 and set(dram.holds) == {"A", "B", "C"}
    assert (ifmap.holds, filt.holds, ofmap.holds) == (["A"], ["B"], ["C"])
    assert ifmap.capacity_bytes == 64 * 1024 * 2
    assert filt.capacity_bytes == 128 * 1024 * 2 and ofmap.capacity_bytes == 32 * 1024 * 2
    assert arch.vector.bytes_per_cycle == 64
    for component, action in (
        ("compute", "mac_fp16"),
        ("compute", "mac_fp8"),
        ("compute", "mac_fp4"),
        ("compute", "mac_int16"),
        ("compute", "mac_int8"),
        ("compute", "mac_int4"),
        ("vector", "op"),
        ("DRAM", "read"),
        ("DRAM", "write"),
        ("IFMAP_SRAM", "read"),
        ("FILTER_SRAM", "write"),
        ("OFMAP_SRAM", "read"),
        ("chip", "leakage"),
    ):
        assert action in arch.energy[component], (component, action)
    assert arch.energy["compute"]["mac_fp16"].unit == "pJ/MAC"
    assert arch.energy["chip"]["leakage"].unit == "mW"
    assert arch.node_nm == 45 and not arch.unused_energy_entries
    assert arch.energy["DRAM"]["read"].scaling == "none"
    # bigger SRAM costs more per byte
    assert arch.energy["FILTER_SRAM"]["read"].value > arch.energy["OFMAP_SRAM"]["read"].value


def test_convert_calc_cfg_is_unlimited(tmp_path: Path) -> None:
    text = CFG.replace("InterfaceBandwidth: USER", "InterfaceBandwidth: CALC").replace(
        "Bandwidth : 10\n", ""
    )
    cfg = parse_scalesim_cfg(write(tmp_path, text))
    assert cfg["bandwidth_mode"] == "CALC" and cfg["bandwidths"] == []
    arch = Arch.model_validate(arch_dict_from_scalesim(cfg, "calc"))
    assert arch.dram.read_bytes_per_cycle == UNLIMITED_BYTES_PER_CYCLE


def test_word_bytes_option(tmp_path: Path) -> None:
    cfg = parse_scalesim_cfg(write(tmp_path, CFG))
    arch = Arch.model_validate(arch_dict_from_scalesim(cfg, "int8", word_bytes=1))
    assert arch.memory[1].capacity_bytes == 64 * 1024
    assert arch.dram.read_bytes_per_cycle == 10


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="not found"):
        parse_scalesim_cfg(tmp_path / "nope.cfg")


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        ("[run_presets]", "[other]", "[run_presets]", "missing section"),
        ("[architecture_presets]", "[arch]", "[architecture_presets]", "missing section"),
        ("ArrayWidth:     16\n", "", "[architecture_presets] ArrayWidth", "missing key"),
        ("Bandwidth : 10\n", "", "[architecture_presets] Bandwidth", "missing key"),
        ("ArrayHeight:    32", "ArrayHeight: 3x2", "[architecture_presets] ArrayHeight", "integer"),
        ("IfmapSramSzkB:   64", "IfmapSramSzkB: 0", "[architecture_presets] IfmapSramSzkB", ">= 1"),
        ("Dataflow : ws", "Dataflow : rs", "[architecture_presets] Dataflow", "ws, os or is"),
        ("InterfaceBandwidth: USER", "InterfaceBandwidth: FAST", "InterfaceBandwidth", "CALC"),
        ("Bandwidth : 10", "Bandwidth : ten", "[architecture_presets] Bandwidth", "words/cycle"),
        ("UseRamulatorTrace: False", "UseRamulatorTrace: maybe", "UseRamulatorTrace", "True"),
    ],
)
def test_bad_cfg(tmp_path: Path, old: str, new: str, key: str, message: str) -> None:
    assert old in CFG
    path = write(tmp_path, CFG.replace(old, new))
    with pytest.raises(UserInputError, match=message) as info:
        parse_scalesim_cfg(path)
    assert info.value.source == str(path)
    assert info.value.key is not None and key in info.value.key


def test_malformed_cfg(tmp_path: Path) -> None:
    path = write(tmp_path, "this is not = an ini file\n[general\n")
    with pytest.raises(UserInputError, match="malformed"):
        parse_scalesim_cfg(path)


def test_sparsity_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, CFG + "\n[sparsity]\nSparsitySupport: true\n")
    cfg = parse_scalesim_cfg(path)
    with pytest.raises(UserInputError, match="sparsity") as info:
        arch_dict_from_scalesim(cfg, "sparse", source=str(path))
    assert info.value.key == "[sparsity] SparsitySupport"
