# Controller side: the picture of a run, one panel per metric across every attempt,
# from the series that the train_metrics module returns (module_utils/logs/metric_series.py).
# matplotlib's Agg canvas, no pyplot (no global state, no display needed).
#
# What a person sees: the joined line over the rollout ids (a resumed attempt continues
# the line), each attempt's span shaded and its start marked "attempt N", gaps where a
# value was nan/inf with a black x at the bottom of the panel, and faint dots for the
# values an attempt logged before a later attempt did those rollouts again.
from __future__ import annotations

import io
import math
import re

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
SHADE = "#000000"
DPI = 100
COLUMNS = 2
PANEL_WIDTH_IN = 6.6
PANEL_HEIGHT_IN = 3.1
HEADER_IN = 1.0
SMOOTH_FROM = 150  # points from which a running mean is drawn over the faint raw values
MARKERS_UP_TO = 60


class PlotUnavailable(RuntimeError):
    pass


def _pass_k(key):
    match = re.search(r"pass@(\d+)$", key)
    return int(match.group(1)) if match else 0


def panels_for(series, extra_metrics=()):
    """[{title, ylabel, keys}] in the order shown. Fixed panels come even when their metric
    is not in the log (they then say so); eval panels come per eval set found."""
    keys = set(series)
    panels = [
        {"title": "Reward (rollout/raw_reward)", "ylabel": "mean raw reward", "keys": ["rollout/raw_reward"]},
        {
            "title": "Pass rate (passrate/pass@k)",
            "ylabel": "pass@k",
            "keys": sorted((k for k in keys if k.startswith("passrate/pass@")), key=_pass_k) or ["passrate/pass@1"],
        },
    ]
    names = sorted({re.sub(r"-pass@\d+$", "", k[len("eval/"):]) for k in keys if re.match(r"^eval/[^/]+$", k)})
    for name in names:
        evals = ["eval/%s" % name] + sorted(
            (k for k in keys if re.match(r"^eval/%s-pass@\d+$" % re.escape(name), k)), key=_pass_k
        )
        panels.append({"title": "Eval %s (eval/%s, pass@k)" % (name, name), "ylabel": "score", "keys": evals,
                       "markers": True})
    if not names:
        panels.append({"title": "Eval (eval/<name>)", "ylabel": "score", "keys": ["eval/"], "markers": True})
    length = next((k for k in ("rollout/response_len/mean", "rollout/response_lengths") if k in keys),
                  "rollout/response_len/mean")
    panels += [
        {"title": "Response length (%s)" % length, "ylabel": "tokens", "keys": [length]},
        {"title": "Rollout throughput (perf/tokens_per_gpu_per_sec)", "ylabel": "tokens/s per GPU",
         "keys": ["perf/tokens_per_gpu_per_sec"]},
        {"title": "Training throughput (perf/actor_train_tok_per_s)", "ylabel": "tokens/s",
         "keys": ["perf/actor_train_tok_per_s"]},
        {"title": "Step time (perf/step_time)", "ylabel": "seconds", "keys": ["perf/step_time"]},
    ]
    for key in extra_metrics:
        panels.append({"title": key, "ylabel": key.rsplit("/", 1)[-1], "keys": [key]})
    return panels


def _value(value):
    if isinstance(value, str):
        return float(value)  # 'nan', 'inf', '-inf'
    return float(value)


def _label(key, panel_keys):
    if len(panel_keys) == 1:
        return key.split("/", 1)[-1]
    return key.rsplit("/", 1)[-1] if key.startswith("passrate/") else key[len("eval/"):]


def smoothing_window(count):
    """Points of the running mean drawn over a long series (None: draw the values as they are)."""
    if count < SMOOTH_FROM:
        return None
    return max(5, int(round(count / 50.0)) | 1)


def running_mean(values, window):
    """Centred running mean over the finite values of each window (nan where a window has none),
    so a gap of one nan does not erase its neighbours' trend and an all-nan stretch stays a gap."""
    import numpy

    data = numpy.asarray(values, dtype=float)
    finite = numpy.isfinite(data)
    sums = numpy.concatenate(([0.0], numpy.cumsum(numpy.where(finite, data, 0.0))))
    counts = numpy.concatenate(([0], numpy.cumsum(finite)))
    half = window // 2
    low = numpy.clip(numpy.arange(len(data)) - half, 0, len(data))
    high = numpy.clip(numpy.arange(len(data)) + half + 1, 0, len(data))
    number = counts[high] - counts[low]
    with numpy.errstate(invalid="ignore", divide="ignore"):
        mean = (sums[high] - sums[low]) / number
    mean[number == 0] = numpy.nan
    mean[~finite] = numpy.nan  # a nan value stays a gap in the mean too
    return mean


def attempt_starts(attempts, axis):
    """[(attempt index, first id)] of the attempts that logged something on that axis."""
    field = "first_step" if axis == "step" else "first_rollout"
    return [(a["index"], a[field]) for a in attempts if a.get(field) is not None]


def attempt_label(attempt):
    """'attempt 2 from iter 19, RUNNING': the attempt, the checkpoint it loaded, its end."""
    text = "attempt %s" % attempt["attempt"] if attempt.get("attempt") is not None else attempt["submission_id"]
    if attempt.get("loaded_iteration"):
        text += " from iter %d" % attempt["loaded_iteration"]
    if attempt.get("status"):
        text += ", %s" % attempt["status"]
    return text


def _draw_attempts(ax, attempts, axis, transform):
    starts = attempt_starts(attempts, axis)
    by_index = {a["index"]: a for a in attempts}
    right = ax.get_xlim()[1]  # computes the data's limits (matplotlib does it lazily) ...
    ax.autoscale(False)  # ... which the spans and labels below must not widen
    for number, (index, first) in enumerate(starts):
        end = starts[number + 1][1] if number + 1 < len(starts) else None
        if number % 2 == 1:
            ax.axvspan(first - 0.5, (end - 0.5) if end is not None else right, color=SHADE, alpha=0.05,
                       linewidth=0)
        if number > 0:
            ax.axvline(first - 0.5, color="#555555", linestyle="--", linewidth=1.0)
        left = max(first - 0.5, ax.get_xlim()[0])
        # every second label one line lower, so that the labels of short attempts do not overlap
        ax.text(left, 0.98 - 0.075 * (number % 2), " " + attempt_label(by_index[index]), transform=transform,
                fontsize=7.5, color="#333333", va="top", ha="left", clip_on=True)


def render_png(series, attempts, title, subtitle="", extra_metrics=()):
    """(png bytes, info): info = {width, height, panels: [{title, keys, bbox, curves:
    [{key, label, color, points, non_finite, superseded}], empty}]}, bbox in pixels of the
    PNG (left, top, right, bottom), so a test can look inside each panel."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.transforms import blended_transform_factory
    except ImportError as exc:
        import sys

        raise PlotUnavailable(
            "matplotlib is not installed in the controller's Python (%s): %s; run ./bootstrap (it is one of "
            "pyproject.toml's dependencies) or pip install matplotlib, or skip the picture with --skip-tags report"
            % (sys.executable, exc)
        ) from exc

    panels = panels_for(series, extra_metrics)
    rows = int(math.ceil(len(panels) / float(COLUMNS)))
    width_in = PANEL_WIDTH_IN * COLUMNS
    height_in = HEADER_IN + PANEL_HEIGHT_IN * rows
    fig = Figure(figsize=(width_in, height_in), dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    fig.suptitle(title, x=0.01, y=1 - 0.18 / height_in, ha="left", fontsize=13, fontweight="bold")
    if subtitle:
        fig.text(0.01, 1 - 0.48 / height_in, subtitle, ha="left", va="top", fontsize=9, color="#333333")
    grid = fig.add_gridspec(rows, COLUMNS, left=0.06, right=0.985, bottom=0.45 / height_in,
                            top=1 - (HEADER_IN + 0.25) / height_in, hspace=0.55, wspace=0.16)
    info = {"panels": []}
    for number, panel in enumerate(panels):
        ax = fig.add_subplot(grid[number // COLUMNS, number % COLUMNS])
        transform = blended_transform_factory(ax.transData, ax.transAxes)
        drawn = []
        axis = "rollout"
        gap_label = "nan/inf (gap)"
        redone_label = "redone after a resume"
        for position, key in enumerate(k for k in panel["keys"] if k in series):
            data = series[key]
            axis = data.get("axis", "rollout")
            color = PALETTE[position % len(PALETTE)]
            xs = [p[0] for p in data["points"]]
            ys = [_value(p[1]) for p in data["points"]]
            ys = [y if math.isfinite(y) else float("nan") for y in ys]
            label = _label(key, panel["keys"])
            window = smoothing_window(len(xs))
            if window:
                # a long noisy run: the raw values faint, their running mean on top
                ax.plot(xs, ys, color=color, linewidth=0.8, alpha=0.3)
                ax.plot(xs, running_mean(ys, window), color=color, linewidth=1.8,
                        label="%s (mean of %d)" % (label, window))
            else:
                # the panel's main metric wider and below the others: eval/<name> is the mean reward, so it
                # often equals eval/<name>-pass@1, which would hide it
                ax.plot(xs, ys, color=color, linewidth=3.2 if position == 0 and len(panel["keys"]) > 1 else 1.8,
                        zorder=1.9 if position == 0 else 2.1, label=label,
                        marker="o" if (panel.get("markers") and len(xs) <= MARKERS_UP_TO) or len(xs) < 3 else None,
                        markersize=4)
            gaps = [p[0] for p in data["points"] if isinstance(p[1], str)]
            if gaps:
                ax.plot(gaps, [0.04] * len(gaps), linestyle="none", marker="x", color="black", markersize=6,
                        transform=transform, label=gap_label, clip_on=False)
                gap_label = "_nolegend_"
            old = [p for p in data.get("superseded") or [] if not isinstance(p[1], str)]
            if old:
                ax.plot([p[0] for p in old], [p[1] for p in old], linestyle="none", marker="o", markersize=3.5,
                        markerfacecolor="none", markeredgecolor=color, alpha=0.55, label=redone_label)
                redone_label = "_nolegend_"
            drawn.append({"key": key, "label": _label(key, panel["keys"]), "color": color, "points": len(xs),
                          "non_finite": len(gaps), "superseded": len(old),
                          "downsampled": data.get("downsampled")})
        title = panel["title"]
        if any(c["downsampled"] for c in drawn):
            every = max(c["downsampled"]["every"] or 1 for c in drawn if c["downsampled"])
            title += " (every %d. point)" % every
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_ylabel(panel["ylabel"], fontsize=8.5)
        ax.set_xlabel("step" if axis == "step" else "rollout", fontsize=8.5)
        ax.tick_params(labelsize=8)
        ax.grid(True, color="#dddddd", linewidth=0.6)
        if drawn:
            _draw_attempts(ax, attempts, axis, transform)
            ax.legend(fontsize=7.5, loc="best", framealpha=0.85)
        else:
            ax.text(0.5, 0.5, "not in the log (yet)", transform=ax.transAxes, ha="center", va="center",
                    fontsize=10, color="#777777")
            ax.set_xticks([])
            ax.set_yticks([])
        info["panels"].append({"title": title, "keys": panel["keys"], "curves": drawn, "empty": not drawn, "ax": ax})
    canvas.draw()
    width, height = canvas.get_width_height()
    for panel in info["panels"]:
        box = panel.pop("ax").get_window_extent()
        panel["bbox"] = [int(box.x0), int(height - box.y1), int(math.ceil(box.x1)), int(math.ceil(height - box.y0))]
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    info.update(width=width, height=height)
    return buffer.getvalue(), info
