"""Missing-dependency hints name the one extra that installs the module, from a clone."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# distribution name (as pyproject.toml spells it, lower case) -> import name, where they differ
IMPORT_NAME = {
    "pyyaml": "yaml",
    "nvidia-ml-py": "pynvml",
    "pydantic-settings": "pydantic_settings",
    "prometheus-client": "prometheus_client",
}


def test_every_module_is_installed_by_the_extra_the_hint_names() -> None:
    from syncplan.extras import EXTRA_OF_MODULE

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for module, extra in EXTRA_OF_MODULE.items():
        names = {re.split(r"[<>=\[ ;]", r, maxsplit=1)[0].lower() for r in extras[extra]}
        assert module in {IMPORT_NAME.get(n, n) for n in names}, (module, extra)


def test_the_cli_names_the_extra_and_a_clone_install(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None; from syncplan.cli import main; "
        f"sys.exit(main(['draw', 'topology', 'examples/demo.json', '-o', '{tmp_path}/t.png']))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        "syncplan draw: error: missing dependency 'matplotlib'; install it with: "
        "pip install -e '.[plot]'"
    ]


def test_torch_hint_installs_the_cpu_build_first() -> None:
    from syncplan.extras import install_hint

    hint = install_hint("torch.distributed")
    assert hint.index("--index-url https://download.pytorch.org/whl/cpu") < hint.index(
        "pip install -e '.[executor]'"
    )
    assert "syncplan[" not in install_hint("nothing_known")


def test_no_doc_installs_the_unpublished_package() -> None:
    texts = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "deploy").rglob("*")]
    bad = []
    for path in texts:
        if path.is_file():
            for m in re.finditer(r"pip install ['\"]?syncplan\b", path.read_text(errors="replace")):
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert not bad, bad


def test_dockerfiles_ship_the_license() -> None:
    for dockerfile in (ROOT / "deploy" / "docker").glob("*Dockerfile"):
        text = dockerfile.read_text()
        assert re.search(r"^COPY .*\bLICENSE\b", text, re.M), dockerfile.name
        assert "/usr/share/licenses/syncplan/LICENSE" in text, dockerfile.name


def test_systemd_units_need_no_account_nobody_creates() -> None:
    for unit in (ROOT / "deploy").glob("*.service"):
        text = unit.read_text()
        assert "DynamicUser=yes" in text or not re.search(r"^User=", text, re.M), unit.name
