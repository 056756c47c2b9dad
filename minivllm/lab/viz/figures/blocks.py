"""KV block map (§11.5, §11.8.1): one cell per KV block of the pool, as BlockPool.snapshot() sees it.

Colours: grey = free (no hash: empty), green-blue = free but still cached (its hash keeps it
findable until it is popped for reuse: lazy eviction), blue = in use by one request, green =
shared (ref_cnt > 1: a prefix hit), purple = the null block 0. Hover shows the block's
owners, ref_cnt, hash and its hash-chain neighbours (the owner's previous and next block:
a block's hash is chained to its parent's, so equal hashes mean equal prefixes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from minivllm.lab.viz.figures.theme import OKABE_ITO, legend_swatch, message_figure, style
from minivllm.metrics.trace import EngineTrace

CATEGORIES = ("null", "free", "cached, free", "in use", "shared")
CATEGORY_COLOURS = (OKABE_ITO["reddish_purple"], "#bbbbbb", OKABE_ITO["sky_blue"], OKABE_ITO["blue"], "#009E73")


def _colorscale() -> list[list]:
    """A discrete colour scale: code i (0..4) gets exactly CATEGORY_COLOURS[i]."""
    n = len(CATEGORIES)
    scale = []
    for i, colour in enumerate(CATEGORY_COLOURS):
        scale += [[i / n, colour], [(i + 1) / n, colour]]
    return scale


def category(block: Mapping[str, Any]) -> int:
    """Index into CATEGORIES for one snapshot entry."""
    if block.get("null"):
        return 0
    if block["free"]:
        return 2 if block["hash"] is not None else 1
    return 4 if block["ref_cnt"] > 1 else 3


LABEL_LIMIT = 256  # pools up to this size get the block id written in each cell
MIN_CELL_PX = (24, 8)  # narrowest cell, with a label (a 3-digit id at font size 10) and without
MARGIN_X_PX = 70 + 30 + 45  # style()'s left and right margins, plus the row labels and their axis title
MARGIN_Y_PX = 95 + 55 + 20  # style()'s top (title, legend) and bottom margins, plus the x axis title


def default_columns(num_blocks: int) -> int:
    return 16 if num_blocks <= 256 else 32 if num_blocks <= 1024 else 64


def fitted_columns(num_blocks: int, width: int) -> int:
    """Columns of a block map ``width`` px wide: ``default_columns``, fewer where a cell would be narrower than
    ``MIN_CELL_PX``; the blocks wrap into as many rows as they need."""
    min_cell = MIN_CELL_PX[0] if num_blocks <= LABEL_LIMIT else MIN_CELL_PX[1]
    return max(1, min(default_columns(num_blocks), (width - MARGIN_X_PX) // min_cell))


def fitted_height(num_blocks: int, width: int, ncols: int) -> int:
    """Height that gives square cells across the whole plot width (at most 900 px: then the cells shrink)."""
    cell = (width - MARGIN_X_PX) / ncols
    return min(900, round(MARGIN_Y_PX + cell * math.ceil(num_blocks / ncols)))


@dataclass
class BlockMapData:
    """The grid behind the heatmap: ``z[row][col]`` is a category code, None past the last block."""

    z: list[list[int | None]]
    text: list[list[str]]  # the label drawn in the cell (the block id)
    hover: list[list[str]]
    counts: dict[str, int]  # blocks per category
    owners: dict[int, list[str]]  # block id -> requests whose block table holds it


def _short_hash(h: int | None) -> str:
    return "none" if h is None else f"{h & 0xFFFFFFFF:08x}"


def block_map_data(
    snapshot: Sequence[Mapping[str, Any]],
    block_tables: Mapping[str, Sequence[int]] | None = None,
    ncols: int | None = None,
) -> BlockMapData:
    """Cells, labels and hover text for a block-pool snapshot (and, optionally, the block tables)."""
    ncols = ncols or default_columns(len(snapshot))
    nrows = max(1, math.ceil(len(snapshot) / ncols))
    owners: dict[int, list[str]] = {}
    chain: dict[int, list[str]] = {}  # block id -> "req: #prev -> #this -> #next" lines
    for req_id, ids in (block_tables or {}).items():
        for i, b in enumerate(ids):
            owners.setdefault(b, []).append(req_id)
            prev = f"#{ids[i - 1]}" if i else "root"
            nxt = f"#{ids[i + 1]}" if i + 1 < len(ids) else "end"
            chain.setdefault(b, []).append(f"{req_id}[{i}]: {prev} → #{b} → {nxt}")
    z: list[list[int | None]] = [[None] * ncols for _ in range(nrows)]
    text = [[""] * ncols for _ in range(nrows)]
    hover = [[""] * ncols for _ in range(nrows)]
    counts = dict.fromkeys(CATEGORIES, 0)
    for i, block in enumerate(snapshot):
        r, c = divmod(i, ncols)
        code = category(block)
        counts[CATEGORIES[code]] += 1
        b = block["block_id"]
        z[r][c], text[r][c] = code, str(b)
        lines = [f"block {b}: {CATEGORIES[code]}", f"ref_cnt {block['ref_cnt']}, hash {_short_hash(block['hash'])}"]
        if b in owners:
            lines.append("owners: " + ", ".join(owners[b]))
            lines += ["chain " + line for line in chain[b][:4]]
        elif code == 2:
            lines.append("no owner: a later request with this prefix can hit it")
        hover[r][c] = "<br>".join(lines)
    return BlockMapData(z, text, hover, counts, owners)


def highlight_xy(block_ids: Sequence[int], ncols: int) -> tuple[list[int], list[int]]:
    """Cell centres (column, row) of ``block_ids`` in a grid of ``ncols`` columns."""
    return [b % ncols for b in block_ids], [b // ncols for b in block_ids]


def kv_block_map(
    snapshot: Sequence[Mapping[str, Any]] | None,
    block_tables: Mapping[str, Sequence[int]] | None = None,
    title: str | None = None,
    ncols: int | None = None,
    height: int | None = None,
    highlight: Sequence[int] = (),
    highlight_name: str = "selected blocks",
    width: int | None = None,
) -> go.Figure:
    """One cell per KV block, coloured free / cached-and-free / in use / shared; hover for details.
    ``highlight`` block ids get an outline (trace 1, always present, so widgets can move it).
    With ``width`` (px) the figure is that wide and its columns and height come from the number of blocks
    (``fitted_columns``, ``fitted_height``): every block is drawn inside it, however large the pool."""
    title = title or "KV block map (§11.5)"
    if not snapshot:
        return message_figure(
            "No block-pool snapshot: build the engine with record_block_pool=True (small pools only).", title
        )
    if width is not None:
        ncols = ncols or fitted_columns(len(snapshot), width)
        height = height or fitted_height(len(snapshot), width, ncols)
    data = block_map_data(snapshot, block_tables, ncols)
    nrows, ncols = len(data.z), len(data.z[0])
    fig = go.Figure(
        go.Heatmap(
            z=data.z,
            text=data.text,
            hovertext=data.hover,
            hoverinfo="text",
            texttemplate="%{text}" if len(snapshot) <= LABEL_LIMIT else None,
            textfont=dict(size=10),
            colorscale=_colorscale(),
            zmin=-0.5,
            zmax=len(CATEGORIES) - 0.5,
            showscale=False,
            xgap=2,
            ygap=2,
        )
    )
    hx, hy = highlight_xy(highlight, ncols)
    fig.add_trace(
        go.Scatter(
            x=hx,
            y=hy,
            mode="markers",
            marker=dict(symbol="square-open", size=30 if ncols <= 16 else 14, color=OKABE_ITO["orange"], line_width=3),
            name=highlight_name,
            hoverinfo="skip",
        )
    )
    for name, colour in zip(CATEGORIES, CATEGORY_COLOURS):
        fig.add_trace(legend_swatch(f"{name} ({data.counts[name]})", colour, group=name))
    fig.update_xaxes(
        title=f"block id mod {ncols}",
        showgrid=False,
        zeroline=False,
        dtick=4 if ncols > 16 else 1,
        range=[-0.5, ncols - 0.5],
        constrain="domain",
    )
    fig.update_yaxes(
        title="first block id of the row",
        showgrid=False,
        zeroline=False,
        tickvals=list(range(nrows)),
        ticktext=[str(r * ncols) for r in range(nrows)],
        scaleanchor="x",
        range=[nrows - 0.5, -0.5],
    )
    style(fig, title, height=height or min(900, 170 + (66 if ncols <= 16 else 34) * nrows))
    if width is not None:
        fig.update_layout(width=width)
    return fig


def kv_block_map_at(trace: EngineTrace, step: int, title: str | None = None) -> go.Figure:
    """The KV block map after step ``step`` of a trace recorded with ``record_block_pool=True``."""
    if not trace.steps:
        return message_figure("This trace has no steps: run the engine first.", title or "KV block map (§11.5)")
    s = trace.steps[step]
    return kv_block_map(s.block_pool, s.block_tables, title or f"KV block map after step {s.step} (§11.5)")
