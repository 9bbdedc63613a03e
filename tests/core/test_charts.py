"""Charts: one shared style, matplotlib's object-oriented API, no pyplot (moot.core.charts)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import matplotlib
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from moot.core.charts import PALETTE, chart, save_png
from tests.cli.helpers import png_size
from tests.conftest import shared_data

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ("moot", "core", "graphs", "agents", "training")


def test_chart_draws_in_the_style_and_leaves_rcparams_alone(tmp_path: Path) -> None:
    before = matplotlib.rcParams["axes.spines.top"], matplotlib.rcParams["figure.dpi"]
    with chart(5, 3.2, panels=2) as (fig, axes):
        assert isinstance(fig, Figure) and len(axes) == 2
        bars = axes[0].bar(["a", "b"], [1, 2])
        assert to_hex(bars[0].get_facecolor()) == PALETTE[0]  # the shared colour cycle
        assert not axes[1].spines["top"].get_visible()
        save_png(fig, tmp_path / "chart.png")
    assert (matplotlib.rcParams["axes.spines.top"], matplotlib.rcParams["figure.dpi"]) == before
    assert png_size(tmp_path / "chart.png") == (600, 384)  # 5 x 3.2 in at 120 dpi


def test_no_module_imports_pyplot() -> None:
    found = []
    for folder in PACKAGE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [f"{node.module}.{a.name}" for a in node.names]
                if any(n.startswith("matplotlib.pyplot") for n in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_report_charts_render_and_pyplot_is_never_loaded(tmp_path: Path) -> None:
    judged = sorted(shared_data("compqa", "evaluated_summaries", "gpt-4").glob("gpt4_*.json"))
    code = (
        "import sys\n"
        "from moot.cli.main import main\n"
        f"code = main(['report', 'compqa', '--quiet', '--out', {str(tmp_path)!r}, "
        f"'--judged', *{[str(p) for p in judged]!r}])\n"
        "print(code, 'matplotlib.pyplot' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.stdout.split() == ["0", "False"], result.stderr
    assert png_size(tmp_path / "chart.png") == (720, 504)  # 6 x 4.2 in: one generator
    # 9 in wide; 1.2 in + 0.32 in per row: the 4 scenarios of gpt4
    assert png_size(tmp_path / "heatmap.png") == (1080, int((1.2 + 0.32 * 4) * 120))
