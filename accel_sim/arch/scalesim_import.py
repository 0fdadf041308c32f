"""Import a SCALE-Sim v3 ``.cfg`` as an accel-sim architecture.

SCALE-Sim's own parser (``scalesim/scale_config.py``, v3.0.0) reads, with Python's
:mod:`configparser` (keys case-insensitive, section names case-sensitive)::

    [general]              run_name
    [architecture_presets] ArrayHeight, ArrayWidth, IfmapSramSzkB, FilterSramSzkB,
                           OfmapSramSzkB, IfmapOffset, FilterOffset, OfmapOffset, Dataflow,
                           ReadRequestBuffer, WriteRequestBuffer, Bandwidth (USER mode only)
    [run_presets]          InterfaceBandwidth (CALC | USER), UseRamulatorTrace
    [layout]               IfmapCustomLayout, IfmapSRAMBankBandwidth, IfmapSRAMBankNum, ...
    [sparsity]             SparsitySupport, SparseRep, OptimizedMapping, BlockSize, ...

SCALE-Sim 3.0.0 insists on every one of them, but its own shipped ``configs/*.cfg`` omit
``[layout]``/``[sparsity]`` and older ones the request buffers; here only the keys that shape
the architecture are required (array, SRAM sizes, dataflow, bandwidth mode, and Bandwidth in
USER mode); the rest default to SCALE-Sim's built-in defaults.

Units: SCALE-Sim counts *words* and calls 1 word = 1 byte internally (an ``X`` kB SRAM holds
``1024·X`` words; Bandwidth is words/cycle). accel-sim counts bytes, so the conversion uses
``word_bytes`` = 2 (FP16): SRAM capacity = ``1024·X·2`` bytes (the same number of words fits),
DRAM bandwidth = Bandwidth · 2 bytes/cycle.
"""

from __future__ import annotations

import configparser
import math
from pathlib import Path
from typing import Any

from accel_sim.errors import UserInputError

#: Bytes per SCALE-Sim word (FP16 operands).
WORD_BYTES = 2
#: Bandwidth standing in for "unlimited" (CALC mode is stall-free; SCALE-Sim never limits SRAM
#: port bandwidth), bytes/cycle.
UNLIMITED_BYTES_PER_CYCLE = 1e9
#: DRAM capacity of the converted arch, bytes (SCALE-Sim's DRAM is unbounded).
DRAM_CAPACITY_BYTES = 2**40
#: SCALE-Sim has no clock; converted archs run at this frequency, Hz.
DEFAULT_CLOCK_HZ = 1e9
#: SCALE-Sim has no technology node; converted archs state 45 nm, the node of the Horowitz
#: numbers their energy table is built from, so the table is used unscaled. Pass ``node_nm`` to
#: :func:`arch_dict_from_scalesim` (or edit the YAML) to scale it to another node.
DEFAULT_NODE_NM = 45
#: Vector unit of the converted arch (SCALE-Sim has none), bytes/cycle.
VECTOR_BYTES_PER_CYCLE = 64

SRAM_LEVELS = (("IFMAP_SRAM", "ifmap_sram_kb", "A"), ("FILTER_SRAM", "filter_sram_kb", "B"))
OFMAP_LEVEL = ("OFMAP_SRAM", "ofmap_sram_kb", "C")

H14 = "Horowitz, 'Computing's energy problem', ISSCC 2014, 45 nm"


def _sec(config: configparser.ConfigParser, section: str, path: str) -> configparser.SectionProxy:
    if not config.has_section(section):
        raise UserInputError(path, "missing section", f"[{section}]")
    return config[section]


def _get(
    config: configparser.ConfigParser, section: str, key: str, path: str, default: str | None
) -> str:
    if config.has_section(section) and config.has_option(section, key):
        return config.get(section, key).strip()
    if default is None:
        _sec(config, section, path)
        raise UserInputError(path, "missing key", f"[{section}] {key}")
    return default


def _int(
    config: configparser.ConfigParser,
    section: str,
    key: str,
    path: str,
    default: int | None = None,
    minimum: int = 1,
) -> int:
    raw = _get(config, section, key, path, None if default is None else str(default))
    try:
        value = int(raw)
    except ValueError:
        raise UserInputError(
            path, f"expected an integer >= {minimum}, got {raw!r}", f"[{section}] {key}"
        ) from None
    if value < minimum:
        raise UserInputError(
            path, f"expected an integer >= {minimum}, got {value}", f"[{section}] {key}"
        )
    return value


def _bool(
    config: configparser.ConfigParser, section: str, key: str, path: str, default: bool
) -> bool:
    raw = _get(config, section, key, path, str(default)).lower()
    if raw not in ("true", "false"):
        raise UserInputError(path, f"expected True or False, got {raw!r}", f"[{section}] {key}")
    return raw == "true"


def parse_scalesim_cfg(path: str | Path) -> dict[str, Any]:
    """Read a SCALE-Sim v3 ``.cfg`` into a flat dict (sizes in kB, bandwidths in words/cycle).

    Returns keys: ``run_name``, ``array_rows``, ``array_cols``, ``ifmap_sram_kb``,
    ``filter_sram_kb``, ``ofmap_sram_kb``, ``ifmap_offset``, ``filter_offset``,
    ``ofmap_offset``, ``dataflow`` (ws|os|is), ``bandwidth_mode`` (CALC|USER),
    ``bandwidths`` (list of words/cycle, empty in CALC mode), ``read_request_buffer``,
    ``write_request_buffer``, ``use_ramulator_trace``, ``ifmap_sram_bank_bandwidth``,
    ``filter_sram_bank_bandwidth`` (words/cycle; what SCALE-Sim 3.0.0 really uses as the
    IFMAP/filter DRAM fill rate in USER mode), ``sparsity_support``.

    Raises:
        UserInputError: missing file, malformed cfg, missing section/key or bad value.
    """
    p = Path(path)
    src = str(path)
    if not p.is_file():
        raise UserInputError(src, "SCALE-Sim config file not found")
    config = configparser.ConfigParser(interpolation=None)
    try:
        config.read_string(p.read_text(encoding="utf-8"), source=src)
    except (configparser.Error, UnicodeDecodeError, OSError) as err:
        detail = str(err).splitlines()[0]
        raise UserInputError(src, f"malformed SCALE-Sim config: {detail}") from None

    arch = "architecture_presets"
    _sec(config, arch, src)
    dataflow = _get(config, arch, "Dataflow", src, None).lower()
    if dataflow not in ("ws", "os", "is"):
        raise UserInputError(src, f"expected ws, os or is, got {dataflow!r}", f"[{arch}] Dataflow")
    mode = _get(config, "run_presets", "InterfaceBandwidth", src, None).upper()
    if mode not in ("CALC", "USER"):
        raise UserInputError(
            src, f"expected CALC or USER, got {mode!r}", "[run_presets] InterfaceBandwidth"
        )
    bandwidths: list[int] = []
    if mode == "USER":
        raw = _get(config, arch, "Bandwidth", src, None)
        try:
            bandwidths = [int(x) for x in raw.split(",") if x.strip()]
        except ValueError:
            bandwidths = []
        if not bandwidths or min(bandwidths) < 1:
            raise UserInputError(
                src,
                f"expected comma-separated words/cycle >= 1, got {raw!r}",
                f"[{arch}] Bandwidth",
            )
    default_bank_bw = bandwidths[0] if bandwidths else 10
    return {
        "run_name": _get(config, "general", "run_name", src, p.stem),
        "array_rows": _int(config, arch, "ArrayHeight", src),
        "array_cols": _int(config, arch, "ArrayWidth", src),
        "ifmap_sram_kb": _int(config, arch, "IfmapSramSzkB", src),
        "filter_sram_kb": _int(config, arch, "FilterSramSzkB", src),
        "ofmap_sram_kb": _int(config, arch, "OfmapSramSzkB", src),
        "ifmap_offset": _int(config, arch, "IfmapOffset", src, 0, minimum=0),
        "filter_offset": _int(config, arch, "FilterOffset", src, 10000000, minimum=0),
        "ofmap_offset": _int(config, arch, "OfmapOffset", src, 20000000, minimum=0),
        "dataflow": dataflow,
        "bandwidth_mode": mode,
        "bandwidths": bandwidths,
        "read_request_buffer": _int(config, arch, "ReadRequestBuffer", src, 60),
        "write_request_buffer": _int(config, arch, "WriteRequestBuffer", src, 60),
        "use_ramulator_trace": _bool(config, "run_presets", "UseRamulatorTrace", src, False),
        "ifmap_sram_bank_bandwidth": _int(
            config, "layout", "IfmapSRAMBankBandwidth", src, default_bank_bw
        ),
        "filter_sram_bank_bandwidth": _int(
            config, "layout", "FilterSRAMBankBandwidth", src, default_bank_bw
        ),
        "sparsity_support": _bool(config, "sparsity", "SparsitySupport", src, False),
    }


def _sram_pj_per_byte(capacity_bytes: int) -> tuple[float, str]:
    """Horowitz 45 nm SRAM read/write energy per byte, log-log interpolated on capacity."""
    points = [(8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0)]  # bytes, pJ/64 bit
    cap = min(max(capacity_bytes, points[0][0]), points[-1][0])
    for (c0, e0), (c1, e1) in zip(points, points[1:], strict=False):
        if cap <= c1:
            t = math.log(cap / c0) / math.log(c1 / c0)
            pj_64b = math.exp(math.log(e0) + t * math.log(e1 / e0))
            break
    per_byte = round(pj_64b / 8, 3)
    note = (
        f"[H14] SRAM 64-bit access 8 KB 10 pJ / 32 KB 20 pJ / 1 MB 100 pJ, log-interpolated "
        f"(clamped) at {capacity_bytes} B = {pj_64b:.1f} pJ/64 bit"
    )
    return per_byte, note


def _energy_table(levels: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """The ``energy:`` table by component then action (``docs/energy.md``): [H14] numbers at
    45 nm, scaled to the arch's ``node_nm``; MACs add at the accumulator width (INT 32-bit, FP
    FP32); DRAM is [H14]'s DDR3-era device figure, not node-scaled."""

    def e(value: float, unit: str, source: str, scaling: str = "logic") -> dict[str, Any]:
        if scaling == "none":
            return {"value": value, "unit": unit, "scaling": scaling, "source": source}
        return {"value": value, "unit": unit, "node_nm": 45, "scaling": scaling, "source": source}

    fp_add = "+ FP32 add 0.9 (accumulates in FP32)"
    int_add = "+ INT32 add 0.1 (accumulates in 32-bit)"
    dram = (
        "[H14] DRAM 1.3-2.6 nJ per 64-bit access; 640 pJ per 32 bits (its low end, as Han et al. "
        f"2016 quote it) = 160 pJ/byte, a DDR3-class device; {H14}"
    )
    table: dict[str, dict[str, dict[str, Any]]] = {
        "compute": {
            "mac_fp16": e(2.0, "pJ/MAC", f"[H14] FP16 mult 1.1 {fp_add}; {H14}"),
            "mac_bf16": e(1.482, "pJ/MAC", f"derived from [H14]: mult 1.1*(8/11)^2 {fp_add}"),
            "mac_fp8": e(1.045, "pJ/MAC", f"derived from [H14]: mult 1.1*(4/11)^2 {fp_add}"),
            "mac_fp4": e(0.936, "pJ/MAC", f"derived from [H14]: mult 1.1*(2/11)^2 {fp_add}"),
            "mac_int16": e(0.9, "pJ/MAC", f"derived from [H14]: mult 0.2*(16/8)^2 {int_add}"),
            "mac_int8": e(0.3, "pJ/MAC", f"[H14] INT8 mult 0.2 {int_add}"),
            "mac_int4": e(0.15, "pJ/MAC", f"derived from [H14]: mult 0.2*(4/8)^2 {int_add}"),
        },
        "vector": {"op": e(0.4, "pJ/op", "[H14] FP16 add 0.4 pJ per element operation")},
        levels[0]["name"]: {
            "read": e(160.0, "pJ/byte", dram + "; not node-scaled", "none"),
            "write": e(160.0, "pJ/byte", dram + "; write = read; not node-scaled", "none"),
        },
        "chip": {"leakage": e(0.0, "mW", "assumption: SCALE-Sim models no static power", "none")},
    }
    for level in levels[1:]:
        per_byte, note = _sram_pj_per_byte(level["capacity_bytes"])
        table[level["name"]] = {
            "read": e(per_byte, "pJ/byte", note, "sram"),
            "write": e(per_byte, "pJ/byte", note + "; write = read", "sram"),
        }
    return table


def arch_dict_from_scalesim(
    cfg: dict[str, Any],
    name: str,
    *,
    word_bytes: int = WORD_BYTES,
    clock_hz: float = DEFAULT_CLOCK_HZ,
    node_nm: int = DEFAULT_NODE_NM,
    source: str = "<scalesim cfg>",
) -> dict[str, Any]:
    """Build an :class:`accel_sim.arch.schema.Arch`-shaped dict from :func:`parse_scalesim_cfg`.

    * compute: systolic ``ArrayHeight × ArrayWidth``, the cfg's dataflow, ``drain_overlap``
      True (SCALE-Sim's timing, see ``engine/systolic_timing.py``).
    * memory (outermost first): ``DRAM`` (2**40 B, holds A, B, C) with read/write bandwidth
      ``Bandwidth[0] · word_bytes`` bytes/cycle in USER mode, else
      :data:`UNLIMITED_BYTES_PER_CYCLE` (CALC mode is stall-free); then ``IFMAP_SRAM`` (A),
      ``FILTER_SRAM`` (B), ``OFMAP_SRAM`` (C), each ``kB · 1024 · word_bytes`` bytes,
      double-buffered, unlimited bandwidth (SCALE-Sim does not model SRAM ports).
    * clock ``clock_hz`` (SCALE-Sim has none), vector unit 64 bytes/cycle, technology node
      ``node_nm`` (default :data:`DEFAULT_NODE_NM` = 45), energy table after Horowitz (ISSCC
      2014, 45 nm) scaled to that node (``docs/energy.md``).

    Raises:
        UserInputError: the cfg enables sparsity, which accel-sim does not model.
    """
    if cfg.get("sparsity_support"):
        raise UserInputError(
            source, "SCALE-Sim sparsity is not modelled by accel-sim", "[sparsity] SparsitySupport"
        )
    user = cfg["bandwidth_mode"] == "USER"
    dram_bw = cfg["bandwidths"][0] * word_bytes if user else UNLIMITED_BYTES_PER_CYCLE
    memory: list[dict[str, Any]] = [
        {
            "name": "DRAM",
            "capacity_bytes": DRAM_CAPACITY_BYTES,
            "read_bytes_per_cycle": dram_bw,
            "write_bytes_per_cycle": dram_bw,
            "latency_cycles": 0,
            "holds": ["A", "B", "C"],
            "buffers": 2,
        }
    ]
    for level_name, key, operand in (*SRAM_LEVELS, OFMAP_LEVEL):
        memory.append(
            {
                "name": level_name,
                "capacity_bytes": cfg[key] * 1024 * word_bytes,
                "read_bytes_per_cycle": UNLIMITED_BYTES_PER_CYCLE,
                "write_bytes_per_cycle": UNLIMITED_BYTES_PER_CYCLE,
                "latency_cycles": 0,
                "holds": [operand],
                "buffers": 2,
            }
        )
    bw_text = f"USER {cfg['bandwidths'][0]} words/cycle" if user else "CALC (unlimited bandwidth)"
    return {
        "name": name,
        "description": (
            f"Converted from SCALE-Sim cfg '{cfg['run_name']}': "
            f"{cfg['array_rows']}x{cfg['array_cols']} {cfg['dataflow'].upper()}, SRAM "
            f"{cfg['ifmap_sram_kb']}/{cfg['filter_sram_kb']}/{cfg['ofmap_sram_kb']} kB "
            f"(ifmap/filter/ofmap), {bw_text}; {word_bytes} bytes per SCALE-Sim word"
        ),
        "clock_hz": clock_hz,
        "node_nm": node_nm,
        "compute": {
            "kind": "systolic",
            "rows": cfg["array_rows"],
            "cols": cfg["array_cols"],
            "dataflow": cfg["dataflow"],
            "drain_overlap": True,
        },
        "vector": {"bytes_per_cycle": VECTOR_BYTES_PER_CYCLE},
        "memory": memory,
        "energy": _energy_table(memory),
    }


def write_arch_from_scalesim(config_path: str | Path, output_path: str | Path) -> Path:
    """``accel-sim arch from-scalesim CONFIG.cfg -o arch.yaml``: convert, validate, write."""
    import yaml

    from accel_sim.arch.load import arch_from_dict
    from accel_sim.report.io import atomic_write_text, check_output_path

    output = check_output_path(output_path, (".yaml", ".yml"), "-o")
    cfg = parse_scalesim_cfg(config_path)
    data = arch_dict_from_scalesim(cfg, Path(config_path).stem, source=str(config_path))
    arch_from_dict(data, str(config_path))  # validate before writing anything
    header = f"# Converted by accel-sim from the SCALE-Sim v3 config {Path(config_path).name}\n"
    atomic_write_text(output, header + yaml.safe_dump(data, sort_keys=False))
    return output
