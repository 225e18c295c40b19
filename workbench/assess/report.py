"""The report: verdict first (what runs, what must change, what it saves), then the evidence. Markdown, HTML
(self-contained, no scripts) and JSON from one data dict."""

from __future__ import annotations

import html
import json
from pathlib import Path

from tpu_workbench.bench.assess.torchtpu_gaps import SOURCE


def _money(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"${v:,.2f}" if abs(v) >= 1 else f"${v:.3g}"


def _num(v: float | None, digits: int = 3) -> str:
    return "n/a" if v is None else f"{v:.{digits}g}"


def _cost_lines(c: dict, unit: str) -> list[str]:
    band = c["error_band"]
    out = [
        f"Projected ({c['model']}); {c['chips']} chips each, {c['tokens']:.3g} training {unit}s, price kind "
        f"{c['price_kind'] or 'none in common'}.",
        "",
        f"| chip | {unit}s/s per chip | time | $/M {unit}s | $ for the run | price (tier, source, date) |",
        "|---|---|---|---|---|---|",
    ]
    for r in c["rows"]:
        out.append(
            f"| {r['chip']} | {r['tokens_per_s_per_chip']:,.0f} | {r['hours']:.3g} h | {_money(r['usd_per_mtok'])} | "
            f"{_money(r['usd_run'])} | {r['usd_per_chip_hour'] or 'n/a'} $/chip-h ({r['price_tier']}, {r['price_source']}, "
            f"{r['price_date']}) |"
        )
    full = [r for r in c["rows"] if r.get("mfu") is not None]
    if full:
        out += [""] + [
            f"{r['chip']}: MFU {r['mfu']:.2%}, {r['bound']}-bound; the projection counts "
            f"{r['projection_flops_per_token']:,.0f} model FLOPs per token (train) for this config"
            for r in full
        ]
    out += [
        "",
        f"Error band: the projection's validation: {band['within_acceptance']}/{band['validation_points']} published "
        f"points within ±{band['acceptance']:.0%}, largest error {band['max_abs_error']:.0%} — {band['note']}.",
    ]
    return out


def _saving(c: dict | None, unit: str) -> str:
    if not c or len(c["rows"]) < 2 or any(r["usd_run"] is None for r in c["rows"]):
        return "saving: not projected (no FLOP count from a run, or no common price kind)"
    gpu, tpu = c["rows"][0], c["rows"][1]
    pct = 1 - tpu["usd_run"] / gpu["usd_run"]
    word = "saves" if pct > 0 else "costs"
    return (
        f"{tpu['chip']} {word} {abs(pct):.0%} vs {gpu['chip']} for {c['tokens']:.3g} training {unit}s "
        f"({_money(tpu['usd_run'])} vs {_money(gpu['usd_run'])}; projected, band ±{c['error_band']['max_abs_error']:.0%} or worse; "
        + (
            "with the compute term alone this ratio is the chips' peak FLOP/s per dollar, the same for any model)"
            if not c.get("full_projection")
            else "full projection of the observed decoder)"
        )
    )


def markdown(data: dict) -> str:
    v, mig = data["verdict"], data["migration"]
    unit = (data.get("model") or {}).get("unit", "token")
    lines = [
        f"# Assessment of `{data['path']}`",
        "",
        f"**Verdict (exit {v['exit_status']}): {v['headline']}.**",
        "",
        f"- {_saving(data['cost'], unit)}",
        f"- estimated porting effort: {mig['effort_min']:.0f} min ({mig['effort_basis']})",
    ]
    if v.get("missing_ops"):
        lines.append(f"- ops missing on tpu here: {', '.join(v['missing_ops'])}")
    if v.get("torchtpu_020_gaps"):
        lines.append(
            f"- ops the run used that TorchTPU 0.2.0 does not register: {', '.join(v['torchtpu_020_gaps'])} ({SOURCE})"
        )
    if v.get("fails_on_cpu_too"):
        lines.append(f"- fails on cpu too (not the migration's doing): {', '.join(v['fails_on_cpu_too'])}")
    lines.append(
        f"- your tree unchanged (SHA-256 of every file before and after): {data['user_tree_unchanged']}"
    )
    lines += ["", "## Commands (cpu before the migration, tpu after)", ""]
    if not data["commands"]:
        lines.append(
            "None ran. Proposed (confirm with `--candidates`, or name your own with `--run`/`--tests`):"
        )
        lines += [f"- `{c['command']}` ({c['why']})" for c in data["candidates"]] or ["- none found"]
    for c in data["commands"]:
        first = c["command"].splitlines()[0] if c["command"].strip() else c["command"]
        more = " …" if "\n" in c["command"].strip() else ""
        lines += [f"### `{first}`{more} — {c['outcome']}", ""]
        if more:
            lines += ["```", c["command"], "```", ""]
        for dev in ("cpu", "tpu"):
            r = c.get(dev, {})
            err = f"; first error: `{r['first_error']}`" if r.get("first_error") else ""
            err = (f" ({r['tests']})" if r.get("tests") else "") + err
            lines.append(
                f"- {dev}: {r.get('status')} in {r.get('wall_s', 'n/a')} s{err} (log: {r.get('log', 'n/a')})"
            )
        t = c.get("tpu", {})
        if t.get("missing_ops"):
            lines.append(f"- ops without a tpu lowering: {', '.join(t['missing_ops'])}")
        rc = c["tpu_recompiles"]
        for s in rc["shapes"]:
            lines.append(
                f"- recompiles: `{s['module']}` saw {s['distinct_shapes']} input shapes on tpu (each compiles anew): "
                f"{s['shapes']}"
            )
        for m in rc["dynamo"][:5]:
            lines.append(f"- dynamo: {m}")
        if c.get("aten_ops_used"):
            found = ", ".join(g["op"] for g in c["torchtpu_020_gaps"]) or "none known"
            lines.append(
                f"- ATen overloads its models ran ({c.get('torchtpu_gaps_from', 'cpu run')}): {c['aten_ops_used']}; of "
                "them not runnable on TorchTPU 0.2.0: "
                f"{found} ({SOURCE})"
            )
        if c["on_tpu"] is not None:
            lines.append(f"- model on the tpu: {c['on_tpu']}")
        lines.append("")
    lines += ["## Cost", ""]
    if data["model"]:
        m = data["model"]
        lines.append(
            f"Model `{m['class']}`: {m['parameters']:,} parameters, {m['forward_flops_per_token']:,.0f} forward FLOPs "
            f"per {unit} ({m['provenance']}; a {unit} = "
            + (
                "a token id of its input)."
                if unit == "token"
                else "a row of its float input: it takes no token ids)."
            )
        )
        lines += [""] + _cost_lines(data["cost"], unit)
    else:
        lines.append(
            "Not projected: no run counted a model's FLOPs (no command ran, or no torch model was called)."
        )
    lines += [
        "",
        f"## Migration ({mig['files_scanned']} files scanned, {mig['files_with_findings']} with findings)",
        "",
        "| file | rewrites | warnings | flagged | effort (min) |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {f['path']} | {f['rewritten']} | {f['warned']} | {f['flagged']} | {f['effort_min']:.0f} |"
        for f in mig["files"]
    ]
    lines += [
        "",
        "By rule: " + ", ".join(f"{r['code']} {r['outcome']} x{r['count']}" for r in mig["by_rule"]),
        "",
    ]
    flagged = [(f["path"], x) for f in mig["files"] for x in f["findings"]]
    if flagged:
        lines += ["### Lines to check (warned) or change (flagged) by hand", ""]
        lines += [f"- {p}:{x['line']} {x['code']} {x['message']} — `{x['source']}`" for p, x in flagged[:200]]
    lines += ["", f"Assessed in {data['wall_s']} s."]
    return "\n".join(lines) + "\n"


def to_html(md: str) -> str:
    """A plain, self-contained page: the Markdown's structure (headings, lists, tables) in HTML, escaped."""
    body: list[str] = []
    in_list = in_table = in_code = False
    for raw in md.splitlines():
        line = html.escape(raw)
        if raw.startswith("```"):
            body.append("</pre>" if in_code else "<pre>")
            in_code = not in_code
            continue
        if in_code:
            body.append(line + "\n")
            continue
        if in_list and not raw.startswith("- "):
            body.append("</ul>")
            in_list = False
        if in_table and not raw.startswith("|"):
            body.append("</table>")
            in_table = False
        if raw.startswith("#"):
            level = len(raw) - len(raw.lstrip("#"))
            body.append(f"<h{level}>{html.escape(raw[level:].strip())}</h{level}>")
        elif raw.startswith("- "):
            if not in_list:
                body.append("<ul>")
                in_list = True
            body.append(f"<li>{line[2:]}</li>")
        elif raw.startswith("|"):
            if set(raw) <= set("|-"):
                continue
            if not in_table:
                body.append("<table>")
                in_table = True
            cells = "".join(f"<td>{html.escape(c.strip())}</td>" for c in raw.strip("|").split("|"))
            body.append(f"<tr>{cells}</tr>")
        elif raw.startswith("**"):
            body.append(f'<p class="verdict"><strong>{html.escape(raw.strip("*"))}</strong></p>')
        elif raw.strip():
            body.append(f"<p>{line}</p>")
    body.append("</ul>" if in_list else "")
    body.append("</table>" if in_table else "")
    style = (
        "body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse}"
        "td{border:1px solid #ccc;padding:2px 6px}.verdict{font-size:1.2em;background:#f4f4f4;padding:.5em}"
    )
    return f"<!doctype html><html><head><meta charset='utf-8'><title>assessment</title><style>{style}</style></head><body>{''.join(body)}</body></html>\n"


def write_reports(data: dict, out: Path) -> dict:
    md = markdown(data)
    paths = {
        "markdown": out / "assessment.md",
        "html": out / "assessment.html",
        "json": out / "assessment.json",
    }
    paths["markdown"].write_text(md, encoding="utf-8")
    paths["html"].write_text(to_html(md), encoding="utf-8")
    result = {k: str(v) for k, v in paths.items()}
    paths["json"].write_text(json.dumps({**data, "reports": result}, indent=1, default=str), encoding="utf-8")
    return result
